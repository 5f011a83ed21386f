#!/usr/bin/env bash
# Install (if needed) and run the whole test suite, the browser tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing: install Debian's chromium package for the browser tests" >&2
  fi
fi
exec .venv/bin/python -m pytest "$@"
