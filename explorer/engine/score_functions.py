"""Score functions side by side: what dot, scaled dot, additive and no attention do on the same task.

The shipped `reverse` twins differ only in `--attention` (same sizes, data, steps and seed). Their
sharpness is read off decoding itself (`decoding.decode` with its steps kept, one batch of fresh samples):
the mean largest weight max_i α_ti (1.0 = all weight on one input) and the mean spread of the raw scores
e_ti over the input (their standard deviation at a step). The article's score e = q·k is a sum of D
products, so its spread grows like √D with the dimension D; scaled dot divides by √D.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from explorer.engine.bundle import ModelBundle
from explorer.engine.decoding import batch_sources, decode
from explorer.engine.lengths import output_caps
from explorer.engine.devices import model_device
from explorer.equations import score_title
from explorer.errors import ExplorerError

ORDER = ("dot", "scaled_dot", "additive", "none")  # how the twins are listed
LABELS = {"dot": f"dot  {score_title('dot')}", "scaled_dot": f"scaled dot  {score_title('scaled_dot')}",
          "additive": f"additive  {score_title('additive')}", "none": "none (no attention)"}
SAMPLES = 200
SEED = 12345


@dataclass(frozen=True)
class Sharpness:
    """How peaked one model's attention is over a sample of inputs (None: the model has no attention)."""

    model: str
    attention: str
    attn_dim: int
    steps: int  # output steps measured (up to and including each output's <eos>)
    mean_peak: float | None  # mean of max_i α_ti
    score_spread: float | None  # mean over steps of the standard deviation of e_ti over i
    dot_spread: float | None  # the same for q·k before any scaling (scaled dot: √D × score_spread); None: additive
    exact_match: float  # share of the sample decoded exactly right


def twins(bundles: Sequence[ModelBundle]) -> list[ModelBundle]:
    """The largest set of models trained on one task at one size that differ only in the score function
    (e.g. `reverse` and its -scaled, -additive and -none twins), one per score function, listed in ORDER."""
    groups: dict[tuple, dict[str, ModelBundle]] = {}
    for b in bundles:
        if b.task is None:
            continue
        c = b.cfg
        key = (b.task, c.embed, c.hidden, c.cell, c.bidirectional, c.layers)
        groups.setdefault(key, {}).setdefault(c.attention, b)
    best = max(groups.values(), key=len, default={})
    return [best[a] for a in ORDER if a in best] if len(best) > 1 else []


def sample_inputs(bundle: ModelBundle, n: int = SAMPLES, seed: int = SEED) -> list[list[str]]:
    """Fresh inputs of the model's task over its training lengths (seeded: every twin reads the same)."""
    if bundle.task_obj is None:
        raise ExplorerError(f"{bundle.name} is not a toy-task model")
    return [list(e.source) for e in bundle.task_obj.sample(random.Random(seed), n)]


@torch.inference_mode()
def sharpness(bundle: ModelBundle, sources: Sequence[Sequence[str]]) -> Sharpness:
    """Mean peak weight and score spread of greedy decoding over these inputs (one batched decode)."""
    model = bundle.model
    ids = [bundle.src_vocab.encode(list(s)) for s in sources]
    src, lengths = batch_sources(ids, model_device(model))
    memory = model.encode(src, lengths)
    out = decode(model, memory, output_caps(bundle, ids), keep_steps=True)  # each input's cap, as the trace's
    truth = [bundle.ground_truth(tuple(s)) for s in sources]
    right = 0
    for b, example in enumerate(truth):
        got = bundle.tgt_vocab.decode(out.ids[b, : int(out.lengths[b])].tolist())
        right += example is not None and [t for t in got if t != "<eos>"] == list(example.target)
    exact = right / len(sources)
    if model.attention is None:
        steps = int(out.lengths.sum())
        return Sharpness(bundle.name, "none", 0, steps, None, None, None, exact)
    weights = torch.stack([s.weights for s in out.steps], 1).float().cpu().numpy()  # (B, T, S)
    scores = torch.stack([s.scores for s in out.steps], 1).float().cpu().numpy()
    peaks, spreads = [], []
    for b in range(len(sources)):
        T, S = int(out.lengths[b]), int(lengths[b])
        peaks.append(weights[b, :T, :S].max(axis=1))
        spreads.append(scores[b, :T, :S].std(axis=1))
    peak = np.concatenate(peaks)
    spread = float(np.concatenate(spreads).mean())
    attention = model.cfg.attention
    dot = {"dot": spread, "scaled_dot": spread * math.sqrt(model.cfg.attn_dim)}.get(attention)
    return Sharpness(bundle.name, attention, model.cfg.attn_dim, int(peak.size), float(peak.mean()), spread, dot, exact)


def mean_peak(weights: np.ndarray) -> float:
    """The mean largest weight of one trace's α (T, S): how sharp its heatmap is."""
    if weights.size == 0:
        raise ExplorerError("a model without attention has no weights")
    return float(weights.max(axis=1).mean())

