"""The Explore page: pick a model, type an input, step through decoding and see every vector it used.

Layout: model and input controls; the decoded output against the truth; beam candidates; the step
panel (a fragment: changing the step reruns only it, the trace comes from the cache) with the
clickable attention heatmap, the seed's four steps with their real numbers, hidden states and the
query–key space; "what if" interventions with the original and changed decodings side by side;
downloads. Model, input, mode and step live in the URL so a demo can be bookmarked.

UI only: every number comes from a Trace (explorer.engine.trace), tables from explorer.app.views, figures from
explorer.app.figures. Session-state keys start with `explore_`.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Any, Callable

import streamlit as st

from explorer.engine import lengths

from explorer.app import views
from explorer.errors import ExplorerError
from explorer.app.figures import attention as fig_attention
from explorer.app.figures import steps as fig_steps
from explorer.app.figures import vectors as fig_vectors
from explorer.app.figures.style import figure_html, plotly_config
from explorer.app.pages import beam_panel, common, neighbours_panel, presenter
from explorer.checkpoints.registry import LRUCache
from explorer.record import Intervention, Trace, first_difference
from explorer.data.vocab import PAD, SOS

TEMPERATURES = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
PLAY_SECONDS = 1.2
CELL_NAMES = {"rnn": r"\mathrm{RNN}", "gru": r"\mathrm{GRU}", "lstm": r"\mathrm{LSTM}", "unshared": r"\mathrm{RNN}"}
INTERVENTION_KEYS = ("explore_masked", "explore_pins", "explore_forced")
URL_KEYS = ("model", "input", "mode", "target", "width", "step", "node") + views.INTERVENTION_URL_KEYS

K = "explore_"  # every session-state key of this page starts with this


# --- state helpers --------------------------------------------------------------------------------

def _state(name: str, default: Any = None) -> Any:
    return st.session_state.get(K + name, default)


def _set(name: str, value: Any) -> None:
    st.session_state[K + name] = value


def _reset_view() -> None:
    """A new model or input: back to step 1, no interventions, the best beam candidate."""
    _set("step", 1)
    _set("playing", False)
    _set("candidate", 0)
    _set("node", None)
    _set("masked", [])
    _set("pins", [])
    _set("forced", [])
    _set("temperature", 1.0)


def _apply_url(names: list[str]) -> None:
    """Model, input, mode, target, beam width, step and what-if from the query string: on the session's
    first run, and whenever the URL names a view other than the one this page last wrote (a link from
    another page)."""
    incoming = {key: st.query_params.get(key) for key in URL_KEYS}
    synced = _state("synced") or {}
    changed = {key: value for key, value in incoming.items() if value is not None and value != synced.get(key)}
    first = not _state("init")
    _set("init", True)
    if not changed and not first:
        return
    if not first and ("model" in changed or "input" in changed):
        _reset_view()
        _set("example", None)
    model = incoming["model"]
    if model is not None:
        if model in names:
            _set("model", model)
        else:
            _set("url_problem", f"the link names a model {model!r} that is not available here")
    if incoming["input"] is not None:
        _set("input", incoming["input"])
    if incoming["mode"] in views.MODES:
        _set("mode", incoming["mode"])
    if incoming["target"] is not None:
        _set("target", incoming["target"])
    for key, name, hi in (("width", "beam_width", views.MAX_BEAM_WIDTH), ("step", "step", 10_000)):
        try:
            value = int(incoming[key] or "")
        except ValueError:
            continue
        _set(name, min(max(value, 1), hi))
    if "node" in changed or (first and incoming["node"] is not None):
        try:
            _set("node", max(int(incoming["node"] or ""), 1) - 1)
        except ValueError:
            _set("url_problem", f"the link's beam node {incoming['node']!r} is not a number")
    if first or any(key in changed for key in views.INTERVENTION_URL_KEYS):
        _apply_url_intervention(incoming)
    _set("synced", {key: value for key, value in incoming.items() if value is not None})


def _apply_url_intervention(incoming: dict[str, str | None]) -> None:
    """The link's what-if replaces the current one; a malformed one is a message and changes nothing."""
    try:
        iv = views.intervention_from_query(incoming)
        if iv.temperature not in TEMPERATURES:
            raise ExplorerError(f"the link's temperature {iv.temperature:g} is not one of the slider's values "
                                f"({', '.join(f'{x:g}' for x in TEMPERATURES)})")
    except ExplorerError as exc:
        _set("url_problem", f"{exc}; the what-if in the link was not applied")
        return
    _set("temperature", iv.temperature)
    _set("masked", list(iv.masked))
    _set("pins", [tuple(p) for p in iv.pins])
    _set("forced", [tuple(f) for f in iv.forced])


def _sync_url(request: views.Request, t: int | None = None) -> None:
    """Write the current view into the query string (only what changed)."""
    want = {"model": request.model, "input": request.text, "mode": request.mode}
    if request.mode == "teacher":
        want["target"] = request.target
    if request.mode == "beam":
        want["width"] = str(request.beam_width)
        if request.node is not None:
            want["node"] = str(request.node + 1)
    want["step"] = str(t) if t is not None else st.query_params.get("step", "1")
    want.update(views.intervention_query(request.intervention))
    for key, value in want.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value
    for key in ("target", "width", "node") + views.INTERVENTION_URL_KEYS:
        if key not in want and key in st.query_params:
            del st.query_params[key]
    _set("synced", want)


