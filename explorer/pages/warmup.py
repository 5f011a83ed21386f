"""Start the browser loading its chart, formula and table renderers while the server is still busy.

Streamlit's browser code fetches the renderer of a Plotly chart (4.7 MB of JavaScript), of a formula
and of a table only when the first such element arrives. On a session's first run that was after the
server had imported torch and traced the default input (~2 s), so the browser sat idle and then
spent ~2 s more loading them. `start()` sends one hidden element of each kind before any heavy
import; `finish(holder)` removes them once the page has drawn.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

STATE_KEY = "warmup_sent"
CONTAINER_KEY = "explorer-warmup"
HIDE = f"<style>.st-key-{CONTAINER_KEY} {{display: none}}</style>"


def start() -> DeltaGenerator | None:
    """On a session's first run, a hidden chart, formula and table; None on later runs (the browser
    has the renderers)."""
    if st.session_state.get(STATE_KEY):
        return None
    st.session_state[STATE_KEY] = True
    holder = st.empty()
    with holder.container(key=CONTAINER_KEY):
        st.html(HIDE)
        st.plotly_chart(go.Figure(), key="warmup_chart")
        st.latex("x")
        st.dataframe({"x": [0]}, key="warmup_table")
    return holder


def finish(holder: DeltaGenerator | None) -> None:
    """Remove the hidden elements (they were only there to be loaded)."""
    if holder is not None:
        holder.empty()
