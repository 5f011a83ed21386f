"""The Learn page's math, in the seed's order: every number a lesson shows is computed here.

1. sequences as time steps: sample a continuous f(t) into N steps, rebuild it by holding each
   sample (zero-order hold), and measure the largest error;
2. the RNN unit stepped by hand from a real model's weights (tanh RNN: h_t = tanh(W[h_{t-1}; x_t] + b);
   GRU: its gates), checked against the PyTorch module;
3. parameter sharing: parameter counts over lengths, and a shared and an unshared RNN trained on
   the same short inputs (the unshared one has no weights for a longer input);
4. the encoder–decoder: the context vector and autoregressive decoding from <sos>, read off a trace;
5. (the bottleneck curve lives in `comparison`);
6. attention: the four steps and the database-lookup table of one decoder step, read off a trace.

Pages call these and lay out the results; they do no tensor math themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from explorer.engine.bundle import ModelBundle
from explorer.errors import ExplorerError
from explorer.engine.parameters import count_parameters
from explorer.engine.unshared import rnn_parameter_count
from explorer.record import Trace
from explorer.data.vocab import SOS

# --- 1. sequences as time steps ----------------------------------------------------------------

SIGNALS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # A smooth "price over a day": a trend, a slow swing and a faster ripple.
    "price": lambda t: 1.0 + 0.3 * t + 0.5 * np.sin(2 * np.pi * t) + 0.15 * np.sin(6 * np.pi * t + 0.5),
    "wave": lambda t: np.sin(2 * np.pi * t),
    "chirp": lambda t: np.sin(2 * np.pi * (1.0 + 2.0 * t) * t),
}
DENSE_POINTS = 4001  # the "continuous" f(t) is drawn (and the error measured) on this grid


@dataclass(frozen=True)
class Sampling:
    """f(t) on [0, T] sampled into N equal time steps, and the step function that holds each sample."""

    signal: str
    n: int
    t: np.ndarray  # (DENSE_POINTS,) fine grid standing in for continuous time
    f: np.ndarray  # (DENSE_POINTS,) f(t)
    t_steps: np.ndarray  # (N,) t_i = i T / N, the time steps
    samples: np.ndarray  # (N,) A_i = f(t_i)
    held: np.ndarray  # (DENSE_POINTS,) A_i for t in [t_i, t_{i+1}): the sampled sequence as a function
    max_error: float  # max_t |f(t) - held(t)|
    worst_t: float  # where that maximum is


def sample_signal(n: int, signal: str = "price", T: float = 1.0) -> Sampling:
    """Sample f into n time steps and measure the largest gap between f and its step reconstruction."""
    if signal not in SIGNALS:
        raise ExplorerError(f"unknown signal {signal!r}; choose one of {', '.join(SIGNALS)}")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ExplorerError(f"the number of time steps must be a whole number >= 1, got {n!r}")
    f = SIGNALS[signal]
    t = np.linspace(0.0, T, DENSE_POINTS)
    t_steps = np.arange(n) * (T / n)
    samples = f(t_steps)
    index = np.minimum(np.floor(t * n / T + 1e-9).astype(int), n - 1)  # which time step each t falls into
    held = samples[index]
    error = np.abs(f(t) - held)
    worst = int(np.argmax(error))
    return Sampling(signal, int(n), t, f(t), t_steps, samples, held, float(error[worst]), float(t[worst]))


def max_errors(ns: Sequence[int], signal: str = "price") -> np.ndarray:
    """The largest reconstruction error for each N: it shrinks towards 0 as N grows."""
    return np.array([sample_signal(int(n), signal).max_error for n in ns])


# --- 2. the RNN unit by hand -------------------------------------------------------------------

@dataclass(frozen=True)
class UnitStep:
    """One time step of the RNN unit with every intermediate (named as in the formula shown)."""

    t: int  # 1-based time step
    token: str  # x_t's symbol
    x: np.ndarray  # x_t (E,) the token's embedding
    h_prev: np.ndarray  # h_{t-1} (H,)
    h: np.ndarray  # h_t (H,)
    parts: dict[str, np.ndarray]  # rnn: concat, pre; gru: r, z, n (each computed by hand)


@dataclass(frozen=True)
class UnitByHand:
    """A model's first encoder unit run by hand over an input, and how far it is from PyTorch's module."""

    cell: str  # rnn | gru
    tokens: tuple[str, ...]
    hidden: int
    embed: int
    weights: dict[str, np.ndarray]  # rnn: W (H, H+E) = [W_hh, W_ih], b (H,); gru: the six matrices and biases
    steps: tuple[UnitStep, ...]
    module_states: np.ndarray  # (S, H) h_t from the PyTorch module itself
    max_difference: float  # max |by hand - module| over every h_t


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


def rnn_unit_by_hand(bundle: ModelBundle, text: str) -> UnitByHand:
    """Step the encoder's (first layer, forward) RNN unit by hand in float64, and compare with the module.

    rnn: h_t = tanh(W [h_{t-1}; x_t] + b) with W = [W_hh, W_ih] and b = b_ih + b_hh.
    gru: r = σ(W_ir x + b_ir + W_hr h + b_hr), z = σ(W_iz x + b_iz + W_hz h + b_hz),
         n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)), h_t = (1 − z) ⊙ n + z ⊙ h_{t-1}.
    """
    model = bundle.model
    cfg = model.cfg
    weights = model.encoder.cell_weights(0, 0)  # ExplorerError for lstm / unshared
    prepared = bundle.prepare(text)
    with torch.inference_mode():
        ids = torch.tensor([prepared.ids], dtype=torch.long)
        x_all = model.encoder.embed(ids)  # (1, S, E)
        module_out, _ = model.encoder.rnn[0][0](x_all)  # (1, S, H): the module, forward direction, layer 0
    X = x_all[0].double().numpy()
    W_ih = weights["W_ih"].detach().double().numpy()
    W_hh = weights["W_hh"].detach().double().numpy()
    b_ih = weights["b_ih"].detach().double().numpy()
    b_hh = weights["b_hh"].detach().double().numpy()
    H = cfg.hidden
    h = np.zeros(H)
    steps = []
    if cfg.cell == "rnn":
        W = np.concatenate([W_hh, W_ih], axis=1)  # (H, H+E): W [h_{t-1}; x_t] = W_hh h + W_ih x
        b = b_ih + b_hh
        shown = {"W": W, "b": b}
        for t, (token, x) in enumerate(zip(prepared.tokens, X), start=1):
            concat = np.concatenate([h, x])
            pre = W @ concat + b
            h_new = np.tanh(pre)
            steps.append(UnitStep(t, token, x, h, h_new, {"concat": concat, "pre": pre}))
            h = h_new
    else:
        split = lambda M: (M[:H], M[H:2 * H], M[2 * H:])  # noqa: E731  PyTorch's gate order: r, z, n
        (W_ir, W_iz, W_in), (W_hr, W_hz, W_hn) = split(W_ih), split(W_hh)
        (b_ir, b_iz, b_in), (b_hr, b_hz, b_hn) = split(b_ih), split(b_hh)
        shown = {"W_ir": W_ir, "W_hr": W_hr, "W_iz": W_iz, "W_hz": W_hz, "W_in": W_in, "W_hn": W_hn,
                 "b_r": b_ir + b_hr, "b_z": b_iz + b_hz, "b_in": b_in, "b_hn": b_hn}
        for t, (token, x) in enumerate(zip(prepared.tokens, X), start=1):
            r = _sigmoid(W_ir @ x + b_ir + W_hr @ h + b_hr)
            z = _sigmoid(W_iz @ x + b_iz + W_hz @ h + b_hz)
            n = np.tanh(W_in @ x + b_in + r * (W_hn @ h + b_hn))
            h_new = (1.0 - z) * n + z * h
            steps.append(UnitStep(t, token, x, h, h_new, {"r": r, "z": z, "n": n}))
            h = h_new
    module_states = module_out[0].double().numpy()
    by_hand = np.stack([s.h for s in steps])
    return UnitByHand(cfg.cell, prepared.tokens, H, cfg.embed, shown, tuple(steps), module_states,
                      float(np.abs(by_hand - module_states).max()))


def has_shared_unit(bundle: ModelBundle) -> bool:
    """Whether `rnn_unit_by_hand` can show this model (a tanh RNN or GRU encoder)."""
    return bundle.cfg.cell in ("rnn", "gru")


# --- 3. parameter sharing ----------------------------------------------------------------------

@dataclass(frozen=True)
class ParameterGrowth:
    """Parameters of one RNN layer over lengths: constant when shared, linear when not."""

    input_size: int
    hidden: int
    lengths: tuple[int, ...]
    shared: tuple[int, ...]
    unshared: tuple[int, ...]


def parameter_growth(input_size: int, hidden: int, lengths: Sequence[int]) -> ParameterGrowth:
    """Shared vs unshared parameter counts of a tanh RNN layer for each sequence length."""
    lengths = tuple(int(n) for n in lengths)
    return ParameterGrowth(input_size, hidden, lengths,
                           tuple(rnn_parameter_count(input_size, hidden, n, True) for n in lengths),
                           tuple(rnn_parameter_count(input_size, hidden, n, False) for n in lengths))


LESSON_TASK_LENGTHS = (1, 6)  # the lesson RNNs see copy inputs of these lengths only
LESSON_STEPS = 120  # with batches of 128 at lr 0.02: ~90% exact (shared) and ~98% (unshared) on lengths 1-6
LESSON_SIZES = {"embed": 8, "hidden": 16, "attn_dim": 16, "attention": "dot", "bidirectional": False}


def train_lesson_models(steps: int = LESSON_STEPS, seed: int = 0) -> tuple[ModelBundle, ModelBundle]:
    """Two tiny copy models, trained on lengths 1–6 only: a shared tanh RNN encoder and an unshared one.

    The unshared encoder is built with exactly 6 weight matrices W_1..W_6 (the longest input it saw),
    which is what an unshared layer must be: it has no W_7.
    """
    from explorer.training.recipes import train_task
    from explorer.data.tasks import TaskSpec
    from explorer.training.train import TrainConfig
    lo, hi = LESSON_TASK_LENGTHS
    spec = TaskSpec("copy", lo, hi)
    cfg = TrainConfig(steps=steps, batch_size=128, lr=2e-2, eval_every=steps, eval_samples=200, seed=seed)
    out = []
    for cell, max_src in (("rnn", 24), ("unshared", hi)):
        options = {**LESSON_SIZES, "cell": cell, "max_src_len": max_src, "max_tgt_len": 32}
        bundle, _, _ = train_task(spec, f"lesson-{cell}", options, cfg)
        bundle.model.eval()
        for p in bundle.model.parameters():
            p.requires_grad_(False)
        out.append(bundle)
    return out[0], out[1]


@dataclass(frozen=True)
class EncoderRun:
    """An encoder run on an input: its output text, or the message saying why it could not run."""

    model: str
    source: str
    length: int
    output: str | None  # the decoded output (None if the model could not run)
    correct: bool | None
    error: str | None  # the ExplorerError message, shown to the user as is
    weights_for: int | None = None  # an unshared encoder's number of W_t, when the input was longer


def run_or_explain(bundle: ModelBundle, text: str) -> EncoderRun:
    """Decode `text`; an unshared encoder asked for a position it has no W_t for reports it as a message.

    The length check of `bundle.prepare` is skipped on purpose, so the message comes from the
    unshared RNN itself ("has weights for 6 positions only").
    """
    from explorer.engine.decoding import greedy_batch, strip_output
    from explorer.engine.lengths import output_caps
    tokens = bundle.tokenize_source(text)
    if not tokens:
        raise ExplorerError("the input is empty: type some symbols")
    unknown = bundle.src_vocab.unknown(tokens)
    if unknown:
        raise ExplorerError(f"unknown symbols {''.join(unknown)!r}: this model knows "
                            f"{''.join(bundle.src_vocab.tokens[4:])!r}")
    ids = bundle.src_vocab.encode(tokens)
    try:
        with torch.inference_mode():
            src = torch.tensor([ids], dtype=torch.long)
            model = bundle.model
            model.encoder(src, torch.tensor([len(ids)]))  # the unshared RNN raises here for unseen positions
            out = greedy_batch(model, [ids], max_len=output_caps(bundle, [ids]))
    except ExplorerError as exc:
        limit = bundle.cfg.max_src_len if bundle.cfg.cell == "unshared" else None
        return EncoderRun(bundle.name, text, len(tokens), None, None, str(exc),
                          limit if limit is not None and len(tokens) > limit else None)
    output_tokens = bundle.tgt_vocab.decode(strip_output(out.ids[0].tolist()))
    truth = bundle.ground_truth(tokens)
    correct = None if truth is None else tuple(output_tokens) == tuple(truth.target)
    return EncoderRun(bundle.name, text, len(tokens), bundle.detokenize_target(output_tokens), correct, None)


def encoder_parameters(bundle: ModelBundle) -> int:
    """Parameters of the encoder's recurrent part (the layer the lesson is about)."""
    return count_parameters(bundle.model.encoder.rnn)


