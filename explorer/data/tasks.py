"""Toy tasks with exact ground-truth alignment: sampling, tokenisation, ground truth, scoring.

Each task maps a source token sequence to a target token sequence and knows, for every
target token, which source positions it truly depends on, so attention can be scored:

- ``copy``: target = source; target t aligns to source t (the diagonal).
- ``reverse``: target = reversed source; target t aligns to source m-1-t (the anti-diagonal).
- ``sort``: target = source sorted by the order of ``alphabet``; target t aligns to every
  source position holding the same symbol (ties are genuinely ambiguous).
- ``dates``: a human-written date -> ISO ``YYYY-MM-DD`` (10 character tokens). Alignment is
  per field: each year character aligns to all the year field's characters, month characters
  to the month field (digits or name), day characters to the day field (digits only, an
  ordinal suffix such as "rd" is not part of it); the two '-' align to nothing.

Date formats (shown for Wednesday 3 March 2021; years 1970-2069):

====================================  ===========================  =========================
format                                example                      note
====================================  ===========================  =========================
``{d} {month} {yyyy}``                 3 March 2021
``{dd}/{mm}/{yy}``                     03/03/21                     day/month/year (DD/MM/YY)
``{month} {d}, {yyyy}``                March 3, 2021
``{mon} {d} {yyyy}``                   Mar 3 2021
``{d} {mon} {yyyy}``                   3 Mar 2021
``{yyyy}.{mm}.{dd}``                   2021.03.03
``{weekday}, {d} {month} {yyyy}``      Wednesday, 3 March 2021
``{wkd} {d} {mon} {yy}``               Wed 3 Mar 21
``{do} of {month} {yyyy}``             3rd of March 2021
``{dd}-{mm}-{yyyy}``                   03-03-2021                   day-month-year
``{yyyy}{mm}{dd}``                     20210303
``{d}/{m}/{yyyy}``                     3/3/2021                     day/month/year
``{yyyy}-{mm}-{dd}``                   2021-03-03                   already ISO
``{wkd}, {mon} {d}, {yyyy}``           Wed, Mar 3, 2021
``{dd}-{MON}-{yyyy}``                  03-MAR-2021
====================================  ===========================  =========================

Two-digit years: yy < 70 -> 20yy, otherwise 19yy. Weekdays are the true weekday of the date.
Parsing (``Task.solve``) tries the formats in order and is lenient where it cannot mislead:
month and weekday names in any case, full or 3-letter, in either kind of slot; numbers padded
or not where the format is unpadded; any ordinal suffix (st, nd, rd, th). A weekday that
contradicts the date, an impossible date (31 April) or text matching no format has no ground
truth (``None``).
"""

from __future__ import annotations

import datetime
import functools
import random
import re
import string
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from explorer.defaults import TASKS
from explorer.errors import ExplorerError

TASK_NAMES: tuple[str, ...] = TASKS  # explorer/defaults.py: the names without torch

Alignment = tuple[frozenset[int], ...]


@dataclass(frozen=True)
class Example:
    """One source/target pair with, where known, the true source positions of each target token."""

    source: tuple[str, ...]
    target: tuple[str, ...]  # without <eos>
    alignment: Alignment | None  # one set per target token; empty = no source position


@dataclass(frozen=True)
class TaskSpec:
    """Which task, and for sequence tasks the source lengths and symbols (dates ignores them)."""

    name: str
    min_len: int = 5
    max_len: int = 15
    alphabet: str = "0123456789"


# --- dates ---------------------------------------------------------------------------------

MONTHS: tuple[str, ...] = ("January", "February", "March", "April", "May", "June", "July",
                           "August", "September", "October", "November", "December")
WEEKDAYS: tuple[str, ...] = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                             "Saturday", "Sunday")
FIRST_DATE = datetime.date(1970, 1, 1)
LAST_DATE = datetime.date(2069, 12, 31)
DATE_MAX_SOURCE_LEN = 32
ISO_LEN = 10

