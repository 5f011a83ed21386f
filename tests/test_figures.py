"""Figures, tables and projections are pure functions of a Trace: their data is the trace's data.

Uses the tiny random models of conftest.py (instant) and the Explore test checkpoints for translation.
"""

from __future__ import annotations

import dataclasses
import io
import json
import random
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from explorer import equations
from explorer.app import views
from explorer.app.figures.lookup_table import lookup_html
from explorer.errors import ExplorerError
from explorer.app.figures import attention as fa
from explorer.app.figures import steps as fs
from explorer.app.figures import vectors as fv
from explorer.app.figures.style import (FONT_SIZE, PRESENTER_MIN_SIZE, figure_html, plotly_config, presented, styled,
                                        symmetric_range, token_labels)
from explorer.engine.projection import fit_pca, project_queries_keys
from explorer.engine.trace import Intervention, trace

from app_support import lookup_column, lookup_weights
from explore_models import build_models


@pytest.fixture(scope="module")
def copy_trace(make_random_bundle):
    bundle = make_random_bundle(bidirectional=True, seed=3)
    return trace(bundle, "31415")


@pytest.fixture(scope="module")
def plain_trace(make_random_bundle):
    return trace(make_random_bundle(attention="none"), "2718")


@pytest.fixture(scope="module")
def fra():
    return [b for b in build_models() if b.name == "tiny-fra"][0]


def arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


# --- the attention heatmap ------------------------------------------------------------------------

def test_heatmap_is_the_weights_with_labels_in_order(copy_trace):
    fig = fa.attention_heatmap(copy_trace)
    heat = fig.data[0]
    assert isinstance(heat, go.Heatmap)
    assert np.array_equal(arr(heat.z), copy_trace.weights)
    assert list(heat.x) == token_labels(copy_trace.source_tokens) == ["1:3", "2:1", "3:4", "4:1", "5:5"]
    assert list(heat.y) == token_labels(copy_trace.output_tokens)
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)


def test_heatmap_cells_carry_step_position_weight_and_score_for_clicks_and_hover(copy_trace):
    fig = fa.attention_heatmap(copy_trace)
    cells = fig.data[1]
    T, S = copy_trace.weights.shape
    custom = arr(cells.customdata)
    assert custom.shape == (T * S, 6)
    for n, (t, i, t1, i1, w, e) in enumerate(custom):
        assert (t, i) == divmod(n, S)
        assert (t1, i1) == (t + 1, i + 1)
        assert w == pytest.approx(copy_trace.weights[int(t), int(i)])
        assert e == pytest.approx(copy_trace.scores[int(t), int(i)])
        assert cells.x[n] == fig.data[0].x[int(i)] and cells.y[n] == fig.data[0].y[int(t)]
    assert cells.marker.opacity == 0  # invisible: it only catches clicks
    assert "α = %{customdata[4]:.6f}" in cells.hovertemplate


def test_heatmap_marks_the_current_step_and_rings_the_true_alignment(copy_trace):
    fig = fa.attention_heatmap(copy_trace, step=2)
    (rect,) = fig.layout.shapes
    assert (rect.y0, rect.y1) == (1.5, 2.5)
    assert (rect.x0, rect.x1) == (-0.5, len(copy_trace.source_tokens) - 0.5)
    truth = [d for d in fig.data if d.name == "true alignment"][0]
    rows = min(copy_trace.steps, len(copy_trace.alignment))
    expected = [(fig.data[0].y[t], fig.data[0].x[i]) for t, i in zip(*np.nonzero(copy_trace.alignment[:rows]))]
    assert list(zip(truth.y, truth.x)) == expected
    assert not fa.attention_heatmap(copy_trace).layout.shapes


def test_heatmap_keeps_its_signature_for_other_pages(copy_trace):
    fig = fa.attention_heatmap(copy_trace, 1, "Probe")
    assert fig.layout.title.text == "Probe"
    assert fa.attention_heatmap(copy_trace, step=None, title=None).layout.title.text is None


