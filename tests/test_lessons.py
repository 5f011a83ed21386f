"""The Learn and Compare library math: sampling error shrinks, the RNN unit by hand equals the module,
parameter counts, the unshared RNN's message, the decoding chain, the lookup table, and the figures."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.training import comparison

from explorer.app import lessons
from explorer.errors import ExplorerError
from explorer.training.evaluation import accuracy_by_length
from explorer.app.figures import compare as cfig
from explorer.app.figures import lessons as lfig
from explorer.engine.parameters import count_parameters
from explorer.engine.unshared import UnsharedRNN, rnn_parameter_count
from explorer.engine.trace import trace

# --- 1. sampling -------------------------------------------------------------------------------


@pytest.mark.parametrize("signal", list(lessons.SIGNALS))
def test_sampling_error_shrinks_towards_zero(signal):
    ns = [8, 32, 128, 512]  # (far fewer steps than wiggles, e.g. the chirp at N = 2, is undersampling)
    errors = lessons.max_errors(ns, signal)
    assert all(a > b for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 0.07
    # Roughly like 1/N for a smooth f: quadrupling N divides the error by about four.
    assert 2.5 < errors[1] / errors[2] < 6


def test_sampling_holds_each_sample_over_its_time_step():
    s = lessons.sample_signal(10)
    np.testing.assert_allclose(s.t_steps, np.arange(10) / 10)
    np.testing.assert_allclose(s.samples, lessons.SIGNALS["price"](s.t_steps))
    inside = (s.t >= 0.3) & (s.t < 0.4)
    assert np.all(s.held[inside] == s.samples[3])
    assert s.max_error == pytest.approx(np.abs(s.f - s.held).max())
    with pytest.raises(ExplorerError):
        lessons.sample_signal(0)
    with pytest.raises(ExplorerError):
        lessons.sample_signal(5, "noise")


# --- 2. the RNN unit by hand -------------------------------------------------------------------

@pytest.mark.parametrize("cell", ["rnn", "gru"])
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
def test_unit_by_hand_equals_the_module(make_random_bundle, cell, layers, bidirectional):
    bundle = make_random_bundle(cell=cell, layers=layers, bidirectional=bidirectional, seed=3)
    unit = lessons.rnn_unit_by_hand(bundle, "3141592")
    assert unit.cell == cell and len(unit.steps) == 7
    assert unit.max_difference < 1e-5
    np.testing.assert_allclose(np.stack([s.h for s in unit.steps]), unit.module_states, atol=1e-5)
    # Each step starts where the previous one ended, from h_0 = 0.
    assert np.all(unit.steps[0].h_prev == 0)
    for a, b in zip(unit.steps, unit.steps[1:]):
        np.testing.assert_array_equal(a.h, b.h_prev)


def test_tanh_unit_is_the_seed_formula(make_random_bundle):
    bundle = make_random_bundle(cell="rnn", seed=5)
    unit = lessons.rnn_unit_by_hand(bundle, "271")
    W, b = unit.weights["W"], unit.weights["b"]
    H, E = unit.hidden, unit.embed
    assert W.shape == (H, H + E)
    for s in unit.steps:
        np.testing.assert_allclose(s.parts["concat"], np.concatenate([s.h_prev, s.x]))
        np.testing.assert_allclose(s.h, np.tanh(W @ np.concatenate([s.h_prev, s.x]) + b))
    # With the encoder's own forward pass (one layer, one direction) as a third witness.
    import torch
    with torch.inference_mode():
        prepared = bundle.prepare("271")
        memory = bundle.model.encode(torch.tensor([prepared.ids]), torch.tensor([3]))
    np.testing.assert_allclose(unit.module_states, memory.h[0].double().numpy(), atol=1e-6)


@pytest.mark.parametrize("cell", ["lstm", "unshared"])
def test_unit_by_hand_refuses_other_cells(make_random_bundle, cell):
    bundle = make_random_bundle(cell=cell)
    assert not lessons.has_shared_unit(bundle)
    with pytest.raises(ExplorerError):
        lessons.rnn_unit_by_hand(bundle, "123")


# --- 3. parameter sharing ----------------------------------------------------------------------

def test_parameter_growth_constant_when_shared_linear_when_not():
    g = lessons.parameter_growth(32, 128, range(1, 41))
    per_step = 128 * (128 + 32) + 128
    assert set(g.shared) == {per_step}
    assert list(g.unshared) == [n * per_step for n in range(1, 41)]


def test_real_encoders_have_those_counts(make_random_bundle):
    E, H = 6, 8
    unshared = make_random_bundle(cell="unshared", max_src_len=9)
    assert lessons.encoder_parameters(unshared) == rnn_parameter_count(E, H, 9, shared=False)
    shared = make_random_bundle(cell="rnn")
    assert lessons.encoder_parameters(shared) == rnn_parameter_count(E, H, 9, shared=True) + H  # b_ih and b_hh
    # Frozen (shipped) models keep their size.
    for p in shared.model.parameters():
        p.requires_grad_(False)
    assert count_parameters(shared.model.encoder.rnn) == rnn_parameter_count(E, H, 1, shared=True) + H


def test_unshared_model_on_an_unseen_length_is_a_message(make_random_bundle):
    bundle = make_random_bundle(cell="unshared", max_src_len=6)
    ok = lessons.run_or_explain(bundle, "3141")
    assert ok.error is None and ok.output is not None and ok.length == 4
    failed = lessons.run_or_explain(bundle, "31415926")
    assert failed.output is None and failed.weights_for == 6 and failed.length == 8
    assert "weights for 6 positions only" in failed.error and "8" in failed.error
    shared = make_random_bundle(cell="rnn", max_src_len=12)
    assert lessons.run_or_explain(shared, "31415926").error is None
    with pytest.raises(ExplorerError):
        lessons.run_or_explain(bundle, "12a")


def test_lesson_models_are_frozen_and_built_for_six_positions():
    shared, unshared = lessons.train_lesson_models(steps=3)
    assert shared.model.cfg.cell == "rnn" and unshared.model.cfg.cell == "unshared"
    assert isinstance(unshared.model.encoder.rnn, UnsharedRNN)
    assert unshared.model.encoder.rnn.max_len == lessons.LESSON_TASK_LENGTHS[1]
    assert not any(p.requires_grad for p in shared.model.parameters())
    assert lessons.run_or_explain(unshared, "1234567").weights_for == 6
    assert lessons.run_or_explain(shared, "1234567").error is None


# --- 4. encoder–decoder ------------------------------------------------------------------------

def test_decoding_chain_is_autoregressive_from_sos(trained_copy):
    tr = trace(trained_copy.bundle, "31415")
    truth = trained_copy.bundle.ground_truth(tr.source_tokens)
    chain = lessons.decoding_chain(tr, truth.target)
    assert chain[0].fed == "<sos>"
    for a, b in zip(chain, chain[1:]):
        assert b.fed == a.chosen  # each step is fed the previous output
    assert [c.chosen for c in chain] == list(tr.output_tokens)
    assert [c.truth for c in chain] == list(truth.target) + ["<eos>"]
    assert all(c.top[0][1] >= c.top[-1][1] for c in chain)


def test_context_vector_of_a_plain_unidirectional_model_is_h_m(make_random_bundle):
    bundle = make_random_bundle(cell="gru", attention="none")
    tr = trace(bundle, "2718")
    ctx = lessons.context_vector(bundle, tr)
    np.testing.assert_allclose(ctx.s0, tr.encoder_states[-1], atol=1e-6)  # s_0 = h_m
    assert ctx.numbers == bundle.model.cfg.hidden
    bi = make_random_bundle(cell="gru", attention="none", bidirectional=True)
    ctx = lessons.context_vector(bi, trace(bi, "2718"))
    assert ctx.bidirectional


# --- 6. attention as a lookup ------------------------------------------------------------------

@pytest.mark.parametrize("attention", ["dot", "scaled_dot", "additive"])
def test_lookup_is_the_trace_and_checks_out(make_random_bundle, attention):
    bundle = make_random_bundle(attention=attention, seed=2)
    tr = trace(bundle, "31415")
    for t in range(tr.steps):
        lk = lessons.lookup(tr, t)
        assert sum(r.weight for r in lk.records) == pytest.approx(1.0, abs=1e-5)
        assert lk.context_check < 1e-5
        if attention == "additive":
            assert lk.score_check is None
        else:
            assert lk.score_check < 1e-4
        assert lk.chosen == tr.output_tokens[t] and lk.fed == tr.previous_tokens[t]
        np.testing.assert_array_equal([r.weight for r in lk.records], tr.weights[t])
    with pytest.raises(ExplorerError):
        lessons.lookup(tr, tr.steps)


def test_lookup_needs_attention(make_random_bundle):
    tr = trace(make_random_bundle(attention="none"), "123")
    with pytest.raises(ExplorerError):
        lessons.lookup(tr, 0)


def test_short_vector_text():
    assert lessons.short(np.array([1.0, -2.0, 3.0, 4.0, 5.0]), 2, 1) == "[1.0, -2.0, …]"
    assert lessons.short(np.array([0.5]), 4, 2) == "[0.50]"


# --- Compare's numbers -------------------------------------------------------------------------

def test_length_curve_is_accuracy_by_length(trained_copy):
    bundle = trained_copy.bundle
    curve = comparison.length_curve(bundle, (2, 9), samples=20, seed=7)
    assert list(curve.rows) == accuracy_by_length(bundle, [2, 9], 20, 7)
    assert curve.trained == (1, 6) and curve.at(9)["n"] == 20 and curve.at(3) is None
    assert comparison.eval_command("reverse", 9, 20, 7) == (
        "python -m explorer eval --checkpoint reverse --min-len 9 --max-len 9 --samples 20 --seed 16 --json")


def test_parameter_breakdown_adds_up(make_random_bundle):
    for attention in ("none", "dot", "additive"):
        bundle = make_random_bundle(attention=attention, bidirectional=True)
        parts = comparison.parameter_breakdown(bundle)
        assert parts["total"] == count_parameters(bundle.model)
        assert (parts["attention"] == 0) == (attention == "none")


def test_random_input_has_the_length(trained_copy):
    text = comparison.random_input(trained_copy.bundle, 5, seed=1)
    assert len(text) == 5 and comparison.random_input(trained_copy.bundle, 5, seed=1) == text


# --- figures: pure, labelled, exact on hover ---------------------------------------------------

def test_figures_are_pure_functions(make_random_bundle, trained_copy):
    s = lessons.sample_signal(8)
    assert isinstance(lfig.sampling_figure(s, "f", "A", "err", "时间 t"), go.Figure)
    fig = lfig.sampling_error_figure([2, 4, 8], [0.5, 0.25, 0.125], 4)
    assert fig.layout.xaxis.type == "log" and len(fig.data) == 2
    fig = lfig.vectors_figure({"a": np.ones(3), "b": np.arange(5.0)}, highlight="b")
    assert fig.data[0].z.shape == (2, 5) and np.isnan(fig.data[0].z[0, 4]) and fig.layout.shapes
    g = lessons.parameter_growth(4, 8, range(1, 11))
    fig = lfig.parameter_growth_figure(g, mark=5)
    assert list(fig.data[0].y) == list(g.unshared)
    tr = trace(trained_copy.bundle, "3141")
    fig = lfig.output_distribution_figure(tr, 2)
    assert fig.data[0].z.shape[0] == 2
    lk = lessons.lookup(tr, 1)
    fig = lfig.lookup_figure(lk)
    assert list(fig.data[0].y) == [r.weight for r in lk.records] and "α" in fig.data[0].hovertemplate
    fig = lfig.attention_figure(tr, 1, "输入位置 i", "输出时间步 t", "正确位置")
    assert fig.layout.xaxis.title.text == "输入位置 i"
    assert "正确位置" in [d.name for d in fig.data] and "true alignment" not in [d.name for d in fig.data]


def test_accuracy_figure_draws_each_curve(trained_copy):
    curve = comparison.length_curve(trained_copy.bundle, (1, 3, 8), samples=10)
    fig = cfig.accuracy_by_length_figure([curve], "exact_match")
    assert len(fig.data) == 1
    assert list(fig.data[0].y) == [100 * r["exact_match"] for r in curve.rows]
    assert "n=" in fig.data[0].hovertemplate
    assert fig.layout.shapes  # the training range is shaded
    fig = cfig.parameter_figure({"a": {"encoder": 1, "decoder": 2, "attention": 3, "output": 4}})
    assert [d.x[0] for d in fig.data] == [1, 2, 3, 4]


def test_evaluation_stops_decoding_where_scoring_stops(trained_copy, make_random_bundle, monkeypatch):
    """`evaluate` decodes only len(target) + 1 steps (what scoring reads): the same metrics as decoding
    on to the length cap, for a trained model beyond its lengths and for a random one that never stops."""
    import explorer.training.evaluation as evaluation_module
    from explorer.training.evaluation import evaluate, task_pairs
    uncapped = evaluation_module.greedy_batch
    for bundle in (trained_copy.bundle, make_random_bundle(attention="dot", seed=4)):
        pairs = task_pairs(bundle, 60, seed=3, min_len=1, max_len=9)
        capped = evaluate(bundle.model, pairs)
        with monkeypatch.context() as m:
            m.setattr(evaluation_module, "greedy_batch", lambda model, sources, max_len=None: uncapped(model, sources))
            full = evaluate(bundle.model, pairs)
        assert capped == full


def test_a_weight_on_the_true_position_is_still_drawn_as_a_weight(trained_copy):
    """Section 6's α chart: every bar in the attention colour (the legend's "weight" entry is honest);
    the true position is an outline, so a weight sitting on it still shows (it used to be green only)."""
    from explorer.app.figures.style import ATTENTION_COLOUR, TRUTH
    tr = trace(trained_copy.bundle, "3141")
    lk = lessons.lookup(tr, 1)
    assert any(r.truth for r in lk.records)
    bars = lfig.lookup_figure(lk).data[0]
    assert bars.marker.color == ATTENTION_COLOUR
    outlined = [c == TRUTH and w > 0 for c, w in zip(bars.marker.line.color, bars.marker.line.width)]
    assert outlined == [r.truth for r in lk.records]


def test_signed_numbers_are_blue_when_positive_on_every_page():
    """One colour language: Learn's vector charts use Explore's diverging scale the same way round
    (RdBu: negative red, positive blue), never reversed."""
    from explorer.app.figures.style import DIVERGING_SCALE
    fig = lfig.vectors_figure({"a": np.array([-1.0, 1.0])})
    heat = fig.data[0]
    assert not heat.reversescale and heat.zmid == 0
    scale = heat.colorscale
    assert scale == go.Heatmap(colorscale=DIVERGING_SCALE).colorscale
    top = scale[-1][1]
    red, _, blue = (int(v) for v in top[top.index("(") + 1:-1].split(","))
    assert blue > red, f"the positive end should be blue, is {top}"
