"""The security review's classes of attack (issue 27), each as a matrix of cases: every one is refused
cleanly (ExplorerError in the engine; exit 2 and one line in the CLI), nothing shipped changes, no
unbounded read or allocation happens.

1. saves into the shipped models' folder, however the path is spelled;
2. arguments beyond the shared limits (beam, samples, lengths, sizes);
3. metadata of every field with the wrong type or range, deep or huge JSON;
4. non-finite or wrongly typed weights;
5. files that are not regular files (devices, FIFOs, folders), checkpoints and TSVs alike;
6. arguments that used to end in exit 1 (malformed --pin, names too long for the file system);
7. orphaned temporary files, two writers of one path, the training memory budget.

`CASES` counts the cases per class for docs/RELIABILITY.md.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from explorer.checkpoints import checkpoint

from explorer import jobs

from explorer import limits, storage
from explorer.__main__ import main
from explorer.errors import ExplorerError
from explorer.data.tasks import TaskSpec
from explorer.training.train import TrainConfig, new_task_bundle

REPO = Path(__file__).resolve().parent.parent


def cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def assert_refused(rc: int, out: str, err: str, message: str) -> None:
    assert rc == 2, (rc, err)
    assert "Traceback" not in out + err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("error: ") and message in err, err


def small_bundle(**options):
    return new_task_bundle(TaskSpec("copy", 1, 6), "m", seed=1, embed=4, hidden=8, attn_dim=4, **options)[0]


@pytest.fixture(scope="module")
def good_bytes() -> bytes:
    """A small checkpoint with a training record and metrics like a trained one's."""
    bundle = small_bundle()
    bundle.training = {"steps": 800, "batch_size": 128, "lr": 0.003, "seed": 0, "target_accuracy": None,
                       "steps_done": 800, "stopped_because": "steps"}
    bundle.metrics = {"validation": {"n": 500, "exact_match": 0.99, "token_accuracy": 0.998,
                                     "alignment_accuracy": None}}
    return checkpoint.to_bytes(bundle)


@pytest.fixture(scope="module")
def good_file(tmp_path_factory, good_bytes) -> Path:
    path = tmp_path_factory.mktemp("attacks") / "good.safetensors"
    path.write_bytes(good_bytes)
    return path


# --- 1. shipped models are read-only --------------------------------------------------------------

@pytest.fixture
def shipped(tmp_path, monkeypatch, good_bytes) -> Path:
    """A shipped-models folder holding `reverse`, reached through every spelling below."""
    folder = tmp_path / "pretrained"
    folder.mkdir()
    (folder / "reverse.safetensors").write_bytes(good_bytes)
    monkeypatch.setattr(checkpoint, "PRETRAINED_DIR", folder)
    (tmp_path / "runs").mkdir()
    (tmp_path / "link-to-shipped").symlink_to(folder)
    (tmp_path / "runs" / "alias.safetensors").symlink_to(folder / "reverse.safetensors")
    monkeypatch.chdir(tmp_path)
    return folder


SHIPPED_SPELLINGS = ["pretrained/reverse", "pretrained/reverse.safetensors", "./pretrained/reverse",
                     "pretrained//reverse", "runs/../pretrained/reverse", "{abs}/reverse", "{abs}/new-model",
                     "{abs}/../pretrained/reverse", "link-to-shipped/reverse", "link-to-shipped/sub/model",
                     "runs/alias", "runs/alias.safetensors", "pretrained/./reverse.safetensors"]


@pytest.mark.parametrize("spelling", SHIPPED_SPELLINGS)
def test_no_save_lands_in_the_shipped_folder(shipped, spelling, good_bytes):
    path = spelling.format(abs=shipped)
    with pytest.raises(ExplorerError, match="shipped models' folder, which is read-only"):
        checkpoint.save(small_bundle(), path)
    assert (shipped / "reverse.safetensors").read_bytes() == good_bytes
    assert sorted(p.name for p in shipped.iterdir()) == ["reverse.safetensors"]


