"""Compare figures: accuracy against input length (the bottleneck picture) and parameter counts.

Pure functions: curves in, Plotly figure out. Every text on the figure is a parameter, so the
Learn page can draw the same picture in Chinese.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import plotly.graph_objects as go

from explorer.app.figures.style import ATTENTION_COLOUR, legend_below, styled

if TYPE_CHECKING:  # comparison runs models; these figures only read its records: a real import would load torch
    from explorer.training.comparison import BleuCurve, Curve

# One colour per score function, so a twin pair reads the same on every page.
ATTENTION_COLORS = {"dot": "#1f77b4", "scaled_dot": "#9467bd", "additive": "#ff7f0e", "none": "#7f7f7f"}
EXTRA_COLORS = ("#2ca02c", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#d62728")
LEGEND_ON_TOP = 3  # curves whose one-row legend fits left of the toolbar at 1024 px

METRIC_LABELS = {"exact_match": "exact match", "token_accuracy": "token accuracy",
                 "alignment_accuracy": "alignment accuracy"}


def curve_colors(curves: Sequence[Curve]) -> list[str]:
    """Score-function colours, with fresh ones when two curves share a score function."""
    used: set[str] = set()
    out, extra = [], iter(EXTRA_COLORS)
    for c in curves:
        color = ATTENTION_COLORS.get(c.attention, "#333333")
        if color in used:
            color = next(extra, "#333333")
        used.add(color)
        out.append(color)
    return out


def accuracy_by_length_figure(curves: Sequence[Curve], metric: str = "exact_match", title: str | None = None,
                              x_title: str = "input length (symbols)", y_title: str | None = None,
                              trained_label: str = "trained on", names: Mapping[str, str] | None = None,
                              height: int = 460) -> go.Figure:
    """Accuracy (%) against input length, one line per model; the training range is shaded.

    Hover shows the exact value and the number of samples behind it.
    """
    fig = go.Figure()
    ranges = {c.trained for c in curves if c.trained is not None}
    for lo, hi in sorted(ranges):
        fig.add_vrect(x0=lo - 0.5, x1=hi + 0.5, fillcolor="#d9d9d9", opacity=0.35, line_width=0, layer="below")
        if len(ranges) == 1:
            fig.add_annotation(x=lo - 0.5, xanchor="left", y=0.0, yref="paper", yanchor="bottom", showarrow=False,
                               text=f"{trained_label} {lo}–{hi}", font={"size": 14, "color": "#555555"})
    for index, (curve, color) in enumerate(zip(curves, curve_colors(curves))):
        xs = [r["length"] for r in curve.rows]
        ys = [None if r.get(metric) is None else 100.0 * r[metric] for r in curve.rows]
        label = (names or {}).get(curve.model, f"{curve.model} ({curve.attention})")
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines+markers", name=label,
            line={"color": color, "width": 3, "dash": "solid" if curve.attention != "none" else "dash"},
            marker={"size": 7},
            customdata=[[r["n"]] for r in curve.rows],
            hovertemplate=f"{label}<br>length %{{x}}<br>%{{y:.1f}}% (n=%{{customdata[0]}})<extra></extra>"))
    fig.update_xaxes(title=x_title, dtick=5, range=[0.5, max((max(c.lengths) for c in curves), default=40) + 0.5])
    fig.update_yaxes(title=y_title or f"{METRIC_LABELS.get(metric, metric)} (%)", range=[-3, 103], ticksuffix="%")
    fig = styled(fig, title, height=height)
    fig.update_layout(hovermode="closest", margin={"t": 70 if title else 50})
    if len(curves) > LEGEND_ON_TOP:  # a longer legend row would reach the toolbar at the top right
        fig = legend_below(fig, room=40 + 30 * ((len(curves) - 1) // LEGEND_ON_TOP))
    return fig


def parameter_figure(breakdowns: Mapping[str, Mapping[str, int]], title: str | None = None,
                     labels: Mapping[str, str] | None = None) -> go.Figure:
    """Parameters per part (encoder, decoder, attention, output) for each model, as stacked bars."""
    parts = ("encoder", "decoder", "attention", "output")
    colors = {"encoder": "#9467bd", "decoder": "#8c564b", "attention": ATTENTION_COLOUR, "output": "#7f7f7f"}
    models = list(breakdowns)
    fig = go.Figure()
    for part in parts:
        name = (labels or {}).get(part, part)
        fig.add_trace(go.Bar(
            y=models, x=[breakdowns[m].get(part, 0) for m in models], name=name, orientation="h",
            marker_color=colors[part],
            hovertemplate=f"%{{y}}<br>{name}: %{{x:,}} parameters<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="parameters", tickformat=",")
    fig.update_yaxes(autorange="reversed")
    return styled(fig, title, height=120 + 60 * len(models))


def bleu_by_length_figure(curves: Sequence[BleuCurve], metric: str = "bleu", title: str | None = None,
                          height: int = 420) -> go.Figure:
    """BLEU (or chrF) against source length in words, one line per translation model (attention solid,
    none dashed), each point's sentence count on hover."""
    fig = go.Figure()
    for curve, color in zip(curves, curve_colors(curves)):  # type: ignore[arg-type]
        labels = [f"{r['lo']}–{r['hi']}" if r["hi"] < 1000 else f"{r['lo']}+" for r in curve.rows]
        fig.add_trace(go.Scatter(
            x=labels, y=[r[metric] for r in curve.rows], mode="lines+markers", name=f"{curve.model} ({curve.attention})",
            line={"color": color, "width": 3, "dash": "solid" if curve.attention != "none" else "dash"},
            marker={"size": 8}, customdata=[[r["n"]] for r in curve.rows],
            hovertemplate=(f"{curve.model}<br>%{{x}} source words<br>{metric} %{{y:.1f}} "
                           "(%{customdata[0]} sentences)<extra></extra>")))
    fig.update_xaxes(title="source sentence length (words)", type="category")
    fig.update_yaxes(title="BLEU" if metric == "bleu" else "chrF", rangemode="tozero")
    fig = styled(fig, title, height=height)
    fig.update_layout(hovermode="closest", margin={"t": 70 if title else 50})
    return fig
