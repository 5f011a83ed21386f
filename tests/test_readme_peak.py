"""docs/RELIABILITY.md (moved out of the README) reports the worst hostile case's peak memory: what it costs above a
good `info` must be what benchmarks/reliability_peak.py measures for the two now (the page said 475 MB, measured
before the depth scan was cut to one byte per bracket; 395 MB by 2026-12-05). A fresh process each time, as the
benchmark runs it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.scripts_support import load_script

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_worst_case_peak_is_what_the_benchmark_measures(tmp_path):
    """The attack's own cost: its peak above the good `info`'s, both measured now. A peak alone also counts the
    pages of torch's library the process maps, which the page cache decides (a fresh install mapped 44 MB more of
    libtorch_cpu.so than one read from disk an hour before: 436 MB against 394 MB, the good `info` 281 against 231)."""
    text = (ROOT / "docs" / "RELIABILITY.md").read_text()
    good = re.search(r"a good `info --checkpoint reverse` (\d+) MB", text)
    worst = re.search(r"the worst, a 14 MB header nested 7,000,000 levels deep, (\d+) MB", text)
    assert good and worst, "docs/RELIABILITY.md no longer names its baseline and its worst case"
    bench = load_script("benchmarks/reliability_peak.py")
    rc, baseline_mb, message = bench.peak(bench.BASELINE)
    assert rc == 0, message
    rc, peak_mb, message = bench.peak(["info", "--checkpoint", str(bench.deep_header(tmp_path))])
    assert rc == 2, message
    claimed = int(worst.group(1)) - int(good.group(1))
    measured = peak_mb - baseline_mb
    assert abs(measured - claimed) <= 0.1 * claimed, \
        f"measured {peak_mb} MB, {measured} MB above the good info's {baseline_mb} MB; docs/RELIABILITY.md says " \
        f"{claimed} MB above"
