"""A saved model's data to train further on: a TSV file checked against the vocabularies the model has.

A model's vocabulary cannot grow without changing its shape, so a file must mostly use words it knows.
Below the job code (explorer/jobs/further.py) because the job's own process builds the data too.
"""

from __future__ import annotations

from typing import Callable, Sequence

from explorer import settings
from explorer.engine.bundle import ModelBundle
from explorer.errors import ExplorerError
from explorer.limits import LIMITS, Limits
from explorer.data.robust import Variation
from explorer.data.subwords import is_chinese, prepare_source, prepare_text
from explorer.training.data import Pair, PairData, PairEncoder, spelt_afresh
from explorer.data.vocab import UNK

MAX_UNKNOWN = 0.2  # a file with more of its tokens outside the model's vocabularies is refused


def known_token(token: str, vocab) -> bool:
    """A token the vocabulary has learnt: not <unk> and not a byte piece (a subword model spells text it has
    never seen, e.g. another script, byte by byte)."""
    return token in vocab and token != UNK and not (token.startswith("<0x") and token.endswith(">"))


def vocabulary_coverage(bundle: ModelBundle, pairs: list[tuple[str, str]]) -> tuple[float, float]:
    """The share of source and of target tokens in `pairs` that the model's vocabularies know."""
    known, total = [0, 0], [0, 0]
    for source, target in pairs:
        for side, (tokens, vocab) in enumerate(((bundle.tokenize_source(source), bundle.src_vocab),
                                               (bundle.tokenize_target(target), bundle.tgt_vocab))):
            total[side] += len(tokens)
            known[side] += sum(1 for t in tokens if known_token(t, vocab))
    return tuple(k / t if t else 0.0 for k, t in zip(known, total))  # type: ignore[return-value]


def check_file(bundle: ModelBundle, tsv: bytes | None, limits: Limits) -> None:
    """ExplorerError unless a file to train translation model `bundle` further on is given, within the limit."""
    if tsv is None:
        raise ExplorerError(f"{bundle.name} is a translation model: upload a TSV file of sentence pairs to train "
                            "it on (the file it was trained on, or a new one in the same languages)")
    if len(tsv) > limits.max_tsv_bytes:
        raise ExplorerError(f"the file is {len(tsv):,} bytes; the limit is {limits.max_tsv_bytes:,}")


def pair_data(bundle: ModelBundle, tsv: bytes | None, seed: int, limits: Limits = LIMITS,
              extra: Sequence[tuple[str, str]] = (), augment: float | None = None,
              note: Callable[[str], None] | None = None, name: str = "upload"
              ) -> tuple[PairData, list[tuple[str, str]]]:
    """A translation model's data to train further on: a TSV (the one it was trained on, or a new one) split
    as training splits it, and the held-out pairs as text. ExplorerError with the reason when it does not fit.
    `extra` pairs join the training split only; `augment` (default: the rate the model was trained with)
    draws typed variants of the training pairs (data/robust.Variation). `note` hears, one line each, which
    lines of the file `name` were skipped and how many pairs are too long for the model, as a new run's."""
    check_file(bundle, tsv, limits)
    from explorer.data.corpus import load_tsv_bytes, split_pairs
    corpus = load_tsv_bytes(tsv, name=name, max_bytes=limits.max_tsv_bytes)
    say = note or (lambda _text: None)
    if corpus.skipped:
        say(corpus.skipped_note())
    fraction = float(bundle.training.get("valid_fraction", settings.setting("valid_fraction").toy))
    train_items, valid_items = split_pairs(list(enumerate(corpus.pairs)), fraction, seed)
    max_src, max_tgt = bundle.cfg.max_src_len, bundle.cfg.max_tgt_len - 1

    def usable(items) -> list[tuple[str, str]]:  # lines over 10,000 bytes never got here (corpus.py)
        return [(s, t) for _, (s, t) in items
                if 0 < len(bundle.tokenize_source(s)) <= max_src and 0 < len(bundle.tokenize_target(t)) <= max_tgt]
    train_text = usable(train_items)
    valid_text = usable(valid_items)
    left_out = len(corpus.pairs) - len(train_text) - len(valid_text)
    if left_out:
        say(f"{left_out:,} of {len(corpus.pairs):,} pairs left out: empty, or longer than {bundle.name} reads "
            f"({max_src} pieces a source, {max_tgt} a target)")
    train_text += usable(enumerate(extra))
    if not train_text:
        raise ExplorerError(f"no pair in the file fits {bundle.name} (sentences of at most {max_src} tokens)")
    src_known, tgt_known = vocabulary_coverage(bundle, train_text)
    if min(src_known, tgt_known) < 1 - MAX_UNKNOWN:
        raise ExplorerError(f"this file's vocabulary does not fit {bundle.name}: it knows {100 * src_known:.0f}% of the "
                            f"source words and {100 * tgt_known:.0f}% of the target words (at least "
                            f"{100 * (1 - MAX_UNKNOWN):.0f}% needed; a model's vocabulary cannot grow). "
                            "Train a new model on this file instead")

    encode = PairEncoder(bundle.src_vocab, bundle.tgt_vocab)

    def to_pair(s: str, t: str) -> Pair:
        return encode(bundle.tokenize_source(s), bundle.tokenize_target(t))
    probe = train_text[0][0]
    usual = [to_pair(s, t) for s, t in train_text]
    resample, rate = None, subword_dropout(bundle)
    augment = recorded_rate(bundle, "augment") if augment is None else augment
    if rate or augment:  # a model goes on training as it was trained
        src_lang, tgt_lang = bundle.languages
        prepared = [(prepare_source(s, src_lang), prepare_text(t, tgt_lang)) for s, t in train_text]
        vary = Variation(augment, is_chinese(tgt_lang)) if augment else None
        resample = spelt_afresh(bundle.subwords, prepared, usual, encode, rate, max_src, max_tgt, vary)
    data = PairData(usual, [to_pair(s, t) for s, t in valid_text], probe, resample, train_text)
    return data, valid_text


def subword_dropout(bundle: ModelBundle) -> float:
    """The subword dropout a model was trained with (its header's training record), 0 if none or not a rate."""
    return recorded_rate(bundle, "subword_dropout")


def recorded_rate(bundle: ModelBundle, key: str) -> float:
    """A rate in the model's training record, 0 if none or not a rate in [0, 1)."""
    rate = bundle.training.get(key, 0.0)
    return float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 <= rate < 1 else 0.0