@pytest.mark.parametrize("spelling", SHIPPED_SPELLINGS[:6])
def test_cli_train_refuses_a_shipped_out_before_training(shipped, spelling, capsys, good_bytes):
    rc = cli(["train", "--task", "copy", "--steps", "2", "--out", spelling.format(abs=shipped), "--quiet"])
    assert_refused(rc, *capsys.readouterr(), "read-only")
    assert (shipped / "reverse.safetensors").read_bytes() == good_bytes


def test_the_real_shipped_reverse_survives_a_cli_training_to_it():
    """End to end, as the review ran it: a real process, the real pretrained/ folder."""
    target = checkpoint.PRETRAINED_DIR / "reverse.safetensors"
    if not target.exists():
        pytest.skip("no shipped reverse model in this checkout")
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    out = subprocess.run([sys.executable, "-m", "explorer", "train", "--task", "reverse", "--steps", "2",
                          "--out", "pretrained/reverse"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "read-only" in out.stderr, out.stderr
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before


def test_saving_beside_the_shipped_folder_still_works(shipped, tmp_path):
    path = checkpoint.save(small_bundle(), "pretrained-mine/model")  # a prefix of the name is not the folder
    assert checkpoint.load(path).model.cfg == small_bundle().model.cfg


# --- 2. limits ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def translation_file(tmp_path_factory) -> Path:
    from explore_models import build_models
    bundle = next(b for b in build_models() if b.name == "tiny-fra")
    return checkpoint.save(bundle, tmp_path_factory.mktemp("attacks-fra") / "tiny-fra")


LIMIT_CASES = {
    "beam 100000": (["translate", "--checkpoint", "{fra}", "--input", "Hello", "--beam", "100000"],
                    "the beam width must be between 1 and 10"),
    "beam 0": (["translate", "--checkpoint", "{fra}", "--input", "Hello", "--beam", "0"], "beam width"),
    "beam -3": (["translate", "--checkpoint", "{fra}", "--input", "Hello", "--beam", "-3"], "beam width"),
    "eval beam 0": (["eval", "--checkpoint", "{fra}", "--data", "{tsv}", "--beam", "0"], "beam width"),
    "eval beam 11": (["eval", "--checkpoint", "{fra}", "--data", "{tsv}", "--beam", "11"], "beam width"),
    "max-len 100000000": (["eval", "--checkpoint", "{copy}", "--max-len", "100000000", "--samples", "5"],
                          "inputs of length 100,000,000 are longer than this model reads"),
    "max-len 65": (["eval", "--checkpoint", "{copy}", "--max-len", "65"], "longer than this model reads (at most 64)"),
    "min-len 0": (["eval", "--checkpoint", "{copy}", "--min-len", "0"], "--min-len must be at least 1"),
    "samples 10**9": (["eval", "--checkpoint", "{copy}", "--samples", "1000000000"], "number of samples"),
    "samples -1": (["eval", "--checkpoint", "{copy}", "--samples", "-1"], "--samples must be at least 1"),
    "hidden 100000": (["train", "--task", "copy", "--out", "{tmp}/x", "--hidden", "100000"], "--hidden must be between"),
    "hidden 0": (["train", "--task", "copy", "--out", "{tmp}/x", "--hidden", "0"], "--hidden must be between"),
    "embed -1": (["train", "--task", "copy", "--out", "{tmp}/x", "--embed", "-1"], "--embed must be between"),
    "attn-dim 10**6": (["train", "--task", "copy", "--out", "{tmp}/x", "--attn-dim", "1000000"], "--attn-dim"),
    "layers 100": (["train", "--task", "copy", "--out", "{tmp}/x", "--layers", "100"], "--layers must be between"),
    "steps 10**12": (["train", "--task", "copy", "--out", "{tmp}/x", "--steps", "1000000000000"], "--steps"),
    "batch 0": (["train", "--task", "copy", "--out", "{tmp}/x", "--batch-size", "0"], "--batch-size"),
    "max-len 10**6": (["train", "--task", "copy", "--out", "{tmp}/x", "--max-len", "1000000"], "--max-len"),
    "alphabet 5000": (["train", "--task", "copy", "--out", "{tmp}/x", "--alphabet", "".join(map(chr, range(256, 5256)))],
                      "--alphabet has 5,000 symbols"),
    "lr nan": (["train", "--task", "copy", "--out", "{tmp}/x", "--lr", "nan"], "--lr must be a finite number"),
    "lr -1": (["train", "--task", "copy", "--out", "{tmp}/x", "--lr", "-1"], "--lr must be in"),
    "dropout 1.5": (["train", "--task", "copy", "--out", "{tmp}/x", "--dropout", "1.5"], "--dropout must be in"),
    "clip inf": (["train", "--task", "copy", "--out", "{tmp}/x", "--clip", "inf"], "--clip must be a finite"),
    "seed -1": (["train", "--task", "copy", "--out", "{tmp}/x", "--seed", "-1"], "--seed must be between"),
    "seed 2**64": (["train", "--task", "copy", "--out", "{tmp}/x", "--seed", str(2**64)], "--seed must be between"),
    "eval-samples 0": (["train", "--task", "copy", "--out", "{tmp}/x", "--eval-samples", "0"], "--eval-samples"),
    "teacher forcing 2": (["train", "--task", "copy", "--out", "{tmp}/x", "--teacher-forcing", "2"],
                          "--teacher-forcing"),
    "max-tokens 100000": (["train", "--data", "{tsv}", "--out", "{tmp}/x", "--max-tokens", "100000"], "--max-tokens"),
    "threads 0": (["train", "--task", "copy", "--out", "{tmp}/x", "--threads", "0"], "--threads"),
    "valid fraction 1": (["train", "--data", "{tsv}", "--out", "{tmp}/x", "--valid-fraction", "1"],
                         "--valid-fraction"),
    "subword dropout 1": (["train", "--data", "{tsv}", "--out", "{tmp}/x", "--subword-dropout", "1"],
                          "--subword-dropout must be in"),
    "subword dropout nan": (["train", "--data", "{tsv}", "--out", "{tmp}/x", "--subword-dropout", "nan"],
                            "--subword-dropout must be a finite"),
}


@pytest.mark.parametrize("argv, message", LIMIT_CASES.values(), ids=LIMIT_CASES.keys())
def test_arguments_beyond_the_limits_exit_2_before_any_work(translation_file, good_file, tmp_path, capsys,
                                                            argv, message):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("go .\tva .\nhello .\tbonjour .\n")
    argv = [a.format(fra=translation_file, copy=good_file, tsv=tsv, tmp=tmp_path) for a in argv]
    before = sorted(tmp_path.iterdir())
    assert_refused(cli(argv), *capsys.readouterr(), message)
    assert sorted(tmp_path.iterdir()) == before, "nothing was written"


def test_the_engine_refuses_a_bad_beam_and_lengths_too(good_file):
    from explorer.training.evaluation import task_pairs, translate_ids
    bundle = checkpoint.load(good_file)
    for width in (0, -3, 11, 100_000):
        with pytest.raises(ExplorerError, match="beam width"):
            translate_ids(bundle, [[4, 5]], beam=width)
    with pytest.raises(ExplorerError, match="longer than this model reads"):
        task_pairs(bundle, 5, 0, 1, 100_000_000)
    with pytest.raises(ExplorerError, match="number of samples"):
        task_pairs(bundle, 10**9, 0)


# --- 3. metadata -------------------------------------------------------------------------------------

def edited(data: bytes, edit) -> bytes:
    """The checkpoint with its readable config edited (weights as they were)."""
    tensors = st_load(data)
    header = json.loads(data[8: 8 + int.from_bytes(data[:8], "little")])
    info = json.loads(header["__metadata__"]["explorer"])
    edit(info)
    return st_save(tensors, metadata={"explorer": json.dumps(info)})


def deep(levels: int):
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


def setter(*path, value):
    def edit(info):
        target = info
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value() if callable(value) else value
    return edit


METADATA_CASES = {
    "training a list": (setter("training", value=[1, 2]), "training must be an object"),
    "training a string": (setter("training", value="x"), "training must be an object"),
    "training nested object": (setter("training", "lr", value={"a": 1}), "training.lr must be"),
    "training valid_fraction text": (setter("training", "valid_fraction", value="x"), "valid_fraction"),
    "training valid_fraction 5": (setter("training", "valid_fraction", value=5), "valid_fraction"),
    "training seed -1": (setter("training", "seed", value=-1), "training.seed"),
    "training huge int": (setter("training", "steps_done", value=10**30), "training.steps_done"),
    "training 100k keys": (setter("training", value=lambda: {str(i): i for i in range(100_000)}), "entries"),
    "training long text": (setter("training", "data", value="x" * 5000), "training.data"),
    "vocab entry an int": (lambda i: i["source_vocab"].__setitem__(5, 7), "source_vocab[5] must be a non-empty"),
    "vocab entry null": (lambda i: i["target_vocab"].__setitem__(5, None), "target_vocab[5] must be a non-empty"),
    "vocab entry empty": (lambda i: i["source_vocab"].__setitem__(5, ""), "source_vocab[5] must be a non-empty"),
    "vocab entry a list": (lambda i: i["source_vocab"].__setitem__(5, ["a"]), "source_vocab[5]"),
    "vocab entry huge": (lambda i: i["source_vocab"].__setitem__(5, "y" * 10_000), "source_vocab[5] has 10,000"),
    "vocab duplicates": (lambda i: i["source_vocab"].__setitem__(5, i["source_vocab"][6]), "duplicate tokens"),
    "vocab an object": (setter("source_vocab", value={"a": 1}), "source_vocab must be a list"),
    "vocab no specials": (lambda i: i["source_vocab"].reverse(), "must start with <pad>"),
    "task unknown name": (setter("task", "name", value="poetry"), "unknown task 'poetry'"),
    "task name a number": (setter("task", "name", value=3), "the task's name must be text"),
    "task a list": (setter("task", value=["copy"]), "task must be an object"),
    "task extra field": (setter("task", "evil", value=1), "task has unknown fields"),
    "task no name": (lambda i: i["task"].pop("name"), "task has no name"),
    "task max_len over the model": (setter("task", "max_len", value=500), "do not fit the model"),
    "task max_len a string": (setter("task", "max_len", value="6"), "max_len must be a whole number"),
    "task max_len 10**9": (setter("task", "max_len", value=10**9), "max_len must be a whole number from 1"),
    "task min_len 0": (setter("task", "min_len", value=0), "min_len must be a whole number from 1"),
    "task alphabet a list": (setter("task", "alphabet", value=["0"]), "alphabet must be text"),
    "task alphabet of another vocab": (setter("task", "alphabet", value="abcdefghij"), "not the copy task's symbols"),
    "task alphabet huge": (setter("task", "alphabet", value="".join(map(chr, range(256, 2256)))), "alphabet has"),
    "task and languages": (setter("languages", value=["en", "fr"]), "either for a toy task or for translation"),
    "neither task nor languages": (setter("task", value=None), "either for a toy task or for translation"),
    "languages one": (lambda i: (i.update(task=None, languages=["en"])), "languages must be two language codes"),
    "languages not codes": (lambda i: (i.update(task=None, languages=["en", "<script>"])), "language codes"),
    "languages numbers": (lambda i: (i.update(task=None, languages=[1, 2])), "language codes"),
    "metrics a list": (setter("metrics", value=[1]), "metrics must be an object"),
    "metrics text value": (setter("metrics", "validation", "exact_match", value="high"), "exact_match must be"),
    "metrics huge value": (setter("metrics", "validation", "exact_match", value=1e300), "exact_match must be"),
    "metrics two levels": (setter("metrics", "validation", "exact_match", value={"a": {"b": 1}}), "metrics"),
    "model a list": (setter("model", value=[1]), "model must be an object"),
    "model missing": (lambda i: i.pop("model"), "architecture is missing"),
    "model hidden text": (setter("model", "hidden", value="8"), "hidden must be a whole number"),
    "model hidden 10**9": (setter("model", "hidden", value=10**9), "hidden must be between 1 and 8,192"),
    "model layers 1000": (setter("model", "layers", value=1000), "layers must be between 1 and 16"),
    "model vocab 10**9": (setter("model", "src_vocab", value=10**9), "src_vocab must be at most"),
    "model max_tgt_len 10**9": (setter("model", "max_tgt_len", value=10**9), "max_tgt_len must be between 1 and 4,096"),
    "model bidirectional text": (setter("model", "bidirectional", value="yes"), "bidirectional must be"),
    "name a number": (setter("name", value=5), "name must be text"),
    "parameters text": (setter("parameters", value="many"), "parameters must be a whole number"),
    "tokenizers a string": (setter("tokenizers", value="x"), "tokenizers must be an object"),
    "tokenizers one side": (setter("tokenizers", value={"source": "{}"}), "exactly \"source\" and \"target\""),
    "tokenizers a number": (setter("tokenizers", value={"source": "{}", "target": 5}), "tokenizers.target"),
    "tokenizers too big": (setter("tokenizers", value=lambda: {"source": "{}", "target": "x" * 4_000_001}),
                           "tokenizers.target has 4,000,001 characters"),
    "examples 101": (setter("examples", value=[["1", "1"]] * 101), "examples must be a list of at most 100"),
    "examples a pair of three": (setter("examples", value=[["1", "1", "1"]]), "examples[0] must be"),
    "examples a number": (setter("examples", value=[["1", 1]]), "examples[0] must be"),
    "examples long text": (setter("examples", value=[["1" * 1001, "1"]]), "examples[0] must be"),
}


@pytest.mark.parametrize("edit, message", METADATA_CASES.values(), ids=METADATA_CASES.keys())
def test_every_metadata_field_is_checked_at_load(good_bytes, edit, message):
    with pytest.raises(ExplorerError, match=r"^crafted\.safetensors has an invalid config: ") as caught:
        checkpoint.from_bytes(edited(good_bytes, edit), "m", source="crafted.safetensors")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def edited_text(data: bytes, change) -> bytes:
    """The checkpoint with its config's JSON text changed (for what json.dumps cannot write)."""
    header = json.loads(data[8: 8 + int.from_bytes(data[:8], "little")])
    text = change(header["__metadata__"]["explorer"])
    return st_save(st_load(data), metadata={"explorer": text})


TEXT_CASES = {
    "training 10,000 deep": (lambda t: t.replace('"training": {', '"training": {"x": ' + "[" * 10_000 + "]" * 10_000
                                                 + ", "), "nests 10002 levels deep"),
    "metrics 100,000 deep": (lambda t: t.replace('"metrics": {', '"metrics": {"x": ' + '{"a":' * 100_000 + "1"
                                                 + "}" * 100_000 + ", "), "nests 100002 levels deep"),
    "NaN": (lambda t: t.replace('"lr": 0.003', '"lr": NaN'), "NaN is not a number JSON allows"),
    "Infinity": (lambda t: t.replace('"lr": 0.003', '"lr": Infinity'), "Infinity is not a number JSON allows"),
    "-Infinity": (lambda t: t.replace('"lr": 0.003', '"lr": -Infinity'), "-Infinity is not a number JSON allows"),
    "a number of 5,000 digits": (lambda t: t.replace('"lr": 0.003', '"lr": ' + "9" * 5000), "config"),
    "not an object": (lambda t: "[1, 2]", "unknown checkpoint format"),
    "12 MB of config": (lambda t: t.replace('"training": {', '"training": {"x": "' + "y" * 17_000_000 + '", '),
                        "header"),
}


@pytest.mark.parametrize("change, message", TEXT_CASES.values(), ids=TEXT_CASES.keys())
def test_deep_huge_or_non_json_configs_are_refused_without_recursion(good_bytes, change, message):
    data = edited_text(good_bytes, change)
    assert data != edited_text(good_bytes, lambda t: t), "the change applies"
    with pytest.raises(ExplorerError, match=r"^crafted\.safetensors ") as caught:
        checkpoint.from_bytes(data, "m", source="crafted.safetensors")
    assert message in str(caught.value), caught.value


def test_a_deep_outer_header_is_refused_without_recursion():
    header = b'{"__metadata__":{"explorer":"{}"},"x":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    data = len(header).to_bytes(8, "little") + header
    with pytest.raises(ExplorerError, match="the header nests 200001 levels deep"):
        checkpoint.from_bytes(data, "m", source="deep.safetensors")


def test_the_optional_fields_load_when_well_formed(good_bytes):
    def add(info):  # (well-formed tokenizers are test_subwords.py's: they must match a translation vocabulary)
        info["examples"] = [["123", "123"], ["45", "45"]]
    bundle = checkpoint.from_bytes(edited(good_bytes, add), "m", source="ok.safetensors")
    assert bundle.task.name == "copy"


# --- 4. weights --------------------------------------------------------------------------------------

def with_tensor(data: bytes, change) -> bytes:
    tensors = st_load(data)
    header = json.loads(data[8: 8 + int.from_bytes(data[:8], "little")])
    key = sorted(tensors)[0]
    tensors[key] = change(tensors[key])
    return st_save(tensors, metadata=header["__metadata__"])


WEIGHT_CASES = {
    "all NaN": (lambda t: torch.full_like(t, float("nan")), "holds NaN or infinite weights"),
    "one NaN": (lambda t: t.clone().view(-1).index_fill(0, torch.tensor([0]), float("nan")).view(t.shape),
                "holds NaN or infinite weights"),
    "one inf": (lambda t: t.clone().view(-1).index_fill(0, torch.tensor([0]), float("inf")).view(t.shape),
                "holds NaN or infinite weights"),
    "-inf half": (lambda t: torch.full_like(t, float("-inf")).half(), "holds NaN or infinite weights"),
    "float64": (lambda t: t.double(), "is stored as float64"),
    "bfloat16": (lambda t: t.bfloat16(), "is stored as bfloat16"),
    "int8": (lambda t: t.to(torch.int8), "is not a floating-point tensor"),
    "bool": (lambda t: t > 0, "is not a floating-point tensor"),
    "wrong shape": (lambda t: t.reshape(-1), "has shape"),
    "empty": (lambda t: t[:0], "has shape"),
}


@pytest.mark.parametrize("change, message", WEIGHT_CASES.values(), ids=WEIGHT_CASES.keys())
def test_weights_are_finite_floats_of_the_configured_shape(good_bytes, change, message):
    with pytest.raises(ExplorerError, match=message):
        checkpoint.from_bytes(with_tensor(good_bytes, change), "m", source="weights.safetensors")


def test_nan_weights_exit_2_in_the_cli(good_bytes, tmp_path, capsys):
    path = tmp_path / "nan.safetensors"
    path.write_bytes(with_tensor(good_bytes, lambda t: torch.full_like(t, float("nan"))))
    for argv in (["trace", "--checkpoint", str(path), "--input", "123"], ["info", "--checkpoint", str(path)],
                 ["eval", "--checkpoint", str(path), "--samples", "3"]):
        assert_refused(cli(argv), *capsys.readouterr(), "holds NaN or infinite weights")


# --- 5. non-regular files ------------------------------------------------------------------------------

def special_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    fifo = tmp_path / "x.safetensors"
    os.mkfifo(fifo)
    fifo_tsv = tmp_path / "pairs.tsv"
    os.mkfifo(fifo_tsv)
    (tmp_path / "zero.safetensors").symlink_to("/dev/zero")
    (tmp_path / "folder.safetensors").mkdir()
    (tmp_path / "loop.safetensors").symlink_to(tmp_path / "loop.safetensors")
    return {"/dev/zero": (Path("/dev/zero"), "not a regular file"),
            "/dev/urandom": (Path("/dev/urandom"), "not a regular file"),
            "a FIFO": (fifo, "not a regular file"),
            "a FIFO TSV": (fifo_tsv, "not a regular file"),
            "a link to /dev/zero": (tmp_path / "zero.safetensors", "not a regular file"),
            "a folder": (tmp_path / "folder.safetensors", "it is a directory"),
            "a symlink loop": (tmp_path / "loop.safetensors", "no checkpoint named")}


SPECIAL = ["/dev/zero", "/dev/urandom", "a FIFO", "a link to /dev/zero", "a folder", "a symlink loop"]


def run_with_deadline(target, seconds: float = 20.0):
    """Run `target()` in a thread; fail (instead of hanging the suite) if it blocks."""
    result: dict[str, object] = {}

    def body():
        try:
            result["value"] = target()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            result["error"] = exc
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked on a special file"
    return result


@pytest.mark.parametrize("which", SPECIAL)
def test_only_regular_checkpoint_files_are_read(tmp_path, capsys, which):
    path, message = special_files(tmp_path)[which]
    result = run_with_deadline(lambda: cli(["info", "--checkpoint", str(path)]))
    assert "error" not in result, result
    assert_refused(result["value"], *capsys.readouterr(), message)


@pytest.mark.parametrize("which", ["/dev/zero", "a FIFO TSV", "a folder"])
def test_only_regular_tsv_files_are_read(tmp_path, capsys, which):
    path, message = special_files(tmp_path)[which]
    result = run_with_deadline(lambda: cli(["train", "--data", str(path), "--out", str(tmp_path / "o"), "--quiet"]))
    assert "error" not in result, result
    assert_refused(result["value"], *capsys.readouterr(), message if which != "a folder" else "directory")


def test_a_file_growing_past_the_limit_is_read_only_up_to_it(tmp_path, monkeypatch):
    """The size check trusts nothing: a file reported small is still read with a bound."""
    path = tmp_path / "big.safetensors"
    path.write_bytes(b"\0" * 5000)
    real_stat = os.stat

    def lying_stat(p, *a, **k):
        s = real_stat(p, *a, **k)
        return os.stat_result((s.st_mode, s.st_ino, s.st_dev, s.st_nlink, s.st_uid, s.st_gid, 10,
                               s.st_atime, s.st_mtime, s.st_ctime)) if str(p) == str(path) else s
    monkeypatch.setattr(storage.os, "stat", lying_stat)
    with pytest.raises(ExplorerError, match="is over 1,000 bytes"):
        storage.read_regular(path, "checkpoint", 1000)


# --- 6. arguments that used to exit 1 ------------------------------------------------------------------

EXIT_CASES = {
    "pin 1:x": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--pin", "1:x"], "--pin expects STEP:VALUE"),
    "pin x:1": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--pin", "x:1"], "--pin expects STEP:VALUE"),
    "pin 1:": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--pin", "1:"], "--pin expects STEP:VALUE"),
    "pin 1:99999999999999999999": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--pin",
                                    "1:99999999999999999999"], "--pin expects STEP:VALUE"),
    "force x:1": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--force", "x:1"], "--force expects"),
    "temperature inf": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--temperature", "inf"],
                        "--temperature must be a finite number"),
    "mask 10**30": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--mask", str(10**30)], "--mask must be"),
    "checkpoint name of 5,000 characters": (["info", "--checkpoint", "a" * 5000], "has 5,000 characters"),
    "checkpoint part of 300 characters": (["info", "--checkpoint", "d/" + "a" * 300], "a name of 300 bytes"),
    "checkpoint empty": (["info", "--checkpoint", ""], "--checkpoint is empty"),
    "out of 5,000 characters": (["train", "--task", "copy", "--out", "a" * 5000], "has 5,000 characters"),
    "out part of 300 characters": (["train", "--task", "copy", "--out", "{tmp}/" + "b" * 300], "a name of"),
    "out 250 characters plus suffix": (["train", "--task", "copy", "--out", "{tmp}/" + "b" * 250], "a name of"),
    "data of 5,000 characters": (["eval", "--checkpoint", "{ckpt}", "--data", "c" * 5000], "has 5,000 characters"),
    "out under a file": (["train", "--task", "copy", "--steps", "1", "--out", "{ckpt}/x"], "cannot write checkpoint"),
}


