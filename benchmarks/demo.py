"""The live demo's two speed targets (issue 42), each against Streamlit's own floor measured in the same run,
in the same headless Chromium:

- cold start: `python -m explorer.app.serve` (the README's app command) started fresh, seconds from process start
  until Explore has fully rendered (script idle, every Plotly chart drawn, no loading placeholder), against a bare
  two-page Streamlit app drawing one Plotly chart (run.py's BARE_APP); starts alternate, medians; target ≤ 1.5×.
  Also the CPU seconds the server and the browser spent until then (medians): where the work is, whatever the load.
- step change: on the README's demo view (reverse, 31415926, presenter mode), → pressed and the time until the
  heatmap has been redrawn with the current-step box on the new row; p50 and p95 over many presses, forward
  and back. The floor: a bare Streamlit app whose fragment redraws a heatmap of the same size with its box on
  the next row when a button (its shortcut →) is pressed. Target: p95 ≤ 300 ms. Ours also: the time until the rest
  of the step panel has followed (its heading names the new step: the server's run has reached the browser).

    python benchmarks/demo.py [--starts 5] [--steps 40] [--json FILE]

The machine is shared: the load average is printed at the start and the end; compare the ratios.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH), str(ROOT / "tests")]

from browser_support import CHARTS, CHARTS_DRAWN, CHROMIUM, CHROMIUM_ARGS, IDLE  # noqa: E402
from run import BARE_APP, _serving, _tree_cpu  # noqa: E402  (run.py's bare app and server start: one floor for both)

DEMO_VIEW = "?model=reverse&input=31415926&step=1&present=1#heatmap"
STEPS = 9  # the demo view's trace: 8 digits reversed and <eos>

# The bare floor of a step change: a fragment that redraws a 9×8 heatmap with a box on the current row.
BARE_STEP_APP = """import numpy as np
import plotly.graph_objects as go
import streamlit as st

Z = np.random.default_rng(0).random((9, 8))


@st.fragment
def panel() -> None:
    step = st.session_state.setdefault("step", 0)
    if st.button("Next", shortcut="Right", key="next"):
        step = st.session_state["step"] = (step + 1) % 9
    fig = go.Figure(go.Heatmap(z=Z, colorscale="Blues"))
    fig.add_shape(type="rect", x0=-0.5, x1=7.5, y0=step - 0.5, y1=step + 0.5, line={"color": "#d62728", "width": 4})
    fig.update_layout(height=420, yaxis={"autorange": "reversed"})
    with st.container(key="heatmap"):
        st.plotly_chart(fig)


st.title("Bare step")
panel()
"""

# The current-step box's row as drawn (the last shape of the heatmap; None while the chart is being redrawn).
BOX_ROW = """(key) => {
  const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  const shapes = gd && gd._fullLayout && gd._fullLayout.shapes;
  if (!shapes || !shapes.length || !gd.querySelector('.shapelayer path')) return null;
  return Math.round(shapes[shapes.length - 1].y0 + 0.5);
}"""


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank): p95 of 40 presses is the 38th smallest."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, -(-len(ordered) * q // 100) - 1))]


def _own_cpu() -> float:
    """CPU seconds of this process and its descendants: Playwright's driver and Chromium, the server too."""
    return _tree_cpu(os.getpid())


