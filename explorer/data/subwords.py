"""Subword pieces for translation models: a byte-fallback BPE learnt with Hugging Face `tokenizers`.

Why a subword vocabulary: a word-level model turns every rare word into `<unk>` (the article's own
sentence lost "variable", "input" and "lengths"); pieces spell any word out of frequent parts, and
byte fallback spells any character the vocabulary lacks as its UTF-8 bytes, so ordinary input never
becomes `<unk>`. Why `tokenizers` BPE over SentencePiece (both measured on the eng-fra and eng-cmn
pairs at the same vocabulary size, see README): about 17% fewer pieces per sentence (6.7 against 8.1
for English at 8,000), so shorter decoder loops and heatmaps, and the tokenizer is a JSON document
that sits in the checkpoint's header as text; loading it runs no code.

A piece that begins a word carries the metaspace mark "▁" (U+2581): `word_starts` reads it, so the
pages can show word boundaries and sum attention over a word's pieces. Text is cleaned the same way
for training and for users (`clean_text`), and Chinese targets are converted to simplified script with
OpenCC (`to_simplified`), because the Tatoeba data mixes both scripts.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any, Iterable, Sequence

from explorer.errors import ExplorerError
from explorer.data.vocab import SPECIALS
from explorer.data import tokenizer_worker
from explorer.data.tokenizer_worker import library_call
from explorer.outside_text import valid_text

MARK = "\u2581"  # "▁": the piece starts a word
BYTE_PIECES: tuple[str, ...] = tuple(f"<0x{i:02X}>" for i in range(256))
MAX_TOKENIZER_CHARS = 4_000_000  # a tokenizer's JSON in a checkpoint; 8,000 pieces take ~0.3 MB
MAX_PIECE_CHARS = 100  # a learnt piece (a checkpoint's vocabulary entries are at most 200 characters)
_KEPT_SPACES = frozenset("\u00a0\u202f")  # French typography's no-break spaces stay as written


class _CleanTable(dict):
    """A lazily filled `str.translate` table: whitespace (but the kept spaces) to a space, control and invisible
    format characters dropped, the rest kept."""

    def __missing__(self, cp: int) -> str | int | None:
        ch = chr(cp)
        value: str | int | None = cp
        if ch.isspace() and ch not in _KEPT_SPACES:
            value = " "
        elif unicodedata.category(ch) in ("Cc", "Cf"):
            value = None
        self[cp] = value
        return value


_CLEAN = _CleanTable()
_SPACES = re.compile(" {2,}")


def clean_text(text: str) -> str:
    """NFC text with control and invisible format characters dropped and other whitespace runs made one
    space, so the same sentence typed or copied differently gives the same pieces. (A table and a regex, not a
    loop over characters: a 20 MB file's preparation spent a third of its time here.)"""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", text).translate(_CLEAN)).strip()


@lru_cache(maxsize=1)
def _t2s():
    import opencc
    return opencc.OpenCC("t2s")


def to_simplified(text: str) -> str:
    """Traditional Chinese characters as simplified ones (OpenCC's t2s table); other text unchanged."""
    return _t2s().convert(text)


@lru_cache(maxsize=64)
def is_chinese(language: str) -> bool:
    code = language.lower().replace("_", "-")
    return code in ("zh", "cmn") or code.startswith(("zh-", "cmn-"))


def prepare_text(text: str, language: str) -> str:
    """A sentence as the model's tokenizer sees it: cleaned, and simplified script for Chinese."""
    text = clean_text(text)
    return to_simplified(text) if is_chinese(language) else text


def prepare_source(text: str, language: str) -> str:
    """A source sentence as the model reads it: `prepare_text` of what `robust.read_as` keeps of the typing."""
    from explorer.data.robust import read_as
    return prepare_text(read_as(text), language)



def _pre_tokenizer(scheme: str) -> dict:
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Metaspace", "replacement": MARK, "prepend_scheme": scheme, "split": True},
        {"type": "Punctuation", "behavior": "Isolated"}]}


def _decoder(scheme: str) -> dict:
    return {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"}, {"type": "Metaspace", "replacement": MARK, "prepend_scheme": scheme, "split": True}]}


_BPE_SETTINGS = {"type": "BPE", "dropout": None, "unk_token": SPECIALS[3], "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": True, "ignore_merges": False}
_FIXED = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
          "post_processor": None}
MAX_PIECES = 500_000


