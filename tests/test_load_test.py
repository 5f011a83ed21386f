"""The load test still drives today's app: a small protocol-client run (two sessions and the training
session) completes without errors and measures the training alone and during the burst. It had broken
silently when the Train page changed (it looked for the start button before knowing the app's pages)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_small_protocol_run_completes_and_measures_the_training(tmp_path):
    out = tmp_path / "load.json"
    run = subprocess.run([sys.executable, "benchmarks/load_test.py", "--client", "protocol", "--sessions", "2",
                          "--solo-seconds", "3", "--steps", "1", "--time-limit", "240", "--json", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["errors"] == 0, result["error_messages"]
    assert result["sessions_held"] == 2
    rate = result["training_rate"]
    assert rate["solo_steps_per_s"] > 0 and rate["burst_steps_per_s"] > 0, rate
    assert 0 < result["server_alone_rss_peak_mb"] < result["server_rss_peak_mb"]
