"""Where training's examples come from, as id pairs: a toy task's endless fresh samples, or a fixed list of
translation pairs in bucketed epochs (with subword dropout, each epoch spelt afresh)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from explorer.data.tasks import Task
from explorer.data.vocab import Vocab
from explorer.errors import ExplorerError


@dataclass(frozen=True)
class Pair:
    """One training or evaluation example as ids; alignment sets for toy tasks."""

    src: tuple[int, ...]
    tgt: tuple[int, ...]  # without <eos>
    alignment: tuple[frozenset[int], ...] | None = None


class DataSource(Protocol):
    """Where training batches and the fixed validation set come from."""

    def batch(self, rng: random.Random, n: int, share: float = 1.0) -> list[Pair]: ...
    def validation(self) -> list[Pair]: ...
    def confirmation(self, n: int, attempt: int = 0) -> list[Pair]: ...
    def probe_text(self) -> str: ...


class TaskData:
    """Endless fresh examples of a toy task; a fixed validation set drawn from its own seed."""

    def __init__(self, task: Task, src_vocab: Vocab, tgt_vocab: Vocab, eval_samples: int, seed: int) -> None:
        self.task, self.src_vocab, self.tgt_vocab = task, src_vocab, tgt_vocab
        self._valid = [self._pair(e) for e in task.sample(random.Random(10_000_019 + seed), eval_samples)]
        self._probe = self.task.examples()[0]
        self._seed = seed

    def _pair(self, e) -> Pair:
        return Pair(tuple(self.src_vocab.encode(e.source)), tuple(self.tgt_vocab.encode(e.target)), e.alignment)

    def batch(self, rng: random.Random, n: int, share: float = 1.0) -> list[Pair]:
        """n fresh pairs; `share` < 1 (a curriculum) draws lengths from that first share of the length range
        (tasks.training_examples replays these draws)."""
        return [self._pair(e) for e in self.task.sample(rng, n, self.task.longest_at(share))]

    def validation(self) -> list[Pair]:
        return self._valid

    def confirmation(self, n: int, attempt: int = 0) -> list[Pair]:
        """n more fresh pairs, new for every attempt: the second look before a stop at the target. A set used
        again after it refused a stop would be passed sooner or later by a model that fits it by chance."""
        rng = random.Random(20_000_003 + self._seed + 7_919 * attempt)
        return [self._pair(e) for e in self.task.sample(rng, n)]

    def probe_text(self) -> str:
        return self._probe


class PairData:
    """A fixed list of pairs (translation): shuffled epochs for training, a held-out list for validation.

    Batches are bucketed: a pool of 50 batches' worth of pairs is sorted by length and cut into
    batches, so little time goes into padding; the order of the batches is shuffled again.
    """

    POOL_BATCHES = 50

    def __init__(self, train: Sequence[Pair], valid: Sequence[Pair], probe: str,
                 resample: Callable[[int, random.Random], Pair] | None = None,
                 texts: Sequence[tuple[str, str]] = ()) -> None:
        """`resample(i, rng)`, if given, encodes training pair i afresh each time it is drawn (subword
        dropout: a new spelling of the same sentences every epoch) from the trainer's generator, so every
        rank draws the same pairs; without it the pairs given are used as they are. `texts`: the training pairs
        as text, in the same order (what the app's nearest-examples index of the trained model searches)."""
        if not train:
            raise ExplorerError("no training pairs")
        self._train, self._valid, self._probe = list(train), list(valid) or list(train[:200]), probe
        self.texts = list(texts)
        self._resample = resample
        self._order: list[int] = []
        self._ready: list[list[Pair]] = []

    @property
    def train_pairs(self) -> list[Pair]:
        """The training pairs (one epoch's worth), in the order they were given."""
        return self._train

    def _next_index(self, rng: random.Random) -> int:
        if not self._order:
            self._order = list(range(len(self._train)))
            rng.shuffle(self._order)
        return self._order.pop()

    def batch(self, rng: random.Random, n: int, share: float = 1.0) -> list[Pair]:
        """The next bucketed batch (`share`, a curriculum's, is ignored: a corpus has no length knob)."""
        if not self._ready or len(self._ready[-1]) != n:
            drawn = [self._next_index(rng) for _ in range(n * self.POOL_BATCHES)]
            pool = [self._resample(i, rng) for i in drawn] if self._resample else [self._train[i] for i in drawn]
            pool.sort(key=lambda p: (len(p.src), len(p.tgt)))
            self._ready = [pool[i: i + n] for i in range(0, len(pool), n)]
            rng.shuffle(self._ready)
        return self._ready.pop()

    def validation(self) -> list[Pair]:
        return self._valid

    def confirmation(self, n: int, attempt: int = 0) -> list[Pair]:
        """None: the held-out split is the whole validation already (no fresh pairs to draw)."""
        return []

    def probe_text(self) -> str:
        return self._probe


@dataclass(frozen=True)
class PairEncoder:
    """Pieces to a Pair of ids through the two vocabularies (a class, not a closure: a job's state is pickled)."""

    src_vocab: Any
    tgt_vocab: Any

    def __call__(self, src: Sequence[str], tgt: Sequence[str]) -> Pair:
        return Pair(tuple(self.src_vocab.encode(src)), tuple(self.tgt_vocab.encode(tgt)))


@dataclass(frozen=True)
class Respelling:
    """PairData's `resample`: training pair i drawn afresh from its prepared text `texts[i]`, first as a typed
    variant (`vary`, see data/robust.Variation), then spelt by the (source, target) SubwordTokenizers with
    BPE-dropout at `rate`; `usual[i]` when a spelling is longer than `max_src` / `max_tgt` pieces."""

    subwords: Sequence[Any]
    texts: Sequence[tuple[str, str]]
    usual: Sequence[Pair]
    encode: Callable[[Sequence[str], Sequence[str]], Pair]
    rate: float
    max_src: int
    max_tgt: int
    vary: Callable[[str, str, random.Random], tuple[str, str]] | None = None

    def _spell(self, sub: Any, text: str, rng: random.Random) -> list[str]:
        return sub.sample(text, rng, self.rate) if self.rate else sub.tokenize(text)

    def __call__(self, i: int, rng: random.Random) -> Pair:
        source, target = self.texts[i]
        if self.vary is not None:
            source, target = self.vary(source, target, rng)
        src, tgt = self._spell(self.subwords[0], source, rng), self._spell(self.subwords[1], target, rng)
        ok = 0 < len(src) <= self.max_src and 0 < len(tgt) <= self.max_tgt
        return self.encode(src, tgt) if ok else self.usual[i]


def spelt_afresh(subwords: Sequence[Any], texts: Sequence[tuple[str, str]], usual: Sequence[Pair],
                 encode: Callable[[Sequence[str], Sequence[str]], Pair], rate: float, max_src: int,
                 max_tgt: int, vary: Callable[[str, str, random.Random], tuple[str, str]] | None = None
                 ) -> Respelling | None:
    """The Respelling for subword dropout at `rate` and typed variants `vary`; None without either (the pairs
    as given)."""
    if not rate and vary is None:
        return None
    return Respelling(tuple(subwords), texts, usual, encode, rate, max_src, max_tgt, vary)
