"""Real-browser test support: start the app with `streamlit run`, drive it with headless Chromium.

Two pieces, shared by every page's browser test:

- `streamlit_server(...)` starts `streamlit run app.py` headless on a free port (optionally with
  `EXPLORER_PRETRAINED` pointing at other checkpoints), waits for `/_stcore/health`, and stops it.
  tests/conftest.py's `shipped_server` is one on the shipped checkpoints, shared by a test process.
- `chromium(...)` opens a page in a fresh context of Playwright's Chromium from Debian's `/usr/bin/chromium`
  (Playwright cannot download browsers here), launched once per module with the flags verified in
  STACK-NOTES; `wait_idle(page)` waits until the script has finished the run an interaction started, so a
  test never reads the previous run.

Tests using these skip when Playwright or Chromium is missing, except under `CI=true`, where a missing
browser fails them: CI must not pass with its browser tests silently skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


@dataclass
class Server:
    """A running `streamlit run app.py`: its URL, process and log file."""

    url: str
    port: int
    process: subprocess.Popen
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def streamlit_command(port: int, script: str = "app.py") -> list[str]:
    """The README's app command (scripts/start.sh: `python -m explorer.app.serve`, i.e. `streamlit run app.py`
    with room for long addresses), headless and local, on a given port; another script runs as is."""
    start = ["-m", "explorer.app.serve"] if script == "app.py" else ["-m", "streamlit", "run", script]
    return [sys.executable, *start, "--server.headless", "true",
            "--server.address", "127.0.0.1", "--server.port", str(port),
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def streamlit_server(pretrained: str | Path | None = None, env: dict[str, str] | None = None,
                     timeout: float = 60.0, script: str = "app.py") -> Iterator[Server]:
    """Start the app headless on a free port, wait until it answers /_stcore/health, stop it afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if pretrained is not None:
        full_env["EXPLORER_PRETRAINED"] = str(pretrained)
    log = Path(tempfile.mkdtemp(prefix="streamlit-log-")) / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(streamlit_command(port, script), cwd=ROOT, env=full_env,
                                   stdout=out, stderr=subprocess.STDOUT)
    server = Server(url, port, process, log)
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if process.poll() is not None:
                raise RuntimeError(f"streamlit exited with {process.returncode}:\n{server.log_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"streamlit did not answer /_stcore/health in {timeout:.0f}s:\n"
                                   f"{server.log_text()[-3000:]}")
            time.sleep(0.25)
        yield server
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def missing_browser() -> str | None:
    """What is missing for the browser tests (None when Playwright and Chromium are both there)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed"
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM}"
    return None


def require_browser() -> None:
    """Skip the calling test when Playwright or Chromium is missing; fail it instead under CI=true."""
    missing = missing_browser()
    if missing is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{missing}: CI=true requires the browser tests to run (install Debian's chromium)")
    pytest.skip(missing)


# Each page counts its script runs as they start (the app element's data-test-script-state turning "running")
# and notes when that state last changed, so `wait_idle` waits for the run an interaction started instead of
# for a fixed pause. Installed before any of the page's own scripts, in every document the page opens.
RUN_COUNTER = """(() => {
  let runs = 0, state = null, changed = performance.now(), app = null;
  const look = () => {
    if (!app || !app.isConnected) app = document.querySelector('[data-testid="stApp"]');
    const now = app ? app.getAttribute('data-test-script-state') : null;
    if (now === state) return;
    if (now === 'running') runs += 1;
    state = now; changed = performance.now();
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true, attributes: true,
                                                attributeFilter: ['data-test-script-state']});
  window.__explorerSeen = 0;
  window.__explorerRuns = () => ({runs, state, quiet: performance.now() - changed});
})()"""


class _Browser:
    """One headless Chromium per test process, launched on first use (a launch is a second or two on a
    loaded machine, and the suite opens dozens of pages). Each `chromium()` still gets a fresh context: its
    own cookies, storage and cache, as a newly launched browser would have."""

    playwright = None
    browser = None

    @classmethod
    def get(cls):
        from playwright.sync_api import sync_playwright
        if cls.browser is None or not cls.browser.is_connected():
            if cls.playwright is None:
                cls.playwright = sync_playwright().start()
            cls.browser = cls.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        return cls.browser

    @classmethod
    def close(cls) -> None:
        if cls.browser is not None:
            with contextlib.suppress(Exception):
                cls.browser.close()
        if cls.playwright is not None:
            with contextlib.suppress(Exception):
                cls.playwright.stop()
        cls.browser = cls.playwright = None


def close_browser() -> None:
    """Close the test process's Chromium (tests/conftest.py calls it when the session ends)."""
    _Browser.close()


