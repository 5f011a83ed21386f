"""Refactors of the model change no number: traces and greedy outputs equal values stored before.

tests/fixtures/reference_values.json was written by tests/fixtures/make_reference_values.py from the
code at main before model.py became the plain reference (tanh additive score, no timing notes): three shipped
models (one additive) and random models of every score function. Float tolerance only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixtures.make_reference_values import values

STORED = json.loads((Path(__file__).parent / "fixtures" / "reference_values.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def now() -> list[dict]:
    return values()


@pytest.mark.parametrize("case", range(len(STORED)), ids=[str(c["model"]) for c in STORED])
def test_trace_and_greedy_decoding_give_the_stored_numbers(now, case):
    before, after = STORED[case], now[case]
    assert (after["model"], after["input"]) == (before["model"] if isinstance(before["model"], str)
                                                else tuple(before["model"]), before["input"])
    assert after["output_tokens"] == before["output_tokens"]
    assert after["greedy_ids"] == before["greedy_ids"]
    for name in ("scores", "weights", "contexts", "max_prob"):
        np.testing.assert_allclose(np.array(after[name]), np.array(before[name]), rtol=1e-4, atol=1e-5, err_msg=name)