# --- callbacks (run before the script, so they may change widget state) ----------------------------

def _on_model_change() -> None:
    """Keep the input if the new model reads it, else take the new model's first example."""
    try:
        bundle = common.get_model(_state("model"))
        text = _state("input") or ""
        try:
            if bundle.prepare(text).unknown and views.own_examples(bundle):  # words it cannot read: its own data
                _set("input", views.example_inputs(bundle)[0])
        except ExplorerError:
            examples = views.example_inputs(bundle)
            if examples:
                _set("input", examples[0])
        if _state("target"):
            try:
                bundle.prepare_target(_state("target"))
            except ExplorerError:
                _set("target", "")
    except ExplorerError:
        pass
    _set("example", None)
    _reset_view()


def _on_example() -> None:
    if _state("example"):
        _set("input", _state("example"))
        _reset_view()


def _on_random() -> None:
    try:
        bundle = common.get_model(_state("model"))
        _set("input", views.random_input(bundle, random.Random()))
    except ExplorerError:
        return
    _set("example", None)
    _reset_view()


def _on_input() -> None:
    """A new input starts at step 1; a bad one changes nothing (the page says why, the last good view stays)."""
    _set("example", None)
    try:
        common.get_model(_state("model")).prepare(_state("input") or "")
    except Exception:
        return
    _reset_view()


def _step_by(delta: int, steps: int) -> None:
    _set("playing", False)
    _set("step", min(max(int(_state("step", 1)) + delta, 1), steps))


def _stop_playing() -> None:
    _set("playing", False)


def _on_candidate() -> None:
    """A candidate picked in the table replaces a beam-tree node."""
    _set("playing", False)
    _set("node", None)


def _on_slider(version: int) -> None:
    """The user moved the step slider. Only the slider on screen counts: whenever the step changes any
    other way the slider gets a new key, so a value a lagging browser sends for an older one is ignored."""
    if version == _state("slider_version", 0) and not _state("playing"):
        _set("step", int(_state(f"t{version}", 1)))


def _selected_cell(event: Any) -> tuple[int, int] | None:
    """(t, i), 0-based, of the clicked heatmap cell, or None when nothing is selected."""
    for point, data in common.selected_points(event):
        if len(data) >= 2 and data[0] is not None and data[1] is not None:
            return int(data[0]), int(data[1])
        label = point.get("y")
        if isinstance(label, str) and ":" in label:
            try:
                return int(label.split(":", 1)[0]) - 1, -1
            except ValueError:
                continue
    return None


def _on_heatmap_click() -> None:
    cell = _selected_cell(st.session_state.get(K + "heatmap"))
    if cell is not None:
        _set("last_click", cell)
        _set("step", cell[0] + 1)
        _set("playing", False)


def _add_pin() -> None:
    t, i = int(_state("pin_step", 1)) - 1, _state("pin_pos")
    if i is None:
        return
    pins = [p for p in _state("pins", []) if p[0] != t]
    _set("pins", sorted(pins + [(t, int(i))]))


def _add_force() -> None:
    t, token = int(_state("force_step", 1)) - 1, _state("force_token")
    if token is None:
        return
    forced = [f for f in _state("forced", []) if f[0] != t]
    _set("forced", sorted(forced + [(t, token)]))


def _temperature_demo() -> None:
    """One click to the measured temperature what-if (views.TEMPERATURE_DEMO)."""
    demo = views.TEMPERATURE_DEMO
    _set("model", demo.model)
    _set("input", demo.text)
    _set("mode", "greedy")
    _set("example", None)
    _reset_view()
    _set("temperature", demo.temperature)


def _clear_interventions() -> None:
    for key in INTERVENTION_KEYS:
        st.session_state[key] = []
    _set("temperature", 1.0)


# --- computing (cached per session; the step panel never recomputes) ------------------------------

def _candidates(request: views.Request) -> list:
    return list(beam_panel.record(request).candidates)


def _trace(request: views.Request) -> Trace:
    if request.mode == "greedy":
        return common.cached_trace(request.model, request.text, request.intervention)
    if request.mode == "teacher":
        if not request.target.strip():
            raise ExplorerError("teacher-forced mode needs a target: type the output to force")
        return common.cached_trace(request.model, request.text, request.intervention, request.target)
    record = beam_panel.record(request)
    key = ("explore-trace", common.model_key(request.model), request)
    return common.cached(key, lambda: views.request_trace(common.get_model(request.model), request, record=record))


# --- small display helpers ------------------------------------------------------------------------

def _tex(token: str) -> str:
    """A token inside LaTeX \\text{...}, special characters escaped."""
    out = []
    for ch in token:
        if ch in "#$%&_{}":
            out.append("\\" + ch)
        elif ch == "\\":
            out.append(r"\textbackslash{}")
        elif ch == "~":
            out.append(r"\textasciitilde{}")
        elif ch == "^":
            out.append(r"\textasciicircum{}")
        elif ch == " ":
            out.append("␣")
        else:
            out.append(ch)
    return r"\text{“" + "".join(out) + r"”}"


def _figure(request: views.Request, name: str, step: int | None, build: Callable[[], Any]):
    """A figure built once per (model version, request, figure, step): revisiting a step costs nothing."""
    if K + "figures" not in st.session_state:
        st.session_state[K + "figures"] = LRUCache(160)
    key = (common.model_key(request.model), request, name, step)
    return st.session_state[K + "figures"].get_or_compute(key, build)


