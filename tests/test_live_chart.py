"""The live chart (explorer/app/pages/live_chart.py) under AppTest: what it sends the browser, and that the folder
of the installed plotly.js it names is declared inside the script run, so the server serves it even when the module
was first imported outside a run (the server's preload thread does that: a declaration made at import was then
lost, and the page's plotly.js was a 404 whenever the preload imported the page first)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import plotly
import plotly.graph_objects as go
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.testing.v1 import AppTest

from explorer.app.pages import live_chart  # imported here, outside any script run, as the preload thread does

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import plotly.graph_objects as go
from explorer.app.pages import live_chart

fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4]))
live_chart.draw(live_chart.figure_json(fig), key="bars", config={"displaylogo": False})
"""


def test_the_chart_sends_the_figure_and_the_installed_plotly_js_declared_in_the_run(monkeypatch):
    declared = []
    real = st.components.v1.declare_component

    def spy(name, path=None, **kwargs):
        declared.append((name, path, get_script_run_ctx() is not None))
        return real(name, path=path, **kwargs)

    monkeypatch.setattr(st.components.v1, "declare_component", spy)
    at = AppTest.from_string(SCRIPT).run()
    assert not at.exception, [e.value for e in at.exception]
    (element,) = [el for el in at.get("bidi_component") if el.proto.component_name == live_chart.NAME]
    data = live_chart.sent(element.proto.json)
    assert json.loads(data["spec"]) == json.loads(go.Figure(go.Bar(x=[1, 2], y=[3, 4])).to_json())
    assert data["plotly"].startswith("component/") and data["plotly"].endswith("/" + live_chart.PLOTLY_FILE)
    assert ("plotly_js", str(live_chart.PLOTLY_DIR), True) in declared  # in the run: kept by its runtime
    assert (live_chart.PLOTLY_DIR / live_chart.PLOTLY_FILE).is_file()
    assert data["select"] is False


def test_a_chart_is_sent_without_importing_pandas():
    """Streamlit checks each value of a component's dict data for a dataframe, importing pandas and pyarrow on the
    way (0.45 s on a cold start, before the first chart could reach the browser); the chart's data travels in a
    list, which it sends as it is. In a fresh interpreter: this process has pandas loaded already."""
    code = ("import sys\n"
            "from streamlit.testing.v1 import AppTest\n"
            f"at = AppTest.from_string({SCRIPT!r}).run()\n"
            "assert not at.exception and at.get('bidi_component')\n"
            "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_click_comes_back_as_the_selection():
    state = {"select": {"selection": {"points": [{"x": 1, "y": 2, "customdata": [4, 2]}]}}}
    assert live_chart.clicked(state) == state["select"]
    assert live_chart.clicked({"select": None}) is None
    assert live_chart.clicked(None) is None


def _bundle_header() -> str:
    return (live_chart.PLOTLY_DIR / live_chart.PLOTLY_FILE).read_text(encoding="utf-8")[:200]


def test_the_cartesian_bundle_is_the_installed_plotly_js_version():
    """The figures' JSON comes from the installed plotly package: the browser's plotly.js must be its version."""
    header = _bundle_header()
    assert "plotly.js (cartesian - minified)" in header
    assert f"v{plotly.offline.get_plotlyjs_version()}\n" in header, header


def test_every_trace_type_the_app_draws_is_in_the_bundle():
    """A trace type outside the cartesian bundle would be a chart that cannot be drawn: every go.<Trace>( in the
    app's figures and pages is one of the bundle's trace modules (its README lists them, as the package's does)."""
    listed = (live_chart.PLOTLY_DIR / "README.md").read_text(encoding="utf-8").split("with the trace modules")[1]
    modules = set(re.findall(r"`([a-z0-9]+)`", listed.split(".")[0]))
    assert {"bar", "heatmap", "scatter"} <= modules
    app = Path(live_chart.__file__).resolve().parents[1]
    used = {name.lower() for path in [*app.glob("figures/*.py"), *app.glob("pages/*.py")]
            for name in re.findall(r"\bgo\.([A-Z][A-Za-z0-9]*)\(", path.read_text(encoding="utf-8"))} - {"figure"}
    assert used and used <= modules, used - modules