@pytest.mark.parametrize("argv, message", EXIT_CASES.values(), ids=EXIT_CASES.keys())
def test_what_used_to_exit_1_exits_2_with_one_line(good_file, tmp_path, capsys, argv, message):
    argv = [a.format(ckpt=good_file, tmp=tmp_path) for a in argv]
    assert_refused(cli(argv), *capsys.readouterr(), message)


# --- 7. saves: orphans, two writers; memory budget ---------------------------------------------------------

def test_a_save_removes_orphaned_temporary_files_of_its_path(tmp_path):
    target = tmp_path / "model.safetensors"
    orphans = [tmp_path / f".model.safetensors.{tag}.tmp" for tag in ("abcd1234", "zz_9yy8x")]
    for orphan in orphans:
        orphan.write_bytes(b"half a checkpoint")
    other = tmp_path / ".other.safetensors.abcd1234.tmp"  # another path's: not ours to remove
    other.write_bytes(b"x")
    checkpoint.save(small_bundle(), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, target.name]


def test_a_second_writer_of_one_path_is_refused_while_the_first_holds_it(tmp_path):
    target = tmp_path / "model.safetensors"
    holding, release = threading.Event(), threading.Event()

    def first():
        with checkpoint.writer(target):
            holding.set()
            release.wait(30)
            checkpoint.save(small_bundle(), target)
    thread = threading.Thread(target=first)
    thread.start()
    assert holding.wait(30)
    try:
        with pytest.raises(ExplorerError, match="another process is writing .*model.safetensors right now"):
            checkpoint.save(small_bundle(), target)
    finally:
        release.set()
        thread.join(30)
    assert checkpoint.load(target).name == "model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"], "no lock or temp file is left"


