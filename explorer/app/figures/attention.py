"""Attention figures read off a Trace: the α heatmap (outputs × inputs), one step's α bars, and the
context vector drawn as the weighted sum of the value vectors.

Steps t and positions i are 0-based in the code (like the Trace) and shown 1-based (like the seed).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.record import Trace
from explorer.app.figures.style import (ACCENT, ATTENTION_COLOUR, ATTENTION_SCALE, DIVERGING_SCALE, FONT_SIZE, MASKED, SERIES, TRUTH,
                    empty_figure, set_layout, styled, symmetric_range, token_labels)

NO_ATTENTION = "This model has no attention: the decoder sees the input only through s₀."
ROW_PX = 34  # heatmap row height on screen
CELL_HOVER = ("output y<sub>%{customdata[2]}</sub> = %{y}<br>input x<sub>%{customdata[3]}</sub> = %{x}"
              "<br>α = %{customdata[4]:.6f}<br>e = %{customdata[5]:.6g}<extra></extra>")


def source_labels(trace: Trace) -> list[str]:
    """Input axis labels; words outside the vocabulary are shown as <unk>(word)."""
    shown = [f"<unk>({t})" if t in trace.unknown_tokens else t for t in trace.source_tokens]
    return token_labels(shown)


def attended_labels(trace: Trace) -> list[str]:
    """Input labels where attention is drawn: a position a what-if masked is struck through (its α is 0
    because it was hidden, not because the model looked away)."""
    masked = set(trace.intervention.masked)
    return [f"<s>{label}</s>" if i in masked else label for i, label in enumerate(source_labels(trace))]


MASKED_NAME = "masked input (hidden from attention)"


def output_labels(trace: Trace) -> list[str]:
    return token_labels(trace.output_tokens)


def attention_heatmap(trace: Trace, step: int | None = None, title: str | None = None, *,
                      height: int | None = None) -> go.Figure:
    """α_ti as a heatmap: rows are output steps, columns input positions; hover shows exact values.

    An invisible scatter covers the cells so a click selects a cell (Plotly heatmap clicks do not
    reach Streamlit): each point's customdata starts with (t, i), 0-based. The current step is
    outlined; the true alignment, when known, is ringed in green.
    """
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    x, y = attended_labels(trace), output_labels(trace)
    T, S = trace.weights.shape
    scores = np.where(np.isfinite(trace.scores), trace.scores, np.nan)
    tt, ii = np.meshgrid(np.arange(T), np.arange(S), indexing="ij")  # (T, S)
    custom = np.stack([tt, ii, tt + 1, ii + 1, trace.weights, scores], axis=-1)  # (T, S, 6)
    fig = go.Figure(go.Heatmap(
        z=trace.weights, x=x, y=y, zmin=0.0, zmax=1.0, colorscale=ATTENTION_SCALE, customdata=custom,
        colorbar={"title": {"text": "α"}, "thickness": 14, "len": min(1.0, 300 / max(300, 30 * T))},
        hoverinfo="skip", name="α", xgap=1, ygap=1))  # the cells' scatter below carries hover and clicks
    flat = custom.reshape(T * S, -1)
    row_px = ROW_PX if T <= 24 else max(16, 820 // T)  # long outputs get thinner rows
    fig.add_trace(go.Scatter(
        x=[x[i] for i in ii.ravel()], y=[y[t] for t in tt.ravel()], mode="markers", customdata=flat,
        showlegend=False, hovertemplate=CELL_HOVER, name="cells",
        marker={"symbol": "square", "size": row_px, "opacity": 0}))
    if trace.alignment is not None:
        rows = min(T, trace.alignment.shape[0])
        at, ai = np.nonzero(trace.alignment[:rows])
        fig.add_trace(go.Scatter(
            x=[x[i] for i in ai], y=[y[t] for t in at], mode="markers", name="true alignment",
            customdata=custom[at, ai] if len(at) else None, hovertemplate=CELL_HOVER,
            marker={"symbol": "circle-open", "size": 16 if S <= 20 else 11, "color": TRUTH,
                    "line": {"width": 3 if S <= 20 else 2}}))
    masked = [i for i in trace.intervention.masked if 0 <= i < S]
    if masked:  # every cell of a masked column crossed out, the column framed in grey
        fig.add_trace(go.Scatter(
            x=[x[i] for i in masked for _ in range(T)], y=[y[t] for _ in masked for t in range(T)], mode="markers",
            name=MASKED_NAME, hoverinfo="skip",
            marker={"symbol": "x-thin", "size": min(row_px, 30) * 0.6, "line": {"color": MASKED, "width": 2}}))
        for i in masked:
            fig.add_shape(type="rect", xref="x", yref="y", x0=i - 0.5, x1=i + 0.5, y0=-0.5, y1=T - 0.5,
                          line={"color": MASKED, "width": 2, "dash": "dot"}, fillcolor="rgba(127,127,127,0.18)")
    if step is not None and 0 <= step < T:
        fig.add_shape(type="rect", xref="x", yref="y", x0=-0.5, x1=S - 0.5, y0=step - 0.5, y1=step + 0.5,
                      line={"color": ACCENT, "width": 4})
    crowded = S > 16 or sum(len(label) for label in x) > 56
    longest = max(len(label) for label in x)
    # Every label (dtick=1); no axis title: the modebar sits above the top axis.
    top = 50 + (40 if title else 0) + (min(9 * longest, 160) if crowded else 0)
    styled(fig, title, height=height or max(320, top + 70 + row_px * T))
    return set_layout(
        fig, yaxis={"autorange": "reversed", "type": "category", "showgrid": False, "automargin": True, "dtick": 1},
        xaxis={"type": "category", "side": "top", "showgrid": False, "automargin": True, "dtick": 1,
               **({"tickangle": -60} if crowded else {})},  # else Plotly's own: turned only where labels collide
        hovermode="closest", margin={"t": top, "b": 60, "l": 10, "r": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.02, "xanchor": "left", "x": 0.0},
        **({"title": {"y": 0.99, "yanchor": "top"}} if title else {}))


def weights_bar(trace: Trace, step: int, title: str | None = None) -> go.Figure:
    """α_t as bars over the input positions (the current row of the heatmap), all in the attention colour;
    true positions outlined in green (a green fill hid the weight that sits on one)."""
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    x = attended_labels(trace)
    w = trace.weights[step]
    e = np.where(np.isfinite(trace.scores[step]), trace.scores[step], np.nan)
    truth = np.zeros(len(x), dtype=bool)
    if trace.alignment is not None and step < trace.alignment.shape[0]:
        truth = trace.alignment[step]
    masked = set(trace.intervention.masked)
    text = ["masked" if i in masked else f"{v:.2f}" if v >= 0.05 else "" for i, v in enumerate(w)]
    fig = go.Figure(go.Bar(
        x=x, y=w, marker={"color": ATTENTION_COLOUR, "line": {"color": [TRUTH if hit else ATTENTION_COLOUR for hit in truth],
                                                               "width": [4 if hit else 0 for hit in truth]}},
        customdata=np.stack([np.arange(1, len(x) + 1), e], axis=-1),
        hovertemplate="x<sub>%{customdata[0]}</sub> = %{x}<br>α = %{y:.6f}<br>e = %{customdata[1]:.6g}"
                      "<extra></extra>", name="α", text=text,
        textfont={"color": [MASKED if i in masked else SERIES for i in range(len(x))]},
        # Upright above the bar at full size: Plotly shrinks a label to its bar's width unless told not to
        # (1.00 drew at 12 px, "masked" at 7 px), and turned it fits a bar's column; the range leaves it room.
        textposition="outside", textangle=-90, constraintext="none",
        cliponaxis=False))
    set_layout(fig, yaxis={"title": {"text": f"α<sub>{step + 1},i</sub>"}, "range": [0, 1.4],
                           "tickvals": [0, 0.5, 1]},
               xaxis={"type": "category", "dtick": 1,  # Plotly's own angle: turned where labels collide
                      **({"tickangle": -60} if len(x) > 12 or sum(map(len, x)) > 60 else {})},
               showlegend=False)
    return styled(fig, title, height=340)


def context_sum(trace: Trace, step: int, title: str | None = None) -> go.Figure:
    """c_t = Σ_i α_ti v_i drawn as a sum: each row is one weighted value vector α_ti v_i, the last row
    their column sums, c_t. Hover shows α_ti, v_i[d] and the product exactly."""
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    w = trace.weights[step]  # (S,)
    weighted = w[:, None] * trace.values  # (S, D) α_ti v_i
    c = trace.contexts[step]  # (D,)
    S, D = trace.values.shape
    gap = np.full((1, D), np.nan)
    z = np.vstack([weighted, gap, c[None, :]])  # (S + 2, D): the weighted rows, a gap, their sum
    labels = [f"α{_sub(step + 1)},{_sub(i + 1)}·v{_sub(i + 1)}  {lab}" for i, lab in enumerate(attended_labels(trace))]
    labels += ["", f"= c{_sub(step + 1)}"]
    custom = np.full((S + 2, D, 3), np.nan)
    custom[:S, :, 0] = w[:, None]
    custom[:S, :, 1] = trace.values
    peak = symmetric_range(weighted, c)
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(1, D + 1), y=labels, zmid=0, zmin=-peak, zmax=peak, colorscale=DIVERGING_SCALE,
        customdata=custom, colorbar={"title": {"text": "value"}, "thickness": 14}, hoverongaps=False,
        hovertemplate="%{y}, dim %{x}<br>α = %{customdata[0]:.6f}<br>v = %{customdata[1]:.6g}"
                      "<br>value = %{z:.6g}<extra></extra>", xgap=1, ygap=1))
    fig.add_hline(y=S + 0.5, line={"color": "#333333", "width": 2})
    set_layout(fig, yaxis={"autorange": "reversed", "type": "category", "tickfont": {"size": FONT_SIZE}},
               xaxis={"title": {"text": "dimension d of vᵢ and cₜ"}, "showgrid": False})
    return styled(fig, title, height=max(260, 110 + 26 * (S + 2)))


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(n: int) -> str:
    """A number as Unicode subscript digits (s₃), readable in any font plotly uses."""
    return str(n).translate(_SUBSCRIPTS)


WORDS_NOTE = ("Words view: each row is one output word, the mean over its pieces' steps of α summed over each "
              "input word's pieces (rows still sum to 1). The model itself attends over pieces.")
WORD_HOVER = "output word %{y}<br>input word %{x}<br>summed α = %{z:.4f}<extra></extra>"


def word_attention_heatmap(trace: Trace, title: str | None = None) -> go.Figure:
    """The α heatmap regrouped into words (Trace.word_weights), for subword models: which input word each
    output word looked at, when words are split into pieces."""
    if not trace.has_attention:
        return empty_figure(NO_ATTENTION, title)
    z = trace.word_weights()
    out_words, src_words = trace.word_labels()
    x, y = token_labels(src_words), token_labels(out_words)
    fig = go.Figure(go.Heatmap(z=z, x=x, y=y, zmin=0.0, zmax=1.0, colorscale=ATTENTION_SCALE, xgap=1, ygap=1,
                               colorbar={"title": {"text": "Σα"}, "thickness": 14}, hovertemplate=WORD_HOVER))
    crowded = len(x) > 16 or sum(len(label) for label in x) > 56
    top = 50 + (40 if title else 0) + (min(9 * max(len(label) for label in x), 160) if crowded else 0)
    styled(fig, title, height=max(320, top + 70 + ROW_PX * len(y)))
    return set_layout(
        fig, yaxis={"autorange": "reversed", "type": "category", "showgrid": False, "automargin": True, "dtick": 1},
        xaxis={"type": "category", "side": "top", "showgrid": False, "automargin": True, "dtick": 1,
               **({"tickangle": -60} if crowded else {})},
        margin={"t": top, "b": 30, "l": 10, "r": 10})
