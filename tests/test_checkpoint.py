"""Checkpoints (explorer/checkpoints/checkpoint.py): a faithful round trip, atomic writes, and a clear
ExplorerError for every way a file can be wrong, without ever running code from it."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from explorer.checkpoints import checkpoint
from explorer.errors import ExplorerError
from explorer.engine.trace import trace


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


def with_config(bundle, edit) -> bytes:
    """The bundle's checkpoint bytes with its readable config changed by `edit(info)`."""
    tensors = {k: v.detach().contiguous() for k, v in bundle.model.state_dict().items()}
    info = checkpoint.describe(bundle)
    edit(info)
    return st_save(tensors, metadata={"explorer": json.dumps(info)})


# --- round trip -----------------------------------------------------------------------------------


def test_a_checkpoint_round_trips_weights_config_vocabularies_task_and_record(trained_copy, tmp_path):
    bundle = trained_copy.bundle
    path = checkpoint.save(bundle, tmp_path / "copy")
    assert path == tmp_path / "copy.safetensors", "the suffix is added"
    loaded = checkpoint.load(path)
    assert_same_weights(bundle.model, loaded.model)
    assert loaded.model.cfg == bundle.model.cfg
    assert loaded.src_vocab == bundle.src_vocab and loaded.tgt_vocab == bundle.tgt_vocab
    assert loaded.task == bundle.task and loaded.languages is None
    assert loaded.training == json.loads(json.dumps(bundle.training))
    assert loaded.metrics == bundle.metrics and loaded.metrics["validation"]["exact_match"] >= 0.9
    assert loaded.name == "copy" and not loaded.model.training
    before, after = trace(bundle, "12345"), trace(loaded, "12345")
    assert before.output_tokens == after.output_tokens
    assert (before.weights == after.weights).all() and (before.probs == after.probs).all()


def test_every_architecture_round_trips_through_bytes(random_bundle):
    loaded = checkpoint.from_bytes(checkpoint.to_bytes(random_bundle), "model", source="upload")
    assert loaded.model.cfg == random_bundle.model.cfg
    assert_same_weights(random_bundle.model, loaded.model)


def test_half_precision_checkpoints_are_smaller_and_load_as_float32(trained_copy, tmp_path):
    bundle = trained_copy.bundle
    full = checkpoint.save(bundle, tmp_path / "full.safetensors")
    half = checkpoint.save(bundle, tmp_path / "half.safetensors", half=True)
    assert half.stat().st_size < 0.6 * full.stat().st_size
    loaded = checkpoint.load(half)
    for key, value in bundle.model.state_dict().items():
        restored = loaded.model.state_dict()[key]
        assert restored.dtype == torch.float32
        torch.testing.assert_close(restored, value, rtol=1e-3, atol=1e-4)
    assert trace(loaded, "31415").output_tokens == trace(bundle, "31415").output_tokens


def test_a_shipped_name_resolves_to_the_pretrained_folder(trained_copy, tmp_path, monkeypatch):
    checkpoint.save(trained_copy.bundle, tmp_path / "tiny.safetensors")  # before it is the shipped folder
    monkeypatch.setattr(checkpoint, "PRETRAINED_DIR", tmp_path)
    assert checkpoint.pretrained_names() == ["tiny"]
    assert checkpoint.load("tiny").name == "tiny"
    with pytest.raises(ExplorerError, match=r"no checkpoint named 'tin' \(shipped: tiny\) and no such file"):
        checkpoint.load("tin")


# --- atomic writes ----------------------------------------------------------------------------------


@pytest.fixture
def previous_file(make_random_bundle, tmp_path) -> tuple[Path, bytes]:
    """A checkpoint already on disk, and its bytes."""
    path = checkpoint.save(make_random_bundle(seed=1), tmp_path / "model.safetensors")
    return path, path.read_bytes()


def assert_previous_file_survived(previous_file) -> None:
    path, data = previous_file
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "no temporary file is left behind"
    checkpoint.load(path)