# --- 4. encoder–decoder ------------------------------------------------------------------------

@dataclass(frozen=True)
class DecodeStep:
    """One autoregressive step: what was fed in, what came out, and the best candidates."""

    t: int  # 1-based
    fed: str  # y_{t-1} (<sos> at t = 1)
    chosen: str  # ŷ_t
    probability: float  # p(ŷ_t)
    top: tuple[tuple[str, float], ...]  # the k most probable tokens
    truth: str | None  # the correct token at step t, if the task knows it


def decoding_chain(tr: Trace, truth: Sequence[str] | None = None, k: int = 3) -> tuple[DecodeStep, ...]:
    """The trace read as autoregressive generation: each step fed the previous output, starting at <sos>."""
    truth = list(truth) + ["<eos>"] if truth is not None else None
    steps = []
    for t in range(tr.steps):
        chosen = tr.output_tokens[t]
        p = float(tr.probs[t, int(tr.output_ids[t])])
        true_tok = truth[t] if truth is not None and t < len(truth) else None
        steps.append(DecodeStep(t + 1, tr.previous_tokens[t], chosen, p, tuple(tr.top_k(t, k)), true_tok))
    assert not steps or steps[0].fed == SOS
    return tuple(steps)


@dataclass(frozen=True)
class ContextVector:
    """What the plain decoder starts from: s_0, derived from the final encoder state(s)."""

    s0: np.ndarray  # (H,) the decoder's initial state
    bidirectional: bool
    numbers: int  # how many numbers carry the whole input to the decoder