def _chart(fig, name: str, key: str, cache: tuple | None = None, **kwargs: Any):
    """A figure with a PNG camera (the modebar) and an HTML download (self-contained, offline).

    `fig` may be a builder (no arguments); with `cache=(request, step)` it is built once per step."""
    if callable(fig):
        fig = _figure(cache[0], name, cache[1], fig) if cache is not None else fig()
    # theme=None: our projector-sized fonts, not Streamlit's chart theme.
    event = common.chart(st, fig, key=key, config=plotly_config(name), **kwargs)
    st.download_button("HTML", icon=":material/download:", data=lambda: figure_html(fig), file_name=f"{name}.html",
                       mime="text/html", key=key + "_html", on_click="ignore", type="tertiary",
                       help="Download this figure as an interactive HTML page (PNG: the camera icon on the chart)")
    return event


def _md(text: str) -> str:
    """User or model text shown inside markdown, its markup characters escaped."""
    return "".join("\\" + ch if ch in "\\`*_{}[]<>()#+-.!|~$" else ch for ch in text)


def _tok(token: str) -> str:
    """A token in markdown: a space shows as ␣."""
    return "␣" if token == " " else _md(token)


def _model_label(name: str) -> str:
    return f"{name} (trained this session)" if common.session_models().get(name) is not None else name


def _format_seconds(ms: float) -> str:
    return f"{ms:.0f} ms" if ms >= 1 else f"{ms:.2f} ms"


# --- the page -------------------------------------------------------------------------------------

def render() -> None:
    st.title("Explore")
    st.caption("Pick a model, type an input, and step through decoding: every number below is the "
               "one the model used.")
    names = common.model_names()
    if not names:
        st.info("No models yet: shipped checkpoints appear in `pretrained/`, or train one on the Train page.")
        return
    _apply_url(names)
    if _state("url_problem"):
        st.warning(_state("url_problem"), icon=":material/link_off:")
        _set("url_problem", None)
    if _state("model") not in names:
        _set("model", names[0])
    for name, default in (("mode", "greedy"), ("target", ""), ("beam_width", 3), ("step", 1), ("playing", False),
                          ("candidate", 0), ("masked", []), ("pins", []), ("forced", []), ("temperature", 1.0)):
        if K + name not in st.session_state:
            _set(name, default)

    top = st.columns([3, 4, 1.3], vertical_alignment="bottom")
    top[0].selectbox("Model", names, key=K + "model", format_func=_model_label, on_change=_on_model_change,
                     persist_state="session")
    try:
        bundle = common.get_model(_state("model"))
    except Exception as exc:  # a broken checkpoint is a message, not a traceback
        common.show_problem(exc)
        return
    examples = views.example_inputs(bundle)
    if K + "input" not in st.session_state:
        _set("input", examples[0] if examples else "")
    top[1].text_input("Input", key=K + "input", on_change=_on_input, persist_state="session",
                      help="What the model reads. Press Enter to decode.")
    top[2].button("Random", key=K + "random", on_click=_on_random, width="stretch", icon=":material/casino:",
                  help="A fresh random input of the model's task, or one of the held-out sentences of its own "
                       "data that its checkpoint keeps")
    st.caption(bundle.title + _metric_note(bundle))
    if examples:
        st.pills("Examples", examples, key=K + "example", on_change=_on_example, selection_mode="single")

    mode_row = st.columns([1, 1], vertical_alignment="bottom")  # [3, 5] cut "Teacher-forced" at 1300 px
    mode_row[0].segmented_control("Decoding", list(views.MODES), key=K + "mode", format_func=views.MODES.get,
                                  on_change=_reset_view, persist_state="session")
    if _state("mode") is None:
        _set("mode", "greedy")
    mode = _state("mode")
    if mode == "teacher":
        mode_row[1].text_input("Target to force", key=K + "target", on_change=_reset_view, persist_state="session",
                               help="Decoding feeds these tokens instead of the model's own choices")
    elif mode == "beam":
        mode_row[1].slider("Beam width", 1, views.MAX_BEAM_WIDTH, key=K + "beam_width", on_change=_reset_view,
                           persist_state="session")

    started = time.perf_counter()
    request, tr, original = _decode(bundle)
    if tr is None:
        return
    compute_ms = (time.perf_counter() - started) * 1000

    _guarded(_summary, bundle, request, tr)
    if request.mode == "beam":
        _guarded(_beam_table, bundle, request)
        _guarded(beam_panel.render, bundle, request)
    _set("compute_ms", compute_ms)
    playing = bool(_state("playing"))
    panel = st.fragment(_step_panel, run_every=PLAY_SECONDS if playing else None)
    panel(request, bundle.model.cfg.cell, bundle.model.cfg.attn_dim)
    _guarded(neighbours_panel.render, request.model, tr, int(_state("step", 1)))
    _guarded(_what_if, bundle, request, tr, original)
    _guarded(_downloads, tr)


def _guarded(section: Callable[..., None], *args: Any) -> None:
    """Draw one section; a failure in it is a message, and the rest of the page still draws."""
    try:
        section(*args)
    except Exception as exc:  # st.rerun/st.stop are BaseExceptions and pass through
        common.show_problem(exc)


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


def _intervention() -> Intervention:
    return Intervention(temperature=float(_state("temperature", 1.0)),
                        masked=tuple(sorted(int(i) for i in _state("masked", []))),
                        pins=tuple((int(t), int(i)) for t, i in _state("pins", [])),
                        forced=tuple((int(t), str(tok)) for t, tok in _state("forced", [])))


