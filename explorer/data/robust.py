"""Text as people type it: what a translation model reads, and training pairs varied the ways typing varies.

Two means, measured together by benchmarks/robustness.py:
- `read_as` (every input, training and use alike): text written ALL IN CAPITALS is read in sentence case, and
  pictographs (emoji) are left out, since neither carries meaning a model of these corpora learnt; typed input
  (`read_input`, not training) also gets the final mark an English sentence lacks. The pages show the pieces
  the model read, so the trace stays what the model computed.
- `Variation` (training only): a training pair is drawn as typed variants, the source's final punctuation left
  off, the source lower-cased, a name replaced on both sides by another name, a number by another number, so
  the model learns to finish a sentence without a cue, to read any case, and to copy what it cannot translate.
"""

from __future__ import annotations

import random
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Sequence

NAMES_FILE = Path(__file__).resolve().parents[2] / "data" / "names.txt"
# A name written in Chinese targets as its usual transcription (the corpora's most frequent names).
CHINESE_NAMES: dict[str, str] = {"Tom": "汤姆", "Mary": "玛丽", "John": "约翰", "Jack": "杰克", "Alice": "爱丽丝",
                                 "Bob": "鲍勃", "Jim": "吉姆", "Ken": "肯", "Lucy": "露西", "Mike": "迈克"}
# Number words written as digits in training variants, with their French and Chinese forms ("one" is left out:
# French "un"/"une" is also the article).
NUMBER_WORDS: dict[str, tuple[str, str]] = {
    "two": ("deux", "两"), "three": ("trois", "三"), "four": ("quatre", "四"), "five": ("cinq", "五"),
    "six": ("six", "六"), "seven": ("sept", "七"), "eight": ("huit", "八"), "nine": ("neuf", "九"), "ten": ("dix", "十"),
    "eleven": ("onze", "十一"), "twelve": ("douze", "十二"), "twenty": ("vingt", "二十"), "thirty": ("trente", "三十")}
# A sentence that starts with a pronoun becomes one that starts with a name: its French or Chinese forms.
PRONOUNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {"He": (("Il",), ("他",)), "She": (("Elle",), ("她",))}
_FINAL = re.compile(r"\s*[.?!…。？！]+[\"'»”’)]*$")
_WORD = re.compile(r"[A-Za-zÀ-ÿ]+")
_NAME = re.compile(r"\b[A-Z][a-z]{1,15}\b")
_NUMBER = re.compile(r"(?<![\d.,])\d{1,6}(?![\d.,]\d)")
_DROPPED = frozenset(("So", "Sk", "Co", "Cs"))  # symbols (emoji), modifier symbols, private use, surrogates
_JOINERS = frozenset(("\u200d", "\ufe0e", "\ufe0f"))


def _pictograph(ch: str) -> bool:
    return unicodedata.category(ch) in _DROPPED or ch in _JOINERS or 0x1F3FB <= ord(ch) <= 0x1F3FF


class _Unpictured(dict):
    """A lazily filled `str.translate` table that drops pictographs (`_pictograph`) and keeps every other
    character: a file's preparation spent a third of its time in a Python loop over its characters."""

    def __missing__(self, cp: int) -> int | None:
        value = None if _pictograph(chr(cp)) else cp
        self[cp] = value
        return value


_UNPICTURED = _Unpictured()


_LOWER_PAIR = re.compile("[a-zß-öø-ÿ]{2}")  # two lower-case letters of _WORD's: a word of two letters or more


def all_capitals(text: str) -> bool:
    """Whether text is written in capitals: at least two words of letters, and no lower-case letter in them."""
    if _LOWER_PAIR.search(text):  # the usual sentence, told at C speed (a file's preparation reads every line)
        return False
    words = [w for w in _WORD.findall(text) if len(w) > 1]
    return len(words) >= 2 and all(w.isupper() for w in words)


