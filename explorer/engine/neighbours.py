"""Nearest neighbours of a state: which examples of the model's own data put an encoder state hᵢ or a
decoder state sₜ closest to the one being looked at (Seq2Seq-Vis's neighbour view).

The index holds the states of a fixed sample of source/target pairs: for toy tasks a seeded sample of the
task (the distribution the model was trained on), for translation the validation pairs the checkpoint
keeps under "examples" (none kept: no index, and the page says so): a translation model's training pairs are
not shipped with the app, so they are not searched, and the page says what was. Decoder states are teacher-forced on
each pair's target, exactly as Explore's teacher-forced mode traces them (one batched call of the same
step function), so a neighbour's link opens that very state. Search is exact Euclidean distance in numpy
(one matrix-vector product over a few thousand rows): no approximate-search library pays at this size.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from explorer.engine.bundle import ModelBundle
from explorer.engine.decoding import batch_sources, decode
from explorer.engine.devices import model_device
from explorer.errors import ExplorerError

SAMPLE = 200  # toy tasks: pairs in the index
SEED = 2024  # toy tasks: the sample's seed (fixed: the same index on every server)
BATCH = 512
KINDS = {"h": "encoder hᵢ", "s": "decoder sₜ"}


@dataclass(frozen=True)
class Pair:
    """One example of the index: the source text and the target text Explore's teacher-forced mode reads."""

    source: str
    target: str
    source_tokens: tuple[str, ...]
    target_tokens: tuple[str, ...]  # without <eos>


@dataclass(frozen=True, eq=False)
class NeighbourIndex:
    """The states of every pair, one row per (pair, position) for hᵢ and per (pair, step) for sₜ."""

    model_name: str
    pairs: tuple[Pair, ...]
    encoder: np.ndarray  # (N_h, He) float32
    encoder_owner: np.ndarray  # (N_h,) pair index
    encoder_position: np.ndarray  # (N_h,) i, 0-based
    decoder: np.ndarray  # (N_s, H)
    decoder_owner: np.ndarray
    decoder_step: np.ndarray  # t, 0-based (the <eos> step included)
    origin: str  # where the pairs come from, for the page
    encoder_norms: np.ndarray = field(init=False, repr=False)  # |h|², for the search
    decoder_norms: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "encoder_norms", (self.encoder.astype(np.float64) ** 2).sum(axis=1))
        object.__setattr__(self, "decoder_norms", (self.decoder.astype(np.float64) ** 2).sum(axis=1))

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.encoder, self.encoder_owner, self.encoder_position, self.decoder,
                                      self.decoder_owner, self.decoder_step, self.encoder_norms, self.decoder_norms))


@dataclass(frozen=True)
class Neighbour:
    pair: Pair
    position: int  # i or t, 0-based
    token: str  # x_i, or y_t (the target's token at step t, <eos> last)
    distance: float


def stored_examples(bundle: ModelBundle) -> list[tuple[str, str]]:
    """The [source, target] validation pairs a translation checkpoint keeps (metadata key "examples")."""
    found: Any = getattr(bundle, "examples", None) or bundle.training.get("examples")
    if not isinstance(found, (list, tuple)):  # training records keep a count of examples seen under this name
        return []
    pairs = []
    for item in found:
        if isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item):
            pairs.append((item[0], item[1]))
    return pairs


def sample_pairs(bundle: ModelBundle, n: int = SAMPLE, seed: int = SEED) -> tuple[list[tuple[str, str]], str]:
    """The pairs to index and a phrase saying where they come from; ExplorerError if the model keeps none."""
    task = bundle.task_obj
    if task is None:
        pairs = stored_examples(bundle)
        if not pairs:
            raise ExplorerError(f"{bundle.name} keeps no example pairs in its checkpoint (metadata key "
                                "\"examples\"), so there is nothing to search for neighbours")
        return pairs, (f"the {len(pairs)} validation pairs kept in the checkpoint (not its training pairs: those "
                       "are not shipped with the app)")
    examples = task.sample(random.Random(seed), n)
    pairs = [(task.detokenize(list(e.source)), bundle.detokenize_target(list(e.target))) for e in examples]
    return pairs, f"{n} examples of the {task.spec.name} task (a fixed seeded sample, like its training data)"


