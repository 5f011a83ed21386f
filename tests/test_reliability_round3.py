"""Issue 44's classes, each generated rather than listed: text that is not valid UTF-8 from every way in,
checkpoints `train` would write and then refuse, `--out` problems, tokenizer definitions, URL parameters
and numeric options, torchrun's environment, planted lock links, and app job slots.

Every case ends in exit 0 or 2 with one line on stderr (CLI) or an ExplorerError (engine), never
"internal error" and never a trained model lost.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from explorer.__main__ import main
from explorer.checkpoints import checkpoint
from explorer.data.tasks import TaskSpec
from explorer.errors import ExplorerError
from explorer.outside_text import check_arguments, decode, lines, valid_strings, valid_text
from explorer.training.train import new_task_bundle

REPO = Path(__file__).resolve().parent.parent


def cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def assert_refused(rc: int, out: str, err: str, message: str) -> None:
    assert rc == 2, (rc, err)
    assert "Traceback" not in out + err and "internal error" not in err
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("error: ") and message in err, err


def run_cli(args: list[str | bytes], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """The CLI in a fresh process, arguments as raw bytes (as a terminal in another encoding passes them)."""
    env = {**os.environ, "PYTHONUTF8": "0", "LC_ALL": "C.UTF-8"}
    return subprocess.run([sys.executable, "-m", "explorer", *args], cwd=REPO, input=stdin, capture_output=True,
                          timeout=120, env=env)


def small_bundle():
    return new_task_bundle(TaskSpec("copy", 1, 6), "m", seed=1, embed=4, hidden=8, attn_dim=4)[0]


@pytest.fixture(scope="module")
def good_bytes() -> bytes:
    return checkpoint.to_bytes(small_bundle())


def edited(data: bytes, edit) -> bytes:
    """The checkpoint with its readable config edited, written as our own writer would (ensure_ascii=False
    cannot write a lone surrogate, so the JSON escape is what a crafted file holds)."""
    tensors = st_load(data)
    header = json.loads(data[8: 8 + int.from_bytes(data[:8], "little")])
    info = json.loads(header["__metadata__"]["explorer"])
    edit(info)
    return st_save(tensors, metadata={"explorer": json.dumps(info)})


# --- 1. text from outside ----------------------------------------------------------------------------

surrogates = st.integers(0xD800, 0xDFFF).map(chr)
valid = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(valid, surrogates, valid)
@settings(max_examples=200, deadline=None)
def test_a_lone_surrogate_anywhere_is_refused_with_its_position(before, bad, after):
    text = before + bad + after
    with pytest.raises(ExplorerError, match=f"at character {len(before) + 1:,}"):
        valid_text(text, "--input")
    with pytest.raises(ExplorerError, match="not valid UTF-8"):
        valid_strings({"examples": [[text, "x"]]}, "the config")
    with pytest.raises(ExplorerError, match="not valid UTF-8"):
        valid_strings({text: 1}, "the config")


@given(valid)
@settings(max_examples=200, deadline=None)
def test_valid_text_passes_unchanged(text):
    assert valid_text(text, "x") is text
    assert decode(text.encode("utf-8"), "x") == text


@given(st.binary(max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_bytes_decode_or_are_refused_with_one_message(data):
    try:
        text = decode(data, "the line")
    except ExplorerError as exc:
        assert "not valid UTF-8" in str(exc) and "\n" not in str(exc)
    else:
        assert text.encode("utf-8") == data


@given(st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=8))
@settings(max_examples=200, deadline=None)
def test_stdin_lines_are_numbered_bounded_and_never_raise(raw_lines):
    stream = io.BytesIO(b"\n".join(raw_lines) + b"\n")
    got = list(lines(stream, max_bytes=20))
    assert [n for n, _ in got] == list(range(1, len(raw_lines) + 1))
    for raw, (_, text) in zip(raw_lines, got):
        if len(raw) > 20:
            assert isinstance(text, ExplorerError) and "over 20 bytes" in str(text)
        elif isinstance(text, ExplorerError):
            assert "not valid UTF-8" in str(text)
        else:
            assert text.encode("utf-8") == raw.removesuffix(b"\r")


def test_arguments_from_a_latin1_terminal_are_refused_by_name():
    import argparse
    args = argparse.Namespace(command="trace", input="caf\udce9", mask=[1], pin=["1:\udcff"])
    with pytest.raises(ExplorerError, match="--input is not valid UTF-8 text \\(the byte 0xE9 at character 4\\)"):
        check_arguments(args)
    args.input = "café"
    with pytest.raises(ExplorerError, match="--pin"):
        check_arguments(args)


@pytest.mark.parametrize("args", [
    [b"translate", b"--checkpoint", b"reverse", b"--input", b"caf\xe9"],
    [b"train", b"--task", b"reverse", b"--steps", b"2", b"--out", b"{tmp}/caf\xe9"],
    [b"train", b"--task", b"copy", b"--steps", b"2", b"--alphabet", b"ab\xff", b"--out", b"{tmp}/x"],
    [b"info", b"--checkpoint", b"{tmp}/\xff\xfe"],
], ids=["input", "out", "alphabet", "checkpoint"])
def test_undecodable_arguments_exit_2_with_one_line_before_any_work(tmp_path, args):
    args = [a.replace(b"{tmp}", os.fsencode(tmp_path)) for a in args]
    result = run_cli(args)
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert err.count("\n") == 1 and "not valid UTF-8 text" in err and "internal error" not in err
    assert list(tmp_path.iterdir()) == []


def test_stdin_lines_with_stray_bytes_or_no_end_are_reported_per_line():
    stdin = b"123\n\xff\xfe123\n" + b"1" * 200_000 + b"\n4567\n"
    result = run_cli(["translate", "--checkpoint", "reverse"], stdin=stdin)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert result.stdout.decode().split("\n") == ["321", "", "", "7654", ""]
    assert "line 2: the line is not valid UTF-8 text (the byte 0xFF at byte 1)" in err
    assert "line 3: the line is over 100,000 bytes" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("field", ["name", "saved_at", "examples", "training", "metrics", "key"])
def test_crafted_text_fields_with_lone_surrogates_exit_2_in_info(good_bytes, tmp_path, capsys, field):
    def edit(info):
        if field == "examples":
            info["examples"] = [["ab\ud800", "ba"]]
        elif field in ("training", "metrics"):
            info[field] = {"note": "x\udfff"}
        elif field == "key":
            info["training"] = {"\ud834": 1}
        else:
            info[field] = "m\udc80"
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(edited(good_bytes, edit))
    assert_refused(cli(["info", "--checkpoint", str(path)]), *capsys.readouterr(), "is not valid UTF-8 text")


# --- 2. what train accepts is what a checkpoint may hold --------------------------------------------

texts = st.one_of(st.text(max_size=40), st.text(min_size=990, max_size=1100), st.just("en\nfr"),
                  st.text(st.characters(), min_size=1, max_size=5).map(lambda t: t * 300))


@given(name=texts, note=texts, example=texts)
@settings(max_examples=60, deadline=None)
def test_a_model_is_refused_before_training_or_its_checkpoint_loads(name, note, example):
    bundle = small_bundle()
    bundle.name, bundle.training = name, {"note": note}
    bundle.examples = ((example, "x"),)
    try:
        checkpoint.check_savable(bundle)
    except ExplorerError as exc:
        assert "cannot be saved" in str(exc) and "\n" not in str(exc)
        return
    loaded = checkpoint.from_bytes(checkpoint.to_bytes(bundle), "m")
    assert loaded.training == {"note": note} and loaded.examples == ((example, "x"),)


def test_the_trainer_refuses_a_model_it_could_not_save_before_any_step():
    from explorer.training.data import TaskData
    from explorer.training.train import Trainer, TrainConfig
    bundle = small_bundle()
    bundle.name = "n" * 5000
    task = bundle.task_obj
    with pytest.raises(ExplorerError, match="cannot be saved as a checkpoint: name must be text"):
        Trainer(bundle, TaskData(task, bundle.src_vocab, bundle.tgt_vocab, 10, 0), TrainConfig(steps=1))


@pytest.mark.parametrize("flag, value, message", [
    ("--name", "n" * 5000, "--name must be text of one line and at most 1,000 characters"),
    ("--name", "two\nlines", "--name must be text of one line"),
    ("--src-lang", "en\nfr", "--src-lang must be a language code"),
    ("--tgt-lang", "../../pretrained/x", "--tgt-lang must be a language code"),
    ("--tgt-lang", "f" * 5000, "--tgt-lang must be a language code"),
])
def test_train_refuses_what_a_checkpoint_may_not_hold_before_any_work(tmp_path, capsys, flag, value, message):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("go .\tva .\nhello .\tbonjour .\n")
    assert_refused(cli(["train", "--data", str(tsv), "--out", str(tmp_path / "m"), flag, value]),
                   *capsys.readouterr(), message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.tsv"]


def test_learnt_pieces_stay_within_a_checkpoint_s_vocabulary_entries():
    from explorer.checkpoints.header import MAX_TOKEN_CHARS
    from explorer.data.subwords import SubwordTokenizer
    word = "".join(chr(0x61 + i % 26) for i in range(400))
    tok = SubwordTokenizer.train([f"{word} {word} go"] * 50, vocab_size=400, min_frequency=2)
    assert max(map(len, tok.vocab)) <= MAX_TOKEN_CHARS
    assert "".join(tok.tokenize(word)).replace("\u2581", "") == word


# --- 3. the destination checked before the work ------------------------------------------------------

OUT_CASES = {  # (what is put in place, the --out, the message)
    "directory in the way": (lambda d: (d / "m.safetensors").mkdir(), "m", "a directory is in the way"),
    "accented name too long with the temporary file's": (lambda d: None, "é" * 115, "choose a shorter --out"),
    "a file where a folder should be": (lambda d: (d / "file").write_text("x"), "file/m", "cannot write checkpoint"),
}


@pytest.mark.parametrize("make, out, message", OUT_CASES.values(), ids=OUT_CASES.keys())
def test_out_problems_exit_2_before_training(tmp_path, capsys, make, out, message):
    make(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert_refused(cli(["train", "--task", "copy", "--steps", "5", "--out", str(tmp_path / out)]),
                   *capsys.readouterr(), message)
    assert sorted(tmp_path.rglob("*")) == before


@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=130))
@settings(max_examples=80, deadline=None)
def test_a_name_target_path_accepts_is_one_save_can_write(tmp_path_factory, name):
    folder = tmp_path_factory.mktemp("names")
    try:
        path = checkpoint.target_path(folder / name)
    except ExplorerError:
        return
    if name in (".", ".."):
        return
    with checkpoint.writer(folder / name):
        pass
    assert checkpoint.save(small_bundle(), folder / name) == path and path.is_file()


def test_a_save_that_still_fails_keeps_the_model_and_says_where(tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "rescue"))
    (tmp_path / "rescue").mkdir()
    target = tmp_path / "out" / "m"
    checkpoint.target_path(target)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "m.safetensors").mkdir()  # put in the way while training ran
    with pytest.raises(ExplorerError, match="a directory is in the way"):
        checkpoint.save(small_bundle(), target)
    (tmp_path / "out" / "m.safetensors").rmdir()
    real_replace = os.replace

    def disk_full_there(src, dst):
        if Path(dst).parent == tmp_path / "out":
            raise OSError(28, "No space left on device")
        real_replace(src, dst)
    monkeypatch.setattr(os, "replace", disk_full_there)
    with pytest.raises(ExplorerError, match=r"No space left on device; the model was saved to (\S+) instead") as info:
        checkpoint.save(small_bundle(), target)
    rescued = Path(str(info.value).rsplit("saved to ", 1)[1].removesuffix(" instead"))
    assert rescued.parent == tmp_path / "rescue"
    assert checkpoint.load(str(rescued)).src_vocab == small_bundle().src_vocab
    assert list((tmp_path / "out").iterdir()) == []


# --- 4. tokenizer definitions: only what our own training writes ------------------------------------

@pytest.fixture(scope="module")
def tokenizer_spec() -> dict:
    from explorer.data.subwords import SubwordTokenizer
    return json.loads(SubwordTokenizer.train(["the cat sat on the mat ."] * 20, vocab_size=300).json_text)


HOSTILE_PARTS = {
    "a chain of Replace normalizers": ("normalizer", {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "a"}, "content": "a" * 1000}] * 8}),
    "a backtracking Split pattern": ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(a+)+$"},
                                                      "behavior": "Isolated", "invert": False}),
    "a post-processor": ("post_processor", {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                            "use_regex": True}),
    "added tokens": ("added_tokens", [{"id": 0, "content": "<pad>", "single_word": False, "lstrip": False,
                                       "rstrip": False, "normalized": False, "special": True}]),
    "a WordPiece model": ("model", {"type": "WordPiece", "unk_token": "<unk>", "vocab": {}}),
    "a truncation": ("truncation", {"direction": "Right", "max_length": 1, "strategy": "LongestFirst", "stride": 0}),
    "a decoder that replaces": ("decoder", {"type": "Replace", "pattern": {"String": "a"}, "content": "b"}),
}


@pytest.mark.parametrize("part, value", HOSTILE_PARTS.values(), ids=HOSTILE_PARTS.keys())
def test_a_tokenizer_with_a_part_our_training_never_writes_is_refused(tokenizer_spec, part, value):
    from explorer.data.subwords import SubwordTokenizer
    spec = {**tokenizer_spec, part: value}
    with pytest.raises(ExplorerError, match="not one this program trains"):
        SubwordTokenizer(json.dumps(spec))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                        max_size=3), max_leaves=6)


def _paths(value, prefix=()):
    """Every key path of a tokenizer definition but the vocabulary's and merges' entries."""
    yield prefix
    if isinstance(value, dict) and prefix[-1:] != ("vocab",):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list) and prefix[-1:] != ("merges",):
        for i, item in enumerate(value):
            yield from _paths(item, prefix + (i,))


@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_any_change_to_a_tokenizer_s_settings_is_refused(tokenizer_spec, data):
    import copy
    from explorer.data.subwords import SubwordTokenizer
    paths = [p for p in _paths(tokenizer_spec) if p]
    path = data.draw(st.sampled_from(paths))
    value = data.draw(json_values)
    spec = copy.deepcopy(tokenizer_spec)
    target = spec
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    if spec == tokenizer_spec or (path == ("model", "merges") and value == []):
        return  # no merges is what training writes for a text with no pair seen twice: a harmless BPE
    with pytest.raises(ExplorerError):
        SubwordTokenizer(json.dumps(spec))


def test_a_panic_in_the_tokenizer_library_is_an_explorer_error():
    from explorer.data.tokenizer_worker import library_call

    class PanicException(BaseException):  # pyo3's, which derives from BaseException
        pass

    def panics(text):
        raise PanicException("regex: backtrack limit exceeded")
    with pytest.raises(ExplorerError, match="could not tokenize this text \\(regex: backtrack limit exceeded\\)"):
        library_call("tokenize", panics, "x")

    def interrupted(text):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        library_call("tokenize", interrupted, "x")


@pytest.fixture(scope="module")
def translation_bytes() -> bytes:
    from explore_models import build_models
    return checkpoint.to_bytes(next(b for b in build_models() if b.name == "tiny-fra"))


def test_a_checkpoint_with_a_replace_chain_is_refused_by_info(translation_bytes, tmp_path, capsys):
    def edit(info):
        spec = json.loads(info["tokenizers"]["source"])
        spec["normalizer"] = HOSTILE_PARTS["a chain of Replace normalizers"][1]
        info["tokenizers"]["source"] = json.dumps(spec)
    path = tmp_path / "replace.safetensors"
    path.write_bytes(edited(translation_bytes, edit))
    assert_refused(cli(["info", "--checkpoint", str(path)]), *capsys.readouterr(),
                   "its normalizer must be null")


@pytest.fixture
def isolated():
    """The app server's setting: tokenizers this process did not write run in tokenizer_worker's process."""
    from explorer.data.subwords import isolate_untrusted
    isolate_untrusted(True)
    yield
    isolate_untrusted(False)


def test_an_untrusted_tokenizer_runs_in_the_worker_with_the_same_results(isolated, translation_bytes):
    import random
    from explorer.data import tokenizer_worker
    bundle = checkpoint.from_bytes(translation_bytes, "uploaded")
    trusted = checkpoint.from_bytes(translation_bytes, "shipped", trusted=True)
    text = "Tom has 37 unseen wörds, 漢字 and 🙂!"
    for side in (0, 1):
        mine, ours = bundle.subwords[side], trusted.subwords[side]
        assert not mine.trusted and ours.trusted
        assert mine.tokenize(text) == ours.tokenize(text) and mine.ids_many([text, "a"]) == ours.ids_many([text, "a"])
        assert mine.detokenize(mine.tokenize(text)) == ours.detokenize(ours.tokenize(text))
        assert mine.sample(text, random.Random(1), 0.3) == ours.sample(text, random.Random(1), 0.3)
    assert tokenizer_worker.worker_pid() not in (None, os.getpid())


def test_a_tokenizer_that_aborts_ends_the_worker_not_this_process(isolated, translation_bytes):
    """The issue's Replace chain, past the whitelist, aborts the Rust library (an allocation of 10^9 characters):
    in the worker, capped in memory, so the caller gets one message and the next call a fresh worker."""
    from explorer.data import tokenizer_worker
    from explorer.engine.trace import trace
    bundle = checkpoint.from_bytes(translation_bytes, "uploaded")
    good = bundle.subwords[0].json_text
    spec = json.loads(good)
    spec["normalizer"] = HOSTILE_PARTS["a chain of Replace normalizers"][1]
    with pytest.raises(ExplorerError, match="own process ended \\(SIGABRT\\) on this text; the app goes on"):
        tokenizer_worker.call(json.dumps(spec), "tokens", "a cat")
    object.__setattr__(bundle.subwords[0], "json_text", json.dumps(spec))  # as if the whitelist had let it in
    with pytest.raises(ExplorerError, match="SIGABRT"):
        trace(bundle, "a cat")  # Explore's path: a message on the page, the server goes on
    assert tokenizer_worker.call(good, "tokens", "a cat") == checkpoint.from_bytes(
        translation_bytes, "again", trusted=True).subwords[0].tokenize("a cat")


def test_a_worker_killed_between_calls_is_replaced_and_one_that_hangs_is_ended(isolated, translation_bytes):
    import signal
    from explorer.data import tokenizer_worker
    good = checkpoint.from_bytes(translation_bytes, "uploaded").subwords[0].json_text
    tokenizer_worker.call(good, "tokens", "a cat")
    os.kill(tokenizer_worker.worker_pid(), signal.SIGKILL)
    for _ in range(50):
        if tokenizer_worker.worker_pid() is None:
            break
        time.sleep(0.02)
    assert tokenizer_worker.call(good, "tokens", "a cat")  # a fresh worker
    os.kill(tokenizer_worker.worker_pid(), signal.SIGSTOP)  # a worker that never answers
    with pytest.raises(ExplorerError, match="took over 0.5 s"):
        tokenizer_worker.call(good, "tokens", "a cat", seconds=0.5)
    assert tokenizer_worker.call(good, "tokens", "a cat")


# --- 7. torchrun's environment -------------------------------------------------------------------------

env_values = st.one_of(st.integers(-3, 10).map(str), st.text(max_size=8), st.just("²"), st.just("9" * 5000))


@given(rank=env_values, size=env_values, local_rank=env_values, local_size=env_values, port=env_values)
@settings(max_examples=300, deadline=None)
def test_any_torchrun_environment_is_a_checked_launch_or_one_line(rank, size, local_rank, local_size, port):
    from explorer.training.distributed import launch_from
    env = {"RANK": rank, "WORLD_SIZE": size, "LOCAL_RANK": local_rank, "LOCAL_WORLD_SIZE": local_size,
           "MASTER_PORT": port, "MASTER_ADDR": "127.0.0.1"}
    try:
        launch = launch_from(env)
    except ExplorerError as exc:
        assert str(exc).startswith("torchrun's environment: ") and "\n" not in str(exc) and len(str(exc)) < 200
        return
    assert 0 <= launch.rank < launch.size and 0 <= launch.local_rank < launch.local_size <= launch.size
    assert 1 <= int(port) <= 65535


TORCHRUN_CASES = {
    "a rank that is no number": ({"RANK": "zero"}, "RANK='zero' must be a whole number"),
    "a local world size of 0": ({"LOCAL_WORLD_SIZE": "0"}, "LOCAL_WORLD_SIZE='0' must be a whole number from 1"),
    "a rank beyond the world": ({"RANK": "5"}, "RANK 5 is not below WORLD_SIZE 2"),
    "an unknown master host": ({"MASTER_ADDR": "no-such-host.invalid"}, "MASTER_ADDR 'no-such-host.invalid' is not"),
}


@pytest.mark.parametrize("change, message", TORCHRUN_CASES.values(), ids=TORCHRUN_CASES.keys())
def test_a_bad_torchrun_environment_exits_2_with_one_line(tmp_path, monkeypatch, capsys, change, message):
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29533", **change}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert_refused(cli(["train", "--task", "copy", "--steps", "2", "--out", str(tmp_path / "m")]),
                   *capsys.readouterr(), message)
    assert list(tmp_path.iterdir()) == []


# --- 8. locks never follow links ------------------------------------------------------------------------

@pytest.mark.parametrize("dangling", [True, False], ids=["dangling link", "link to a file"])
def test_a_planted_lock_link_is_refused_and_its_target_untouched(tmp_path, capsys, dangling):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    victim = shipped / "victim"
    if not dangling:
        victim.write_bytes(b"shipped bytes")
    out = tmp_path / "runs"
    out.mkdir()
    (out / ".m.safetensors.lock").symlink_to(victim)
    assert_refused(cli(["train", "--task", "copy", "--steps", "2", "--out", str(out / "m")]),
                   *capsys.readouterr(), "is a symbolic link; remove it")
    assert sorted(p.name for p in shipped.iterdir()) == ([] if dangling else ["victim"])
    if not dangling:
        assert victim.read_bytes() == b"shipped bytes"
    with pytest.raises(ExplorerError, match="symbolic link"):
        checkpoint.save(small_bundle(), out / "m")
    assert not (out / "m.safetensors").exists()


# --- 6. every URL parameter through one parser; every numeric option bounded ------------------------------

@given(st.one_of(st.text(max_size=30), st.just("²"), st.just("9" * 5000), st.just("1e400"), st.just("nan")),
       st.sampled_from([int, float]))
@settings(max_examples=400, deadline=None)
def test_any_link_value_is_a_number_in_range_or_one_message(text, kind):
    from explorer.limits import url_number
    try:
        value = url_number(text, "step", 1, 100, kind)
    except ExplorerError as exc:
        assert str(exc).startswith("the link's step ") and "\n" not in str(exc) and len(str(exc)) < 300
    else:
        assert isinstance(value, kind) and 1 <= value <= 100


@pytest.mark.parametrize("nn, nnk", [("s²", None), ("h" + "9" * 5000, None), ("s1", "²"), ("s1", "9" * 5000),
                                     ("s\u0661", "\u0663")])
def test_the_neighbours_link_values_are_parsed_not_crashed_on(models_dir, nn, nnk):
    from test_app_explore import errors, open_app
    params = {"nn": nn, **({"nnk": nnk} if nnk is not None else {})}
    at = open_app(models_dir, model="copy", input="31415926", **params)
    assert not errors(at)
    assert any("ignored" in w.value for w in at.warning)


@pytest.mark.parametrize("temperature", ["1e-38", "0.001", "1000", "1e308"])
def test_a_temperature_out_of_range_is_refused_in_the_cli_and_the_engine(capsys, temperature):
    from explorer.engine.trace import Intervention, trace
    assert_refused(cli(["trace", "--checkpoint", "reverse", "--input", "123", "--temperature", temperature]),
                   *capsys.readouterr(), "--temperature must be in [0.01, 100]")
    with pytest.raises(ExplorerError, match="the temperature must be in"):
        trace(small_bundle(), "12", Intervention(float(temperature)))


# --- 9. app jobs: slots are never lost, a killed run does not restart from scratch ----------------------

class _Run:
    """A run as the slots see it: it launches unless it was stopped while it waited."""

    def __init__(self, stopped: bool = False) -> None:
        self.stopped, self.launched = stopped, False

    def launch(self) -> bool:
        self.launched = not self.stopped
        return self.launched


@given(st.lists(st.booleans(), min_size=1, max_size=8), st.integers(1, 3))
@settings(max_examples=200, deadline=None)
def test_runs_stopped_while_waiting_never_keep_a_slot(stopped_flags, slots_count):
    from explorer.jobs.slots import Slots
    slots = Slots(slots_count)
    holders = [_Run() for _ in range(slots_count)]
    assert all(slots.request(r) for r in holders)
    waiting = [_Run(stopped=flag) for flag in stopped_flags]
    assert not any(slots.request(r) for r in waiting)
    for run in holders:  # the running ones finish while the waiting ones are (some) stopped
        slots.release(run)
    launched = [r for r in waiting if r.launched]
    assert launched == [r for r in waiting if not r.stopped][:slots_count]
    assert slots.running() == len(launched)
    released: set[int] = set()
    while len(released) < len([r for r in waiting if r.launched]):  # each launched run ends in turn
        run = next(r for r in waiting if r.launched and id(r) not in released)
        released.add(id(run))
        slots.release(run)
    assert all(r.launched for r in waiting if not r.stopped) and slots.running() == 0 and slots.waiting() == 0


def test_continue_after_the_process_was_killed_before_any_evaluation_says_nothing_was_saved():
    import signal as signals
    sys.path.insert(0, str(Path(__file__).parent))
    from test_jobs import tiny_job, wait_until
    from explorer.jobs import FAILED
    job = tiny_job(steps=50_000)
    job.start()
    try:
        wait_until(lambda: job.view().step >= 3)
        os.kill(job.pid, signals.SIGKILL)
        assert job.join(30) and job.state == FAILED and not job.view().evals
        with pytest.raises(ExplorerError, match="ended at step [0-9,]+ before its first evaluation: nothing of it"):
            job.continue_(10)
        assert job.state == FAILED
    finally:
        job.stop()
        job.join(30)


def test_continue_after_the_process_was_killed_goes_on_from_its_last_evaluation():
    """Continue after a kill restarted from an untrained model (step 69 -> 1), then refused; the state of each
    evaluation is now kept by the server, and the next run goes on from the last one."""
    import signal as signals

    import torch
    sys.path.insert(0, str(Path(__file__).parent))
    from test_jobs import tiny_job, wait_until
    from explorer.jobs import FAILED, FINISHED
    job = tiny_job(steps=50_000)  # evaluates every 10 steps
    job.start()
    try:
        wait_until(lambda: len(job.view().evals) >= 2 and job.view().step % 10 >= 3)
        os.kill(job.pid, signals.SIGKILL)
        assert job.join(30) and job.state == FAILED
        killed_at, saved = job.view().step, job.view().evals[-1].step
        weights = {k: v.clone() for k, v in job.snapshot().model.state_dict().items()}
        started = []
        job.publish = lambda bundle: started.append(bundle)
        note = job.continue_(4)
        assert note == (f"the last run's process ended at step {killed_at:,}: training goes on from its last "
                        f"evaluation, at step {saved:,} (the model, optimizer and step count saved there)")
        assert job.join(60) and job.state == FINISHED, job.view().message
        view = job.view()
        assert view.step == saved + 4 and [r.step for r in view.steps] == list(range(1, saved + 5))
        assert [r.step for r in view.evals] == [*range(10, saved + 1, 10), saved + 4]
        frames = [f.step for f in view.snapshots]
        assert frames[-1] == saved + 4 and frames == sorted(set(frames))  # the dead run's later frames are gone
        # four steps of Adam from the saved weights at the resumed learning rate: close to them, not a fresh model
        after = job.snapshot().model.state_dict()
        assert all((after[k] - weights[k]).abs().max() < 0.1 for k in weights)
        assert job.snapshot().training["steps_done"] == saved + 4
        assert any(not torch.equal(after[k], weights[k]) for k in weights)
    finally:
        job.stop()
        job.join(30)


def test_a_model_the_server_cannot_take_over_fails_its_job_with_the_reason(monkeypatch):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_jobs import tiny_job
    from explorer.jobs import lifecycle as job_module
    from explorer.jobs import FAILED

    def refuse(*args, **kwargs):
        raise ExplorerError("target_vocab[300] has 250 characters (limit 200)")
    job = tiny_job(steps=12)
    monkeypatch.setattr(job_module.checkpoint, "from_bytes", refuse)
    job.start()
    assert job.join(120)
    assert job.state == FAILED
    assert job.view().message == ("the trained model could not be taken over: target_vocab[300] has 250 characters "
                                  "(limit 200)")


# --- 5. uploads parsed once per server, within a byte budget shared by every session -------------------

@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 60), st.booleans(), st.booleans()), min_size=1,
                max_size=30), st.integers(50, 600))
@settings(max_examples=150, deadline=None)
def test_uploads_read_in_the_server_stay_within_their_byte_budget_and_are_read_once(uploads, budget):
    """Every read's peak and every kept result fit the budget together; a kept file (or its refusal) is not read
    again; a file whose reading alone would not fit is refused before it is read."""
    import hashlib
    from explorer.app.pages.common import _ParsedUploads
    from explorer.errors import ExplorerError
    cache = _ParsedUploads(budget)
    reads: list[bytes] = []
    for which, size, small, refused in uploads:
        data = bytes([which]) * size
        peak, kept_size = 3 * size, (10 if small else None)

        def read(data=data, peak=peak, refused=refused):
            assert cache.used + peak <= cache.max_bytes  # room was made before reading
            reads.append(data)
            if refused:
                raise ExplorerError("no usable sentence pairs")
            return ("read", data)
        what = f"{small}{refused}"
        key = (hashlib.sha256(data).hexdigest(), "f.tsv", what)
        for _ in range(2):  # a rerun of the page asks again
            kept, before = key in cache._data, len(reads)
            try:
                assert cache.get(key[0], "f.tsv", what, read, peak, kept_size) == ("read", data)
            except ExplorerError as exc:
                assert refused or peak > budget, exc
            assert cache.used <= cache.max_bytes
            assert cache.used == sum(size for _, size in cache._data.values())
            if kept or peak > budget:
                assert len(reads) == before  # kept: not read again; too large: refused before reading
    assert all(3 * len(d) <= budget for d in reads)  # nothing over the budget was read at all


def test_the_train_page_s_check_keeps_no_pairs_and_counts_as_training_reads():
    """The upload check keeps a count and the note on skipped lines (a parsed file kept ~12 times its size per
    session, 64 files a session); both agree with what training reads of the same file."""
    import dataclasses
    from explorer.data.corpus import check_tsv_bytes, load_tsv_bytes
    data = "\n".join([f"s{i}\tt{i}" for i in range(500)] + ["bad line"]).encode() + b"\n\xe9t\xe9\tsummer\r\n"
    check = check_tsv_bytes(data, "mine.tsv")
    corpus = load_tsv_bytes(data, "mine.tsv")
    assert (check.pairs, check.skipped_note) == (len(corpus.pairs), corpus.skipped_note())
    assert {f.name for f in dataclasses.fields(check)} == {"pairs", "skipped_note"}  # no pair kept
    assert "not valid UTF-8 (line 502)" in check.skipped_note


@given(st.lists(st.binary(max_size=12) | st.sampled_from([b"a\tb", b"\xef\xbb\xbfa\tb", b"a\tb\r", b"\t", b"a\tb\tc"]),
                max_size=8), st.booleans())
@settings(max_examples=300, deadline=None)
def test_the_upload_check_says_what_training_reads_of_any_file(lines, bom):
    from explorer.data.corpus import check_tsv_bytes, load_tsv_bytes
    from explorer.errors import ExplorerError
    data = (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines)
    try:
        corpus = load_tsv_bytes(data, "f.tsv")
    except ExplorerError as exc:
        with pytest.raises(ExplorerError) as refused:
            check_tsv_bytes(data, "f.tsv")
        assert str(refused.value) == str(exc)
        return
    assert check_tsv_bytes(data, "f.tsv") == type(check_tsv_bytes(data, "f.tsv"))(len(corpus.pairs),
                                                                                    corpus.skipped_note())


def test_uploads_kept_in_the_server_are_counted_in_its_memory_budget():
    from explorer.limits import jobs_budget, memory_budget, uploads_budget
    from explorer.jobs.registry import JobRegistry
    env = {"EXPLORER_TRAINING_MEMORY_MB": "1000", "EXPLORER_PARSED_TSV_MB": "300"}
    assert (memory_budget(env), uploads_budget(env), jobs_budget(env)) == (1_000_000_000, 300_000_000, 700_000_000)
    assert uploads_budget({"EXPLORER_TRAINING_MEMORY_MB": "400"}) == 200_000_000  # at most half the budget
    assert JobRegistry(max_running=1).memory_budget == jobs_budget()
