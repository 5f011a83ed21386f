"""Your own data without surprises (issue 43): preparation bounded before any tokenizer is trained, and every
skipped or left-out line said the same way in the CLI and the app.

Files here are the pig-latin corpus of tests/pig_latin.py with bad lines mixed in; models are tiny and train a
few steps.
"""

from __future__ import annotations

import json

import pytest

from explorer.__main__ import main
from explorer.data import subwords
from explorer.training.recipes import MAX_PIECE_CHARS, may_fit, translation_setup
from tests import pig_latin

TINY = {"embed": 8, "hidden": 16, "attn_dim": 8}
QUICK = ["--steps", "2", "--batch-size", "8", "--embed", "8", "--hidden", "16", "--attn-dim", "8",
         "--eval-every", "2", "--eval-samples", "8", "--threads", "1", "--processes", "1"]


def good_lines(n: int = 300) -> list[bytes]:
    return [f"{s}\t{t}".encode() for s, t in pig_latin.pairs(n, 0)]


def test_a_side_too_long_for_max_tokens_never_reaches_the_tokenizer(monkeypatch):
    seen: list[str] = []
    real = subwords.SubwordTokenizer.train.__func__

    def spy(cls, texts, *args, **kwargs):
        texts = list(texts)
        seen.extend(texts)
        return real(cls, texts, *args, **kwargs)
    monkeypatch.setattr(subwords.SubwordTokenizer, "train", classmethod(spy))
    words = " ".join(["word"] * 41)
    one_word = "x" * (40 * MAX_PIECE_CHARS + 1)
    data = b"\n".join(good_lines() + [f"{words}\tshort".encode(), f"short\t{one_word}".encode()]) + b"\n"
    notes: list[str] = []
    translation_setup(data, "pig", TINY, max_tokens=40, note=notes.append)
    assert seen and max(len(t) for t in seen) < 200
    assert any(n.startswith("2 of 302 pairs left out: longer than 40 pieces could hold (lines 301, 302)")
               for n in notes), notes


def test_may_fit_counts_words_and_characters():
    assert may_fit("a b c", 3) and not may_fit("a b c d", 3)
    assert may_fit("y" * (3 * MAX_PIECE_CHARS), 3) and not may_fit("y" * (3 * MAX_PIECE_CHARS + 1), 3)


def test_the_cli_says_which_lines_it_skipped_and_why(tmp_path, capsys):
    latin1 = [f"{s}\t{t} été".encode("latin-1") for s, t in pig_latin.pairs(40, 1)]
    huge = b"x" * (5 * 1024 * 1024) + b"\ty"
    path = tmp_path / "mixed.tsv"
    path.write_bytes(b"\n".join(good_lines() + latin1 + [huge, b"no tab here"]) + b"\n")
    assert main(["train", "--data", str(path), *QUICK, "--out", str(tmp_path / "m")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["steps"] == 2
    assert (f"note: 42 lines of {path} skipped: 40 not valid UTF-8 (lines 301, 302, 303, …); "
            "1 longer than 10,000 bytes (line 341); 1 expected 2 or 3 tab-separated columns, found 1 (line 342)"
            ) in err


def test_a_file_with_nothing_usable_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("\n".join(f"{s}\t{t} été" for s, t in pig_latin.pairs(20, 1)).encode("latin-1"))
    assert main(["train", "--data", str(path), *QUICK, "--out", str(tmp_path / "m")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"error: no usable sentence pairs in {path}: line 1: not valid UTF-8")


def test_a_few_pairs_train_with_a_warning(tmp_path, capsys):
    path = tmp_path / "five.tsv"
    path.write_bytes(b"\n".join(good_lines(6)) + b"\n")
    assert main(["train", "--data", str(path), *QUICK, "--out", str(tmp_path / "m")]) == 0
    err = capsys.readouterr().err
    assert "note: only 5 training pairs: a model learns little more than these sentences" in err
