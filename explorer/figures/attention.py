"""Attention figures: the α heatmap (outputs × inputs) with the current step and ground truth marked."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..trace import Trace
from .style import ACCENT, ATTENTION_SCALE, TRUTH, styled, token_labels


def attention_heatmap(trace: Trace, step: int | None = None, title: str | None = None) -> go.Figure:
    """α_ti as a heatmap: rows are output steps, columns input positions; hover shows exact values.

    An invisible scatter covers the cells so a click selects a cell (Plotly heatmap clicks do not reach
    Streamlit); the current step is outlined and the true alignment, when known, is ringed.
    """
    x = token_labels(trace.source_tokens)
    y = token_labels(trace.output_tokens)
    T, S = trace.weights.shape if trace.has_attention else (len(y), len(x))
    z = trace.weights if trace.has_attention else np.zeros((T, S))
    fig = go.Figure(go.Heatmap(
        z=z, x=x, y=y, zmin=0.0, zmax=1.0, colorscale=ATTENTION_SCALE, showscale=True,
        colorbar={"title": "α"},
        hovertemplate="output %{y}<br>input %{x}<br>α = %{z:.4f}<extra></extra>"))
    xs, ys, custom = [], [], []
    for t in range(T):
        for i in range(S):
            xs.append(x[i])
            ys.append(y[t])
            custom.append([t, i])
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", customdata=custom, showlegend=False,
                             marker={"symbol": "square", "size": 18, "opacity": 0},
                             hoverinfo="skip", name="cells"))
    if trace.alignment is not None:
        tt, ii = np.nonzero(trace.alignment[:T])
        fig.add_trace(go.Scatter(x=[x[i] for i in ii], y=[y[t] for t in tt], mode="markers", name="true alignment",
                                 marker={"symbol": "circle-open", "size": 14, "color": TRUTH, "line": {"width": 2}},
                                 hoverinfo="skip"))
    if step is not None and 0 <= step < T:
        fig.add_shape(type="rect", xref="x", yref="y", x0=-0.5, x1=S - 0.5, y0=step - 0.5, y1=step + 0.5,
                      line={"color": ACCENT, "width": 3})
    fig.update_yaxes(autorange="reversed", title="output step t", type="category")
    fig.update_xaxes(title="input position i", type="category", side="top")
    return styled(fig, title, height=max(320, 40 + 28 * T))
