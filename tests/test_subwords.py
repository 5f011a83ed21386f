"""Subword pieces: the tokenizer, its place in the checkpoint, and the words view over pieces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from explorer.checkpoints import checkpoint
from explorer.errors import ExplorerError
from explorer.app.figures import attention as fa
from explorer.training.recipes import default_vocab_size, translation_setup
from explorer.data.subwords import (BYTE_PIECES, MARK, SubwordTokenizer, clean_text, prepare_text, to_simplified,
                               word_groups)
from explorer.engine.trace import trace
from explorer.data.vocab import SPECIALS, UNK

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SENTENCES = ["The red car is here.", "I have a red car.", "He bought a big house.", "We have two cars.",
             "Is the house big?", "The cars are red.", "I am here."] * 3


@pytest.fixture(scope="module")
def tok() -> SubwordTokenizer:
    return SubwordTokenizer.train(SENTENCES, 400)


@pytest.fixture(scope="module")
def fra():
    bundle, data, valid = translation_setup(FIXTURES / "eng-fra-good.tsv", "pieces",
                                            {"embed": 8, "hidden": 16, "attn_dim": 8, "dropout": 0.0},
                                            src_lang="en", tgt_lang="fr", min_freq=1, valid_fraction=0.2)
    bundle.model.eval()
    return bundle, data, valid


def test_the_vocabulary_is_the_specials_then_the_bytes_then_learnt_pieces(tok: SubwordTokenizer) -> None:
    assert tok.vocab[:4] == SPECIALS
    assert tok.vocab[4:260] == BYTE_PIECES
    assert len(tok.vocab) > 260 and len(set(tok.vocab)) == len(tok.vocab)
    assert any(p.startswith(MARK) for p in tok.vocab[260:])


@pytest.mark.parametrize("text", ["The red car is here.", "Zwölf Boxkämpfer jagen Viktor quer über den Deich.",
                                  "I love 🍕 and 😀!", "我有一辆红色的车。", "Ελληνικά κείμενα", "a\u202f?"])
def test_any_ordinary_text_is_spelt_without_unk_and_reads_back(tok: SubwordTokenizer, text: str) -> None:
    pieces = tok.tokenize(text)
    assert UNK not in pieces and all(p in tok.vocab for p in pieces)
    assert tok.detokenize(pieces) == text


def test_ids_many_are_the_model_s_ids_of_tokenize_s_pieces(tok: SubwordTokenizer) -> None:
    """A file's pairs are encoded in one batch (the library's threads); the ids are the model vocabulary's ids of
    tokenize's pieces."""
    from explorer.data.vocab import Vocab
    texts = ["the cat sat.", "", "Unseen wörds, 漢字 and 🙂!", "a  b\tc", "<pad> <0x41>"] * 3
    assert tok.ids_many(texts) == [Vocab(tok.vocab).encode(tok.tokenize(t)) for t in texts]
    with pytest.raises(ExplorerError):
        tok.ids_many(["fine", "\udc80"])


def test_typed_special_names_are_only_text(tok: SubwordTokenizer) -> None:
    pieces = tok.tokenize("<pad> <eos> <0x41>")
    assert not set(pieces) & set(SPECIALS)
    assert tok.detokenize(pieces) == "<pad> <eos> <0x41>"


def test_punctuation_is_a_piece_of_its_own(tok: SubwordTokenizer) -> None:
    pieces = tok.tokenize("I have a red car.")
    assert pieces[-1] == "." and pieces[0] == MARK + "I"


def test_words_group_pieces_at_word_marks() -> None:
    assert word_groups(["▁vari", "able", "▁in", "put", "?"]) == [[0, 1], [2, 3], [4]]
    # French puts a space before "?": the lone mark and the "?" are one word, not a word made of a space
    assert word_groups(["▁l", "'", "homme", "▁est", "-", "il", "▁", "?"]) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert word_groups(["▁car", "▁", "?", "!"]) == [[0], [1, 2], [3]]
    # Chinese text has no spaces: each piece is its own word, a character spelt as bytes is one word
    assert word_groups(["▁我们", "如何", "<0xE5>", "<0x8F>", "<0xAF>", "变"], chinese=True) == [[0], [1], [2, 3, 4], [5]]


def test_text_is_cleaned_and_chinese_made_simplified() -> None:
    assert clean_text("  I\thave\u200b a\n\n red  car. ") == "I have a red car."
    assert clean_text("Va\u202f!") == "Va\u202f!"  # French typography keeps its no-break space
    assert to_simplified("我有一輛紅色的車") == "我有一辆红色的车"
    assert prepare_text("我有一輛紅色的車。", "zh") == "我有一辆红色的车。"
    assert prepare_text("輛", "fr") == "輛"