def test_masked_scores_hover_as_nan_and_weights_are_zero(make_random_bundle):
    tr = trace(make_random_bundle(), "12345", Intervention(masked=(0, 3)))
    fig = fa.attention_heatmap(tr)
    z = arr(fig.data[0].z)
    assert np.all(z[:, [0, 3]] == 0)
    assert np.isnan(arr(fig.data[1].customdata)[:, 5].reshape(z.shape)[:, 0]).all()
    json.loads(fig.to_json())  # NaN/inf do not break serialisation


def test_unknown_words_are_labelled_unk(fra):
    """A trace's unknown tokens (Trace.unknown_tokens; a subword model spells any word, so here set by hand)."""
    tr = trace(fra, "Zorglub is here.")
    tr = dataclasses.replace(tr, unknown_tokens=(tr.source_tokens[0],))
    labels = list(fa.attention_heatmap(tr).data[0].x)
    assert labels[0] == f"1:<unk>({tr.source_tokens[0]})"
    assert views.lookup_table(tr, 0)["token"][0] == f"<unk> ({tr.source_tokens[0]})"


def test_no_attention_figures_say_so(plain_trace):
    for fig in (fa.attention_heatmap(plain_trace, 0), fa.weights_bar(plain_trace, 0), fa.context_sum(plain_trace, 0),
                fv.keys_heatmap(plain_trace), fv.values_heatmap(plain_trace), fv.queries_heatmap(plain_trace),
                fv.query_figure(plain_trace, 0), fv.query_key_space(plain_trace, 0)):
        assert not fig.data
        assert "no attention" in fig.layout.annotations[0].text


def test_presenter_copies_are_the_validated_figures_with_larger_type(copy_trace):
    """presented() skips plotly's validators (for speed): what it returns must serialise exactly as a validated
    copy of the same spec, every font at least PRESENTER_MIN_SIZE, and the original must stay as it was."""
    for fig in (fa.attention_heatmap(copy_trace, 1), fa.weights_bar(copy_trace, 1), fa.context_sum(copy_trace, 1),
                fs.output_distribution(copy_trace, 1), fv.query_key_space(copy_trace, 1)):
        before = fig.to_json()
        shown = presented(fig)
        assert json.loads(shown.to_json()) == json.loads(go.Figure(shown.to_plotly_json()).to_json())
        assert fig.to_json() == before
        sizes = []

        def walk(node, in_font=False):
            if isinstance(node, dict):
                for key, value in node.items():
                    if in_font and key == "size" and isinstance(value, (int, float)):
                        sizes.append(value)
                    walk(value, key.endswith("font"))
            elif isinstance(node, list):
                for item in node:
                    walk(item, in_font)
        walk(json.loads(shown.to_json()))
        assert sizes and min(sizes) >= PRESENTER_MIN_SIZE


# --- one step ------------------------------------------------------------------------------------

def test_weights_bar_is_one_row_of_the_heatmap(copy_trace):
    for t in range(copy_trace.steps):
        bar = fa.weights_bar(copy_trace, t).data[0]
        assert np.array_equal(arr(bar.y), copy_trace.weights[t])
        assert np.allclose(arr(bar.customdata)[:, 1], copy_trace.scores[t])


def test_context_sum_rows_are_weighted_values_and_the_last_row_is_c_t(copy_trace):
    t = 2
    fig = fa.context_sum(copy_trace, t)
    z = arr(fig.data[0].z)
    S = len(copy_trace.source_tokens)
    weighted = copy_trace.weights[t][:, None] * copy_trace.values
    assert np.allclose(z[:S], weighted)
    assert np.isnan(z[S]).all()  # the gap before the sum
    assert np.allclose(z[S + 1], copy_trace.contexts[t])
    assert np.allclose(weighted.sum(axis=0), copy_trace.contexts[t], atol=1e-5)  # c_t = Σ α v, drawn
    assert fig.data[0].zmid == 0


