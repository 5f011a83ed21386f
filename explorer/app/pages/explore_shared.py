"""What the Explore page's parts share: the trace of a request (cached), figures drawn with their downloads
(cached per step), markdown escaping of user and model text, and a guard that turns a failing section into
a message."""

from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from explorer.engine import lengths
from explorer.errors import ExplorerError
from explorer.app.figures.margins import fit_margins
from explorer.app.figures.style import figure_html, plotly_config, presented
from explorer.app.pages import beam_panel, common, live_chart, presenter
from explorer.app.pages.explore_state import K
from explorer.record import Trace
from explorer.app.engine_link import engine_module

views = engine_module("explorer.app.views")
model_registry = engine_module("explorer.checkpoints.registry")


def candidates(request: views.Request) -> list:
    return list(beam_panel.record(request).candidates)


def trace_for(request: views.Request) -> Trace:
    if request.mode == "greedy":
        return common.cached_trace(request.model, request.text, request.intervention)
    if request.mode == "teacher":
        if not request.target.strip():
            raise ExplorerError("teacher-forced mode needs a target: type the output to force")
        return common.cached_trace(request.model, request.text, request.intervention, request.target)
    record = beam_panel.record(request)
    key = ("explore-trace", common.model_key(request.model), request)
    return common.cached(key, lambda: views.request_trace(common.get_model(request.model), request, record=record))


def _figure(request: views.Request, name: str, step: int | None, build: Callable[[], Any]):
    """A figure built once per (model version, request, figure, step): revisiting a step costs nothing."""
    if K + "figures" not in st.session_state:
        st.session_state[K + "figures"] = model_registry.LRUCache(320)  # a figure and its presenter copy
    key = (common.model_key(request.model), request, name, step)
    return st.session_state[K + "figures"].get_or_compute(key, build)


def chart(fig, name: str, key: str, cache: tuple | None = None, **kwargs: Any):
    """A figure with a PNG camera (the modebar) and, out of presenter mode, an HTML download (self-contained,
    offline).

    `fig` may be a builder (no arguments); with `cache=(request, step)` it is built once per step, and so is its
    presenter-mode copy (making that copy was ~25 ms a chart, on every step change) and its JSON; such a chart is
    a live chart, updated in place when the step changes (`on_select` is then called on a point's click). A built
    figure's margins already hold its labels and colour bar (figures/margins.py), so the browser draws it in one
    pass."""
    shown = None
    if callable(fig):
        build = fig
        fig = _figure(cache[0], name, cache[1], lambda: fit_margins(build())) if cache is not None else fit_margins(build())
        if cache is not None and presenter.on():
            base = fig
            shown = _figure(cache[0], name + " presented", cache[1], lambda: fit_margins(presented(base)))
    if cache is not None and cache[1] is not None:
        # A figure that changes with the step: one plot kept mounted and updated in place (pages/live_chart.py);
        # st.plotly_chart would unmount it and draw it from scratch on every step.
        drawn = shown if shown is not None else fig
        suffix = " presented json" if shown is not None else " json"
        spec = _figure(cache[0], name + suffix, cache[1], lambda: live_chart.figure_json(drawn))
        event = live_chart.draw(spec, key=key, config=plotly_config(name), on_select=kwargs.get("on_select"))
    else:
        # theme=None: our projector-sized fonts, not Streamlit's chart theme.
        event = common.chart(st, shown if shown is not None else fig, key=key, config=plotly_config(name),
                             ready=shown is not None, **kwargs)
    if presenter.on():  # no per-chart links on a projector (and six elements fewer for every step change)
        return event
    st.download_button("HTML", icon=":material/download:", data=lambda: figure_html(fig), file_name=f"{name}.html",
                       mime="text/html", key=key + "_html", on_click="ignore", type="tertiary",
                       help="Download this figure as an interactive HTML page (PNG: the camera icon on the chart)")
    return event


def md(text: str) -> str:
    """User or model text shown inside markdown, its markup characters escaped."""
    return "".join("\\" + ch if ch in "\\`*_{}[]<>()#+-.!|~$" else ch for ch in text)


def tok(token: str) -> str:
    """A token in markdown: a space shows as ␣."""
    return "␣" if token == " " else md(token)


def format_seconds(ms: float) -> str:
    return f"{ms:.0f} ms" if ms >= 1 else f"{ms:.2f} ms"


def guarded(section: Callable[..., None], *args: Any) -> None:
    """Draw one section; a failure in it is a message, and the rest of the page still draws."""
    try:
        section(*args)
    except Exception as exc:  # st.rerun/st.stop are BaseExceptions and pass through
        common.show_problem(exc)


def cut_note(bundle, request: views.Request, tr: Trace, caption: bool = False) -> None:
    """Say so when decoding stopped at its length cap (explorer/engine/lengths.py) rather than at <eos>."""
    note = None if request.mode == "teacher" else lengths.cut_note(bundle, len(tr.source_tokens), tr.output_tokens)
    if note and caption:
        st.caption(note)
    elif note:
        st.warning(note, icon=":material/content_cut:")