@pytest.mark.parametrize("bad", ["", "{", json.dumps({"model": {"type": "WordLevel"}}), "x" * 5_000_000])
def test_a_malformed_tokenizer_is_refused(bad: str) -> None:
    with pytest.raises(ExplorerError):
        SubwordTokenizer(bad)


def test_a_tokenizer_with_added_tokens_is_refused(tok: SubwordTokenizer) -> None:
    spec = json.loads(tok.json_text)
    spec["added_tokens"] = [{"id": 0, "content": "<pad>", "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True}]
    with pytest.raises(ExplorerError, match="added tokens"):
        SubwordTokenizer(json.dumps(spec))


def test_default_vocabulary_size_scales_with_the_data() -> None:
    assert default_vocab_size(300) == 1000
    assert default_vocab_size(25_000) == 3125
    assert default_vocab_size(1_000_000) == 8000


def test_a_subword_model_round_trips_through_its_checkpoint(fra, tmp_path: Path) -> None:
    bundle, _, _ = fra
    path = checkpoint.save(bundle, tmp_path / "pieces")
    loaded = checkpoint.load(path)
    assert loaded.uses_pieces and loaded.subwords[0].vocab == bundle.src_vocab.tokens
    text = "How can we use variable input lengths?"
    assert loaded.prepare(text).ids == bundle.prepare(text).ids
    assert trace(loaded, text).output_tokens == trace(bundle, text).output_tokens


def test_a_checkpoint_whose_tokenizer_disagrees_with_its_vocabulary_is_refused(fra, tmp_path: Path) -> None:
    bundle, _, _ = fra
    data = checkpoint.to_bytes(bundle)
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8: 8 + n])
    info = json.loads(header["__metadata__"]["explorer"])
    info["tokenizers"]["source"], info["tokenizers"]["target"] = info["tokenizers"]["target"], info["tokenizers"]["source"]
    header["__metadata__"]["explorer"] = json.dumps(info)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with pytest.raises(ExplorerError, match="tokenizer"):
        checkpoint.from_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n:], "tampered")


def test_validation_pairs_are_kept_as_the_files_text(fra) -> None:
    bundle, data, valid = fra
    assert len(valid) == len(data.validation()) > 0
    for (source, target), pair in zip(valid, data.validation()):
        assert pair.src == bundle.prepare(source).ids


def test_the_words_view_sums_pieces_and_averages_steps(fra) -> None:
    bundle, _, _ = fra
    tr = trace(bundle, "How can we use variable input lengths?")
    assert tr.has_pieces and tr.source_words
    assert [i for g in tr.source_words for i in g] == list(range(len(tr.source_tokens)))
    words = tr.word_weights()
    assert words.shape == (len(tr.output_words), len(tr.source_words))
    assert np.allclose(words.sum(axis=1), 1.0, atol=1e-5)
    for row, out_group in zip(words, tr.output_words):
        for value, src_group in zip(row, tr.source_words):
            assert value == pytest.approx(tr.weights[np.ix_(list(out_group), list(src_group))].sum(axis=1).mean(),
                                          abs=1e-6)
    outputs, inputs = tr.word_labels()
    assert inputs[3:8] == ["use", "variable", "input", "lengths", "?"]
    fig = fa.word_attention_heatmap(tr)
    assert np.allclose(np.asarray(fig.data[0].z, dtype=float), words)
    assert list(fig.data[0].x)[4] == "5:variable"
    exported = json.loads(tr.to_json())
    assert exported["source_words"] == [list(g) for g in tr.source_words]


def test_bleu_by_length_is_stored_per_checkpoint_file_and_read_back(fra, tmp_path: Path) -> None:
    from explorer.training.comparison import bleu_by_length, store_bleu_curves, stored_bleu_curve
    from explorer.data.corpus import load_tsv
    from explorer.app.figures.compare import bleu_by_length_figure
    bundle, _, _ = fra
    pairs = list(load_tsv(FIXTURES / "eng-fra-good.tsv").pairs)
    curve = bleu_by_length(bundle, pairs, "the fixture")
    assert sum(r["n"] for r in curve.rows) == len(pairs)
    assert all(0.0 <= r["bleu"] <= 100.0 and 0.0 <= r["chrf"] <= 100.0 for r in curve.rows)
    assert "case:mixed" in curve.bleu_signature
    path = checkpoint.save(bundle, tmp_path / "pieces")
    store_bleu_curves([(path, curve)])
    assert stored_bleu_curve(path) == curve
    fig = bleu_by_length_figure([curve])
    assert list(fig.data[0].y) == [r["bleu"] for r in curve.rows]
    path.write_bytes(path.read_bytes() + b" ")  # another file under the same name: the record no longer applies
    assert stored_bleu_curve(path) is None