def _decode(bundle) -> tuple[views.Request, Trace | None, Trace | None]:
    """The trace of what the controls ask for; on bad input a message and the last good view. A what-if
    that does not fit a new input (a link's masked position past its end, say) is cleared."""
    request = None
    try:
        request = views.Request(model=_state("model"), text=_state("input") or "", mode=_state("mode"),
                                target=_state("target") or "", beam_width=int(_state("beam_width", 3)),
                                candidate=int(_state("candidate", 0)), intervention=_intervention())
        request = replace(request, node=beam_panel.selected_node(request))
        views.check_intervention(bundle, request)  # a link's step or position, counted from 1 as shown
        tr = _trace(request)
        original = tr if request.intervention.is_identity else _trace(request.original)
        _set("good", request)
        _sync_url(request)
        return request, tr, original
    except Exception as exc:  # every problem is a message in the page, never a traceback
        common.show_problem(exc)
        good = _state("good")
        fresh = request is not None and (good is None or (good.model, good.text) != (request.model, request.text))
        if fresh and not request.intervention.is_identity:  # e.g. a link's what-if past the input's end
            try:
                tr = _trace(request.original)
            except Exception:
                pass
            else:
                _clear_interventions()
                st.caption("The what-if did not fit this input and was cleared; showing the plain decoding.")
                _set("good", request.original)
                _sync_url(request.original)
                return request.original, tr, tr
        if good is None or good.model not in common.model_names():
            st.info("Type an input the model can read (or pick an example) to see its decoding.")
            return None, None, None  # type: ignore[return-value]
        try:
            tr = _trace(good)
            original = tr if good.intervention.is_identity else _trace(good.original)
        except Exception:
            return None, None, None  # type: ignore[return-value]
        st.caption(f"Still showing the last good input: **{_md(good.text)}** ({_md(good.model)}).")
        return good, tr, original


def _summary(bundle, request: views.Request, tr: Trace) -> None:
    """The decoded output against the truth, unknown words, alignment accuracy."""
    if tr.unknown_tokens:
        st.warning("Not in this model's vocabulary (read as `<unk>`): " +
                   ", ".join(f"**{_md(t)}**" for t in dict.fromkeys(tr.unknown_tokens)), icon=":material/help:")
    out = views.output_text(bundle, tr)
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
    _cut_note(bundle, request, tr)
    if not tr.has_attention:
        st.info("This model has **no attention** (a plain encoder–decoder): the decoder sees the input only "
                "through s₀, the encoder's final state. There is no heatmap or lookup table; the state "
                "updates and output distributions below are real.", icon=":material/info:")


def _cut_note(bundle, request: views.Request, tr: Trace, caption: bool = False) -> None:
    """Say so when decoding stopped at its length cap (explorer/engine/lengths.py) rather than at <eos>."""
    note = None if request.mode == "teacher" else lengths.cut_note(bundle, len(tr.source_tokens), tr.output_tokens)
    if note and caption:
        st.caption(note)
    elif note:
        st.warning(note, icon=":material/content_cut:")


def _beam_table(bundle, request: views.Request) -> None:
    found = _candidates(request)
    st.subheader("Beam candidates")
    frame = views.candidates_frame(bundle, found)
    st.dataframe(frame, hide_index=True, width="stretch",
                 column_config={"log P": st.column_config.NumberColumn(format="%.4f"),
                                "log P / token": st.column_config.NumberColumn(format="%.4f"),
                                "P": st.column_config.NumberColumn(format="%.4g")})
    options = list(range(len(found)))
    if _state("candidate", 0) >= len(options):
        _set("candidate", 0)
    st.radio("Step through candidate", options, key=K + "candidate", horizontal=True,
             format_func=lambda n: f"#{n + 1}: {frame['output'][n] or '∅'}", on_change=_on_candidate)


# --- the step panel (a fragment) ------------------------------------------------------------------

def _step_panel(request: views.Request, cell: str, attn_dim: int) -> None:
    """Everything that depends on the current step; reruns alone when the step changes."""
    _guarded(_draw_step_panel, request, cell, attn_dim)


