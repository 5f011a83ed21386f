"""The Compare page's numbers: accuracy against input length (the bottleneck curve) and model summaries.

The curve is `evaluation.accuracy_by_length`, the very function behind
`python -m explorer eval --min-len L --max-len L --seed SEED+L`, so the page and the CLI agree
number for number (see `eval_command`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Sequence

from .bundle import ModelBundle
from .errors import ExplorerError
from .evaluation import accuracy_by_length
from .model import count_parameters

CURVE_LENGTHS: tuple[int, ...] = tuple(range(1, 41))
CURVE_SAMPLES = 200
CURVE_SEED = 12345  # the CLI's default --seed; length L uses seed CURVE_SEED + L


@dataclass(frozen=True)
class Curve:
    """Accuracy at each input length for one model, and what it cost to compute."""

    model: str
    attention: str
    lengths: tuple[int, ...]
    rows: tuple[dict[str, Any], ...]  # per length: length, n, exact_match, token_accuracy, alignment_accuracy
    samples: int
    seed: int
    trained: tuple[int, int] | None  # the input lengths the model was trained on
    seconds: float

    def at(self, length: int) -> dict[str, Any] | None:
        """The row for one length (None if the curve does not cover it)."""
        for row in self.rows:
            if row["length"] == length:
                return row
        return None


def has_curve(bundle: ModelBundle) -> bool:
    """Whether accuracy by length makes sense: a sequence task (dates and translation have no length knob)."""
    return bundle.task is not None and bundle.task.name != "dates"


def length_curve(bundle: ModelBundle, lengths: Sequence[int] = CURVE_LENGTHS, samples: int = CURVE_SAMPLES,
                 seed: int = CURVE_SEED) -> Curve:
    """Exact match, token and alignment accuracy at each input length (batched per length)."""
    if not has_curve(bundle):
        raise ExplorerError(f"{bundle.name} has no input-length knob (only copy, reverse and sort models do)")
    lengths = [n for n in lengths if n <= bundle.model.cfg.max_src_len]  # a model reads no longer input
    started = time.perf_counter()
    rows = accuracy_by_length(bundle, list(lengths), samples, seed)
    seconds = time.perf_counter() - started
    trained = (bundle.task.min_len, bundle.task.max_len)
    return Curve(bundle.name, bundle.model.cfg.attention, tuple(lengths), tuple(rows), samples, seed, trained,
                 seconds)


def eval_command(checkpoint: str, length: int, samples: int = CURVE_SAMPLES, seed: int = CURVE_SEED) -> str:
    """The CLI line that reproduces one point of the curve."""
    return (f"python -m explorer eval --checkpoint {checkpoint} --min-len {length} --max-len {length} "
            f"--samples {samples} --seed {seed + length} --json")


def parameter_breakdown(bundle: ModelBundle) -> dict[str, int]:
    """Parameters by part: encoder, decoder, attention (Query/Key/Value), output layer U."""
    m = bundle.model
    parts = {
        "encoder": count_parameters(m.encoder),
        "decoder": count_parameters(m.embed) + count_parameters(m.cells)
        + (count_parameters(m.bridge) if m.bridge is not None else 0),
        "attention": count_parameters(m.attention) if m.attention is not None else 0,
        "output": count_parameters(m.out),
    }
    parts["total"] = sum(parts.values())
    return parts


def describe_model(bundle: ModelBundle) -> dict[str, Any]:
    """A model's architecture and training in a few readable fields."""
    cfg = bundle.model.cfg
    what = bundle.task.name if bundle.task else f"{bundle.languages[0]}→{bundle.languages[1]}"
    lengths = None
    if bundle.task is not None and bundle.task.name != "dates":
        lengths = f"{bundle.task.min_len}–{bundle.task.max_len}"
    return {"task": what, "attention": cfg.attention, "cell": cfg.cell, "hidden": cfg.hidden,
            "bidirectional": cfg.bidirectional, "trained lengths": lengths,
            "parameters": count_parameters(bundle.model)}


def random_input(bundle: ModelBundle, length: int, seed: int) -> str:
    """A random input of exactly this length for a sequence task (dates: a random date)."""
    task = bundle.task_obj
    if task is None:
        raise ExplorerError(f"{bundle.name} is a translation model: type a sentence")
    rng = random.Random(seed)
    if task.is_dates:
        return "".join(task.sample(rng, 1)[0].source)
    if length > bundle.model.cfg.max_src_len:
        raise ExplorerError(f"{bundle.name} reads at most {bundle.model.cfg.max_src_len} symbols")
    return "".join(task.sample_length(rng, 1, length)[0].source)
