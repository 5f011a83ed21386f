"""Copying through attention: a number or a name the model cannot write is put into its output where attention
read it, the unknown-word replacement of Luong et al. (2015) and Jean et al. (2015).

The decoding stays the model's: a trace keeps the tokens the model chose and its α. Only the output text
changes, and every change is listed with the steps whose attention peaked on the input word, so a page can show
what was copied, where and what the model had written there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.data.subwords import MARK, is_chinese, prepare_text
from explorer.data.vocab import EOS, PAD, PAD_ID, SOS, SOS_ID
from explorer.engine.bundle import ModelBundle
from explorer.record import Trace

# "8:30", "3.50", "1,000", "12/25", "555-0199" are copied whole; "$5", "50%", "1970s", "17th", "10-minute":
# their digits (the rest is translated)
_NUMBER = re.compile(r"[^\w\s]*(\d{1,9}(?:[:.,/-]\d{1,4})*)\D*")
_NAME = re.compile(r"([A-Z][a-z]{1,20})(?:'s)?")  # "Sarah's": the name is copied, its "'s" translated


@dataclass(frozen=True)
class Copyable:
    """An input word the model may not write itself: its source positions, its text and why."""

    positions: tuple[int, ...]
    text: str
    kind: str  # "number" or "name"


@dataclass(frozen=True)
class Copy:
    """One copy: the input word, the output steps that attended to it, and what the model wrote there.
    `where`: "peak" (α peaked on the word at those steps), "most" (no step's α peaked on it: the word the step
    attending to it most wrote) or "after" (inserted after that word: the model left the number out)."""

    source: Copyable
    steps: tuple[int, ...]
    wrote: str
    where: str = "peak"

    @property
    def inserted(self) -> bool:
        return self.where == "after"


def _word_text(tokens: Sequence[str]) -> str:
    return "".join(tokens).replace(MARK, "")


# Capitalised words that are not names, which a model may have no single piece for: it translates them.
_NOT_NAMES = frozenset(("January February March April May June July August September October November December "
                        "Monday Tuesday Wednesday Thursday Friday Saturday Sunday").split())


def _known(bundle: ModelBundle, word: str) -> bool:
    """A word the model translates: one it has a piece for, as written or in lower case (a sentence's first
    word), or a month or a day."""
    return word in _NOT_NAMES or len(_pieces(bundle, word)) == 1 or len(_pieces(bundle, word.lower())) == 1


def _pieces(bundle: ModelBundle, word: str) -> list[str]:
    """The word alone in the source tokenizer's pieces (not as typed input, which gains a final mark)."""
    return bundle.subwords[0].tokenize(prepare_text(word, bundle.languages[0]))


def copyable(bundle: ModelBundle, source_tokens: Sequence[str]) -> list[Copyable]:
    """The input words to copy: every run of digits, and every capitalised word the model has no piece for
    (the models have one for the names and words their data repeats: "Tom", "Paris", "Monday")."""
    if not bundle.uses_pieces:
        return []
    found = []
    for group in bundle.source_words(source_tokens):
        text = _word_text([source_tokens[i] for i in group])
        if number := _NUMBER.fullmatch(text):
            digits = tuple(i for i in group if any(ch.isdigit() for ch in source_tokens[i]))
            found.append(Copyable(digits, number.group(1), "number"))
        elif (name := _NAME.fullmatch(text)) and len(group) > 1 and not _known(bundle, name.group(1)):
            found.append(Copyable(tuple(group), name.group(1), "name"))
    return found