def context_vector(bundle: ModelBundle, tr: Trace) -> ContextVector:
    """The context vector of a trace: s_0, made from the encoder's last state (both directions' ends if
    bidirectional)."""
    return ContextVector(tr.initial_state, bundle.cfg.bidirectional, int(tr.initial_state.size))


# --- 6. attention ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Record:
    """One row of the lookup table: encoder state h_i as a database record with key k_i and value v_i."""

    i: int
    token: str
    key: np.ndarray  # k_i (D,)
    value: np.ndarray  # v_i (D,)
    score: float  # e_ti = q_t · k_i (or the model's score function)
    weight: float  # α_ti
    truth: bool  # whether i is a true alignment of step t (toy tasks)


@dataclass(frozen=True)
class Lookup:
    """Decoder step t as a probabilistic database lookup, with the four steps' numbers."""

    t: int  # 0-based output step
    attention: str
    fed: str  # y_{t-1}
    s: np.ndarray  # s_t (H,)
    query: np.ndarray  # q_t (D,)
    records: tuple[Record, ...]
    context: np.ndarray  # c_t (D,)
    context_check: float  # max |c_t − Σ_i α_ti v_i|: the context is exactly the α-weighted values
    score_check: float | None  # max |e_t − K q_t| for dot (÷√D for scaled_dot); None for additive
    top: tuple[tuple[str, float], ...]  # ŷ_t's most probable tokens
    chosen: str


