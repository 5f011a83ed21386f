"""The Learn page: the seed's argument as a guided tour, in its order, each step with a live widget.

UI only: the numbers come from `explorer.app.lessons` (and `comparison` for the bottleneck curve), the
figures from `explorer.app.figures.lessons`, every text from `learn_text` in the chosen language.
Session keys start with `learn_`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st

from explorer import equations
from explorer.errors import ExplorerError
from explorer.app.figures import lessons as lfig
from explorer.app.figures.compare import accuracy_by_length_figure
from explorer.app.figures.style import plotly_config
from explorer.app.figures import faithfulness as fig_faith
from explorer.app.pages import addresses, common, faithfulness_panel, landing, presenter, score_twins
from explorer.app.pages.learn_text import LANGUAGES, text
from explorer.app.engine_link import engine_module

lessons = engine_module("explorer.app.lessons")
attribution = engine_module("explorer.engine.attribution")
comparison = engine_module("explorer.training.comparison")

LESSON_RNN = "lesson-rnn"  # the page's own tiny tanh RNN (not in the model registry)
LESSON_RNN_LABEL = "lesson-rnn (tanh RNN)"  # the same in both languages: see _localized_key
PREFERRED_INPUT = "31415926"
TRANSLATION_INPUT = "How can we use variable input lengths?"  # the article's own example
SAMPLING_NS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 200)
VECTOR_COMPONENTS = 16  # components shown of a long vector
BOTTLENECK_MARKS = (10, 20, 30, 40)


@st.cache_resource(show_spinner=False)
def lesson_models(steps: int):
    """The shared and unshared tiny copy RNNs, trained once per server and never changed."""
    return lessons.train_lesson_models(steps)


def _lesson_pair():
    return lesson_models(lessons.LESSON_STEPS)


def _bundle(name: str):
    return _lesson_pair()[0] if name == LESSON_RNN else common.get_model(name)


def _trace(name: str, source: str):
    if name == LESSON_RNN:
        from explorer.engine.trace import trace
        return common.cached(("learn_trace", LESSON_RNN, lessons.LESSON_STEPS, source),
                             lambda: trace(_bundle(LESSON_RNN), source))
    return common.cached_trace(name, source)


def _names(keep: Callable) -> list[str]:
    """Registry models (shipped first, then this session's) that a widget can show."""
    out = []
    for name in common.model_names():
        bundle = common.model_or_none(name)
        if bundle is not None and keep(bundle):
            out.append(name)
    return out


def _default_input(bundle, preferred: str = PREFERRED_INPUT) -> str:
    """The preferred input if this toy model has a right answer for it, else one of its own examples."""
    if bundle.task_obj is None:
        return TRANSLATION_INPUT
    try:
        bundle.prepare(preferred)
        if bundle.ground_truth(bundle.tokenize_source(preferred)) is not None:
            return preferred
    except ExplorerError:
        pass
    return bundle.task_obj.examples()[0]


def _model_and_input(prefix: str, options: list[str], default: str, t: dict, preferred: str = PREFERRED_INPUT):
    """A model picker and an input box; picking another model resets the input to one it reads."""
    key_model, key_input = f"learn_{prefix}_model", f"learn_{prefix}_input"
    if st.session_state.get(key_model) not in options:
        st.session_state[key_model] = default

    def reset_input() -> None:
        st.session_state[key_input] = _default_input(_bundle(st.session_state[key_model]), preferred)

    left, right = st.columns([3, 2])
    name = left.selectbox(t["model"], options, key=key_model, on_change=reset_input,
                          format_func=lambda n: LESSON_RNN_LABEL if n == LESSON_RNN else n)
    if key_input not in st.session_state:
        st.session_state[key_input] = _default_input(_bundle(name), preferred)
    source = right.text_input(t["input"], key=key_input)
    return name, source


def _localized_key(name: str, lang: str) -> str:
    """The key of a widget whose option labels depend on the language, one per language.

    Streamlit keeps showing a keyed radio's or selectbox's old labels (or no selection) when only its
    labels change, so each language gets its own widget; the value lives on in `learn_<name>`.
    """
    key, store = f"learn_{name}_{lang}", f"learn_{name}"
    fresh = st.session_state.get("learn_rendered_lang") != lang
    if (fresh or key not in st.session_state) and store in st.session_state:
        st.session_state[key] = st.session_state[store]
    return key


def _step_slider(label: str, key: str, count: int, default: int = 1) -> int:
    """A 1-based step slider that survives inputs of another length (and a one-step input)."""
    if count <= 1:
        return 1
    value = st.session_state.get(key, min(default, count))
    st.session_state[key] = int(min(max(1, value), count))
    return st.slider(label, 1, count, key=key)


def _verdict(t: dict, bundle, tr) -> str:
    truth = bundle.ground_truth(tr.source_tokens)
    output = bundle.detokenize_target(tr.output_tokens)
    if truth is None:
        return t["s4_result"].format(output=output, verdict=t["unknown_truth"])
    right = tuple(tok for tok in tr.output_tokens if tok != "<eos>") == tuple(truth.target)
    verdict = t["correct"] if right else t["wrong"].format(truth=bundle.detokenize_target(truth.target))
    return t["s4_result"].format(output=output, verdict=verdict)


# --- the seven sections ------------------------------------------------------------------------

def section_sampling(t: dict, lang: str) -> None:
    st.header(t["s1"])
    st.markdown(t["s1_text"])
    st.latex(equations.sampling())
    left, right = st.columns([2, 3])
    signal = left.radio(t["s1_signal"], list(lessons.SIGNALS), key=_localized_key("signal", lang), horizontal=True,
                        format_func=lambda s: t[f"signal_{s}"])
    st.session_state["learn_signal"] = signal
    n = right.slider(t["s1_n"], 2, 200, 8, key="learn_n")
    s = lessons.sample_signal(n, signal)
    s2 = lessons.sample_signal(2 * n, signal)
    st.markdown(t["s1_numbers"].format(n=n, dt=1.0 / n, err=s.max_error, worst=s.worst_t, n2=2 * n,
                                       err2=s2.max_error, ratio=s.max_error / max(s2.max_error, 1e-12)))
    ns = sorted(set(SAMPLING_NS) | {n})
    a, b = st.columns([3, 2])
    common.chart(a, lfig.sampling_figure(s, t["s1_f"], t["s1_steps"], t["s1_worst"], t["s1_time"]),
                   key="learn_fig_sampling", config=plotly_config("sampling"))
    common.chart(b, lfig.sampling_error_figure(ns, lessons.max_errors(ns, signal), n, t["s1_error_x"],
                                              t["s1_error_y"]),
                   key="learn_fig_sampling_error", config=plotly_config("sampling_error"))
    st.caption(t["s1_tokens"].format(text=PREFERRED_INPUT, m=len(PREFERRED_INPUT)))


def section_rnn(t: dict, lang: str) -> None:
    st.header(t["s2"])
    st.markdown(t["s2_text"])
    options = [LESSON_RNN] + _names(lessons.has_shared_unit)
    name, source = _model_and_input("rnn", options, LESSON_RNN, t, preferred="3141")
    try:
        unit = lessons.rnn_unit_by_hand(_bundle(name), source)
    except ExplorerError as exc:
        common.show_problem(exc)
        return
    if unit.cell == "rnn":
        st.latex(equations.rnn_unit(unit.hidden, unit.embed))
    else:
        st.markdown(t["s2_gru_text"])
        st.latex(equations.gru_unit())
    step = _step_slider(t["time_step"], "learn_rnn_step", len(unit.steps))
    u = unit.steps[step - 1]
    k = min(VECTOR_COMPONENTS, unit.hidden)
    cut = lambda v: np.asarray(v)[:k]  # noqa: E731
    if unit.cell == "rnn":
        labels = t["s2_rows_rnn"]
        rows = {labels[0]: cut(u.h_prev), labels[1]: cut(u.x), labels[2]: cut(u.parts["pre"]), labels[3]: cut(u.h)}
        pre = f"{u.parts['pre'][0]:.4f}"
        st.markdown(t["s2_numbers"].format(t=u.t, token=u.token, input_eq=equations.rnn_unit_input(pre),
                                           state_eq=equations.rnn_unit_output(pre, f"{u.h[0]:.4f}")))
    else:
        labels = t["s2_rows_gru"]
        rows = {labels[0]: cut(u.h_prev), labels[1]: cut(u.x), labels[2]: cut(u.parts["r"]),
                labels[3]: cut(u.parts["z"]), labels[4]: cut(u.parts["n"]), labels[5]: cut(u.h)}
        st.markdown(t["s2_numbers_gru"].format(t=u.t, token=u.token, r=u.parts["r"][0], z=u.parts["z"][0],
                                               n=u.parts["n"][0], state_eq=equations.gru_unit_output(f"{u.h[0]:.4f}")))
    last = list(rows)[-1]
    common.chart(st, lfig.vectors_figure(rows, highlight=last, x_title=t["s2_component"], max_abs=1.0),
                    key="learn_fig_rnn", config=plotly_config("rnn"))
    if k < unit.hidden or len(u.x) > k:
        st.caption(t["s2_shown"].format(k=k, H=unit.hidden))
    module = "nn.RNN" if unit.cell == "rnn" else "nn.GRU"
    st.success(t["s2_check"].format(module=module, m=len(unit.steps), diff=unit.max_difference))
    if unit.cell == "rnn":
        with st.expander(t["s2_weights"]):
            W = unit.weights["W"]
            frame = pd.DataFrame(np.column_stack([W, unit.weights["b"]]),
                                 columns=[f"h{j + 1}" for j in range(unit.hidden)]
                                 + [f"x{j + 1}" for j in range(unit.embed)] + ["b"],
                                 index=[f"W[{i + 1}]" for i in range(unit.hidden)])
            st.dataframe(frame.round(4), key="learn_weights")


def section_sharing(t: dict, lang: str) -> None:
    st.header(t["s3"])
    st.markdown(t["s3_text"])
    st.latex(t["s3_latex_unshared"] + equations.unshared_rnn() + t["s3_latex_unshared_count"])
    st.markdown(t["s3_fix"])
    st.latex(t["s3_latex_shared"] + equations.shared_rnn() + t["s3_latex_shared_count"])
    a, b, c = st.columns(3)
    H = a.number_input(t["s3_hidden"], 1, 1024, 128, key="learn_share_hidden")
    E = b.number_input(t["s3_embed"], 1, 1024, 32, key="learn_share_embed")
    m = c.slider(t["s3_length"], 1, 64, 30, key="learn_share_length")
    growth = lessons.parameter_growth(int(E), int(H), range(1, 65))
    st.markdown(t["s3_numbers"].format(E=E, H=H, m=m, shared=growth.shared[m - 1], unshared=growth.unshared[m - 1]))
    common.chart(st, lfig.parameter_growth_figure(growth, t["s3_shared"], t["s3_unshared"], t["s3_x"], t["s3_y"],
                                                 mark=m), key="learn_fig_growth", config=plotly_config("growth"))
    lo, hi = lessons.LESSON_TASK_LENGTHS
    st.markdown(t["s3_real"].format(lo=lo, hi=hi))
    shared, unshared = _lesson_pair()
    source = st.text_input(t["s3_try"], PREFERRED_INPUT, key="learn_share_input")
    try:
        runs = [lessons.run_or_explain(shared, source), lessons.run_or_explain(unshared, source)]
    except ExplorerError as exc:
        common.show_problem(exc)
        return
    table = pd.DataFrame({
        t["s3_table_model"]: [t["s3_shared_name"], t["s3_unshared_name"]],
        t["s3_table_params"]: [lessons.encoder_parameters(shared), lessons.encoder_parameters(unshared)],
        t["s3_table_output"]: [r.output if r.output is not None else t["s3_failed"] for r in runs],
        t["s3_table_correct"]: ["" if r.correct is None else ("✓" if r.correct else "✗") for r in runs],
    })
    st.dataframe(table, hide_index=True, key="learn_share_table")
    if runs[1].weights_for is not None:
        st.error(t["s3_unshared_missing"].format(limit=runs[1].weights_for, m=runs[1].length,
                                                 next=runs[1].weights_for + 1, error=runs[1].error), icon=":material/warning:")
    elif runs[1].error:
        st.error(t["s3_unshared_error"].format(error=runs[1].error), icon=":material/warning:")
    if runs[0].error is None:
        st.info(t["s3_shared_ok"].format(m=runs[0].length))
    else:
        st.error(runs[0].error, icon=":material/warning:")
    per = lessons.encoder_parameters(unshared) // unshared.cfg.max_src_len
    st.caption(t["s3_counts"].format(shared=lessons.encoder_parameters(shared),
                                     unshared=lessons.encoder_parameters(unshared), hi=hi, per=per))


def section_encoder_decoder(t: dict, lang: str) -> None:
    st.header(t["s4"])
    st.markdown(t["s4_text"])
    st.latex(equations.plain_decoder())
    plain = _names(lambda b: b.cfg.attention == "none")
    others = [n for n in _names(lambda b: b.cfg.attention != "none") if n not in plain]
    options = plain + others + [LESSON_RNN]
    default = "reverse-none" if "reverse-none" in plain else options[0]
    name, source = _model_and_input("ed", options, default, t)
    bundle = _bundle(name)
    try:
        tr = _trace(name, source)
    except ExplorerError as exc:
        common.show_problem(exc)
        return
    if bundle.cfg.attention != "none":
        st.info(t["s4_attends"])
    if bundle.cfg.bidirectional:
        st.caption(t["s4_bi"])
    ctx = lessons.context_vector(bundle, tr)
    rows = {f"h<sub>{i + 1}</sub> {tok}": tr.encoder_states[i] for i, tok in enumerate(tr.source_tokens)}
    st.markdown(f"**{t['s4_states']}**")
    common.chart(st, lfig.vectors_figure(rows, highlight=None if ctx.bidirectional else list(rows)[-1],
                                        x_title=t["s2_component"]),
                    key="learn_fig_states", config=plotly_config("encoder_states"))
    st.markdown(f"**{t['s4_s0'].format(n=ctx.numbers)}**")
    common.chart(st, lfig.vectors_figure({"s<sub>0</sub>": ctx.s0}, x_title=t["s2_component"]),
                    key="learn_fig_s0", config=plotly_config("s0"))
    st.subheader(t["s4_chain"])
    step = _step_slider(t["output_step"], "learn_ed_step", tr.steps, default=tr.steps)
    truth = bundle.ground_truth(tr.source_tokens)
    chain = lessons.decoding_chain(tr, truth.target if truth is not None else None)[:step]
    frame = pd.DataFrame({
        t["col_step"]: [c.t for c in chain],
        t["col_fed"]: [c.fed for c in chain],
        t["col_chosen"]: [c.chosen for c in chain],
        t["col_p"]: [c.probability for c in chain],
        t["col_truth"]: [c.truth or "" for c in chain],
        t["col_top"]: [", ".join(f"{tok} {p:.2f}" for tok, p in c.top) for c in chain],
    })
    # The full width: in half of a 1024-pixel page the top-candidates column was cut off.
    st.dataframe(frame, hide_index=True, key="learn_chain", width="stretch",
                 column_config={t["col_p"]: st.column_config.NumberColumn(format="%.4f"),
                                t["col_top"]: st.column_config.TextColumn(width="large")})
    right, _ = st.columns([3, 1])
    common.chart(right, lfig.output_distribution_figure(tr, step, t["s4_dist_x"], t["s4_dist_y"]),
                       key="learn_fig_dist", config=plotly_config("output_distribution"))
    right.caption(t["s4_dist"])
    st.markdown(_verdict(t, bundle, tr))


def _bottleneck_names() -> list[str]:
    """Shipped reversal models of one size: the twins (with and without attention, any score function)."""
    shipped = common.shipped_model_names()
    names = [n for n in shipped if (b := common.model_or_none(n)) is not None and b.task is not None
             and b.task.name == "reverse"]
    order = {"dot": 0, "scaled_dot": 1, "additive": 2, "none": 3}
    return sorted(names, key=lambda n: (order.get(common.get_model(n).cfg.attention, 9), n))


def section_bottleneck(t: dict, lang: str) -> None:
    st.header(t["s5"])
    names = _bottleneck_names()
    kinds = {common.get_model(n).cfg.attention for n in names}
    if "none" not in kinds or len(kinds) < 2:
        st.markdown(t["s5_text"].format(lo="…", hi="…", hidden="…", params="…", samples=comparison.CURVE_SAMPLES))
        st.info(t["s5_none"])
        return
    with st.spinner():
        curves = [common.accuracy_curve(n) for n in names]
    lo, hi = curves[0].trained or ("?", "?")
    bundles = [common.get_model(n) for n in names]
    hidden = "/".join(sorted({str(b.cfg.hidden) for b in bundles}))
    params = ", ".join(f"{n} {b.parameter_count:,}" for n, b in zip(names, bundles))  # computed, never claimed
    st.markdown(t["s5_text"].format(lo=lo, hi=hi, hidden=hidden, params=params, samples=comparison.CURVE_SAMPLES))
    st.latex(equations.encoder_summary() + t["s5_latex"])
    common.chart(st, accuracy_by_length_figure(curves, "exact_match", x_title=t["s5_x"], y_title=t["s5_y"],
                                              trained_label=t["s5_trained"]),
                    key="learn_fig_bottleneck", config=plotly_config("bottleneck"))
    marks = [m for m in BOTTLENECK_MARKS if all(c.at(m) for c in curves)]
    frame = pd.DataFrame({c.model: [f"{100 * c.at(m)['exact_match']:.1f}%" for m in marks] for c in curves},
                         index=[str(m) for m in marks]).T
    st.markdown(t["s5_numbers"].format(lengths=", ".join(map(str, marks))))
    st.dataframe(frame, key="learn_bottleneck_table")
    st.caption(t["s5_cost"].format(seconds=sum(c.seconds for c in curves)))


def section_attention(t: dict, lang: str) -> None:
    st.header(t["s6"])
    st.markdown(t["s6_text"])
    st.markdown(t["s6_steps"].format(query_eq=equations.query(), key_eq=equations.key(),
                                      value_eq=equations.value()))
    st.latex(equations.four_steps())
    st.markdown(t["s6_db"])
    options = _names(lambda b: b.cfg.attention != "none") + [LESSON_RNN]
    default = "reverse" if "reverse" in options else options[0]
    name, source = _model_and_input("attn", options, default, t)
    try:
        tr = _trace(name, source)
    except ExplorerError as exc:
        common.show_problem(exc)
        return
    if not tr.has_attention:
        st.info(t["s6_needs_attention"])
        return
    step = _step_slider(t["output_step"], "learn_attn_step", tr.steps)
    lk = lessons.lookup(tr, step - 1)
    if lk.attention == "scaled_dot":
        st.latex(equations.score("scaled_dot", bold=True))
    elif lk.attention == "additive":
        st.latex(equations.score("additive", bold=True) + r"\quad\text{(Bahdanau)}")
    best = max(lk.records, key=lambda r: r.weight)
    others = ", ".join(f"{tok} {p:.3f}" for tok, p in lk.top if tok != lk.chosen) or "—"
    st.markdown("\n\n".join([
        t["s6_step1"].format(fed=lk.fed, H=lk.s.size, s=lessons.short(lk.s, 6, 3)),
        t["s6_step2"].format(q=lessons.short(lk.query, 6, 3), D=lk.query.size),
        t["s6_step3"].format(i=best.i + 1, token=best.token, e=best.score, weight_eq=equations.weight_value(
            "t", best.i + 1, f"{best.score:.3f}", f"{best.weight:.4f}")),
        t["s6_step4"].format(chosen=lk.chosen, p=dict(lk.top).get(lk.chosen, float("nan")), others=others),
    ]))
    terms = sorted(lk.records, key=lambda r: -r.weight)[:3]
    st.latex(equations.context_terms([(r.weight, r.i + 1) for r in terms], more=len(lk.records) > 3))
    st.subheader(t["s6_table"])
    frame = pd.DataFrame({
        t["col_record"]: [r.i + 1 for r in lk.records],
        t["col_token"]: [r.token for r in lk.records],
        t["col_key"]: [lessons.short(r.key) for r in lk.records],
        t["col_score"]: [r.score for r in lk.records],
        t["col_weight"]: [r.weight for r in lk.records],
        t["col_value"]: [lessons.short(r.value) for r in lk.records],
        t["col_true"]: ["✓" if r.truth else "" for r in lk.records],
    })
    number = st.column_config.NumberColumn(format="%.4f")
    st.dataframe(frame, hide_index=True, key="learn_lookup_table",
                 column_config={t["col_score"]: number, t["col_weight"]: number})
    st.markdown(t["s6_context"].format(context_eq=equations.context(), c=lessons.short(lk.context, 6, 3)))
    score = t["s6_score_check"].format(e=lk.score_check) if lk.score_check is not None else ""
    st.caption(t["s6_check"].format(ctx=lk.context_check, score=score, total=sum(r.weight for r in lk.records)))
    left, right = st.columns([2, 3])
    common.chart(left, lfig.lookup_figure(lk, t["s6_weights_y"], t["s6_weights_x"], t["s6_truth"]),
                      key="learn_fig_lookup", config=plotly_config("lookup"))
    common.chart(right, lfig.attention_figure(tr, step - 1, t["s6_heat_x"], t["s6_heat_y"], t["s6_truth"]),
                       key="learn_fig_heatmap", config=plotly_config("attention"))
    if name != LESSON_RNN:
        common.explore_link(t["s6_explore"], name, source, step)
    score_twins.scaling_note(t)


def section_faithfulness(t: dict, lang: str) -> None:
    st.header(t["s7"])
    st.markdown(t["s7_text"])
    st.markdown(t["s7_tests"].format(alpha_t=equations.vec(equations.ALPHA, "t")))
    options = _names(lambda b: True)
    default = "reverse" if "reverse" in options else options[0]
    name, source = _model_and_input("faith", options, default, t)
    bundle = common.get_model(name)
    try:
        tr = common.cached_trace(name, source)
        with st.spinner(t["s7_computing"]):
            e = common.cached(("learn_explain", common.model_key(name), source),
                              lambda: attribution.explain(bundle, source, tr))
    except ExplorerError as exc:
        common.show_problem(exc)
        return
    step = _step_slider(t["output_step"], "learn_faith_step", e.steps)
    titles = {"alpha": t["s7_alpha"], "grad_x_input": t["s7_gxi"], "integrated_gradients": t["s7_ig"],
              "erasure": t["s7_erasure"]}
    common.chart(st, fig_faith.importance_heatmaps(e, step - 1, t["s7_heat_title"], panel_titles=titles),
                 key="learn_fig_faith", config=plotly_config("faithfulness"))
    if not e.has_attention:
        st.info(t["s7_none"])
        return
    s = step - 1
    src = e.source_tokens
    top = {m: int(np.abs(e.attributions.scores[m][s]).argmax()) for m in e.attributions.methods}
    ia = int(e.weights[s].argmax())
    converged = bool(e.attributions.ig_converged()[s])
    st.markdown(t["s7_step"].format(
        t=step, chosen=e.output_tokens[s], ia=ia + 1, ta=src[ia], ig=top["grad_x_input"] + 1,
        tg=src[top["grad_x_input"]], ii=top["integrated_gradients"] + 1, ti=src[top["integrated_gradients"]],
        ig_note="" if converged else t["s7_ig_note"], ie=top["erasure"] + 1, te=src[top["erasure"]]))
    means = {m: e.agreement(m).means() for m in e.attributions.methods}
    zero = lambda x: 0.0 if x is None else x  # noqa: E731 (a one-input sentence has no τ)
    st.markdown(t["s7_sentence"].format(
        steps=e.steps, g=zero(means["grad_x_input"]["top1_agreement"]),
        i=zero(means["integrated_gradients"]["top1_agreement"]), e=zero(means["erasure"]["top1_agreement"]),
        tg=zero(means["grad_x_input"]["kendall_tau"]), ti=zero(means["integrated_gradients"]["kendall_tau"]),
        te=zero(means["erasure"]["kendall_tau"])))
    c = e.counterfactuals
    common.chart(st, fig_faith.counterfactual_bars(e, s, t["s7_counter_title"].format(t=step)),
                 key="learn_fig_faith_cf", config=plotly_config("counterfactual-attention"))
    vocab = e.target_vocab

    def what(kind: str, label: str) -> str:
        key = "s7_changed" if c.flipped(kind)[s] else "s7_kept"
        return t[key].format(kind=label, tok=vocab[int(c.top[kind][s])], tvd=c.tvd[kind][s])
    st.markdown(t["s7_counter_step"].format(t=step, perm=what("permuted", t["s7_perm"]),
                                            uni=what("uniform", t["s7_uni"]),
                                            adv=what("adversarial", t["s7_adv"].format(jsd=c.jsd["adversarial"][s]))))
    if faithfulness_panel.large_change_kept(e, s):
        st.markdown(t["s7_nothing"])
    st.markdown(t["s7_flips"].format(steps=e.steps, perm=int(c.flipped("permuted").sum()),
                                     uni=int(c.flipped("uniform").sum()), adv=int(c.flipped("adversarial").sum()),
                                     eps=c.epsilon))
    st.markdown(t["s7_reading"])
    common.explore_link(t["s7_explore"], name, source, step, faithfulness=True)


SECTIONS = (section_sampling, section_rnn, section_sharing, section_encoder_decoder, section_bottleneck,
            section_attention, section_faithfulness)


def _apply_section_url() -> None:
    """The section from the address (`?section=N`): on the first run, and when a link names another one."""
    wanted = st.query_params.get("section")
    if wanted is None or wanted == st.session_state.get("learn_section_synced"):
        return
    st.session_state["learn_section_synced"] = wanted
    try:
        st.session_state["learn_section"] = min(max(int(wanted), 1), len(SECTIONS))
    except ValueError:
        st.warning(f"The link's section {wanted!r} is not a number from 1 to {len(SECTIONS)}; showing section 1.",
                   icon=":material/link_off:")


def _go(section: int) -> None:
    st.session_state["learn_section"] = min(max(section, 1), len(SECTIONS))


def _tour_bar(t: dict, section: int, where: str) -> None:
    """Previous / next (← → in presenter mode) and the sections by number, to jump."""
    n = len(SECTIONS)
    bar = st.columns([2, 6, 2], vertical_alignment="center")
    suffix = "" if where == "top" else "_" + where
    bar[0].button(t["tour_prev"], icon=":material/arrow_back:", key="learn_prev" + suffix, on_click=_go,
                  shortcut=presenter.shortcut("prev") if where == "top" else None,
                  args=(section - 1,), disabled=section <= 1, width="stretch")
    bar[2].button(t["tour_next"], icon=":material/arrow_forward:", icon_position="right", key="learn_next" + suffix,
                  shortcut=presenter.shortcut("next") if where == "top" else None, on_click=_go, args=(section + 1,), disabled=section >= n, width="stretch")
    if where == "top":
        bar[1].progress(section / n, text=t["tour_where"].format(k=section, n=n))
        with st.container(key="learn_tour_ends", horizontal=True):
            st.button(t["tour_first"], key="learn_first", shortcut=presenter.shortcut("first"), on_click=_go, args=(1,), disabled=section <= 1,
                      type="tertiary", icon=":material/first_page:")
            st.button(t["tour_last"], key="learn_last", shortcut=presenter.shortcut("last"), on_click=_go, args=(n,), disabled=section >= n,
                      type="tertiary", icon=":material/last_page:")


def _apply_language_url() -> None:
    """The language from the address (`?lang=zh`): on the session's first run, and whenever the switch has no
    state (another page was shown), so a shared link keeps it."""
    wanted = st.query_params.get("lang")
    first = not st.session_state.get("learn_lang_from_url")
    st.session_state["learn_lang_from_url"] = True
    if wanted in LANGUAGES and (first or "learn_lang" not in st.session_state):
        st.session_state["learn_lang"] = wanted
    elif "learn_lang" not in st.session_state:
        st.session_state["learn_lang"] = "en"


def render() -> None:
    arrived = "section" in st.query_params  # a link to a section lands on its figure
    _apply_language_url()
    lang = st.segmented_control("Language / 语言", list(LANGUAGES), required=True,
                                format_func=LANGUAGES.get, key="learn_lang")
    lang = lang or "en"
    t = text(lang)
    with st.container():  # a link's problem, if any: the page after it keeps its place either way
        _apply_section_url()
    section = int(st.session_state.setdefault("learn_section", 1))
    addresses.write_query({"section": str(section), "lang": lang}, "learn_url_sent")
    st.session_state["learn_section_synced"] = str(section)
    st.title(t["title"])
    if section == 1:
        st.markdown(t["intro"])
    if "learn_lessons_ready" not in st.session_state:
        with st.spinner(t["training_lessons"]):
            _lesson_pair()
        st.session_state["learn_lessons_ready"] = True
    _tour_bar(t, section, "top")
    try:
        with st.container(key="learn_section_body"):
            SECTIONS[section - 1](t, lang)
    except ExplorerError as exc:
        common.show_problem(exc)
    if section == len(SECTIONS):
        st.divider()
        st.markdown(t["summary"])
    st.divider()
    _tour_bar(t, section, "bottom")
    st.session_state["learn_rendered_lang"] = lang
    presenter.qr_code()
    if arrived:
        landing.once("learn", "bottleneck" if SECTIONS[section - 1] is section_bottleneck else "section")
