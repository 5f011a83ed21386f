"""A Plotly chart that stays mounted while its figure changes: Explore's step charts (issue 42's step change).

Why: Streamlit 1.67's st.plotly_chart hashes the figure into its element id, even with a `key`, and its browser
component reads the figure only when it mounts, so every chart whose figure changes with the step was unmounted
and drawn from scratch on each step (Plotly's layout run two or three times over). This component (st.components.v2,
in the page, no iframe) keeps one plot per key and hands the new figure to `Plotly.react`, which updates the plot in
place: the heatmap's box moves instead of the heatmap being rebuilt. The figure is still the pure function of the
trace that st.plotly_chart got (explorer/app/figures/*), sent as the same JSON.

plotly.js is plotly's own cartesian bundle of the installed package's plotly.js version (static/plotly: the 2D traces
the app's figures use, a third of the full bundle that the browser evaluated on every cold start), served by
Streamlit's static route for declared components (never a CDN) and loaded once per page, not per render. A click on a point (the heatmap's invisible cell markers)
comes back as the event `select`, shaped like st.plotly_chart's selection ({"selection": {"points": [...]}}).

The stepper (`stepper`, the same module in a second role, at the end of the step panel) lets the browser step
without waiting for the server: it holds each step chart's figures for the steps beside the current one (built by
the server from the trace, as the charts' own), draws them when ← → (presenter mode) or Prev/Next is pressed, and
tells the server the step as a value ({t, seq}), so the rest of the panel follows: a step no longer waits for the
whole panel's run, and presses that reach a busy server together are not merged into one (timings:
docs/PERFORMANCE.md's live-demo row).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import plotly.io as pio
import streamlit as st

PLOTLY_DIR = Path(__file__).resolve().parents[3] / "static" / "plotly"
PLOTLY_FILE = "plotly-cartesian.min.js"

TESTID = "explorerLiveChart"  # the plot's element
FRAME_PREFIX = "live_chart_"  # the key of the container around each live chart (its class: st-key-live_chart_KEY)
STEPPER_FRAME = "live_stepper"  # the container around the stepper (hidden)

HTML = f'<div class="explorer-live-chart" data-testid="{TESTID}"></div>'

JS = """
// What every live chart and the stepper on the page share (one object, whichever module instance made it).
const live = window.__explorerLive || (window.__explorerLive = { charts: new Map(), stepper: null, listening: false });

function plotlyOnce(url) {
  // One plotly.js per page, whichever chart asks first; kept apart from Streamlit's own copy.
  if (!window.__explorerPlotly) {
    window.__explorerPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = new URL(url, document.baseURI).href;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => { window.__explorerPlotly = null; reject(new Error("plotly.js did not load")); };
      document.head.appendChild(script);
    });
  }
  return window.__explorerPlotly;
}

function points(event) {
  return (event.points || []).map(p => ({
    curve_number: p.curveNumber, point_number: p.pointNumber, point_index: p.pointIndex,
    x: p.x, y: p.y, customdata: p.customdata,
  }));
}

// A chart off the screen is not redrawn when its figure changes (nobody sees that work: on the demo view at
// 1024x768 four of the six step charts are below the first screen); it is hidden until it has been, so it never
// shows an earlier step's numbers, and redrawn when it comes within 300 px of the screen.
const NEAR = 300;
const nearScreen = gd => {
  const r = gd.getBoundingClientRect();
  return r.width > 0 && r.bottom > -NEAR && r.top < window.innerHeight + NEAR;
};
const comingIntoView = new IntersectionObserver(entries => {
  for (const entry of entries) {
    if (!entry.isIntersecting) continue;
    const gd = entry.target;
    comingIntoView.unobserve(gd);
    if (gd.__pending) {
      const pending = gd.__pending;
      gd.__pending = null;
      draw(gd, pending.data, pending.setTriggerValue);
    }
  }
}, { rootMargin: `${NEAR}px 0px` });

