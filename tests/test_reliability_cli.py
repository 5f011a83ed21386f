"""The CLI's bad-input matrix, the cases tests/test_cli.py leaves out: malformed TSV files for `train`
and `eval --data` (wrong columns, binary, bad UTF-8, empty, very large), checkpoints of another
architecture or with vocabularies that do not fit, and hostile text for `translate`. Each exits 2
with exactly one line on stderr and no traceback, and writes nothing.

In-process through `main()` (the same code path as `python -m explorer`; test_cli.py runs the real
processes): a subprocess per case would spend most of its time importing torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import save as st_save

from explorer.checkpoints import checkpoint
from explorer.__main__ import main
from explorer.data.subwords import pieces_text
from explorer.data.tasks import TaskSpec
from explorer.training.train import new_task_bundle

from explore_models import build_models


def assert_refused(rc: int, out: str, err: str, message: str) -> None:
    """Exit code 2, nothing on stdout, one line on stderr that names the problem, no traceback."""
    assert rc == 2, (rc, err)
    assert "Traceback" not in out + err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("error: ") and message in err, err


def cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors leave through SystemExit
        return int(exc.code)


TSV_CASES = {
    "wrong columns": (b"one\ttwo\tthree\tfour\nfive\n", "line 1: expected 2 or 3 tab-separated columns, found 4"),
    "binary": (bytes(range(256)) * 64, "it looks like a binary file (NUL bytes)"),
    "bad UTF-8": ("café\tcafé\nthé\tthé\n".encode("latin-1"), "line 1: not valid UTF-8"),
    "UTF-16": ("go\tva\n".encode("utf-16"), "looks like UTF-16 text; save it as UTF-8"),
    "empty": (b"", "the file is empty"),
    "blank lines only": (b"\n \n  \r\n", "every line is blank"),
    "only tabs": (b"\t\t\n\t\n", "line 1: only tabs, no text"),
    "blank lines and a tab": (b"\n \n\t\r\n", "line 3: only tabs, no text"),
    "very large": (None, "is too large: 20,000,001 bytes (limit 20,000,000)"),
    "a folder": ("folder", "it is a directory, not a file"),
    "missing": ("missing", "no such file"),
}


def tsv_file(tmp_path: Path, data) -> Path:
    path = tmp_path / "pairs.tsv"
    if data is None:  # a sparse file: 20 MB on paper, nothing on disk; refused before it is read
        with open(path, "wb") as f:
            f.truncate(20_000_001)
    elif data == "folder":
        path.mkdir()
    elif data == "missing":
        pass
    else:
        path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def translation_checkpoint(tmp_path_factory) -> Path:
    bundle = next(b for b in build_models() if b.name == "tiny-fra")
    return checkpoint.save(bundle, tmp_path_factory.mktemp("cli-reliability") / "tiny-fra")


@pytest.mark.parametrize("data, message", TSV_CASES.values(), ids=TSV_CASES.keys())
def test_train_on_a_bad_tsv_exits_2_with_one_line(tmp_path, capsys, data, message):
    path = tsv_file(tmp_path, data)
    rc = cli(["train", "--data", str(path), "--out", str(tmp_path / "out"), "--steps", "1", "--quiet"])
    assert_refused(rc, *capsys.readouterr(), message)
    assert not list(tmp_path.glob("out*")), "no checkpoint was written"


@pytest.mark.parametrize("data, message", TSV_CASES.values(), ids=TSV_CASES.keys())
def test_eval_on_a_bad_tsv_exits_2_with_one_line(translation_checkpoint, tmp_path, capsys, data, message):
    path = tsv_file(tmp_path, data)
    rc = cli(["eval", "--checkpoint", str(translation_checkpoint), "--data", str(path), "--json"])
    assert_refused(rc, *capsys.readouterr(), message)


def small_bundle(**options):
    return new_task_bundle(TaskSpec("copy", 1, 6), "m", seed=1, embed=4, hidden=8, attn_dim=4, **options)[0]


def described_as(weights_from, config_from, edit=lambda info: None) -> bytes:
    """One model's weights under another model's (edited) readable config."""
    info = checkpoint.describe(config_from)
    edit(info)
    tensors = {k: v.detach().contiguous() for k, v in weights_from.model.state_dict().items()}
    return st_save(tensors, metadata={"explorer": json.dumps(info)})


CHECKPOINT_CASES = {
    "another cell": (lambda: described_as(small_bundle(cell="lstm"), small_bundle()),
                     "does not match its architecture"),
    "another score function": (lambda: described_as(small_bundle(attention="additive"), small_bundle()),
                               "does not match its architecture: unexpected ['attention.w.weight']"),
    "no attention": (lambda: described_as(small_bundle(attention="none"), small_bundle()),
                     "does not match its architecture: missing"),
    "more source symbols than weights": (
        lambda: described_as(small_bundle(), small_bundle(), lambda info: info["source_vocab"].append("z")),
        "vocabularies (15, 14 tokens) do not match the model (14, 14)"),
    "vocabularies of another task": (
        lambda: described_as(small_bundle(), new_task_bundle(TaskSpec("copy", 1, 6, "abcdefghijklmnop"), "m",
                                                             seed=1, embed=4, hidden=8, attn_dim=4)[0]),
        "does not match its architecture"),
}


@pytest.mark.parametrize("make, message", CHECKPOINT_CASES.values(), ids=CHECKPOINT_CASES.keys())
def test_a_checkpoint_that_does_not_fit_exits_2_with_one_line(tmp_path, capsys, make, message):
    path = tmp_path / "model.safetensors"
    path.write_bytes(make())
    for argv in (["trace", "--checkpoint", str(path), "--input", "123"], ["info", "--checkpoint", str(path)]):
        assert_refused(cli(argv), *capsys.readouterr(), message)


@pytest.mark.parametrize("text, message", [
    ("é" * 20_000, "the input has 20,000 characters; the limit is 1,000"),
    ("", "the input is empty"),
    (" \t\u3000", "the input is empty"),
])
def test_translate_refuses_hostile_text_in_one_line(translation_checkpoint, capsys, text, message):
    rc = cli(["translate", "--checkpoint", str(translation_checkpoint), "--input", text])
    assert_refused(rc, *capsys.readouterr(), message)


def test_translate_reads_emoji_rtl_and_control_characters_in_pieces(translation_checkpoint, capsys):
    rc = cli(["translate", "--checkpoint", str(translation_checkpoint), "--input", "I 😀 שלום \u202e\x1b[2J here"])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in out + err
    # spelt in pieces and bytes: nothing is unknown (the untrained model may run to its length cap, a note)
    assert out.count("\n") == 1 and all(line.startswith("note: The output was cut") for line in err.splitlines())
    pieces = checkpoint.load(translation_checkpoint).prepare("I 😀 שלום \u202e\x1b[2J here").tokens
    # control and direction characters are cleaned away; the emoji is left out (data/robust.read_as)
    assert pieces_text(pieces) == "Iשלום[2Jhere"


def test_a_word_level_checkpoint_of_an_older_version_exits_2_with_one_line(tmp_path, capsys):
    """A translation model saved without its subword tokenizers (word level, before pieces) is refused by name."""
    fra = next(b for b in build_models() if b.name == "tiny-fra")
    path = tmp_path / "words.safetensors"
    path.write_bytes(described_as(fra, fra, lambda info: info.pop("tokenizers")))
    assert_refused(cli(["translate", "--checkpoint", str(path), "--input", "here"]), *capsys.readouterr(),
                   "a word-level model of an older version, which this app no longer reads; train it again")
