"""The benchmark's report: the stored run's table in benchmarks/RESULTS.md is reprinted from its measurements
(benchmarks/results.json) by the same code that prints a live run's table, and every path the docs name exists."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results.json"


def test_the_stored_run_reprints_as_the_table_quoted_in_the_results_page():
    out = subprocess.run([sys.executable, "benchmarks/run.py", "--table", str(RESULTS)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    metrics = [row.split("|")[1].strip() for row in rows[1:]]
    for start in ("Time to 99%, reverse 5–15", "Time to 99%, reverse 20–30", "Training throughput",
                  "Trace of a 30-token input", "App: change the decoder step", "App: new input",
                  "Cold start", "Server memory"):
        assert any(m.startswith(start) for m in metrics), start
    page = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    for row in rows:
        assert row in page, row
    stored = json.loads(RESULTS.read_text())
    assert len(stored["results"]["train_short"]["ours"]) == len(stored["seeds"])  # every seed was measured


def test_every_repository_path_the_docs_name_exists():
    """docs/PERFORMANCE.md named explorer/parallel.py long after it was replaced: the current docs may not."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = re.compile(r"(?<![\w./-])((?:explorer|benchmarks|tests|scripts|docs)/[\w./-]*\w)")
    missing = [f"{page.name}: {path}" for page in pages
               for path in named.findall(page.read_text(encoding="utf-8")) if not (ROOT / path).exists()]
    assert not missing, missing
