"""Load test: many people open the app at once and really use it, against a local server only.

Starts `streamlit run app.py` on a free loopback port (or uses --url, which must be a loopback
address), then drives N concurrent sessions from one headless Chromium (one browser context each):

- every session opens Explore on a model, types an input, and steps through decoding with "Next",
  for a few rounds of fresh inputs;
- session 0 also goes to the Train page and starts a training run with the page's defaults, which
  keeps training (in a process of its own) while the others explore; it is stopped at the end. With the
  protocol client the training is a session of its own, started before the burst: its steps per second
  alone (--solo-seconds) and during the burst are reported.

Measured: per-interaction wall time from the click (or key press) until the page shows the result and
the script is idle again (p50 / p95 / max per kind), errors (a failed load or timeout, a traceback or
st.exception on a page, an st.error alert, a dropped connection), sessions held (still connected and
showing their last step at the end), and peak memory (VmRSS, sampled every 0.25 s from /proc) of the
server process alone and of its child processes (training jobs) apart.

Two clients: `--client chromium` (default) renders every page in a real browser, which is the
truest test but costs the client far more CPU than the server: on a small shared machine the
browser, not the app, is then what is measured. `--client protocol` speaks Streamlit's own
websocket protocol (the messages the browser sends: a rerun with the widget states of the typed
input or the clicked button, and the page's fragment for "Next") and renders nothing, so N sessions
load the server exactly as N browsers would, without N browsers competing for the same cores.

The run is bounded: at most 50 sessions, each wait at most --op-timeout seconds, and the whole run at
most --time-limit seconds. Only loopback addresses are ever contacted.

    python benchmarks/load_test.py                      # 20 browser sessions, prints a table
    python benchmarks/load_test.py --client protocol    # 20 sessions without rendering
    python benchmarks/load_test.py --sessions 5 --json runs/load.json
    python benchmarks/load_test.py --url http://127.0.0.1:8501 --server-pid 1234

Models: the shipped checkpoints in pretrained/ when there are any; otherwise untrained stand-ins of
the shipped sizes are written to a temporary folder (same work per interaction, meaningless outputs).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_support import CHROMIUM, CHROMIUM_ARGS, free_port, streamlit_command  # noqa: E402
from browser_support import _healthy as healthy  # noqa: E402

MAX_SESSIONS = 50
CONNECTION_WORDS = re.compile(r"websocket|connection|ping|disconnect", re.IGNORECASE)

# The page is done when the script is idle and the expected text is on it (the previous run's page
# does not count: Streamlit keeps it on screen while the next run is under way).
DONE_JS = """([want, query, idle]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || (idle && app.getAttribute('data-test-script-state') !== 'notRunning')) return false;
    if (query && !decodeURIComponent(location.search.replace(/\\+/g, ' ')).includes(query)) return false;
    return document.body.innerText.includes(want);
}"""
PROBLEMS_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return {
        exceptions: document.querySelectorAll('[data-testid="stException"]').length,
        errors: Array.from(document.querySelectorAll('[data-testid="stAlertContentError"]')).map(e => e.innerText),
        traceback: document.body.innerText.includes('Traceback'),
        connection: app ? app.getAttribute('data-test-connection-state') : 'no app',
    };
}"""


# --- what we measure --------------------------------------------------------------------------------

@dataclass
class Session:
    index: int
    timings: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    completed: bool = False
    held: bool = False
    training: str = ""
    console: list[str] = field(default_factory=list)  # the browser's messages about its connection

    def record(self, kind: str, seconds: float) -> None:
        self.timings.setdefault(kind, []).append(seconds)


