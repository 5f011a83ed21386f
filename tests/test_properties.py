"""Property tests (hypothesis) for what tests/test_trace.py, test_corpus.py and test_tasks.py leave out:

- toy tasks: tokenize/detokenize round trips for any alphabet, with any whitespace typed around;
- any text at all (emoji, right-to-left, control characters, lone combining marks, 2,000 characters)
  given to a model either decodes or is refused with an ExplorerError, never another exception, and
  the ids it becomes decode back to its tokens;
- the trace invariants under random interventions on random small models: α rows sum to 1, masked
  positions get exactly 0, pinned rows are one-hot, α = softmax(e / τ) elsewhere, c = αV, e = Kq
  (dot), the forced tokens are the ones chosen, and the same request gives the same trace.

(The invariants without interventions, over random models and inputs, are in test_trace.py.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.app import views
from explorer.errors import ExplorerError
from explorer.defaults import ATTENTIONS, CELLS
from explorer.data.tasks import TaskSpec, make_task
from explorer.engine.trace import Intervention, trace
from explorer.data.vocab import UNK

from conftest import random_bundle_for
from explore_models import build_models

ATOL = 1e-5
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# symbols a task alphabet may hold: anything printable or not, except whitespace (and surrogates)
SYMBOLS = st.characters(blacklist_categories=("Cs",)).filter(lambda c: not c.isspace())
WHITESPACE = st.text(st.sampled_from(" \t\n\r\u00a0\u2009\u3000\x1c"), max_size=3)
HOSTILE = st.one_of(
    st.text(max_size=60),
    st.text(st.sampled_from(list("0123456789 abcMarch,/-") + ["😀", "\u202e", "\u200d", "\x00", "\x1b", "\u0301",
                                                              "ש", "你", "\ufeff", "\ud7ff", "\U0010ffff"]),
            max_size=60),
    st.builds(lambda c, n: c * n, st.characters(blacklist_categories=("Cs",)), st.integers(900, 2000)),
)


# --- toy-task tokenisation ---------------------------------------------------------------------------

@FAST
@given(alphabet=st.lists(SYMBOLS, min_size=1, max_size=12, unique=True), data=st.data())
def test_sequence_tasks_read_back_what_they_write_whatever_the_alphabet(alphabet, data):
    spec = TaskSpec(data.draw(st.sampled_from(["copy", "reverse", "sort"])), 1, 8, "".join(alphabet))
    task = make_task(spec)
    symbols = data.draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=20))
    assert task.tokenize(task.detokenize(symbols)) == tuple(symbols)
    typed = "".join(data.draw(WHITESPACE) + s for s in symbols) + data.draw(WHITESPACE)
    assert task.tokenize(typed) == tuple(symbols), "whitespace typed around the symbols is dropped"
    assert task.detokenize(task.tokenize(typed)) == "".join(symbols)


@FAST
@given(text=st.text(max_size=40))
def test_dates_tokens_are_characters_with_whitespace_collapsed_to_one_space(text):
    task = make_task(TaskSpec("dates"))
    tokens = task.tokenize(text)
    assert tokens == tuple(" ".join(text.split()))
    assert task.tokenize(task.detokenize(tokens)) == tokens


# --- any text, any model ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def models():
    """A random copy model, and the untrained dates and translation models the UI tests use."""
    built = {b.name: b for b in build_models()}
    return {"copy": random_bundle_for("gru", "dot", seed=5), "dates": built["dates"], "translation": built["tiny-fra"]}


@pytest.mark.parametrize("which", ["copy", "dates", "translation"])
def test_any_text_decodes_or_is_refused_with_a_message(models, which):
    bundle = models[which]

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=HOSTILE)
    def check(text):
        try:
            prepared = bundle.prepare(text)
        except ExplorerError as exc:
            assert str(exc) and "\n" not in str(exc)
            return
        expected = [t if t in bundle.src_vocab else UNK for t in prepared.tokens]
        assert bundle.src_vocab.decode(prepared.ids) == expected
        assert set(prepared.unknown) == {t for t in prepared.tokens if t not in bundle.src_vocab}
        if bundle.task is not None:
            assert not prepared.unknown, "toy tasks refuse unknown symbols"
        tr = trace(bundle, text)
        assert tr.source_tokens == prepared.tokens and tr.steps >= 1

    check()


# --- trace invariants under random interventions ---------------------------------------------------------

def softmax(x: np.ndarray) -> np.ndarray:
    finite = np.where(np.isneginf(x), -np.inf, x)
    z = np.exp(finite - finite.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cell=st.sampled_from(CELLS), attention=st.sampled_from([a for a in ATTENTIONS if a != "none"]),
       seed=st.integers(0, 10_000), hidden=st.integers(1, 10), attn_dim=st.integers(1, 6),
       text=st.text("0123456789", min_size=2, max_size=10), data=st.data())
def test_the_invariants_hold_under_random_interventions(cell, attention, seed, hidden, attn_dim, text, data):
    bundle = random_bundle_for(cell, attention, seed=seed, hidden=hidden, attn_dim=attn_dim)
    S = len(text)
    plain = trace(bundle, text)
    masked = tuple(sorted(data.draw(st.sets(st.integers(0, S - 1), max_size=S - 1))))
    visible = [i for i in range(S) if i not in masked]
    steps = plain.steps
    pins = tuple(sorted(data.draw(st.dictionaries(st.integers(0, steps - 1), st.sampled_from(visible),
                                                  max_size=2)).items()))
    forced = tuple(sorted(data.draw(st.dictionaries(st.integers(0, steps - 1), st.sampled_from("0123456789"),
                                                    max_size=2)).items()))
    temperature = data.draw(st.sampled_from([0.1, 0.5, 1.0, 2.0, 10.0]))
    intervention = Intervention(temperature, masked, pins, forced)
    tr = trace(bundle, text, intervention)
    again = trace(bundle, text, intervention)

    T = tr.steps
    assert T >= 1 and tr.weights.shape == tr.scores.shape == (T, S)
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=ATOL)  # every α_t is a distribution
    assert (tr.weights >= 0).all()
    if masked:
        assert (tr.weights[:, list(masked)] == 0.0).all() and np.isneginf(tr.scores[:, list(masked)]).all()
    pinned = dict(pins)
    for t in range(T):
        if t in pinned:
            assert tr.weights[t].tolist() == [1.0 if i == pinned[t] else 0.0 for i in range(S)]
        else:
            np.testing.assert_allclose(tr.weights[t], softmax(tr.scores[t] / temperature), atol=ATOL)
    np.testing.assert_allclose(tr.contexts, tr.weights @ tr.values, atol=ATOL)  # c_t = Σ_i α_ti v_i
    if attention in ("dot", "scaled_dot"):
        expected = tr.queries @ tr.keys.T / (math.sqrt(attn_dim) if attention == "scaled_dot" else 1.0)
        shown = ~np.isneginf(tr.scores)
        np.testing.assert_allclose(tr.scores[shown], expected[shown], rtol=1e-4, atol=ATOL)  # e_t = K q_t
    for t, token in forced:
        if t < T:
            assert tr.output_tokens[t] == token
    # steps before the first intervened step are the plain decoding's
    first = min([t for t, _ in pins + forced] + [T])
    if not masked and temperature == 1.0:
        assert tr.output_tokens[:first] == plain.output_tokens[:first]
        np.testing.assert_array_equal(tr.weights[:first], plain.weights[:first])
    assert tr.output_tokens == again.output_tokens and np.array_equal(tr.weights, again.weights)


TOKENS = st.text(st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=6)


@given(temperature=st.sampled_from([0.1, 0.25, 0.5, 1.0, 2.0, 10.0]),
       masked=st.lists(st.integers(0, 40), unique=True, max_size=5),
       pins=st.dictionaries(st.integers(0, 40), st.integers(0, 40), max_size=4),
       forced=st.dictionaries(st.integers(0, 40), TOKENS, max_size=4))
def test_the_what_if_survives_the_url(temperature, masked, pins, forced):
    iv = Intervention(temperature=temperature, masked=tuple(sorted(masked)), pins=tuple(sorted(pins.items())),
                      forced=tuple(sorted(forced.items())))
    params = views.intervention_query(iv)
    assert views.intervention_from_query(params) == iv
    assert (params == {}) == iv.is_identity


@pytest.mark.parametrize("params", [{"mask": "x"}, {"mask": "0"}, {"pin": "3"}, {"pin": "2:y"}, {"force": "7"},
                                    {"force": "a:b"}, {"temp": "hot"}, {"temp": "1e9"}, {"pin": "1:"}])
def test_a_malformed_what_if_is_refused_with_a_message(params):
    with pytest.raises(ExplorerError, match="link"):
        views.intervention_from_query(params)
