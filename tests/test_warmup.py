"""The warm-up: a session's first run sends a hidden chart, formula and table before the page's
heavy imports (so the browser loads their renderers meanwhile) and removes them once the page has drawn."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from explorer.pages import warmup

APP = str(Path(__file__).resolve().parent.parent / "app.py")

UNFINISHED = """
import streamlit as st
from explorer.pages import warmup
warmup.start()
st.write("page")
"""


def _keys(at: AppTest) -> set[str]:
    return {el.proto.id for el in at.get("plotly_chart")}


def test_first_run_sends_one_hidden_element_of_each_kind_then_nothing():
    at = AppTest.from_string(UNFINISHED).run()
    assert not at.exception
    assert any("warmup_chart" in key for key in _keys(at))
    assert [el.value for el in at.latex] == ["$$\nx\n$$"]
    assert len(at.dataframe) == 1
    hide = [el for el in at.get("html") if warmup.CONTAINER_KEY in el.proto.body]
    assert hide and "display: none" in hide[0].proto.body
    at.run()  # the session's second run: the browser has the renderers
    assert not at.exception
    assert not _keys(at) and not at.latex and not at.dataframe
    assert [el.value for el in at.markdown] == ["page"]


def test_the_app_removes_the_warm_up_once_the_page_has_drawn():
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception
    assert at.session_state[warmup.STATE_KEY]
    keys = _keys(at)
    assert keys, "Explore draws its charts"
    assert not any("warmup" in key for key in keys)
    assert "$$\nx\n$$" not in [el.value for el in at.latex]
