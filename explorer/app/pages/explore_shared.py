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


def _live_spec(request: views.Request, name: str, step: Any, fig: Any) -> str:
    """The JSON a live chart is sent: the figure (its presenter copy in presenter mode), once per step."""
    if presenter.on():
        shown = _figure(request, name + " presented", step, lambda: fit_margins(presented(fig)))
        return _figure(request, name + " presented json", step, lambda: live_chart.figure_json(shown))
    return _figure(request, name + " json", step, lambda: live_chart.figure_json(fig))


def _shown_step(step: Any) -> int | None:
    """The step (from 1) a live chart's cache step names ((request, step) or (request, (section, step))); None for a
    figure that is the same at every step."""
    last = step[-1] if isinstance(step, tuple) else step
    return last + 1 if isinstance(last, int) else None


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
        if cache is not None and presenter.on() and cache[1] is None:
            base = fig
            shown = _figure(cache[0], name + " presented", cache[1], lambda: fit_margins(presented(base)))
    if cache is not None and cache[1] is not None:
        # A figure that changes with the step: one plot kept mounted and updated in place (pages/live_chart.py);
        # st.plotly_chart would unmount it and draw it from scratch on every step.
        spec = _live_spec(cache[0], name, cache[1], fig)
        event = live_chart.draw(spec, key=key, config=plotly_config(name), on_select=kwargs.get("on_select"),
                                t=_shown_step(cache[1]), seq=live_chart.seen(st.session_state.get(STEPPER)))
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


STEPPER = K + "stepper"  # the browser's side of stepping (pages/live_chart.py)


def _step_charts() -> list:
    return st.session_state.setdefault(K + "step_charts", [])


def begin_steps() -> None:
    """A step panel run starts: no step charts yet."""
    st.session_state[K + "step_charts"] = []


def step_chart(build: Callable[[int], Any], name: Callable[[int], str], key: str, request: views.Request, step: int,
               **kwargs: Any):
    """A chart that changes with the step (a live chart): `build(s)` and `name(s)` are its figure and file name at
    step s (from 0). Drawn at `step`; `stepper` sends the browser its figures for the steps beside it."""
    _step_charts().append((key, build, name))
    return chart(lambda: build(step), name(step), key, cache=(request, step), **kwargs)


def stepper(request: views.Request, step: int, steps: int, on_step: Callable[[], None]) -> None:
    """At the end of the step panel: every step chart's figures for the steps before and after `step`, so ← → and
    Prev/Next draw them in the browser at once (the same figures, built by the same functions of the trace and
    the step, and cached as the ones drawn; the server's run then brings the rest of the panel)."""
    ahead = {}
    for s in (step - 1, step + 1):
        if 0 <= s < steps:
            ahead[s + 1] = {key: {"spec": _live_spec(request, name(s), s, _figure(
                                request, name(s), s, lambda build=build, s=s: fit_margins(build(s)))),
                                  "config": plotly_config(name(s))}
                            for key, build, name in _step_charts()}
    live_chart.stepper(key=STEPPER, t=step + 1, steps=steps, seq=live_chart.seen(st.session_state.get(STEPPER)),
                       keys=presenter.shortcut("next") is not None, ahead=ahead,
                       buttons={"prev": K + "prev", "next": K + "next"}, on_step=on_step)


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
