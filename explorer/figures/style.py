"""Shared look for every figure: large fonts for projectors, one colour scale, no cramped legends."""

from __future__ import annotations

import plotly.graph_objects as go

FONT_SIZE = 16
ATTENTION_SCALE = "Blues"
DIVERGING_SCALE = "RdBu"
ACCENT = "#d62728"
TRUTH = "#2ca02c"


def styled(fig: go.Figure, title: str | None = None, height: int | None = None) -> go.Figure:
    """Apply the house style in place and return the figure."""
    fig.update_layout(
        title=None if title is None else {"text": title, "x": 0.0, "xanchor": "left"},
        font={"size": FONT_SIZE},
        margin={"l": 60, "r": 20, "t": 50 if title else 20, "b": 50},
        template="plotly_white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1.0},
        hoverlabel={"font_size": FONT_SIZE},
    )
    if height is not None:
        fig.update_layout(height=height)
    return fig


def token_labels(tokens: list[str] | tuple[str, ...]) -> list[str]:
    """Axis labels that stay distinct when tokens repeat (Plotly merges equal category labels)."""
    return [f"{i}:{'␣' if t == ' ' else t}" for i, t in enumerate(tokens)]
