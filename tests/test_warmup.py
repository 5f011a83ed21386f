"""The warm-up: a session's first run sends hidden elements of every kind the pages draw before the
page's heavy imports (so the browser loads their renderers meanwhile) and removes them once the page
has drawn. On Explore, whose first view draws only live charts, the chart it sends is a live chart."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_support import drawn_charts
from explorer.app.pages import live_chart, warmup

APP = str(Path(__file__).resolve().parent.parent / "app.py")

UNFINISHED = """
import streamlit as st
from explorer.app.pages import warmup
warmup.start(live_charts=LIVE)
st.write("page")
"""

KINDS = ("plotly_chart", "latex", "selectbox", "text_input", "number_input", "slider", "multiselect",
         "button_group", "radio", "checkbox", "button", "download_button", "metric", "dataframe")


def _warmup_keys(at: AppTest) -> list[str]:
    return [el.proto.id for el in at.get("plotly_chart") if "warmup" in el.proto.id]


def _live_charts(at: AppTest) -> list:
    return [el for el in at.get("bidi_component") if el.proto.component_name == live_chart.NAME]


@pytest.mark.parametrize("live", [False, True])
def test_first_run_sends_hidden_elements_of_each_kind_then_nothing(live):
    at = AppTest.from_string(UNFINISHED.replace("LIVE", str(live)), default_timeout=60).run()  # a loaded machine
    assert not at.exception
    kinds = [k for k in KINDS if k not in ("plotly_chart", "dataframe")] if live else KINDS  # Explore: no grid
    missing = [kind for kind in kinds if len(at.get(kind)) != 1]
    assert not missing, f"no warm-up element of kind {missing}"
    assert len(_live_charts(at)) == live and len(at.get("plotly_chart")) == (not live)  # one chart, of one kind
    assert at.latex[0].value == "$$\nx\n$$"
    assert all(w.disabled for w in (*at.selectbox, *at.text_input, *at.number_input, *at.slider, *at.button))
    hide = [el for el in at.get("html") if warmup.CONTAINER_KEY in el.proto.body]
    assert hide and "display: none" in hide[0].proto.body
    at.run()  # the session's second run: the browser has the renderers
    assert not at.exception
    assert all(not at.get(kind) for kind in KINDS) and not _live_charts(at)
    assert [el.value for el in at.markdown] == ["page"]


def test_the_app_removes_the_warm_up_once_the_page_has_drawn(monkeypatch):
    sent = []
    real = warmup.start
    monkeypatch.setattr(warmup, "start", lambda **kw: sent.append(kw) or real(**kw))
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert sent == [{"live_charts": True}], "Explore, the first page, draws live charts only: they are warmed"
    assert not at.exception
    assert at.session_state[warmup.STATE_KEY]
    assert drawn_charts(at), "Explore draws its charts"
    assert not _warmup_keys(at) and not [el for el in _live_charts(at) if warmup.K in el.proto.id]
    assert not [w for w in (*at.selectbox, *at.text_input, *at.button) if w.key and w.key.startswith(warmup.K)]
    assert "$$\nx\n$$" not in [el.value for el in at.latex]


def _place(at: AppTest, text: str) -> int:
    """Where in the page's main block the markdown `text` is."""
    return next(i for i, node in at.main.children.items() if getattr(node, "value", None) == text)


@pytest.mark.parametrize("live", [False, True])
def test_every_element_keeps_its_place_after_the_first_run(live):
    """The warm-up's place stays taken (empty) on later runs: without it each element's place moved up one on
    the second run, and the browser kept the first run's elements beside the second's until that run ended
    (Explore showed a Play and a Pause button at once, and Space pressed both)."""
    at = AppTest.from_string(UNFINISHED.replace("LIVE", str(live)), default_timeout=60).run()
    first = _place(at, "page")
    at.run()
    assert not at.exception
    assert _place(at, "page") == first