def sentence_case(text: str) -> str:
    """Capitals as a sentence is written: lower case, the first letter and the pronoun "I" capital."""
    lowered = re.sub(r"\bi\b", "I", text.lower())
    match = re.search(r"[^\W_]", lowered)  # the first letter or digit: a sentence that starts with a number stays
    if match is None or not match.group().isalpha():
        return lowered
    return lowered[: match.start()] + match.group().upper() + lowered[match.end():]


def read_as(text: str) -> str:
    """The text a translation model reads for typed `text`: pictographs left out, capitals in sentence case."""
    kept = text.translate(_UNPICTURED)
    if kept != text:  # "you 😀!" read as "you!", not "you !"
        kept = re.sub(r"\s+([.,!?;:…])", r"\1", re.sub(r"\s{2,}", " ", kept))
    kept = kept.strip()
    if not kept:
        return text.strip()
    return sentence_case(kept) if all_capitals(kept) else kept


# An English sentence that starts with one of these asks a question.
QUESTION_WORDS = frozenset((
    "how what where when why who whom whose which is are am was were do does did can could will would shall should "
    "may might must have has had isn't aren't wasn't weren't doesn't didn't can't couldn't won't wouldn't "
    "shouldn't haven't hasn't").split())
_ENDED = re.compile(r"[.?!…。？！\"'»”’)]\s*$")


def with_final_punctuation(text: str, language: str) -> str:
    """An English sentence typed without its final mark with the one it had: "?" after a question word, else
    ".". The models read sentences that end in one best (benchmarks/robustness.py); other languages as typed."""
    words = text.split()
    if language != "en" or not words or _ENDED.search(text) or not re.search(r"[^\W\d_]", text):
        return text
    return text.rstrip() + ("?" if words[0].lower() in QUESTION_WORDS else ".")


def read_input(text: str, language: str, finish: bool = True) -> str:
    """What a translation model reads for typed input: `read_as`, then (`finish`: for a model whose sentences
    end in a mark) the final mark a sentence lacks."""
    read = read_as(text)
    return with_final_punctuation(read, language) if finish else read


def ends_sentences(sources: Sequence[str]) -> bool:
    """Whether most of a model's example sources end in a final mark: then typed input gets one too."""
    return bool(sources) and 2 * sum(bool(_ENDED.search(s)) for s in sources) >= len(sources)


@lru_cache(maxsize=1)
def training_names() -> tuple[str, ...]:
    """First names to substitute while training (data/names.txt, one a line)."""
    lines = NAMES_FILE.read_text(encoding="utf-8").splitlines()
    return tuple(n.strip() for n in lines if n.strip() and not n.startswith("#"))


def replace_word(text: str, old: str, new: str) -> str:
    """`text` with the whole word `old` (not a part of a longer word) replaced by `new`."""
    return re.sub(rf"(?<![^\W\d_]){re.escape(old)}(?![^\W\d_])", lambda _: new, text)


def names_in(source: str) -> list[str]:
    """Capitalised words of a source sentence, in order, each once: the candidates for a person's name."""
    return list(dict.fromkeys(_NAME.findall(source)))


def target_name(name: str, target: str, chinese: bool = False) -> str:
    """How `name` is written in `target` if it is there: itself, or its usual Chinese transcription ("" if not)."""
    if chinese:
        if name in target:
            return name
        form = CHINESE_NAMES.get(name, "")
        return form if form and form in target else ""
    return name if re.search(rf"(?<![^\W\d_]){re.escape(name)}(?![^\W\d_])", target) else ""


def without_final_punctuation(text: str) -> str:
    """The sentence with its final full stop, question or exclamation mark left off (unchanged if that is all)."""
    return _FINAL.sub("", text) or text


