"""Explore on the shipped translation models with text as people type it: what the model read, and what its
output copies from the input through attention."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest


def explore(model: str, text: str) -> AppTest:
    st.cache_resource.clear()
    at = AppTest.from_file("../app.py", default_timeout=120)
    at.query_params["model"] = model
    at.query_params["input"] = text
    at.run()
    assert not at.exception, at.exception
    return at


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


def test_explore_shows_the_copied_output_and_says_what_was_copied_and_where():
    at = explore("eng-fra", "Thaddeus has 37 books")
    shown = at.metric[0].value
    assert "Thaddeus" in shown and "37" in shown
    said = captions(at)
    assert "Copied from the input through attention: “Thaddeus” at step" in said
    assert "“37” at step" in said


@pytest.mark.parametrize("model", ["eng-fra", "eng-cmn"])
def test_a_sentence_typed_without_its_final_mark_is_read_with_one_and_says_so(model):
    said = captions(explore(model, "How are you"))
    assert "reads this as “How are you?”" in said and "final mark gets one" in said
    assert "sentence case" not in said
    assert "reads this as" not in captions(explore(model, "How are you?"))
    shouted = captions(explore(model, "WHERE IS THE STATION 🚉"))
    assert "reads this as “Where is the station?”" in shouted and "sentence case" in shouted
