"""BPE-dropout (`SubwordTokenizer.sample`, `--subword-dropout`): seeded, in the vocabulary, the same text, and
exactly the tokenizer's own pieces at rate 0."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from explorer.data.corpus import load_tsv
from explorer.data.subwords import BYTE_PIECES, SubwordTokenizer, prepare_text
from explorer.data.vocab import UNK
from explorer.training.further_data import pair_data
from explorer.training.recipes import translation_setup

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GLOSSARY = FIXTURES.parents[1] / "data" / "glossary.en-fr.tsv"
PAIRS = load_tsv(FIXTURES / "eng-fra-good.tsv").pairs + load_tsv(GLOSSARY).pairs
ODD = ["Zwölf Boxkämpfer jagen Viktor quer über den Deich.", "I love 🍕 and 😀!", "我有一辆红色的车。",
       "l'homme, 1.5 café ?", "a\u202f?", "x", "", "Ελληνικά κείμενα"]
CHINESE = ["我有一辆红色的车。", "他买了一座大房子。", "我们有两辆车。", "房子大吗？", "車是紅色的。"] * 3


@pytest.fixture(scope="module", params=["en", "fr", "zh"])
def side(request) -> tuple[SubwordTokenizer, list[str]]:
    if request.param == "zh":
        texts = [prepare_text(t, "zh") for t in CHINESE]
        return SubwordTokenizer.train(texts, 300, spaced=False), texts + ODD
    texts = [prepare_text(p[0 if request.param == "en" else 1], request.param) for p in PAIRS]
    return SubwordTokenizer.train(texts, 500, min_frequency=1), texts + ODD


def test_rate_zero_is_the_tokenizers_own_pieces(side) -> None:
    tok, texts = side
    rng = random.Random(0)
    assert [tok.sample(t, rng, 0.0) for t in texts] == [tok.tokenize(t) for t in texts]


def test_dropped_merges_spell_the_same_text_in_known_pieces_and_longer(side) -> None:
    tok, texts = side
    rng = random.Random(1)
    usual = sampled = 0
    for text in texts:
        pieces = tok.sample(text, rng, 0.3)
        assert UNK not in pieces and all(p in tok.vocab for p in pieces)
        assert tok.detokenize(pieces) == tok.detokenize(tok.tokenize(text))
        usual, sampled = usual + len(tok.tokenize(text)), sampled + len(pieces)
    assert sampled > 1.05 * usual


def test_the_spellings_come_from_the_generator_given(side) -> None:
    tok, texts = side
    draws = lambda seed: [tok.sample(t, random.Random(seed), 0.3) for t in texts]  # noqa: E731
    assert draws(5) == draws(5)
    assert draws(5) != draws(6)


def test_every_merge_dropped_leaves_single_characters(side) -> None:
    tok, texts = side
    pieces = [p for t in texts for p in tok.sample(t, random.Random(0), 0.999999)]
    assert pieces and all(len(p) == 1 or p in BYTE_PIECES for p in pieces)


def _setup(rate: float):
    return translation_setup(FIXTURES / "eng-fra-good.tsv", "pieces", {"embed": 8, "hidden": 16, "attn_dim": 8},
                             src_lang="en", tgt_lang="fr", min_freq=1, valid_fraction=0.2, subword_dropout=rate,
                             augment=0.0)


def test_training_batches_are_spelt_afresh_alike_on_every_rank() -> None:
    bundle, data, _ = _setup(0.2)
    _, twin, _ = _setup(0.2)
    rank0, rank1 = random.Random(3), random.Random(3)
    batches = [data.batch(rank0, 8) for _ in range(40)]
    assert batches == [twin.batch(rank1, 8) for _ in range(40)]
    pieces = lambda p: (tuple(bundle.src_vocab.decode(p.src)), tuple(bundle.tgt_vocab.decode(p.tgt)))  # noqa: E731
    usual = {pieces(p) for p in data.train_pairs}
    drawn = [pieces(p) for b in batches for p in b]
    assert sum(d not in usual for d in drawn) > len(drawn) // 10
    text = lambda sub, pieces: sub.detokenize(pieces)  # noqa: E731
    usual_text = {(text(bundle.subwords[0], s), text(bundle.subwords[1], t)) for s, t in usual}
    assert all((text(bundle.subwords[0], s), text(bundle.subwords[1], t)) in usual_text for s, t in drawn)


def test_validation_keeps_the_usual_pieces() -> None:
    _, plain, _ = _setup(0.0)
    _, dropped, _ = _setup(0.2)
    assert dropped.validation() == plain.validation()
    assert dropped.train_pairs == plain.train_pairs
    rng_a, rng_b = random.Random(4), random.Random(4)
    assert [plain.batch(rng_a, 8) for _ in range(5)] != [dropped.batch(rng_b, 8) for _ in range(5)]


def _drawn(data, seed: int) -> list:
    rng = random.Random(seed)
    return [p for _ in range(20) for p in data.batch(rng, 4)]


@pytest.mark.parametrize("recorded, spelt_afresh", [(0.2, True), (0.0, False), ("0.2", False), (-1, False),
                                                    (1.0, False), (float("nan"), False), (True, False)])
def test_training_further_keeps_the_models_own_subword_dropout(recorded, spelt_afresh) -> None:
    bundle, _, _ = _setup(0.0)
    bundle.training = {**bundle.training, "subword_dropout": recorded}
    data, _ = pair_data(bundle, (FIXTURES / "eng-fra-good.tsv").read_bytes(), seed=0)
    drawn = _drawn(data, 7)
    assert drawn == _drawn(pair_data(bundle, (FIXTURES / "eng-fra-good.tsv").read_bytes(), seed=0)[0], 7)
    afresh = [p for p in drawn if p not in data.train_pairs]
    assert bool(afresh) == spelt_afresh
