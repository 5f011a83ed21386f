"""The trace (explorer/engine/trace.py) is the numbers the model used: the seed's equations hold on it, it
agrees with greedy decoding, beam search of width 1 and the training forward pass, and its
interventions do exactly what they say."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.engine.bundle import ModelBundle, Prepared
from explorer.engine.decoding import beam_search, greedy_batch, strip_output
from explorer.errors import ExplorerError
from explorer.engine.lengths import output_cap, output_caps
from explorer.defaults import ATTENTIONS, CELLS
from explorer.record import Intervention, Trace, first_difference
from explorer.engine.trace import trace
from explorer.data.vocab import EOS, EOS_ID, SOS_ID

ATOL = 1e-5


def softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def parameter(p: torch.Tensor) -> np.ndarray:
    return p.detach().double().numpy()


def assert_step_four(bundle: ModelBundle, tr: Trace) -> None:
    """ŷ_t = softmax(U [s_t; c_t] + b_U) on every step (without attention: U s_t + b_U), from the trace's own
    s_t and c_t: the distribution shown is computed from the states shown."""
    model = bundle.model
    read = np.concatenate([tr.decoder_states, tr.contexts], axis=1) if tr.has_attention else tr.decoder_states
    logits = read.astype(np.float64) @ parameter(model.out.weight).T + parameter(model.out.bias)
    np.testing.assert_allclose(tr.probs, softmax(logits), atol=ATOL)


def assert_seed_equations(bundle: ModelBundle, tr: Trace) -> None:
    """The seed's steps 3 and 4 on every output step: e_t from q_t and K, α_t = softmax(e_t), c_t = α_t V;
    ŷ_t from [s_t; c_t] (`assert_step_four`)."""
    T, S = tr.steps, len(tr.source_tokens)
    assert tr.decoder_states.shape == (T, bundle.model.cfg.hidden)
    assert tr.probs.shape == (T, len(bundle.tgt_vocab))
    np.testing.assert_allclose(tr.probs.sum(-1), 1.0, atol=ATOL)
    assert_step_four(bundle, tr)
    if not tr.has_attention:
        assert tr.weights.shape == tr.scores.shape == (T, 0)
        return
    D = bundle.model.cfg.attn_dim
    assert tr.keys.shape == tr.values.shape == (S, D)
    assert tr.queries.shape == tr.contexts.shape == (T, D)
    assert tr.scores.shape == tr.weights.shape == (T, S)
    # rows of α sum to 1, and no weight is negative
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=ATOL)
    assert (tr.weights >= 0).all()
    # c_t = Σ_i α_ti v_i
    np.testing.assert_allclose(tr.contexts, tr.weights @ tr.values, atol=ATOL)
    # e_t from q_t and the keys
    if tr.attention == "dot":
        expected = tr.queries @ tr.keys.T  # (T, S): e_ti = q_t · k_i, i.e. e_t = K q_t
    elif tr.attention == "scaled_dot":
        expected = tr.queries @ tr.keys.T / math.sqrt(D)
    else:  # additive: e_ti = wᵀ tanh(q_t + k_i)
        w = bundle.model.attention.w.weight.detach().numpy()[0]  # (D,)
        expected = np.tanh(tr.queries[:, None, :] + tr.keys[None, :, :]) @ w
    np.testing.assert_allclose(tr.scores, expected, rtol=1e-4, atol=ATOL)
    # α_t = softmax(e_t) at the trained temperature τ = 1
    np.testing.assert_allclose(tr.weights, softmax(tr.scores), atol=ATOL)


def assert_trace_is_greedy_and_beam_of_width_one(bundle: ModelBundle, texts: list[str]) -> None:
    """Tracing is greedy decoding with its steps kept: same output alone, in a padded batch, and as beam 1."""
    traces = [trace(bundle, text) for text in texts]
    sources = [bundle.prepare(text).ids for text in texts]
    batch = greedy_batch(bundle.model, sources, max_len=output_caps(bundle, sources))
    for b, tr in enumerate(traces):
        ids = tr.output_ids.tolist()
        ended = ids[-1] == EOS_ID
        cap = output_cap(bundle, len(sources[b])).steps
        assert len(ids) <= cap and (ended or len(ids) == cap), "decoding stops at <eos> or at the cap"
        assert strip_output(batch.ids[b].tolist()) == strip_output(ids)
        assert int(batch.lengths[b]) == len(ids)
        best = beam_search(bundle.model, sources[b], width=1, max_len=cap)[0]
        assert list(best.ids) == ids and best.finished == ended


def target_for(bundle: ModelBundle, text: str) -> Prepared:
    """A target to teacher-force: the task's truth, or (translation) the greedy output with its first word changed."""
    truth = bundle.ground_truth(bundle.prepare(text).tokens)
    if truth is not None:
        tokens = list(truth.target)
    else:
        words = bundle.tgt_vocab.tokens[4:6]  # two real words of the target language
        tokens = [t for t in trace(bundle, text).output_tokens if t != EOS][: bundle.model.cfg.max_tgt_len - 2]
        tokens = [words[1] if tokens[:1] == [words[0]] else words[0]] + tokens[1:]
    ids = tuple(bundle.tgt_vocab.encode(tokens)) + (EOS_ID,)
    return Prepared(" ".join(tokens), tuple(tokens), ids, ())


