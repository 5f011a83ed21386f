"""Under CI=true a missing browser fails the browser tests; elsewhere it skips them.

A subprocess runs one real browser test with EXPLORER_CHROMIUM pointing at a path with no Chromium
(simulating a machine without it) and reads pytest's outcome.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE_BROWSER_TEST = "tests/test_browser_fonts.py"


def run_without_chromium(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["EXPLORER_CHROMIUM"] = str(ROOT / "no-such-chromium")
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", ONE_BROWSER_TEST, "-q", "-p", "no:cacheprovider",
                           "-rs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_ci_fails_when_chromium_is_missing():
    out = run_without_chromium("true")
    assert out.returncode == 1, out.stdout[-2000:]
    assert "CI=true requires the browser tests to run" in out.stdout
    assert "SKIPPED" not in out.stdout


def test_without_ci_a_missing_chromium_skips():
    out = run_without_chromium(None)
    assert out.returncode == 0, out.stdout[-2000:]
    assert "SKIPPED [1]" in out.stdout and "no Chromium at" in out.stdout
