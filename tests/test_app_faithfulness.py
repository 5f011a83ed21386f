"""Is the attention the explanation? The Explore section, the Compare section and the Learn section under
AppTest on the shipped models: the section opens from its link (and in presenter mode), draws α beside the
attributions with the numbers the engine computed, says in words what the counterfactual α did, and the
no-attention twin gets attributions and a sentence instead of α. Figures are checked as functions."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer import faithfulness as F
from explorer.app.figures import faithfulness as fig_faith
from explorer.app.pages import faithfulness_compare, faithfulness_panel
from explorer.checkpoints import checkpoint

from app_support import drawn_charts, frame_with

TIMEOUT = 300
SHIPPED = set(checkpoint.pretrained_names())
needs = lambda *names: pytest.mark.skipif(not set(names) <= SHIPPED,  # noqa: E731
                                         reason=f"needs the shipped {', '.join(names)}")


def open_app(page: str = "../app.py", **params) -> AppTest:
    at = AppTest.from_file(page, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> dict[str, dict]:
    return drawn_charts(at)


def decode(array) -> np.ndarray:
    if isinstance(array, dict) and "bdata" in array:
        data = np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
        shape = array.get("shape")
        if isinstance(shape, str):
            shape = [int(n) for n in shape.split(",")]
        return data.reshape(shape) if shape is not None else data
    return np.asarray(array, dtype=float)


@pytest.fixture(scope="module")
def reverse_explained():
    from explorer.checkpoints.registry import load_shipped
    from explorer.engine.attribution import explain
    return explain(load_shipped("reverse"), "31415926")


@needs("reverse")
def test_the_section_opens_from_its_link_with_the_engines_numbers(reverse_explained):
    at = open_app(model="reverse", input="31415926", step="3", explore_faith="true")
    assert at.session_state["explore_faith"] is True
    drawn = charts(at)
    maps = drawn["explore_faith_fig_maps"]
    alpha = decode(maps["data"][0]["z"])
    assert np.allclose(alpha, reverse_explained.weights, atol=1e-6)
    ig = next(trace for trace in maps["data"] if trace.get("meta") == "integrated gradients")
    assert np.allclose(decode(ig["z"]), reverse_explained.attributions.importance("integrated_gradients"), atol=1e-6)
    assert any(s.get("y0") == 1.5 and s.get("y1") == 2.5 for s in maps["layout"]["shapes"]), "step 3 outlined"
    assert "explore_faith_fig_cf" in drawn and "explore_faith_fig_steps" in drawn
    text = "\n".join(m.value for m in at.markdown)
    assert "Over the sentence (9 steps)" in text
    table = frame_with(at, "same top input at this step")
    assert list(table["method"]) == [F.METHOD_NAMES[m] for m in F.METHODS]


@needs("reverse")
def test_the_section_is_closed_until_asked_and_works_in_presenter_mode():
    closed = open_app(model="reverse", input="31415926")
    assert "explore_faith_fig_maps" not in charts(closed)
    presenting = open_app(model="reverse", input="31415926", explore_faith="true", present="1")
    assert "explore_faith_fig_maps" in charts(presenting)
    presenting.button(key="explore_next").click().run()  # → in presenter mode: the section follows the step
    assert not presenting.exception
    shapes = charts(presenting)["explore_faith_fig_maps"]["layout"]["shapes"]
    assert any(s.get("y0") == 0.5 and s.get("y1") == 1.5 for s in shapes), "step 2 outlined"


@needs("reverse-none")
def test_the_no_attention_twin_gets_attributions_and_a_sentence():
    at = open_app(model="reverse-none", input="31415926", explore_faith="true")
    assert any(F.NO_ATTENTION in i.value for i in at.info)
    maps = charts(at)["explore_faith_fig_maps"]
    panels = [trace.get("meta") for trace in maps["data"] if trace["type"] == "heatmap"]
    assert panels == ["gradient × input", "integrated gradients"]


@needs("reverse")
def test_words_say_when_a_large_change_in_alpha_changed_nothing(reverse_explained):
    e = reverse_explained
    for step in range(e.steps):
        words = " ".join(faithfulness_panel.counterfactual_words(e, step))
        kept = faithfulness_panel.large_change_kept(e, step)
        assert ("A large change in α changed nothing here" in words) == kept
    assert any(faithfulness_panel.large_change_kept(e, s) for s in range(e.steps)), \
        "reverse on 31415926: some α far from the model's keeps the output"


@needs("reverse")
def test_figures_are_pure_functions_of_the_explanation(reverse_explained):
    e = reverse_explained
    a = fig_faith.importance_heatmaps(e, 2)
    b = fig_faith.importance_heatmaps(e, 2)
    assert a.to_json() == b.to_json()
    assert len([t for t in a.data if t.type == "heatmap"]) == 4
    cf = fig_faith.counterfactual_bars(e, 2)
    assert [t.type for t in cf.data] == ["bar"] * 4
    assert np.allclose(cf.data[3].y, e.counterfactuals.weights["adversarial"][2])
    steps = fig_faith.agreement_by_step(e)
    assert np.allclose(np.asarray(steps.data[0].y, dtype=float), e.agreement("grad_x_input").kendall_tau,
                       equal_nan=True)


@needs("reverse")
def test_the_heatmaps_labels_fit_four_panels_at_1024_px(reverse_explained):
    """Four panels share about 150 px each at 1024 px: eight inputs' labels ("1:3" … "8:6") are angled, not laid flat
    over each other, and a title longer than a panel ("integrated gradients") takes two lines (both overlapped in
    Chromium at 1024x768 before)."""
    fig = fig_faith.importance_heatmaps(reverse_explained, 2)
    assert {axis.tickangle for axis in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.xaxis3, fig.layout.xaxis4)} \
        == {-60}
    titles = [a.text for a in fig.layout.annotations]
    assert "integrated<br>gradients" in titles and "attention α" in titles
    assert all(len(line) <= fig_faith.TITLE_CHARS // 4 for t in titles for line in t.split("<br>"))
    few = fig_faith.importance_heatmaps(_first_three(reverse_explained), 0)
    assert few.layout.xaxis.tickangle == 0  # three one-digit inputs fit flat


@needs("reverse-none")
def test_two_panels_keep_their_titles_on_one_line():
    """Without attention the figure has two panels, each half the width: their titles fit on one line (they were
    broken as if four panels shared the width)."""
    from explorer.checkpoints.registry import load_shipped
    from explorer.engine.attribution import explain
    fig = fig_faith.importance_heatmaps(explain(load_shipped("reverse-none"), "31415926"), 2)
    assert [a.text for a in fig.layout.annotations] == ["gradient × input", "integrated gradients"]


def _first_three(e):
    """The explanation cut to its first three inputs and steps (the figure reads only these fields)."""
    import dataclasses
    return dataclasses.replace(e, source_tokens=e.source_tokens[:3], output_tokens=e.output_tokens[:3],
                               weights=e.weights[:3, :3], alignment=None if e.alignment is None else e.alignment[:3, :3],
                               attributions=dataclasses.replace(
                                   e.attributions, scores={k: v[:3, :3] for k, v in e.attributions.scores.items()},
                                   ig_delta=e.attributions.ig_delta[:3], ig_change=e.attributions.ig_change[:3]),
                               counterfactuals=None)


def _report(name: str, attention: str) -> dict:
    attends = attention != "none"
    methods = {m: {"top1_agreement": 0.9 if attends else None, "kendall_tau": 0.5 if attends else None, "jsd": 0.2}
               for m in (F.METHODS if attends else F.METHODS[:2])}
    counter = {f"{k}_flip_rate": (0.4 if attends else None) for k in F.COUNTERFACTUALS}
    return {"model": name, "attention": attention, "steps": 100, "methods": methods,
            "counterfactual": {**counter, "epsilon": 0.05, "adversarial_jsd": 0.8 if attends else None},
            "integrated_gradients": {"converged_share": 0.5}, "truth": {"alpha": 1.0 if attends else None}}


def test_the_twins_table_and_chart():
    reports = {"reverse": _report("reverse", "dot"), "reverse-none": _report("reverse-none", "none")}
    frame = faithfulness_compare.comparison_frame(reports)
    assert list(frame["model"]) == ["reverse", "reverse-none"]
    assert frame.loc[0, "top-1 IG"] == pytest.approx(90.0) and frame.loc[0, "flips uniform"] == pytest.approx(40.0)
    assert frame.loc[1, "top-1 erasure"] is None or np.isnan(frame.loc[1, "top-1 erasure"])
    fig = fig_faith.faithfulness_comparison(reports)
    assert {t.name for t in fig.data} >= {F.METHOD_NAMES[m] for m in F.METHODS}
    assert any(a.text == "no α" for a in fig.layout.annotations)


def test_the_twins_table_is_shown_one_column_per_model():
    reports = {"reverse": _report("reverse", "dot"), "reverse-none": _report("reverse-none", "none")}
    shown = faithfulness_compare.measures_by_model(faithfulness_compare.comparison_frame(reports))
    assert list(shown.columns) == ["measure", "reverse", "reverse-none"]
    by = shown.set_index("measure")
    assert by.loc["attention", "reverse-none"] == "none"
    assert by.loc["top-1 IG", "reverse"] == "90%" and by.loc["τ IG", "reverse"] == "0.50"
    assert by.loc["top-1 erasure", "reverse-none"] == "–"


@needs("reverse")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_learn_section_seven_on_a_live_model(lang):
    from explorer.app.pages.learn_text import TEXT
    from app_support import app_test
    at = app_test("learn")
    at.query_params["section"] = "7"
    at.query_params["lang"] = lang
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    t = TEXT[lang]
    assert [h.value for h in at.header] == [t["s7"]]
    assert "learn_fig_faith" in charts(at) and "learn_fig_faith_cf" in charts(at)
    body = "\n".join(m.value for m in at.markdown)
    assert t["s7_reading"] in body
