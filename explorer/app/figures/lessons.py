"""Learn figures, one per lesson widget: sampling f(t), vectors of the RNN unit, parameter growth,
the decoder's output distributions, and the lookup weights.

Pure functions of `lessons` results and traces; every text on a figure is a parameter (the page
passes English or Chinese). Hover shows exact values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.record import Trace
from explorer.app.figures.attention import attention_heatmap
from explorer.app.figures.style import ACCENT, ATTENTION_COLOUR, HIGHLIGHT, SERIES, legend_below, ATTENTION_SCALE, DIVERGING_SCALE, TRUTH, styled, token_labels

if TYPE_CHECKING:  # lessons computes with torch; these figures only read its records: a real import would load torch
    from explorer.app.lessons import Lookup, ParameterGrowth, Sampling


def sampling_figure(s: Sampling, f_label: str = "f(t)", steps_label: str = "sampled sequence A_i",
                    error_label: str = "largest error", x_title: str = "time t", title: str | None = None) -> go.Figure:
    """The continuous f(t), its N samples held over each time step, and where the error is largest."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=s.t, y=s.f, mode="lines", name=f_label, line={"color": SERIES, "width": 3},
                             hovertemplate="t = %{x:.4f}<br>f(t) = %{y:.4f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=s.t, y=s.held, mode="lines", name=steps_label, line={"color": ACCENT, "width": 2},
                             hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=s.t_steps, y=s.samples, mode="markers", name=f"t_i, A_i (N = {s.n})",
                             marker={"color": ACCENT, "size": 9 if s.n <= 60 else 5}, showlegend=False,
                             customdata=np.arange(1, s.n + 1),
                             hovertemplate="i = %{customdata}<br>t_i = %{x:.4f}<br>A_i = %{y:.4f}<extra></extra>"))
    worst = int(np.argmin(np.abs(s.t - s.worst_t)))
    fig.add_trace(go.Scatter(x=[s.worst_t, s.worst_t], y=[s.f[worst], s.held[worst]], mode="lines+markers",
                             name=f"{error_label} = {s.max_error:.4f}",
                             line={"color": HIGHLIGHT, "width": 4}, marker={"size": 8},
                             hovertemplate=f"{error_label}: {s.max_error:.4f} at t = {s.worst_t:.4f}<extra></extra>"))
    fig.update_xaxes(title=x_title)
    return styled(fig, title, height=380)


def sampling_error_figure(ns: Sequence[int], errors: Sequence[float], current: int | None = None,
                          x_title: str = "time steps N", y_title: str = "largest error",
                          title: str | None = None) -> go.Figure:
    """The largest error against N on log–log axes: it falls towards zero (like 1/N)."""
    fig = go.Figure(go.Scatter(x=list(ns), y=list(errors), mode="lines+markers", name=y_title,
                               line={"color": SERIES, "width": 3},
                               hovertemplate="N = %{x}<br>error = %{y:.5f}<extra></extra>"))
    if current is not None and current in list(ns):
        k = list(ns).index(current)
        fig.add_trace(go.Scatter(x=[current], y=[errors[k]], mode="markers", name=f"N = {current}",
                                 marker={"color": ACCENT, "size": 16, "symbol": "diamond"},
                                 hovertemplate="N = %{x}<br>error = %{y:.5f}<extra></extra>"))
    fig.update_xaxes(title=x_title, type="log", tickvals=[v for v in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
                                                          if min(ns) <= v <= max(ns)])
    fig.update_yaxes(title=y_title, type="log", dtick=1)  # a label per power of ten
    fig = styled(fig, title, height=380)
    fig.update_layout(showlegend=False)
    return fig


def vectors_figure(rows: Mapping[str, np.ndarray], title: str | None = None, highlight: str | None = None,
                   x_title: str = "component", max_abs: float | None = None) -> go.Figure:
    """Vectors as coloured rows of numbers (diverging colours centred on 0); hover shows each value.

    Rows may differ in length (e.g. [h_{t-1}; x_t] is longer than h_t); shorter rows are padded blank.
    """
    labels = list(rows)
    width = max(len(np.ravel(v)) for v in rows.values())
    z = np.full((len(labels), width), np.nan)
    for r, v in enumerate(rows.values()):
        v = np.ravel(v)
        z[r, : len(v)] = v
    bound = max_abs if max_abs is not None else float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    text = np.where(np.isfinite(z), np.vectorize(lambda a: f"{a:.2f}")(np.nan_to_num(z)), "")
    show_text = width <= 24
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(1, width + 1)), y=labels, zmid=0, zmin=-bound, zmax=bound, colorscale=DIVERGING_SCALE,
        text=text if show_text else None, texttemplate="%{text}" if show_text else None,
        textfont={"size": 12}, xgap=1, ygap=3, colorbar={"thickness": 12},
        hovertemplate="%{y}<br>component %{x}<br>%{z:.6f}<extra></extra>"))
    if highlight in labels:
        r = labels.index(highlight)
        fig.add_shape(type="rect", x0=0.5, x1=width + 0.5, y0=r - 0.5, y1=r + 0.5, line={"color": ACCENT, "width": 3})
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title=x_title, dtick=1 if width <= 24 else None)
    return styled(fig, title, height=max(160, 70 + 44 * len(labels)))