@torch.inference_mode()
def build_index(bundle: ModelBundle, pairs: Sequence[tuple[str, str]] | None = None) -> NeighbourIndex:
    """Every hᵢ and sₜ of the pairs (teacher-forced on their targets), batched; pairs the model cannot read
    (too long, unknown symbols) are left out."""
    origin = "the given pairs"
    if pairs is None:
        pairs, origin = sample_pairs(bundle)
    kept: list[Pair] = []
    prepared = []
    for source, target in pairs:
        try:
            src, tgt = bundle.prepare(source), bundle.prepare_target(target)
        except ExplorerError:
            continue
        kept.append(Pair(source, target, src.tokens, tgt.tokens))
        prepared.append((src.ids, tgt.ids))
    if not kept:
        raise ExplorerError(f"none of the example pairs fits {bundle.name}")
    device = model_device(bundle.model)
    enc, enc_owner, enc_pos, dec, dec_owner, dec_step = [], [], [], [], [], []
    for start in range(0, len(prepared), BATCH):
        chunk = prepared[start:start + BATCH]
        src, lengths = batch_sources([s for s, _ in chunk], device)
        tgt, tgt_lengths = batch_sources([t for _, t in chunk], device)
        memory = bundle.model.encode(src, lengths)
        steps = decode(bundle.model, memory, tgt.shape[1], target=tgt, keep_steps=True).steps
        states = torch.stack([step.s for step in steps], 1).float().cpu().numpy()  # (B, T, H)
        h = memory.h.float().cpu().numpy()
        for b, (s_ids, t_ids) in enumerate(chunk):
            owner = start + b
            enc.append(h[b, : len(s_ids)])
            enc_owner.append(np.full(len(s_ids), owner, np.int32))
            enc_pos.append(np.arange(len(s_ids), dtype=np.int32))
            dec.append(states[b, : len(t_ids)])
            dec_owner.append(np.full(len(t_ids), owner, np.int32))
            dec_step.append(np.arange(len(t_ids), dtype=np.int32))
    return NeighbourIndex(bundle.name, tuple(kept), np.concatenate(enc).astype(np.float32), np.concatenate(enc_owner),
                          np.concatenate(enc_pos), np.concatenate(dec).astype(np.float32), np.concatenate(dec_owner),
                          np.concatenate(dec_step), origin)


def nearest(index: NeighbourIndex, kind: str, vector: np.ndarray, k: int = 5) -> list[Neighbour]:
    """The k states of this kind ("h" or "s") closest to `vector` (Euclidean), nearest first."""
    if kind not in KINDS:
        raise ExplorerError(f"unknown state kind {kind!r}: choose h (encoder) or s (decoder)")
    rows, owner, where = ((index.encoder, index.encoder_owner, index.encoder_position) if kind == "h"
                          else (index.decoder, index.decoder_owner, index.decoder_step))
    vector = np.asarray(vector, dtype=np.float32).reshape(-1)
    if vector.shape[0] != rows.shape[1]:
        raise ExplorerError(f"a state {KINDS[kind]} of this model has {rows.shape[1]} numbers, not {vector.shape[0]}")
    # |x - q|² = |x|² - 2 x·q + |q|²: one matrix-vector product instead of a (N, H) difference
    norms = index.encoder_norms if kind == "h" else index.decoder_norms
    q = vector.astype(np.float64)  # float64 products: the expansion cancels, float32 would leave ~1e-4 at 0
    distance = np.sqrt(np.maximum(norms - 2.0 * (rows @ q) + float(q @ q), 0.0))
    k = max(1, min(int(k), len(distance)))
    top = np.argpartition(distance, k - 1)[:k]
    top = top[np.lexsort((top, distance[top]))]  # nearest first; ties by row order
    out = []
    for row in top.tolist():
        pair = index.pairs[int(owner[row])]
        pos = int(where[row])
        tokens = pair.source_tokens if kind == "h" else pair.target_tokens + ("<eos>",)
        out.append(Neighbour(pair, pos, tokens[pos], float(distance[row])))
    return out


def explore_query(model: str, neighbour: Neighbour, kind: str) -> dict[str, str]:
    """The Explore URL parameters that open a neighbour: its pair teacher-forced, at its step (1-based);
    an encoder neighbour opens at step 1 (hᵢ does not depend on the step)."""
    step = neighbour.position + 1 if kind == "s" else 1
    return {"model": model, "input": neighbour.pair.source, "mode": "teacher", "target": neighbour.pair.target,
            "step": str(step)}

