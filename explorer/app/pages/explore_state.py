"""The Explore page's state: its session-state keys, the URL it reads and writes, and the widgets' callbacks.

Model, input, mode, target, beam width, step, beam node and the what-if live in the URL (so a demo can be
bookmarked) and in session state under keys that start with `explore_` (K). Callbacks run before the
script, so they may change widget state.
"""

from __future__ import annotations

import random
from typing import Any

import streamlit as st

from explorer.errors import ExplorerError
from explorer.limits import url_number
from explorer.app.pages import addresses, common, live_chart
from explorer.record import INTERVENTION_URL_KEYS, Intervention
from explorer.app.engine_link import engine_module

views = engine_module("explorer.app.views")

TEMPERATURES = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
INTERVENTION_KEYS = ("explore_masked", "explore_pins", "explore_forced")
URL_KEYS = ("model", "input", "mode", "target", "width", "step", "node") + INTERVENTION_URL_KEYS

K = "explore_"  # every session-state key of this page starts with this


def get(name: str, default: Any = None) -> Any:
    return st.session_state.get(K + name, default)


def put(name: str, value: Any) -> None:
    st.session_state[K + name] = value


def reset_view() -> None:
    """A new model or input: back to step 1, no interventions, the best beam candidate."""
    put("step", 1)
    put("playing", False)
    put("candidate", 0)
    put("node", None)
    put("masked", [])
    put("pins", [])
    put("forced", [])
    put("temperature", 1.0)


def apply_url(names: list[str]) -> None:
    """Model, input, mode, target, beam width, step and what-if from the query string: on the session's
    first run, and whenever the URL names a view other than the one this page last wrote (a link from
    another page), not a step the page's own step panel wrote since the last full run."""
    incoming = {key: st.query_params.get(key) for key in URL_KEYS}
    synced = get("synced") or {}
    changed = {key: value for key, value in incoming.items() if value is not None and value != synced.get(key)}
    echoes = get("stepped") or []
    put("stepped", [])
    if get("init") and set(changed) == {"step"} and changed["step"] in echoes:
        # the browser's late copy of a step the step panel wrote since the last full run (a Play tick under
        # load): not a link, so the step shown stays and the URL catches up with it
        st.query_params["step"] = synced["step"]
        return
    first = not get("init")
    put("init", True)
    if not changed and not first:
        return
    if not first and ("model" in changed or "input" in changed):
        reset_view()
        put("example", None)
    model = incoming["model"]
    if model is not None:
        if model in names:
            put("model", model)
        else:
            put("url_problem", f"the link names a model {model!r} that is not available here")
    if incoming["input"] is not None:
        put("input", incoming["input"])
    if incoming["mode"] in views.MODES:
        put("mode", incoming["mode"])
    if incoming["target"] is not None:
        put("target", incoming["target"])
    for key, name, hi in (("width", "beam_width", views.MAX_BEAM_WIDTH), ("step", "step", 10_000)):
        if not incoming[key]:
            continue
        try:
            put(name, min(max(int(url_number(incoming[key], name.replace("_", " "))), 1), hi))
        except ExplorerError as exc:
            put("url_problem", str(exc))
    if "node" in changed or (first and incoming["node"] is not None):
        try:
            put("node", max(int(url_number(incoming["node"] or "", "beam node")), 1) - 1)
        except ExplorerError:
            put("url_problem", f"the link's beam node {str(incoming['node'])[:20]!r} is not a number")
    if first or any(key in changed for key in INTERVENTION_URL_KEYS):
        _apply_url_intervention(incoming)
    put("synced", {key: value for key, value in incoming.items() if value is not None})


def _apply_url_intervention(incoming: dict[str, str | None]) -> None:
    """The link's what-if replaces the current one; a malformed one is a message and changes nothing."""
    try:
        iv = views.intervention_from_query(incoming)
        if iv.temperature not in TEMPERATURES:
            raise ExplorerError(f"the link's temperature {iv.temperature:g} is not one of the slider's values "
                                f"({', '.join(f'{x:g}' for x in TEMPERATURES)})")
    except ExplorerError as exc:
        put("url_problem", f"{exc}; the what-if in the link was not applied")
        return
    put("temperature", iv.temperature)
    put("masked", list(iv.masked))
    put("pins", [tuple(p) for p in iv.pins])
    put("forced", [tuple(f) for f in iv.forced])


