"""Per-step output figures read off a Trace: the output distribution ŷ_t (top-k) with the chosen token."""

from __future__ import annotations

import plotly.graph_objects as go

from explorer.record import Trace
from explorer.app.figures.style import ACCENT, NEUTRAL, set_layout, styled

OTHER_COLOUR = NEUTRAL


def output_distribution(trace: Trace, step: int, k: int = 10, title: str | None = None) -> go.Figure:
    """ŷ_t's k most probable tokens as horizontal bars, most probable on top; the chosen token in red.

    The chosen token is always shown, even when it is outside the top k (teacher forcing, a forced token)."""
    top = trace.top_k(step, k)
    chosen = trace.output_tokens[step]
    if chosen not in [tok for tok, _ in top]:
        top.append((chosen, float(trace.probs[step, trace.output_ids[step]])))
    tokens = [tok for tok, _ in top]
    probs = [p for _, p in top]
    labels = [f"'{tok}'" if tok.strip() == tok and tok else repr(tok) for tok in tokens]
    fig = go.Figure(go.Bar(
        x=probs, y=labels, orientation="h", marker={"color": [ACCENT if t == chosen else OTHER_COLOUR for t in tokens]},
        text=[f"{p:.3f}" for p in probs], textposition="outside", cliponaxis=False,
        constraintext="none",  # else Plotly shrinks each label to its bar's height (11 px)
        hovertemplate="%{y}<br>p = %{x:.6f}<extra></extra>", name="ŷ"))
    set_layout(fig, yaxis={"autorange": "reversed", "type": "category", "dtick": 1},  # every token named
               xaxis={"title": {"text": f"probability ŷ<sub>{step + 1}</sub>"}, "range": [0, 1.2]}, showlegend=False)
    return styled(fig, title, height=max(240, 70 + 32 * len(tokens)))