def cold_starts(browser, starts: int, rendered: str, env: dict) -> dict:
    """Alternating fresh starts of the bare app and ours, each opened in a fresh browser context. Besides the
    wall time, each start's CPU seconds until rendered (less sensitive to the shared machine's load): the
    server's, from its start, and the browser's (Chromium and Playwright's driver), from the page's opening."""
    bare_dir = Path(tempfile.mkdtemp(prefix="bench-bare-"))
    (bare_dir / "bare.py").write_text(BARE_APP)
    runs: dict[str, list[float]] = {"bare": [], "app": []}
    cpu: dict[str, list[tuple[float, float]]] = {"bare": [], "app": []}
    for _ in range(starts):
        for side, script, cwd in (("bare", "bare.py", bare_dir), ("app", "app.py", ROOT)):
            context = browser.new_context(viewport={"width": 1024, "height": 768})
            page = context.new_page()
            page.set_default_timeout(300_000)
            with _serving(script, cwd, env, cwd / f"server-{side}.log" if side == "bare"
                          else Path(tempfile.mkdtemp(prefix="bench-app-")) / "server.log") as (url, proc, t0, _):
                before = _own_cpu() - _tree_cpu(proc.pid)
                page.goto(url + "/")
                page.wait_for_function(rendered, polling=50)
                runs[side].append(time.perf_counter() - t0)
                server = _tree_cpu(proc.pid)
                cpu[side].append((server, _own_cpu() - server - before))
            context.close()
    bare, app = statistics.median(runs["bare"]), statistics.median(runs["app"])
    out = {"bare_s": bare, "app_s": app, "ratio": app / bare,
           "bare_runs_s": [round(x, 3) for x in runs["bare"]], "app_runs_s": [round(x, 3) for x in runs["app"]]}
    for side in ("bare", "app"):
        out[f"{side}_server_cpu_s"] = statistics.median(c[0] for c in cpu[side])
        out[f"{side}_browser_cpu_s"] = statistics.median(c[1] for c in cpu[side])
    return out


def _busy_ms(cdp) -> float:
    """The page's main thread's busy time so far (Chromium's TaskDuration), in milliseconds."""
    return 1000 * next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration")


def step_changes(page, cdp, server_pid: int, key: str, presses: int, steps: int) -> dict[str, list[float]]:
    """Per press: milliseconds from → (or ←) to the heatmap redrawn with its box on the new row, and the CPU
    milliseconds the browser's main thread and the server spent on the whole change (load-proof, unlike the
    wall time). Ours goes forward to the last step, then back (it stops at the ends); the bare floor only
    goes forward and wraps around."""
    out: dict[str, list[float]] = {"wall": [], "panel": [], "browser_cpu": [], "server_cpu": []}
    row = page.evaluate(BOX_ROW, key)  # 0-based
    direction = 1
    for _ in range(presses):
        if key == "heatmap":
            expected = (row + 1) % steps
        else:
            if not 0 <= row + direction < steps:
                direction = -direction
            expected = row + direction
        busy, served = _busy_ms(cdp), _tree_cpu(server_pid)
        t0 = time.perf_counter()
        page.keyboard.press("ArrowRight" if direction > 0 else "ArrowLeft")
        page.wait_for_function(f"() => ({BOX_ROW})({json.dumps(key)}) === {expected}", polling="raf")
        out["wall"].append((time.perf_counter() - t0) * 1000)
        if key != "heatmap":
            page.wait_for_function(f"() => /t = {expected + 1} of/.test(document.querySelector("
                                   "'.st-key-explore_step_panel h4')?.textContent || '')", polling="raf")
            out["panel"].append((time.perf_counter() - t0) * 1000)
        row = expected
        page.wait_for_selector(IDLE)  # the run has finished and the page has settled (a presenter's pace)
        page.wait_for_timeout(400)
        out["browser_cpu"].append(_busy_ms(cdp) - busy)
        out["server_cpu"].append((_tree_cpu(server_pid) - served) * 1000)
    return out


