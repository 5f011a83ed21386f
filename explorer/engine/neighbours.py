"""Nearest neighbours of a state: which examples of the model's own data put an encoder state hᵢ or a
decoder state sₜ closest to the one being looked at (Seq2Seq-Vis's neighbour view).

What is searched, and the page says which:
- a toy-task model: the first TRAINING_PAIRS pairs its training drew, regenerated from the task's generator with
  the training record's seed, batch size and curriculum (tasks.training_examples replays the trainer's draws;
  shipped, CLI- and app-trained models alike, built on first use); a record without them: a seeded sample;
- a translation model trained in this app: the first TRAINING_PAIRS pairs of its training split (the user's own
  file, kept in memory as `bundle.trained_on`, never saved);
- any other translation model (the shipped ones, a checkpoint from the CLI): the held-out pairs its checkpoint
  carries under "examples". The sentence pairs the shipped ones trained on stay out of this repository, so
  their training pairs cannot be searched; none carried: no index, and the page says so.
Decoder states are teacher-forced on each pair's target, exactly as Explore's teacher-forced mode traces them
(the same decode), so a neighbour's link opens that very state. States are kept in float16 (25 MB for a toy
model's 2,000 pairs; their distances are computed in float64 a block of rows at a time), filled in place a batch
at a time (the build's peak is a batch's decoding, not a copy of the index).
Search is exact Euclidean distance in numpy: as fast as scipy's cKDTree at 128 dimensions, without its float64
copy and build (benchmarks/RESULTS.md, "nearest examples"); this size needs no approximate-search library.
"""

from __future__ import annotations

import ctypes
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from explorer.data.tasks import training_examples
from explorer.engine.bundle import ModelBundle
from explorer.engine.decoding import batch_sources, decode
from explorer.engine.devices import model_device
from explorer.errors import ExplorerError

TRAINING_PAIRS = 2000  # toy tasks: the first pairs training drew, in the index
SAMPLE = 200  # toy tasks whose record lacks the seed or batch size: pairs of a seeded sample
SEED = 2024  # ... and its seed (fixed: the same index on every server)
BATCH = 64  # pairs a batch: the decoding keeps every step of a batch, so the peak grows with this
BLOCK = 8192  # rows whose distances are computed at once (float64: 16 MB at 256 numbers a state)
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
    encoder: np.ndarray  # (N_h, He) float16
    encoder_owner: np.ndarray  # (N_h,) pair index
    encoder_position: np.ndarray  # (N_h,) i, 0-based
    decoder: np.ndarray  # (N_s, H)
    decoder_owner: np.ndarray
    decoder_step: np.ndarray  # t, 0-based (the <eos> step included)
    origin: str  # where the pairs come from, for the page
    encoder_norms: np.ndarray = field(init=False, repr=False)  # |h|², for the search
    decoder_norms: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "encoder_norms", _squared_norms(self.encoder))
        object.__setattr__(self, "decoder_norms", _squared_norms(self.decoder))

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.encoder, self.encoder_owner, self.encoder_position, self.decoder,
                                      self.decoder_owner, self.decoder_step, self.encoder_norms, self.decoder_norms))


