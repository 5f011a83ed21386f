#!/usr/bin/env bash
# Create .venv (if missing) and install the project with the extras in EXTRAS (default "test"; "test,browser" for the
# browser tests too, "" for the app alone), every package at its version in requirements.lock and checked against the
# lock's sha256 hashes (pip's hash-checking mode): a file that does not match is refused. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
EXTRAS="${EXTRAS-test}"
LOCK=requirements.lock
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "scripts/setup.sh needs Python 3.11 or newer (the lock's numpy, pandas and streamlit do): set PYTHON" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
install=(.venv/bin/pip install -q --disable-pip-version-check --require-hashes)
# pip and setuptools first, from their own entries in the lock: a venv's bundled pip may be older than 26.1, the
# first that checks what a constraints file pins against that file's hashes (the steps below rely on it), and
# setuptools builds the project at the end.
"${install[@]}" -r <(awk '/^[^ #]/ { keep = /^(pip|setuptools)==/ } keep' "$LOCK")
# torch next, so that a system whose torch the lock does not admit (see the lock's header) stops here, early.
"${install[@]}" -c "$LOCK" torch
# The project's requirements and those of EXTRAS (pyproject.toml), each at the lock's version and hashes.
requirements=$(.venv/bin/python scripts/lockfile.py requirements "$EXTRAS")
mapfile -t requirements <<< "$requirements"
"${install[@]}" -c "$LOCK" "${requirements[@]}"
# The project itself, editable: its dependencies are in already, and the lock's setuptools builds it (no isolated
# build environment, which would fetch a setuptools the lock does not check), without its notice on editable installs.
PYTHONWARNINGS="ignore:Editable installation" \
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