DATE_FORMATS: tuple[str, ...] = (
    "{d} {month} {yyyy}",
    "{dd}/{mm}/{yy}",
    "{month} {d}, {yyyy}",
    "{mon} {d} {yyyy}",
    "{d} {mon} {yyyy}",
    "{yyyy}.{mm}.{dd}",
    "{weekday}, {d} {month} {yyyy}",
    "{wkd} {d} {mon} {yy}",
    "{do} of {month} {yyyy}",
    "{dd}-{mm}-{yyyy}",
    "{yyyy}{mm}{dd}",
    "{d}/{m}/{yyyy}",
    "{yyyy}-{mm}-{dd}",
    "{wkd}, {mon} {d}, {yyyy}",
    "{dd}-{MON}-{yyyy}",
)

_MONTH_NUMBER = {**{m.lower(): i + 1 for i, m in enumerate(MONTHS)},
                 **{m[:3].lower(): i + 1 for i, m in enumerate(MONTHS)}}
_WEEKDAY_NUMBER = {**{w.lower(): i for i, w in enumerate(WEEKDAYS)},
                   **{w[:3].lower(): i for i, w in enumerate(WEEKDAYS)}}

_NAME = "[A-Za-z]+"
_FIELD_REGEX = {
    "d": ("day", "[0-9]{1,2}"), "dd": ("day", "[0-9]{2}"),
    "do": ("day", "[0-9]{1,2}"),
    "m": ("month", "[0-9]{1,2}"), "mm": ("month", "[0-9]{2}"),
    "month": ("month", _NAME), "mon": ("month", _NAME), "MON": ("month", _NAME),
    "yyyy": ("year", "[0-9]{4}"), "yy": ("year", "[0-9]{2}"),
    "weekday": ("weekday", _NAME), "wkd": ("weekday", _NAME),
}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _ordinal(day: int) -> str:
    """'1st', '2nd', '3rd', '4th', '11th', '22nd' ..."""
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _render_field(field: str, date: datetime.date) -> str:
    """The text of one placeholder for a date."""
    month, weekday = MONTHS[date.month - 1], WEEKDAYS[date.weekday()]
    return {
        "d": str(date.day), "dd": f"{date.day:02d}", "do": _ordinal(date.day),
        "m": str(date.month), "mm": f"{date.month:02d}",
        "month": month, "mon": month[:3], "MON": month[:3].upper(),
        "yyyy": f"{date.year:04d}", "yy": f"{date.year % 100:02d}",
        "weekday": weekday, "wkd": weekday[:3],
    }[field]


def render_date(fmt: str, date: datetime.date) -> str:
    """A date written in one of DATE_FORMATS (what sample() produces)."""
    return _PLACEHOLDER.sub(lambda m: _render_field(m.group(1), date), fmt)


def _compile_format(fmt: str) -> re.Pattern[str]:
    """The parsing regex of a format: named groups day, month, year and maybe weekday."""
    parts, last = [], 0
    for m in _PLACEHOLDER.finditer(fmt):
        group, regex = _FIELD_REGEX[m.group(1)]
        parts.append(re.escape(fmt[last:m.start()]))
        parts.append(f"(?P<{group}>{regex})")
        if m.group(1) == "do":
            parts.append("(?:st|nd|rd|th)")
        last = m.end()
    parts.append(re.escape(fmt[last:]))
    return re.compile("".join(parts), re.IGNORECASE)


_DATE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(_compile_format(f) for f in DATE_FORMATS)


def _month_value(text: str) -> int | None:
    """Month number from digits or an English name (full or 3-letter, any case)."""
    return int(text) if text.isdigit() else _MONTH_NUMBER.get(text.lower())


def _year_value(text: str) -> int:
    """Four digits as is; two digits by the pivot: yy < 70 -> 20yy, else 19yy."""
    if len(text) == 2:
        yy = int(text)
        return 2000 + yy if yy < 70 else 1900 + yy
    return int(text)


