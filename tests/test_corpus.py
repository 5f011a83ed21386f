"""Tests for explorer.data.corpus: the TSV loader, the language guess, split and BLEU."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.data.corpus import (
    Corpus,
    corpus_bleu,
    guess_language,
    load_tsv,
    load_tsv_bytes,
    split_pairs,
)
from explorer.errors import ExplorerError

FIXTURES = Path(__file__).parent / "fixtures"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# ---------------------------------------------------------------- loader

def test_good_file_loads_every_pair_as_written():
    corpus = load_tsv(FIXTURES / "eng-fra-good.tsv")
    assert isinstance(corpus, Corpus)
    assert len(corpus.pairs) == 8
    assert corpus.skipped == ()
    assert corpus.pairs[0] == ("Go.", "Va !")
    assert corpus.pairs[1] == ("Hi.", "Salut\u202f!")
    assert corpus.path == str(FIXTURES / "eng-fra-good.tsv")


def test_attribution_column_is_ignored():
    corpus = load_tsv(str(FIXTURES / "eng-fra-attribution.tsv"))
    assert corpus.pairs == (("Go.", "Va !"), ("Hi.", "Salut !"), ("Run!", "Cours\u202f!"))
    assert corpus.skipped == ()


def test_malformed_lines_are_reported_with_line_numbers():
    corpus = load_tsv(FIXTURES / "eng-fra-malformed.tsv")
    assert corpus.pairs == (("Go.", "Va !"), ("Hi.", "Salut !"), ("Wait!", "Attends !"))
    assert corpus.skipped == (("expected 2 or 3 tab-separated columns, found 1", 1, (2,)),
                              ("expected 2 or 3 tab-separated columns, found 4", 1, (5,)),
                              ("empty target", 1, (6,)), ("empty source", 1, (7,)))


def test_skipped_lines_are_counted_whole_and_named_by_their_first_line_numbers():
    corpus = load_tsv_bytes(b"ok\tfine\n" + b"bad\n" * 10)
    assert corpus.skipped == (("expected 2 or 3 tab-separated columns, found 1", 10, (2, 3, 4)),)


def test_crlf_and_bom_are_tolerated(tmp_path):
    lf = (FIXTURES / "eng-fra-good.tsv").read_bytes()
    expected = load_tsv(FIXTURES / "eng-fra-good.tsv").pairs
    crlf = tmp_path / "crlf.tsv"
    crlf.write_bytes(b"\xef\xbb\xbf" + lf.replace(b"\n", b"\r\n"))
    corpus = load_tsv(crlf)
    assert corpus.pairs == expected
    assert corpus.skipped == ()


def test_bad_utf8_line_is_skipped(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("Hi.\tSalut !\nSummer.\tÉté.\nBye.\tAu revoir.\n".encode("utf-8").replace(
        "Été".encode("utf-8"), "Été".encode("latin-1")))
    corpus = load_tsv(path)
    assert corpus.pairs == (("Hi.", "Salut !"), ("Bye.", "Au revoir."))
    assert corpus.skipped == (("not valid UTF-8", 1, (2,)),)


def test_binary_file_is_rejected_clearly(tmp_path):
    path = tmp_path / "image.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\n\x00\x00\x00\x00\x08\x06")
    with pytest.raises(ExplorerError) as info:
        load_tsv(path)
    message = str(info.value)
    assert message.startswith(f"no usable sentence pairs in {path}: ")
    assert message.endswith("binary file (NUL bytes), not UTF-8 text")
    assert "\n" not in message
    corpus = load_tsv_bytes(b"Hi.\tSalut !\nBad\x00line\tx\n")
    assert corpus.skipped == (("binary data (NUL byte)", 1, (2,)),)


def test_error_lists_first_problems():
    with pytest.raises(ExplorerError, match=r"line 1: expected 2 or 3 tab-separated columns, found 1, "
                                            r"line 2: empty target, line 4: not valid UTF-8 \(and 1 more\)$"):
        load_tsv_bytes(b"one\nx\t \n\n\xff\tok\nlast\n", name="mine.tsv")


@pytest.mark.parametrize("data", [b"", b"\n\n  \n", b"\xef\xbb\xbf"])
def test_empty_file_is_an_error(data, tmp_path):
    path = tmp_path / "empty.tsv"
    path.write_bytes(data)
    with pytest.raises(ExplorerError, match="no usable sentence pairs"):
        load_tsv(path)


def test_missing_file_and_directory_are_errors(tmp_path):
    with pytest.raises(ExplorerError, match="no such file"):
        load_tsv(tmp_path / "nope.tsv")
    with pytest.raises(ExplorerError, match="directory"):
        load_tsv(tmp_path)


def test_too_large_is_an_error(tmp_path):
    path = tmp_path / "big.tsv"
    path.write_bytes(b"Hi.\tSalut !\n" * 100)
    with pytest.raises(ExplorerError, match="too large"):
        load_tsv(path, max_bytes=1000)
    with pytest.raises(ExplorerError, match="too large"):
        load_tsv_bytes(path.read_bytes(), max_bytes=1000)
    assert len(load_tsv(path, max_bytes=1200).pairs) == 100


def test_utf16_is_rejected_with_a_hint():
    with pytest.raises(ExplorerError, match="UTF-16"):
        load_tsv_bytes("Hi.\tSalut !\n".encode("utf-16"))


def test_upload_bytes_match_file():
    data = (FIXTURES / "eng-cmn.tsv").read_bytes()
    corpus = load_tsv_bytes(data, name="cmn.tsv")
    assert corpus.path == "cmn.tsv"
    assert corpus.pairs == load_tsv(FIXTURES / "eng-cmn.tsv").pairs


def test_chinese_fixture():
    corpus = load_tsv(FIXTURES / "eng-cmn.tsv")
    assert len(corpus.pairs) == 7
    assert corpus.pairs[2] == ("Where is Tom?", "Tom在哪里？")
    assert guess_language([t for _, t in corpus.pairs]) == "zh"
    assert guess_language([s for s, _ in corpus.pairs]) == "en"


def test_guess_language():
    assert guess_language(["Bonjour !", "Merci."]) == "en"
    assert guess_language(["你好。", "Tom在哪里？", "OK"]) == "zh"
    assert guess_language([]) == "en"


# ---------------------------------------------------------------- datasets

def test_split_is_deterministic_and_disjoint():
    items = list(range(100))
    train, valid = split_pairs(items, 0.1, seed=7)
    assert (train, valid) == split_pairs(items, 0.1, seed=7)
    assert len(valid) == 10 and len(train) == 90
    assert sorted(train + valid) == items
    assert not set(train) & set(valid)
    assert split_pairs(items, 0.1, seed=8)[1] != valid
    assert split_pairs(items, 0.0, seed=7) == (items, [])
    assert split_pairs([1, 2], 0.01, seed=0)[1] != []
    with pytest.raises(ExplorerError):
        split_pairs(items, 1.0, seed=0)


def test_corpus_bleu():
    refs = ["the cat is on the mat .", "there is a dog in the garden ."]
    assert corpus_bleu(refs, refs, "en") == pytest.approx(100.0)
    worse = corpus_bleu(["the cat is on a mat .", "a dog is in the garden ."], refs, "en")
    assert 0.0 < worse < 100.0
    zh_refs = ["我不知道。", "汤姆在哪里？"]
    assert corpus_bleu(zh_refs, zh_refs, "zh") == pytest.approx(100.0)
    assert corpus_bleu(["我知道。", "汤姆在这里？"], zh_refs, "zh") < 100.0
    assert corpus_bleu([], [], "en") == 0.0
    with pytest.raises(ExplorerError):
        corpus_bleu(["a"], [], "en")


# ---------------------------------------------------------------- real data

@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared data not available")
@pytest.mark.parametrize("name, lines, target_language", [("eng-fra", 112_060, "fr"), ("eng-cmn", 27_008, "zh")])
def test_real_data(name, lines, target_language):
    corpus = load_tsv(SHARED_DATA / name / "pairs.tsv")
    assert corpus.skipped == ()
    assert len(corpus.pairs) == lines
    assert guess_language([t for _, t in corpus.pairs[:500]]) == ("zh" if target_language == "zh" else "en")


def test_skipped_lines_are_counted_by_reason_with_their_first_line_numbers():
    data = b"ok\tfine\n" + b"\xe9t\xe9\tsummer\n" * 4 + b"no tab\n" + b"good\tbien\n"
    corpus = load_tsv_bytes(data, name="mine.tsv")
    assert corpus.skipped == (("not valid UTF-8", 4, (2, 3, 4)),
                              ("expected 2 or 3 tab-separated columns, found 1", 1, (6,)))
    assert corpus.lines == (1, 7)
    assert corpus.skipped_note() == ("5 lines of mine.tsv skipped: 4 not valid UTF-8 (lines 2, 3, 4, …); "
                                     "1 expected 2 or 3 tab-separated columns, found 1 (line 6)")
    assert load_tsv_bytes(b"a\tb\n").skipped_note() == ""


def test_a_line_too_long_to_be_a_sentence_pair_is_skipped_unread():
    from explorer.data.corpus import MAX_LINE_BYTES
    data = b"Hi.\tSalut !\n" + b"x" * (5 * 1024 * 1024) + b"\ty\nBye.\tAu revoir.\n"
    corpus = load_tsv_bytes(data)
    assert corpus.pairs == (("Hi.", "Salut !"), ("Bye.", "Au revoir."))
    assert corpus.skipped == ((f"longer than {MAX_LINE_BYTES:,} bytes", 1, (2,)),)
    with pytest.raises(ExplorerError, match="longer than"):
        load_tsv_bytes(b"x" * (MAX_LINE_BYTES + 1) + b"\ty\n")


def test_bleu_on_one_token_targets_says_it_cannot_mean_anything():
    from explorer.data.corpus import translation_scores
    digits = [str(n) for n in range(40)]
    scores = translation_scores(digits, digits, "en")
    assert scores["chrf"] == 100.0 and scores["bleu"] < 1.0
    assert scores["bleu_note"].startswith("100% of the references are shorter than 4 tokens")
    sentences = ["the cat sees the dog today"] * 3
    assert "bleu_note" not in translation_scores(sentences, sentences, "en")


def _guess_by_character(texts: list[str]) -> str:
    """guess_language's rule counted one character at a time (its definition, before the regex)."""
    def cjk(c: str) -> bool:
        cp = ord(c)
        return (0x2E80 <= cp <= 0x9FFF or 0xAC00 <= cp <= 0xD7AF or 0xF900 <= cp <= 0xFAFF
                or 0xFF00 <= cp <= 0xFFEF or 0x20000 <= cp <= 0x3FFFF)
    votes = [sum(map(cjk, chars)) * 2 > len(chars) for chars in ([c for c in t if not c.isspace()] for t in texts)
             if chars]
    return "zh" if votes and sum(votes) * 2 > len(votes) else "en"


@given(st.lists(st.text(st.sampled_from("a b\u3000\u4e2d\u6587\uac00\uff01\U00020001 \t.é"), max_size=12),
                max_size=6))
@settings(max_examples=300, deadline=None)
def test_guess_language_counts_as_its_rule_says(texts):
    assert guess_language(texts) == _guess_by_character(texts)