def copies(bundle: ModelBundle, source_tokens: Sequence[str], output_tokens: Sequence[str],
           weights: np.ndarray) -> list[Copy]:
    """Where each copyable input word goes: the first run of output steps whose α peaks on it and that write
    what the model made of it (a number in digits or words; for a name, a capitalised word, or in Chinese its
    Latin letters or else at most three characters), unless the model wrote the word itself there."""
    words = copyable(bundle, source_tokens)
    steps = [t for t, tok in enumerate(output_tokens) if tok not in (EOS, PAD, SOS)]
    if not words or not steps or weights.size == 0:
        return []
    peak = np.asarray(weights)[: len(output_tokens)].argmax(axis=1)
    chinese = is_chinese(bundle.languages[1])
    group_of = {}
    for group in bundle.target_words(output_tokens):
        for i in group:
            group_of[i] = group
    taken: set[int] = set()
    found = []
    written = set(re.findall(r"\d+", _word_text(output_tokens)))
    for word in words:
        if word.kind == "number" and set(re.findall(r"\d+", word.text)) <= written:
            continue  # the model wrote its digits itself ("6h30" for 6:30)
        fits = _numeral if word.kind == "number" else (_latin if chinese else _capitalised)
        attended = [t for t in steps if int(peak[t]) in word.positions and t not in taken]
        if word.kind == "number":  # only where the model wrote a number: "1", "5" of 1500, not "dollars"
            attended = [t for t in attended if fits(output_tokens[t])]
        run = _first_run(attended)
        if not run and word.kind == "number":
            if (placed := _placed(word, weights, output_tokens, steps, taken, group_of, chinese)) is not None:
                taken.update(placed.steps)
                found.append(placed)
            continue
        if not run:
            continue
        if word.kind == "number":  # the digits around it belong to the number the model wrote ("3", "0")
            run = _grown(run, [fits(t) for t in output_tokens])
        if not chinese:
            run = sorted({i for t in run for i in group_of.get(t, [t]) if output_tokens[i] not in (EOS, PAD)})
        if word.kind == "name":  # the model's try at the name, not the words that follow it ("est", "聪明")
            tried = _first_run([t for t in run if fits(_word_at(output_tokens, group_of, t, chinese))])
            run = tried or (run[:NAME_CHARACTERS] if chinese else [])
        run = [t for t in run if t not in taken]
        wrote = _word_text([output_tokens[t] for t in run]).strip()
        if not run or wrote == word.text:
            continue
        taken.update(run)
        found.append(Copy(word, tuple(run), wrote))
    return found


def _placed(word: Copyable, weights: np.ndarray, output_tokens: Sequence[str], steps: list[int], taken: set[int],
            group_of: dict[int, list[int]], chinese: bool) -> Copy | None:
    """A number no step wrote where its α peaked: over the word the step that attends to it most writes, when
    that word is or starts as a numeral ("dix" for 10, "2hane" for 2003), else just after it, so that no number
    of the input is lost."""
    free = [t for t in steps if t not in taken]
    if not free:
        return None
    on_word = np.asarray(weights)[free][:, list(word.positions)].sum(axis=1)
    t = free[int(on_word.argmax())]
    group = [t] if chinese else [i for i in group_of.get(t, [t]) if output_tokens[i] not in (EOS, PAD)]
    if any(i in taken for i in group):
        return None
    wrote = _word_text([output_tokens[i] for i in group]).strip()
    if _numeral(output_tokens[group[0]]) or _numeral(wrote):
        return Copy(word, tuple(group), wrote, "most")
    return Copy(word, tuple(group), wrote, "after")


NAME_CHARACTERS = 3  # a name written in Chinese characters takes two or three of them
_NUMERALS = frozenset("0123456789一二三四五六七八九十百千万两零")


# Numbers the French models write in words ("trente kilogrammes" for 30): copied over like digits.
_FRENCH_NUMBERS = frozenset(("deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze quinze "
                             "seize vingt trente quarante cinquante soixante cent cents mille").split())


def _numeral(token: str) -> bool:
    text = token.replace(MARK, "").lower()
    return bool(text) and (all(ch in _NUMERALS for ch in text) or text in _FRENCH_NUMBERS
                           or text.endswith("ième") and text[:-4].rstrip("-") in _FRENCH_ORDINAL_STEMS)


_FRENCH_ORDINAL_STEMS = _FRENCH_NUMBERS | {"quatr", "cinqu", "neuv", "onz", "douz", "treiz", "quatorz", "quinz",
                                            "seiz", "trent", "quarant", "cinquant", "soixant", "mill"}


def _latin(token: str) -> bool:
    text = token.replace(MARK, "")
    return bool(text) and all(ch.isascii() and ch.isalpha() or ch in "-'" or "À" <= ch <= "ÿ" for ch in text)


def _capitalised(word: str) -> bool:
    return word[:1].isupper()


def _word_at(tokens: Sequence[str], group_of: dict[int, list[int]], t: int, chinese: bool) -> str:
    """The output word step t writes (its piece in Chinese), for the tests above."""
    return tokens[t] if chinese else _word_text([tokens[i] for i in group_of.get(t, [t])]).strip()


