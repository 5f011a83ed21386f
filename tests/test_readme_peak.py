"""docs/RELIABILITY.md (moved out of the README) reports the worst hostile case's peak memory: what it costs above a
refused `info /dev/zero` must be what benchmarks/reliability_peak.py measures for the two now (the page said 475 MB, measured
before the depth scan was cut to one byte per bracket; 395 MB by 2026-12-05). A fresh process each time, as the
benchmark runs it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.scripts_support import load_script

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_worst_case_peak_is_what_the_benchmark_measures(tmp_path):
    """The attack's own cost: its peak above a refused `info /dev/zero`'s, both measured now, neither importing torch
    (a peak with torch also counts the pages of its library the process maps, which the page cache decides: a fresh
    install mapped 44 MB more of libtorch_cpu.so than one read from disk an hour before)."""
    text = (ROOT / "docs" / "RELIABILITY.md").read_text()
    good = re.search(r"above a refused `info /dev/zero` (\d+) MB", text)
    worst = re.search(r"the worst, a 14 MB header nested 7,000,000 levels deep, (\d+) MB", text)
    assert good and worst, "docs/RELIABILITY.md no longer names its baseline and its worst case"
    bench = load_script("benchmarks/reliability_peak.py")
    rc, baseline_mb, message = bench.peak(["info", "--checkpoint", "/dev/zero"])
    assert rc == 2, message
    rc, peak_mb, message = bench.peak(["info", "--checkpoint", str(bench.deep_header(tmp_path))])
    assert rc == 2, message
    claimed = int(worst.group(1)) - int(good.group(1))
    measured = peak_mb - baseline_mb
    assert abs(measured - claimed) <= 0.1 * claimed, \
        f"measured {peak_mb} MB, {measured} MB above the refused info's {baseline_mb} MB; docs/RELIABILITY.md says " \
        f"{claimed} MB above"
