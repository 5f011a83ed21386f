"""The Learn page under AppTest, in English and in Chinese: every section renders, every widget moves,
and the unshared RNN's failure on an unseen length is a message, not a traceback."""

from __future__ import annotations

import json

import pytest

from explorer.training import comparison

from explorer.app import lessons
from explorer.app.pages.learn_text import TEXT
from tests import app_support


pretrained = app_support.pretrained  # the reversal twins' folder, for this module


@pytest.fixture
def quick(monkeypatch):
    """Short lesson training and a short bottleneck curve (the page reads these at run time)."""
    monkeypatch.setattr(lessons, "LESSON_STEPS", 40)
    monkeypatch.setattr(comparison, "CURVE_LENGTHS", (1, 5, 10, 20))
    monkeypatch.setattr(comparison, "CURVE_SAMPLES", 30)


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def page_text(at) -> str:
    kinds = ("markdown", "header", "subheader", "title", "caption", "info", "error", "success")
    parts = [el.value for kind in kinds for el in at.get(kind)]
    return "\n".join(str(p) for p in parts)


def test_both_languages_have_the_same_texts():
    assert TEXT["en"].keys() == TEXT["zh"].keys()
    for key, value in TEXT["en"].items():
        assert type(value) is type(TEXT["zh"][key]), key
        if isinstance(value, str) and "_latex" not in key:  # LaTeX braces are not placeholders
            assert sorted(_fields(value)) == sorted(_fields(TEXT["zh"][key])), key


def _fields(template: str) -> list[str]:
    import string
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_renders_every_section(pretrained, quick, lang):
    at = app_support.app_test("learn").run()
    no_exception(at)
    at.segmented_control(key="learn_lang").set_value(lang).run()
    no_exception(at)
    t = TEXT[lang]
    headers, bodies, latex, errors, successes = [], [], 0, [], []
    for section in range(1, 8):  # a paced tour: one section at a time, Next to the following one
        assert at.query_params["section"] == [str(section)] or at.query_params["section"] == str(section)
        headers += [h.value for h in at.header]
        bodies.append(page_text(at))
        latex += len(at.latex)
        errors += [e.value for e in at.error]
        successes += [s.value for s in at.success]
        if section == 1:
            sampling = json.loads(at.get("plotly_chart")[0].proto.spec)
        if section < 7:
            at.button(key="learn_next").click().run()
            no_exception(at)
    assert at.button(key="learn_next").disabled and not at.button(key="learn_prev").disabled
    assert headers == [t[f"s{i}"] for i in range(1, 8)]
    assert at.title[0].value == t["title"]
    assert latex >= 6
    body = "\n".join(bodies)
    if lang == "zh":
        for term in ("时间步", "参数共享", "编码器", "解码器", "上下文向量", "信息瓶颈", "注意力", "查询", "键", "值"):
            assert term in body, term
        assert "The " not in "\n".join(headers)
    # The unshared model's failure on a length it has no W_t for: a message, never a traceback.
    assert any("W_7" in e for e in errors), errors
    # The RNN unit by hand agrees with the PyTorch module.
    assert any(s.startswith(t["s2_check"].split("{")[0]) for s in successes)
    # The figures carry the language's labels.
    assert sampling["data"][0]["name"] == t["s1_f"]
    assert sampling["layout"]["xaxis"]["title"]["text"] == t["s1_time"]


