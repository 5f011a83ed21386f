"""The trace: every intermediate of one decoding, as numpy arrays, and the interventions that change it.

The trace is the contract between the engine and everything that shows or checks it (pages,
figures, exports, tests). It is built by `decoding.decode` with its steps kept, i.e. by the very
step function training and plain decoding use.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from .bundle import ModelBundle, Prepared
from .decoding import decode
from .devices import model_device
from .errors import ExplorerError
from .lengths import output_cap
from .model import Control
from .subwords import MARK, pieces_text
from .tasks import alignment_hits, alignment_matrix
from .vocab import EOS, SOS


@dataclass(frozen=True)
class Intervention:
    """A "what if": hide input positions, pin attention at a step, force a token at a step, change τ."""

    temperature: float = 1.0
    masked: tuple[int, ...] = ()  # source positions hidden from attention at every step
    pins: tuple[tuple[int, int], ...] = ()  # (step t, source position) — all of α_t on that position
    forced: tuple[tuple[int, str], ...] = ()  # (step t, token) — the token chosen at step t

    @property
    def is_identity(self) -> bool:
        return self.temperature == 1.0 and not self.masked and not self.pins and not self.forced

    def to_dict(self) -> dict[str, Any]:
        """As the user gave it: steps and positions counted from 1, like the CLI's flags, URLs and pages."""
        return {"temperature": self.temperature, "masked": [i + 1 for i in self.masked],
                "pins": [[t + 1, i + 1] for t, i in self.pins], "forced": [[t + 1, tok] for t, tok in self.forced]}


@dataclass(frozen=True, eq=False)
class Trace:
    """Everything the model computed for one input. t indexes output steps (T), i input positions (S)."""

    model_name: str
    attention: str  # score function: none | dot | scaled_dot | additive
    source_tokens: tuple[str, ...]  # x_1..x_S
    output_tokens: tuple[str, ...]  # y_1..y_T (the chosen tokens; may end with <eos>)
    previous_tokens: tuple[str, ...]  # y_{t-1} fed at step t (starts with <sos>)
    unknown_tokens: tuple[str, ...]  # source tokens the vocabulary lacks (translation)
    encoder_states: np.ndarray  # h_i (S, He)
    keys: np.ndarray  # k_i = Key(h_i) (S, D); D = 0 without attention
    values: np.ndarray  # v_i = Value(h_i) (S, D)
    initial_state: np.ndarray  # s_0 (H,) top layer, from the encoder's final state
    decoder_states: np.ndarray  # s_t (T, H) top layer
    queries: np.ndarray  # q_t = Query(s_t) (T, D)
    scores: np.ndarray  # e_ti (T, S); -inf where masked
    weights: np.ndarray  # α_ti (T, S), rows sum to 1
    contexts: np.ndarray  # c_t = Σ_i α_ti v_i (T, D)
    probs: np.ndarray  # ŷ_t = softmax(U[s_t; c_t] + b_U) (T, V)
    output_ids: np.ndarray  # (T,) chosen ids
    target_vocab: tuple[str, ...] = field(repr=False)  # names of the V output ids
    alignment: np.ndarray | None = None  # ground truth (T_true, S) bool, toy tasks only
    teacher_forced: bool = False
    intervention: Intervention = Intervention()
    # Subword models: the positions of each word's pieces, in order (a piece starting with "▁" begins
    # a word); empty for toy tasks and word-level models, where every token is its own word.
    source_words: tuple[tuple[int, ...], ...] = ()
    output_words: tuple[tuple[int, ...], ...] = ()

    @property
    def has_attention(self) -> bool:
        return self.attention != "none"

    @property
    def has_pieces(self) -> bool:
        """Whether some word spans several pieces, so that a words view differs from the pieces."""
        return any(len(w) > 1 for w in self.source_words + self.output_words)

    def word_weights(self) -> np.ndarray:
        """Attention between words (W_out, W_src): each row is one output word, the mean over its pieces'
        steps t of Σ α_ti over each input word's pieces i. Rows still sum to 1. The model attends over
        pieces; this only regroups its own α so a reader can see which word looked at which."""
        src = self.source_words or tuple((i,) for i in range(self.weights.shape[1]))
        out = self.output_words or tuple((t,) for t in range(self.weights.shape[0]))
        by_source = np.stack([self.weights[:, list(g)].sum(axis=1) for g in src], axis=1)  # (T, W_src)
        return np.stack([by_source[list(g)].mean(axis=0) for g in out])  # (W_out, W_src)

    def word_labels(self) -> tuple[list[str], list[str]]:
        """(output words, input words) as text: a word's pieces joined, the word mark dropped."""
        def join(tokens: Sequence[str], groups: tuple[tuple[int, ...], ...]) -> list[str]:
            groups = groups or tuple((i,) for i in range(len(tokens)))
            return [pieces_text([tokens[i] for i in g]) or MARK for g in groups]
        return join(self.output_tokens, self.output_words), join(self.source_tokens, self.source_words)

    @property
    def steps(self) -> int:
        return len(self.output_tokens)

    def top_k(self, t: int, k: int = 5) -> list[tuple[str, float]]:
        """The k most probable tokens at step t with their probabilities."""
        p = self.probs[t]
        order = np.argsort(-p, kind="stable")[:k]
        return [(self.target_vocab[i], float(p[i])) for i in order]

    def alignment_accuracy(self) -> float | None:
        """Share of output steps whose attention argmax falls on a true source position (None if unknown)."""
        if self.alignment is None or not self.has_attention:
            return None
        hits, counted = alignment_hits(self.weights, _alignment_sets(self.alignment))
        return hits / counted if counted else None

    def to_json_dict(self) -> dict[str, Any]:
        """The trace as plain JSON types (the CLI's and the download's format)."""
        def arr(a: np.ndarray) -> Any:
            return np.where(np.isfinite(a), a, np.nan).astype(float).tolist() if a.size else \
                [[] for _ in range(a.shape[0])] if a.ndim == 2 else []
        out = {
            "model": self.model_name,
            "attention": self.attention,
            "source_tokens": list(self.source_tokens),
            "output_tokens": list(self.output_tokens),
            "previous_tokens": list(self.previous_tokens),
            "unknown_tokens": list(self.unknown_tokens),
            "encoder_states": arr(self.encoder_states),
            "keys": arr(self.keys),
            "values": arr(self.values),
            "initial_state": arr(self.initial_state),
            "decoder_states": arr(self.decoder_states),
            "queries": arr(self.queries),
            "scores": arr(self.scores),
            "weights": arr(self.weights),
            "contexts": arr(self.contexts),
            "top_k": [[[tok, p] for tok, p in self.top_k(t)] for t in range(self.steps)],
            "alignment": None if self.alignment is None else self.alignment.astype(int).tolist(),
            "alignment_accuracy": self.alignment_accuracy(),
            "teacher_forced": self.teacher_forced,
            "intervention": self.intervention.to_dict(),
        }
        if self.source_words or self.output_words:
            out["source_words"] = [list(g) for g in self.source_words]
            out["output_words"] = [list(g) for g in self.output_words]
        return out

    def to_json(self) -> str:
        """JSON text; NaN (masked scores) becomes null."""
        return json.dumps(_nan_to_none(self.to_json_dict()), ensure_ascii=False)