def _draw_step_panel(request: views.Request, cell: str, attn_dim: int) -> None:
    started = time.perf_counter()
    tr = _trace(request)  # a cache hit: the step never recomputes the trace
    T = tr.steps
    cell_click = _selected_cell(st.session_state.get(K + "heatmap"))
    if cell_click is not None and cell_click != _state("last_click"):  # a click AppTest made (no callback)
        _set("last_click", cell_click)
        _set("step", cell_click[0] + 1)
    if _state("playing"):  # one tick of the fragment's timer
        if int(_state("step", 1)) >= T:
            _set("playing", False)
            st.rerun()  # a full run drops the fragment's timer
        _set("step", int(_state("step", 1)) + 1)
    _set("step", min(max(int(_state("step", 1)), 1), T))
    t = int(_state("step"))

    st.subheader("Step through decoding")
    _step_bar(t, T)
    step = t - 1
    facts = views.step_summary(tr, step)
    # its own row, never beside the controls: at 1024 px the chosen token wrapped onto a line alone
    st.markdown(f"#### t = {step + 1} of {T}: **{_tok(facts['previous'])}** → **{_tok(facts['chosen'])}**")
    _sync_url(request, step + 1)

    wide = tr.has_attention and len(tr.source_tokens) > 14  # a long input gets the full width
    if wide:
        where, right = st.container(), None
        first, second = st.columns(2, gap="large")
    else:
        where, right = st.columns([6, 5], gap="large")
        first = second = right
    with where:
        if tr.has_attention:
            st.markdown("**Attention αₜᵢ**: rows are output steps yₜ, columns input tokens xᵢ. "
                        "Click a cell to go to its step.")
            _chart(lambda: fig_attention.attention_heatmap(tr, step), "attention-heatmap", K + "heatmap",
                   cache=(request, step), on_select=_on_heatmap_click, selection_mode="points")
            if tr.alignment is not None:
                st.caption("Green rings: the true alignment of the task. Red box: the current step.")
            if tr.has_pieces:
                _words_view(request, tr)
        else:
            st.markdown("**Decoder states sₜ** (no attention in this model)")
            _chart(lambda: fig_vectors.decoder_states_heatmap(tr, step, title=None), "decoder-states-panel",
                   K + "states_left", cache=(request, step))
    with first:
        _step_one(request, tr, step, cell)
    with second:
        _step_two(request, tr, step)
    _step_three(tr, step, request, attn_dim)
    _step_four(tr, step, request)
    _hidden_tabs(request, tr, step)
    panel_ms = (time.perf_counter() - started) * 1000
    _set("panel_ms", panel_ms)
    st.container(key=K + "panel_timing").caption(
        f"Step panel drawn in {_format_seconds(panel_ms)} · decoding "
        f"{_format_seconds(_state('compute_ms', 0.0))} (once per input, then cached)",
        help="Server-side timings: changing the step reruns only this panel and never re-decodes")


def _step_bar(t: int, T: int) -> None:
    """First, previous, play/pause, next, last and the step slider (presenter mode: Home, ←, space, →, End).

    In presenter mode each button also shows its key, so the slider gets a row of its own: beside it, at
    1024 px, the keys squeezed "Play" to "P" and the first/last icons to nothing."""
    if presenter.on():
        bar = st.columns([1.3, 2.2, 2.2, 2.2, 1.3], vertical_alignment="center") + [st.container()]
    else:
        bar = st.columns([1.3, 2.2, 2.2, 2.2, 1.3, 6], vertical_alignment="center")
    bar[0].button(":material/first_page:", key=K + "first", shortcut=presenter.shortcut("first"), on_click=_step_by, args=(1 - t, T), disabled=t <= 1,
                  width="stretch", help="First step (Home in presenter mode)")
    bar[1].button("Prev", icon=":material/skip_previous:", key=K + "prev", shortcut=presenter.shortcut("prev"), on_click=_step_by, args=(-1, T),
                  disabled=t <= 1, width="stretch", help="Previous step (← in presenter mode)")
    if _state("playing"):
        bar[2].button("Pause", icon=":material/pause:", key=K + "pause", shortcut=presenter.shortcut("pause"), on_click=_stop_playing, width="stretch",
                      help="Space in presenter mode")
    elif bar[2].button("Play", icon=":material/play_arrow:", key=K + "play", shortcut=presenter.shortcut("play"), width="stretch", disabled=T <= 1,
                       help=f"Advance one step every {PLAY_SECONDS:g} s (space in presenter mode)"):
        if t >= T:
            _set("step", 1)
        _set("playing", True)
        st.rerun()  # a full run starts the fragment's timer
    bar[3].button("Next", icon=":material/skip_next:", icon_position="right", key=K + "next", shortcut=presenter.shortcut("next"), on_click=_step_by,
                  args=(1, T), disabled=t >= T, width="stretch", help="Next step (→ in presenter mode)")
    bar[4].button(":material/last_page:", key=K + "last", shortcut=presenter.shortcut("last"), on_click=_step_by, args=(T - t, T), disabled=t >= T,
                  width="stretch", help="Last step (End in presenter mode)")
    if T > 1:
        version = int(_state("slider_version", 0))
        if _state(f"t{version}") != t:  # the step moved without the slider: a fresh slider showing it
            version += 1
            _set("slider_version", version)
            _set(f"t{version}", t)
        bar[5].slider("Step t", 1, T, key=f"{K}t{version}", on_change=_on_slider, args=(version,),
                      disabled=bool(_state("playing")))
    else:
        bar[5].markdown("Step **t = 1** (the only step)")


def _words_view(request: views.Request, tr: Trace) -> None:
    """For subword models: the same α regrouped into words, in a section that opens."""
    st.caption("Tokens are the model's subword pieces; ▁ marks a piece that begins a word.")
    with st.expander("Words view: which word looked at which", expanded=False):
        st.caption(fig_attention.WORDS_NOTE)
        _chart(lambda: fig_attention.word_attention_heatmap(tr), "word-attention", K + "words",
               cache=(request, None))


def _step_one(request: views.Request, tr: Trace, step: int, cell: str) -> None:
    t = step + 1
    f = CELL_NAMES.get(cell, r"f")
    st.markdown("##### ① Update the decoder state")
    y_prev = _tex(tr.previous_tokens[step])
    if tr.has_attention:
        st.latex(rf"\begin{{aligned}} s_{{t}} &= f\big(s_{{t-1}},\,[\,y_{{t-1}};\,c_{{t-1}}\,]\big) \\"
                 rf"s_{{{t}}} &= {f}\big(s_{{{t - 1}}},\,[\,{y_prev};\,c_{{{t - 1}}}\,]\big) \end{{aligned}}")
    else:
        st.latex(rf"\begin{{aligned}} s_{{t}} &= f(s_{{t-1}},\,y_{{t-1}}) \\"
                 rf"s_{{{t}}} &= {f}(s_{{{t - 1}}},\,{y_prev}) \end{{aligned}}")
    notes = []
    if step == 0:
        notes.append("s₀ comes from the encoder's final state")
        if tr.has_attention:
            notes.append("c₀ = 0")
    st.caption("; ".join(notes) + ("." if notes else "") + " Hover a cell for its exact value.")
    _chart(lambda: fig_vectors.state_update_figure(tr, step), f"step{t}-state-update", K + "fig_state",
           cache=(request, step))


