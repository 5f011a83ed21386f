"""A Plotly chart that stays mounted while its figure changes: Explore's step charts (issue 42's step change).

Why: Streamlit 1.67's st.plotly_chart hashes the figure into its element id, even with a `key`, and its browser
component reads the figure only when it mounts, so every chart whose figure changes with the step was unmounted
and drawn from scratch on each step (Plotly's layout run two or three times over). This component (st.components.v2,
in the page, no iframe) keeps one plot per key and hands the new figure to `Plotly.react`, which updates the plot in
place: the heatmap's box moves instead of the heatmap being rebuilt. The figure is still the pure function of the
trace that st.plotly_chart got (explorer/app/figures/*), sent as the same JSON.

plotly.js is the installed plotly package's own file, served by Streamlit's static route for declared components
(never a CDN) and loaded once per page, not per render. A click on a point (the heatmap's invisible cell markers)
comes back as the event `select`, shaped like st.plotly_chart's selection ({"selection": {"points": [...]}}).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import plotly
import plotly.io as pio
import streamlit as st

PLOTLY_DIR = Path(plotly.__file__).resolve().parent / "package_data"

TESTID = "explorerLiveChart"  # the plot's element
FRAME_PREFIX = "live_chart_"  # the key of the container around each live chart (its class: st-key-live_chart_KEY)

HTML = f'<div class="explorer-live-chart" data-testid="{TESTID}"></div>'

JS = """
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

export default function ({ parentElement, data, setTriggerValue }) {
  let gd = parentElement.querySelector(".explorer-live-chart");
  if (!gd) {  // the component's HTML makes it; never draw nowhere
    gd = document.createElement("div");
    gd.className = "explorer-live-chart";
    gd.setAttribute("data-testid", "TESTID");
    parentElement.appendChild(gd);
  }
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
"""

CSS = ".explorer-live-chart { width: 100%; }"

NAME = "explorer_live_chart"
_component = st.components.v2.component(NAME, html=HTML, css=CSS, js=JS.replace("TESTID", TESTID),
                                        isolate_styles=False)


def figure_json(fig: Any) -> str:
    """The figure as st.plotly_chart sends it (plotly.io's JSON, typed arrays as base64)."""
    return pio.to_json(fig, validate=False)


def plotly_url() -> str:
    """The address of the installed package's plotly.min.js on this server.

    Declared only for its files: Streamlit serves a declared component's folder at component/<name>/<file>, with
    browser caching. Declared in the run, every time: a declaration outside a script run (the server's preload
    thread imports this module) is not registered, and the page's plotly.js was then a 404."""
    files = st.components.v1.declare_component("plotly_js", path=str(PLOTLY_DIR))
    return f"component/{files.name}/plotly.min.js"


def draw(spec: str, *, key: str, config: dict, on_select: Callable[[], None] | None = None) -> Any:
    """Draw the figure JSON `spec` under `key`; the same key on the next run updates the same plot.

    `on_select` runs when a point is clicked; `clicked(st.session_state[key])` is then the selection."""
    data = {"spec": spec, "config": config, "plotly": plotly_url(), "select": on_select is not None}
    callbacks = {"on_select_change": on_select} if on_select is not None else {}
    # The frame is in the page as soon as the run is, before the component's code has loaded and made the plot's
    # element: so a test or benchmark can wait until every chart has drawn (tests/browser_support.py CHARTS_DRAWN).
    with st.container(key=FRAME_PREFIX + key):
        return _component(key=key, data=data, width="stretch", height="content", **callbacks)


def clicked(state: Any) -> Any:
    """The selection of a click on a live chart ({"selection": {"points": [...]}}), from its session state (the
    component's events by name); None when nothing was clicked."""
    try:
        return state.get("select")
    except AttributeError:
        return None