async function draw(gd, data, setTriggerValue) {
  gd.__latest = data;  // a newer figure that arrives while one is drawn replaces it
  try {
    const Plotly = await plotlyOnce(data.plotly);
    if (gd.__latest !== data) return;
    const figure = JSON.parse(data.spec), traces = figure.data || [], layout = figure.layout || {};
    const tracesText = JSON.stringify(traces), configText = JSON.stringify(data.config), layoutText = {};
    for (const name of Object.keys(layout)) layoutText[name] = JSON.stringify(layout[name]);
    const before = gd.__drawn;
    gd.__drawn = { tracesText, configText, layoutText };
    let changed = null;
    if (before && before.tracesText === tracesText && before.configText === configText) {
      const names = new Set([...Object.keys(layoutText), ...Object.keys(before.layoutText)]);
      changed = [...names].filter(name => layoutText[name] !== before.layoutText[name]);
    }
    if (changed && changed.length === 0) {
      // the figure it shows already
    } else if (changed && changed.every(name => name === "shapes")) {
      // The same traces (compared as text, exactly) and a layout that differs only in its shapes (the heatmap
      // from one step to the next: only its box moves): Plotly.relayout redraws the shapes alone (~2 ms where
      // Plotly.react recomputed the whole heatmap, 30-70 ms).
      await Plotly.relayout(gd, { shapes: layout.shapes || [] });
    } else {
      await Plotly.react(gd, traces, layout, { ...data.config, responsive: true });
    }
  } catch (error) {  // a message in the chart's place, never a stack trace
    gd.textContent = "This chart could not be drawn (" + error.message + "): reload the page.";
    return;
  }
  if (gd.__latest === data && !gd.__pending) gd.style.visibility = "";
  if (data.select && !gd.__selectListener) {
    gd.__selectListener = true;
    gd.on("plotly_click", event => {
      const chosen = points(event);
      if (chosen.length) setTriggerValue("select", { selection: { points: chosen } });
    });
  }
}

function show(gd, data, setTriggerValue) {
  if (gd.__drawn && !nearScreen(gd)) {  // drawn before, now off the screen: later
    gd.__latest = data;
    gd.__pending = { data, setTriggerValue };
    gd.style.visibility = "hidden";
    comingIntoView.observe(gd);
    return;
  }
  gd.__pending = null;
  return draw(gd, data, setTriggerValue);
}

// Stepping in the browser. The stepper (at the end of the step panel) holds every step chart's figures for the
// steps beside the current one, made by the server from the trace like the current ones. ← → (presenter mode) and
// Prev/Next draw the next step's figures at once and tell the server the step as a value, {t, seq} (a value, not
// a click: presses that reach a busy server together are not merged into one); the server's run makes the rest
// of the panel (heading, formulas, table, URL) follow and echoes the last seq it has seen. Until it has seen the
// browser's latest press, a figure it sends for another step is left out, so fast presses never go back to an
// earlier step; once it has, what it sends is the truth (Play, a heatmap click and the slider step there too).
const PENDING_MS = 20000;  // a press the server never answered (a lost connection) stops holding its figures back

function pending() {
  const s = live.stepper;
  if (!s || !s.pending || !s.el.isConnected) return null;
  if (Date.now() - s.pending.at > PENDING_MS) s.pending = null;
  return s.pending;
}

function settle(seq) {
  const wanted = pending();
  if (wanted && seq >= wanted.seq) live.stepper.pending = null;
}

function stale(data) {
  const wanted = pending();
  return !!wanted && data.step !== null && data.seq < wanted.seq && data.step !== wanted.t;
}

function showStep(s, t) {
  if (!s.ahead[t]) return;  // none of this step's figures here: every chart waits for the server's, as before
  for (const [key, chart] of live.charts) {
    if (!chart.gd.isConnected) { live.charts.delete(key); continue; }
    if (chart.step === null) continue;  // the same at every step
    const figure = s.ahead[t][key];
    if (figure) {
      show(chart.gd, { ...figure, key, step: t, seq: s.seq, plotly: s.plotly, select: chart.select },
           chart.setTriggerValue);
    } else {  // a chart without this step's figure here: hidden (never an earlier step's numbers beside the new
      // step's) until the server sends it
      chart.gd.__latest = null;
      chart.gd.__pending = null;
      chart.gd.style.visibility = "hidden";
    }
  }
}