def test_a_failed_rename_leaves_the_previous_file_intact(make_random_bundle, previous_file, monkeypatch):
    def refuse(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(checkpoint.os, "replace", refuse)
    with pytest.raises(ExplorerError, match="cannot write checkpoint .*No space left on device"):
        checkpoint.save(make_random_bundle(seed=2), previous_file[0])
    assert_previous_file_survived(previous_file)


class HalfWritingFile:
    """A file that writes half of what it is given, then fails like a full disk."""

    def __init__(self, f) -> None:
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()

    def write(self, data: bytes) -> int:
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        raise OSError(28, "No space left on device")

    def __getattr__(self, name):
        return getattr(self.f, name)


def test_a_write_failing_midway_leaves_the_previous_file_intact(make_random_bundle, previous_file, monkeypatch):
    real_fdopen = os.fdopen
    monkeypatch.setattr(checkpoint.os, "fdopen", lambda fd, mode: HalfWritingFile(real_fdopen(fd, mode)))
    with pytest.raises(ExplorerError, match="cannot write checkpoint"):
        checkpoint.save(make_random_bundle(seed=2), previous_file[0])
    assert_previous_file_survived(previous_file)


def test_an_interrupt_midway_leaves_the_previous_file_intact(make_random_bundle, previous_file, monkeypatch):
    def interrupted(fd):
        raise KeyboardInterrupt
    monkeypatch.setattr(checkpoint.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(make_random_bundle(seed=2), previous_file[0])
    assert_previous_file_survived(previous_file)


def test_an_unwritable_destination_is_a_clear_error(make_random_bundle, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ExplorerError, match="cannot write checkpoint"):
        checkpoint.save(make_random_bundle(), blocker / "model.safetensors")


# --- files that are not (good) checkpoints -------------------------------------------------------------


class Payload:
    """Unpickling this creates the marker file: what a hostile .pt file could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def test_a_pickle_payload_is_refused_without_running_it(tmp_path):
    live = tmp_path / "proof-the-payload-is-live"
    pickle.loads(pickle.dumps(Payload(live)))
    assert live.exists(), "unpickling the payload does create its marker"

    marker = tmp_path / "payload-ran"
    for name, write in [("raw.pt", lambda p: p.write_bytes(pickle.dumps({"weights": Payload(marker)}))),
                        ("torch.pt", lambda p: torch.save({"weights": Payload(marker)}, p)),
                        ("disguised.safetensors", lambda p: p.write_bytes(pickle.dumps(Payload(marker))))]:
        path = tmp_path / name
        write(path)
        with pytest.raises(ExplorerError, match="not an Attention Explorer checkpoint.*pickled .pt files are refused"):
            checkpoint.load(path)
        assert not marker.exists(), f"{name}: loading ran the payload"


@pytest.mark.parametrize("data, message", [
    (b"", "the file is empty or truncated"),
    (b"\x00\x01", "the file is empty or truncated"),
    (bytes(range(256)) * 40, "not an Attention Explorer checkpoint"),
    (b"PK\x03\x04" + b"\x00" * 100, "not an Attention Explorer checkpoint"),
    ((12).to_bytes(8, "little") + b"not json at all", "without an Attention Explorer config"),
    ((2).to_bytes(8, "little") + b"[]", "without an Attention Explorer config"),
    ((0).to_bytes(8, "little"), "not an Attention Explorer checkpoint"),
])
def test_garbage_is_refused_with_a_clear_message(tmp_path, data, message):
    path = tmp_path / "garbage.safetensors"
    path.write_bytes(data)
    with pytest.raises(ExplorerError, match=message):
        checkpoint.load(path)


def test_a_truncated_checkpoint_is_refused(make_random_bundle, tmp_path):
    data = checkpoint.to_bytes(make_random_bundle())
    header = 8 + int.from_bytes(data[:8], "little")
    for cut in (4, header // 2, header + 10, len(data) - 1):
        with pytest.raises(ExplorerError, match="empty or truncated|not an Attention Explorer checkpoint|corrupt"):
            checkpoint.from_bytes(data[:cut], "model", source="cut.safetensors")


def test_a_safetensors_file_without_our_config_is_refused(tmp_path):
    path = tmp_path / "foreign.safetensors"
    path.write_bytes(st_save({"weight": torch.zeros(3, 3)}))
    with pytest.raises(ExplorerError, match="a safetensors file without an Attention Explorer config"):
        checkpoint.load(path)
    path.write_bytes(st_save({"weight": torch.zeros(3, 3)}, metadata={"explorer": '{"format": "other/9"}'}))
    with pytest.raises(ExplorerError, match="unknown checkpoint format 'other/9'"):
        checkpoint.load(path)


def test_weights_that_do_not_fit_the_architecture_are_refused(make_random_bundle):
    bundle = make_random_bundle(hidden=128)

    def claim_hidden_64(info):
        info["model"]["hidden"] = 64
    # the GRU's first weight is (3H, E): 3 × 128 in the file where the config implies 3 × 64
    shapes = r"\S+ has shape \(384, 6\), expected \(192, 6\)"
    with pytest.raises(ExplorerError, match=r"liar.safetensors does not match its architecture: " + shapes):
        checkpoint.from_bytes(with_config(bundle, claim_hidden_64), "model", source="liar.safetensors")

    tensors = st_load(checkpoint.to_bytes(bundle))
    del tensors["out.bias"]
    info = json.dumps(checkpoint.describe(bundle))
    with pytest.raises(ExplorerError, match=r"does not match its architecture: missing \['out.bias'\]"):
        checkpoint.from_bytes(st_save(tensors, metadata={"explorer": info}), "model", source="short.safetensors")
    tensors = st_load(checkpoint.to_bytes(bundle))
    tensors["out.weight"] = tensors["out.weight"].to(torch.int32)
    with pytest.raises(ExplorerError, match="out.weight is not a floating-point tensor"):
        checkpoint.from_bytes(st_save(tensors, metadata={"explorer": info}), "model", source="ints.safetensors")


def test_vocabularies_that_do_not_fit_the_model_are_refused(make_random_bundle):
    def drop_a_symbol(info):
        info["source_vocab"] = info["source_vocab"][:-1]
    with pytest.raises(ExplorerError, match=r"vocabularies \(13, 14 tokens\) do not match the model \(14, 14\)"):
        checkpoint.from_bytes(with_config(make_random_bundle(), drop_a_symbol), "model", source="vocab.safetensors")


@pytest.mark.parametrize("edit, message", [
    (lambda info: info["model"].update(hidden="8"), "invalid config: hidden must be a whole number"),
    (lambda info: info["model"].update(hidden=8.5), "invalid config: hidden must be a whole number"),
    (lambda info: info["model"].update(cell="eval"), "invalid config: cell must be one of"),
    (lambda info: info["model"].update(dropout=[1]), "invalid config: dropout must be a finite number"),
    (lambda info: info["model"].update(max_tgt_len=10**9), "invalid config: max_tgt_len must be between 1 and 4,096"),
    (lambda info: info.update(model=[1, 2]), "invalid config"),
    (lambda info: info.pop("model"), "invalid config"),
    (lambda info: info.update(source_vocab=["a", "b"]), "invalid config: vocabulary must start with <pad>"),
    (lambda info: info.update(task={"name": "copy", "evil": 1}), "invalid config"),
])
def test_a_hostile_or_broken_config_is_refused(make_random_bundle, edit, message):
    with pytest.raises(ExplorerError, match=message):
        checkpoint.from_bytes(with_config(make_random_bundle(), edit), "model", source="hostile.safetensors")


@pytest.mark.parametrize("size", [10**6, 10**9])
@pytest.mark.parametrize("field", ["hidden", "embed", "attn_dim"])
def test_a_config_claiming_a_huge_model_is_refused_before_anything_is_allocated(make_random_bundle, field, size):
    """A few bytes of config must not make the loader allocate terabytes (or crash trying)."""
    def claim_huge(info):
        info["model"][field] = size
    with pytest.raises(ExplorerError, match="huge.safetensors (does not match its architecture|has an invalid config)"):
        checkpoint.from_bytes(with_config(make_random_bundle(), claim_huge), "model", source="huge.safetensors")


def test_a_missing_file_or_a_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ExplorerError, match="no checkpoint named .* and no such file"):
        checkpoint.load(tmp_path / "missing.safetensors")
    with pytest.raises(ExplorerError, match="cannot read checkpoint"):
        checkpoint.load(tmp_path)


def test_an_oversized_file_is_refused_before_it_is_read(make_random_bundle, tmp_path, monkeypatch):
    path = checkpoint.save(make_random_bundle(), tmp_path / "big.safetensors")
    monkeypatch.setattr(checkpoint, "MAX_CHECKPOINT_BYTES", 100)
    with pytest.raises(ExplorerError, match="checkpoints are at most 100"):
        checkpoint.load(path)


def test_loading_a_checkpoint_stays_cheap_on_a_cold_process(make_random_bundle, tmp_path):
    """The shape check builds a storage-less skeleton; initialising it on the meta device used to import
    torch._dynamo (1.5 s of every server's cold start). A fresh process that loads one must not."""
    import subprocess
    import sys
    path = checkpoint.save(make_random_bundle(), tmp_path / "cold.safetensors")
    code = ("import sys; from explorer.checkpoints import checkpoint; b = checkpoint.load(sys.argv[1]); "
            "assert b.model.embed.weight.abs().sum() > 0; print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_skeleton_has_the_models_shapes_without_storage(make_random_bundle):
    from explorer.engine.model import Seq2Seq
    bundle = make_random_bundle()
    with torch.device("meta"):
        skeleton = Seq2Seq(bundle.model.cfg)
    real = bundle.model.state_dict()
    assert {k: v.shape for k, v in skeleton.state_dict().items()} == {k: v.shape for k, v in real.items()}
    assert all(v.is_meta for v in skeleton.state_dict().values())