def _step_two(request: views.Request, tr: Trace, step: int) -> None:
    if not tr.has_attention:
        return
    t = step + 1
    st.markdown("##### ② Ask a question: the query")
    st.latex(rf"\begin{{aligned}} q_{{{t}}} &= \mathrm{{Query}}(s_{{{t}}}) = W_Q\,s_{{{t}}} + b_Q \\"
             rf"k_i &= W_K\,h_i, \quad v_i = W_V\,h_i + b_V \end{{aligned}}")
    _chart(lambda: fig_vectors.query_figure(tr, step), f"step{t}-query", K + "fig_query", cache=(request, step))


def _score_tex(tr: Trace, t: int, attn_dim: int) -> str:
    if tr.attention == "scaled_dot":
        return rf"e_{{{t}i}} = \frac{{q_{{{t}}}\cdot k_i}}{{\sqrt{{{attn_dim}}}}}"
    if tr.attention == "additive":
        return rf"e_{{{t}i}} = w^\top \tanh(q_{{{t}}} + k_i)"
    return rf"e_{{{t}i}} = q_{{{t}}}\cdot k_i"


def _step_three(tr: Trace, step: int, request: views.Request, attn_dim: int) -> None:
    if not tr.has_attention:
        return
    t = step + 1
    iv = request.intervention
    facts = views.step_summary(tr, step)
    st.markdown("##### ③ Look it up: scores, weights and the context (a soft database lookup)")
    tau = iv.temperature
    tau_tex = "" if tau == 1.0 else rf"/\tau"
    eq = st.columns(3)
    eq[0].latex(_score_tex(tr, t, attn_dim))
    eq[1].latex(rf"\alpha_{{{t}i}} = \frac{{\exp(e_{{{t}i}}{tau_tex})}}{{\sum_j \exp(e_{{{t}j}}{tau_tex})}}")
    eq[2].latex(rf"c_{{{t}}} = \sum_i \alpha_{{{t}i}}\, v_i")
    i = int(facts["argmax"]) + 1
    tau_note = "" if tau == 1.0 else rf"\;(\tau = {tau:g})"
    st.latex(rf"\text{{largest weight: }} i = {i}\ ({_tex(facts['argmax_token'])}):\quad "
             rf"e_{{{t},{i}}} = {facts['argmax_score']:.4f},\quad \alpha_{{{t},{i}}} = {facts['argmax_weight']:.4f}"
             + tau_note)
    notes = []
    if any(p[0] == step for p in iv.pins):
        pos = dict(iv.pins)[step]
        notes.append(f"attention at this step is **pinned** to x{pos + 1} by an intervention")
    if iv.masked:
        notes.append("masked inputs (hidden from attention): " + ", ".join(f"x{i + 1}" for i in iv.masked))
    if notes:
        st.info("; ".join(notes), icon=":material/science:")
    # The table has the full width (beside the weights chart its last column was cut at 1024 px).
    with st.container():
        frame = views.lookup_table(tr, step)
        peak_k = float(abs(tr.keys).max()) if tr.keys.size else 1.0
        peak_v = float(abs(tr.values).max()) if tr.values.size else 1.0
        config = {
            "i": st.column_config.NumberColumn("i", width="small"),
            "token": st.column_config.TextColumn("xᵢ"),
            "key k_i": st.column_config.BarChartColumn("key kᵢ", y_min=-peak_k, y_max=peak_k),
            "score e_ti": st.column_config.NumberColumn(f"score e{_sub(t)}ᵢ", format="%.4f"),
            "weight α_ti": st.column_config.ProgressColumn(f"weight α{_sub(t)}ᵢ", format="%.4f", min_value=0.0,
                                                           max_value=1.0),
            "value v_i": st.column_config.BarChartColumn("value vᵢ", y_min=-peak_v, y_max=peak_v),
        }
        if "true" in frame:
            config["true"] = st.column_config.CheckboxColumn("true?", width="small")
        st.dataframe(frame, hide_index=True, width="stretch", column_config=config, key=K + "lookup",
                     row_height=36, height=min(36 * (len(frame) + 1) + 3, 579))
        st.caption("One record per input position: the query is matched against every key kᵢ, the "
                   "weights αₜᵢ pick how much of each value vᵢ goes into cₜ. Exact vectors: the K, V, Q tab.")
    cols = st.columns([2, 3], gap="large")
    with cols[0]:
        _chart(lambda: fig_attention.weights_bar(tr, step, title=f"α{_sub(t)} over the inputs"), f"step{t}-weights",
               K + "fig_weights", cache=(request, step))
    with cols[1]:
        title = f"c{_sub(t)} = Σᵢ α{_sub(t)}ᵢ vᵢ: each row a weighted value, the last row their sum"
        _chart(lambda: fig_attention.context_sum(tr, step, title=title), f"step{t}-context", K + "fig_context",
               cache=(request, step))