def test_state_update_shows_previous_state_context_and_new_state(copy_trace):
    first = fv.state_update_figure(copy_trace, 0).data[0]
    H, D = copy_trace.decoder_states.shape[1], copy_trace.contexts.shape[1]
    z = arr(first.z)
    assert list(first.y) == ["s₀", "c₀", "s₁"]
    assert np.allclose(z[0, :H], copy_trace.initial_state)
    assert np.allclose(z[1, :D], 0) and np.isnan(z[1, D:]).all()  # c_0 = 0, shorter than s
    assert np.allclose(z[2, :H], copy_trace.decoder_states[0])
    later = arr(fv.state_update_figure(copy_trace, 3).data[0].z)
    assert np.allclose(later[0, :H], copy_trace.decoder_states[2])
    assert np.allclose(later[1, :D], copy_trace.contexts[2])


def test_state_update_without_attention_has_no_context(plain_trace):
    fig = fv.state_update_figure(plain_trace, 1)
    assert list(fig.data[0].y) == ["s₁", "s₂"]


def test_query_figure_is_q_t(copy_trace):
    assert np.allclose(arr(fv.query_figure(copy_trace, 1).data[0].z)[0], copy_trace.queries[1])


def test_output_distribution_is_the_top_k_with_the_chosen_token_marked(copy_trace):
    t = 1
    fig = fs.output_distribution(copy_trace, t, k=5)
    bar = fig.data[0]
    top = copy_trace.top_k(t, 5)
    assert np.allclose(arr(bar.x)[:5], [p for _, p in top])
    chosen = copy_trace.output_tokens[t]
    marked = [label for label, colour in zip(bar.y, bar.marker.color) if colour == fs.ACCENT]
    assert marked == [f"'{chosen}'"]  # greedy: the chosen token is the most probable, in red


def test_output_distribution_always_shows_the_forced_token(make_random_bundle):
    bundle = make_random_bundle()
    tr = trace(bundle, "123", target="999")
    for t in range(tr.steps):
        fig = fs.output_distribution(tr, t, k=1)
        labels = list(fig.data[0].y)
        assert f"'{tr.output_tokens[t]}'" in labels
        p = tr.probs[t, tr.output_ids[t]]
        assert pytest.approx(p) in list(fig.data[0].x)


# --- hidden states and projections ---------------------------------------------------------------

def test_state_heatmaps_are_the_trace_matrices(copy_trace):
    assert np.array_equal(arr(fv.encoder_states_heatmap(copy_trace).data[0].z), copy_trace.encoder_states)
    s = arr(fv.decoder_states_heatmap(copy_trace, 1).data[0].z)
    assert np.array_equal(s, np.vstack([copy_trace.initial_state, copy_trace.decoder_states]))
    assert np.array_equal(arr(fv.keys_heatmap(copy_trace).data[0].z), copy_trace.keys)
    assert np.array_equal(arr(fv.values_heatmap(copy_trace).data[0].z), copy_trace.values)
    q = fv.queries_heatmap(copy_trace, 2)
    assert np.array_equal(arr(q.data[0].z), copy_trace.queries)
    (rect,) = q.layout.shapes
    assert (rect.y0, rect.y1) == (1.5, 2.5)
    (rect,) = fv.decoder_states_heatmap(copy_trace, 2).layout.shapes  # s_0 is row 0: s_3 is row 3
    assert (rect.y0, rect.y1) == (2.5, 3.5)


def test_colour_scales_are_centred_on_zero(copy_trace):
    heat = fv.encoder_states_heatmap(copy_trace).data[0]
    peak = np.abs(copy_trace.encoder_states).max()
    assert heat.zmid == 0 and heat.zmax == pytest.approx(peak) and heat.zmin == pytest.approx(-peak)
    assert symmetric_range(np.zeros(3)) > 0
    assert symmetric_range(np.array([-np.inf, 2.0, -3.0])) == 3.0


