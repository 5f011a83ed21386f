"""Translation data: reading sentence-pair TSV files, tokenising text, splitting and scoring.

This module owns everything between a user's file of sentence pairs and lists of tokens:
the Tatoeba/Anki TSV loader (with line-numbered problem reports), word-level tokenisation
for English/French (and other space-separated languages), character-level tokenisation for
Chinese, length filtering, the seeded train/validation split, vocabulary building and BLEU.
"""

from __future__ import annotations

import io
import random
import re
import stat
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence, TypeVar

import sacrebleu

from explorer.errors import ExplorerError
from explorer.data.vocab import Vocab
from explorer.limits import MAX_TSV_BYTES_CLI

T = TypeVar("T")

_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_PROBLEMS_IN_MESSAGE = 3
MAX_LINE_BYTES = 10_000  # a sentence pair is far shorter; a longer line is skipped before any work on it
_LINES_PER_REASON = 3  # first line numbers shown for each reason a line was skipped


@dataclass(frozen=True)
class Problem:
    """One skipped input line and why it was skipped."""

    line: int
    reason: str


@dataclass(frozen=True)
class Corpus:
    """The usable sentence pairs of one file, plus the malformed lines that were skipped."""

    pairs: tuple[tuple[str, str], ...]
    problems: tuple[Problem, ...]
    path: str
    problems_omitted: int = 0
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


def load_tsv(path: str | Path, max_bytes: int = MAX_TSV_BYTES_CLI, max_problems_listed: int = 1000) -> Corpus:
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
    return _parse(data, str(p), max_bytes, max_problems_listed)


def load_tsv_bytes(data: bytes, name: str = "upload", max_bytes: int = MAX_TSV_BYTES_CLI,
                   max_problems_listed: int = 1000) -> Corpus:
    """Parse an uploaded file's bytes exactly like `load_tsv`, for the web UI."""
    return _parse(data, name, max_bytes, max_problems_listed)


@dataclass(frozen=True)
class FileCheck:
    """What a file of pairs holds, without its pairs: the Train page's check of an upload, which the server keeps
    for every session at a few hundred bytes (a parsed Corpus takes ~12 times the file)."""

    pairs: int
    skipped_note: str


def check_tsv_bytes(data: bytes, name: str = "upload", max_bytes: int = MAX_TSV_BYTES_CLI) -> FileCheck:
    """`load_tsv_bytes`' count of pairs and its skipped lines, or its refusal, reading one line at a time and
    keeping no pair: memory beyond the file is one line."""
    corpus = _parse(data, name, max_bytes, 0, keep=False)
    return FileCheck(corpus.count, corpus.skipped_note())


def _parse(data: bytes, name: str, max_bytes: int, max_problems_listed: int, keep: bool = True) -> Corpus:
    if len(data) > max_bytes:
        raise ExplorerError(f"{name} is too large: {len(data):,} bytes (limit {max_bytes:,})")
    if data.startswith(_UTF16_BOMS):
        raise ExplorerError(f"{name} looks like UTF-16 text; save it as UTF-8")
    stream = io.BytesIO(data)  # shares the bytes; iterating gives one line at a time (no list of every line)
    if data.startswith(_BOM):
        stream.seek(len(_BOM))
    pairs: list[tuple[str, str]] = []
    lines: list[int] = []
    problems: list[Problem] = []
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
            if len(problems) < max(max_problems_listed, _PROBLEMS_IN_MESSAGE):
                problems.append(Problem(number, pair_or_reason))
            tally = by_reason.setdefault(pair_or_reason, [0, []])
            tally[0] += 1
            if len(tally[1]) < _LINES_PER_REASON:
                tally[1].append(number)
    if not n_pairs:
        raise ExplorerError(f"no usable sentence pairs in {name}: {_why_empty(data, problems, n_problems)}")
    problems = problems[:max_problems_listed]
    skipped = tuple(sorted(((reason, n, tuple(lines)) for reason, (n, lines) in by_reason.items()),
                           key=lambda item: (-item[1], item[2][0])))
    return Corpus(tuple(pairs), tuple(problems), name, n_problems - len(problems), skipped, tuple(lines), n_pairs)


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