def assert_teacher_forced_trace_matches_forward(bundle: ModelBundle, text: str) -> None:
    """With full teacher forcing, the trace's ŷ_t and α_t are the training forward pass's."""
    target = target_for(bundle, text)
    tr = trace(bundle, text, target=target)
    assert tr.teacher_forced and list(tr.output_ids) == list(target.ids)
    prepared = bundle.prepare(text)
    src = torch.tensor([prepared.ids])
    tgt_in = torch.tensor([(SOS_ID,) + target.ids[:-1]])
    with torch.no_grad():
        logits, weights = bundle.model(src, torch.tensor([len(prepared.ids)]), tgt_in, teacher_forcing=1.0)
    np.testing.assert_allclose(tr.probs, torch.softmax(logits[0], -1).numpy(), atol=ATOL)
    if weights is not None:
        np.testing.assert_allclose(tr.weights, weights[0].numpy(), atol=ATOL)


# --- invariants on random, trained and shipped models ------------------------------------------------


def test_the_seed_equations_hold_on_every_trace(any_model):
    for text in any_model.inputs:
        assert_seed_equations(any_model.bundle, trace(any_model.bundle, text))


def test_trace_output_is_greedy_output_and_beam_of_width_one(any_model):
    assert_trace_is_greedy_and_beam_of_width_one(any_model.bundle, any_model.inputs)


def test_teacher_forced_trace_equals_the_training_forward_pass(any_model):
    for text in any_model.inputs:
        assert_teacher_forced_trace_matches_forward(any_model.bundle, text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cell=st.sampled_from(CELLS), attention=st.sampled_from(ATTENTIONS), layers=st.integers(1, 2),
       bidirectional=st.booleans(), seed=st.integers(0, 10_000), hidden=st.integers(1, 12),
       attn_dim=st.integers(1, 7), text=st.text("0123456789", min_size=1, max_size=12))
