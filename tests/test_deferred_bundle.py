"""A shipped model read deferred (checkpoint.load_deferred): its header now, its weights on first use, with the same
checks and the same model as an eager load."""

from __future__ import annotations

import copy
import threading

import pytest
import torch

from explorer.checkpoints import checkpoint
from explorer.engine.bundle import DeferredBundle, ModelBundle
from explorer.errors import ExplorerError


def test_the_header_comes_first_and_the_model_is_the_eager_loads():
    deferred, eager = checkpoint.load_deferred("reverse"), checkpoint.load("reverse")
    assert isinstance(deferred, DeferredBundle) and not deferred.built
    assert deferred.cfg == eager.cfg and deferred.title == eager.title and deferred.examples == eager.examples
    assert not deferred.built
    got, want = deferred.model.state_dict(), eager.model.state_dict()
    assert deferred.built and not deferred.model.training
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_a_model_first_used_in_inference_mode_can_still_be_differentiated():
    """The attribution (Captum) needs gradients through the shipped model; a trace (inference mode) often builds it."""
    bundle = checkpoint.load_deferred("reverse")
    with torch.inference_mode():
        bundle.model
    weight = next(bundle.model.parameters())
    assert not weight.is_inference()
    (weight.detach().requires_grad_() * 2).sum().backward()


def test_sessions_asking_at_once_get_one_model():
    bundle = checkpoint.load_deferred("reverse")
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(bundle.model)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and all(m is seen[0] for m in seen)


def test_a_copy_is_a_plain_bundle_with_its_own_model():
    bundle = checkpoint.load_deferred("reverse")
    clone = copy.deepcopy(bundle)
    assert type(clone) is ModelBundle and clone.model is not bundle.model
    assert clone.cfg == bundle.cfg and clone.name == bundle.name
    assert all(torch.equal(a, b) for a, b in zip(clone.model.parameters(), bundle.model.parameters()))


def test_bad_weights_are_refused_when_the_model_is_first_used(tmp_path):
    eager = checkpoint.load("reverse")
    with torch.no_grad():
        next(eager.model.parameters())[0, 0] = float("nan")
    path = tmp_path / "nan.safetensors"
    path.write_bytes(checkpoint.to_bytes(eager))
    bundle = checkpoint.load_deferred(str(path))
    assert bundle.title  # the header is fine
    with pytest.raises(ExplorerError, match="NaN or infinite"):
        bundle.model
