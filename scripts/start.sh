#!/usr/bin/env bash
# Install (if needed) and start the app on http://127.0.0.1:8501 with the shipped models.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# `streamlit run app.py` with room for long addresses (explorer/app/serve.py: a 100 KB ?input= link got a blank page)
exec .venv/bin/python -m explorer.app.serve "$@"
