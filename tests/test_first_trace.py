"""The shipped models' stored first traces (explorer/app/first_trace.py) are what `trace()` computes now,
for the very checkpoint files shipped; anything else that asks for a stored trace gets None and is traced."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import fields

import numpy as np
import pytest

from explorer.app import first_trace
from explorer.checkpoints import checkpoint
from explorer.engine.trace import trace
from explorer.record import Trace

NAMES = checkpoint.pretrained_names()


def test_every_trace_field_is_stored():
    stored = set(first_trace._ARRAYS) | set(first_trace._TEXTS)
    assert stored | {"intervention"} == {f.name for f in fields(Trace)} and not stored & {"intervention"}


def test_every_shipped_model_has_its_first_trace():
    assert NAMES and sorted(p.stem for p in first_trace.FOLDER.glob("*.npz")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_stored_first_trace_is_what_the_model_computes(name):
    bundle = checkpoint.load_deferred(name)
    assert bundle.digest == hashlib.sha256(checkpoint.resolve(name).read_bytes()).hexdigest()
    text = first_trace.first_input(bundle)
    stored = first_trace.read(bundle, text)
    assert stored is not None, f"{name}: no stored first trace for this checkpoint (python -m explorer.app.first_trace)"
    fresh = trace(bundle, text)
    for f in fields(Trace):
        a, b = getattr(stored, f.name), getattr(fresh, f.name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape, f.name
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=f.name)
        else:
            assert a == b, f.name


def test_a_stored_trace_serves_only_its_input_and_its_checkpoint(tmp_path):
    bundle = checkpoint.load_deferred("reverse")
    text = first_trace.first_input(bundle)
    first_trace.write(bundle, bundle.digest, tmp_path)
    assert first_trace.read(bundle, text, tmp_path) is not None
    assert first_trace.read(bundle, text + "1", tmp_path) is None
    bundle.digest = "0" * 64  # another file under the same name
    assert first_trace.read(bundle, text, tmp_path) is None
    loaded = checkpoint.load("reverse")  # a bundle not read from a shipped file has no digest
    assert first_trace.read(loaded, text, tmp_path) is None


@pytest.mark.parametrize("damage", [b"", b"not a zip", b"PK\x03\x04" + b"\0" * 40])
def test_a_damaged_stored_trace_is_ignored(tmp_path, damage):
    bundle = checkpoint.load_deferred("reverse")
    shutil.copy(first_trace.path_for("reverse"), tmp_path / "reverse.npz")
    assert first_trace.read(bundle, first_trace.first_input(bundle), tmp_path) is not None
    first_trace.path_for("reverse", tmp_path).write_bytes(damage)
    assert first_trace.read(bundle, first_trace.first_input(bundle), tmp_path) is None
