"""Margins that already hold what Plotly's automargin would push into them (tick labels, axis titles, the
colour bar), so the browser lays a chart out once instead of twice.

Plotly draws a figure, measures its tick labels, colour bar and titles, and when they need more room than
the margins give it draws the whole figure again with wider margins (`automargin`); every step change paid that
second pass (benchmarks/RESULTS.md has the timings). Here the room is estimated from the labels (widths per
character rounded up, erring wide) and the margins are set to it; automargin stays on, so a label wider than
estimated still gets its room.

Only simple figures are fitted: one x and one y axis, tick labels Plotly draws level or turns 90° (a set
`tickangle`, or labels it may turn 30°, leave that side to Plotly), colour bars of heatmaps at their default
place.
"""

from __future__ import annotations

import base64
import math
import re

import numpy as np
import plotly.graph_objects as go

from explorer.app.figures.style import FONT_SIZE

# Widths in em of the app's fonts (Source Sans; the CJK subset for wide characters), rounded up so an
# estimate errs wide: Source Sans digits are 0.50 em, lower case ~0.5, capitals up to 0.75.
NARROW = {**dict.fromkeys(" .,:;'|!ilj()[]", 0.3), **dict.fromkeys("-−·‘’", 0.36)}
SMALL = "₀₁₂₃₄₅₆₇₈₉ₐₑₒₓₔₕₖₗₘₙₚₛₜᵢⱼ⁰¹²³⁴⁵⁶⁷⁸⁹ⁱⁿ"  # sub- and superscript letters and digits
DIGIT_EM, LOWER_EM, OTHER_EM, SMALL_EM, WIDE_EM = 0.52, 0.52, 0.64, 0.4, 1.0
LINE_EM = 1.25  # a line of text's height
# The colour bar sits 2% of the plot's width right of it: reckoned for a plot this wide (a 1920 px screen's
# half), a few pixels too many at 1024 px, where most charts are narrower.
BAR_PLOT_PX = 600
TURNED_EM = 1.4  # labels turned 90°: their widest, plus this much of the font size (measured in Chromium)
GAP_PX = 8  # between a tick label and the plot area (Plotly's label offset plus the tick length, if any)
SLACK_PX = 4  # added to each estimated side: a pixel too wide costs nothing, one too narrow a second pass
_TAG = re.compile(r"</?(?:b|i|em|strong|sub|sup|s|u|br|a|span)(?:\s[^>]*)?/?>", re.IGNORECASE)  # Plotly's own
_WIDE = re.compile(r"[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]")


def _char_em(ch: str) -> float:
    if ch in NARROW:
        return NARROW[ch]
    if ch in SMALL:
        return SMALL_EM
    if ch.isdigit() or ch.islower():
        return DIGIT_EM if ch.isdigit() else LOWER_EM
    return WIDE_EM if _WIDE.match(ch) else OTHER_EM


def text_px(text: str, size: float) -> float:
    """The estimated width of one line of (Plotly-HTML) text at a font size, in pixels."""
    plain = _TAG.sub("", str(text)).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return size * sum(_char_em(ch) for ch in plain)


def _number_labels(lo: float, hi: float) -> list[str]:
    """Plotly's automatic tick labels of a linear range are at most this long: its ends to 2 decimals."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    step = abs(hi - lo) / 5 or 1.0
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return [f"{v:.{decimals}f}".replace("-", "−") for v in (lo, hi, (lo + hi) / 2)]


def _font_size(node: dict, base: float) -> float:
    size = (node.get("font") or node.get("tickfont") or {}).get("size") if isinstance(node, dict) else None
    return float(size) if size else base


def _axis_values(fig: go.Figure, letter: str) -> list:
    """The values the figure's traces place on an axis (category labels or numbers)."""
    out: list = []
    for trace in fig.data:
        if trace.type not in ("heatmap", "bar", "scatter"):
            return []
        values = getattr(trace, letter)
        if values is not None:
            out.extend(_plain(values))
    return out


def _plain(values) -> list:
    """A trace's array as a list, also when it is Plotly's typed-array form ({"dtype", "bdata"})."""
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values) if isinstance(values, (list, tuple)) else np.asarray(values).ravel().tolist()


def _tick_labels(fig: go.Figure, axis: dict, letter: str) -> list[str] | None:
    """The axis's tick labels as drawn (None: unknown, leave that side to Plotly)."""
    if axis.get("visible") is False or axis.get("showticklabels") is False:
        return []
    if axis.get("ticktext") is not None:
        return [str(t) for t in axis["ticktext"]]
    values = _axis_values(fig, letter)
    if axis.get("tickvals") is not None:
        values = list(axis["tickvals"])
    if axis.get("type") == "category" or any(isinstance(v, str) for v in values):
        return [str(v) for v in dict.fromkeys(values)]
    try:
        numbers = [float(v) for v in (axis.get("range") or values) if v is not None]
    except (TypeError, ValueError):  # dates or other values Plotly formats its own way
        return None
    numbers = [v for v in numbers if math.isfinite(v)]
    if axis.get("tickvals") is not None:
        return [f"{v:g}".replace("-", "−") for v in numbers]
    return _number_labels(min(numbers), max(numbers)) if numbers else []


