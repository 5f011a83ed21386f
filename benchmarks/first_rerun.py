"""A page's first full run after it loads, on two running servers in alternation (an A/B of two commits): the
Explore page of the README's demo model opened fresh, then an example picked (a full run with a new input), and the
milliseconds from the click until the new output is shown, the script is idle and every chart is drawn. Medians.

    python benchmarks/first_rerun.py --a URL --b URL [--names A B] [--rounds 8] [--json FILE]

Start each server first (`streamlit run app.py --server.port N` in each checkout). Why the first run after a load:
until 2026-12-07 the warm-up's element took the first place on a session's first run only, so on the next full run
every element of the page moved and was drawn anew (pages/warmup.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent / "tests")]

from browser_support import CHARTS_DRAWN, CHROMIUM, CHROMIUM_ARGS, IDLE  # noqa: E402

VIEW = "/?model=reverse&input=31415926"
EXAMPLE, OUTPUT = "27182818284", "48281828172"  # an example of the reverse model, and its reversal


def first_rerun_ms(browser, base: str) -> float:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(base.rstrip("/") + VIEW)
        page.wait_for_selector(IDLE, timeout=120_000)
        page.wait_for_function(f"() => {CHARTS_DRAWN}", timeout=60_000)
        page.wait_for_timeout(1500)
        start = time.perf_counter()
        page.locator(".st-key-explore_example button", has_text=EXAMPLE).first.click()
        page.wait_for_function(f"() => document.body.innerText.includes({OUTPUT!r})", timeout=60_000)
        page.wait_for_selector(IDLE, timeout=60_000)
        page.wait_for_function(f"() => {CHARTS_DRAWN}", timeout=60_000)
        return (time.perf_counter() - start) * 1000
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the first server's address, e.g. http://127.0.0.1:8601")
    parser.add_argument("--b", required=True, help="the second server's address")
    parser.add_argument("--names", nargs=2, default=("a", "b"), help="what each server runs, e.g. two commits")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    servers = {"a": args.a, "b": args.b}
    times: dict[str, list[float]] = {"a": [], "b": []}
    print("load average at start:", ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for r in range(args.rounds):
            for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
                times[side].append(first_rerun_ms(browser, servers[side]))
        browser.close()
    print("load average at end:", ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    result = {"what": __doc__.splitlines()[0], "when": datetime.datetime.now().isoformat(timespec="seconds"),
              "servers": servers, "names": dict(zip(("a", "b"), args.names)), "ms": {s: [round(t) for t in ts] for s, ts in times.items()},
              "median_ms": {s: round(statistics.median(ts)) for s, ts in times.items()}}
    for side in ("a", "b"):
        print(f"{side}, {result['names'][side]} ({servers[side]}): first full run after a load {result['median_ms'][side]} ms median "
              f"{result['ms'][side]}")
    print(f"b / a: {result['median_ms']['b'] / result['median_ms']['a']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
