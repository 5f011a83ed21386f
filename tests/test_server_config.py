"""The server settings the app ships in .streamlit/config.toml, as Streamlit itself reads them."""

from __future__ import annotations

import json
import os
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



PRELOAD = """
import json, os, sys
os.environ.pop("OMP_NUM_THREADS", None)
from explorer.app import serve
unarmed = serve.engine_after_first_run()
serve.arm_engine()  # as `main` does
serve.ENGINE_DELAY_S = 0.0
import gc
frozen = [gc.get_freeze_count()]
thread = serve.engine_after_first_run()
frozen.append(gc.get_freeze_count())
again = serve.engine_after_first_run()
thread.join(timeout=240)
frozen.append(gc.get_freeze_count())
import torch
print(json.dumps({"unarmed": unarmed is None, "again": again is None, "wanted": list(serve.ENGINE), "frozen": frozen,
                  "imported": [m for m in serve.ENGINE if m in sys.modules],
                  "omp": os.environ.get("OMP_NUM_THREADS"), "threads": torch.get_num_threads()}))
"""


def test_the_served_app_imports_the_engine_after_the_first_run_with_one_torch_thread():
    """`python -m explorer.app.serve` imports torch in the background once, after the first run (app.py calls it
    after every run; under AppTest or a plain `streamlit run` it does nothing); torch must still start with one
    thread, as app.py asks before its own import (two spinning threads made every trace 15-20x slower on a shared
    2-core machine)."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", PRELOAD], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["unarmed"] and found["again"]
    assert found["imported"] == found["wanted"] and "explorer.engine.trace" in found["wanted"]
    assert found["omp"] == "1" and found["threads"] == 1
    before, after_first_run, after_engine = found["frozen"]
    assert before < after_first_run < after_engine  # the first run's imports, then the engine's, kept out of the scans


BEFORE_SERVING = """
import gc, inspect, json
from streamlit import delta_generator
import streamlit as st
from explorer.app import serve
marked_before = delta_generator._use_warning_has_been_displayed
serve.before_serving()
frozen = gc.get_freeze_count()
def no_stack(*args, **kwargs):
    raise AssertionError("the first element inspected the stack")
inspect.stack = no_stack
st.empty()  # a process's first element
print(json.dumps({"before": marked_before, "after": delta_generator._use_warning_has_been_displayed,
                  "frozen": frozen}))
"""


def test_the_served_app_spares_the_first_view_streamlit_s_stack_check_and_the_imports_scans():
    """`python -m explorer.app.serve` marks Streamlit's "run me with streamlit run" check done before serving (at a
    process's first element it read the source of every frame on the script's stack: 0.1-0.27 s of the first view)
    and freezes what is imported (Streamlit collects every generation after each run)."""
    out = subprocess.run([sys.executable, "-c", BEFORE_SERVING], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["before"] is False and found["after"] is True
    assert found["frozen"] > 10_000
