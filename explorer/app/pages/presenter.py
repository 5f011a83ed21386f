"""Presenter mode and the page chrome every page shares: one switch (or `?present=1` in the address)
for a live demo on a projector.

In presenter mode the charts and formulas use larger type (chart labels at least 16 px, see
`explorer.app.figures.style.presented`), the keyboard steps (← → step or section, space play/pause,
Home/End first/last), and the chrome shrinks (less top padding, no per-chart download links or timing
notes). Always on: long outputs and headings wrap instead of ending in an ellipsis.

The keys are the step buttons' own shortcuts (st.button(shortcut=...)): a key press is a click on the
button, through the same callback; they exist only while presenter mode is on, and typing in a field
stays typing.
"""

from __future__ import annotations

import streamlit as st

KEY = "presenter"
URL_KEY = "present"

# Texts that must never be cut: a metric (the decoded output) wraps like a paragraph. Formulas: KaTeX's
# own fonts have no Chinese, so a token such as 我 in a formula falls back to the served Chinese font
# (the math classes name their own KaTeX fonts and keep them).
ALWAYS_CSS = """
[data-testid="stMetricValue"], [data-testid="stMetricValue"] * {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  overflow-wrap: anywhere; height: auto !important; line-height: 1.2;
}
.katex { font-family: KaTeX_Main, "Times New Roman", "Explorer CJK", serif !important; }
"""

# Every text a room reads at least 16 px: each element keeps its parent's size (1em) unless that is
# smaller; headings, formulas (KaTeX sizes its sub- and superscripts in em), icons and chart SVG keep theirs.
# Tables are drawn on a canvas at Streamlit's small size: zoomed as a whole.
PRESENTER_CSS = """
[data-testid="stMainBlockContainer"] { padding-top: 3.5rem !important; padding-bottom: 2rem !important; }
[data-testid="stMainBlockContainer"] .katex { font-size: 1.45em; }
[class*="_html"][class*="st-key-"], [class*="st-key-"][class*="_timing"] { display: none !important; }
[data-testid="stCaptionContainer"] { font-size: 1rem; }
[data-testid="stApp"] *:not(h1, h2, h3, h4, h5, h6, .katex, .katex *, svg, svg *, [data-testid="stIconMaterial"],
  [data-testid="stIconMaterial"] *, .material-symbols-rounded) { font-size: max(1em, 16px) !important; }
[data-testid="stDataFrame"] { zoom: 1.1; }
"""

# The keys of the step controls (Streamlit's own button shortcuts, which leave typing in a field alone).
SHORTCUTS = {"first": "Home", "prev": "Left", "play": "Space", "pause": "Space", "next": "Right", "last": "End"}


def on() -> bool:
    """Whether this session presents (set by the switch or by `?present=1`)."""
    if KEY not in st.session_state:
        st.session_state[KEY] = st.query_params.get(URL_KEY) == "1"
    return bool(st.session_state[KEY])


def _on_switch() -> None:
    if st.session_state[KEY]:
        st.query_params[URL_KEY] = "1"
    elif URL_KEY in st.query_params:
        del st.query_params[URL_KEY]


def switch() -> None:
    """The switch (top right, on every page) and the CSS it turns on."""
    presenting = on()
    if presenting and st.query_params.get(URL_KEY) != "1":  # a page change dropped it from the address
        st.query_params[URL_KEY] = "1"
    with st.container(key="presenter_bar", horizontal=True, horizontal_alignment="right"):
        st.toggle("Presenter mode", key=KEY, on_change=_on_switch,
                  help="For a projector: larger chart labels and formulas, less chrome, and the keyboard "
                       "steps (← → step, space play/pause, Home/End). Also `?present=1` in the address.")
    st.html(f"<style>{ALWAYS_CSS}{PRESENTER_CSS if presenting else ''}</style>")


def shortcut(control: str) -> str | None:
    """The key of a step control ("first", "prev", "play", "pause", "next", "last") in presenter mode."""
    return SHORTCUTS[control] if on() else None
