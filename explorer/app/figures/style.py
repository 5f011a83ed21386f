"""Shared look for every figure: large fonts for projectors, one colour scale, no cramped legends."""

from __future__ import annotations

import base64
import functools
import json
import re
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

FONT_SIZE = 16
# Latin in Streamlit's Source Sans, Chinese in the subset of Noto Sans CJK SC that the app serves
# (static/fonts; .streamlit/config.toml declares it): Chinese renders on machines without a CJK font.
CJK_FAMILY = "Explorer CJK"
FONT_FAMILY = f'"Source Sans", "Source Sans Pro", "{CJK_FAMILY}", "Open Sans", Arial, sans-serif'
CJK_FONT = Path(__file__).resolve().parents[3] / "static" / "fonts" / "explorer-cjk.woff2"
_CJK_TEXT = re.compile(r"[\u2e80-\u2fdf\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
# One colour language on every page (every figure takes its colours from here):
# - attention is blue: weights α on the "Blues" scale, a single weight or attention bar ATTENTION_COLOUR;
# - signed numbers (states, vectors, scores) on "RdBu" centred on 0: negative red, positive BLUE;
# - "true" (the task's true alignment, a correct answer) is green;
# - the current step / the chosen token / a warning line is the red ACCENT;
# - an input masked by a what-if (hidden from attention) is grey MASKED, crossed out, its label struck through.
ATTENTION_SCALE = "Blues"
ATTENTION_COLOUR = "#2171b5"  # the "Blues" scale at about 0.8
DIVERGING_SCALE = "RdBu"
NEUTRAL = "#8aa9c9"  # not chosen, not attended: a pale blue-grey
SERIES = "#444444"  # a plain data series that means none of these (a signal, a parameter count)
HIGHLIGHT = "#ff7f0e"  # a measured extreme pointed out in a lesson (the largest error)
ACCENT = "#d62728"
MASKED = "#7f7f7f"
TRUTH = "#2ca02c"
TEMPLATE = "plotly_white"

# New figures start from the house template: plotly applies the default template without validating
# it, whereas setting it on each figure costs ~25 ms (the Explore page draws a dozen figures per step).
pio.templates.default = TEMPLATE
pio.templates[TEMPLATE].layout.font.family = FONT_FAMILY


def styled(fig: go.Figure, title: str | None = None, height: int | None = None) -> go.Figure:
    """Apply the house style in place and return the figure."""
    if fig.layout.template.layout.plot_bgcolor != "white":  # made with another template
        fig.update_layout(template=TEMPLATE)
    # A title at the very top and room under it for a one-row legend: they never overlap.
    set_layout(fig, title=None if title is None else {"text": title, "x": 0.0, "xanchor": "left", "yref": "container",
                                                      "y": 1.0, "yanchor": "top", "pad": {"t": 8}},
               font={"size": FONT_SIZE, "family": FONT_FAMILY}, margin={"l": 60, "r": 20, "t": 84 if title else 20, "b": 50},
               legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0.0},  # left: the modebar shows top right
               hoverlabel={"font": {"size": FONT_SIZE}}, **({} if height is None else {"height": height}))
    return fig


def legend_below(fig: go.Figure, room: int = 40) -> go.Figure:
    """The legend under the figure (for a narrow chart whose legend would reach the toolbar top right)."""
    bottom = (fig.layout.margin.b or 50) + room
    return set_layout(fig, legend={"yref": "container", "y": 0.0, "yanchor": "bottom", "x": 0.0, "xanchor": "left"},
                      margin={"b": bottom})


def set_layout(fig: go.Figure, **props) -> go.Figure:
    """`fig.update_layout(**props)` with nested dicts (no "a_b" shorthands), at a fraction of the cost.

    update_layout parses every key path and costs ~8 ms a call; the Explore page draws eight figures
    per step. Here each property is merged by hand (nested dicts key by key, as update_layout does)
    and assigned once; None clears a property, as there. Axes: `xaxis=`/`yaxis=` (figures with one).
    """
    layout = fig.layout
    for key, value in props.items():
        current = layout[key].to_plotly_json() if isinstance(value, dict) else None
        layout[key] = _merged(current, value) if current else value
    return fig


def _merged(base: dict, extra: dict) -> dict:
    """`extra` over `base`, nested dicts merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def token_labels(tokens: list[str] | tuple[str, ...], start: int = 1) -> list[str]:
    """Axis labels that stay distinct when tokens repeat (Plotly merges equal category labels).

    Numbered from 1 like the seed's x_1..x_m and y_1..y_T; a space shows as ␣."""
    return [f"{i}:{'␣' if t == ' ' else t}" for i, t in enumerate(tokens, start=start)]