def step_section(browser, presses: int, env: dict, rendered: str) -> dict:
    """Step-change times in the bare app and in ours, each on its own fresh server, warmed by a few presses."""
    bare_dir = Path(tempfile.mkdtemp(prefix="bench-bare-step-"))
    (bare_dir / "bare_step.py").write_text(BARE_STEP_APP)
    out = {}
    for side, script, cwd, view, key in (("bare", "bare_step.py", bare_dir, "/", "heatmap"),
                                         ("app", "app.py", ROOT, "/" + DEMO_VIEW, "explore_heatmap")):
        context = browser.new_context(viewport={"width": 1024, "height": 768})
        page = context.new_page()
        page.set_default_timeout(120_000)
        log = Path(tempfile.mkdtemp(prefix="bench-step-")) / "server.log"
        with _serving(script, cwd, env, log) as (url, proc, _, _):
            page.goto(url + view)
            page.wait_for_function(rendered, polling=50)
            page.wait_for_function(f"() => ({BOX_ROW})({json.dumps(key)}) !== null")
            page.mouse.click(5, 400)  # focus the page, not a field
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable")
            step_changes(page, cdp, proc.pid, key, 4, STEPS)  # warm-up: the step's figures, the browser's code
            runs = step_changes(page, cdp, proc.pid, key, presses, STEPS)
        context.close()
        out[side] = {"p50_ms": statistics.median(runs["wall"]), "p95_ms": percentile(runs["wall"], 95),
                     "max_ms": max(runs["wall"]), "browser_cpu_p50_ms": statistics.median(runs["browser_cpu"]),
                     "server_cpu_p50_ms": statistics.median(runs["server_cpu"]),
                     "runs_ms": [round(x, 1) for x in runs["wall"]]}
        if runs["panel"]:
            out[side] |= {"panel_p50_ms": statistics.median(runs["panel"]), "panel_p95_ms": percentile(runs["panel"], 95),
                          "panel_runs_ms": [round(x, 1) for x in runs["panel"]]}
    out["ratio_p95"] = out["app"]["p95_ms"] / out["bare"]["p95_ms"]
    out["ratio_browser_cpu"] = out["app"]["browser_cpu_p50_ms"] / out["bare"]["browser_cpu_p50_ms"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5, help="cold starts of each app (alternating)")
    parser.add_argument("--steps", type=int, default=40, help="step changes measured in each app")
    parser.add_argument("--only", choices=("cold", "step"), help="measure only this")
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    rendered = (f"() => !!document.querySelector('{IDLE}') "
                f"&& !!document.querySelector('{CHARTS}') && {CHARTS_DRAWN}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = {"when": datetime.datetime.now().isoformat(timespec="seconds"),
           "command": "python benchmarks/demo.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "cpus": os.cpu_count(), "load_start": load()}
    print(f"load average at start: {out['load_start']}", flush=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            if args.only != "step":
                out["cold_start"] = c = cold_starts(browser, args.starts, rendered, env)
                print(f"cold start: ours {c['app_s']:.2f} s {c['app_runs_s']}, bare {c['bare_s']:.2f} s "
                      f"{c['bare_runs_s']}: {c['ratio']:.2f}× (target ≤ 1.5×)", flush=True)
                print(f"  CPU until rendered (median): server ours {c['app_server_cpu_s']:.2f} s, bare "
                      f"{c['bare_server_cpu_s']:.2f} s; browser ours {c['app_browser_cpu_s']:.2f} s, bare "
                      f"{c['bare_browser_cpu_s']:.2f} s", flush=True)
            if args.only != "cold":
                out["step"] = s = step_section(browser, args.steps, env, rendered)
                print(f"step change: ours p50 {s['app']['p50_ms']:.0f} ms, p95 {s['app']['p95_ms']:.0f} ms; bare p50 "
                      f"{s['bare']['p50_ms']:.0f} ms, p95 {s['bare']['p95_ms']:.0f} ms: {s['ratio_p95']:.2f}× "
                      "(target p95 ≤ 300 ms)", flush=True)
                print(f"  CPU per change (median): browser main thread ours {s['app']['browser_cpu_p50_ms']:.0f} ms, "
                      f"bare {s['bare']['browser_cpu_p50_ms']:.0f} ms ({s['ratio_browser_cpu']:.1f}×); server ours "
                      f"{s['app']['server_cpu_p50_ms']:.0f} ms, bare {s['bare']['server_cpu_p50_ms']:.0f} ms", flush=True)
                if "panel_p50_ms" in s["app"]:
                    print(f"  ours, until the rest of the step panel has followed: p50 {s['app']['panel_p50_ms']:.0f} "
                          f"ms, p95 {s['app']['panel_p95_ms']:.0f} ms", flush=True)
        finally:
            browser.close()
    out["load_end"] = load()
    print(f"load average at end: {out['load_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