def lookup(tr: Trace, t: int, k: int = 3) -> Lookup:
    """Everything the four steps computed at output step t, arranged as the seed's database lookup."""
    if not tr.has_attention:
        raise ExplorerError(f"{tr.model_name} has no attention (a plain encoder–decoder): nothing to look up")
    if not 0 <= t < tr.steps:
        raise ExplorerError(f"step {t} is outside 0–{tr.steps - 1}")
    q = tr.queries[t]
    truth = tr.alignment[t] if tr.alignment is not None and t < len(tr.alignment) else None
    records = tuple(
        Record(i, tok, tr.keys[i], tr.values[i], float(tr.scores[t, i]), float(tr.weights[t, i]),
               bool(truth[i]) if truth is not None else False)
        for i, tok in enumerate(tr.source_tokens))
    expected = (tr.weights[t][:, None] * tr.values).sum(0)
    score_check = None
    if tr.attention in ("dot", "scaled_dot"):
        e = tr.keys @ q
        if tr.attention == "scaled_dot":
            e = e / math.sqrt(q.size)
        finite = np.isfinite(tr.scores[t])
        score_check = float(np.abs(e[finite] - tr.scores[t][finite]).max()) if finite.any() else 0.0
    return Lookup(t, tr.attention, tr.previous_tokens[t], tr.decoder_states[t], q, records, tr.contexts[t],
                  float(np.abs(expected - tr.contexts[t]).max()), score_check, tuple(tr.top_k(t, k)),
                  tr.output_tokens[t])


def short(v: np.ndarray, n: int = 4, digits: int = 2) -> str:
    """A vector as text, its first n numbers and an ellipsis: for table cells."""
    v = np.asarray(v).ravel()
    body = ", ".join(f"{x:.{digits}f}" for x in v[:n])
    return f"[{body}{', …' if v.size > n else ''}]"