def check_definition(spec: object) -> None:
    """ExplorerError unless a tokenizer's JSON is one our own training writes (`SubwordTokenizer.train`): no
    normalizer, the Metaspace + Punctuation pre-tokenizer, the ByteFallback + Metaspace decoder, and a
    byte-fallback BPE of bounded size. Why a whitelist: the Rust library runs whatever a file defines, and a
    chain of Replace normalizers or a backtracking Split pattern allocates without bound or panics, which
    takes the whole server process down with it."""
    def refuse(what: str) -> None:
        raise ExplorerError(f"the subword tokenizer is not one this program trains: {what}")
    if not isinstance(spec, dict) or set(spec) != set(_FIXED) | {"pre_tokenizer", "decoder", "model"}:
        refuse("unexpected or missing parts")
    for key, value in _FIXED.items():
        if spec[key] != value:
            refuse(f"its {key.replace('_', ' ')} must be {json.dumps(value)}")
    if spec["pre_tokenizer"] not in (_pre_tokenizer("always"), _pre_tokenizer("never")):
        refuse("its pre-tokenizer must be Metaspace then Punctuation")
    scheme = spec["pre_tokenizer"]["pretokenizers"][0]["prepend_scheme"]
    if spec["decoder"] != _decoder(scheme):
        refuse("its decoder must be ByteFallback then Metaspace")
    model = spec["model"]
    if not isinstance(model, dict) or set(model) != set(_BPE_SETTINGS) | {"vocab", "merges"}:
        refuse("its model must be a BPE")
    if any(model[key] != value for key, value in _BPE_SETTINGS.items()):
        refuse("its model must be a byte-fallback BPE with <unk> and no dropout")
    vocab, merges = model["vocab"], model["merges"]
    if not isinstance(vocab, dict) or len(vocab) > MAX_PIECES or not all(
            isinstance(piece, str) and isinstance(i, int) and not isinstance(i, bool) for piece, i in vocab.items()):
        refuse(f"its vocabulary must map at most {MAX_PIECES:,} pieces to ids")
    if not isinstance(merges, list) or len(merges) > len(vocab) or not all(
            (isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m))
            or (isinstance(m, str) and m.count(" ") == 1) for m in merges):
        refuse("its merges must be pairs of pieces, no more than the pieces")


_ISOLATED = [False]


def isolate_untrusted(on: bool = True) -> None:
    """Run every tokenizer this process did not write (not trusted: an uploaded checkpoint's, a training job's) in
    tokenizer_worker's process, where a library abort ends that process and not this one. The app's server turns
    it on; the CLI and training processes tokenize in their own process."""
    _ISOLATED[0] = on


# What a tokenizer is trained on, per language (`training_sample`): BPE training's time grows with the text and
# most with its distinct words; the shipped corpora (eng-fra: 3.4 M and 4.0 M characters) are under both bounds.
MAX_TRAINING_CHARS = 5_000_000
MAX_DISTINCT_WORD_CHARS = 1_000_000
_BLOCK = 16  # consecutive sentences drawn together by training_sample


def training_sample(texts: Sequence[str], seed: int = 0, max_chars: int = MAX_TRAINING_CHARS,
                    max_word_chars: int = MAX_DISTINCT_WORD_CHARS, chunk_size: int = 1000) -> Sequence[str]:
    """The sentences to learn pieces from: all of them while they hold at most `max_chars` characters and their
    distinct (space-separated) words at most `max_word_chars`; else a seeded random sample of whole sentences (in
    blocks of 16 consecutive ones), in their order, within both bounds. Why: a tokenizer's training then takes bounded time whatever the file's size,
    as SentencePiece's `input_sentence_size` does; a sample of this size learns the frequent pieces all the same."""
    if sum(map(len, texts)) <= max_chars and sum(map(len, set(chain.from_iterable(map(str.split, texts))))) \
            <= max_word_chars:
        return texts
    blocks = list(range(0, len(texts), _BLOCK))  # a random order of blocks: random.shuffle of every line took seconds
    random.Random(seed).shuffle(blocks)
    order = [i for start in blocks for i in range(start, min(start + _BLOCK, len(texts)))]
    seen: set[str] = set()
    chars = word_chars = 0
    kept: list[int] = []
    for start in range(0, len(order), chunk_size):  # a chunk's words at C speed; line by line only in the last
        chunk = order[start: start + chunk_size]
        new = set(chain.from_iterable(texts[i].split() for i in chunk)) - seen
        if chars + sum(len(texts[i]) for i in chunk) > max_chars or word_chars + sum(map(len, new)) > max_word_chars:
            for i in chunk:
                words = set(texts[i].split()) - seen
                chars += len(texts[i])
                word_chars += sum(map(len, words))
                if chars > max_chars or word_chars > max_word_chars:
                    return [texts[j] for j in sorted(kept)]
                seen |= words
                kept.append(i)
        seen |= new
        chars += sum(len(texts[i]) for i in chunk)
        word_chars += sum(map(len, new))
        kept.extend(chunk)
    return [texts[i] for i in sorted(kept)]