def _grown(run: list[int], fits: list[bool]) -> list[int]:
    first, last = run[0], run[-1]
    while first > 0 and fits[first - 1]:
        first -= 1
    while last + 1 < len(fits) and fits[last + 1]:
        last += 1
    return list(range(first, last + 1))


def _first_run(steps: list[int]) -> list[int]:
    run: list[int] = []
    for t in steps:
        if run and t != run[-1] + 1:
            break
        run.append(t)
    return run


def copied_tokens(output_tokens: Sequence[str], done: Sequence[Copy]) -> list[str]:
    """The output tokens with each copy's steps replaced by the input word (one token, keeping the word start),
    or an inserted copy put as a word of its own after its steps."""
    first = {c.steps[0]: c for c in done if not c.inserted}
    dropped = {t for c in done if not c.inserted for t in c.steps[1:]}
    after = {c.steps[-1]: c for c in done if c.inserted}
    out = []
    for t, token in enumerate(output_tokens):
        if t in first:
            out.append((MARK if token.startswith(MARK) else "") + first[t].source.text)
        elif t not in dropped:
            out.append(token)
        if t in after:  # a word of its own where the words around it start with the mark (not in Chinese)
            out.append((MARK if output_tokens[after[t].steps[0]].startswith(MARK) else "") + after[t].source.text)
    return out


def copied_text(bundle: ModelBundle, output_tokens: Sequence[str], done: Sequence[Copy]) -> str:
    """The output as display text with the copies made."""
    return bundle.detokenize_target([t for t in copied_tokens(output_tokens, done) if t != EOS])


def attention_of(bundle: ModelBundle, sources: Sequence[Sequence[int]],
                 outputs: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Each output's α (T, S) as the model computed it while writing it: one teacher-forced pass over the
    batch (the same steps greedy decoding takes), for outputs decoded without keeping their steps (beam)."""
    import torch

    from explorer.engine.decoding import batch_sources
    from explorer.engine.devices import model_device
    from explorer.engine.teacher_forced import teacher_forced
    if bundle.cfg.attention == "none" or not sources:
        return [np.zeros((len(o), 0), dtype=np.float32) for o in outputs]
    device = model_device(bundle.model)
    src, lengths = batch_sources(sources, device)
    longest = max(len(o) for o in outputs) + 1
    tgt_in = torch.full((len(outputs), longest), PAD_ID, dtype=torch.long)
    for i, o in enumerate(outputs):
        tgt_in[i, : len(o) + 1] = torch.tensor([SOS_ID, *o], dtype=torch.long)
    with torch.inference_mode():
        _, weights = teacher_forced(bundle.model, bundle.model.encode(src, lengths), tgt_in.to(device))
    return [weights[i, : len(o), : len(s)].float().cpu().numpy() for i, (s, o) in enumerate(zip(sources, outputs))]


def copied_outputs(bundle: ModelBundle, sources: Sequence[Sequence[str]], source_ids: Sequence[Sequence[int]],
                   outputs: Sequence[Sequence[int]]) -> list[str]:
    """Display texts of decoded outputs (ids without <eos>) with their copies made: what `translate`, `eval`
    and the robustness benchmark show, as Explore does for one trace."""
    decoded = [bundle.tgt_vocab.decode(o) for o in outputs]
    if not bundle.uses_pieces or not any(copyable(bundle, s) for s in sources):
        return [bundle.detokenize_target(d) for d in decoded]
    weights = attention_of(bundle, source_ids, outputs)
    return [copied_text(bundle, d, copies(bundle, s, d, w)) for s, d, w in zip(sources, decoded, weights)]


def trace_copies(bundle: ModelBundle, tr: Trace, own: bool | None = None) -> list[Copy]:
    """The copies for a trace's output when it is the model's own: greedy, or (`own=True`) a beam candidate
    traced teacher-forced; none for a target a user typed, which is given."""
    if not (not tr.teacher_forced if own is None else own) or not tr.has_attention:
        return []
    return copies(bundle, tr.source_tokens, tr.output_tokens, tr.weights)


def output_text(bundle: ModelBundle, tr: Trace, own: bool | None = None) -> str:
    """The trace's output as display text, with the numbers and names it copies through attention (`own`: as
    trace_copies takes it)."""
    return copied_text(bundle, tr.output_tokens, trace_copies(bundle, tr, own))
