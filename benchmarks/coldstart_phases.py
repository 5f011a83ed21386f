"""Where a cold start's time goes (issue 42): one fresh `python -m explorer.app.serve`, opened in headless Chromium
at 1024×768 as benchmarks/demo.py does, with the server's and the browser's phases on one clock.

    python benchmarks/coldstart_phases.py [--bare] [--json FILE]

The server runs under this file's `--serve` role: explorer.app.serve.main() with timestamps (wall clock and CPU
seconds) of the imports that matter (streamlit, numpy, pandas, torch, the engine and the Explore page, in whichever
thread imports them), of each script run, and of each message the server sends. The browser side: the script's
state, loading placeholders, charts drawn, when plotly.js was defined, the large scripts' fetch times, and the CPU
seconds of the server and of the browser until Explore had fully rendered (the definition demo.py uses). `--bare`
opens run.py's bare app instead (browser side, health and CPU only). A diagnostic: one start, nothing averaged;
the hooks add a little to the server's time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WATCH = ("streamlit", "streamlit.web.cli", "numpy", "pandas", "torch", "plotly.graph_objects", "explorer.app.views",
         "explorer.app.pages.explore", "explorer.app.figures.attention", "explorer.checkpoints.registry")

# The browser's timeline: a record each time what the page shows changes (polled every 50 ms, as demo.py polls).
TIMELINE = """
window.__phases = [];
(() => {
  let last = "";
  const charts = '[data-testid="stPlotlyChart"], [class*="st-key-live_chart_"]';
  setInterval(() => {
    const app = document.querySelector('[data-testid="stApp"]'), all = document.querySelectorAll(charts);
    const s = {state: app && app.getAttribute('data-test-script-state'),
               placeholders: document.querySelectorAll('[data-testid="stSkeleton"]').length,
               elements: document.querySelectorAll('[data-testid="stElementContainer"]').length,
               charts: all.length, drawn: Array.from(all).filter(el => el.querySelector('.main-svg')).length};
    const key = JSON.stringify(s);
    if (key !== last) { window.__phases.push([Date.now(), s]); last = key; }
  }, 50);
  let plotly;
  Object.defineProperty(window, 'Plotly', {configurable: true, get: () => plotly,
    set: v => { plotly = v; window.__phases.push([Date.now(), {plotly_defined: true}]); }});
})();
"""


def serve(argv: list[str]) -> int:
    """The server role: explorer.app.serve.main(argv), its phases written to $PHASES_LOG as JSON lines."""
    import importlib.abc

    out = open(os.environ["PHASES_LOG"], "a", buffering=1)
    lock = threading.Lock()

    def log(event: str, **fields) -> None:
        with lock:
            out.write(json.dumps({"t": time.time(), "cpu": time.process_time(), "event": event,
                                  "thread": threading.current_thread().name, **fields}) + "\n")

    class Watch(importlib.abc.MetaPathFinder):
        """Times the watched modules' own import (their loader's exec_module), in the thread that imports them."""

        def find_spec(self, name, path, target=None):
            if name not in WATCH:
                return None
            for finder in sys.meta_path:
                spec = None if finder is self else getattr(finder, "find_spec", lambda *a: None)(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            run = spec.loader.exec_module

            def exec_module(module):
                log("import", module=name)
                try:
                    return run(module)
                finally:
                    log("imported", module=name)
            spec.loader.exec_module = exec_module
            return spec

    log("interpreter")
    sys.path.insert(0, str(ROOT))
    sys.meta_path.insert(0, Watch())
    from streamlit.runtime import app_session
    from streamlit.runtime.scriptrunner import script_runner

    run_script = script_runner.ScriptRunner._run_script

    def timed_run(self, rerun_data):
        log("run")
        try:
            return run_script(self, rerun_data)
        finally:
            log("run end")
    script_runner.ScriptRunner._run_script = timed_run
    enqueue = app_session.AppSession._enqueue_forward_msg

    def timed_enqueue(self, msg):
        kind = msg.WhichOneof("type")
        element = msg.delta.new_element.WhichOneof("type") if kind == "delta" and msg.delta.HasField("new_element") else None
        log("send", kind=kind, element=element, size=msg.ByteSize())
        return enqueue(self, msg)
    app_session.AppSession._enqueue_forward_msg = timed_enqueue
    from explorer.app import serve as app_serve
    return app_serve.main(argv)


def first(events: list[dict], event: str, **match) -> dict | None:
    return next((e for e in events if e["event"] == event and all(e.get(k) == v for k, v in match.items())), None)


def measure(bare: bool) -> dict:
    """One cold start: the server's and the browser's phases, seconds from the server's start."""
    sys.path[:0] = [str(ROOT / "tests"), str(BENCH)]
    from browser_support import CHARTS, CHARTS_DRAWN, CHROMIUM, CHROMIUM_ARGS, IDLE, _healthy, free_port
    from playwright.sync_api import sync_playwright
    from run import BARE_APP, _tree_cpu

    folder = Path(tempfile.mkdtemp(prefix="coldstart-phases-"))
    log = folder / "phases.jsonl"
    log.touch()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    flags = ["--server.headless", "true", "--server.address", "127.0.0.1", "--server.port", str(port),
             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    if bare:
        (folder / "bare.py").write_text(BARE_APP)
        command, cwd = [sys.executable, "-m", "streamlit", "run", "bare.py", *flags], folder
    else:
        command, cwd = [sys.executable, str(Path(__file__).resolve()), "--serve", *flags], ROOT
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PHASES_LOG": str(log)}
    rendered = f"() => !!document.querySelector('{IDLE}') && !!document.querySelector('{CHARTS}') && {CHARTS_DRAWN}"
    with sync_playwright() as pw, open(folder / "server.log", "wb") as server_log:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1024, "height": 768})
        page = context.new_page()
        page.set_default_timeout(300_000)
        page.add_init_script(TIMELINE)
        t0 = time.time()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=server_log, stderr=subprocess.STDOUT)
        try:
            while not _healthy(url):
                if proc.poll() is not None:
                    raise RuntimeError((folder / "server.log").read_text(errors="replace")[-2000:])
                time.sleep(0.02)
            healthy = time.time()
            before = _tree_cpu(os.getpid()) - _tree_cpu(proc.pid)
            page.goto(url + "/")
            page.wait_for_function(rendered, polling=50)
            done = time.time()
            server_cpu = _tree_cpu(proc.pid)
            browser_cpu = _tree_cpu(os.getpid()) - server_cpu - before
            timeline = page.evaluate("window.__phases")
            scripts = page.evaluate("""performance.getEntriesByType('resource')
                .filter(e => e.name.endsWith('.js') && e.transferSize > 100000)
                .map(e => [e.name.split('/').pop(), performance.timeOrigin + e.startTime,
                           performance.timeOrigin + e.responseEnd, e.transferSize])""")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            context.close()
            browser.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]

    def at(t: float | None) -> float | None:
        return None if t is None else round(t - t0, 3)

    def cpu_at(e: dict | None) -> float | None:
        return None if e is None else round(e["cpu"], 2)

    server: dict[str, object] = {"healthy": at(healthy)}
    for name in WATCH:
        start, end = first(events, "import", module=name), first(events, "imported", module=name)
        if start and end:
            server[f"import {name}"] = {"from": at(start["t"]), "to": at(end["t"]), "thread": start["thread"],
                                        "cpu_at_end": cpu_at(end)}
    sends = [e for e in events if e["event"] == "send"]
    charts = [e for e in sends if e.get("element") in ("plotly_chart", "bidi_component")]
    for label, e in (("first run", first(events, "run")), ("first run ends", first(events, "run end")),
                     ("last message of the first run", next((e for e in sends if e["kind"] == "script_finished"), None))):
        if e is not None:
            server[label] = {"at": at(e["t"]), "cpu": cpu_at(e)}
    server["charts sent (the warm-up's first)"] = [at(e["t"]) for e in charts]
    browser_phases = {"page opened": at(healthy)}
    for t, s in timeline:
        if s.get("plotly_defined"):
            browser_phases.setdefault("plotly.js defined", at(t / 1000))
        elif s["state"] == "running":
            browser_phases.setdefault("first run shown (running)", at(t / 1000))
        if s.get("placeholders"):
            browser_phases["last loading placeholder seen"] = at(t / 1000)
        if s.get("state") == "notRunning" and "first run shown (running)" in browser_phases:
            browser_phases.setdefault("script idle (notRunning)", at(t / 1000))
    browser_phases["rendered (demo.py's definition)"] = at(done)
    return {"side": "bare" if bare else "app", "load": os.getloadavg(), "rendered_s": at(done),
            "server_cpu_s": round(server_cpu, 2), "browser_cpu_s": round(browser_cpu, 2), "server": server,
            "browser": browser_phases,
            "large_scripts": [[name, at(start / 1000), at(end / 1000), size] for name, start, end, size in scripts],
            "messages": len(sends), "message_bytes": sum(e["size"] for e in sends)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        return serve(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bare", action="store_true", help="run.py's bare app instead of ours")
    parser.add_argument("--json", help="write the phases here")
    args = parser.parse_args(argv)
    result = measure(args.bare)
    print(json.dumps(result, indent=1, ensure_ascii=False))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
