"""Vector figures read off a Trace: the hidden states h_i and s_t, the projections K, V, Q, single
vectors of one step (s_{t-1}, c_{t-1}, s_t, q_t) and the query–key space in 2-D.

All use one diverging colour scale centred on 0; hover shows the exact number of every cell.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.engine.projection import project_queries_keys
from explorer.record import Trace
from explorer.app.figures.attention import NO_ATTENTION, attended_labels, output_labels, source_labels
from explorer.app.figures.style import (ACCENT, ATTENTION_SCALE, DIVERGING_SCALE, FONT_SIZE, empty_figure, set_layout, styled,
                    symmetric_range)

ROW_PX = 26
# A 1-px gap between cells reads well up to this many columns; past it (a translation model's 256
# dimensions in a half-width column) the gaps cover the cells and the strip looks empty.
MAX_GAPPED_COLUMNS = 64


def matrix_heatmap(matrix: np.ndarray, row_labels: Sequence[str], symbol: str, title: str | None = None,
                   row_title: str = "", mark_row: int | None = None) -> go.Figure:
    """Rows of vectors (N, D) as a heatmap; hover gives symbol_row[d] exactly; `mark_row` is outlined."""
    matrix = np.asarray(matrix, dtype=float)
    N, D = matrix.shape
    if D == 0:
        return empty_figure(f"{symbol}: no dimensions", title)
    peak = symmetric_range(matrix)
    dims = np.arange(1, D + 1)
    index = np.broadcast_to(np.arange(1, N + 1)[:, None], (N, D))
    fig = go.Figure(go.Heatmap(
        z=matrix, x=dims, y=list(row_labels), zmid=0, zmin=-peak, zmax=peak, colorscale=DIVERGING_SCALE,
        customdata=index, colorbar={"thickness": 14},
        hovertemplate=f"{symbol}<sub>%{{customdata}}</sub>[%{{x}}] = %{{z:.6g}}<br>%{{y}}<extra></extra>"))
    if mark_row is not None and 0 <= mark_row < N:
        fig.add_shape(type="rect", xref="x", yref="y", x0=0.5, x1=D + 0.5, y0=mark_row - 0.5, y1=mark_row + 0.5,
                      line={"color": ACCENT, "width": 4})
    set_layout(fig, yaxis={"autorange": "reversed", "type": "category", "title": {"text": row_title}},
               xaxis={"title": {"text": "dimension"}, "showgrid": False})
    return styled(fig, title, height=max(220, 110 + ROW_PX * N))


def encoder_states_heatmap(trace: Trace, title: str | None = "Encoder states hᵢ") -> go.Figure:
    """h_i, one row per input position (both directions side by side for a bidirectional encoder)."""
    return matrix_heatmap(trace.encoder_states, source_labels(trace), "h", title, "input xᵢ")


def decoder_states_heatmap(trace: Trace, step: int | None = None,
                           title: str | None = "Decoder states sₜ") -> go.Figure:
    """s_t, one row per output step (s_0 first), the current step outlined."""
    states = np.vstack([trace.initial_state[None, :], trace.decoder_states])
    labels = ["0:s₀ (from encoder)"] + output_labels(trace)
    fig = matrix_heatmap(states, labels, "s", title, "output step t", None if step is None else step + 1)
    fig.data[0].customdata = np.broadcast_to(np.arange(states.shape[0])[:, None], states.shape)
    return fig


def keys_heatmap(trace: Trace, title: str | None = "Keys kᵢ = Key(hᵢ)") -> go.Figure:
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    return matrix_heatmap(trace.keys, source_labels(trace), "k", title, "input xᵢ")


def values_heatmap(trace: Trace, title: str | None = "Values vᵢ = Value(hᵢ)") -> go.Figure:
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    return matrix_heatmap(trace.values, source_labels(trace), "v", title, "input xᵢ")


def queries_heatmap(trace: Trace, step: int | None = None,
                    title: str | None = "Queries qₜ = Query(sₜ)") -> go.Figure:
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    return matrix_heatmap(trace.queries, output_labels(trace), "q", title, "output step t", step)


def vector_rows(rows: Sequence[tuple[str, np.ndarray]], title: str | None = None) -> go.Figure:
    """A few single vectors, one strip each, on one shared colour scale (shorter ones end early)."""
    rows = [(label, np.asarray(v, dtype=float).ravel()) for label, v in rows]
    width = max(len(v) for _, v in rows)
    z = np.full((len(rows), width), np.nan)
    for n, (_, v) in enumerate(rows):
        z[n, : len(v)] = v
    peak = symmetric_range(z)
    labels = [label for label, _ in rows]
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(1, width + 1), y=labels, zmid=0, zmin=-peak, zmax=peak, colorscale=DIVERGING_SCALE,
        colorbar={"thickness": 14, "tickvals": [-peak, 0, peak], "ticktext": [f"{-peak:.2g}", "0", f"{peak:.2g}"]},
        xgap=1 if width <= MAX_GAPPED_COLUMNS else 0, ygap=6, hoverongaps=False,
        hovertemplate="%{y}[%{x}] = %{z:.6g}<extra></extra>"))
    set_layout(fig, yaxis={"autorange": "reversed", "type": "category", "tickfont": {"size": FONT_SIZE + 2}},
               xaxis={"title": {"text": "dimension"}, "showgrid": False})
    return styled(fig, title, height=130 + 52 * len(rows))


def state_update_figure(trace: Trace, step: int, title: str | None = None) -> go.Figure:
    """Step 1's numbers: s_{t-1} and c_{t-1} going in, s_t coming out (c_0 = 0, s_0 from the encoder)."""
    t = step + 1
    previous = trace.initial_state if step == 0 else trace.decoder_states[step - 1]
    rows = [(f"s{_sub(t - 1)}", previous)]
    if trace.has_attention:
        c_prev = np.zeros(trace.contexts.shape[1]) if step == 0 else trace.contexts[step - 1]
        rows.append((f"c{_sub(t - 1)}", c_prev))
    rows.append((f"s{_sub(t)}", trace.decoder_states[step]))
    return vector_rows(rows, title)