def test_the_invariants_hold_for_many_random_models(make_random_bundle, cell, attention, layers, bidirectional,
                                                    seed, hidden, attn_dim, text):
    if cell == "unshared":
        layers, bidirectional = 1, False
    bundle = make_random_bundle(cell, attention, layers, bidirectional, seed=seed, hidden=hidden, attn_dim=attn_dim)
    assert_seed_equations(bundle, trace(bundle, text))
    assert_trace_is_greedy_and_beam_of_width_one(bundle, [text, text[::-1][: len(text) // 2 + 1]])
    assert_teacher_forced_trace_matches_forward(bundle, text)


def test_the_trained_copy_model_attends_along_the_diagonal(trained_copy):
    tr = trace(trained_copy.bundle, "31415")
    assert tr.output_tokens == ("3", "1", "4", "1", "5", EOS)
    assert tr.alignment is not None and tr.alignment_accuracy() == 1.0
    assert [int(i) for i in tr.weights[:5].argmax(-1)] == [0, 1, 2, 3, 4]


# --- interventions --------------------------------------------------------------------------------


@pytest.fixture(params=["random", "trained"])
def attending(request, random_attention_bundle, trained_copy) -> tuple[ModelBundle, str]:
    """(model, input): every attending random architecture, and the trained copy model."""
    if request.param == "trained":
        return trained_copy.bundle, "271828"
    return random_attention_bundle, "402718"


def test_identity_intervention_changes_nothing(attending):
    bundle, text = attending
    plain, identity = trace(bundle, text), trace(bundle, text, Intervention(temperature=1.0))
    assert identity.intervention.is_identity
    assert plain.output_tokens == identity.output_tokens
    for name in ("scores", "weights", "contexts", "probs", "decoder_states"):
        assert np.array_equal(getattr(plain, name), getattr(identity, name)), name


def test_masked_positions_get_exactly_zero_weight(attending):
    bundle, text = attending
    tr = trace(bundle, text, Intervention(masked=(0, 3)))
    assert (tr.weights[:, [0, 3]] == 0.0).all()
    assert np.isneginf(tr.scores[:, [0, 3]]).all()
    assert_rows_are_distributions(tr)
    np.testing.assert_allclose(tr.contexts, tr.weights @ tr.values, atol=ATOL)


def assert_rows_are_distributions(tr: Trace) -> None:
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=ATOL)


def test_pinning_puts_all_of_alpha_t_on_one_position_at_that_step_only(attending):
    bundle, text = attending
    plain = trace(bundle, text)
    t = min(2, plain.steps - 1)
    tr = trace(bundle, text, Intervention(pins=((t, 4),)))
    assert tr.weights[t].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0][: len(text)]
    np.testing.assert_allclose(tr.contexts[t], tr.values[4], atol=ATOL)
    assert np.array_equal(tr.weights[:t], plain.weights[:t]), "steps before the pin are unchanged"
    assert tr.output_tokens[:t] == plain.output_tokens[:t]
    if tr.steps > t + 1:
        assert_rows_are_distributions(tr)  # later steps attend freely again


def test_forcing_a_token_at_step_t_keeps_earlier_steps_and_feeds_it_on(attending):
    bundle, text = attending
    plain = trace(bundle, text)
    t = min(2, plain.steps - 1)
    token = next(tok for tok in "0123456789" if tok != plain.output_tokens[t])
    tr = trace(bundle, text, Intervention(forced=((t, token),)))
    assert tr.output_tokens[t] == token
    assert tr.output_tokens[:t] == plain.output_tokens[:t]
    assert np.array_equal(tr.probs[: t + 1], plain.probs[: t + 1]), "the model's own ŷ up to t is unchanged"
    assert first_difference(plain.output_tokens, tr.output_tokens) == t
    if tr.steps > t + 1:
        assert tr.previous_tokens[t + 1] == token, "the forced token is what step t+1 reads"


def test_a_low_temperature_sharpens_attention_and_keeps_the_scores(attending):
    bundle, text = attending
    plain, cold = trace(bundle, text), trace(bundle, text, Intervention(temperature=0.05))
    # step 0 sees the same s_0 and q_0 either way, so its scores match and only α changes
    assert np.array_equal(plain.scores[0], cold.scores[0])
    already_one_hot = entropy(plain.weights[0]) < 1e-6
    assert entropy(cold.weights[0]) < entropy(plain.weights[0]) or already_one_hot
    assert cold.weights[0].max() >= plain.weights[0].max()
    np.testing.assert_allclose(cold.weights, softmax(cold.scores / 0.05), atol=ATOL)
    hot = trace(bundle, text, Intervention(temperature=50.0))
    assert entropy(hot.weights[0]) > entropy(plain.weights[0])


def test_interventions_combine_and_are_recorded(trained_copy):
    intervention = Intervention(temperature=0.5, masked=(1,), pins=((0, 2),), forced=((1, "7"),))
    tr = trace(trained_copy.bundle, "12345", intervention)
    assert tr.weights[0].argmax() == 2 and (tr.weights[1:, 1] == 0).all()
    assert tr.output_tokens[1] == "7"
    assert tr.intervention == intervention
    # the JSON counts from 1, like the CLI's flags and the app's URLs
    assert json.loads(tr.to_json())["intervention"] == {"temperature": 0.5, "masked": [2], "pins": [[1, 3]],
                                                         "forced": [[2, "7"]]}


@pytest.mark.parametrize("intervention, message", [
    (Intervention(masked=(0, 1, 2, 3)), "at least one input position must stay visible"),
    (Intervention(masked=(4,)), "cannot mask position 5: the input has positions 1–4"),
    (Intervention(masked=(-1,)), "cannot mask position 0"),
    (Intervention(pins=((0, 4),)), "cannot pin attention to position 5"),
    (Intervention(pins=((0, -1),)), "cannot pin attention to position 0"),
    (Intervention(pins=((-1, 0),)), "cannot pin at step 0"),
    (Intervention(pins=((10_000, 0),)), "cannot pin at step 10001"),
    (Intervention(forced=((0, "x"),)), "cannot force 'x': the model has no such output token"),
    (Intervention(forced=((-1, "1"),)), "cannot force a token at step 0"),
    (Intervention(forced=((10_000, "1"),)), "cannot force a token at step 10001"),
    (Intervention(temperature=0.0), "temperature must be"),
    (Intervention(temperature=-1.0), "temperature must be"),
    (Intervention(temperature=float("nan")), "temperature must be"),
    (Intervention(temperature=float("inf")), "temperature must be"),
])
def test_impossible_interventions_are_refused_with_a_clear_message(trained_copy, intervention, message):
    with pytest.raises(ExplorerError, match=message):
        trace(trained_copy.bundle, "1234", intervention)


# --- JSON --------------------------------------------------------------------------------------------


REQUIRED_KEYS = {"source_tokens", "output_tokens", "encoder_states", "keys", "values", "decoder_states",
                 "queries", "scores", "weights", "contexts", "attention"}


def test_the_trace_json_round_trips_with_every_required_key(any_model):
    bundle = any_model.bundle
    tr = trace(bundle, any_model.inputs[0])
    data = json.loads(tr.to_json())
    assert REQUIRED_KEYS <= set(data)
    T, S = tr.steps, len(tr.source_tokens)
    assert data["source_tokens"] == list(tr.source_tokens) and data["output_tokens"] == list(tr.output_tokens)
    assert data["attention"] == bundle.model.cfg.attention
    for key in ("encoder_states", "keys", "values"):
        assert len(data[key]) == S
    for key in ("decoder_states", "queries", "scores", "weights", "contexts"):
        assert len(data[key]) == T
    for key in ("encoder_states", "keys", "values", "decoder_states", "queries", "scores", "weights", "contexts"):
        restored = np.array(data[key], dtype=np.float64).reshape(getattr(tr, key).shape)
        np.testing.assert_allclose(restored, getattr(tr, key), rtol=1e-6)


def test_masked_scores_become_null_in_json(trained_copy):
    tr = trace(trained_copy.bundle, "1234", Intervention(masked=(2,)))
    data = json.loads(tr.to_json())
    assert all(row[2] is None for row in data["scores"])
    assert all(row[2] == 0.0 for row in data["weights"])
    assert "NaN" not in tr.to_json() and "Infinity" not in tr.to_json()


def test_a_model_without_attention_traces_empty_attention(make_random_bundle):
    bundle = make_random_bundle(attention="none")
    tr = trace(bundle, "1234")
    assert not tr.has_attention and tr.alignment_accuracy() is None
    data = json.loads(tr.to_json())
    assert data["weights"] == [[] for _ in range(tr.steps)] and data["keys"] == [[] for _ in range(4)]


# --- inputs the trace refuses ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("", "the input is empty"),
    (" \t\n", "the input is empty"),
    ("12a4", "unknown symbol 'a'"),
    ("12\x074", r"unknown symbol U\+0007"),
    ("1\u202e2", r"U\+202E \(RIGHT-TO-LEFT OVERRIDE\)"),
    ("1😀", "unknown symbol '😀'"),
    ("1" * 13, "13 tokens; this model supports at most 12"),
    ("1" * 20_000, "20,000 characters; the limit is 1,000"),
])
def test_bad_inputs_are_refused_with_a_clear_message(make_random_bundle, text, message):
    with pytest.raises(ExplorerError, match=message):
        trace(make_random_bundle(), text)


def test_a_built_trace_cannot_be_changed_by_a_figure(trained_copy):
    """One cached trace feeds every figure on a page: its arrays are read-only, not just its attributes."""
    tr = trace(trained_copy.bundle, "271828")
    with pytest.raises(ValueError, match="read-only"):
        tr.weights[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        tr.probs *= 2
