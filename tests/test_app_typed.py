"""Explore on the shipped translation models with text as people type it: what the model read, and what its
output copies from the input through attention."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest


def explore(model: str, text: str, **params: str) -> AppTest:
    st.cache_resource.clear()
    at = AppTest.from_file("../app.py", default_timeout=120)
    at.query_params["model"] = model
    at.query_params["input"] = text
    for key, value in params.items():
        at.query_params[key] = value
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


def test_a_number_the_model_left_out_is_put_back_and_the_page_says_so():
    at = explore("eng-fra", "Has Flight 123 been delayed?")
    assert "123" in at.metric[0].value
    assert "“123” after step" in captions(at) and "the model left it out" in captions(at)


def test_beam_candidates_show_their_copies_in_the_table_and_the_traced_candidate():
    at = explore("eng-fra", "Thaddeus has 37 books", mode="beam", width="3")
    table = at.dataframe[0].value
    assert all("37" in out and "Thaddeus" in out for out in table["output"])
    assert "Thaddeus" in at.metric[0].value and "37" in at.metric[0].value
    assert "Copied from the input through attention: “Thaddeus” at steps" in captions(at)


@pytest.mark.parametrize("model", ["eng-fra", "eng-cmn"])
def test_a_sentence_typed_without_its_final_mark_is_read_with_one_and_says_so(model):
    said = captions(explore(model, "How are you"))
    assert "reads this as “How are you?”" in said and "final mark gets one" in said
    assert "sentence case" not in said
    assert "reads this as" not in captions(explore(model, "How are you?"))
    shouted = captions(explore(model, "WHERE IS THE STATION 🚉"))
    assert "reads this as “Where is the station?”" in shouted and "sentence case" in shouted