def _why_empty(data: bytes, problems: list[Problem], n_problems: int) -> str:
    if not data.strip(b"\r\n"):
        return "the file is empty"
    if b"\x00" in data:
        return "it looks like a binary file (NUL bytes), not UTF-8 text"
    if not problems:
        return "every line is blank"
    listed = ", ".join(f"line {p.line}: {p.reason}" for p in problems[:_PROBLEMS_IN_MESSAGE])
    more = n_problems - min(len(problems), _PROBLEMS_IN_MESSAGE)
    return listed + (f" (and {more:,} more)" if more else "")


# ---------------------------------------------------------------- tokenisation

def _mark_class() -> str:
    """A regex character class of every combining mark (Unicode category M*)."""
    marks = [c for r in (range(0x300, 0x20000), range(0xE0000, 0xE1000))
             for c in r if unicodedata.category(chr(c))[0] == "M"]
    ranges: list[list[int]] = []
    for c in marks:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return "[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]"


_M = _mark_class()
_ORPHAN_MARKS = re.compile(rf"(?<!\S){_M}+")
_ALNUM = r"[^\W_]"
_WORD_TOKEN = re.compile(
    rf"{_ALNUM}{_M}*(?:{_ALNUM}{_M}*|['\-](?={_ALNUM})|(?<=\d)[.,](?=\d))*|\S{_M}*")
_ZH_TOKEN = re.compile(rf"(?:[A-Za-z0-9]{_M}*)+|\S{_M}*")
_ENDS_ASCII_ALNUM = re.compile(rf"[A-Za-z0-9]{_M}*\Z")
_FRENCH_ELISION = re.compile(r"(?:l|d|j|m|n|s|t|c|ç|qu|jusqu|lorsqu|puisqu|quoiqu)'")

_APOSTROPHES = "\u2019\u02bc"
_HYPHENS = "\u2010\u2011"


class _CleanTable(dict):
    """A lazily filled `str.translate` table: whitespace -> space, invisible format chars dropped."""

    def __missing__(self, cp: int) -> str | int | None:
        ch = chr(cp)
        value: str | int | None
        if ch.isspace():
            value = " "
        elif ch in _APOSTROPHES:
            value = "'"
        elif ch in _HYPHENS:
            value = "-"
        elif unicodedata.category(ch) in ("Cf", "Cc"):
            value = None
        else:
            value = cp
        self[cp] = value
        return value


_CLEAN = _CleanTable()


def _normalize(text: str, lower: bool) -> str:
    """Clean, NFC-normalise (and lower-case) until stable, so re-tokenising is idempotent."""
    for _ in range(4):
        out = unicodedata.normalize("NFC", text.translate(_CLEAN))
        if lower:
            out = unicodedata.normalize("NFC", out.lower())
        out = _ORPHAN_MARKS.sub("", out)
        if out == text:
            break
        text = out
    return text


def _is_chinese(language: str) -> bool:
    code = language.lower().replace("_", "-")
    return code in ("zh", "cmn") or code.startswith(("zh-", "cmn-"))


def _is_french(language: str) -> bool:
    code = language.lower().replace("_", "-")
    return code == "fr" or code.startswith("fr-")


_EN_NO_SPACE_BEFORE = frozenset(".,!?;:)]}%»”…")
_EN_NO_SPACE_AFTER = frozenset("([{«“¿¡")
_FR_NO_SPACE_BEFORE = frozenset(".,)]}%”…")
_FR_NO_SPACE_AFTER = frozenset("([{“¿¡")