def _step_four(tr: Trace, step: int, request: views.Request) -> None:
    t = step + 1
    facts = views.step_summary(tr, step)
    st.markdown("##### ④ Predict the next token")
    cols = st.columns([5, 6], gap="large")
    with cols[0]:
        if tr.has_attention:
            st.latex(rf"\hat y_{{{t}}} = \mathrm{{softmax}}\big(U\,[\,s_{{{t}}};\,c_{{{t}}}\,] + b_U\big)")
        else:
            st.latex(rf"\hat y_{{{t}}} = \mathrm{{softmax}}\big(U\,s_{{{t}}} + b_U\big)")
        chosen = _tex(str(facts["chosen"]))
        best_token, best_p = tr.top_k(step, 1)[0]
        forced_here = any(f[0] == step for f in request.intervention.forced) and not tr.teacher_forced
        if tr.teacher_forced or forced_here:
            why = "teacher-forced" if tr.teacher_forced else "forced by an intervention"
            st.latex(rf"\begin{{gathered}}y_{{{t}}} = {chosen}\quad(\text{{{why}}})\\ "
                     rf"\hat y_{{{t}}}({chosen}) = {facts['p']:.4f}\end{{gathered}}")
            if best_token != facts["chosen"]:
                st.caption(f"The model's own choice here would be **{_tok(best_token)}** (p = {best_p:.4f}).")
        else:
            st.latex(rf"\begin{{gathered}}y_{{{t}}} = \arg\max_w \hat y_{{{t}}}(w) = {chosen}\\ "
                     rf"p = {facts['p']:.4f}\end{{gathered}}")
        if facts["chosen"] == "<eos>":
            st.caption("<eos>: the model ends its output here.")
    with cols[1]:
        _chart(lambda: fig_steps.output_distribution(tr, step, k=8, title=f"ŷ{_sub(t)}: the 8 most probable tokens"),
               f"step{t}-output", K + "fig_output", cache=(request, step))


def _hidden_tabs(request: views.Request, tr: Trace, step: int) -> None:
    names = ["Hidden states hᵢ, sₜ"] + (["Query–key space", "K, V, Q"] if tr.has_attention else [])
    # Closed until opened, and drawn only when open: its two charts were a quarter of the browser's work on
    # the first view (cold start 6.8 -> 6.4 s, measured). Open or closed is in the URL (explore_hidden=true),
    # so a shared link opens it too.
    section = st.expander("Hidden states and projections: " + ", ".join(names), icon=":material/grid_on:",
                          key=f"{K}hidden", on_change="rerun", bind="query-params")
    if section.open is False:
        return
    with section:
        _hidden_tab_charts(request, tr, step, names)


def _hidden_tab_charts(request: views.Request, tr: Trace, step: int, names: list[str]) -> None:
    # Tabs that know which one is open, so only its charts are drawn: fewer charts per step change.
    tabs = st.tabs(names, key=f"{K}tabs{len(names)}", on_change="rerun")
    shown = [tab.open is not False for tab in tabs]  # None (not tracked, e.g. in tests): draw them all
    if shown[0]:
        with tabs[0]:
            cols = st.columns(2, gap="large")
            with cols[0]:
                _chart(lambda: fig_vectors.encoder_states_heatmap(tr), "encoder-states", K + "fig_h",
                       cache=(request, None))
            with cols[1]:
                _chart(lambda: fig_vectors.decoder_states_heatmap(tr, step), "decoder-states", K + "fig_s",
                       cache=(request, step))
    if not tr.has_attention:
        return
    if shown[1]:
        with tabs[1]:
            cols = st.columns([3, 2], gap="large")
            with cols[0]:
                title = f"q{_sub(step + 1)} among the keys (PCA of kᵢ and qₜ)"
                _chart(lambda: fig_vectors.query_key_space(tr, step, title=title),
                       f"step{step + 1}-query-key-space", K + "fig_qk", cache=(request, step))
            cols[1].markdown("Queries and keys live in one space. With dot-product scores a key gets weight when "
                             "it lies in the direction the query (red arrow) points to, and the longer both are, "
                             "the sharper the choice. Marker size and colour: αₜᵢ at this step; grey: the other "
                             "steps' queries. The plane goes through the origin and keeps the two directions of "
                             "largest spread of all kᵢ and qₜ (PCA): a sketch, the exact scores are in the lookup "
                             "table.")
    if shown[2]:
        with tabs[2]:
            cols = st.columns(3, gap="medium")
            with cols[0]:
                _chart(lambda: fig_vectors.keys_heatmap(tr), "keys", K + "fig_k", cache=(request, None))
            with cols[1]:
                _chart(lambda: fig_vectors.values_heatmap(tr), "values", K + "fig_v", cache=(request, None))
            with cols[2]:
                _chart(lambda: fig_vectors.queries_heatmap(tr, step), "queries", K + "fig_q", cache=(request, step))


# --- what if ---------------------------------------------------------------------------------------