def parameter_growth_figure(g: ParameterGrowth, shared_label: str = "shared W (one for all steps)",
                            unshared_label: str = "unshared W_t (one per step)", x_title: str = "sequence length",
                            y_title: str = "parameters", mark: int | None = None,
                            title: str | None = None) -> go.Figure:
    """Parameters of one RNN layer against length: flat when shared, a straight line up when not."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=g.lengths, y=g.unshared, mode="lines+markers", name=unshared_label,
                             line={"color": ACCENT, "width": 3},
                             hovertemplate="length %{x}<br>%{y:,} parameters<extra></extra>"))
    fig.add_trace(go.Scatter(x=g.lengths, y=g.shared, mode="lines+markers", name=shared_label,
                             line={"color": SERIES, "width": 3},
                             hovertemplate="length %{x}<br>%{y:,} parameters<extra></extra>"))
    if mark is not None and mark in g.lengths:
        k = g.lengths.index(mark)
        fig.add_vline(x=mark, line={"color": "#555555", "dash": "dot"})
        fig.add_annotation(x=mark, y=g.unshared[k], text=f"{g.unshared[k]:,} vs {g.shared[k]:,}", showarrow=True,
                           arrowhead=2, ax=-70, ay=-40, font={"size": 14}, bgcolor="white")
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, tickformat=",")
    return styled(fig, title, height=380)


def output_distribution_figure(tr: Trace, upto: int | None = None, x_title: str = "output token",
                               y_title: str = "step t (fed y_{t-1})", title: str | None = None) -> go.Figure:
    """ŷ_t for each decoding step so far: rows are steps labelled by the token fed in, the chosen token ringed."""
    T = tr.steps if upto is None else max(1, min(upto, tr.steps))
    vocab = [v for v in tr.target_vocab if v not in ("<pad>", "<unk>")]
    columns = [tr.target_vocab.index(v) for v in vocab]
    z = tr.probs[:T][:, columns]
    rows = [f"{t + 1}: {tr.previous_tokens[t]} →" for t in range(T)]
    fig = go.Figure(go.Heatmap(z=z, x=vocab, y=rows, zmin=0, zmax=1, colorscale=ATTENTION_SCALE,
                               colorbar={"title": "p", "thickness": 12},
                               hovertemplate="%{y} %{x}<br>p = %{z:.4f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[tr.output_tokens[t] for t in range(T)], y=rows, mode="markers", showlegend=False,
                             marker={"symbol": "square-open", "size": 22, "color": ACCENT, "line": {"width": 3}},
                             hoverinfo="skip"))
    fig.update_yaxes(autorange="reversed", type="category", title=y_title)
    fig.update_xaxes(type="category", title=x_title, side="top")
    return styled(fig, title, height=max(240, 90 + 30 * T))


def lookup_figure(lk: Lookup, y_title: str = "weight α_ti", x_title: str = "record i (input token)",
                  truth_label: str = "true position", title: str | None = None) -> go.Figure:
    """The lookup's weights α_ti over the records (input positions); hover shows the score e_ti too."""
    x = token_labels([r.token for r in lk.records])
    # Every weight is an attention bar (one colour); the true position is outlined, so a weight that
    # sits on it still shows as a weight (a green fill used to hide it).
    truth = [r.truth for r in lk.records]
    fig = go.Figure(go.Bar(
        x=x, y=[r.weight for r in lk.records], marker_color=ATTENTION_COLOUR, name=y_title,
        marker_line_color=[TRUTH if t else ATTENTION_COLOUR for t in truth],
        marker_line_width=[4 if t else 0 for t in truth], showlegend=True,
        customdata=[[r.score] for r in lk.records],
        hovertemplate="record %{x}<br>e = %{customdata[0]:.4f}<br>α = %{y:.4f}<extra></extra>"))
    if any(truth):
        fig.add_trace(go.Bar(x=[None], y=[None], marker={"color": "rgba(0,0,0,0)", "line": {"color": TRUTH, "width": 4}},
                             name=truth_label))
    fig.update_xaxes(type="category", title=x_title)
    fig.update_yaxes(title=y_title, range=[0, 1.05])
    fig = legend_below(styled(fig, title, height=360))
    fig.update_layout(showlegend=any(r.truth for r in lk.records), bargap=0.15)
    return fig


def attention_figure(tr: Trace, step: int | None = None, x_title: str = "input position i",
                     y_title: str = "output step t", truth_label: str = "true alignment",
                     title: str | None = None) -> go.Figure:
    """The attention heatmap with its texts in the page's language."""
    fig = attention_heatmap(tr, step, title)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    fig.for_each_trace(lambda trace: trace.update(name=truth_label), selector={"name": "true alignment"})
    return fig