def _axis_push(fig: go.Figure, layout: dict, letter: str, base: float, plot_px: float) -> tuple[str, float] | None:
    """(side, pixels) an axis's tick labels and title need outside the plot area; None: not estimated."""
    axis = layout.get(f"{letter}axis") or {}
    if "tickangle" in axis or axis.get("anchor") not in (None, "x", "y") or axis.get("position") is not None:
        return None
    labels = _tick_labels(fig, axis, letter)
    if labels is None:
        return None
    size = _font_size(axis, base)
    if letter == "x":
        side = "t" if axis.get("side") == "top" else "b"
        need = (LINE_EM * size + GAP_PX) if labels else 0.0
        widest = max((text_px(t, size) for t in labels), default=0.0)
        slot = plot_px / max(len(labels), 1)
        if labels and widest + size / 2 > slot:  # Plotly turns labels that collide: 30°, else 90°
            if LINE_EM * size <= slot / 2 + size / 4:
                return None  # maybe 30°, maybe 90°: its own measure
            need = widest + TURNED_EM * size
    else:
        side = "r" if axis.get("side") == "right" else "l"
        need = (max(text_px(t, size) for t in labels) + GAP_PX) if labels else 0.0
    title = (axis.get("title") or {}).get("text")
    if title:
        title_size = _font_size(axis.get("title") or {}, round(1.2 * base))
        need += LINE_EM * title_size + GAP_PX
    return side, need


def _colorbar_push(fig: go.Figure, base: float, plot_px: float) -> float | None:
    """Pixels on the right a trace's colour bar takes (0: none); None: not estimated."""
    need = 0.0
    for trace in fig.data:
        if trace.type != "heatmap" or trace.showscale is False:
            continue
        bar = trace.colorbar.to_plotly_json()
        if bar.get("x") is not None or bar.get("orientation") not in (None, "v"):
            return None
        size = _font_size({"tickfont": bar.get("tickfont") or {}}, base)
        if bar.get("ticktext") is not None:
            labels = [str(t) for t in bar["ticktext"]]
        elif trace.zmin is not None and trace.zmax is not None:
            labels = _number_labels(float(trace.zmin), float(trace.zmax))
        else:
            return None
        width = max((text_px(t, size) for t in labels), default=0.0)
        title = (bar.get("title") or {}).get("text")
        title_px = text_px(title, _font_size(bar.get("title") or {}, base)) if title else 0.0
        # x = 1.02 of the plot width, xpad 10 and the outline each side, the bar, its labels' offset
        need = max(need, 0.02 * plot_px + 2 * 10 + 2 + (bar.get("thickness") or 30) + max(width + GAP_PX, title_px))
    return need


def fit_margins(fig: go.Figure, width_px: float = 432) -> go.Figure:
    """The figure (changed in place) with each margin at least what its labels, titles and colour bar need.

    `width_px`: the narrowest the chart is drawn (half of Explore's width on a 1024 px projector), where
    category labels are likeliest to collide and be turned."""
    if any(t.type not in ("heatmap", "bar", "scatter") for t in fig.data) or any(
            (getattr(t, "xaxis", "x") or "x") != "x" or (getattr(t, "yaxis", "y") or "y") != "y" for t in fig.data):
        return fig
    layout = fig.layout.to_plotly_json()
    base = float((layout.get("font") or {}).get("size") or FONT_SIZE)
    margin = dict(layout.get("margin") or {})
    need: dict[str, float] = {}
    plot_px = width_px - margin.get("l", 80) - margin.get("r", 80)
    push = _axis_push(fig, layout, "y", base, plot_px)
    if push is not None:
        need[push[0]] = push[1]
    bar = _colorbar_push(fig, base, BAR_PLOT_PX)
    if bar is not None:
        need["r"] = max(need.get("r", 0.0), bar)
    plot_px = width_px - max(margin.get("l", 80), need.get("l", 0)) - max(margin.get("r", 80), need.get("r", 0))
    push = _axis_push(fig, layout, "x", base, plot_px)
    if push is not None:
        need[push[0]] = max(need.get(push[0], 0.0), push[1])
    changed = {side: math.ceil(px + SLACK_PX) for side, px in need.items()
               if px > 0 and math.ceil(px + SLACK_PX) > margin.get(side, 80)}
    if changed:
        fig.layout.margin = {**margin, **changed}
    return fig
