#!/usr/bin/env bash
# Create .venv (if missing) and install the project with its test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# torch first and pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/pip install -q --disable-pip-version-check "torch==2.13.0"
# Every other package within the versions the suite was tested with (constraints.txt; refresh: bash scripts/lock.sh).
.venv/bin/pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]"