function go(s, delta) {
  const from = s.pending ? s.pending.t : s.t;
  const t = Math.min(Math.max(from + delta, 1), s.steps);
  if (t === from) return;
  s.seq += 1;
  s.pending = { t, seq: s.seq, at: Date.now() };
  showStep(s, t);
  s.setStateValue("step", { t, seq: s.seq });
}

function editable(event) {  // typing in a field stays typing (as Streamlit's own shortcuts have it)
  return (event.composedPath ? event.composedPath() : [event.target]).some(el =>
    el && el.tagName && (["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName) || el.isContentEditable));
}

function listen() {
  if (live.listening) return;
  live.listening = true;
  // Capturing on the window, before the buttons' own handlers (Streamlit's shortcut on the document, React's
  // click on its root), which would step again through the server.
  window.addEventListener("keydown", event => {
    const s = live.stepper, delta = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!delta || !s || !s.keys || !s.el.isConnected || event.defaultPrevented || event.altKey || event.ctrlKey
        || event.metaKey || event.shiftKey || editable(event)) return;
    event.preventDefault();
    event.stopPropagation();
    go(s, delta);
  }, true);
  window.addEventListener("click", event => {
    const s = live.stepper;
    if (!s || !s.el.isConnected || !event.target.closest) return;
    const button = event.target.closest("button");
    const delta = button && (button.closest(`.st-key-${s.buttons.next}`) ? 1
                             : button.closest(`.st-key-${s.buttons.prev}`) ? -1 : 0);
    if (!delta || button.disabled) return;
    event.preventDefault();
    event.stopPropagation();
    go(s, delta);
  }, true);
}

function stepper({ parentElement, data, setStateValue }) {
  let s = live.stepper;
  if (!s || s.el !== parentElement) s = live.stepper = { el: parentElement, pending: null, seq: 0 };
  Object.assign(s, { t: data.t, steps: data.steps, keys: data.keys, ahead: data.ahead, plotly: data.plotly,
                     buttons: data.buttons, setStateValue });
  s.seq = Math.max(s.seq, data.seq);
  settle(data.seq);
  // presses that ran past the steps the last run had figures for: drawn once a run brings them
  if (s.pending && s.ahead[s.pending.t]) showStep(s, s.pending.t);
  listen();
}

function chart({ parentElement, data, setTriggerValue }) {
  let gd = parentElement.querySelector(".explorer-live-chart");
  if (!gd) {  // the component's HTML makes it; never draw nowhere
    gd = document.createElement("div");
    gd.className = "explorer-live-chart";
    gd.setAttribute("data-testid", "TESTID");
    parentElement.appendChild(gd);
  }
  live.charts.set(data.key, { gd, setTriggerValue, select: data.select, step: data.step });
  // (only the stepper, the run's last element, settles a press: with it comes the step the next press starts from)
  if (stale(data)) return;
  return show(gd, data, setTriggerValue);
}

export default function (component) {
  const data = component.data[0];  // the one-element list it travels in (see draw)
  return data.role === "stepper" ? stepper({ ...component, data }) : chart({ ...component, data });
}
"""

CSS = ".explorer-live-chart { width: 100%; }"
STEPPER_CSS = f".st-key-{STEPPER_FRAME} {{ display: none !important; }}"

NAME = "explorer_live_chart"
STEPPER_NAME = "explorer_live_stepper"
_component = st.components.v2.component(NAME, html=HTML, css=CSS, js=JS.replace("TESTID", TESTID),
                                        isolate_styles=False)
# The same module (the page loads it once), in its stepper role: no element of its own to show.
_stepper = st.components.v2.component(STEPPER_NAME, css=STEPPER_CSS, js=JS.replace("TESTID", TESTID),
                                      isolate_styles=False)


def figure_json(fig: Any) -> str:
    """The figure as st.plotly_chart sends it (plotly.io's JSON, typed arrays as base64)."""
    return pio.to_json(fig, validate=False)


def plotly_url() -> str:
    """The address of plotly.js (PLOTLY_FILE) on this server.

    Declared only for its files: Streamlit serves a declared component's folder at component/<name>/<file>, with
    browser caching. Declared in the run, every time: a declaration outside a script run (an import by another
    thread of the server's, as its preload once did) is not registered, and the page's plotly.js was then a 404."""
    files = st.components.v1.declare_component("plotly_js", path=str(PLOTLY_DIR))
    return f"component/{files.name}/{PLOTLY_FILE}"


def _payload(data: dict) -> list[dict]:
    """What a live chart or the stepper sends: its data in a one-element list. Streamlit checks each value of a
    dict for a dataframe, which imports pandas and pyarrow (0.45 s) before the server's first chart could reach
    the browser; a list is sent as it is."""
    return [data]


def sent(proto_json: str) -> dict:
    """The data a live chart or the stepper sent, from its element's JSON (`_payload`'s list)."""
    return json.loads(proto_json)[0]


def draw(spec: str, *, key: str, config: dict, on_select: Callable[[], None] | None = None, t: int | None = None,
         seq: int = 0) -> Any:
    """Draw the figure JSON `spec` under `key`; the same key on the next run updates the same plot.

    `t`: the step (from 1) the figure shows, None when it is the same at every step; `seq`: the last browser step
    the server has seen (`seen`), so the browser can tell an answer to its latest press from an older one.
    `on_select` runs when a point is clicked; `clicked(st.session_state[key])` is then the selection."""
    data = {"spec": spec, "config": config, "plotly": plotly_url(), "select": on_select is not None, "key": key,
            "step": t, "seq": seq}
    callbacks = {"on_select_change": on_select} if on_select is not None else {}
    # The frame is in the page as soon as the run is, before the component's code has loaded and made the plot's
    # element: so a test or benchmark can wait until every chart has drawn (tests/browser_support.py CHARTS_DRAWN).
    with st.container(key=FRAME_PREFIX + key):
        return _component(key=key, data=_payload(data), width="stretch", height="content", **callbacks)


def stepper(*, key: str, t: int, steps: int, seq: int, keys: bool, ahead: dict[int, dict[str, dict]],
            buttons: dict[str, str], on_step: Callable[[], None]) -> Any:
    """The browser's side of stepping (see JS): at step `t` of `steps`, the live charts' figures for the steps
    beside it (`ahead`: {step: {chart key: {"spec", "config"}}}), the keys of the Prev and Next buttons
    (`buttons`: {"prev", "next"}) and whether ← → step (`keys`). `on_step` runs when the browser has stepped;
    `stepped(st.session_state[key])` is then its step."""
    data = {"role": "stepper", "t": t, "steps": steps, "seq": seq, "keys": keys, "plotly": plotly_url(),
            "ahead": {str(s): figures for s, figures in ahead.items()}, "buttons": buttons}
    with st.container(key=STEPPER_FRAME):
        return _stepper(key=key, data=_payload(data), width="stretch", height="content", on_step_change=on_step)


def _browser_step(state: Any) -> dict:
    try:
        value = state.get("step")
    except AttributeError:
        return {}
    return value if isinstance(value, dict) else {}


def stepped(state: Any) -> int | None:
    """The step (from 1) the browser went to, from the stepper's session state; None when it has not stepped."""
    t = _browser_step(state).get("t")
    return int(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def seen(state: Any) -> int:
    """The number of the browser's latest step the server has seen (0: none)."""
    seq = _browser_step(state).get("seq")
    return int(seq) if isinstance(seq, (int, float)) and not isinstance(seq, bool) else 0


def clicked(state: Any) -> Any:
    """The selection of a click on a live chart ({"selection": {"points": [...]}}), from its session state (the
    component's events by name); None when nothing was clicked."""
    try:
        return state.get("select")
    except AttributeError:
        return None