def query_figure(trace: Trace, step: int, title: str | None = None) -> go.Figure:
    """Step 2's numbers: q_t = Query(s_t)."""
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    return vector_rows([(f"q{_sub(step + 1)}", trace.queries[step])], title)


def query_key_space(trace: Trace, step: int, title: str | None = None) -> go.Figure:
    """Keys k_i and queries q_t in one 2-D plane through the origin (PCA of both): the current q_t (a star,
    an arrow from the origin) among the keys, each key sized and coloured by its weight α_ti; the other
    steps' queries faint and numbered. A dot product favours keys in the arrow's direction."""
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    k2, q2, explained = project_queries_keys(trace.keys, trace.queries)
    w = trace.weights[step]
    e = np.where(np.isfinite(trace.scores[step]), trace.scores[step], np.nan)
    labels = attended_labels(trace)
    fig = go.Figure()
    others = [t for t in range(trace.steps) if t != step]
    if others:
        fig.add_trace(go.Scatter(
            x=q2[others, 0], y=q2[others, 1], mode="markers+text", name="other queries",
            text=[f"q{_sub(t + 1)}" for t in others], textposition="bottom center",
            textfont={"color": "#999999", "size": FONT_SIZE - 3},
            marker={"size": 8, "color": "#bbbbbb"},
            hovertemplate="%{text}<br>(%{x:.4g}, %{y:.4g})<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=k2[:, 0], y=k2[:, 1], mode="markers+text", name="keys kᵢ", text=labels, textposition="top center",
        customdata=np.stack([w, e], axis=-1),
        marker={"size": 12 + 30 * w, "color": w, "cmin": 0, "cmax": 1, "colorscale": ATTENTION_SCALE,
                "line": {"width": 1, "color": "#333333"}, "showscale": True,
                "colorbar": {"title": {"text": "α"}, "thickness": 14}},
        hovertemplate="k: %{text}<br>α = %{customdata[0]:.6f}<br>e = %{customdata[1]:.6g}"
                      "<br>(%{x:.4g}, %{y:.4g})<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=[q2[step, 0]], y=[q2[step, 1]], mode="markers+text", name=f"query q{_sub(step + 1)}",
        text=[f"q{_sub(step + 1)}"], textposition="bottom center", textfont={"color": ACCENT, "size": FONT_SIZE + 2},
        marker={"symbol": "star", "size": 26, "color": ACCENT, "line": {"width": 1, "color": "#000000"}},
        hovertemplate="%{text}<br>(%{x:.4g}, %{y:.4g})<extra></extra>"))
    fig.add_annotation(x=q2[step, 0], y=q2[step, 1], ax=0, ay=0, xref="x", yref="y", axref="x", ayref="y",
                       showarrow=True, arrowhead=2, arrowwidth=2.5, arrowcolor=ACCENT, text="")
    fig.update_xaxes(title=f"direction 1 ({explained[0]:.0%} of the spread)", zeroline=True,
                     zerolinecolor="#999999")
    fig.update_yaxes(title=f"direction 2 ({explained[1]:.0%})", zeroline=True, zerolinecolor="#999999",
                     scaleanchor="x", scaleratio=1)
    styled(fig, title, height=520)
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.18, "xanchor": "left", "x": 0})
    return fig


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(n: int) -> str:
    """A number as Unicode subscript digits (s₃), readable in any font plotly uses."""
    return str(n).translate(_SUBSCRIPTS)