def test_the_csv_export_says_which_word_each_piece_belongs_to(fra) -> None:
    from explorer.app import views
    bundle, _, _ = fra
    tr = trace(bundle, "How can we use variable input lengths?")
    frame = views.trace_frame(tr)
    variable = [i + 1 for i in tr.source_words[4]]
    assert set(frame.loc[frame["position"].isin(variable), "input_word"]) == {5}
    summed = frame[frame["input_word"] == 5].groupby("output_word")["weight"].sum() \
        / frame[frame["input_word"] == 5].groupby("output_word")["step"].nunique()
    assert np.allclose(summed.to_numpy(), tr.word_weights()[:, 4], atol=1e-6)


def test_extra_pairs_join_the_training_split_only(fra) -> None:
    _, base, valid = fra
    extra = [("input length", "longueur d'entrée"), ("variable", "variable")]
    bundle, data, valid_extra = translation_setup(
        FIXTURES / "eng-fra-good.tsv", "pieces", {"embed": 8, "hidden": 16, "attn_dim": 8, "dropout": 0.0},
        src_lang="en", tgt_lang="fr", min_freq=1, valid_fraction=0.2, extra=extra, extra_repeat=3)
    assert len(data.train_pairs) == len(base.train_pairs) + 3 * len(extra)
    assert valid_extra == valid and len(data.validation()) == len(base.validation())
    ids = bundle.prepare("input length.").ids  # typed without its full stop, the model would read it with one
    assert sum(p.src[: len(ids) - 1] == ids[:-1] and len(p.src) == len(ids) - 1 for p in data.train_pairs) == 3
    with pytest.raises(ExplorerError, match="at least once"):
        translation_setup(FIXTURES / "eng-fra-good.tsv", "pieces", {}, src_lang="en", tgt_lang="fr", extra=extra,
                          extra_repeat=0)


def test_the_shipped_glossaries_are_well_formed_pairs() -> None:
    from explorer.data.corpus import load_tsv
    root = Path(__file__).resolve().parents[1] / "data"
    for name in ("glossary.en-fr.tsv", "glossary.en-zh.tsv"):
        corpus = load_tsv(root / name)
        assert len(corpus.pairs) >= 60 and not corpus.skipped
        assert "How can we use variable input lengths?" not in {s for s, _ in corpus.pairs}  # no test sentence


CHINESE = ["我有一辆红色的车。", "他买了一座大房子。", "我们有两辆车。", "房子大吗？", "车是红色的。", "我在这里。",
           "我们怎么使用注意力？", "Tom 有一辆车。"] * 3


def test_chinese_pieces_carry_no_word_mark_before_the_sentence() -> None:
    zh = SubwordTokenizer.train(CHINESE, 400, min_frequency=1, spaced=False)
    for text in CHINESE[:8]:
        pieces = zh.tokenize(text)
        assert MARK not in pieces and not pieces[0].startswith(MARK), pieces
        assert zh.detokenize(pieces) == text


def test_a_chinese_target_side_is_learnt_without_the_leading_word_mark(tmp_path: Path) -> None:
    tsv = tmp_path / "en-zh.tsv"
    english = ["I have a red car.", "He bought a big house.", "We have two cars.", "Is the house big?",
               "The car is red.", "I am here.", "How can we use attention?", "Tom has a car."]
    tsv.write_text("".join(f"{e}\t{z}\n" for e, z in zip(english * 3, CHINESE)), encoding="utf-8")
    bundle, _, _ = translation_setup(tsv, "zh", {"embed": 8, "hidden": 16, "attn_dim": 8, "dropout": 0.0},
                                     src_lang="en", tgt_lang="zh", min_freq=1, valid_fraction=0.2)
    pieces = bundle.tokenize_target("我有一辆红色的车。")
    assert not pieces[0].startswith(MARK), pieces
    assert bundle.tokenize_source("I have a red car.")[0].startswith(MARK)


@given(st.lists(st.text("abcdefgh ", max_size=12), max_size=30), st.integers(0, 60), st.integers(0, 30),
       st.integers(0, 3), st.integers(1, 8))
@settings(max_examples=300, deadline=None)
def test_a_tokenizer_learns_from_a_sample_within_its_bounds(texts, max_chars, max_word_chars, seed, chunk):
    from explorer.data.subwords import training_sample
    sample = training_sample(texts, seed, max_chars, max_word_chars, chunk)
    assert sample == training_sample(texts, seed, max_chars, max_word_chars, 1)  # chunks change nothing
    words = {w for t in sample for w in t.split()}
    assert sum(map(len, sample)) <= max_chars and sum(map(len, words)) <= max_word_chars
    if sum(map(len, texts)) <= max_chars and sum(len(w) for w in {w for t in texts for w in t.split()}) <= max_word_chars:
        assert sample is texts  # a corpus within the bounds is learnt from whole, as before
    rest = iter(texts)
    assert all(any(t == u for u in rest) for t in sample)  # whole sentences, in their order
    assert training_sample(texts, seed, max_chars, max_word_chars, chunk) == sample  # seeded
