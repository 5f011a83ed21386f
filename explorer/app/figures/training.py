"""Training figures: loss, accuracy and alignment curves from a job's progress log (pure functions).

They read records with the fields of `explorer.jobs.records.StepRecord` (step, loss) and `EvalRecord`
(step, train/valid loss, exact match, token accuracy, alignment accuracy); no model, no streamlit.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.app.figures.style import ACCENT, TRUTH, set_layout, styled

TRAIN_COLOUR = "#1f77b4"
VALID_COLOUR = "#ff7f0e"
MAX_POINTS = 400  # a curve never carries more points than this (buckets of steps are averaged)
STEP_AXIS = {"title": {"text": "step"}, "rangemode": "tozero"}
PERCENT_AXIS = {"title": {"text": "%"}, "range": [0, 101]}
LOG_TICKS = [m * 10.0 ** e for e in range(-5, 3) for m in (1, 2, 5)]  # 1-2-5 ticks on the log loss axis


def bucketed(steps: Sequence[Any], max_points: int = MAX_POINTS) -> pd.DataFrame:
    """Per-step losses averaged over equal buckets of consecutive steps, at most `max_points` rows
    (columns step = the bucket's last step, loss)."""
    frame = pd.DataFrame({"step": [r.step for r in steps], "loss": [r.loss for r in steps]})
    if len(frame) <= max_points:
        return frame
    bucket = np.arange(len(frame)) * max_points // len(frame)
    return frame.groupby(bucket).agg(step=("step", "last"), loss=("loss", "mean")).reset_index(drop=True)


def evals_frame(evals: Sequence[Any]) -> pd.DataFrame:
    """The evaluation records as a table, one row per evaluation."""
    columns = ["step", "elapsed", "train_loss", "valid_loss", "train_exact", "train_token", "valid_exact",
               "valid_token", "valid_alignment"]
    return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in evals], columns=columns)


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                       font={"color": "#888"})
    return fig


def loss_figure(steps: Sequence[Any], evals: Sequence[Any], title: str | None = "Loss",
                height: int = 330) -> go.Figure:
    """Training loss per step (bucket means) and validation loss at each evaluation, on a log scale."""
    fig = go.Figure()
    train = bucketed(steps)
    fig.add_trace(go.Scatter(x=train["step"], y=train["loss"], mode="lines", name="train",
                             line={"color": TRAIN_COLOUR, "width": 2},
                             hovertemplate="step %{x}<br>train loss %{y:.4f}<extra></extra>"))
    table = evals_frame(evals)
    if len(table):
        fig.add_trace(go.Scatter(x=table["step"], y=table["valid_loss"], mode="lines+markers", name="validation",
                                 line={"color": VALID_COLOUR, "width": 2}, marker={"size": 7},
                                 hovertemplate="step %{x}<br>validation loss %{y:.4f}<extra></extra>"))
    set_layout(fig, xaxis=STEP_AXIS, yaxis={"title": {"text": "cross-entropy"}, "type": "log", "tickvals": LOG_TICKS,
                                            "ticktext": [f"{v:g}" for v in LOG_TICKS]})
    if not len(train):
        _empty(fig, "waiting for the first step…")
    return styled(fig, title, height=height)


def accuracy_figure(evals: Sequence[Any], target: float | None = None, title: str | None = "Accuracy",
                    height: int = 330) -> go.Figure:
    """Exact match (whole output right) on recent training examples and on validation, validation
    token accuracy, and the target as a dashed line."""
    table = evals_frame(evals)
    fig = go.Figure()
    for column, name, colour, dash in (("train_exact", "train exact match", TRAIN_COLOUR, "solid"),
                                       ("valid_exact", "validation exact match", VALID_COLOUR, "solid"),
                                       ("valid_token", "validation token accuracy", VALID_COLOUR, "dot")):
        fig.add_trace(go.Scatter(x=table["step"], y=100 * table[column].astype(float), mode="lines+markers",
                                 name=name, line={"color": colour, "width": 2, "dash": dash}, marker={"size": 6},
                                 hovertemplate=f"step %{{x}}<br>{name} %{{y:.1f}}%<extra></extra>"))
    if target is not None:
        fig.add_hline(y=100 * target, line={"color": ACCENT, "dash": "dash", "width": 1},
                      annotation_text=f"target {100 * target:g}%", annotation_position="bottom left")  # below the line: the legend sits above the plot
    set_layout(fig, xaxis=STEP_AXIS, yaxis=PERCENT_AXIS)
    if not len(table):
        _empty(fig, "waiting for the first evaluation…")
    return styled(fig, title, height=height)


def alignment_figure(evals: Sequence[Any], title: str | None = "Alignment accuracy",
                     height: int = 260) -> go.Figure:
    """How often the strongest attention weight lands on a true source position (validation)."""
    table = evals_frame(evals)
    table = table[table["valid_alignment"].notna()]
    fig = go.Figure(go.Scatter(x=table["step"], y=100 * table["valid_alignment"].astype(float),
                               mode="lines+markers", name="alignment", line={"color": TRUTH, "width": 2},
                               marker={"size": 6},
                               hovertemplate="step %{x}<br>alignment %{y:.1f}%<extra></extra>"))
    set_layout(fig, xaxis=STEP_AXIS, yaxis=PERCENT_AXIS)
    if not len(table):
        _empty(fig, "waiting for the first evaluation…")
    return styled(fig, title, height=height)
