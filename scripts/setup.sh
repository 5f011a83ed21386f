#!/usr/bin/env bash
# Create .venv (if missing) and install the project with its test tools (EXTRAS, default "test"). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
EXTRAS="${EXTRAS:-test}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# torch first, at the lock's version: a bare `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/pip install -q --disable-pip-version-check "$(grep -i '^torch==' constraints.txt)"
# Every other package at the versions the suite was tested with (constraints.txt; refresh: bash scripts/lock.sh).
.venv/bin/pip install -q --disable-pip-version-check -c constraints.txt -e ".[$EXTRAS]"