def _nan_to_none(x: Any) -> Any:
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, list):
        return [_nan_to_none(v) for v in x]
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    return x


def _alignment_sets(matrix: np.ndarray) -> tuple[frozenset[int], ...]:
    return tuple(frozenset(np.flatnonzero(row).tolist()) for row in matrix)


def _controls(intervention: Intervention, source_len: int, steps: int,
              device: torch.device | None = None) -> tuple[Control | None, dict[int, Control]]:
    """Translate an intervention into per-step Controls for the step function (tensors on `device`)."""
    if not (math.isfinite(intervention.temperature) and intervention.temperature > 0):
        raise ExplorerError(f"temperature must be a positive number, got {intervention.temperature}")
    for pos in intervention.masked:
        if not 0 <= pos < source_len:
            raise ExplorerError(f"cannot mask position {pos + 1}: the input has positions 1–{source_len}")
    if len(set(intervention.masked)) >= source_len:
        raise ExplorerError("at least one input position must stay visible to attention")
    mask = None
    if intervention.masked:
        mask = torch.zeros(1, source_len, dtype=torch.bool, device=device)
        mask[0, list(intervention.masked)] = True
    base = Control(intervention.temperature, mask, None)
    per_step: dict[int, Control] = {}
    for t, pos in intervention.pins:
        if not 0 <= pos < source_len:
            raise ExplorerError(f"cannot pin attention to position {pos + 1}: the input has positions 1–{source_len}")
        if not 0 <= t < steps:
            raise ExplorerError(f"cannot pin at step {t + 1}: decoding has steps 1–{steps}")
        per_step[t] = Control(intervention.temperature, mask, torch.tensor([pos], device=device))
    needs_base = bool(intervention.masked) or intervention.temperature != 1.0
    return (base if needs_base else None), per_step