def test_query_key_space_places_keys_and_queries_by_one_pca(copy_trace):
    t = 2
    fig = fv.query_key_space(copy_trace, t)
    k2, q2, _ = project_queries_keys(copy_trace.keys, copy_trace.queries)
    keys = [d for d in fig.data if d.name == "keys kᵢ"][0]
    query = [d for d in fig.data if d.name.startswith("query")][0]
    assert np.allclose(np.c_[keys.x, keys.y], k2)
    assert np.allclose([query.x[0], query.y[0]], q2[t])
    assert np.allclose(arr(keys.marker.color), copy_trace.weights[t])
    others = [d for d in fig.data if d.name == "other queries"][0]
    assert len(others.x) == copy_trace.steps - 1


def test_pca_recovers_a_plane_and_is_deterministic():
    rng = np.random.default_rng(0)
    plane = rng.normal(size=(40, 2)) * [5.0, 1.0]
    basis = np.linalg.qr(rng.normal(size=(6, 2)))[0].T  # (2, 6) orthonormal
    points = plane @ basis + 3.0
    projection = fit_pca(points)
    coords = projection.apply(points)
    assert projection.explained.sum() == pytest.approx(1.0)
    assert projection.explained[0] > projection.explained[1]
    d_orig = np.linalg.norm(points[:, None] - points[None], axis=-1)
    d_proj = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    assert np.allclose(d_orig, d_proj, atol=1e-8)  # nothing is lost from a plane
    again = fit_pca(points.copy())
    assert np.array_equal(again.components, projection.components)


def test_pca_of_degenerate_inputs_stays_two_dimensional():
    one = fit_pca(np.ones((1, 4)))
    assert one.components.shape == (2, 4) and np.all(one.explained == 0)
    line = fit_pca(np.array([[0.0], [1.0], [2.0]]))
    assert line.apply(np.array([[3.0]])).shape == (1, 2)
    with pytest.raises(ValueError):
        fit_pca(np.zeros((0, 3)))


# --- tables and exports ----------------------------------------------------------------------------

def test_lookup_table_is_the_step_s_records(copy_trace):
    t = 3
    frame = views.lookup_table(copy_trace, t)
    assert list(frame["i"]) == list(range(1, len(copy_trace.source_tokens) + 1))
    assert list(frame["token"]) == list(copy_trace.source_tokens)
    assert np.allclose(np.array(frame["key k_i"].tolist()), copy_trace.keys)
    assert np.allclose(np.array(frame["value v_i"].tolist()), copy_trace.values)
    assert np.allclose(frame["score e_ti"], copy_trace.scores[t])
    assert np.allclose(frame["weight α_ti"], copy_trace.weights[t])
    assert frame["weight α_ti"].sum() == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ExplorerError):
        views.lookup_table(copy_trace, copy_trace.steps)


def test_the_lookup_table_s_html_shows_the_step_s_numbers(copy_trace):
    """Explore's lookup table (HTML, figures/lookup_table.py): a row per input position with the trace's score and
    weight to 4 decimals, the largest weight's row marked, the true alignment ticked, a key and a value image each."""
    t = 3
    table = views.lookup_table(copy_trace, t)
    page = lookup_html(table, t + 1, float(abs(copy_trace.keys).max()), float(abs(copy_trace.values).max()))
    rows = re.findall(r"<tr(?: class=largest)?><td>(\d+)</td>(.*?)</tr>", page)
    assert [int(i) for i, _ in rows] == list(range(1, len(copy_trace.source_tokens) + 1))
    scores = [float(x) for x in lookup_column(page, "score")]
    assert np.allclose(scores, copy_trace.scores[t], atol=5e-5)
    assert np.allclose(lookup_weights(page), copy_trace.weights[t], atol=5e-5)
    assert page.count("<tr class=largest>") == 1
    assert re.search(rf"<tr class=largest><td>{int(np.argmax(copy_trace.weights[t])) + 1}</td>", page)
    assert page.count("data:image/svg+xml,") == 2 * len(rows)
    assert page.count("✓") == int(copy_trace.alignment[t].sum()) and "true?" in page
    assert f"score e{equations.sub(t + 1)}ᵢ" in page


