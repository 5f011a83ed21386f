"""Translation data: reading sentence-pair TSV files, guessing their language, splitting and scoring.

The Tatoeba/Anki TSV loader (with line-numbered problem reports), the seeded train/validation split and
sacrebleu's BLEU and chrF; subwords.py turns the sentences into pieces.
"""

from __future__ import annotations

import io
import random
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TypeVar

import sacrebleu

from explorer.errors import ExplorerError
from explorer.data.subwords import is_chinese
from explorer.limits import MAX_TSV_BYTES_CLI

T = TypeVar("T")

_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_PROBLEMS_IN_MESSAGE = 3
MAX_LINE_BYTES = 10_000  # a sentence pair is far shorter; a longer line is skipped before any work on it
_LINES_PER_REASON = 3  # first line numbers shown for each reason a line was skipped


@dataclass(frozen=True)
class Corpus:
    """The usable sentence pairs of one file, plus the malformed lines that were skipped."""

    pairs: tuple[tuple[str, str], ...]
    path: str
    skipped: tuple[tuple[str, int, tuple[int, ...]], ...] = ()  # (reason, lines, first line numbers), most first
    lines: tuple[int, ...] = ()  # the line number of each pair, so later filters can say which lines they left out
    count: int = 0  # the usable pairs (kept in `pairs`, except by check_tsv_bytes)

    def skipped_note(self) -> str:
        """One line saying which lines were skipped and why ("" if none), the same in the CLI and the app."""
        if not self.skipped:
            return ""
        total = sum(n for _, n, _ in self.skipped)
        parts = [f"{n:,} {reason} (line{'s' if len(lines) > 1 else ''} "
                 f"{', '.join(map(str, lines))}{', …' if n > len(lines) else ''})" for reason, n, lines in self.skipped]
        return f"{total:,} line{'s' if total != 1 else ''} of {self.path} skipped: " + "; ".join(parts)


def load_tsv(path: str | Path, max_bytes: int = MAX_TSV_BYTES_CLI) -> Corpus:
    """Read a `source<TAB>target[<TAB>attribution]` file, so users can train on their own pairs."""
    from explorer.storage import read_regular
    p = Path(path)
    try:
        info = p.stat()
        if stat.S_ISDIR(info.st_mode):
            raise ExplorerError(f"cannot read {p}: it is a directory, not a file")
        if info.st_size > max_bytes:
            raise ExplorerError(f"{p} is too large: {info.st_size:,} bytes (limit {max_bytes:,})")
    except FileNotFoundError:
        raise ExplorerError(f"cannot read {p}: no such file") from None
    except OSError as e:
        raise ExplorerError(f"cannot read {p}: {e.strerror or e}") from None
    data = read_regular(p, "TSV file", max_bytes)  # devices and FIFOs refused; never more than max_bytes read
    return _parse(data, str(p), max_bytes)


def load_tsv_bytes(data: bytes, name: str = "upload", max_bytes: int = MAX_TSV_BYTES_CLI) -> Corpus:
    """Parse an uploaded file's bytes exactly like `load_tsv`, for the web UI."""
    return _parse(data, name, max_bytes)


@dataclass(frozen=True)
class FileCheck:
    """What a file of pairs holds, without its pairs: the Train page's check of an upload, which the server keeps
    for every session at a few hundred bytes (a parsed Corpus takes ~12 times the file)."""

    pairs: int
    skipped_note: str


def check_tsv_bytes(data: bytes, name: str = "upload", max_bytes: int = MAX_TSV_BYTES_CLI) -> FileCheck:
    """`load_tsv_bytes`' count of pairs and its skipped lines, or its refusal, reading one line at a time and
    keeping no pair: memory beyond the file is one line."""
    corpus = _parse(data, name, max_bytes, keep=False)
    return FileCheck(corpus.count, corpus.skipped_note())


def _parse(data: bytes, name: str, max_bytes: int, keep: bool = True) -> Corpus:
    if len(data) > max_bytes:
        raise ExplorerError(f"{name} is too large: {len(data):,} bytes (limit {max_bytes:,})")
    if data.startswith(_UTF16_BOMS):
        raise ExplorerError(f"{name} looks like UTF-16 text; save it as UTF-8")
    stream = io.BytesIO(data)  # shares the bytes; iterating gives one line at a time (no list of every line)
    if data.startswith(_BOM):
        stream.seek(len(_BOM))
    pairs: list[tuple[str, str]] = []
    lines: list[int] = []
    first: list[tuple[int, str]] = []  # the first skipped lines (number, reason), for the message of a file with none
    n_problems = n_pairs = 0
    by_reason: dict[str, list] = {}  # reason -> [count, first line numbers]
    for number, raw in enumerate(stream, start=1):
        pair_or_reason = _parse_line(raw.removesuffix(b"\n").removesuffix(b"\r"))
        if isinstance(pair_or_reason, tuple):
            n_pairs += 1
            if keep:
                pairs.append(pair_or_reason)
                lines.append(number)
        elif pair_or_reason:
            n_problems += 1
            if len(first) < _PROBLEMS_IN_MESSAGE:
                first.append((number, pair_or_reason))
            tally = by_reason.setdefault(pair_or_reason, [0, []])
            tally[0] += 1
            if len(tally[1]) < _LINES_PER_REASON:
                tally[1].append(number)
    if not n_pairs:
        raise ExplorerError(f"no usable sentence pairs in {name}: {_why_empty(data, first, n_problems)}")
    skipped = tuple(sorted(((reason, n, tuple(lines)) for reason, (n, lines) in by_reason.items()),
                           key=lambda item: (-item[1], item[2][0])))
    return Corpus(tuple(pairs), name, skipped, tuple(lines), n_pairs)


