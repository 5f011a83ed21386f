#!/usr/bin/env bash
# Install (if needed) and run the whole test suite, the browser tests included, on two workers (pytest-xdist):
# each module runs on one worker (tests/conftest.py makes it an xdist group, so its module-scoped fixtures are
# built once), the modules holding a slow, browser or multiprocess test first (hence --no-loadscope-reorder:
# xdist would otherwise start the modules with the most tests first and leave the long ones to the end).
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
exec .venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder "$@"