def sync_url(request: views.Request, t: int | None = None) -> None:
    """Write the current view into the query string (only what changed)."""
    want = {"model": request.model, "input": request.text, "mode": request.mode}
    if request.mode == "teacher":
        want["target"] = request.target
    if request.mode == "beam":
        want["width"] = str(request.beam_width)
        if request.node is not None:
            want["node"] = str(request.node + 1)
    want["step"] = str(t) if t is not None else st.query_params.get("step", "1")
    if t is not None:  # the step panel's own runs (Play's timer, Next): their URLs may come back late
        put("stepped", [*(get("stepped") or []), want["step"]][-64:])
    want.update(views.intervention_query(request.intervention))
    addresses.write_query(want, K + "sent", ("target", "width", "node") + INTERVENTION_URL_KEYS)
    put("synced", want)


def examples(bundle: Any) -> list[str]:
    """The selected model's example inputs; a shipped translation model's start with the article's sentence."""
    return views.example_inputs(bundle, article=common.is_shipped(get("model")))


def on_model_change() -> None:
    """Keep the input if the new model reads it (the same kind of input), else take its first example."""
    try:
        bundle = common.get_model(get("model"))
        previous = (get("synced") or {}).get("model")
        try:
            before = common.get_model(previous) if previous and previous != get("model") else None
        except ExplorerError:
            before = None
        offered = examples(bundle)
        if offered and not views.keeps_input(before, bundle, get("input") or ""):
            put("input", offered[0])
        if get("target"):
            try:
                bundle.prepare_target(get("target"))
            except ExplorerError:
                put("target", "")
    except ExplorerError:
        pass
    put("example", None)
    reset_view()


def on_example() -> None:
    if get("example"):
        put("input", get("example"))
        reset_view()


def on_random() -> None:
    try:
        bundle = common.get_model(get("model"))
        put("input", views.random_input(bundle, random.Random()))
    except ExplorerError:
        return
    put("example", None)
    reset_view()


def on_input() -> None:
    """A new input starts at step 1; a bad one changes nothing (the page says why, the last good view stays)."""
    put("example", None)
    try:
        common.get_model(get("model")).prepare(get("input") or "")
    except Exception:
        return
    reset_view()


def step_by(delta: int, steps: int) -> None:
    put("playing", False)
    put("step", min(max(int(get("step", 1)) + delta, 1), steps))


def on_browser_step() -> None:
    """The browser stepped (← → or Prev/Next, pages/live_chart.py) and has drawn that step's charts: the panel
    follows."""
    t = live_chart.stepped(st.session_state.get(K + "stepper"))
    if t is not None:
        put("playing", False)
        put("step", max(t, 1))


def set_playing(playing: bool, steps: int) -> None:
    """The play/pause button: what it said when pressed (so a press counts once, however often it arrives);
    playing from the last step starts again at the first."""
    if playing and int(get("step", 1)) >= steps:
        put("step", 1)
    put("playing", playing)


def on_candidate() -> None:
    """A candidate picked in the table replaces a beam-tree node."""
    put("playing", False)
    put("node", None)


def on_slider(version: int) -> None:
    """The user moved the step slider. Only the slider on screen counts: whenever the step changes any
    other way the slider gets a new key, so a value a lagging browser sends for an older one is ignored."""
    if version == get("slider_version", 0) and not get("playing"):
        put("step", int(get(f"t{version}", 1)))


def selected_cell(event: Any) -> tuple[int, int] | None:
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


def heatmap_click() -> tuple[int, int] | None:
    """The heatmap cell (t, i) the last click chose (the heatmap is a live chart: pages/live_chart.py)."""
    return selected_cell(live_chart.clicked(st.session_state.get(K + "heatmap")))


def on_heatmap_click() -> None:
    cell = heatmap_click()
    if cell is not None:
        put("last_click", cell)
        put("step", cell[0] + 1)
        put("playing", False)


def clear_interventions() -> None:
    for key in INTERVENTION_KEYS:
        st.session_state[key] = []
    put("temperature", 1.0)


def intervention() -> Intervention:
    return Intervention(temperature=float(get("temperature", 1.0)),
                        masked=tuple(sorted(int(i) for i in get("masked", []))),
                        pins=tuple((int(t), int(i)) for t, i in get("pins", [])),
                        forced=tuple((int(t), str(tok)) for t, tok in get("forced", [])))
