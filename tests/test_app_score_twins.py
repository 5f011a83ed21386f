"""Compare's score-function section under AppTest: the twins' sharpness is what decoding computes, each
heatmap is that twin's trace of the one input, and the URL keeps the input."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from explorer.checkpoints import checkpoint

from explorer.training import comparison
from explorer.engine import score_functions as sf
from explorer.engine.trace import trace
from tests import app_support


pretrained = app_support.pretrained  # the reversal twins' folder, for this module


@pytest.fixture
def short_curve(monkeypatch):
    monkeypatch.setattr(comparison, "CURVE_LENGTHS", (10, 20))
    monkeypatch.setattr(comparison, "CURVE_SAMPLES", 20)


def z_of(spec: dict) -> np.ndarray:
    z = spec["data"][0]["z"]
    if isinstance(z, dict):
        shape = [int(n) for n in str(z["shape"]).split(",")]
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return np.asarray(z)


def test_the_twins_side_by_side(pretrained, short_curve):
    at = app_support.app_test("compare")
    at.query_params["twins"] = "8462"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    bundles = sf.twins([checkpoint.load(n) for n in checkpoint.pretrained_names()])
    names = [b.name for b in bundles]
    assert names[0] == "reverse" and names[-1] == "reverse-none"
    frame = app_support.frame_with(at, "mean peak weight")
    assert list(frame["model"]) == names
    want = [sf.sharpness(b, sf.sample_inputs(bundles[0])) for b in bundles]
    np.testing.assert_allclose(frame["mean peak weight"].astype(float), [w.mean_peak or np.nan for w in want],
                               rtol=1e-6)
    np.testing.assert_allclose(frame["exact match (sample)"], [w.exact_match for w in want])
    assert frame["mean peak weight"].iloc[-1] is None or np.isnan(frame["mean peak weight"].iloc[-1])
    assert at.session_state["compare_twins_input"] == "8462"
    for b in bundles:
        if b.model.cfg.attention == "none":
            continue
        chart = next(el for el in at.get("plotly_chart") if el.proto.id.endswith(f"compare_twins_heat_{b.name}"))
        weights = trace(b, "8462").weights
        np.testing.assert_allclose(z_of(json.loads(chart.proto.spec)), weights, rtol=1e-6)
        assert any(f"{sf.mean_peak(weights):.3f}" in c.value for c in at.caption)
    at.text_input(key="compare_twins_input").set_value("12345")
    at.run()
    assert at.query_params["twins"] in ("12345", ["12345"])
    at.text_input(key="compare_twins_input").set_value("12a")
    at.run()
    assert not at.exception
    assert any("unknown symbol" in e.value for e in at.error)


def test_sharpness_reads_the_decoding(pretrained):
    bundle = checkpoint.load("reverse")
    sources = sf.sample_inputs(bundle, 6, seed=3)
    got = sf.sharpness(bundle, sources)
    peaks, spreads = [], []
    for s in sources:
        tr = trace(bundle, "".join(s))
        peaks += list(tr.weights.max(axis=1))
        spreads += list(tr.scores.std(axis=1))
    assert got.steps == len(peaks)
    assert got.mean_peak == pytest.approx(np.mean(peaks), rel=1e-5)
    assert got.score_spread == pytest.approx(np.mean(spreads), rel=1e-4)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_learn_tour_says_what_scaling_changes_with_the_twins_numbers(pretrained, monkeypatch, lang):
    from explorer.app import lessons
    from explorer.app.pages.learn_text import TEXT
    monkeypatch.setattr(lessons, "LESSON_STEPS", 40)
    monkeypatch.setattr(comparison, "CURVE_LENGTHS", (1, 10))
    monkeypatch.setattr(comparison, "CURVE_SAMPLES", 20)
    at = app_support.app_test("learn")
    at.session_state["learn_section"] = 6  # the tour shows one section at a time: attention is the sixth
    at.run()
    at.segmented_control(key="learn_lang").set_value(lang).run()
    assert not at.exception, [e.value for e in at.exception]
    bundles = {b.model.cfg.attention: b for b in sf.twins([checkpoint.load(n) for n in checkpoint.pretrained_names()])}
    sources = sf.sample_inputs(bundles["dot"])
    dot, scaled = sf.sharpness(bundles["dot"], sources), sf.sharpness(bundles["scaled_dot"], sources)
    (note,) = [m.value for m in at.markdown if m.value.startswith(TEXT[lang]["s6_scaling"][:12])]
    for number in (f"{dot.score_spread:.1f}", f"{scaled.score_spread:.1f}", f"{scaled.dot_spread:.1f}",
                   f"{dot.mean_peak:.3f}", f"{scaled.mean_peak:.3f}"):
        assert number in note
    assert scaled.dot_spread == pytest.approx(scaled.score_spread * 8.0) and scaled.attn_dim == 64
