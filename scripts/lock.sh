#!/usr/bin/env bash
# Refresh constraints.txt: resolve the project's dependencies afresh in a throwaway venv and pin
# every version that resolution picked (torch is pinned in setup.sh, not here). Run after changing
# pyproject.toml's dependencies, then run the test suite before committing the new file.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "torch==2.13.0"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check ".[test,fonts]"
{
  echo "# Versions the test suite passed with; setup.sh installs within them. Refresh: bash scripts/lock.sh"
  "$tmp/venv/bin/pip" freeze --disable-pip-version-check --exclude-editable \
    | grep -v -i -E '^(torch|attention-explorer)(==| @)' | sort -f
} > constraints.txt
echo "wrote constraints.txt ($(grep -c '==' constraints.txt) pins)"
