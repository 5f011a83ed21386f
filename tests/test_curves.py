"""The shipped models' stored accuracy-by-length curves (pretrained/curves.json): they are what the models
compute, they are used only for the exact checkpoint file they were computed from, and the Compare page
shows them without computing anything."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from explorer.checkpoints import checkpoint

from explorer.training import comparison
from tests import app_support

SHIPPED = checkpoint.PRETRAINED_DIR
TWINS = ("reverse", "reverse-none")
needs_shipped = pytest.mark.skipif(not (SHIPPED / comparison.CURVES_FILE).exists() or not app_support.shipped_twins(),
                                   reason="pretrained/ has no stored curves")


@needs_shipped
@pytest.mark.parametrize("name", TWINS)
def test_the_stored_curve_is_what_the_model_computes(name):
    lengths = (3, 17, 33)  # inside the training range, near its end, beyond it
    stored = comparison.stored_curve(SHIPPED / f"{name}.safetensors", lengths)
    assert stored is not None
    fresh = comparison.length_curve(checkpoint.load(name), lengths)
    assert stored.lengths == fresh.lengths and stored.trained == fresh.trained
    for got, want in zip(stored.rows, fresh.rows):
        assert got == pytest.approx(want, abs=1e-12, nan_ok=True), got["length"]


@needs_shipped
def test_every_shipped_sequence_model_has_a_stored_curve():
    for name in checkpoint.pretrained_names():
        bundle = checkpoint.load(name)
        if comparison.has_curve(bundle):
            curve = comparison.stored_curve(SHIPPED / f"{name}.safetensors")
            assert curve is not None, f"{name}: run python scripts/report_pretrained.py --curves"
            assert curve.lengths == comparison.CURVE_LENGTHS


@pytest.fixture
def store(tmp_path, trained_copy) -> Path:
    """A folder with one checkpoint and a stored curve for it (short, to keep the test fast)."""
    path = checkpoint.save(trained_copy.bundle, tmp_path / "tiny")
    comparison.store_curves([(path, trained_copy.bundle)], lengths=(1, 4), samples=10)
    return path


def test_a_stored_curve_is_used_only_for_its_own_file_and_settings(store, tmp_path, trained_copy):
    assert comparison.stored_curve(store, (1, 4), samples=10) is not None
    assert comparison.stored_curve(store, (1, 4), samples=11) is None  # other settings: compute
    assert comparison.stored_curve(store, (1, 5), samples=10) is None
    assert comparison.stored_curve(store, (1, 4), samples=10, seed=1) is None
    other = trained_copy.bundle
    with_other_weights = app_support.copy_of(other, "tiny")
    with_other_weights.model.out.bias.data.add_(1.0)
    checkpoint.save(with_other_weights, store)  # same name, other bytes: the record no longer applies
    assert comparison.stored_curve(store, (1, 4), samples=10) is None


@pytest.mark.parametrize("content", ["", "not json", "[]", '{"tiny.safetensors": {"sha256": 1}}'])
def test_a_broken_store_means_computing_not_an_error(store, content):
    (store.parent / comparison.CURVES_FILE).write_text(content)
    assert comparison.stored_curve(store, (1, 4), samples=10) is None


def test_a_curve_read_back_equals_the_one_stored(store, trained_copy):
    fresh = comparison.length_curve(trained_copy.bundle, (1, 4), samples=10)
    stored = comparison.stored_curve(store, (1, 4), samples=10)
    assert (stored.model, stored.attention, stored.lengths, stored.rows, stored.trained) == \
        (fresh.model, fresh.attention, fresh.lengths, fresh.rows, fresh.trained)


@needs_shipped
def test_the_compare_page_shows_the_stored_curves_without_computing(monkeypatch, tmp_path):
    folder = tmp_path / "pretrained"
    folder.mkdir()
    for name in TWINS:
        shutil.copy(SHIPPED / f"{name}.safetensors", folder)
    shutil.copy(SHIPPED / comparison.CURVES_FILE, folder)

    def no_computing(*args, **kwargs):
        raise AssertionError("the curve was computed, not read")
    monkeypatch.setattr(comparison, "length_curve", no_computing)
    with app_support.pretrained_at(folder):
        at = app_support.app_test("compare").run()
        assert not at.exception, [e.value for e in at.exception]
        table = app_support.frame_with(at, "length").set_index("length")
    stored = json.loads((folder / comparison.CURVES_FILE).read_text())["reverse.safetensors"]["rows"]
    assert list(table["reverse exact_match"]) == [row["exact_match"] for row in stored]