def plotly_config(filename: str, scale: int = 2) -> dict:
    """Streamlit `config=` for a chart: the modebar camera saves a sharp PNG named after the figure."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in filename).strip("-") or "figure"
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": safe, "scale": scale}}


def figure_html(fig: go.Figure) -> str:
    """A self-contained HTML page of a figure (plotly.js inlined: works offline); a figure with Chinese
    text carries the app's Chinese font inline, so it renders on a machine without one."""
    html = fig.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})
    text = json.dumps(json.loads(fig.to_json()), ensure_ascii=False)  # to_json escapes non-ASCII text
    face = cjk_font_face() if _CJK_TEXT.search(text) else ""
    return html.replace("<head>", f"<head><style>{face}</style>", 1) if face else html


@functools.lru_cache(maxsize=1)
def cjk_font_face() -> str:
    """A CSS @font-face rule with the served Chinese font as a data: URL ("" where it is not installed)."""
    if not CJK_FONT.is_file():
        return ""
    data = base64.b64encode(CJK_FONT.read_bytes()).decode("ascii")
    return (f'@font-face {{font-family: "{CJK_FAMILY}"; font-weight: 400; font-style: normal; '
            f'src: url(data:font/woff2;base64,{data}) format("woff2");}}')


def cjk_font_face_for(text: str) -> str:
    """A CSS @font-face rule with only the Chinese glyphs `text` uses, as a data: URL ("" when it uses none
    or the font is not installed): a file that carries it stays small (the whole font is 1.1 MB)."""
    chars = "".join(sorted(set(_CJK_TEXT.findall(text))))
    if not chars or not CJK_FONT.is_file():
        return ""
    import io
    from fontTools import subset
    from fontTools.ttLib import TTFont
    font = TTFont(io.BytesIO(CJK_FONT.read_bytes()))
    options = subset.Options()
    options.flavor = "woff2"
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=chars)
    subsetter.subset(font)
    out = io.BytesIO()
    font.flavor = "woff2"
    font.save(out)
    data = base64.b64encode(out.getvalue()).decode("ascii")
    return (f'@font-face {{font-family: "{CJK_FAMILY}"; font-weight: 400; font-style: normal; '
            f'src: url(data:font/woff2;base64,{data}) format("woff2");}}')


def symmetric_range(*arrays) -> float:
    """The largest |value| over arrays (at least a tiny positive number), for a colour scale centred on 0."""
    import numpy as np
    peak = 0.0
    for a in arrays:
        a = np.asarray(a, dtype=float)
        finite = a[np.isfinite(a)]
        if finite.size:
            peak = max(peak, float(np.abs(finite).max()))
    return peak if peak > 0 else 1e-9


def empty_figure(text: str, title: str | None = None, height: int = 240) -> go.Figure:
    """A blank figure carrying a message (e.g. a model without attention has no heatmap)."""
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                       font={"size": FONT_SIZE + 2})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return styled(fig, title, height=height)


PRESENTER_FONT_SIZE = 20
PRESENTER_MIN_SIZE = 16


def presented(fig: go.Figure) -> go.Figure:
    """A copy of a figure for a projector: every font at least PRESENTER_MIN_SIZE px, the base font
    PRESENTER_FONT_SIZE, the rest scaled by the same factor (the original, maybe cached, is untouched)."""
    scale = PRESENTER_FONT_SIZE / FONT_SIZE
    spec = fig.to_plotly_json()
    _scale_fonts(spec.get("layout", {}), scale)
    for trace in spec.get("data", []):
        _scale_fonts(trace, scale)
    font = spec.setdefault("layout", {}).setdefault("font", {})
    font["size"] = max(font.get("size", 0), PRESENTER_FONT_SIZE)
    # The spec comes from a valid figure and only font sizes changed: plotly's validators (its `_validate`
    # switch) would cost ~15 ms a figure, ~100 ms of every presenter step change; tests check the result is
    # the figure a validated copy gives.
    return go.Figure(spec, _validate=False)


def _scale_fonts(node, scale: float, in_font: bool = False) -> None:
    """Scale every `size` inside a font-like dict (font, tickfont, textfont, title.font, ...) in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            fontish = key.endswith("font")
            if in_font and key == "size" and isinstance(value, (int, float)):
                node[key] = max(value * scale, PRESENTER_MIN_SIZE)
            elif isinstance(value, (dict, list)):
                _scale_fonts(value, scale, fontish)
    elif isinstance(node, list):
        for item in node:
            _scale_fonts(item, scale, in_font)