@contextlib.contextmanager
def chromium(width: int = 1600, height: int = 3000) -> Iterator["object"]:
    """A headless Chromium page (Playwright) with a tall viewport, in a fresh browser context: Streamlit
    scrolls inside its own container, so screenshots show only the viewport."""
    require_browser()
    context = _Browser.get().new_context(viewport={"width": width, "height": height})
    try:
        context.add_init_script(RUN_COUNTER)
        page = context.new_page()
        page.set_default_timeout(180_000)
        yield page
    finally:
        with contextlib.suppress(Exception):
            context.close()


RUN_STARTS_WITHIN = 2000  # ms: an interaction that has started no run by then started none
QUIET = 300  # ms: idle this long with no new run (a script's st.rerun() starts the next one at once)


def wait_idle(page, timeout: float = 180_000, settle: float = RUN_STARTS_WITHIN) -> None:
    """Wait until the script has run to the end after an interaction (not the previous run's page).

    The page counts the runs that start (RUN_COUNTER): this waits for one after those already waited for
    (up to `settle` ms, at least RUN_STARTS_WITHIN: an interaction may start none; on a page just loaded, up
    to 60 s: loading always runs the script), then for the app to be idle and to stay idle for QUIET ms."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    seen = page.evaluate("() => window.__explorerSeen")
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function("seen => window.__explorerRuns().runs > seen", arg=seen,
                               timeout=60_000 if seen == 0 else max(settle, RUN_STARTS_WITHIN))
    try:
        page.wait_for_selector(IDLE, timeout=timeout)
        page.wait_for_function(f"""() => {{ const r = window.__explorerRuns();
                                             return r.state === 'notRunning' && r.quiet >= {QUIET}; }}""",
                               timeout=timeout)
    except PlaywrightTimeout:  # say what the page kept doing: runs that never end, or one after another
        runs = page.evaluate("() => window.__explorerRuns()")
        raise AssertionError(f"the page did not stay idle for {QUIET} ms within {timeout / 1000:g} s: "
                             f"{runs['runs'] - seen} runs started since the interaction, now {runs['state']} for "
                             f"{runs['quiet']:.0f} ms") from None
    page.evaluate("() => { window.__explorerSeen = window.__explorerRuns().runs; }")


# Every Plotly chart on a page: st.plotly_chart's, and Explore's live charts (updated in place when the step
# changes: explorer/app/pages/live_chart.py).
CHARTS = '[data-testid="stPlotlyChart"], [data-testid="explorerLiveChart"]'

# A JavaScript expression, true once no element is a grey loading placeholder (its renderer's code has
# not arrived) and every Plotly chart on the page has drawn (a live chart's frame is there before its code).
CHARTS_DRAWN = f"""(!document.querySelector('[data-testid="stSkeleton"]')
                 && Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"], [class*="st-key-live_chart_"]'))
                    .every(el => el.querySelector('.main-svg')))"""


def wait_charts(page, timeout: float = 60_000) -> None:
    """Wait until every Plotly chart on the page has drawn (they render after the script finishes)."""
    page.wait_for_function(f"() => {CHARTS_DRAWN}", timeout=timeout)
    page.wait_for_timeout(300)


def open_app(page, server: Server, query: str = "") -> None:
    """Load the app (optionally with a query string like `?model=copy`) and wait for the first run."""
    page.goto(server.url + "/" + query.lstrip("/"))
    page.wait_for_selector('[data-testid="stApp"]')
    wait_idle(page)


# A JavaScript function: the texts on the page that do not fit their box and are cut off (an ellipsis, a
# clipped or scrolled box), more than a few pixels over. Charts and tables clip by design and are left out,
# as are KaTeX's 1-pixel MathML copies for screen readers.
CLIPPED_TEXT = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] *')).filter(e => {
    if (e.closest('.js-plotly-plot, [data-testid="stDataFrame"], .katex-mathml')) return false;
    const style = getComputedStyle(e);
    return style.overflowX !== 'visible' && e.clientWidth > 1 && e.scrollWidth > e.clientWidth + 4
        && e.textContent.trim() !== '';
}).map(e => e.textContent.trim().slice(0, 60))"""


def clipped_text(page) -> list[str]:
    """The page's texts that are cut off (see CLIPPED_TEXT)."""
    return page.evaluate(CLIPPED_TEXT)
