"""Is the attention the explanation? Attributions and counterfactual attention (explorer/engine/attribution.py,
the records in explorer/faithfulness.py) held to what is known: on copy and reverse the right input of every
step is known, erasure is two plain decodes, integrated gradients add up to the output's change where the
path is smooth, the adversarial α keeps the output within ε, and the no-attention twin has attributions and no α.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from explorer import faithfulness as F
from explorer.checkpoints import checkpoint
from explorer.engine.attribution import _step_starts, baseline_embedding, explain, js_distance
from explorer.engine.decoding import decode
from explorer.engine.model import Control
from explorer.engine.trace import Intervention, erasure_masks, trace
from tests.conftest import random_bundle_for

SHIPPED = set(checkpoint.pretrained_names())
needs = lambda *names: pytest.mark.skipif(not set(names) <= SHIPPED,  # noqa: E731
                                         reason=f"needs the shipped {', '.join(names)}")


def _load(name: str):
    from explorer.checkpoints.registry import load_shipped
    return load_shipped(name)


@pytest.fixture(scope="module")
def explained():
    """Explanations of fresh inputs (lengths 1–12, to keep the suite quick) of the shipped copy and reverse."""
    out = {}
    for name in ("copy", "reverse"):
        if name not in SHIPPED:
            continue
        bundle = _load(name)
        rng = random.Random(7)
        texts = ["".join(rng.choice("0123456789") for _ in range(rng.randint(1, 12))) for _ in range(12)]
        out[name] = (bundle, [explain(bundle, text) for text in texts])
    return out


def _share(hits):
    h = sum(a for a, _ in hits)
    n = sum(b for _, b in hits)
    return h / n, n


@needs("copy", "reverse")
@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_alpha_integrated_gradients_and_erasure_point_at_the_known_input(explained, name):
    """Issue 40's floor: on copy and reverse the right input of every step is known, and α's, integrated
    gradients' and erasure's top input is it at >= 95% of steps (gradient × input's share is reported in
    docs/FAITHFULNESS.md, not held to a floor)."""
    _, done = explained[name]
    for method in (None, "integrated_gradients", "erasure"):
        share, counted = _share([e.truth_hits(method) for e in done])
        assert counted > 50
        assert share >= 0.95, f"{name}: {method or 'α'} finds the true input at {share:.1%} of steps"


@needs("reverse")
def test_convergence_delta_is_captums_completeness_gap(explained):
    """delta = Σ_i IG_ti − (f(x) − f(x')): f the logit of y_t, x' the baseline (the mean token embedding at
    every position), each end computed here by a plain teacher-forced decode."""
    bundle, done = explained["reverse"]
    e = done[0]
    a = e.attributions
    np.testing.assert_allclose(a.scores["integrated_gradients"].sum(axis=1) - a.ig_change, a.ig_delta, atol=1e-4)
    tr = trace(bundle, "".join(e.source_tokens))
    model = bundle.model
    S = len(e.source_tokens)
    src = torch.tensor([bundle.src_vocab.encode(e.source_tokens)])
    out = torch.tensor([tr.output_ids.tolist()])
    ends = []
    for x in (model.encoder.embed(src), baseline_embedding(model).expand(1, S, -1)):
        with torch.no_grad():
            memory = model.encode(src, torch.tensor([S]), embedded=x)
            steps = decode(model, memory, out.shape[1], target=out, keep_steps=True).steps
        ends.append(np.array([s.logits[0, y].item() for s, y in zip(steps, tr.output_ids)]))
    np.testing.assert_allclose(a.ig_change, ends[0] - ends[1], atol=1e-3)


@needs("reverse")
def test_erasure_is_two_plain_decodes():
    """Erasure at (t, i) = log p(y_t) − log p(y_t | x_i hidden at step t), each a teacher-forced decoding of the
    same output through decoding.decode: the plain one, and one with Explore's mask of x_i (the Control an
    Intervention(masked=(i,)) makes) at step t alone."""
    bundle = _load("reverse")
    text = "31415926"
    e = explain(bundle, text)
    tr = trace(bundle, text)
    model = bundle.model
    src = torch.tensor([bundle.prepare(text).ids])
    out = torch.tensor([tr.output_ids.tolist()])
    masks = erasure_masks(src.shape[1])
    with torch.no_grad():
        memory = model.encode(src, torch.tensor([src.shape[1]]))
        plain = decode(model, memory, out.shape[1], target=out, keep_steps=True).steps
        for i in (0, 3, 7):
            for t in range(tr.steps):
                hidden = decode(model, memory, out.shape[1], target=out, keep_steps=True,
                                controls={t: Control(mask=masks[i:i + 1])}).steps
                y = tr.output_ids[t]
                expected = (torch.log_softmax(plain[t].logits[0], -1)[y]
                            - torch.log_softmax(hidden[t].logits[0], -1)[y]).item()
                assert e.attributions.scores["erasure"][t, i] == pytest.approx(expected, abs=1e-4)


@needs("reverse")
def test_counterfactual_alphas_are_what_they_say():
    bundle = _load("reverse")
    e = explain(bundle, "9081726354", seed=5)
    c = e.counterfactuals
    for kind in F.COUNTERFACTUALS:
        np.testing.assert_allclose(c.weights[kind].sum(axis=1), 1.0, atol=1e-5)
    for t in range(e.steps):
        assert sorted(c.weights["permuted"][t]) == pytest.approx(sorted(e.weights[t]), abs=1e-6)
    np.testing.assert_allclose(c.weights["uniform"], 1 / len(e.source_tokens))
    assert explain(bundle, "9081726354", seed=5).counterfactuals.weights["permuted"] == pytest.approx(
        c.weights["permuted"]), "one seed, one permutation"


def with_attention(bundle, tr, weights: np.ndarray) -> np.ndarray:
    """ŷ_t of every step of `tr` decoded again from its own start with each replacement α: weights (T, K, S)
    -> probabilities (T, K, V), through the counterfactuals' own path (attribution._step_starts)."""
    src = torch.tensor([bundle.src_vocab.encode(tr.source_tokens)])
    start, _, _ = _step_starts(bundle.model, src, torch.tensor([tr.output_ids.tolist()]))
    T, K, S = weights.shape
    with torch.no_grad():
        q = start.probs(torch.tensor(weights, dtype=torch.float32).reshape(T * K, S))
    return q.view(T, K, -1).double().numpy()


def _step_with(bundle, text: str, t: int, alpha: np.ndarray) -> np.ndarray:
    """ŷ_t of the greedy decoding of `text` with α_t replaced, through decoding.decode's own loop."""
    model = bundle.model
    tr = trace(bundle, text)
    src = torch.tensor([bundle.prepare(text).ids])
    out = torch.tensor([tr.output_ids.tolist()])
    with torch.no_grad():
        memory = model.encode(src, torch.tensor([src.shape[1]]))
        control = Control(weights=torch.tensor(alpha, dtype=torch.float32).unsqueeze(0))
        steps = decode(model, memory, out.shape[1], target=out, controls={t: control}, keep_steps=True).steps
    return torch.softmax(steps[t].logits[0].float(), -1).numpy()


@pytest.fixture(scope="module")
def eng_fra():
    """The shipped eng-fra explained on the article's sentence and on 'I have a red car.'."""
    bundle = _load("eng-fra")
    return bundle, {text: explain(bundle, text) for text in ("How can we use variable input lengths?",
                                                             "I have a red car.")}


@needs("eng-fra")
def test_integrated_gradients_are_complete_on_a_smooth_path(eng_fra):
    """Completeness (Captum's check): on the translation model (soft additive attention) the path from the mean
    embedding is smooth, and Captum's delta is within 5% of the logit's change at nearly every step (on the sharp
    toy models at fewer: docs/FAITHFULNESS.md)."""
    _, done = eng_fra
    converged = np.concatenate([e.attributions.ig_converged() for e in done.values()])
    assert converged.mean() >= 0.9, f"converged at {converged.mean():.1%} of steps"


@needs("eng-fra")
def test_adversarial_alpha_keeps_the_output_and_goes_farther_than_permutations_that_do(eng_fra):
    """Jain & Wallace's adversary: the output within ε (checked by decoding that step again through
    decoding.decode), and farther from α than random permutations of α that also keep the output within ε."""
    bundle, done = eng_fra
    text = "I have a red car."
    e = done[text]
    c = e.counterfactuals
    tr = trace(bundle, text)
    for t in range(e.steps):
        q = _step_with(bundle, text, t, c.weights["adversarial"][t])
        assert 0.5 * np.abs(q - tr.probs[t]).sum() <= c.epsilon + 1e-4
    rng = np.random.default_rng(1)
    K = 12
    shuffled = np.stack([[e.weights[t][rng.permutation(e.weights.shape[1])] for _ in range(K)]
                         for t in range(e.steps)])  # (T, K, S)
    q = with_attention(bundle, tr, shuffled)
    tvd = 0.5 * np.abs(q - tr.probs[:, None, :]).sum(-1)  # (T, K)
    from scipy.spatial.distance import jensenshannon
    beaten = compared = 0
    for t in range(e.steps):
        for k in np.flatnonzero(tvd[t] <= c.epsilon):
            compared += 1
            beaten += c.jsd["adversarial"][t] >= jensenshannon(shuffled[t, k], e.weights[t], base=2) - 1e-6
    assert compared >= 5, "some permutations keep the output"
    assert beaten / compared >= 0.9, f"the adversary went farther than {beaten} of {compared} harmless permutations"


@needs("reverse-none")
def test_the_no_attention_twin_has_attributions_and_no_alpha():
    bundle = _load("reverse-none")
    e = explain(bundle, "31415926")
    assert e.attributions.methods == ("grad_x_input", "integrated_gradients")
    for method in e.attributions.methods:
        scores = e.attributions.scores[method]
        assert scores.shape == (e.steps, 8) and np.all(np.isfinite(scores)) and np.abs(scores).sum() > 0
    assert e.counterfactuals is None and e.agreement("grad_x_input") is None
    report = e.summary()
    assert report["methods"]["integrated_gradients"]["top1_agreement"] is None
    assert report["counterfactual"]["adversarial_flip_rate"] is None
    assert "no α" in report["note"]
    assert F.explanation_json_dict(e)["note"] == F.NO_ATTENTION


def test_agreement_of_identical_and_reversed_rankings():
    alpha = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    same = F.agreement(alpha, alpha * 5)
    assert same.top1.tolist() == [1.0, 1.0]
    assert same.kendall_tau == pytest.approx([1.0, 1.0])
    assert same.jsd == pytest.approx([0.0, 0.0], abs=1e-7)
    opposite = F.agreement(alpha, -alpha[:, ::-1])  # |scores| ranks the inputs the other way round
    assert opposite.top1.tolist() == [0.0, 0.0]
    assert opposite.kendall_tau == pytest.approx([-1.0, -1.0])
    flat = F.agreement(np.array([[1.0]]), np.array([[3.0]]))  # one input: top-1 agrees, τ is undefined
    assert flat.top1.tolist() == [1.0] and np.isnan(flat.kendall_tau[0])


def test_js_distance_is_scipys():
    from scipy.spatial.distance import jensenshannon
    rng = np.random.default_rng(0)
    a, b = rng.dirichlet(np.ones(6), 4), rng.dirichlet(np.ones(6), 4)
    ours = js_distance(torch.tensor(a), torch.tensor(b)).numpy()
    assert ours == pytest.approx([jensenshannon(x, y, base=2) for x, y in zip(a, b)], abs=1e-9)


@needs("copy")
def test_explanation_exports_as_json(explained):
    import json
    _, done = explained["copy"]
    out = json.loads(json.dumps(F.json_ready(F.explanation_json_dict(done[0]))))
    assert set(out["attributions"]) == set(F.METHODS)
    assert len(out["attributions"]["erasure"]) == done[0].steps
    assert set(out["counterfactual"]) >= set(F.COUNTERFACTUALS)
    assert out["summary"]["steps"] == done[0].steps


def test_a_what_if_is_refused(trained_copy):
    from explorer.errors import ExplorerError
    bundle = trained_copy.bundle
    tr = trace(bundle, "1234", Intervention(temperature=2.0))
    with pytest.raises(ExplorerError, match="what-if"):
        explain(bundle, "1234", tr)


def test_every_architecture_gets_attributions(random_bundle):
    """Random models of every cell and score function (tiny: E=6, H=8, D=5): the shapes, and the records'
    arrays read-only."""
    bundle = random_bundle
    e = explain(bundle, "1234", ig_steps=4)
    T, S = e.steps, 4
    for method in e.attributions.methods:
        assert e.attributions.scores[method].shape == (T, S)
        with pytest.raises(ValueError, match="read-only"):
            e.attributions.scores[method][0, 0] = 1.0
    assert (e.counterfactuals is None) == (bundle.model.cfg.attention == "none")


def _decoded(bundle, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The input's ids and the greedy output's ids, (1, S) and (1, T): what the attributions explain."""
    prepared = bundle.prepare(text)
    return torch.tensor([prepared.ids]), torch.tensor([trace(bundle, prepared).output_ids.tolist()])


def test_the_path_s_gradients_are_captums_per_row_gradients(random_bundle):
    """The gradient function integrated gradients gets (one forward per path point, a batched backward for its
    steps) returns for every row of the path what Captum's own compute_gradients does (one forward per row), on
    every cell and score function; a batch not laid out as the path goes to Captum's own."""
    from captum._utils.gradient import compute_gradients
    from explorer.engine.attribution import _OnePass
    bundle = random_bundle
    src, out = _decoded(bundle, "1234")
    T = out.shape[1]
    forward = _OnePass(bundle.model, src, out).forward
    with torch.no_grad():
        x = bundle.model.encoder.embed(src)
    path = (x * torch.tensor([0.1, 0.5, 0.9]).view(-1, 1, 1)).repeat_interleave(T, 0)  # 3 points, T rows each
    for steps in (torch.arange(T).repeat(3), torch.arange(T).flip(0).repeat(3)):
        theirs = compute_gradients(forward, (path.clone().requires_grad_(),), None, (steps,))[0]
        ours = _OnePass(bundle.model, src, out).gradient_func(forward, (path.clone().requires_grad_(),), None, (steps,))[0]
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-6)
        assert theirs.abs().sum() > 0


def test_the_paths_ends_are_read_from_integrated_gradients_pass(random_bundle, monkeypatch):
    """Gradient × input (the gradient at x) and Captum's convergence delta (the scores at x and at the baseline)
    come from integrated gradients' one pass: the input is encoded once for all three, with the numbers their
    own passes give."""
    from captum._utils.gradient import compute_gradients
    from explorer.engine.attribution import _gradients, _OnePass, baseline_embedding
    bundle = random_bundle
    model = bundle.model
    src, out = _decoded(bundle, "1234")
    T = out.shape[1]
    encode, calls = model.encode, []
    monkeypatch.setattr(model, "encode", lambda *args, **kwargs: calls.append(1) or encode(*args, **kwargs))
    scores, _, change = _gradients(model, src, out, 8)
    assert len(calls) == 1
    monkeypatch.undo()
    alone = _OnePass(model, src, out)
    with torch.no_grad():
        x = model.encoder.embed(src).expand(T, -1, -1).contiguous()
        ends = alone.forward(x, torch.arange(T)) - alone.forward(
            baseline_embedding(model).expand_as(x).contiguous(), torch.arange(T))
    gradient = compute_gradients(alone.forward, (x.clone().requires_grad_(),), None, (torch.arange(T),))[0]
    np.testing.assert_allclose(scores["grad_x_input"], (gradient * x).sum(-1).double().numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(change, ends.double().numpy(), rtol=1e-4, atol=1e-6)
    assert np.abs(scores["grad_x_input"]).sum() > 0


def test_the_adversarys_search_reads_the_outputs_decode_step_gives(random_attention_bundle):
    """The adversary searches with ŷ_t from the logits each input alone gives (step 4 is affine in c_t): for
    random α̃ on every attending cell and score function, the same distributions as decode_step with
    Control(weights=α̃), and the model's own α_t is how the search knows it may use them."""
    from explorer.engine.attribution import _MixedReadout, _step_starts
    bundle = random_attention_bundle
    src, out = _decoded(bundle, "1234")
    start, alpha, p = _step_starts(bundle.model, src, out)
    mixed = _MixedReadout(start, alpha, p)
    assert mixed.exact
    weights = torch.softmax(torch.randn(start.T, 5, src.shape[1], generator=torch.Generator().manual_seed(0)), -1)
    with torch.no_grad():
        decoded = start.probs(weights.reshape(-1, src.shape[1])).view(start.T, 5, -1)
    torch.testing.assert_close(mixed.probs(weights), decoded, rtol=1e-5, atol=1e-6)


def test_a_step_4_the_mixture_does_not_reproduce_is_searched_through_decode_step(make_random_bundle, monkeypatch):
    """Were step 4 not affine in c_t (here a tanh around it), the search falls back to decode_step itself."""
    from explorer.engine.attribution import _MixedReadout, _step_starts
    bundle = make_random_bundle("gru", "additive")
    affine = bundle.model.readout
    monkeypatch.setattr(bundle.model, "readout", lambda s, c, tokens=None: torch.tanh(affine(s, c, tokens)) * 9)
    src, out = _decoded(bundle, "1234")
    start, alpha, p = _step_starts(bundle.model, src, out)
    mixed = _MixedReadout(start, alpha, p)
    assert not mixed.exact
    weights = torch.full((start.T, 2, src.shape[1]), 1 / src.shape[1])
    with torch.no_grad():
        torch.testing.assert_close(mixed.probs(weights), start.probs(weights.reshape(-1, src.shape[1])).view(
            start.T, 2, -1))


def test_the_paths_ends_score_as_every_row_does(random_bundle):
    """Captum's convergence delta scores the path's two ends without gradients, T identical rows each: read
    from one row's pass, the same scores as every row's own."""
    from explorer.engine.attribution import _OnePass, baseline_embedding
    bundle = random_bundle
    src, out = _decoded(bundle, "1234")
    T = out.shape[1]
    forward = _OnePass(bundle.model, src, out).forward
    with torch.no_grad():
        x = bundle.model.encoder.embed(src)
    for end in (x, baseline_embedding(bundle.model).expand_as(x)):
        rows = end.expand(T, -1, -1).contiguous()
        with torch.no_grad():
            once = forward(rows, torch.arange(T))
        with torch.enable_grad():
            each = forward(rows.clone().requires_grad_(), torch.arange(T)).detach()
        torch.testing.assert_close(once, each, rtol=1e-5, atol=1e-6)


def test_the_score_explained_at_each_step_is_the_one_the_trace_computed(random_bundle):
    """What the gradient methods differentiate at step t is p(y_t | x, y_<t) as the trace computed it, at every
    step: also after an untrained model wrote <pad> (id 0) as a token, which the prefix was cut at before (the
    rows after it were read out at an earlier step)."""
    from explorer.engine.attribution import _OnePass
    from explorer.data.vocab import PAD_ID
    bundle = random_bundle_for("gru", "dot", 1, True)  # its greedy output: 9 then <pad> four times
    for model_bundle in (bundle, random_bundle):
        prepared = model_bundle.prepare("1234")
        tr = trace(model_bundle, prepared)
        src = torch.tensor([prepared.ids])
        T = tr.steps
        with torch.no_grad():
            x = model_bundle.model.encoder.embed(src).expand(T, -1, -1)
            one_pass = _OnePass(model_bundle.model, src, torch.tensor([tr.output_ids.tolist()]), target="probability")
            got = one_pass.forward(x, torch.arange(T))
        expected = tr.probs[np.arange(T), tr.output_ids]
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-7)
    assert PAD_ID in trace(bundle, bundle.prepare("1234")).output_ids[1:].tolist()


@needs("reverse", "reverse-none")
def test_exports_carry_the_attributions(explained):
    """The trace's JSON and CSV downloads (record.Trace.to_json, record.trace_csv) with the explanation: every
    method's score per step and position; without attention the table gets a row per position too."""
    import io
    import json

    import pandas as pd
    from explorer.record import trace_csv
    bundle, done = explained["reverse"]
    e = done[0]
    tr = trace(bundle, "".join(e.source_tokens))
    data = json.loads(tr.to_json(e))
    assert np.allclose(data["faithfulness"]["attributions"]["erasure"], e.attributions.scores["erasure"])
    assert "faithfulness" not in json.loads(tr.to_json())
    frame = pd.read_csv(io.StringIO(trace_csv(tr, e)))
    assert set(F.METHODS) <= set(frame.columns)
    row = frame[(frame["step"] == 1) & (frame["position"] == 1)].iloc[0]
    assert row["integrated_gradients"] == pytest.approx(e.attributions.scores["integrated_gradients"][0, 0])
    plain = _load("reverse-none")
    e_none = explain(plain, "123", ig_steps=4)
    frame = pd.read_csv(io.StringIO(trace_csv(trace(plain, "123"), e_none)))
    assert len(frame) == e_none.steps * 3 and "erasure" not in frame.columns
    assert frame["grad_x_input"].to_numpy() == pytest.approx(e_none.attributions.scores["grad_x_input"].reshape(-1))


@needs("reverse-none")
def test_the_stored_reports_are_what_the_cli_computes():
    """pretrained/faithfulness.json (Compare's twins) against fresh computation, for the cheapest twin: the stored
    report of reverse-none is summarise() of the same 100 inputs (seed 12345), up to float rounding."""
    from explorer.training import explanations
    path = checkpoint.resolve("reverse-none")
    stored = explanations.stored_report(path)
    if stored is None:
        pytest.skip("no stored report for this reverse-none file (benchmarks/faithfulness.py --store)")
    fresh = F.json_ready(explanations.faithfulness_report(_load("reverse-none"), explanations.STORED_SAMPLES,
                                                         explanations.STORED_SEED))
    assert fresh["steps"] == stored["steps"] and fresh["sentences"] == stored["sentences"]
    assert fresh["integrated_gradients"]["converged_share"] == pytest.approx(
        stored["integrated_gradients"]["converged_share"], abs=0.01)
    assert fresh["truth"] == pytest.approx(stored["truth"], abs=0.01)
