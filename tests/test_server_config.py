"""The server settings the app ships in .streamlit/config.toml, as Streamlit itself reads them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

READ = """
import json
from streamlit import config
from streamlit.web.server.starlette.starlette_server import _get_websocket_settings
config.get_config_options(force_reparse=True)
print(json.dumps({"ping": _get_websocket_settings(), "address": config.get_option("server.address"),
                  "upload_mb": config.get_option("server.maxUploadSize")}))
"""


def test_websocket_pings_tolerate_a_starved_browser():
    """Streamlit's default (ping every 30 s, drop after 30 s without a pong) dropped a loaded browser's
    connection in the load test: pongs took up to 28 s, one over 30. The app's config waits 120 s."""
    out = subprocess.run([sys.executable, "-c", READ], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    settings = json.loads(out.stdout.strip().splitlines()[-1])
    interval, timeout = settings["ping"]
    assert interval >= 120 and timeout >= 120
    assert settings["address"] == "127.0.0.1" and settings["upload_mb"] == 100


def test_the_config_also_loads_where_streamlit_runs_in_development_mode():
    """Streamlit installed outside site-packages (pip --target, as on a GPU machine here) runs in development
    mode, which refuses a server.port in the config: the first script run of each process failed there. The
    app serves on Streamlit's default port, 8501, the README's address, without setting it."""
    code = ("from streamlit import config\n"
            "config.get_config_options(force_reparse=True, options_from_flags={'global.developmentMode': True})\n"
            "print(config.get_option('server.port'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "8501"