def _match_date(match: re.Match[str]) -> datetime.date | None:
    """The date a format match denotes, or None if it is impossible or its weekday is wrong."""
    month = _month_value(match["month"])
    if month is None:
        return None
    try:
        date = datetime.date(_year_value(match["year"]), month, int(match["day"]))
    except ValueError:
        return None
    weekday = match.groupdict().get("weekday")
    if weekday is not None and _WEEKDAY_NUMBER.get(weekday.lower()) != date.weekday():
        return None
    return date


def parse_date(text: str) -> tuple[datetime.date, dict[str, frozenset[int]]] | None:
    """The date a text denotes and each field's character positions, or None if no format fits."""
    for pattern in _DATE_PATTERNS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        date = _match_date(match)
        if date is not None:
            spans = {f: frozenset(range(*match.span(f))) for f in ("year", "month", "day")}
            return date, spans
    return None


def _iso_example(source: tuple[str, ...], date: datetime.date,
                 spans: dict[str, frozenset[int]]) -> Example:
    """The ISO target of a date with its field-level alignment."""
    target = tuple(date.isoformat())
    none: frozenset[int] = frozenset()
    year, month, day = spans["year"], spans["month"], spans["day"]
    alignment = (year,) * 4 + (none,) + (month,) * 2 + (none,) + (day,) * 2
    return Example(source, target, alignment)


# --- sequence tasks ------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _diagonal(m: int, reverse: bool) -> Alignment:
    """Target t aligned to source t (or m-1-t): the same for every source of length m, so made once per length
    (training draws thousands of examples a second, and building these sets was a tenth of a toy step)."""
    return tuple(frozenset({m - 1 - t if reverse else t}) for t in range(m))


def _copy(source: tuple[str, ...], rank: dict[str, int]) -> tuple[tuple[str, ...], Alignment]:
    """Target t is source t."""
    return source, _diagonal(len(source), False)


def _reverse(source: tuple[str, ...], rank: dict[str, int]) -> tuple[tuple[str, ...], Alignment]:
    """Target t is source m-1-t."""
    return source[::-1], _diagonal(len(source), True)


def _sort(source: tuple[str, ...], rank: dict[str, int]) -> tuple[tuple[str, ...], Alignment]:
    """Target is the source in alphabet order; each target token aligns to all its copies."""
    target = tuple(sorted(source, key=rank.__getitem__))
    where = {s: frozenset(i for i, x in enumerate(source) if x == s) for s in set(source)}
    return target, tuple(where[s] for s in target)


_SEQUENCE_TASKS: dict[str, Callable[[tuple[str, ...], dict[str, int]],
                                    tuple[tuple[str, ...], Alignment]]] = {
    "copy": _copy, "reverse": _reverse, "sort": _sort,
}

_NICE_SEQUENCES: tuple[str, ...] = ("31415926535", "27182818284", "11235813213", "8675309",
                                    "9081726354", "4444222211")
_DATE_EXAMPLES: tuple[str, ...] = ("3 March 2021", "03/03/21", "Wednesday, 3 March 2021",
                                   "Mar 3 2021", "3rd of March 2021", "20210303")


def _validate(spec: TaskSpec) -> None:
    """Raise ExplorerError when a spec cannot make a task."""
    if spec.name not in TASK_NAMES:
        raise ExplorerError(f"unknown task {spec.name!r}; choose one of {', '.join(TASK_NAMES)}")
    if spec.name == "dates":
        return
    for field in ("min_len", "max_len"):
        value = getattr(spec, field)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ExplorerError(f"{field} must be a whole number, got {value!r}")
    if spec.min_len < 1:
        raise ExplorerError(f"min_len must be at least 1, got {spec.min_len}")
    if spec.max_len < spec.min_len:
        raise ExplorerError(f"max_len ({spec.max_len}) must not be below min_len ({spec.min_len})")
    if not isinstance(spec.alphabet, str) or not spec.alphabet:
        raise ExplorerError("the alphabet must be a non-empty string of symbols")
    if any(c.isspace() for c in spec.alphabet):
        raise ExplorerError("the alphabet must not contain whitespace")
    repeated = sorted({c for c in spec.alphabet if spec.alphabet.count(c) > 1})
    if repeated:
        raise ExplorerError(f"the alphabet repeats {''.join(repeated)!r}")


