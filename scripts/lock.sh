#!/usr/bin/env bash
# Refresh constraints.txt, the lock: resolve the project's dependencies (every extra) afresh in a throwaway venv and
# pin every version that resolution picked, torch included (at TORCH, default the lock's current pin: the CPU wheel
# is installed first, as setup.sh does). Run after changing pyproject.toml's dependencies, then run the test suite
# (bash scripts/test.sh) before committing the new file.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH="${TORCH:-$(grep -i '^torch==' constraints.txt)}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "$TORCH"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check ".[test,browser,fonts]"
{
  echo "# The lock: versions the test suite passed with, torch included; setup.sh installs them. Refresh: bash scripts/lock.sh"
  "$tmp/venv/bin/pip" freeze --disable-pip-version-check --exclude-editable \
    | grep -v -i -E '^attention-explorer(==| @)' | sort -f
} > constraints.txt
echo "wrote constraints.txt ($(grep -c '==' constraints.txt) pins)"
