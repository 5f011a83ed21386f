#!/usr/bin/env bash
# Install (if needed) and start the app on http://127.0.0.1:8501 with the shipped models.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/streamlit run app.py "$@"
