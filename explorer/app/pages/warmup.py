"""Start the browser loading its element renderers while the server is still busy.

Streamlit's browser code fetches the renderer of an element kind (a Plotly chart: 4.7 MB of
JavaScript; a formula, a table, each kind of widget: smaller chunks) only when the first element of
that kind arrives, and shows a grey placeholder until it has. On a session's first run that was after
the server had imported the page's modules and traced the input (0.5-2 s: torch too, where the view is not a shipped
model's stored first trace), so the browser sat idle and then spent seconds more loading them. `start()` sends one hidden element of every kind the pages use
before any heavy import; `finish(holder)` removes them once the page has drawn.

Explore's first view draws only live charts (pages/live_chart.py: plotly's cartesian bundle, 1.5 MB), none
through st.plotly_chart, and no data grid (its lookup table is HTML), so a first run on Explore warms that
component and its plotly.js instead of Streamlit's chart renderer (4.7 MB of JavaScript that the browser would
evaluate for nothing on the first view) and the grid (1.4 MB, and pandas and pyarrow on the server); each loads
when an element of its kind is first shown.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.app.pages import live_chart

STATE_KEY = "warmup_sent"
CONTAINER_KEY = "explorer-warmup"
HIDE = f"<style>.st-key-{CONTAINER_KEY} {{display: none}}</style>"
K = "warmup_"  # widget keys


def start(live_charts: bool = False) -> DeltaGenerator:
    """On a session's first run, hidden elements of every kind the pages draw, the charts as live charts
    when `live_charts` (the page's first view has no other kind); on later runs an empty placeholder in the
    same place (the browser has the renderers), so that no element after it moves."""
    holder = st.empty()
    if st.session_state.get(STATE_KEY):
        return holder
    st.session_state[STATE_KEY] = True
    with holder.container(key=CONTAINER_KEY):
        st.html(HIDE)
        if live_charts:  # first: its plotly.js is fetched and evaluated while the server imports the engine
            live_chart.draw(live_chart.figure_json(go.Figure()), key=K + "live_chart", config={})
        st.latex("x")
        hidden = {"disabled": True, "label_visibility": "collapsed"}
        st.selectbox("warm-up", ["x"], key=K + "selectbox", **hidden)
        st.text_input("warm-up", key=K + "text", **hidden)
        st.number_input("warm-up", key=K + "number", **hidden)
        st.slider("warm-up", 0, 1, key=K + "slider", **hidden)
        st.multiselect("warm-up", ["x"], key=K + "multiselect", **hidden)
        st.segmented_control("warm-up", ["x"], key=K + "segmented", **hidden)
        st.radio("warm-up", ["x"], key=K + "radio", **hidden)
        st.checkbox("warm-up", key=K + "checkbox", **hidden)
        st.file_uploader("warm-up", key=K + "upload", **hidden)
        st.button("warm-up", key=K + "button", disabled=True)
        st.download_button("warm-up", b"", key=K + "download", disabled=True)
        st.metric("warm-up", 0, label_visibility="collapsed")
        st.progress(0)
        if not live_charts:
            st.plotly_chart(go.Figure(), key=K + "chart")  # the largest renderer (its evaluation blocks the rest)
            st.dataframe({"x": [0]}, key=K + "table")  # needs pandas: after the others
    return holder


def finish(holder: DeltaGenerator) -> None:
    """Remove the hidden elements (they were only there to be loaded)."""
    holder.empty()