def test_a_second_cli_training_to_the_same_out_is_refused(tmp_path):
    """Two real processes: the second exits 2 naming the path; the first's checkpoint is the one saved."""
    out = tmp_path / "same"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from explorer.checkpoints import checkpoint\n"
        "with checkpoint.writer(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)\n"), str(out)],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run([sys.executable, "-m", "explorer", "train", "--task", "copy", "--steps", "1",
                                 "--out", str(out), "--quiet"], cwd=REPO, capture_output=True, text=True,
                                timeout=300)
    finally:
        holder.kill()
        holder.wait(30)
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
    assert "another process is writing" in second.stderr
    assert not Path(str(out) + ".safetensors").exists()


def test_the_memory_budget_admits_what_fits_and_refuses_the_rest():
    twenty_mb = limits.training_memory(20_000_000, 3_000_000, 64, 26, 512, 1) - limits.BASE_BYTES
    assert 1.0e9 < twenty_mb < 1.8e9, "about what the review measured for a 20 MB file (~1.3 GB)"
    budget = 4_000_000_000
    limits.check_memory_budget(twenty_mb, [twenty_mb], budget)
    with pytest.raises(ExplorerError, match="the server is busy: running trainings use about"):
        limits.check_memory_budget(twenty_mb, [twenty_mb] * 2, budget)
    with pytest.raises(ExplorerError, match="this training needs about .* GB; the server allows"):
        limits.check_memory_budget(budget + 1, [], budget)


