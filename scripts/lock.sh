#!/usr/bin/env bash
# Refresh requirements.lock, the lock: every package that pyproject.toml's requirements need with all its extras,
# its build backend (setuptools) and pip, each pinned with the sha256 of every file of that version (pip-compile from
# pip-tools, in a throwaway venv), then torch's entry widened to PyPI's macOS and Windows wheels and the header
# written (scripts/lockfile.py). Pins already in the lock are kept: arguments go to pip-compile, e.g. --upgrade
# (every package) or --upgrade-package streamlit. Then run the test suite (bash scripts/test.sh) and commit the lock.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "pip-tools==7.7.0"
"$tmp/venv/bin/pip-compile" -q --generate-hashes --all-extras --allow-unsafe \
  --strip-extras --no-header --no-emit-index-url --no-emit-find-links --output-file requirements.lock \
  pyproject.toml scripts/lock.in "$@"
"$tmp/venv/bin/python" scripts/lockfile.py finish requirements.lock
echo "wrote requirements.lock ($(grep -c -E '^[A-Za-z0-9].*==' requirements.lock) pins)"