def test_the_lookup_table_s_html_says_masked_and_escapes_tokens(make_random_bundle):
    tr = trace(make_random_bundle(attention="dot"), "12345", Intervention(masked=(0, 3)))
    table = views.lookup_table(tr, 0)
    page = lookup_html(table, 1, 1.0, 1.0)
    assert lookup_column(page, "score").count("masked") == 2 and page.count(" (masked)</td>") == 2
    table["token"][1] = "<b>x</b>"
    page = lookup_html(table, 1, 1.0, 1.0)
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x" not in page


def test_trace_frame_is_tidy_and_matches_the_trace(copy_trace):
    frame = views.trace_frame(copy_trace)
    T, S = copy_trace.weights.shape
    assert len(frame) == T * S
    assert np.allclose(frame["weight"].to_numpy().reshape(T, S), copy_trace.weights)
    assert np.allclose(frame["score"].to_numpy().reshape(T, S), copy_trace.scores)
    by_step = frame.groupby("step")["weight"].sum()
    assert np.allclose(by_step, 1.0, atol=1e-5)
    first = frame[frame["step"] == 1].iloc[0]
    assert first["previous_token"] == "<sos>" and first["output_token"] == copy_trace.output_tokens[0]
    assert first["probability"] == pytest.approx(copy_trace.probs[0, copy_trace.output_ids[0]])
    again = pd.read_csv(io.StringIO(views.trace_csv(copy_trace)), keep_default_na=False)
    assert len(again) == T * S and list(again.columns) == list(frame.columns)


def test_trace_frame_without_attention_has_a_row_per_step(plain_trace):
    frame = views.trace_frame(plain_trace)
    assert len(frame) == plain_trace.steps
    assert frame["weight"].isna().all()


def test_step_summary(copy_trace):
    facts = views.step_summary(copy_trace, 1)
    assert facts["chosen"] == copy_trace.output_tokens[1] and facts["previous"] == copy_trace.output_tokens[0]
    assert facts["argmax"] == int(np.argmax(copy_trace.weights[1]))


def test_figures_export_as_self_contained_html_and_png_config(copy_trace):
    html = figure_html(fa.attention_heatmap(copy_trace, 0))
    assert html.lower().startswith("<!doctype html>")
    assert '<script src="http' not in html and len(html) > 1_000_000  # plotly.js inlined: works offline
    assert "@font-face" not in html  # no Chinese in it: no font to carry
    config = plotly_config("step 3: α/weights")
    assert config["toImageButtonOptions"] == {"format": "png", "filename": "step-3--α-weights", "scale": 2}


def test_an_exported_figure_with_chinese_carries_the_chinese_font():
    """Exported HTML opens on machines without a CJK font: the served subset travels inline."""
    import plotly.graph_objects as go
    from explorer.app.figures.style import CJK_FAMILY, cjk_font_face
    html = figure_html(styled(go.Figure(go.Bar(x=["我", "爱"], y=[1, 2]))))
    assert cjk_font_face() and cjk_font_face() in html
    assert f'"{CJK_FAMILY}"' in html.split("<body>")[0]  # declared in the head, before the chart draws
    import plotly.io as pio
    from explorer.app.figures.style import TEMPLATE
    assert CJK_FAMILY in pio.templates[TEMPLATE].layout.font.family  # the house template names it


def test_every_figure_has_projector_fonts(copy_trace):
    figures = [fa.attention_heatmap(copy_trace, 0), fa.weights_bar(copy_trace, 0), fa.context_sum(copy_trace, 0),
               fv.encoder_states_heatmap(copy_trace), fv.decoder_states_heatmap(copy_trace, 0),
               fv.state_update_figure(copy_trace, 0), fv.query_key_space(copy_trace, 0),
               fs.output_distribution(copy_trace, 0)]
    for fig in figures:
        assert fig.layout.font.size >= 16
        assert fig.layout.template.layout.plot_bgcolor == "white"