class FakeJob:
    def __init__(self, memory: int) -> None:
        self.memory, self.state, self.last_seen = memory, jobs.RUNNING, time.monotonic()

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    def stop(self) -> None:
        self.state = jobs.STOPPED


def test_the_registry_budgets_memory_not_only_the_count():
    reg = jobs.JobRegistry(max_running=4, memory_budget=4_000_000_000, reap_interval=3600)
    big = 1_300_000_000
    for session in ("a", "b", "c"):
        reg.admit(session, FakeJob(big))
    with pytest.raises(ExplorerError, match="the server is busy: running trainings use about 3.9 GB"):
        reg.admit("d", FakeJob(big))
    reg.admit("d", FakeJob(50_000_000))  # a small one still fits beside them
    with pytest.raises(ExplorerError, match="server is busy"):
        reg.admit("e", FakeJob(big))


CASES = {"1 shipped models read-only": len(SHIPPED_SPELLINGS) + 6 + 1,
         "2 limits": len(LIMIT_CASES) + 6,
         "3 metadata": len(METADATA_CASES) + len(TEXT_CASES) + 1,
         "4 weights": len(WEIGHT_CASES) + 3,
         "5 non-regular files": len(SPECIAL) + 3 + 1,
         "6 exit 1 became exit 2": len(EXIT_CASES),
         "7 saves and memory": 1 + 2 + 2}
