"""The Explore page under AppTest: every control, every decoding mode, interventions, URL state and bad
input (a message in the page, the last good view kept, never an exception).

The app runs on small untrained checkpoints (tests/explore_models.py) in a temporary folder.
"""

from __future__ import annotations

import base64

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import explorer.engine.trace
from explorer.checkpoints import checkpoint
from explorer.checkpoints.registry import SessionModels

from app_support import drawn_charts, keyed_places, lookup_tables, lookup_weights
from explore_models import build_models

TIMEOUT = 120
# Steps of the untrained copy model on its first example 31415926: it never writes <eos>, so decoding stops at
# the cap a copy allows (explorer/engine/lengths.py): 8 symbols and <eos>.
STEPS = 9


def open_app(models_dir, **params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def state(at: AppTest, name: str):
    return at.session_state["explore_" + name]


def ok(at: AppTest) -> AppTest:
    """Run and check there was no exception (a traceback in the page)."""
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def figure(at: AppTest, key: str) -> dict:
    """The plotly figure drawn under a chart key, as JSON."""
    charts = drawn_charts(at)
    if key not in charts:
        raise AssertionError(f"no chart {key}")
    return charts[key]


def decode(array) -> np.ndarray:
    if isinstance(array, dict) and "bdata" in array:
        data = np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
        shape = array.get("shape")
        if isinstance(shape, str):  # plotly 7 writes "12, 8"
            shape = [int(n) for n in shape.split(",")]
        return data.reshape(shape) if shape is not None else data
    return np.asarray(array)


def step_slider(at: AppTest):
    """The step slider (its key changes whenever the step moves some other way)."""
    (slider,) = [s for s in at.slider if s.label == "Step t"]
    return slider


def metric(at: AppTest, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric {label_start!r}: {[m.label for m in at.metric]}")


# --- opening the page --------------------------------------------------------------------------------

def test_opens_on_explore_with_the_first_model_and_its_first_example(models_dir):
    at = open_app(models_dir)
    assert at.title[0].value.endswith("Explore")
    assert state(at, "model") == "copy"
    assert state(at, "input") == "31415926"
    assert state(at, "step") == 1
    assert metric(at, "Correct answer") == "31415926"
    assert metric(at, "Steps") == str(STEPS)
    assert {k: at.query_params[k] for k in ("model", "input", "mode", "step")} == \
        {"model": "copy", "input": "31415926", "mode": "greedy", "step": "1"}
    assert at.latex, "the four steps show their equations"
    assert not errors(at)


def test_the_heatmap_shows_the_traced_weights_with_the_current_step_marked(models_dir):
    at = open_app(models_dir)
    at.button(key="explore_next").click()
    ok(at)
    spec = figure(at, "explore_heatmap")
    bundle = checkpoint.load(models_dir / "copy.safetensors")
    expected = explorer.engine.trace.trace(bundle, "31415926")
    assert np.allclose(decode(spec["data"][0]["z"]), expected.weights, atol=1e-6)
    rect = spec["layout"]["shapes"][0]
    assert (rect["y0"], rect["y1"]) == (0.5, 1.5)  # step t = 2 (0-based row 1)


def test_the_hidden_states_are_drawn_once_their_section_is_opened_with_the_traced_numbers(models_dir):
    """Closed at first (its charts are not sent); opened, its first tab shows every hᵢ and sₜ of the trace."""
    at = open_app(models_dir)
    hidden_keys = ("explore_fig_h", "explore_fig_s")
    assert not set(hidden_keys) & set(drawn_charts(at))
    at.session_state["explore_hidden"] = True  # what opening the expander in a browser sets
    ok(at)
    expected = explorer.engine.trace.trace(checkpoint.load(models_dir / "copy.safetensors"), "31415926")
    assert np.allclose(decode(figure(at, "explore_fig_h")["data"][0]["z"]), expected.encoder_states, atol=1e-6)
    states = decode(figure(at, "explore_fig_s")["data"][0]["z"])  # s_0 from the encoder, then every s_t
    assert np.allclose(states[1:], expected.decoder_states, atol=1e-6)


@pytest.mark.parametrize("name", ["copy", "dates", "reverse-none", "tiny-fra"])
def test_every_model_renders(models_dir, name):
    at = open_app(models_dir)
    at.selectbox(key="explore_model").set_value(name)
    ok(at)
    assert state(at, "model") == name
    assert not errors(at), errors(at)
    has_heatmap = "explore_heatmap" in drawn_charts(at)
    if name == "reverse-none":
        assert not has_heatmap
        assert any("no attention" in i.value for i in at.info)
        assert not lookup_tables(at)  # no lookup table without attention
    else:
        assert has_heatmap and len(lookup_tables(at)) == 1


def test_switching_model_keeps_an_input_the_new_model_reads(models_dir):
    at = open_app(models_dir)
    at.selectbox(key="explore_model").set_value("reverse-none")
    ok(at)
    assert state(at, "input") == "31415926"
    at.selectbox(key="explore_model").set_value("dates")
    ok(at)
    assert state(at, "input") == "31415926"  # the dates model reads digits too (no truth: not a date)


def test_switching_from_a_toy_task_to_translation_takes_the_new_models_first_example(models_dir):
    """Digits a toy model read are no sentence: eng-fra "translated" 25 digits into 3155555555...."""
    at = open_app(models_dir)
    toy = state(at, "model")
    at.selectbox(key="explore_model").set_value("tiny-fra")
    ok(at)
    first = at.pills(key="explore_example").options[0]
    assert state(at, "input") == first != "31415926"
    at.selectbox(key="explore_model").set_value(toy)
    ok(at)
    assert state(at, "input") == at.pills(key="explore_example").options[0]  # a sentence is no toy input


def test_translation_says_what_the_model_read_when_it_is_not_what_was_typed(models_dir):
    shouted = open_app(models_dir, model="tiny-fra", input="WHERE IS THE CAR 🚗")
    captions = " ".join(c.value for c in shouted.caption)
    assert "reads this as “Where is the car”" in captions and not errors(shouted)
    typed = open_app(models_dir, model="tiny-fra", input="Where is the car")
    assert "reads this as" not in " ".join(c.value for c in typed.caption)


def test_session_models_are_listed_beside_the_shipped_ones(models_dir):
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    own = SessionModels()
    bundle = build_models()[0]
    bundle.name = "my-copy"
    own.put(bundle)
    at.session_state["models"] = own
    ok(at)
    options = at.selectbox(key="explore_model").options
    assert "my-copy (trained this session)" in options and "copy" in options
    at.selectbox(key="explore_model").select_index(options.index("my-copy (trained this session)"))
    ok(at)
    assert state(at, "model") == "my-copy"
    assert not errors(at)


# --- inputs --------------------------------------------------------------------------------------------

def test_examples_and_random_set_the_input(models_dir):
    at = open_app(models_dir)
    examples = at.get("button_group")[0]
    at.pills(key="explore_example").set_value("8675309")
    ok(at)
    assert state(at, "input") == "8675309"
    assert examples is not None
    at.button(key="explore_random").click()
    ok(at)
    text = state(at, "input")
    assert text and set(text) <= set("0123456789") and 1 <= len(text) <= 8
    assert not errors(at)


@pytest.mark.parametrize("bad, message", [
    ("", "empty"),
    ("   ", "empty"),
    ("12a4", "unknown symbol"),
    ("1" * 41, "at most 40"),
    ("x" * 1200, "limit is 1,000"),
    ("12\x00", "unknown symbol"),
])
def test_bad_input_is_a_message_and_the_last_good_view_stays(models_dir, bad, message):
    at = open_app(models_dir, step="3")
    at.multiselect(key="explore_masked").set_value([1])
    ok(at)
    at.text_input(key="explore_input").set_value(bad)
    ok(at)
    assert any(message in e for e in errors(at)), errors(at)
    assert any("last good input" in c.value for c in at.caption)
    assert metric(at, "Correct answer") == "31415926"  # the previous view is still there
    assert state(at, "step") == 3 and state(at, "masked") == [1]
    assert at.get("plotly_chart")
    at.text_input(key="explore_input").set_value("2718")
    ok(at)
    assert not errors(at)
    assert metric(at, "Correct answer") == "2718"
    assert state(at, "step") == 1 and state(at, "masked") == []  # a new input starts afresh


def test_bad_input_in_the_link_is_a_message(models_dir):
    at = open_app(models_dir, model="copy", input="hello")
    assert any("unknown symbol" in e for e in errors(at))
    assert any("Type an input" in i.value for i in at.info)


def test_unknown_model_in_the_link_is_a_warning(models_dir):
    at = open_app(models_dir, model="nonexistent", input="123")
    assert any("nonexistent" in w.value for w in at.warning)
    assert state(at, "model") == "copy"
    assert not errors(at)


def test_dates_without_a_valid_date_has_no_truth_but_works(models_dir):
    at = open_app(models_dir, model="dates", input="31 April 2021")
    assert not errors(at)
    assert not [m for m in at.metric if m.label.startswith("Correct")]
    at.text_input(key="explore_input").set_value("3 March 2021")
    ok(at)
    assert metric(at, "Correct answer") == "2021-03-03"


# --- stepping --------------------------------------------------------------------------------------------

def test_step_controls_move_through_decoding(models_dir):
    at = open_app(models_dir)
    at.button(key="explore_next").click()
    ok(at)
    assert state(at, "step") == 2
    at.button(key="explore_next").click()
    ok(at)
    assert state(at, "step") == 3
    at.button(key="explore_prev").click()
    ok(at)
    assert state(at, "step") == 2
    step_slider(at).set_value(STEPS)
    ok(at)
    assert state(at, "step") == STEPS
    assert at.button(key="explore_next").disabled
    assert at.query_params["step"] in (str(STEPS), [str(STEPS)])


def test_play_advances_and_pause_stops(models_dir):
    at = open_app(models_dir)
    assert at.button(key="explore_play").label == "Play"
    at.button(key="explore_play").click()
    ok(at)
    assert state(at, "playing") is True
    assert at.button(key="explore_play").label == "Pause"  # the same button, so one Space key
    first = state(at, "step")
    ok(at)  # what the fragment's timer does in the browser
    assert state(at, "step") == first + 1
    at.button(key="explore_play").click()
    ok(at)
    assert state(at, "playing") is False
    assert at.button(key="explore_play").label == "Play"
    stopped = state(at, "step")
    ok(at)
    assert state(at, "step") == stopped


def test_play_stops_at_the_last_step(models_dir):
    at = open_app(models_dir, step=str(STEPS - 1))
    at.button(key="explore_play").click()
    ok(at)
    ok(at)
    assert state(at, "step") == STEPS
    assert state(at, "playing") is False


def test_clicking_a_heatmap_cell_selects_its_step(models_dir):
    at = open_app(models_dir)
    spec = figure(at, "explore_heatmap")
    cells = spec["data"][1]
    custom = decode(cells["customdata"])
    n = 4 * 8 + 2  # the cell (t=5, i=3), 0-based (4, 2)
    assert list(custom[n][:2]) == [4, 2]
    point = {"curve_number": 1, "point_number": n, "point_index": n, "x": cells["x"][n], "y": cells["y"][n],
             "customdata": custom[n].tolist()}
    at.session_state["explore_heatmap"] = {"select": {"selection": {"points": [point]}}}  # the live chart's event
    ok(at)
    assert state(at, "step") == 5
    at.button(key="explore_next").click()  # the old selection does not pull the step back
    ok(at)
    assert state(at, "step") == 6


def test_changing_the_step_does_not_recompute_the_trace(models_dir, monkeypatch):
    at = open_app(models_dir)
    calls = []
    real = explorer.engine.trace.trace
    monkeypatch.setattr(explorer.engine.trace, "trace", lambda *a, **k: calls.append(a) or real(*a, **k))
    for _ in range(3):
        at.button(key="explore_next").click()
        ok(at)
    step_slider(at).set_value(9)
    ok(at)
    assert calls == []
    assert state(at, "panel_ms") > 0


# --- decoding modes -------------------------------------------------------------------------------------

def test_teacher_forced_mode_traces_the_typed_target(models_dir):
    at = open_app(models_dir)
    at.segmented_control(key="explore_mode").set_value("teacher")
    ok(at)
    assert any("needs a target" in e for e in errors(at))
    at.text_input(key="explore_target").set_value("31415926")
    ok(at)
    assert not errors(at)
    assert metric(at, "Forced target") == "31415926"
    assert metric(at, "Steps") == "9"  # eight digits and <eos>
    at.text_input(key="explore_target").set_value("3x")
    ok(at)
    assert any("unknown symbol" in e for e in errors(at))


def test_beam_mode_shows_the_candidates(models_dir):
    at = open_app(models_dir)
    at.segmented_control(key="explore_mode").set_value("beam")
    ok(at)
    frames = [d.value for d in at.dataframe]
    beams = [f for f in frames if "log P" in f.columns]
    assert beams and len(beams[0]) >= 1
    assert list(beams[0]["rank"]) == list(range(1, len(beams[0]) + 1))
    at.slider(key="explore_beam_width").set_value(5)
    ok(at)
    options = at.radio(key="explore_candidate").options
    assert len(options) >= 2
    at.radio(key="explore_candidate").set_value(at.radio(key="explore_candidate").options[1])
    ok(at)
    assert state(at, "candidate") == 1
    assert metric(at, "Beam candidate #2")
    assert not errors(at)


def test_beam_on_translation_with_words_it_never_saw(models_dir):
    at = open_app(models_dir, model="tiny-fra", input="Who is Zorglub?", mode="beam", width="4")
    assert not errors(at)
    assert state(at, "beam_width") == 4


# --- interventions ----------------------------------------------------------------------------------------

def test_temperature_and_masking_change_the_decoding_side_by_side(models_dir):
    at = open_app(models_dir)
    at.select_slider(key="explore_temperature").set_value(0.1)
    ok(at)
    assert any("temperature τ = 0.1" in m.value for m in at.markdown)
    assert {"explore_fig_original", "explore_fig_changed"} <= set(drawn_charts(at))
    at.multiselect(key="explore_masked").set_value([0, 1])
    ok(at)
    assert any("masked x1, x2" in m.value for m in at.markdown)
    changed = figure(at, "explore_fig_changed")
    weights = decode(changed["data"][0]["z"])
    assert np.allclose(weights[:, :2], 0)
    at.button(key="explore_reset").click()
    ok(at)
    assert state(at, "masked") == [] and state(at, "temperature") == 1.0
    assert not any("Active" in m.value for m in at.markdown)


def test_masking_every_position_is_a_message(models_dir):
    at = open_app(models_dir, input="12")
    at.multiselect(key="explore_masked").set_value([0, 1])
    ok(at)
    assert any("at least one input position" in e for e in errors(at))


def test_pin_and_force(models_dir):
    at = open_app(models_dir)
    at.number_input(key="explore_pin_step").set_value(2)
    at.selectbox(key="explore_pin_pos").set_value(5)
    at.button(key="explore_pin").click()
    ok(at)
    assert state(at, "pins") == [(1, 5)]
    assert any("step 2 pinned to x6" in m.value for m in at.markdown)
    step_slider(at).set_value(2)
    ok(at)
    (table,) = lookup_tables(at)
    assert np.allclose(lookup_weights(table), np.eye(8)[5], atol=1e-4)
    at.number_input(key="explore_force_step").set_value(1)
    at.selectbox(key="explore_force_token").set_value("7")
    at.button(key="explore_force").click()
    ok(at)
    assert any("step 1 forced to '7'" in m.value for m in at.markdown)
    assert metric(at, "Output").startswith("7")
    assert not errors(at)


def test_forcing_is_only_offered_in_greedy_mode(models_dir):
    at = open_app(models_dir, mode="teacher", target="123")
    assert at.button(key="explore_force").disabled
    assert not at.button(key="explore_pin").disabled


def test_no_attention_model_offers_only_forcing(models_dir):
    at = open_app(models_dir, model="reverse-none", input="123")
    assert at.button(key="explore_pin").disabled
    assert at.multiselect(key="explore_masked").disabled
    at.selectbox(key="explore_force_token").set_value("9")
    at.button(key="explore_force").click()
    ok(at)
    assert metric(at, "Output").startswith("9")


# --- URL state and downloads ------------------------------------------------------------------------------

def test_the_link_reopens_the_same_view(models_dir):
    at = open_app(models_dir, model="dates", input="3 March 2021", step="4")
    assert state(at, "model") == "dates"
    assert state(at, "input") == "3 March 2021"
    assert state(at, "step") == 4
    assert at.query_params["step"] in ("4", ["4"])
    at.button(key="explore_next").click()
    ok(at)
    assert at.query_params["step"] in ("5", ["5"])


def query(at: AppTest) -> dict[str, str]:
    return {key: (value[0] if isinstance(value, list) else value) for key, value in at.query_params.items()}


def test_the_link_carries_the_what_if_and_reopens_it_exactly(models_dir):
    at = open_app(models_dir)
    at.select_slider(key="explore_temperature").set_value(0.5)
    at.multiselect(key="explore_masked").set_value([0, 2])
    ok(at)
    at.number_input(key="explore_pin_step").set_value(2)
    at.selectbox(key="explore_pin_pos").set_value(5)
    at.button(key="explore_pin").click()
    ok(at)
    at.number_input(key="explore_force_step").set_value(1)
    at.selectbox(key="explore_force_token").set_value("7")
    at.button(key="explore_force").click()
    ok(at)
    link = query(at)
    assert (link["temp"], link["mask"], link["pin"], link["force"]) == ("0.5", "1,3", "2:6", "1:7")
    changed = decode(figure(at, "explore_fig_changed")["data"][0]["z"])

    again = open_app(models_dir, **link)  # a new session opening the bookmark
    assert (state(again, "temperature"), state(again, "masked")) == (0.5, [0, 2])
    assert (state(again, "pins"), state(again, "forced")) == ([(1, 5)], [(0, "7")])
    assert np.array_equal(decode(figure(again, "explore_fig_changed")["data"][0]["z"]), changed)
    assert metric(again, "Output") == metric(at, "Output")

    again.button(key="explore_reset").click()
    ok(again)
    assert not {"temp", "mask", "pin", "force"} & set(query(again))


def test_a_malformed_what_if_in_the_link_is_a_warning(models_dir):
    at = open_app(models_dir, mask="two", pin="3")
    assert any("not a number" in w.value for w in at.warning)
    assert state(at, "masked") == [] and state(at, "pins") == []
    assert not errors(at)
    at = open_app(models_dir, temp="0.3")
    assert any("not one of the slider's values" in w.value for w in at.warning)


def test_a_what_if_that_does_not_fit_the_input_is_cleared(models_dir):
    at = open_app(models_dir, input="12", mask="9")
    assert any("was cleared" in c.value for c in at.caption)
    assert state(at, "masked") == [] and "mask" not in query(at)
    assert metric(at, "Correct answer") == "12"


def test_a_step_beyond_the_end_is_clamped(models_dir):
    at = open_app(models_dir, step="999")
    assert state(at, "step") == STEPS
    assert not errors(at)


def test_downloads_are_offered(models_dir):
    at = open_app(models_dir)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Trace as JSON" in labels and "Trace as CSV" in labels
    assert labels.count("HTML") == len(drawn_charts(at)) >= 6  # one per figure



def test_no_models_and_a_broken_checkpoint_are_messages(models_dir, tmp_path):
    empty, broken = tmp_path / "empty", tmp_path / "broken"
    empty.mkdir()
    broken.mkdir()
    (broken / "aaa-broken.safetensors").write_bytes(b"\x00not a checkpoint")
    (broken / "copy.safetensors").write_bytes((models_dir / "copy.safetensors").read_bytes())
    try:
        checkpoint.PRETRAINED_DIR = empty
        st.cache_resource.clear()
        at = ok(AppTest.from_file("../app.py", default_timeout=TIMEOUT))
        assert any("No models yet" in i.value for i in at.info)

        checkpoint.PRETRAINED_DIR = broken
        st.cache_resource.clear()
        at = ok(AppTest.from_file("../app.py", default_timeout=TIMEOUT))
        assert any("aaa-broken" in e for e in errors(at))
        at.selectbox(key="explore_model").set_value("copy")
        ok(at)
        assert not errors(at) and metric(at, "Correct answer") == "31415926"
    finally:
        checkpoint.PRETRAINED_DIR = models_dir
        st.cache_resource.clear()


def test_a_link_from_another_page_opens_its_view(models_dir):
    at = open_app(models_dir)
    at.multiselect(key="explore_masked").set_value([0])
    ok(at)
    at.query_params["model"] = "dates"  # what common.explore_link puts in the URL
    at.query_params["input"] = "3 March 2021"
    at.query_params["step"] = "5"
    ok(at)
    assert (state(at, "model"), state(at, "input"), state(at, "step")) == ("dates", "3 March 2021", 5)
    assert state(at, "masked") == []  # a new view starts without the old interventions
    at.button(key="explore_next").click()
    ok(at)
    assert state(at, "step") == 6  # the page's own URL updates are not read back as links


def test_a_subword_model_shows_its_pieces_and_a_words_view(models_dir):
    text = "How can we use variable input lengths?"
    at = open_app(models_dir, model="tiny-fra", input=text)
    assert not errors(at)
    expected = explorer.engine.trace.trace(checkpoint.load(f"{models_dir}/tiny-fra.safetensors"), text)
    heatmap = figure(at, "explore_heatmap")
    assert [label.split(":", 1)[1] for label in heatmap["data"][0]["x"]] == list(expected.source_tokens)
    assert any("▁ marks a piece that begins a word" in c.value for c in at.caption)
    assert any(e.label.startswith("Words view") for e in at.expander)
    words = figure(at, "explore_words")
    assert np.allclose(decode(words["data"][0]["z"]), expected.word_weights(), atol=1e-6)
    assert words["data"][0]["x"][3] == "4:use"


def test_a_model_of_your_own_data_offers_its_own_sentences(models_dir):
    """A checkpoint that keeps held-out pairs (issue 26): Examples and Random come from them, not from the
    English sentences a pig-latin model cannot read. (Shipped here: AppTest cannot rerun a selectbox whose
    labels are formatted, as a session model's are.)"""
    from explorer.training.recipes import translation_setup
    from tests import pig_latin
    tsv = "".join(f"{s}\t{t}\n" for s, t in pig_latin.pairs(300)).encode()
    bundle, _, _ = translation_setup(tsv, "pig", {"embed": 8, "hidden": 16, "attn_dim": 8})
    path = models_dir / "pig.safetensors"  # the app's shipped folder: written as the lead ships a model
    path.write_bytes(checkpoint.to_bytes(bundle))
    st.cache_resource.clear()
    try:
        at = open_app(models_dir, model="pig")
        assert state(at, "model") == "pig"
        sources = [s for s, _ in bundle.examples]
        assert state(at, "input") == sources[0]
        assert at.pills(key="explore_example").options == sources[:8]
        seen = set()
        for _ in range(6):
            at.button(key="explore_random").click()
            ok(at)
            seen.add(state(at, "input"))
        assert seen <= set(sources) and len(seen) > 1 and not errors(at)
    finally:
        path.unlink()
        st.cache_resource.clear()


def test_a_shipped_translation_model_offers_the_articles_sentence_first(models_dir):
    """`tiny-fra` sits in the app's shipped folder here: its examples start with the article's sentence."""
    at = open_app(models_dir, model="tiny-fra")
    options = at.pills(key="explore_example").options
    assert options[0] == "How can we use variable input lengths?"
    assert state(at, "input") == options[0]


def test_presenter_mode_draws_each_steps_figures_once_and_no_per_chart_downloads(models_dir, monkeypatch):
    """A step change in presenter mode re-made every chart's projector copy (~25 ms a chart) and six hidden
    "HTML" links; now each step's copies are made once and the links are left out (the trace's stay). The step
    charts' copies for the next step are made with the current one (sent ahead to the browser's stepper)."""
    import explorer.app.pages.explore_shared as shared
    made = []
    monkeypatch.setattr(shared, "presented", lambda fig: made.append(fig) or fig)
    at = open_app(models_dir, present="1")
    first = len(made)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "HTML" not in labels and "Trace as JSON" in labels
    step_charts = len(live_charts(at))
    assert first == len(drawn_charts(at)) + step_charts and step_charts >= 6
    at.session_state["explore_step"] = 2
    ok(at)
    assert len(made) == first + step_charts, "only step 3's copies are new"
    at.session_state["explore_step"] = 1
    ok(at)
    assert len(made) == first + step_charts, "a step seen before draws from the cache"


def live_charts(at: AppTest) -> dict[str, dict]:
    """The live charts' data by key (explorer/app/pages/live_chart.py)."""
    from explorer.app.pages.live_chart import NAME, sent
    return {el.proto.id.rsplit("-", 1)[-1]: sent(el.proto.json) for el in at.get("bidi_component")
            if el.proto.component_name == NAME}


def stepper_data(at: AppTest) -> dict:
    from explorer.app.pages.live_chart import STEPPER_NAME, sent
    (element,) = [el for el in at.get("bidi_component") if el.proto.component_name == STEPPER_NAME]
    return sent(element.proto.json)


@pytest.mark.parametrize("present", ["0", "1"])
def test_the_stepper_holds_the_figures_the_charts_get_at_the_steps_beside(models_dir, present):
    """The browser steps with figures sent ahead (pages/live_chart.py): they must be the very figures the server
    draws at that step (same JSON, same file name), for every step chart, in and out of presenter mode."""
    at = open_app(models_dir, present=present)
    at.session_state["explore_step"] = 2
    ok(at)
    ahead = stepper_data(at)
    assert ahead["t"] == 2 and ahead["steps"] >= 3 and sorted(ahead["ahead"]) == ["1", "3"]
    assert ahead["keys"] is (present == "1") and ahead["buttons"] == {"prev": "explore_prev", "next": "explore_next"}
    for step in (1, 3):
        at.session_state["explore_step"] = step
        ok(at)
        charts = live_charts(at)
        assert set(charts) == set(ahead["ahead"][str(step)])
        for key, data in charts.items():
            assert data["step"] == step
            assert ahead["ahead"][str(step)][key] == {"spec": data["spec"], "config": data["config"]}, key


def test_presenter_mode_offers_a_qr_code_and_plain_mode_none(models_dir):
    plain = open_app(models_dir)
    assert not plain.get("popover")
    presenting = open_app(models_dir, present="1")
    popovers = presenting.get("popover")
    assert len(popovers) == 1 and popovers[0].key == "presenter_qr"
    assert "not known here" in popovers[0].caption[0].value  # AppTest has no browser address to encode


def test_the_step_panel_sends_its_step_even_when_the_browsers_copy_of_the_address_shows_it(models_dir, monkeypatch):
    """The browser sends its copy of the address with each run, and under fast presses that copy can predate the
    answer to the previous run: ← ← Next under load ended with the page on step 3 and the address on step=2 (the
    server, whose copy already said step=3, sent nothing, and its earlier step=2 arrived last). The page now sends
    every value it last sent otherwise, so the last address the browser gets is the view's."""
    from streamlit.runtime.state.query_params import QueryParams
    sent = []
    send = QueryParams._send_query_param_msg
    monkeypatch.setattr(QueryParams, "_send_query_param_msg", lambda self: sent.append(dict(self._query_params))
                        or send(self))
    at = open_app(models_dir)
    for step in (3, 2):
        at.session_state["explore_step"] = step
        ok(at)
    assert at.query_params["step"] == "2" and sent[-1]["step"] == "2"
    sent.clear()
    at.query_params["step"] = "3"  # the copy the browser sent with its next press: step 3, as the page will be
    ok(at)
    assert state(at, "step") == 3
    assert sent and sent[-1]["step"] == "3"
    sent.clear()
    ok(at)
    assert not sent, "nothing is sent when the address already shows the view"


def _place(node, suffix: str) -> tuple[int, ...] | None:
    """Where the element whose id ends with `suffix` is in the page (its index at each level)."""
    return next((place for key, place in keyed_places(node).items() if key.endswith(suffix)), None)


def test_the_step_panel_keeps_its_place_whatever_messages_come_and_go_above_it(models_dir):
    """A message above the step panel (a bad input, a link's problem) moved it on the next run: the browser then
    drew the panel anew, its charts from scratch, with the old copy (and its buttons' keys) beside the new until
    the run ended."""
    at = open_app(models_dir)
    place = _place(at.main, "explore_step_panel")
    assert place is not None
    at.text_input(key="explore_input").set_value("12x")  # not the model's symbols: a message, the last good view
    ok(at)
    assert at.get("caption") and "last good input" in " ".join(c.value for c in at.caption)
    assert _place(at.main, "explore_step_panel") == place
    at.text_input(key="explore_input").set_value("4242")
    ok(at)
    assert _place(at.main, "explore_step_panel") == place