@dataclass(frozen=True)
class SubwordTokenizer:
    """A trained BPE: `tokenize` text to pieces, `detokenize` pieces to text; its vocabulary's ids are the
    model's ids (the four specials first, then the 256 byte pieces, then the learnt pieces)."""

    json_text: str
    trusted: bool = field(default=False, compare=False)  # written by this program (trained here, or shipped)
    _tok: object = field(init=False, repr=False, compare=False)
    vocab: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _ranks: dict | None = field(init=False, repr=False, compare=False, default=None)  # merges, for `sample`
    _known: frozenset = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        from tokenizers import Tokenizer
        if not isinstance(self.json_text, str) or len(self.json_text) > MAX_TOKENIZER_CHARS:
            raise ExplorerError("the subword tokenizer is missing or too large")
        try:
            spec = json.loads(self.json_text)
        except ValueError as exc:
            raise ExplorerError(f"the subword tokenizer cannot be read ({str(exc).splitlines()[0][:120]})") from None
        check_definition(spec)
        tok = library_call("read", Tokenizer.from_str, self.json_text)
        size = tok.get_vocab_size(with_added_tokens=False)
        by_id = {i: t for t, i in tok.get_vocab(with_added_tokens=False).items()}
        vocab = tuple(by_id.get(i, "") for i in range(size))
        if vocab[: len(SPECIALS)] != SPECIALS or vocab[len(SPECIALS): len(SPECIALS) + 256] != BYTE_PIECES:
            raise ExplorerError("the subword tokenizer must list <pad> <sos> <eos> <unk> and the 256 byte pieces first")
        if "" in vocab:
            raise ExplorerError("the subword tokenizer's ids are not contiguous")
        object.__setattr__(self, "_tok", tok)
        object.__setattr__(self, "vocab", vocab)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, min_frequency: int = 2,
              spaced: bool = True) -> "SubwordTokenizer":
        """Learn at most `vocab_size` pieces (specials and bytes included) from cleaned sentences.

        `spaced=False` for a language written without spaces (Chinese): no word mark is put before the
        sentence, since its first character does not start a word any more than the others do (with one,
        a Chinese model spent its first step on a lone "▁" piece)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        if vocab_size < len(SPECIALS) + 256 + 1:
            raise ExplorerError(f"a subword vocabulary needs more than {len(SPECIALS) + 256} pieces")
        tok = Tokenizer(models.BPE(unk_token=SPECIALS[3], byte_fallback=True))
        # Words at spaces, then punctuation as pieces of its own ("car." -> "▁car" "."), so no piece
        # spans a word and its punctuation and a word's attention is not shared with a full stop.
        scheme = "always" if spaced else "never"
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(replacement=MARK, prepend_scheme=scheme),
                                                     pre_tokenizers.Punctuation("isolated")])
        tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                         decoders.Metaspace(replacement=MARK, prepend_scheme=scheme)])
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                      special_tokens=list(SPECIALS + BYTE_PIECES), max_token_length=MAX_PIECE_CHARS)
        tok.train_from_iterator(texts, trainer)
        spec = json.loads(tok.to_str())
        # The specials and byte pieces stay in the vocabulary but are not "added tokens": typed text such
        # as "<pad>" or "<0x41>" is then spelt out like any other text instead of becoming that id.
        spec["added_tokens"] = []
        return cls(json.dumps(spec, ensure_ascii=False, separators=(",", ":")), trusted=True)

    def _run(self, op: str, arg: Any) -> Any:
        """`op` of tokenizer_worker's operations on `arg`: in this process, or in the worker where this process
        isolates tokenizers it did not write (isolate_untrusted: the app's server)."""
        if _ISOLATED[0] and not self.trusted:
            return tokenizer_worker.call(self.json_text, op, arg)
        return tokenizer_worker.run(op, self._tok, arg)

    def tokenize(self, text: str) -> list[str]:
        """The pieces of already prepared text (see `prepare_text`)."""
        return list(self._run("tokens", valid_text(text, "the text")))

    def ids_many(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of `tokenize`'s pieces of each text (the vocabulary's ids are the model's), in one call the
        library spreads over the cores: a file's pairs, without a Python look-up per piece."""
        return self._run("ids", [valid_text(t, "the text") for t in texts])

    def sample(self, text: str, rng: random.Random, rate: float) -> list[str]:
        """The pieces of prepared text with BPE-dropout (Provilkov et al. 2020): at every merge step each
        applicable merge is left out with probability `rate`, so a word comes out as one of its plausible
        spellings in the vocabulary's pieces, not always the same one. `rate` 0 gives `tokenize`'s pieces.

        Why: training on varied spellings of the same words regularises a model trained on a small corpus
        and teaches it the pieces of rare words. Why not `tokenizers`' own BPE dropout: it draws from an
        unseeded generator, and every rank of a distributed run must draw the same batch (distributed.py),
        as a rerun of a seeded recipe must; here the draws come from `rng`. The words come from the
        tokenizer's own pre-tokenizer and the merges from its own model, so only the merge loop is ours.
        """
        if self._ranks is None:
            merges = json.loads(self.json_text)["model"]["merges"]
            pairs = (tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in merges)
            object.__setattr__(self, "_ranks", {pair: rank for rank, pair in enumerate(pairs)})
            object.__setattr__(self, "_known", frozenset(self.vocab))
        known = self._known
        pieces: list[str] = []
        for word in self._run("split", valid_text(text, "the text")):
            for symbol in _merged(list(word), self._ranks, rng, rate):
                pieces.extend([symbol] if symbol in known else [f"<0x{b:02X}>" for b in symbol.encode("utf-8")])
        return pieces

    def detokenize(self, pieces: Sequence[str]) -> str:
        """Readable text for pieces: word marks become spaces, byte pieces become their characters."""
        return self._run("decode", [p for p in pieces if p not in SPECIALS])


def _merged(symbols: list[str], ranks: dict[tuple[str, str], int], rng: random.Random, rate: float) -> list[str]:
    """BPE's merge loop over one word's symbols: apply the best-ranked merge among adjacent pairs (the
    leftmost on a tie), each candidate first left out with probability `rate`; stop when none is left."""
    while len(symbols) > 1:
        best, where = None, -1
        for i in range(len(symbols) - 1):
            rank = ranks.get((symbols[i], symbols[i + 1]))
            if rank is not None and (best is None or rank < best) and not (rate and rng.random() < rate):
                best, where = rank, i
        if best is None:
            break
        symbols[where: where + 2] = [symbols[where] + symbols[where + 1]]
    return symbols


def pieces_text(pieces: Sequence[str]) -> str:
    """The text of consecutive pieces (a word's), byte pieces decoded, word marks dropped: a label that
    needs no tokenizer (the trace carries pieces, not the tokenizer)."""
    out, pending = [], bytearray()
    for piece in pieces:
        if piece in BYTE_PIECES:
            pending.append(int(piece[3:5], 16))
            continue
        if pending:
            out.append(pending.decode("utf-8", errors="replace"))
            pending = bytearray()
        out.append(piece.replace(MARK, ""))
    if pending:
        out.append(pending.decode("utf-8", errors="replace"))
    return "".join(out)


def word_starts(pieces: Sequence[str], chinese: bool = False) -> list[bool]:
    """Whether each piece begins a word: a metaspace mark begins one; in Chinese, where the text has no
    spaces between words, every piece counts as its own word. Punctuation that ends a word ("car" ".") is a
    word of its own, so a word's attention is not shared with a full stop; a lone mark before punctuation (French
    " ?") is that punctuation's space, not a word of its own. Byte pieces continue the word they are in
    (in Chinese a character's first byte begins a word: one character spelt as bytes is one word)."""
    starts = []
    for i, piece in enumerate(pieces):
        following = pieces[i + 1] if i + 1 < len(pieces) else None
        if piece in SPECIALS:
            starts.append(True)
        elif i > 0 and pieces[i - 1] == MARK and _is_punctuation(piece):
            starts.append(False)  # "▁" "?": the space and the mark form one word, shown as "?"
        elif _is_punctuation(piece) and (following is None or following.startswith(MARK) or following in SPECIALS
                                         or _is_punctuation(following)):
            starts.append(True)  # "car" "." is a word and a full stop; "l" "'" "homme" stays one word
        elif piece in BYTE_PIECES:
            lead = int(piece[3:5], 16) & 0xC0 != 0x80
            starts.append(i == 0 or (chinese and lead))
        else:
            starts.append(i == 0 or chinese or piece.startswith(MARK))
    return starts


def _is_punctuation(piece: str) -> bool:
    text = piece.replace(MARK, "")
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def word_groups(pieces: Sequence[str], chinese: bool = False) -> list[list[int]]:
    """The positions of each word's pieces, in order (see `word_starts`)."""
    groups: list[list[int]] = []
    for i, start in enumerate(word_starts(pieces, chinese)):
        if start or not groups:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups

