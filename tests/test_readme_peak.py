"""The README's reliability section reports the worst hostile case's peak memory: the number must be what
benchmarks/reliability_peak.py measures for that case now (it said 475 MB, measured before the depth scan
was cut to one byte per bracket; 395 MB by 2026-12-05). A fresh process each time, as the benchmark runs it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def benchmark():
    spec = importlib.util.spec_from_file_location("reliability_peak", ROOT / "benchmarks" / "reliability_peak.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_worst_case_peak_is_what_the_benchmark_measures(tmp_path):
    readme = (ROOT / "README.md").read_text()
    claim = re.search(r"the worst, a 14 MB header nested 7,000,000 levels deep, (\d+) MB", readme)
    assert claim, "the README's reliability section no longer names its worst case"
    bench = benchmark()
    rc, peak_mb, message = bench.peak(["info", "--checkpoint", str(bench.deep_header(tmp_path))])
    assert rc == 2, message
    claimed = int(claim.group(1))
    assert abs(peak_mb - claimed) <= 0.1 * claimed, f"measured {peak_mb} MB, the README says {claimed} MB"