class MemorySampler(threading.Thread):
    """Peak VmRSS of a process and its descendants, from /proc every `interval` seconds: the server alone
    (`server_peak_kb`), its child processes (training jobs and the forkserver that starts them,
    `children_peak_kb`) and both together (`peak_kb`)."""

    def __init__(self, pid: int | None, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_kb = self.server_peak_kb = self.children_peak_kb = 0
        self.samples: list[tuple[float, int]] = []
        self._halt = threading.Event()

    @staticmethod
    def _vmrss(pid: int) -> int:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def rss_kb(self) -> int:
        if self.pid is None:
            return 0
        server = self._vmrss(self.pid)
        children = sum(self._vmrss(pid) for pid in tree(self.pid) if pid != self.pid)
        self.server_peak_kb = max(self.server_peak_kb, server)
        self.children_peak_kb = max(self.children_peak_kb, children)
        return server + children

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far by the process and its descendants."""
        if self.pid is None:
            return float("nan")
        ticks, hz = 0, os.sysconf("SC_CLK_TCK")
        for pid in tree(self.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
            except (OSError, IndexError, ValueError):
                pass
        return ticks / hz

    def run(self) -> None:
        started = time.monotonic()
        while not self._halt.is_set():
            kb = self.rss_kb()
            self.samples.append((round(time.monotonic() - started, 2), kb))
            self.peak_kb = max(self.peak_kb, kb)
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def tree(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# --- the server -------------------------------------------------------------------------------------

def require_loopback(url: str) -> str:
    """The URL, if it points at this machine; SystemExit otherwise."""
    parsed = urlparse(url)
    host = parsed.hostname or ""
    ok = host == "localhost"
    try:
        ok = ok or ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if parsed.scheme not in ("http", "https") or not ok:
        raise SystemExit(f"error: refusing {url!r}: the load test only runs against a loopback address "
                         "(127.0.0.1, ::1, localhost)")
    return url.rstrip("/")


def stand_in_models(folder: Path) -> Path:
    """Untrained models of the shipped sizes (used when pretrained/ ships none)."""
    from explorer.checkpoints import checkpoint
    from explorer.training.recipes import MODEL_DEFAULTS
    from explorer.data.tasks import TaskSpec
    from explorer.training.train import new_task_bundle
    for name, task, attention in (("reverse", "reverse", "dot"), ("reverse-none", "reverse", "none"),
                                  ("copy", "copy", "dot")):
        bundle, _ = new_task_bundle(TaskSpec(task, 5, 15), name, seed=0, **{**MODEL_DEFAULTS, "attention": attention})
        checkpoint.save(bundle, folder / name)
    return folder


def start_server(pretrained: Path, log: Path) -> tuple[str, subprocess.Popen]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = streamlit_command(port)
    env = {**os.environ, "EXPLORER_PRETRAINED": str(pretrained), "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while not healthy(url):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"error: the server did not start:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.25)
    return url, process


# --- one session ------------------------------------------------------------------------------------

class Scenario:
    """What every session does, with the inputs drawn for one model."""

    def __init__(self, url: str, model: str, alphabet: str, lengths: tuple[int, int], rounds: int, steps: int,
                 op_timeout: float, train: bool) -> None:
        self.url, self.model, self.alphabet, self.lengths = url, model, alphabet, lengths
        self.rounds, self.steps, self.op_timeout, self.train = rounds, steps, op_timeout * 1000, train

    async def wait_done(self, page, want: str, query: str = "", idle: bool = True) -> None:
        await page.wait_for_function(DONE_JS, arg=[want, query, idle], timeout=self.op_timeout, polling=50)

    async def check(self, page, s: Session, what: str) -> None:
        found = await page.evaluate(PROBLEMS_JS)
        if found["exceptions"] or found["traceback"]:
            s.errors.append(f"{what}: a traceback on the page")
        for text in found["errors"]:
            s.errors.append(f"{what}: st.error: {text[:200]}")
        if found["connection"] != "CONNECTED":
            said = " | ".join(s.console[-3:]) or "nothing about it"
            s.errors.append(f"{what}: connection {found['connection']} (browser console: {said})")

    async def timed(self, s: Session, kind: str, action, page, want: str, query: str = "",
                    idle: bool = True) -> None:
        started = time.perf_counter()
        await action()
        await self.wait_done(page, want, query, idle)
        s.record(kind, time.perf_counter() - started)
        await self.check(page, s, kind)

    async def run(self, context, s: Session, rng: random.Random, delay: float) -> None:
        await asyncio.sleep(delay)
        page = await context.new_page()
        page.set_default_timeout(self.op_timeout)
        page.on("console", lambda message: s.console.append(f"{message.type}: {message.text[:300]}")
                if CONNECTION_WORDS.search(message.text) else None)
        step_text = re.compile(r"t = (\d+) of (\d+)")
        try:
            await self.timed(s, "open Explore", lambda: page.goto(f"{self.url}/?model={quote(self.model)}"), page,
                             "t = 1 of")
            if self.train:
                await self.start_training(page, s)
            for _ in range(self.rounds):
                n = rng.randint(*self.lengths)
                text = "".join(rng.choice(self.alphabet) for _ in range(n))
                box = page.locator(".st-key-explore_input input")

                async def type_it():
                    await box.fill(text)
                    await box.press("Enter")
                await self.timed(s, "type an input", type_it, page, "t = 1 of", f"input={text}")
                total = int(step_text.search(await page.locator("h4", has_text=step_text).first.inner_text())[2])
                for t in range(2, min(total, self.steps + 1) + 1):
                    await self.timed(s, "next step", page.locator(".st-key-explore_next button").first.click, page,
                                     f"t = {t} of")
            s.completed = True
        except Exception as exc:  # a timeout or a failed load is an error of this session, not the run
            s.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        self.page = page
        return page

    async def start_training(self, page, s: Session) -> None:
        """Go to Train in this session (the navigation link: a reload would be a new session, and the old
        one's job would be reaped), start the default run, and come back to Explore."""
        await self.timed(s, "open Train", nav(page, "Train"), page, "Start training")

        async def start():
            await page.get_by_role("button", name="Start training").click()
        # Done when the progress line ("Step k of n") shows. Not "and the script is idle": while training,
        # the live panel reruns every second, and on a loaded machine one rerun starts before the last ends.
        await self.timed(s, "start training", start, page, "Step ", idle=False)
        s.training = await page.locator('[data-testid="stProgress"]').first.inner_text()
        await self.timed(s, "open Explore", nav(page, "Explore"), page, "t = ")


def nav(page, title: str):
    """Click the page's link in the navigation bar (same session, no reload); in a window too narrow for
    the bar, Streamlit shows the links in a sidebar instead."""
    async def click():
        await page.locator('[data-testid="stTopNavLink"], [data-testid="stSidebarNavLink"]',
                           has_text=title).first.click()
    return click


async def held(page, s: Session) -> None:
    """Still connected and still showing a step of decoding at the end."""
    try:
        found = await page.evaluate(PROBLEMS_JS)
        s.held = found["connection"] == "CONNECTED" and "t = " in await page.evaluate("document.body.innerText")
    except Exception as exc:
        s.errors.append(f"at the end: {type(exc).__name__}")


async def drive(url: str, args, model: str, alphabet: str, lengths: tuple[int, int]) -> list[Session]:
    from playwright.async_api import async_playwright
    sessions = [Session(i) for i in range(args.sessions)]
    rng = random.Random(args.seed)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        contexts = [await browser.new_context(viewport={"width": 1280, "height": 1000}) for _ in sessions]
        scenarios = [Scenario(url, model, alphabet, lengths, args.rounds, args.steps, args.op_timeout,
                              train=(i == 0 and args.train)) for i in range(args.sessions)]
        tasks = [asyncio.create_task(sc.run(ctx, s, random.Random(rng.random()), rng.uniform(0, args.ramp)))
                 for sc, ctx, s in zip(scenarios, contexts, sessions)]
        done, pending = await asyncio.wait(tasks, timeout=args.time_limit)
        for task in pending:
            task.cancel()
        for s, task in zip(sessions, tasks):
            if task in pending:
                s.errors.append(f"not finished within the time limit of {args.time_limit:.0f} s")
        for sc, s in zip(scenarios, sessions):
            if getattr(sc, "page", None) is not None:
                await held(sc.page, s)
        if args.train and getattr(scenarios[0], "page", None) is not None:
            await report_training(url, scenarios[0].page, sessions[0], args.op_timeout)
        for ctx in contexts:
            await ctx.close()
        await browser.close()
    return sessions


async def report_training(url: str, page, s: Session, op_timeout: float) -> None:
    """Back to Train in the same session: how far the run got while the others explored; then stop it."""
    try:
        await nav(page, "Train")()
        await page.wait_for_function(DONE_JS, arg=["Training ", "", False], timeout=op_timeout * 1000)
        s.training = await page.locator('[data-testid="stProgress"]').first.inner_text()
        stop = page.get_by_role("button", name="Stop", exact=False)
        if await stop.count():
            await stop.first.click()
    except Exception as exc:
        s.errors.append(f"training report: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")


# --- the protocol client (no browser) ----------------------------------------------------------------

class ProtocolPage:
    """One session over Streamlit's websocket: send what the browser would send, read what it would draw."""

    def __init__(self, url: str, op_timeout: float) -> None:
        self.ws_url = "ws" + url[len("http"):] + "/_stcore/stream"
        self.op_timeout = op_timeout
        self.query = ""
        self.page_hash = ""
        self.pages: dict[str, str] = {}  # url path -> page script hash
        self.widgets: dict[str, tuple[str, str]] = {}  # key -> (widget id, fragment id)
        self.texts: list[str] = []  # markdown and progress text drawn by the latest run
        self.problems: list[str] = []
        self.ws = None

    async def connect(self) -> None:
        import websockets
        self.ws = await websockets.connect(self.ws_url, subprotocols=["streamlit"], max_size=None,
                                           open_timeout=self.op_timeout)

    async def rerun(self, widgets: list | None = None, fragment: str = "", page: str | None = None) -> None:
        """Ask for a run (a page switch, typed text, a click) and read until the server says it finished."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        if page and not self.pages:  # the app's pages are known after its first run
            await self.rerun()
        if page is not None:
            self.page_hash = self.pages.get(page, "")
        state.page_script_hash = self.page_hash
        if fragment:
            state.fragment_id = fragment
        state.widget_states.widgets.extend(widgets or [])
        self.texts, self.problems = [], []
        await self.ws.send(msg.SerializeToString())
        deadline = time.monotonic() + self.op_timeout
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), timeout=max(0.1, deadline - time.monotonic()))
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            kind = fm.WhichOneof("type")
            if kind == "delta":
                self._element(fm)
            elif kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in fm.navigation.app_pages}
                self.page_hash = fm.navigation.page_script_hash or self.page_hash
            elif kind == "page_info_changed":
                self.query = fm.page_info_changed.query_string
            elif kind == "page_not_found":
                self.problems.append("page not found")
            elif kind == "ref_hash":
                self.problems.append("a cached message the client cannot fetch")  # never sent: we cache nothing
            elif kind == "script_finished":
                status = fm.script_finished
                if status == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    continue  # st.rerun(): the next run follows on its own
                if status == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    self.problems.append("the script failed to compile")
                return

    def _element(self, fm) -> None:
        from streamlit.proto.Alert_pb2 import Alert
        delta = fm.delta
        if delta.WhichOneof("type") != "new_element":
            return
        el = delta.new_element
        kind = el.WhichOneof("type")
        if kind == "markdown":
            self.texts.append(el.markdown.body)
        elif kind == "progress":
            self.texts.append(el.progress.text)
        elif kind == "exception":
            self.problems.append(f"a traceback: {el.exception.type}: {el.exception.message[:200]}")
        elif kind == "alert" and el.alert.format == Alert.ERROR:
            self.problems.append(f"st.error: {el.alert.body[:200]}")
        widget = getattr(el, kind) if kind else None
        wid = getattr(widget, "id", "") if widget is not None else ""
        if wid.startswith("$$ID-"):
            self.widgets[wid.rsplit("-", 1)[-1]] = (wid, delta.fragment_id)

    def shows(self, want: str) -> bool:
        return any(want in text for text in self.texts)

    def widget(self, key: str, **value):
        from streamlit.proto.WidgetStates_pb2 import WidgetState
        wid, fragment = self.widgets[key]
        return WidgetState(id=wid, **value), fragment

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


class ProtocolScenario(Scenario):
    """The same scenario as the browser's, over the websocket protocol."""

    async def step(self, s: Session, kind: str, client: ProtocolPage, want: str, **rerun) -> None:
        started = time.perf_counter()
        await client.rerun(**rerun)
        s.record(kind, time.perf_counter() - started)
        s.errors += [f"{kind}: {p}" for p in client.problems]
        if not client.shows(want):
            s.errors.append(f"{kind}: the page does not show {want!r}")

    async def run(self, context, s: Session, rng: random.Random, delay: float) -> None:
        await asyncio.sleep(delay)
        page = self.page = ProtocolPage(self.url, self.op_timeout / 1000)
        try:
            started = time.perf_counter()
            await page.connect()
            page.query = f"model={quote(self.model)}"
            await page.rerun()
            s.record("open Explore", time.perf_counter() - started)
            s.errors += [f"open Explore: {p}" for p in page.problems]
            if self.train:
                await self.step(s, "open Train", page, "", page="train")
                state, fragment = page.widget("train_start", trigger_value=True)
                await self.step(s, "start training", page, "Step ", widgets=[state])
                s.training = next((t for t in page.texts if t.startswith("Step ")), "")
                await self.step(s, "open Explore", page, "t = ", page="")
            for _ in range(self.rounds):
                n = rng.randint(*self.lengths)
                text = "".join(rng.choice(self.alphabet) for _ in range(n))
                state, _ = page.widget("explore_input", string_value=text)
                await self.step(s, "type an input", page, "t = 1 of", widgets=[state])
                total = max((int(m[2]) for t in page.texts if (m := re.search(r"t = (\d+) of (\d+)", t))), default=1)
                for t in range(2, min(total, self.steps + 1) + 1):
                    state, fragment = page.widget("explore_next", trigger_value=True)
                    await self.step(s, "next step", page, f"t = {t} of", widgets=[state], fragment=fragment)
            s.completed = True
        except Exception as exc:
            s.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")


TRAIN_STEPS = 20_000  # the protocol client's training: steps, with the stop at the target off
TRAINING_RATE: dict = {}  # the protocol client's measurement of the training's steps per second


def training_step(page: "ProtocolPage") -> int | None:
    """The step the Train page shows ("Step k of n ...")."""
    for text in page.texts:
        found = re.match(r"Step ([\d,]+) of", text)
        if found:
            return int(found[1].replace(",", ""))
    return None


async def start_solo_training(url: str, args, op_timeout: float) -> "ProtocolPage":
    """The training session of the protocol client: it starts the Train page's default training and
    measures its steps per second alone for --solo-seconds, before the burst of sessions begins."""
    page = ProtocolPage(url, op_timeout)
    await page.connect()
    await page.rerun(page="train")
    # Long enough to outlast the solo window and the burst: no stop at the target, many steps.
    states = [page.widget("train_use_target", bool_value=False)[0],
              page.widget("train_steps", int_value=TRAIN_STEPS)[0],
              page.widget("train_start", trigger_value=True)[0]]
    await page.rerun(widgets=states)
    deadline = time.monotonic() + op_timeout
    first = None
    while first is None or first < 2:  # the process has started and trains
        assert time.monotonic() < deadline, "the training never started"
        await asyncio.sleep(0.5)
        await page.rerun(page="train")
        first = training_step(page)
    t0 = time.monotonic()
    await asyncio.sleep(args.solo_seconds)
    await page.rerun(page="train")
    t1, second = time.monotonic(), training_step(page)
    TRAINING_RATE.update(solo_steps_per_s=round((second - first) / (t1 - t0), 2), burst_from=(t1, second))
    return page


async def drive_protocol(url: str, args, model: str, alphabet: str, lengths: tuple[int, int]) -> list[Session]:
    sessions = [Session(i) for i in range(args.sessions)]
    rng = random.Random(args.seed)
    trainer = await start_solo_training(url, args, args.op_timeout) if args.train else None
    scenarios = [ProtocolScenario(url, model, alphabet, lengths, args.rounds, args.steps, args.op_timeout,
                                  train=False) for i in range(args.sessions)]
    tasks = [asyncio.create_task(sc.run(None, s, random.Random(rng.random()), rng.uniform(0, args.ramp)))
             for sc, s in zip(scenarios, sessions)]
    done, pending = await asyncio.wait(tasks, timeout=args.time_limit)
    for task in pending:
        task.cancel()
    for sc, s, task in zip(scenarios, sessions, tasks):
        if task in pending:
            s.errors.append(f"not finished within the time limit of {args.time_limit:.0f} s")
        page = getattr(sc, "page", None)
        s.held = page is not None and page.ws is not None and page.ws.state.name == "OPEN" and s.completed
    if trainer is not None and trainer.ws is not None:
        try:  # how far the training got while the others explored; then stop it
            await trainer.rerun(page="train")
            t1, reached = time.monotonic(), training_step(trainer)
            t0, start = TRAINING_RATE["burst_from"]
            if reached is not None:
                TRAINING_RATE["burst_steps_per_s"] = round((reached - start) / (t1 - t0), 2)
                TRAINING_RATE["burst_over_solo"] = round(TRAINING_RATE["burst_steps_per_s"] /
                                                         max(1e-9, TRAINING_RATE["solo_steps_per_s"]), 2)
            sessions[0].training = next((t for t in trainer.texts if t.startswith(("Step ", "✅", "⏹"))), "")
            if "train_stop" in trainer.widgets:
                state, fragment = trainer.widget("train_stop", trigger_value=True)
                await trainer.rerun(widgets=[state], fragment=fragment)
        except Exception as exc:
            sessions[0].errors.append(f"training report: {type(exc).__name__}")
    for sc in scenarios:
        if getattr(sc, "page", None) is not None:
            await sc.page.close()
    if trainer is not None:
        await trainer.close()
    return sessions


async def first_visit(url: str, model: str, op_timeout: float) -> float:
    """One visit before the measured sessions (the teacher opening the page before class): the first
    visit to a fresh server pays for importing torch and loading the model, which is shared afterwards."""
    page = ProtocolPage(url, op_timeout)
    started = time.perf_counter()
    await page.connect()
    page.query = f"model={quote(model)}"
    await page.rerun()
    seconds = time.perf_counter() - started
    await page.close()
    return seconds


# --- the run ----------------------------------------------------------------------------------------

def summarise(sessions: list[Session], sampler: MemorySampler, baseline_kb: int, seconds: float, args,
              models: str) -> dict:
    kinds: dict[str, list[float]] = {}
    for s in sessions:
        for kind, values in s.timings.items():
            kinds.setdefault(kind, []).extend(values)
    everything = [v for values in kinds.values() for v in values]
    rows = {kind: {"n": len(v), "p50_s": round(statistics.median(v), 3), "p95_s": round(percentile(v, 0.95), 3),
                   "max_s": round(max(v), 3)} for kind, v in kinds.items()}
    rows["all interactions"] = {"n": len(everything), "p50_s": round(statistics.median(everything), 3) if everything
                                else None, "p95_s": round(percentile(everything, 0.95), 3) if everything else None,
                                "max_s": round(max(everything), 3) if everything else None}
    return {
        "sessions": args.sessions, "sessions_completed": sum(s.completed for s in sessions),
        "sessions_held": sum(s.held for s in sessions), "errors": sum(len(s.errors) for s in sessions),
        "error_messages": [f"session {s.index}: {e}" for s in sessions for e in s.errors][:50],
        "interactions": rows, "server_rss_baseline_mb": round(baseline_kb / 1024, 1),
        "server_rss_peak_mb": round(sampler.peak_kb / 1024, 1), "wall_seconds": round(seconds, 1),
        "server_alone_rss_peak_mb": round(sampler.server_peak_kb / 1024, 1),
        "training_processes_rss_peak_mb": round(sampler.children_peak_kb / 1024, 1),
        "training": sessions[0].training if sessions else "", "models": models, "cpus": os.cpu_count(),
        "load_average_at_start": args.load_at_start, "rounds": args.rounds, "steps_per_round": args.steps,
        "client": args.client,
    }


def print_table(result: dict) -> None:
    print(f"\nclient: {result['client']}; sessions: {result['sessions']} started, {result['sessions_completed']} completed, "
          f"{result['sessions_held']} held; errors: {result['errors']}")
    print(f"{'interaction':<20} {'n':>5} {'p50 s':>8} {'p95 s':>8} {'max s':>8}")
    for kind, row in result["interactions"].items():
        print(f"{kind:<20} {row['n']:>5} {row['p50_s']!s:>8} {row['p95_s']!s:>8} {row['max_s']!s:>8}")
    print(f"first visit to the fresh server (not in the table): {result['first_visit_s']} s")
    print(f"server CPU during the sessions: {result['server_cpu_s']} s "
          f"({result['server_cpu_s_per_interaction']} s per interaction, training included)")
    print(f"server RSS: {result['server_rss_baseline_mb']} MB before the sessions, peak "
          f"{result['server_alone_rss_peak_mb']} MB (the server process alone); its child processes (training "
          f"jobs, the forkserver) peak {result['training_processes_rss_peak_mb']} MB; together "
          f"{result['server_rss_peak_mb']} MB")
    if result.get("training_rate"):
        r = result["training_rate"]
        print(f"training: {r['solo_steps_per_s']} steps/s alone, {r['burst_steps_per_s']} steps/s during the burst "
              f"({r['burst_over_solo']}× its solo rate)")
    print(f"wall time {result['wall_seconds']} s; {result['cpus']} CPUs, load average at start "
          f"{result['load_average_at_start']}; models: {result['models']}")
    if result["training"]:
        print(f"training session: {result['training']}")
    for message in result["error_messages"][:20]:
        print("  error:", message)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=20, help=f"concurrent sessions (at most {MAX_SESSIONS})")
    ap.add_argument("--rounds", type=int, default=1, help="inputs typed per session")
    ap.add_argument("--steps", type=int, default=3, help="'Next' clicks per input")
    ap.add_argument("--ramp", type=float, default=3.0, help="sessions start within this many seconds")
    ap.add_argument("--time-limit", type=float, default=600.0, help="the whole run stops after this (s)")
    ap.add_argument("--op-timeout", type=float, default=180.0, help="longest wait for one interaction (s)")
    ap.add_argument("--no-train", dest="train", action="store_false", help="no training session")
    ap.add_argument("--solo-seconds", type=float, default=15.0,
                    help="protocol client: the training's rate is measured alone this long before the burst")
    ap.add_argument("--client", choices=("chromium", "protocol"), default="chromium",
                    help="a real browser per session, or Streamlit's websocket protocol without rendering")
    ap.add_argument("--url", help="a running server (loopback only); default: start one")
    ap.add_argument("--server-pid", type=int, help="with --url: the server's pid, for its memory")
    ap.add_argument("--pretrained", help="checkpoint folder for the started server (default: pretrained/, or "
                                         "untrained stand-ins when it ships none)")
    ap.add_argument("--model", help="the model the sessions open (default: reverse, else the first toy-task model)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    if not 1 <= args.sessions <= MAX_SESSIONS:
        ap.error(f"--sessions must be 1–{MAX_SESSIONS}")
    if args.time_limit <= 0 or args.op_timeout <= 0:
        ap.error("time limits must be positive")
    if args.url:
        args.url = require_loopback(args.url)  # before anything else: never contact another machine
    args.load_at_start = round(os.getloadavg()[0], 2)

    from explorer.checkpoints import checkpoint
    tmp = Path(tempfile.mkdtemp(prefix="explorer-load-"))
    folder = Path(args.pretrained) if args.pretrained else checkpoint.PRETRAINED_DIR
    models = f"checkpoints in {folder}"
    if not any(folder.glob(f"*{checkpoint.SUFFIX}")):
        if args.url:
            raise SystemExit("error: with --url, pass --pretrained (the server's checkpoint folder) to pick inputs")
        folder, models = stand_in_models(tmp), "untrained stand-ins of the shipped sizes"
    bundles = {p.name[: -len(checkpoint.SUFFIX)]: p for p in sorted(folder.glob(f"*{checkpoint.SUFFIX}"))}
    candidates = [args.model] if args.model else ["reverse"] + sorted(bundles)
    model = bundle = None
    for name in candidates:
        if name in bundles:
            b = checkpoint.load(bundles[name])
            if b.task is not None and b.task.name != "dates":
                model, bundle = name, b
                break
    if bundle is None:
        raise SystemExit(f"error: no toy-task model to open among {sorted(bundles)}")
    lengths = (bundle.task.min_len, bundle.task.max_len)

    process = None
    if args.url:
        url, pid = args.url, args.server_pid
    else:
        url, process = start_server(folder, tmp / "server.log")
        pid = process.pid
    sampler = MemorySampler(pid)
    try:
        baseline = sampler.rss_kb()
        sampler.start()
        warm_up = asyncio.run(first_visit(url, model, args.op_timeout))
        cpu_before = sampler.cpu_seconds()
        started = time.perf_counter()
        run = drive if args.client == "chromium" else drive_protocol
        sessions = asyncio.run(run(url, args, model, bundle.task.alphabet, lengths))
        seconds = time.perf_counter() - started
        server_cpu = sampler.cpu_seconds() - cpu_before
    finally:
        sampler.stop()
        if process is not None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
    result = summarise(sessions, sampler, baseline, seconds, args, models)
    result["model"] = model
    result["first_visit_s"] = round(warm_up, 2)
    result["training_rate"] = {k: v for k, v in TRAINING_RATE.items() if k != "burst_from"}
    n = result["interactions"]["all interactions"]["n"]
    result["server_cpu_s"] = round(server_cpu, 1)
    result["server_cpu_s_per_interaction"] = round(server_cpu / n, 3) if n else None
    print_table(result)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({**result, "memory_samples": sampler.samples[::4]}, indent=1))
    if process is not None and result["errors"]:
        print(f"server log: {tmp / 'server.log'}")
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
