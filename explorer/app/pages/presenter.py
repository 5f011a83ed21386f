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

from typing import Any
from urllib.parse import urlencode

import segno
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

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
[data-testid="stMarkdownContainer"] code, [data-testid="stCode"] code {
  font-family: "Source Code Pro", "Source Code", ui-monospace, monospace, "Explorer CJK" !important;
}
"""

# Every text a room reads at least 16 px: each element keeps its parent's size (1em) unless that is
# smaller; headings, formulas (KaTeX sizes its sub- and superscripts in em), icons and chart SVG keep theirs.
# Tables are drawn on a canvas at Streamlit's small size (0.875 of 17 px; a progress column's labels at 0.9 of
# that, 13.4 px): zoomed as a whole, 1.2x, so those labels draw at 16 px; the frame around the grid is zoomed with
# its width divided by the zoom, so Streamlit sizes the grid to fit and the zoomed table is as wide as its column
# (a table zoomed by itself ran 10% past it and lost its last column at 1024 px).
PRESENTER_CSS = """
[data-testid="stMainBlockContainer"] { padding-top: 3.5rem !important; padding-bottom: 2rem !important; }
[data-testid="stMainBlockContainer"] .katex { font-size: 1.45em; }
[class*="_html"][class*="st-key-"], [class*="st-key-"][class*="_timing"] { display: none !important; }
[data-testid="stCaptionContainer"] { font-size: 1rem; }
[data-testid="stApp"] *:not(h1, h2, h3, h4, h5, h6, .katex, .katex *, svg, svg *, [data-testid="stIconMaterial"],
  [data-testid="stIconMaterial"] *, .material-symbols-rounded) { font-size: max(1em, 16px) !important; }
[data-testid="stFullScreenFrame"]:has(> [data-testid="stDataFrame"]) { zoom: 1.2; width: calc(100% / 1.2) !important; }
[data-testid="stDataFrame"] { contain: paint; }
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] * {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important; height: auto !important;
}
"""

# The keys of the step controls (Streamlit's own button shortcuts, which leave typing in a field alone).
SHORTCUTS = {"first": "Home", "prev": "Left", "play": "Space", "next": "Right", "last": "End"}


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
    """The switch (top right, on every page) and the CSS it turns on; in presenter mode also a QR code of the
    view, which a page refreshes (`qr_code`) once it has written its state into the address."""
    presenting = on()
    if presenting and st.query_params.get(URL_KEY) != "1":  # a page change dropped it from the address
        st.query_params[URL_KEY] = "1"
    with st.container(key="presenter_bar", horizontal=True, horizontal_alignment="right",
                      vertical_alignment="center"):
        if presenting:
            holder = st.popover("QR code", icon=":material/qr_code_2:", key="presenter_qr",
                                help="This view as a QR code, so a class can open it on their phones").empty()
            _QR_HOLDERS[_session()] = holder
            _fill_qr(holder)
        st.toggle("Presenter mode", key=KEY, on_change=_on_switch,
                  help="For a projector: larger chart labels and formulas, less chrome, and the keyboard "
                       "steps (← → step, space play/pause, Home/End). Also `?present=1` in the address.")
    st.html(f"<style>{ALWAYS_CSS}{PRESENTER_CSS if presenting else ''}</style>")


# The QR code's place in this run's page, per session (a page refreshes it at its end).
_QR_HOLDERS: dict[str, Any] = {}


def _session() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def view_address(base: str, params: dict[str, str]) -> str:
    """The address of the current view: the page's URL and its query string."""
    query = urlencode(params)
    return f"{base}?{query}" if query else base


def qr_svg(address: str) -> str:
    """A QR code of `address` as an SVG data URI (segno; medium error correction survives a projector's blur)."""
    return segno.make(address, error="m").svg_data_uri(scale=6, border=2)


def _fill_qr(holder: Any) -> None:
    base = st.context.url
    with holder.container():
        if not base:
            st.caption("The address of this view is not known here.")
            return
        address = view_address(base, st.query_params.to_dict())
        st.html(f'<img src="{qr_svg(address)}" alt="QR code of this view" width="260" height="260">')
        st.code(address, language=None, wrap_lines=True)
        st.caption("Phones reach it when the app is served on an address of the room's network (not localhost).")


def qr_code() -> None:
    """Redraw the QR code with the address as the page left it (its model, input, step, what-if)."""
    holder = _QR_HOLDERS.pop(_session(), None)
    if holder is not None and on():
        _fill_qr(holder)


def shortcut(control: str) -> str | None:
    """The key of a step control ("first", "prev", "play", "next", "last"; "play" also pauses) in presenter mode."""
    return SHORTCUTS[control] if on() else None
