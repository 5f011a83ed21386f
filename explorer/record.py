"""The records the engine hands to everything that shows or checks it, with no torch in sight.

A `Trace` holds every intermediate of one decoding as numpy arrays; an `Intervention` names a "what if";
`BeamRecord` is what one beam search kept. Figures, pages, exports and tests read these records and
import this module only, so they never load torch; the builders that run the model live in
`explorer.engine.trace` (`trace()`) and `explorer.engine.decoding` (`beam_record()`).

One cached trace is shared by every figure on a page, so a Trace's arrays are made read-only when it
is built: a figure that tried to change one in place would raise instead of silently changing the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from explorer.data.subwords import MARK, pieces_text
from explorer.data.tasks import alignment_hits
from explorer.faithfulness import Explanation, explanation_json_dict, json_ready, step_frame_columns


if TYPE_CHECKING:
    import pandas as pd

# The query-string parameters of a what-if (explorer/app/views.py's intervention_query reads and writes them).
INTERVENTION_URL_KEYS: tuple[str, ...] = ("temp", "mask", "pin", "force")


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
    # a word); empty for toy tasks, where every token is its own word.
    source_words: tuple[tuple[int, ...], ...] = ()
    output_words: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        """Freeze the arrays too (the dataclass only freezes the attributes): one trace is shared by every view."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

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

    def to_json_dict(self, explanation: Explanation | None = None) -> dict[str, Any]:
        """The trace as plain JSON types (the CLI's and the download's format); with `explanation` (this trace's
        attributions and counterfactuals, explorer/faithfulness.py) under "faithfulness"."""
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
        if explanation is not None:
            out["faithfulness"] = explanation_json_dict(explanation)
        return out

    def to_json(self, explanation: Explanation | None = None) -> str:
        """JSON text; NaN (masked scores) becomes null."""
        return json.dumps(json_ready(self.to_json_dict(explanation)), ensure_ascii=False)


def _alignment_sets(matrix: np.ndarray) -> tuple[frozenset[int], ...]:
    return tuple(frozenset(np.flatnonzero(row).tolist()) for row in matrix)


def trace_frame(tr: Trace, explanation: Explanation | None = None) -> pd.DataFrame:
    """The trace as one tidy table: a row per output step × input position (one per step without attention,
    unless attributions come with it).

    Columns: step t and position i (1-based), the output, previous and input tokens, the chosen token's
    probability, the score e_ti and weight α_ti, and whether (t, i) is in the true alignment; with
    `explanation`, each attribution method's score of (t, i) (explorer/faithfulness.py)."""
    T, S = tr.steps, len(tr.source_tokens)
    chosen_p = tr.probs[np.arange(T), tr.output_ids] if T else np.zeros(0)
    rows = []
    for t in range(T):
        base = {"step": t + 1, "output_token": tr.output_tokens[t], "previous_token": tr.previous_tokens[t],
                "probability": float(chosen_p[t])}
        if not tr.has_attention and explanation is not None:
            rows += [{**base, "position": i + 1, "input_token": tr.source_tokens[i], "score": np.nan,
                      "weight": np.nan, "true_alignment": None} for i in range(S)]
            continue
        if not tr.has_attention:
            rows.append({**base, "position": np.nan, "input_token": None, "score": np.nan, "weight": np.nan,
                         "true_alignment": None})
            continue
        for i in range(S):
            truth = None
            if tr.alignment is not None and t < len(tr.alignment):
                truth = bool(tr.alignment[t, i])
            score = float(tr.scores[t, i])
            rows.append({**base, "position": i + 1, "input_token": tr.source_tokens[i],
                         "score": score if np.isfinite(score) else np.nan, "weight": float(tr.weights[t, i]),
                         "true_alignment": truth})
    columns = ["step", "output_token", "previous_token", "probability", "position", "input_token", "score",
               "weight", "true_alignment"]
    import pandas as pd  # here, not at the top: `train` and the other commands never build a table (0.5 s)
    frame = pd.DataFrame(rows, columns=columns)
    if explanation is not None:
        for method, column in step_frame_columns(explanation).items():
            frame[method] = column
    if tr.source_words and (tr.has_attention or explanation is not None):  # subword pieces: which word (1-based) each piece belongs to
        word_of_output = {t: w + 1 for w, group in enumerate(tr.output_words) for t in group}
        word_of_input = {i: w + 1 for w, group in enumerate(tr.source_words) for i in group}
        frame["output_word"] = (frame["step"] - 1).map(word_of_output)
        frame["input_word"] = (frame["position"] - 1).map(word_of_input)
    return frame


def trace_csv(tr: Trace, explanation: Explanation | None = None) -> str:
    """The tidy table as CSV text (the page's CSV download), with the attributions when given."""
    return trace_frame(tr, explanation).to_csv(index=False)



@dataclass(frozen=True)
class Candidate:
    """One beam hypothesis: ids (ending in <eos> if finished) and its total log-probability."""

    ids: tuple[int, ...]
    log_prob: float
    finished: bool

    @property
    def normalized(self) -> float:
        """Log-probability per token, used to rank finished hypotheses of different lengths."""
        return self.log_prob / max(1, len(self.ids))


@dataclass(frozen=True)
class BeamNode:
    """One hypothesis the search kept at one step: the token it added and the prefix's total log-probability.

    `parent` is the index of the node it extends (-1: it extends <sos>). `finished`: the token is <eos>
    (a candidate). `pruned`: kept at its step, but the search dropped every continuation of it (or stopped
    before extending it). `candidate`: its rank among the returned candidates (0 best), else None."""

    index: int
    step: int  # 0-based decoding step that chose the token
    token: int
    log_prob: float
    parent: int
    finished: bool
    pruned: bool
    candidate: int | None


@dataclass(frozen=True)
class BeamRecord:
    """Everything one beam search kept, in the order it kept it, and what it returned (plain Python, no torch)."""

    width: int
    nodes: tuple[BeamNode, ...]
    candidates: tuple[Candidate, ...]  # best first, as `beam_search` returns them

    def prefix(self, index: int) -> tuple[int, ...]:
        """The token ids from the first step up to and including node `index`."""
        ids = []
        while index >= 0:
            node = self.nodes[index]
            ids.append(node.token)
            index = node.parent
        return tuple(reversed(ids))

    def children(self, index: int) -> list[BeamNode]:
        return [n for n in self.nodes if n.parent == index]

    @property
    def steps(self) -> int:
        return 1 + max((n.step for n in self.nodes), default=-1)


def first_difference(a: Sequence[str], b: Sequence[str]) -> int | None:
    """The first step where two outputs differ (None if equal): where an intervention took effect."""
    for t, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return t
    return None if len(a) == len(b) else min(len(a), len(b))