def _parse_line(raw: bytes) -> tuple[str, str] | str:
    """A (source, target) pair, a problem reason, or "" for a blank line."""
    if len(raw) > MAX_LINE_BYTES:
        return f"longer than {MAX_LINE_BYTES:,} bytes"
    if b"\x00" in raw:
        return "binary data (NUL byte)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not valid UTF-8"
    if not text.strip():
        return "only tabs, no text" if "\t" in text else ""
    columns = text.split("\t")
    if len(columns) not in (2, 3):
        return f"expected 2 or 3 tab-separated columns, found {len(columns)}"
    source, target = columns[0], columns[1]
    if not source.strip():
        return "empty source"
    if not target.strip():
        return "empty target"
    return source, target


def _why_empty(data: bytes, first: list[tuple[int, str]], n_problems: int) -> str:
    if not data.strip(b"\r\n"):
        return "the file is empty"
    if b"\x00" in data:
        return "it looks like a binary file (NUL bytes), not UTF-8 text"
    if not first:
        return "every line is blank"
    listed = ", ".join(f"line {line}: {reason}" for line, reason in first)
    more = n_problems - len(first)
    return listed + (f" (and {more:,} more)" if more else "")


# ---------------------------------------------------------------- languages

_CJK = re.compile("(?!\\s)[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]")


def guess_language(texts: Sequence[str]) -> str:
    """"zh" when most texts are mostly CJK characters, else "en", for users' own files. (Counted
    with str.split and a regex, not a loop over characters: a file of long lines spent seconds here.)"""
    mostly_cjk = 0
    counted = 0
    for text in texts:
        chars = sum(map(len, text.split()))
        if not chars:
            continue
        counted += 1
        if len(_CJK.findall(text)) * 2 > chars:
            mostly_cjk += 1
    return "zh" if counted and mostly_cjk * 2 > counted else "en"


# ---------------------------------------------------------------- datasets

def split_pairs(items: Sequence[T], valid_fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """A reproducible train/validation split; both parts keep the input order."""
    if not 0.0 <= valid_fraction < 1.0:
        raise ExplorerError(f"validation fraction must be in [0, 1), got {valid_fraction}")
    n = len(items)
    n_valid = int(round(n * valid_fraction))
    if valid_fraction > 0 and n >= 2:
        n_valid = max(n_valid, 1)
    n_valid = min(n_valid, max(n - 1, 0))
    order = list(range(n))
    random.Random(seed).shuffle(order)
    valid_ids = set(order[:n_valid])
    train = [x for i, x in enumerate(items) if i not in valid_ids]
    valid = [x for i, x in enumerate(items) if i in valid_ids]
    return train, valid


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], language: str) -> float:
    """Corpus BLEU (0-100) of detokenised outputs against references, sacrebleu's standard way."""
    if len(hypotheses) != len(references):
        raise ExplorerError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        return 0.0
    tokenize = "zh" if is_chinese(language) else "13a"
    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score)


def translation_scores(hypotheses: Sequence[str], references: Sequence[str], language: str) -> dict[str, object]:
    """Corpus BLEU and chrF (0-100) with sacrebleu's defaults (cased; BLEU tokenised 13a, or zh for
    Chinese), and the signatures that say so, so that a reported figure can be reproduced exactly."""
    if len(hypotheses) != len(references):
        raise ExplorerError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ExplorerError("nothing to score")
    bleu = sacrebleu.metrics.BLEU(tokenize="zh" if is_chinese(language) else "13a")
    chrf = sacrebleu.metrics.CHRF()
    refs = [list(references)]
    scores: dict[str, object] = {"bleu": round(float(bleu.corpus_score(list(hypotheses), refs).score), 2),
                                 "chrf": round(float(chrf.corpus_score(list(hypotheses), refs).score), 2),
                                 "bleu_signature": str(bleu.get_signature()),
                                 "chrf_signature": str(chrf.get_signature())}
    short = sum(len(bleu.tokenizer(r).split()) < BLEU_ORDER for r in references) / len(references)
    if short >= 0.5:
        scores["bleu_note"] = bleu_note(short)
    return scores


BLEU_ORDER = 4  # BLEU's longest n-gram: a reference shorter than this has no 4-gram to match


def bleu_note(short_share: float) -> str:
    """Why BLEU says little when most references are shorter than its 4-grams (the same words everywhere)."""
    return (f"{100 * short_share:.0f}% of the references are shorter than {BLEU_ORDER} tokens, and BLEU multiplies "
            f"the precisions of 1- to {BLEU_ORDER}-token runs: with no {BLEU_ORDER}-token run to match it is near 0 "
            "even for perfect output. Read exact match and chrF instead")