def _squared_norms(rows: np.ndarray) -> np.ndarray:
    """|x|² of every row (float64), a block at a time (no float64 copy of the whole index)."""
    return np.concatenate([(rows[i:i + BLOCK].astype(np.float64) ** 2).sum(axis=1)
                           for i in range(0, max(len(rows), 1), BLOCK)])


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
        if bundle.trained_on is not None and bundle.trained_on.pairs:
            own = bundle.trained_on
            return list(own.pairs), (f"{len(own.pairs):,} of the {own.total:,} pairs it trained on (the first of the "
                                     f"training split of {own.file_name}, trained in this app)")
        pairs = stored_examples(bundle)
        if not pairs:
            raise ExplorerError(f"{bundle.name} keeps no example pairs in its checkpoint (metadata key "
                                "\"examples\"), so there is nothing to search for neighbours")
        return pairs, (f"the {len(pairs)} held-out pairs (from its validation split) its checkpoint carries, not its "
                       "training pairs: the sentence pairs it was trained on do not ship with the app, so they cannot "
                       "be searched")
    record = bundle.training or {}
    seed_used, batch = record.get("seed"), record.get("batch_size")
    if isinstance(seed_used, int) and isinstance(batch, int) and batch > 0:
        examples = training_examples(task, seed_used, batch, TRAINING_PAIRS, int(record.get("curriculum") or 0),
                                     int(record.get("steps") or 0))
        where = (f"the first {TRAINING_PAIRS:,} pairs its training drew (regenerated from the {task.spec.name} "
                 f"task's generator with the training seed {seed_used} and batch size {batch})")
    else:
        examples = task.sample(random.Random(seed), n)
        where = f"{n} examples of the {task.spec.name} task (a fixed seeded sample, like its training data)"
    pairs = [(task.detokenize(list(e.source)), bundle.detokenize_target(list(e.target))) for e in examples]
    return pairs, where


def build_index(bundle: ModelBundle, pairs: Sequence[tuple[str, str]] | None = None) -> NeighbourIndex:
    """Every hᵢ and sₜ of the pairs (teacher-forced on their targets), batched; pairs the model cannot read
    (too long, unknown symbols) are left out."""
    index = _build_index(bundle, pairs)
    _give_back_freed_memory()  # once the build's locals are gone too
    return index


@torch.inference_mode()
def _build_index(bundle: ModelBundle, pairs: Sequence[tuple[str, str]] | None) -> NeighbourIndex:
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
    src_lengths = np.array([len(s) for s, _ in prepared], dtype=np.int64)
    tgt_lengths = np.array([len(t) for _, t in prepared], dtype=np.int64)
    encoder = decoder = None  # filled in place, a batch at a time: no per-pair pieces, no concatenated copy
    h_at = s_at = 0
    for start in range(0, len(prepared), BATCH):
        chunk = prepared[start:start + BATCH]
        src, lengths = batch_sources([s for s, _ in chunk], device)
        tgt, tgt_len = batch_sources([t for _, t in chunk], device)
        memory = bundle.model.encode(src, lengths)
        steps = decode(bundle.model, memory, tgt.shape[1], target=tgt, keep_steps=True).steps
        states = torch.stack([step.s for step in steps], 1)  # (B, T, H)
        h_rows = memory.h[torch.arange(src.shape[1], device=device) < lengths.unsqueeze(1)]  # (Σ S_b, He), pair by pair
        s_rows = states[torch.arange(tgt.shape[1], device=device) < tgt_len.unsqueeze(1)]  # (Σ T_b, H)
        if encoder is None:
            encoder = np.empty((int(src_lengths.sum()), h_rows.shape[1]), np.float16)
            decoder = np.empty((int(tgt_lengths.sum()), s_rows.shape[1]), np.float16)
        encoder[h_at:h_at + len(h_rows)] = h_rows.half().cpu().numpy()
        decoder[s_at:s_at + len(s_rows)] = s_rows.half().cpu().numpy()
        h_at, s_at = h_at + len(h_rows), s_at + len(s_rows)
        del memory, steps, states, h_rows, s_rows
    assert encoder is not None and decoder is not None
    return NeighbourIndex(bundle.name, tuple(kept), encoder, *_rows_of(src_lengths), decoder, *_rows_of(tgt_lengths),
                          origin)


def _give_back_freed_memory() -> None:
    """Hand the build's freed working memory back to the system: glibc keeps it in the building thread's heap
    otherwise (measured: a toy model's build left ~24 MB more resident without this)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator returns memory its own way
        pass


def _rows_of(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows laid out pair by pair, each row's pair and its position in that pair (int32, 0-based)."""
    owner = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return owner, (np.arange(len(owner)) - starts).astype(np.int32)


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
    dots = np.concatenate([rows[i:i + BLOCK].astype(np.float64) @ q for i in range(0, len(rows), BLOCK)])
    distance = np.sqrt(np.maximum(norms - 2.0 * dots + float(q @ q), 0.0))
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

