"""Property: whatever is done to a real checkpoint's header and readable config, loading it either
gives a model that works (traces an input, describes itself as strict JSON) or refuses with an
ExplorerError; never another exception, never a model that fails later.

Mutations (hypothesis draws them): a field of the config replaced by any JSON value, a field removed,
a field added; the header's bytes flipped, cut or padded; the length prefix changed.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from explorer.checkpoints import checkpoint
from explorer.errors import ExplorerError
from explorer.data.tasks import TaskSpec
from explorer.engine.trace import trace
from explorer.training.train import new_task_bundle

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])


def _real_bytes() -> bytes:
    bundle = new_task_bundle(TaskSpec("reverse", 1, 6), "fuzz", seed=4, embed=4, hidden=8, attn_dim=4)[0]
    bundle.training = {"steps": 100, "lr": 0.003, "seed": 0, "valid_fraction": 0.05, "stopped_because": "steps"}
    bundle.metrics = {"validation": {"n": 50, "exact_match": 0.5, "token_accuracy": 0.7, "alignment_accuracy": 0.6}}
    return checkpoint.to_bytes(bundle)


REAL = _real_bytes()
HEADER_LEN = int.from_bytes(REAL[:8], "little")
INFO = json.loads(json.loads(REAL[8: 8 + HEADER_LEN])["__metadata__"]["explorer"])
TENSORS = st_load(REAL)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def _paths(value, prefix=()):
    """Every path into the config (dict keys and list indices), so any leaf or branch may be hit."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list) and len(value) <= 20:
        for i, item in enumerate(value):
            yield from _paths(item, prefix + (i,))


PATHS = [p for p in _paths(INFO) if p]


def _mutated_info(path, action, value) -> dict:
    info = json.loads(json.dumps(INFO))
    parent = info
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "remove":
        parent.pop(last) if isinstance(parent, dict) else parent.pop(last)
    else:  # add beside it
        if isinstance(parent, dict):
            parent[f"extra{len(parent)}"] = value
        else:
            parent.append(value)
    return info


def assert_loads_and_works_or_refuses(data: bytes) -> None:
    try:
        bundle = checkpoint.from_bytes(data, "fuzz", source="fuzz.safetensors")
    except ExplorerError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz.safetensors"), exc
        return
    json.dumps(checkpoint.describe(bundle), allow_nan=False)  # the page and `info` can show it
    example = bundle.task_obj.examples()[0] if bundle.task_obj is not None else "hello"
    try:
        tr = trace(bundle, example)
    except ExplorerError:
        return  # a refusal of this input, with a message: still the contract
    assert len(tr.output_tokens) <= bundle.model.cfg.max_tgt_len


@FUZZ
@given(path=st.sampled_from(PATHS), action=st.sampled_from(["replace", "remove", "add"]), value=json_values)
def test_a_mutated_config_loads_and_works_or_is_refused(path, action, value):
    info = _mutated_info(path, action, value)
    assert_loads_and_works_or_refuses(st_save(TENSORS, metadata={"explorer": json.dumps(info)}))


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, HEADER_LEN + 7), st.integers(0, 255)), min_size=1, max_size=8),
       cut=st.none() | st.integers(0, len(REAL)), pad=st.binary(max_size=16))
def test_a_mutated_header_loads_and_works_or_is_refused(edits, cut, pad):
    data = bytearray(REAL)
    for position, byte in edits:
        data[position] = byte
    data = bytes(data[:cut] if cut is not None else data) + pad
    assert_loads_and_works_or_refuses(data)


@FUZZ
@given(length=st.integers(0, 2**64 - 1))
def test_any_length_prefix_loads_or_is_refused(length):
    assert_loads_and_works_or_refuses(length.to_bytes(8, "little") + REAL[8:])


def test_the_unmutated_checkpoint_loads_and_works():
    bundle = checkpoint.from_bytes(REAL, "fuzz", source="fuzz.safetensors")
    assert bundle.task.name == "reverse" and bundle.metrics == INFO["metrics"]
    assert trace(bundle, "12345").output_tokens
