#!/usr/bin/env bash
# Install (if needed) and run the whole test suite, the browser tests included, on two workers (pytest-xdist):
# each module runs on one worker (--dist loadfile: its module-scoped fixtures, trained models and servers, are built
# once), the modules holding a slow, browser or multiprocess test first (tests/conftest.py orders them; hence
# --no-loadscope-reorder, or xdist would start the modules with the most tests first and leave the long ones last).
# Extra arguments go to pytest, e.g. the quick tier: bash scripts/test.sh -m "not slow and not browser and not multiprocess"
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=test,browser bash scripts/setup.sh
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing: install Debian's chromium package for the browser tests" >&2
  fi
fi
exec .venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