def _check_count(n: int) -> None:
    """Raise ExplorerError for a negative or non-integer example count."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ExplorerError(f"the number of examples must be a whole number >= 0, got {n!r}")


class Task:
    """One task instance: what its sources and targets look like and what the truth is."""

    def __init__(self, spec: TaskSpec) -> None:
        _validate(spec)
        self.spec = spec
        self._rank = {c: i for i, c in enumerate(spec.alphabet)}

    def __repr__(self) -> str:
        return f"Task({self.spec!r})"

    @property
    def is_dates(self) -> bool:
        """Dates has no length range or alphabet; the sequence tasks do."""
        return self.spec.name == "dates"

    @property
    def max_source_len(self) -> int:
        """The longest source sample() can produce (a checkpoint's model must read it)."""
        return DATE_MAX_SOURCE_LEN if self.is_dates else self.spec.max_len

    @property
    def max_target_len(self) -> int:
        """The longest target (without <eos>) sample() can produce."""
        return ISO_LEN if self.is_dates else self.spec.max_len

    def source_symbols(self) -> list[str]:
        """Every symbol a source may contain, in a fixed order, to build the source vocabulary."""
        if self.is_dates:
            return list(string.ascii_lowercase + string.ascii_uppercase + string.digits + " ,./-")
        return list(self.spec.alphabet)

    def target_symbols(self) -> list[str]:
        """Every symbol a target may contain, in a fixed order, to build the target vocabulary."""
        if self.is_dates:
            return list(string.digits + "-")
        return list(self.spec.alphabet)

    def sample(self, rng: random.Random, n: int, max_len: int | None = None) -> list[Example]:
        """n fresh random examples (sequence lengths uniform in [min_len, max_len]; a `max_len` within that
        range lowers the top, as a training curriculum does; dates ignore it)."""
        _check_count(n)
        if self.is_dates:
            return [self._sample_date(rng) for _ in range(n)]
        lo, hi = self.spec.min_len, self.spec.max_len
        if max_len is not None:
            hi = min(hi, max(lo, max_len))
        return [self._sample_sequence(rng, rng.randint(lo, hi)) for _ in range(n)]

    def longest_at(self, share: float) -> int | None:
        """The longest source a curriculum allows when it has reached `share` of the length range (None: any)."""
        if share >= 1.0:
            return None
        lo, hi = self.spec.min_len, self.spec.max_len
        return lo + round((hi - lo) * max(0.0, share))

    def sample_length(self, rng: random.Random, n: int, length: int) -> list[Example]:
        """n examples of exactly this source length, any length >= 1 (accuracy by length)."""
        _check_count(n)
        if self.is_dates:
            raise ExplorerError("the dates task has no length parameter to sample by")
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise ExplorerError(f"length must be a whole number >= 1, got {length!r}")
        return [self._sample_sequence(rng, length) for _ in range(n)]

    def tokenize(self, text: str) -> tuple[str, ...]:
        """Turn what a user typed into source tokens: one character each, spacing normalised."""
        if self.is_dates:
            return tuple(" ".join(text.split()))
        return tuple("".join(text.split()))

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Tokens back to the text to display."""
        return "".join(tokens)

    def solve(self, source: Sequence[str]) -> Example | None:
        """The truth for a source, or None where there is none (unknown symbol, unparsable date)."""
        source = tuple(source)
        if not source:
            return None
        if self.is_dates:
            if any(len(tok) != 1 for tok in source):
                return None
            parsed = parse_date("".join(source))
            return None if parsed is None else _iso_example(source, *parsed)
        if any(tok not in self._rank for tok in source):
            return None
        target, alignment = _SEQUENCE_TASKS[self.spec.name](source, self._rank)
        return Example(source, target, alignment)

    def examples(self) -> list[str]:
        """A few good inputs for the UI to offer, valid for this task's alphabet and lengths."""
        if self.is_dates:
            return list(_DATE_EXAMPLES)
        lo, hi = self.spec.min_len, self.spec.max_len
        picked: dict[str, None] = {}
        for text in _NICE_SEQUENCES:
            text = text[:hi]
            if len(text) >= lo and all(c in self._rank for c in text):
                picked.setdefault(text, None)
        rng = random.Random(0)
        for _ in range(100):
            if len(picked) >= 5:
                break
            length = rng.randint(lo, hi)
            picked.setdefault("".join(rng.choice(self.spec.alphabet) for _ in range(length)), None)
        return list(picked)[:6]

    def _sample_sequence(self, rng: random.Random, length: int) -> Example:
        """One random sequence example of a given length."""
        choice, alphabet = rng.choice, self.spec.alphabet
        source = tuple([choice(alphabet) for _ in range(length)])  # every symbol is the alphabet's: no solve() check
        target, alignment = _SEQUENCE_TASKS[self.spec.name](source, self._rank)
        return Example(source, target, alignment)

    def _sample_date(self, rng: random.Random) -> Example:
        """One random date in a random format."""
        ordinal = rng.randint(FIRST_DATE.toordinal(), LAST_DATE.toordinal())
        date = datetime.date.fromordinal(ordinal)
        text = render_date(rng.choice(DATE_FORMATS), date)
        example = self.solve(tuple(text))
        assert example is not None and example.target == tuple(date.isoformat())
        return example


def make_task(spec: TaskSpec) -> Task:
    """Build the task a spec names, raising ExplorerError if the spec is unusable."""
    return Task(spec)


def curriculum_share(step: int, curriculum: int, steps: int) -> float:
    """The share of the length range the training batch of 0-based `step` draws from: a curriculum ramps over its
    first `curriculum` steps (at most half of `steps`, so a short run still trains on every length)."""
    ramp = min(curriculum, steps // 2)
    return min(1.0, (step + 1) / ramp) if ramp else 1.0


def training_examples(task: Task, seed: int, batch_size: int, n: int, curriculum: int = 0,
                      steps: int = 0) -> list[Example]:
    """The first n examples a toy-task training run with this seed drew, in order: its generator
    (random.Random(seed)) replayed through the same batches (explorer.training.train draws them so)."""
    _check_count(n)
    if batch_size < 1:
        raise ExplorerError(f"batch_size must be at least 1, got {batch_size}")
    rng = random.Random(seed)
    out: list[Example] = []
    step = 0
    while len(out) < n:
        out += task.sample(rng, batch_size, task.longest_at(curriculum_share(step, curriculum, steps)))
        step += 1
    return out[:n]


def alignment_matrix(example_alignment: Alignment, source_len: int) -> np.ndarray:
    """The true alignment as a bool (T, S) mask, to overlay on an attention heatmap."""
    matrix = np.zeros((len(example_alignment), source_len), dtype=bool)
    for t, positions in enumerate(example_alignment):
        for i in positions:
            if not 0 <= i < source_len:
                raise ValueError(f"alignment position {i} outside a source of length {source_len}")
            matrix[t, i] = True
    return matrix


def alignment_hits(weights: np.ndarray, alignment: Alignment) -> tuple[int, int]:
    """How often attention's argmax lands on a true position: (hits, counted target steps)."""
    weights = np.asarray(weights)
    if weights.ndim != 2:
        raise ValueError(f"weights must be (T, S), got shape {weights.shape}")
    if weights.shape[1] == 0:
        return 0, 0
    return argmax_hits(weights.argmax(axis=1).tolist(), alignment)


def argmax_hits(argmax: Sequence[int], alignment: Alignment) -> tuple[int, int]:
    """alignment_hits from each step's attention argmax, for callers that take the argmax of a whole batch
    at once (evaluation: one numpy argmax per row and step was a third of its time)."""
    hits = counted = 0
    for t in range(min(len(alignment), len(argmax))):
        if alignment[t]:
            counted += 1
            hits += argmax[t] in alignment[t]
    return hits, counted