@torch.inference_mode()
def trace(bundle: ModelBundle, source: str | Prepared, intervention: Intervention | None = None,
          target: str | Prepared | None = None) -> Trace:
    """Decode one input greedily (or teacher-forced on `target`) and keep every intermediate.

    Runs on the model's device (a probe during GPU training); the trace itself is always numpy."""
    model = bundle.model
    device = model_device(model)
    prepared = bundle.prepare(source) if isinstance(source, str) else source
    intervention = intervention or Intervention()
    tgt = None
    if target is not None:
        tgt_prepared = bundle.prepare_target(target) if isinstance(target, str) else target
        tgt = torch.tensor([tgt_prepared.ids], dtype=torch.long, device=device)
    max_len = output_cap(bundle, len(prepared.ids)).steps  # what the task or the source length allows
    default, per_step = _controls(intervention, len(prepared.ids), max_len if tgt is None else tgt.shape[1], device)
    forced = {}
    for t, token in intervention.forced:
        if token not in bundle.tgt_vocab:
            raise ExplorerError(f"cannot force {token!r}: the model has no such output token")
        if not 0 <= t < max_len:
            raise ExplorerError(f"cannot force a token at step {t + 1}: decoding has steps 1–{max_len}")
        forced[t] = bundle.tgt_vocab.id(token)
    src = torch.tensor([prepared.ids], dtype=torch.long, device=device)
    memory = model.encode(src, torch.tensor([len(prepared.ids)], device=device))
    result = decode(model, memory, max_len, target=tgt, forced=forced, controls=per_step,
                    default_control=default, keep_steps=True)
    steps = result.steps
    T = int(result.lengths[0])
    steps = steps[:T]
    out_ids = result.ids[0, :T].cpu().numpy()
    out_tokens = tuple(bundle.tgt_vocab.decode(out_ids.tolist()))
    S = len(prepared.ids)

    def stack(get, width: int) -> np.ndarray:
        rows = [get(s) for s in steps]
        if rows[0] is None:
            return np.zeros((T, width), dtype=np.float32)
        return torch.stack([r[0] for r in rows]).float().cpu().numpy()

    s0 = memory.s0[0] if isinstance(memory.s0, tuple) else memory.s0
    has_attn = model.attention is not None
    empty_sd = np.zeros((S, 0), dtype=np.float32)
    truth = bundle.ground_truth(prepared.tokens)
    alignment = None
    if truth is not None and truth.alignment is not None:
        alignment = alignment_matrix(truth.alignment, S)
    return Trace(
        model_name=bundle.name,
        attention=model.cfg.attention,
        source_tokens=prepared.tokens,
        output_tokens=out_tokens,
        previous_tokens=(SOS,) + out_tokens[:-1],
        unknown_tokens=prepared.unknown,
        encoder_states=memory.h[0].float().cpu().numpy(),
        keys=memory.keys[0].float().cpu().numpy() if has_attn else empty_sd,
        values=memory.values[0].float().cpu().numpy() if has_attn else empty_sd,
        initial_state=s0[-1, 0].float().cpu().numpy(),
        decoder_states=stack(lambda s: s.s, model.cfg.hidden),
        queries=stack(lambda s: s.query, 0),
        scores=stack(lambda s: s.scores, S) if has_attn else np.zeros((T, 0), dtype=np.float32),
        weights=stack(lambda s: s.weights, S) if has_attn else np.zeros((T, 0), dtype=np.float32),
        contexts=stack(lambda s: s.context, 0),
        probs=torch.softmax(torch.stack([s.logits[0] for s in steps]).float(), dim=-1).cpu().numpy(),
        output_ids=out_ids,
        target_vocab=bundle.tgt_vocab.tokens,
        alignment=alignment,
        teacher_forced=tgt is not None,
        intervention=intervention,
        source_words=_words(bundle.source_words(prepared.tokens)) if bundle.uses_pieces else (),
        output_words=_words(bundle.target_words(out_tokens)) if bundle.uses_pieces else (),
    )


def _words(groups: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(g) for g in groups)


def output_text(bundle: ModelBundle, tr: Trace) -> str:
    """The trace's output as display text."""
    return bundle.detokenize_target([t for t in tr.output_tokens if t != EOS])


def first_difference(a: Sequence[str], b: Sequence[str]) -> int | None:
    """The first step where two outputs differ (None if equal): where an intervention took effect."""
    for t, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return t
    return None if len(a) == len(b) else min(len(a), len(b))
