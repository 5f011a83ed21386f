"""The Explore page: pick a model, type an input, step through decoding and see every vector it used.

Layout: model and input controls; the decoded output against the truth; beam candidates; the step
panel (explore_panels: the article's four steps with their real numbers, the clickable attention heatmap,
hidden states and the query–key space); "what if" interventions with the original and changed decodings
side by side (explore_what_if); downloads. The URL and session state: explore_state.

UI only: every number comes from a Trace (explorer.engine.trace), tables from explorer.app.views, figures from
explorer.app.figures. Session-state keys start with `explore_`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import streamlit as st

from explorer.app.figures import offline
from explorer.app.pages import beam_panel, common, faithfulness_panel, landing, neighbours_panel, presenter
from explorer.app.pages import explore_panels as panels
from explorer.app.pages import explore_shared as shared
from explorer.app.pages import explore_state as state
from explorer.app.pages import explore_what_if as what_if
from explorer.app.pages.explore_state import K
from explorer.record import INTERVENTION_URL_KEYS, Trace
from explorer.app.engine_link import engine_module

views = engine_module("explorer.app.views")


def _model_label(name: str) -> str:
    return f"{name} (trained this session)" if common.session_models().get(name) is not None else name


def render() -> None:
    # The inputs, their messages and the output in one container: however many messages it shows, the step panel
    # after it keeps its place in the page. A moved element is drawn anew (its charts from scratch), and the
    # browser shows its old copy beside the new one until the run ends, with the old buttons' keys still live.
    with st.container():
        shown = _inputs_and_output()
    if shown is None:
        return
    bundle, request, tr, original, arrived = shown
    playing = bool(state.get("playing"))
    panel = st.fragment(panels.render, run_every=panels.PLAY_SECONDS if playing else None)
    panel(request, bundle.cfg.cell, bundle.cfg.attn_dim)
    shared.guarded(neighbours_panel.render, request.model, tr, int(state.get("step", 1)))
    shared.guarded(what_if.render, bundle, request, tr, original)
    shared.guarded(_downloads, bundle, request, tr)
    landing.once("explore", arrived)
    presenter.qr_code()


def _inputs_and_output() -> tuple[Any, views.Request, Trace, Trace, str | None] | None:
    """The model, input and decoding controls, any message about them, and the decoded output; None when
    there is nothing to step through."""
    st.title("Explore")
    st.caption("Pick a model, type an input, and step through decoding: every number below is the "
               "one the model used.")
    names = common.model_names()
    if not names:
        st.info("No models yet: shipped checkpoints appear in `pretrained/`, or train one on the Train page.")
        return None
    arrived = landing.explore_fallback(dict(st.query_params), INTERVENTION_URL_KEYS)
    state.apply_url(names)
    if state.get("url_problem"):
        st.warning(state.get("url_problem"), icon=":material/link_off:")
        state.put("url_problem", None)
    if state.get("model") not in names:
        state.put("model", names[0])
    for name, default in (("mode", "greedy"), ("target", ""), ("beam_width", 3), ("step", 1), ("playing", False),
                          ("candidate", 0), ("masked", []), ("pins", []), ("forced", []), ("temperature", 1.0)):
        if K + name not in st.session_state:
            state.put(name, default)

    top = st.columns([3, 4, 1.3], vertical_alignment="bottom")
    top[0].selectbox("Model", names, key=K + "model", format_func=_model_label, on_change=state.on_model_change,
                     persist_state="session")
    try:
        bundle = common.get_model(state.get("model"))
    except Exception as exc:  # a broken checkpoint is a message, not a traceback
        common.show_problem(exc)
        return None
    examples = state.examples(bundle)
    if K + "input" not in st.session_state:
        state.put("input", examples[0] if examples else "")
    top[1].text_input("Input", key=K + "input", on_change=state.on_input, persist_state="session",
                      help="What the model reads. Press Enter to decode.")
    top[2].button("Random", key=K + "random", on_click=state.on_random, width="stretch", icon=":material/casino:",
                  help="A fresh random input of the model's task, or one of the held-out sentences of its own "
                       "data that its checkpoint keeps")
    st.caption(bundle.title + _metric_note(bundle))
    if examples:
        st.pills("Examples", examples, key=K + "example", on_change=state.on_example, selection_mode="single")

    mode_row = st.columns([1, 1], vertical_alignment="bottom")  # [3, 5] cut "Teacher-forced" at 1300 px
    mode_row[0].segmented_control("Decoding", list(views.MODES), key=K + "mode", format_func=views.MODES.get,
                                  on_change=state.reset_view, persist_state="session")
    if state.get("mode") is None:
        state.put("mode", "greedy")
    mode = state.get("mode")
    if mode == "teacher":
        mode_row[1].text_input("Target to force", key=K + "target", on_change=state.reset_view, persist_state="session",
                               help="Decoding feeds these tokens instead of the model's own choices")
    elif mode == "beam":
        mode_row[1].slider("Beam width", 1, views.MAX_BEAM_WIDTH, key=K + "beam_width", on_change=state.reset_view,
                           persist_state="session")

    started = time.perf_counter()
    request, tr, original = _decode(bundle)
    if tr is None:
        return None
    compute_ms = (time.perf_counter() - started) * 1000

    shared.guarded(_summary, bundle, request, tr)
    if request.mode == "beam":
        shared.guarded(_beam_table, bundle, request)
        shared.guarded(beam_panel.render, bundle, request)
    state.put("compute_ms", compute_ms)
    return bundle, request, tr, original, arrived


def _metric_note(bundle) -> str:
    valid = (bundle.metrics or {}).get("validation") or {}
    parts = []
    if isinstance(valid.get("exact_match"), (int, float)):
        parts.append(f"exact match {valid['exact_match']:.1%}")
    if isinstance(valid.get("alignment_accuracy"), (int, float)):
        parts.append(f"alignment {valid['alignment_accuracy']:.1%}")
    if isinstance(valid.get("bleu"), (int, float)):
        parts.append(f"BLEU {valid['bleu']:.1f}")
    return (" · validation " + ", ".join(parts)) if parts else ""


def _decode(bundle) -> tuple[views.Request, Trace | None, Trace | None]:
    """The trace of what the controls ask for; on bad input a message and the last good view. A what-if
    that does not fit a new input (a link's masked position past its end, say) is cleared."""
    request = None
    try:
        request = views.Request(model=state.get("model"), text=state.get("input") or "", mode=state.get("mode"),
                                target=state.get("target") or "", beam_width=int(state.get("beam_width", 3)),
                                candidate=int(state.get("candidate", 0)), intervention=state.intervention())
        request = replace(request, node=beam_panel.selected_node(request))
        views.check_intervention(bundle, request)  # a link's step or position, counted from 1 as shown
        tr = shared.trace_for(request)
        original = tr if request.intervention.is_identity else shared.trace_for(request.original)
        state.put("good", request)
        state.sync_url(request)
        return request, tr, original
    except Exception as exc:  # every problem is a message in the page, never a traceback
        common.show_problem(exc)
        good = state.get("good")
        fresh = request is not None and (good is None or (good.model, good.text) != (request.model, request.text))
        if fresh and not request.intervention.is_identity:  # e.g. a link's what-if past the input's end
            try:
                tr = shared.trace_for(request.original)
            except Exception:
                pass
            else:
                state.clear_interventions()
                st.caption("The what-if did not fit this input and was cleared; showing the plain decoding.")
                state.put("good", request.original)
                state.sync_url(request.original)
                return request.original, tr, tr
        if good is None or good.model not in common.model_names():
            st.info("Type an input the model can read (or pick an example) to see its decoding.")
            return None, None, None  # type: ignore[return-value]
        try:
            tr = shared.trace_for(good)
            original = tr if good.intervention.is_identity else shared.trace_for(good.original)
        except Exception:
            return None, None, None  # type: ignore[return-value]
        st.caption(f"Still showing the last good input: **{shared.md(good.text)}** ({shared.md(good.model)}).")
        return good, tr, original


def _summary(bundle, request: views.Request, tr: Trace) -> None:
    """The decoded output against the truth, unknown words, alignment accuracy."""
    if tr.unknown_tokens:
        st.warning("Not in this model's vocabulary (read as `<unk>`): " +
                   ", ".join(f"**{shared.md(t)}**" for t in dict.fromkeys(tr.unknown_tokens)), icon=":material/help:")
    own = request.mode != "teacher"  # greedy, or a beam candidate traced on its own tokens
    for note in (views.read_note(bundle, request.text), views.copy_note(bundle, tr, own)):
        if note:
            st.caption(shared.md(note))
    out = views.output_text(bundle, tr, own)
    truth = views.truth_text(bundle, tr)
    cols = st.columns([7, 7, 4, 3])  # [4, 4, 2, 2] cut "Alignment accuracy" at 1300 px
    label = {"greedy": "Output (greedy)", "beam": f"Beam candidate #{request.candidate + 1}",
             "teacher": "Forced target"}[request.mode]
    if request.node is not None:
        label = f"Beam tree node {request.node + 1}: its prefix"
    cols[0].metric(label, out if out else "∅ (empty)")
    if truth is not None:
        ok = truth == out
        cols[1].metric("Correct answer", truth, delta="✓ correct" if ok else "✗ differs",
                       delta_color="normal" if ok else "inverse", delta_arrow="off")
    accuracy = tr.alignment_accuracy()
    if accuracy is not None:
        cols[2].metric("Alignment accuracy", f"{accuracy:.0%}",
                       help="Share of output steps whose largest attention weight falls on a true source "
                            "position (the green rings in the heatmap)")
    cols[3].metric("Steps", tr.steps, help="Output tokens, <eos> included")
    shared.cut_note(bundle, request, tr)
    if not tr.has_attention:
        st.info("This model has **no attention** (a plain encoder–decoder): the decoder sees the input only "
                "through s₀, the encoder's final state. There is no heatmap or lookup table; the state "
                "updates and output distributions below are real.", icon=":material/info:")


def _beam_table(bundle, request: views.Request) -> None:
    found = shared.candidates(request)
    st.subheader("Beam candidates")
    frame = views.candidates_frame(bundle, request.text, found)
    st.dataframe(frame, hide_index=True, width="stretch",
                 column_config={"log P": st.column_config.NumberColumn(format="%.4f"),
                                "log P / token": st.column_config.NumberColumn(format="%.4f"),
                                "P": st.column_config.NumberColumn(format="%.4g")})
    options = list(range(len(found)))
    if state.get("candidate", 0) >= len(options):
        state.put("candidate", 0)
    st.radio("Step through candidate", options, key=K + "candidate", horizontal=True,
             format_func=lambda n: f"#{n + 1}: {frame['output'][n] or '∅'}", on_change=state.on_candidate)


def _downloads(bundle, request: views.Request, tr: Trace) -> None:
    st.divider()
    st.subheader(":material/download: Export")
    stem = f"trace-{tr.model_name}"
    # The attributions go along once the faithfulness section has computed them for this very decoding.
    explanation = faithfulness_panel.shown_explanation(request) if request.intervention.is_identity else None
    cols = st.columns([2, 2, 3, 5])
    cols[0].download_button("Trace as JSON", data=lambda: tr.to_json(explanation), file_name=f"{stem}.json",
                            mime="application/json", key=K + "json", on_click="ignore", width="stretch")
    cols[1].download_button("Trace as CSV", data=lambda: views.trace_csv(tr, explanation), file_name=f"{stem}.csv",
                            mime="text/csv", key=K + "csv", on_click="ignore", width="stretch")
    cols[2].download_button("Offline trace (HTML)", data=lambda: offline.trace_page(
        tr, bundle.cfg.cell, request.text, views.output_text(bundle, tr, request.mode != "teacher")), file_name=f"{stem}.html",
        mime="text/html", key=K + "offline", on_click="ignore", width="stretch",
        help="One file that steps through this decoding with ← → and buttons, with no server and no network: "
             "the heatmap, the four steps and the lookup table (plotly.js and the Chinese glyphs inside, under 5 MB)")
    cols[3].caption("JSON: every vector of the trace. CSV: one row per step × input position (α, e, the "
                    "chosen token and its probability). Offline trace: for a course page or a room with no network. "
                    "Each figure: PNG from its camera icon, HTML below it. "
                    + ("Both carry the attributions of *Is attention the explanation?* (JSON: its counterfactual α "
                       "too)." if explanation is not None else
                       "Open *Is attention the explanation?* above to add its attributions to both."))