# --- requests and inputs ----------------------------------------------------------------------------

def test_examples_and_random_inputs_suit_the_model(make_random_bundle, fra):
    bundle = make_random_bundle()
    for text in views.example_inputs(bundle) + [views.random_input(bundle, random.Random(n)) for n in range(20)]:
        bundle.prepare(text)
    fra_examples = views.example_inputs(fra)
    assert fra_examples
    assert fra_examples[0] == "How can we use variable input lengths?"  # the article's example, in pieces
    assert all(not fra.prepare(t).unknown for t in fra_examples)
    assert views.random_input(fra, random.Random(0)) in fra_examples


def test_request_trace_in_every_mode(make_random_bundle):
    bundle = make_random_bundle()
    greedy = views.request_trace(bundle, views.Request("m", "1234"))
    assert greedy.output_tokens == trace(bundle, "1234").output_tokens
    forced = views.request_trace(bundle, views.Request("m", "1234", mode="teacher", target="4321"))
    assert forced.teacher_forced and forced.output_tokens == ("4", "3", "2", "1", "<eos>")
    with pytest.raises(ExplorerError, match="needs a target"):
        views.request_trace(bundle, views.Request("m", "1234", mode="teacher"))
    found = views.candidates(bundle, "1234", 3)
    for n, cand in enumerate(found):
        tr = views.request_trace(bundle, views.Request("m", "1234", mode="beam", beam_width=3, candidate=n), found)
        assert tuple(tr.output_ids.tolist()) == cand.ids
        log_p = float(np.log(tr.probs[np.arange(tr.steps), tr.output_ids]).sum())
        assert log_p == pytest.approx(cand.log_prob, abs=1e-3)  # the trace scores the candidate as beam did
    frame = views.candidates_frame(bundle, "1234", found)
    assert list(frame["rank"]) == list(range(1, len(found) + 1))
    assert np.allclose(frame["log P"], [c.log_prob for c in found])
    with pytest.raises(ExplorerError):
        views.candidates(bundle, "1234", 0)
    with pytest.raises(ExplorerError):
        views.Request("m", "1", mode="sampling")


def test_truth_text(make_random_bundle, fra):
    bundle = make_random_bundle()
    tr = trace(bundle, "1234")
    assert views.truth_text(bundle, tr) == "1234"
    assert views.truth_text(fra, trace(fra, "I am cold.")) is None


def test_the_house_style_merges_into_what_a_figure_already_set():
    """styled() assigns each layout property once instead of update_layout (faster); it must still merge:
    a figure's own legend title, margin side and font colour stay, the house values win where both set."""
    fig = go.Figure(layout={"legend": {"title": {"text": "kind"}}, "margin": {"pad": 4, "t": 5},
                            "font": {"color": "red"}, "title": {"text": "old", "font": {"size": 9}}})
    styled(fig, "new", height=300)
    layout = fig.layout
    assert layout.legend.title.text == "kind" and layout.legend.orientation == "h"
    assert layout.margin.pad == 4 and layout.margin.t == 84 and layout.margin.l == 60
    assert layout.font.color == "red" and layout.font.size == FONT_SIZE
    assert layout.title.text == "new" and layout.title.font.size == 9 and layout.title.x == 0.0
    assert layout.height == 300 and layout.hoverlabel.font.size == FONT_SIZE
    assert styled(go.Figure(layout={"title": {"text": "old"}})).layout.title.text is None  # no title: cleared


def test_wide_vector_strips_drop_the_cell_gaps_that_would_hide_them(make_random_bundle):
    """A 256-dimension state in a half-width column: 1-px gaps between cells left the strip blank."""
    tr = trace(make_random_bundle(hidden=256), "123")
    wide = fv.state_update_figure(tr, 1)
    assert tr.decoder_states.shape[1] > fv.MAX_GAPPED_COLUMNS and wide.data[0].xgap == 0
    narrow = fv.vector_rows([("a", np.arange(8.0))])
    assert narrow.data[0].xgap == 1