@dataclass(frozen=True)
class Tokenizer:
    """Word-level tokens for English/French/other languages, character-level for Chinese."""

    language: str

    def tokenize(self, text: str) -> list[str]:
        """Split text into the tokens a model sees (normalised; see the module rules)."""
        if _is_chinese(self.language):
            return _ZH_TOKEN.findall(_normalize(text, lower=False))
        tokens = _WORD_TOKEN.findall(_normalize(text, lower=True))
        if not _is_french(self.language):
            return tokens
        out: list[str] = []
        for token in tokens:
            m = _FRENCH_ELISION.match(token)
            if m and m.end() < len(token):
                out.extend((token[: m.end()], token[m.end():]))
            else:
                out.append(token)
        return out

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Join tokens into readable text that tokenises back to the same tokens."""
        if _is_chinese(self.language):
            return _join(tokens, _zh_space)
        if _is_french(self.language):
            return _join(tokens, _FrenchSpacing())
        return _join(tokens, _EnglishSpacing())


def _join(tokens: Sequence[str], needs_space: Callable[[str, str], bool]) -> str:
    """Concatenate tokens, with a space wherever `needs_space` or Unicode composition asks for one."""
    parts: list[str] = []
    prev = ""
    for token in tokens:
        if not token:
            continue
        space = needs_space(prev, token)
        if parts and (space or not unicodedata.is_normalized("NFC", prev + token)):
            parts.append(" ")
        parts.append(token)
        prev = token
    return "".join(parts)


def _zh_space(prev: str, token: str) -> bool:
    return bool(_ENDS_ASCII_ALNUM.search(prev)) and token[0].isascii() and token[0].isalnum()


class _EnglishSpacing:
    """Decides the space between two tokens; tracks open/close state of ASCII double quotes."""

    no_space_before = _EN_NO_SPACE_BEFORE
    no_space_after = _EN_NO_SPACE_AFTER

    def __init__(self) -> None:
        self.quote_open = False

    def __call__(self, prev: str, token: str) -> bool:
        if token == '"':
            self.quote_open = not self.quote_open
            return self.quote_open
        if prev == '"':
            return not self.quote_open
        return not (token in self.no_space_before or prev in self.no_space_after)


class _FrenchSpacing(_EnglishSpacing):
    """French typography: a space before ? ! : ; », after «, none after an elided l' d' qu'..."""

    no_space_before = _FR_NO_SPACE_BEFORE
    no_space_after = _FR_NO_SPACE_AFTER

    def __call__(self, prev: str, token: str) -> bool:
        if _FRENCH_ELISION.fullmatch(prev) and token[0].isalnum():
            return False
        return super().__call__(prev, token)


def tokenizer_for(language: str) -> Tokenizer:
    """The tokenizer for a language code ("zh" is character level, anything else word level)."""
    return Tokenizer(language)


_CJK = re.compile("(?!\\s)[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]")


def guess_language(texts: Sequence[str]) -> str:
    """"zh" when most texts are mostly CJK characters, else "en" (word level), for users' own files. (Counted
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

class Splits(Protocol):
    """Anything that splits text into a model's tokens (Tokenizer here, subwords.SubwordTokenizer)."""

    def tokenize(self, text: str) -> list[str]: ...


def filter_pairs(pairs: Iterable[tuple[str, str]], src_tok: Splits, tgt_tok: Splits,
                 max_src_len: int, max_tgt_len: int) -> list[tuple[list[str], list[str]]]:
    """Tokenised pairs short enough to train on (1..max tokens per side, <eos> not counted)."""
    tokenized = ((src_tok.tokenize(s), tgt_tok.tokenize(t)) for s, t in pairs)
    return [(src, tgt) for src, tgt in tokenized if 1 <= len(src) <= max_src_len and 1 <= len(tgt) <= max_tgt_len]


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


def build_vocab(token_lists: Iterable[Sequence[str]], min_freq: int, max_size: int | None) -> Vocab:
    """A vocabulary of the tokens seen at least `min_freq` times, most frequent first."""
    counts: Counter = Counter()
    for tokens in token_lists:
        counts.update(tokens)
    return Vocab.from_counts(counts, min_freq=min_freq, max_size=max_size)


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], language: str) -> float:
    """Corpus BLEU (0-100) of detokenised outputs against references, sacrebleu's standard way."""
    if len(hypotheses) != len(references):
        raise ExplorerError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        return 0.0
    tokenize = "zh" if _is_chinese(language) else "13a"
    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score)


def translation_scores(hypotheses: Sequence[str], references: Sequence[str], language: str) -> dict[str, object]:
    """Corpus BLEU and chrF (0-100) with sacrebleu's defaults (cased; BLEU tokenised 13a, or zh for
    Chinese), and the signatures that say so, so that a reported figure can be reproduced exactly."""
    if len(hypotheses) != len(references):
        raise ExplorerError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ExplorerError("nothing to score")
    bleu = sacrebleu.metrics.BLEU(tokenize="zh" if _is_chinese(language) else "13a")
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
