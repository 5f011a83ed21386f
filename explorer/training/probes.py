"""The probe: one input whose attention a training job snapshots as it trains (the Train page's scrubber).

The job's process takes the snapshots (explorer/jobs/worker.py); the server keeps them thinned
evenly to a cap. The probe is teacher-forced on its true output where it has one, so every frame has
the same rows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from explorer.engine.bundle import ModelBundle
from explorer.errors import ExplorerError
from explorer.training.data import DataSource, Pair


@dataclass(frozen=True)
class Snapshot:
    """The probe input's trace at one step (the scrubber's frames)."""

    step: int
    trace: Any  # explorer.engine.trace.Trace (frozen)


class Thinned:
    """Keep at most `cap` items spaced evenly in step: accept every `stride`-th offer; when full,
    drop every other kept item and double the stride."""

    def __init__(self, cap: int, stride: int = 1) -> None:
        self.cap, self.stride, self.items = max(2, cap), max(1, stride), []
        self._offers = 0

    def offer(self, item: Any) -> bool:
        take = self._offers % self.stride == 0
        self._offers += 1
        if take:
            self.items.append(item)
            if len(self.items) > self.cap:
                self.items = self.items[::2]
                self.stride *= 2
        return take


class Watched:
    """A data source that remembers its most recent training pairs (for train accuracy) and can
    override the probe input."""

    def __init__(self, inner: DataSource, probe: str | None, keep: int = 256) -> None:
        self.inner, self._probe, self.keep = inner, probe, keep
        self.recent: list[Pair] = []

    def batch(self, rng: random.Random, n: int, share: float = 1.0) -> list[Pair]:
        pairs = self.inner.batch(rng, n, share)
        self.recent = (self.recent + list(pairs))[-self.keep:]
        return pairs

    def validation(self) -> list[Pair]:
        return self.inner.validation()

    def confirmation(self, n: int, attempt: int = 0) -> list[Pair]:
        return self.inner.confirmation(n, attempt)

    def probe_text(self) -> str:
        return self._probe or self.inner.probe_text()


def probe_target(bundle: ModelBundle, data: "Watched") -> str | None:
    """The probe's true output, so every snapshot is teacher-forced on it: the heatmap keeps the same
    rows from frame to frame (greedy output of an untrained model runs to the length cap)."""
    target = ""
    try:
        prepared = bundle.prepare(data.probe_text())
        truth = bundle.ground_truth(prepared.tokens)
        if truth is not None:
            target = "".join(truth.target)
        else:  # translation: the probe is a training sentence; find its pair
            pair = next((p for p in getattr(data.inner, "train_pairs", ()) if p.src == prepared.ids), None)
            if pair is not None:
                target = bundle.detokenize_target(bundle.tgt_vocab.decode(pair.tgt))
    except ExplorerError:
        target = ""
    return target or None


def trace_probe(bundle: ModelBundle, text: str) -> Any:
    """The probe input's Trace as the model decodes it now, or None when it cannot be traced (a Trainer's
    `probe`, for callers that show the trace at each evaluation)."""
    from explorer.engine.trace import trace
    try:
        return trace(bundle, text)
    except ExplorerError:
        return None


def take_probe(bundle: ModelBundle, text: str, target: str | None, step: int) -> Snapshot | None:
    """The probe's trace now (teacher-forced on `target` where it can be), or None when it cannot be traced."""
    from explorer.engine.trace import trace
    was_training = bundle.model.training
    bundle.model.eval()
    try:
        try:
            return Snapshot(step, trace(bundle, text, target=target))
        except ExplorerError:
            return Snapshot(step, trace(bundle, text))
    except ExplorerError:
        return None
    finally:
        bundle.model.train(was_training)