def _what_if(bundle, request: views.Request, tr: Trace, original: Trace) -> None:
    st.divider()
    st.subheader(":material/science: What if? Interventions")
    S = len(original.source_tokens)
    steps = max(original.steps, tr.steps)
    labels = [f"x{i + 1} = {t}" for i, t in enumerate(original.source_tokens)]
    attends = original.has_attention
    forcing = request.mode == "greedy"
    cols = st.columns(4, gap="medium")
    with cols[0]:
        st.select_slider("Softmax temperature τ", TEMPERATURES, key=K + "temperature", disabled=not attends,
                         help="α = softmax(e / τ): small τ sharpens attention, large τ flattens it")
    with cols[1]:
        masked = [i for i in _state("masked", []) if i < S]
        if masked != _state("masked", []):
            _set("masked", masked)
        st.multiselect("Mask input positions", list(range(S)), key=K + "masked", disabled=not attends,
                       format_func=lambda i: labels[i], help="Hidden from attention at every step")
    with cols[2]:
        _clamp(K + "pin_step", 1, steps)
        st.number_input("Pin attention at step t", 1, steps, key=K + "pin_step", disabled=not attends)
        st.selectbox("…entirely on input", list(range(S)), key=K + "pin_pos", format_func=lambda i: labels[i],
                     disabled=not attends)
        st.button("Pin", icon=":material/push_pin:", key=K + "pin", on_click=_add_pin, disabled=not attends)
    with cols[3]:
        vocab = [t for t in bundle.tgt_vocab.tokens if t not in (PAD, SOS)]
        _clamp(K + "force_step", 1, steps)
        st.number_input("Force the token at step t", 1, steps, key=K + "force_step", disabled=not forcing)
        st.selectbox("…to", vocab, key=K + "force_token", disabled=not forcing)
        st.button("Force", icon=":material/front_hand:", key=K + "force", on_click=_add_force, disabled=not forcing,
                  help=None if forcing else "Only in greedy mode (other modes fix the tokens)")
    if not attends:
        st.caption("This model has no attention: only forcing tokens applies.")
    demo = views.TEMPERATURE_DEMO
    showing_demo = (request.model, request.text, request.intervention) == \
        (demo.model, demo.text, Intervention(temperature=demo.temperature))
    if showing_demo:
        st.info(f"**What to look at:** {demo.look_at}", icon=":material/visibility:")
    elif demo.model in common.model_names():
        st.button(f"Example: τ = {demo.temperature:g} on {demo.model}, “{demo.text}”", key=K + "temperature_demo",
                  icon=":material/thermostat:", on_click=_temperature_demo, type="tertiary",
                  help="A temperature that visibly changes a translation (on the toy tasks the scores differ by "
                       "tens, and no temperature changes the output)")
    active = _describe(request.intervention)
    if not active:
        st.caption("No intervention: change τ, mask inputs, pin attention or force a token to see the "
                   "decoding change, side by side with the original.")
        return
    top = st.columns([8, 2], vertical_alignment="center")
    top[0].markdown("**Active:** " + " · ".join(active))
    top[1].button("Reset all", icon=":material/restart_alt:", key=K + "reset", on_click=_clear_interventions,
                  width="stretch")
    diff = first_difference(original.output_tokens, tr.output_tokens)
    left, right = st.columns(2, gap="large")
    with left:
        st.markdown(f"#### Original: {_md(views.output_text(bundle, original)) or '∅'}")
        _chart(fig_attention.attention_heatmap(original, diff, title="Original α") if attends else
               fig_steps.output_distribution(original, 0, title="Original ŷ₁"), "original", K + "fig_original")
    with right:
        st.markdown(f"#### Changed: {_md(views.output_text(bundle, tr)) or '∅'}")
        _cut_note(bundle, request, tr, caption=True)
        if request.intervention.masked:
            st.caption("Masked inputs are crossed out in grey: attention could not look at them.")
        _chart(fig_attention.attention_heatmap(tr, diff, title="Changed α") if attends else
               fig_steps.output_distribution(tr, 0, title="Changed ŷ₁"), "changed", K + "fig_changed")
    if diff is None:
        st.success("The output did not change.", icon=":material/check:")
    else:
        st.warning(f"The outputs first differ at step t = {diff + 1} (outlined in red).",
                   icon=":material/compare_arrows:")


def _clamp(key: str, lo: int, hi: int) -> None:
    value = st.session_state.get(key)
    if value is None or not lo <= int(value) <= hi:
        st.session_state[key] = min(max(int(value or lo), lo), hi)


def _describe(iv: Intervention) -> list[str]:
    out = []
    if iv.temperature != 1.0:
        out.append(f"temperature τ = {iv.temperature:g}")
    if iv.masked:
        out.append("masked " + ", ".join(f"x{i + 1}" for i in iv.masked))
    out += [f"step {t + 1} pinned to x{i + 1}" for t, i in iv.pins]
    out += [f"step {t + 1} forced to '{tok}'" for t, tok in iv.forced]
    return out


# --- downloads --------------------------------------------------------------------------------------

def _downloads(tr: Trace) -> None:
    st.divider()
    st.subheader(":material/download: Export")
    stem = f"trace-{tr.model_name}"
    cols = st.columns([2, 2, 6])
    cols[0].download_button("Trace as JSON", data=tr.to_json, file_name=f"{stem}.json", mime="application/json",
                            key=K + "json", on_click="ignore", width="stretch")
    cols[1].download_button("Trace as CSV", data=lambda: views.trace_csv(tr), file_name=f"{stem}.csv",
                            mime="text/csv", key=K + "csv", on_click="ignore", width="stretch")
    cols[2].caption("JSON: every vector of the trace. CSV: one row per step × input position (α, e, the "
                    "chosen token and its probability). Each figure: PNG from its camera icon, HTML below it.")


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(n: int) -> str:
    return str(n).translate(_SUBSCRIPTS)

