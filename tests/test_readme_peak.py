"""docs/RELIABILITY.md (moved out of the README) reports the worst hostile case's peak memory: the number must be what
benchmarks/reliability_peak.py measures for that case now (it said 475 MB, measured before the depth scan
was cut to one byte per bracket; 395 MB by 2026-12-05). A fresh process each time, as the benchmark runs it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.scripts_support import load_script

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_worst_case_peak_is_what_the_benchmark_measures(tmp_path):
    readme = (ROOT / "docs" / "RELIABILITY.md").read_text()
    claim = re.search(r"the worst, a 14 MB header nested 7,000,000 levels deep, (\d+) MB", readme)
    assert claim, "docs/RELIABILITY.md no longer names its worst case"
    bench = load_script("benchmarks/reliability_peak.py")
    rc, peak_mb, message = bench.peak(["info", "--checkpoint", str(bench.deep_header(tmp_path))])
    assert rc == 2, message
    claimed = int(claim.group(1))
    assert abs(peak_mb - claimed) <= 0.1 * claimed, f"measured {peak_mb} MB, docs/RELIABILITY.md says {claimed} MB"