def test_widgets(pretrained, quick):
    at = app_support.app_test("learn").run()
    no_exception(at)
    # 1. sampling
    at.radio(key="learn_signal_en").set_value("chirp").run()
    at.slider(key="learn_n").set_value(64).run()
    no_exception(at)
    assert "N = 64" in page_text(at)
    # Switching the language keeps every choice (the radio's labels change: it is one widget per language).
    at.segmented_control(key="learn_lang").set_value("zh").run()
    no_exception(at)
    assert at.radio(key="learn_signal_zh").value == "chirp" and at.slider(key="learn_n").value == 64
    at.radio(key="learn_signal_zh").set_value("wave").run()
    at.segmented_control(key="learn_lang").set_value("en").run()
    assert at.radio(key="learn_signal_en").value == "wave"
    at.button(key="learn_next").click().run()
    # 2. the unit by hand: steps, another input, a GRU model (the twins are GRUs)
    at.slider(key="learn_rnn_step").set_value(3).run()
    no_exception(at)
    assert "t = 3" in page_text(at)
    at.selectbox(key="learn_rnn_model").set_value("reverse").run()
    no_exception(at)
    assert "nn.GRU" in page_text(at)
    at.text_input(key="learn_rnn_input").set_value("7").run()  # one step: no slider, no error
    no_exception(at)
    at.button(key="learn_next").click().run()
    # 3. sharing: sizes, a seen length (both models run), an unseen one (a message)
    at.number_input(key="learn_share_hidden").set_value(64).run()
    at.slider(key="learn_share_length").set_value(10).run()
    at.text_input(key="learn_share_input").set_value("3141").run()
    no_exception(at)
    assert not any("W_" in e.value for e in at.error)
    at.text_input(key="learn_share_input").set_value("314159265358").run()
    no_exception(at)
    assert any("W_7" in e.value for e in at.error)
    at.text_input(key="learn_share_input").set_value("31x").run()  # an unknown symbol: a message
    no_exception(at)
    at.button(key="learn_next").click().run()
    # 4. encoder–decoder: the plain twin by default, stepping, a shorter input
    assert at.selectbox(key="learn_ed_model").value == "reverse-none"
    at.slider(key="learn_ed_step").set_value(2).run()
    at.text_input(key="learn_ed_input").set_value("123").run()
    no_exception(at)
    at.button(key="learn_last").click().run()
    # 7. is attention an explanation: stepping, the no-attention twin (no α to compare), bad input
    no_exception(at)
    assert at.selectbox(key="learn_faith_model").value == "reverse"
    at.slider(key="learn_faith_step").set_value(3).run()
    no_exception(at)
    assert any(p.proto.page == "" and "step=3" in p.proto.query_string and "explore_faith=true" in p.proto.query_string
               for p in at.get("page_link"))
    at.selectbox(key="learn_faith_model").set_value("reverse-none").run()
    no_exception(at)
    assert TEXT["en"]["s7_none"] in [i.value for i in at.info]
    at.text_input(key="learn_faith_input").set_value("").run()
    no_exception(at)
    assert at.error
    at.button(key="learn_prev").click().run()
    # 6. attention: stepping, another model, bad input
    assert at.selectbox(key="learn_attn_model").value == "reverse"
    at.slider(key="learn_attn_step").set_value(4).run()
    no_exception(at)
    assert any(p.proto.page == "" and "step=4" in p.proto.query_string for p in at.get("page_link"))  # the root
    at.selectbox(key="learn_attn_model").set_value(app_support_lesson()).run()
    no_exception(at)
    at.text_input(key="learn_attn_input").set_value("").run()
    no_exception(at)
    assert at.error


def app_support_lesson() -> str:
    from explorer.app.pages.learn import LESSON_RNN
    return LESSON_RNN


def test_a_link_opens_a_section_and_section_5_states_the_real_parameter_counts(pretrained, quick):
    """`?section=5` opens the bottleneck section; its text gives each model's parameter count as computed
    (the twins differ: attention has its own projections), not "exactly the same size"."""
    from explorer.app.pages import common
    at = app_support.app_test("learn")
    at.query_params["section"] = "5"
    at.run()
    no_exception(at)
    assert [h.value for h in at.header] == [TEXT["en"]["s5"]]
    body = page_text(at)
    counts = {n: common.get_model(n).parameter_count for n in ("reverse", "reverse-none")}
    assert len(set(counts.values())) == 2, "the twins should differ in size (attention's own weights)"
    for name, count in counts.items():
        assert f"{name} {count:,}" in body
    assert "exactly" not in body and "完全相同" not in TEXT["zh"]["s5_text"]
    at.button(key="learn_prev").click().run()
    assert [h.value for h in at.header] == [TEXT["en"]["s4"]]
    assert at.query_params["section"] in (["4"], "4")
    at.query_params["section"] = "x"
    at.run()
    no_exception(at)
    assert at.warning and [h.value for h in at.header] == [TEXT["en"]["s4"]]


def test_a_chinese_link_opens_in_chinese_and_the_address_keeps_the_language(pretrained, quick):
    """`?section=5&lang=zh` opens section 5 in Chinese (it opened in English), and the address says `lang`."""
    at = app_support.app_test("learn")
    at.query_params["section"] = "5"
    at.query_params["lang"] = "zh"
    at.run()
    no_exception(at)
    assert [h.value for h in at.header] == [TEXT["zh"]["s5"]]
    at.segmented_control(key="learn_lang").set_value("en").run()
    assert at.query_params["lang"] in (["en"], "en")
    assert [h.value for h in at.header] == [TEXT["en"]["s5"]]


def test_the_page_keeps_its_places_when_a_links_problem_comes_and_goes(quick):
    """A bad `?section=` warned on the first run only, moving every element after it on the next (each then drawn
    anew, and the old ← → buttons, with their keys, beside the new until the run ended)."""
    plain, first, after, warnings = app_support.places_around_a_bad_link("learn", "section", "two", "'two'")
    assert not warnings
    assert any(key.endswith("learn_next") for key in first)
    assert after == first == plain
