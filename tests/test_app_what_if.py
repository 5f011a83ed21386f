"""Explore's what-ifs show something (issue 25 item 6), on the shipped models under AppTest: masked inputs
marked wherever attention is drawn, the decoding cap said out loud, the temperature example that changes a
translation, the hidden-states section's state in the link; and a link's bad step or position named the way
the page counts (from 1)."""

from __future__ import annotations


import pytest
from streamlit.testing.v1 import AppTest

from explorer.app import views
from explorer.app.figures.attention import MASKED_NAME

from app_support import drawn_charts, lookup_column, lookup_tables

TIMEOUT = 180


def open_app(**params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def figure(at: AppTest, key: str) -> dict:
    charts = drawn_charts(at)
    if key not in charts:
        raise AssertionError(f"no chart {key}")
    return charts[key]


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning]


@pytest.fixture(autouse=True)
def shipped_models():
    from app_support import pretrained_at
    from explorer.checkpoints import checkpoint
    with pretrained_at(checkpoint.PRETRAINED_DIR):
        yield


def test_a_masked_input_is_marked_and_the_cut_is_said():
    """The issue's case: reverse with an input masked looped to 22 tokens, and nothing showed which input
    was hidden in the changed α."""
    at = open_app(model="reverse", input="31415926", mask="3")
    assert any("cut at 9 steps" in w and "8 symbols" in w for w in warnings(at)), warnings(at)
    changed = figure(at, "explore_fig_changed")
    marks = [d for d in changed["data"] if d.get("name") == MASKED_NAME]
    assert marks and set(marks[0]["x"]) == {"<s>3:4</s>"} and len(marks[0]["x"]) == 9
    assert "<s>3:4</s>" in changed["data"][0]["x"] and "<s>3:4</s>" not in figure(at, "explore_fig_original")["data"][0]["x"]
    assert any(d.get("name") == MASKED_NAME for d in figure(at, "explore_heatmap")["data"])
    assert "masked" in figure(at, "explore_fig_weights")["data"][0]["text"]
    (table,) = lookup_tables(at)
    assert lookup_column(table, "token")[2] == "4 (masked)" and lookup_column(table, "score")[2] == "masked"
    assert at.query_params["mask"] == "3"


@pytest.mark.parametrize("params, message", [
    ({"pin": "40:1"}, "the what-if pins step 40, but decoding has steps 1–9"),
    ({"pin": "2:12"}, "the what-if pins attention to x12, but the input has x1–x8"),
    ({"mask": "9"}, "the what-if masks x9, but the input has x1–x8"),
    ({"force": "10:1"}, "the what-if forces a token at step 10, but decoding has steps 1–9"),
    ({"mask": "3", "pin": "2:3"}, "the what-if pins step 2 to x3, but x3 is masked"),
])
def test_a_links_bad_step_or_position_is_named_counting_from_one(params, message):
    """Before, the page said e.g. 'cannot pin at step 39: decoding has steps 0–71' for pin=40:1."""
    at = open_app(model="reverse", input="31415926", **params)
    shown = [e.value for e in at.error] + warnings(at)
    assert any(message in text for text in shown), shown
    assert not any("steps 0–" in text or "positions 0–" in text for text in shown)
    assert at.session_state["explore_masked"] == [] and at.session_state["explore_pins"] == []


def test_the_hidden_states_section_opens_from_the_link():
    at = open_app(model="reverse", input="31415926", explore_hidden="true")
    assert at.session_state["explore_hidden"] is True
    figure(at, "explore_fig_h")  # drawn only while the section is open
    closed = open_app(model="reverse", input="31415926")
    assert "explore_fig_h" not in drawn_charts(closed)


def test_the_temperature_example_changes_a_translation_in_one_click():
    demo = views.TEMPERATURE_DEMO
    at = open_app(model="reverse", input="31415926")
    at.button(key="explore_temperature_demo").click()
    at.run()
    assert not at.exception
    assert (at.session_state["explore_model"], at.session_state["explore_input"]) == (demo.model, demo.text)
    assert at.session_state["explore_temperature"] == demo.temperature
    assert at.query_params["temp"] == f"{demo.temperature:g}" and at.query_params["model"] == demo.model
    assert any(demo.look_at in i.value for i in at.info)
    headings = [m.value for m in at.markdown if m.value.startswith("#### ")]
    original = next(h for h in headings if h.startswith("#### Original:"))
    changed = next(h for h in headings if h.startswith("#### Changed:"))
    assert original.split(":", 1)[1] != changed.split(":", 1)[1], "the example must change the output"
    assert any("first differ at step" in w for w in warnings(at))


def test_pinning_a_masked_input_is_refused_with_a_message():
    """All the weight on an input attention may not see: the Pin button refused nothing before."""
    at = open_app(model="reverse", input="31415926", mask="3")
    at.selectbox(key="explore_pin_pos").set_value(2)
    at.button(key="explore_pin").click().run()
    assert not at.exception
    assert any("x3 is masked" in w for w in warnings(at)), warnings(at)
    assert at.session_state["explore_pins"] == [] and at.session_state["explore_masked"] == [2]


def test_the_cli_refuses_a_pin_on_a_masked_input_in_one_line(capsys):
    from explorer.__main__ import main
    code = main(["trace", "--checkpoint", "reverse", "--input", "31415926", "--mask", "3", "--pin", "2:3"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "position 3: it is masked" in err


def test_the_query_key_space_explains_each_score_function_in_its_own_terms():
    """The text beside the query–key picture described dot-product attention for every model (the shipped
    translation models are additive): each score function has its own, naming its own formula."""
    from explorer import defaults, equations
    from explorer.app.pages.explore_panels import QK_SPACE_NOTES
    scored = [kind for kind in defaults.ATTENTIONS if kind != "none"]
    assert sorted(QK_SPACE_NOTES) == sorted(scored)
    for kind in scored:
        assert equations.score_title(kind) in QK_SPACE_NOTES[kind]
    assert "direction" in QK_SPACE_NOTES["dot"] and "not compared with the query by direction" in QK_SPACE_NOTES["additive"]