@dataclass(frozen=True)
class Variation:
    """Typed variants of a training pair (source, target), each drawn from the trainer's generator.

    `rate` is the chance of each variation where it applies: the final punctuation left off, the source
    lower-cased; a name or number (rarer in the data, and copying needs many examples) at twice the rate."""

    rate: float
    chinese_target: bool = False
    names: tuple[str, ...] = field(default_factory=training_names)

    def __call__(self, source: str, target: str, rng: random.Random) -> tuple[str, str]:
        if not self.rate:
            return source, target
        source, target = self._name(source, target, rng)
        source, target = self._number(source, target, rng)
        if rng.random() < self.rate:
            source = without_final_punctuation(source)
        if rng.random() < self.rate:
            source = source.lower()
        return source, target

    def _name(self, source: str, target: str, rng: random.Random) -> tuple[str, str]:
        found = [n for n in names_in(source) if target_name(n, target, self.chinese_target)]
        if not found:
            return self._pronoun(source, target, rng)
        if rng.random() >= min(1.0, 2 * self.rate):
            return source, target
        old = found[rng.randrange(len(found))]
        new = self.names[rng.randrange(len(self.names))]
        written = target_name(old, target, self.chinese_target)
        if self.chinese_target:  # Chinese text has no spaces: a name there has no word boundary to look for
            return replace_word(source, old, new), target.replace(written, new)
        return replace_word(source, old, new), replace_word(target, written, new)

    def _pronoun(self, source: str, target: str, rng: random.Random) -> tuple[str, str]:
        """"He is tall." / "Il est grand." as "Sarah is tall." / "Sarah est grand.": more sentences to copy a name in."""
        first, _, rest = source.partition(" ")
        forms = PRONOUNS.get(first)
        if not rest or forms is None or rng.random() >= self.rate:
            return source, target
        name = self.names[rng.randrange(len(self.names))]
        for form in forms[1 if self.chinese_target else 0]:
            if self.chinese_target and target.startswith(form):
                return f"{name} {rest}", name + target[len(form):]
            if not self.chinese_target and target.startswith(form + " "):
                return f"{name} {rest}", name + target[len(form):]
        return source, target

    def _number(self, source: str, target: str, rng: random.Random) -> tuple[str, str]:
        shared = [n for n in dict.fromkeys(numbers_in(source)) if re.search(rf"(?<!\d){n}(?!\d)", target)]
        if not shared:
            return self._number_word(source, target, rng)
        if rng.random() >= min(1.0, 2 * self.rate):
            return source, target
        old = shared[rng.randrange(len(shared))]
        new = _random_number(rng)
        pattern = rf"(?<!\d){old}(?!\d)"
        return re.sub(pattern, new, source), re.sub(pattern, new, target)

    def _number_word(self, source: str, target: str, rng: random.Random) -> tuple[str, str]:
        """"I have two cats." / "J'ai deux chats." as "I have 37 cats." / "J'ai 37 chats.": digits to copy."""
        words = [w for w in NUMBER_WORDS if len(re.findall(rf"\b{w}\b", source, re.IGNORECASE)) == 1]
        if not words or rng.random() >= min(1.0, 2 * self.rate):
            return source, target
        word = words[rng.randrange(len(words))]
        french, chinese = NUMBER_WORDS[word]
        new = _random_number(rng)
        if self.chinese_target:
            if target.count(chinese) != 1:
                return source, target
            changed = target.replace(chinese, new)
        else:
            if len(re.findall(rf"(?<![^\W\d_]){french}(?![^\W\d_])", target, re.IGNORECASE)) != 1:
                return source, target
            changed = re.sub(rf"(?<![^\W\d_]){french}(?![^\W\d_])", new, target, flags=re.IGNORECASE)
        return re.sub(rf"\b{word}\b", new, source, flags=re.IGNORECASE), changed


def _random_number(rng: random.Random) -> str:
    digits = rng.randint(1, 4)
    return str(rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10 ** digits - 1))


def numbers_in(text: str) -> list[str]:
    """The runs of digits in a text that stand alone (not parts of 1.5 or 1,000)."""
    return _NUMBER.findall(text)
