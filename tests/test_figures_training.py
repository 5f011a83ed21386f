"""Training figures are pure functions of a job's progress log."""

from __future__ import annotations

import numpy as np

from explorer.app.figures.training import MAX_POINTS, accuracy_figure, alignment_figure, bucketed, loss_figure
from explorer.jobs import EvalRecord, StepRecord


def steps(n: int) -> list[StepRecord]:
    return [StepRecord(s, 3.0 / s, 0.01 * s, 1000.0) for s in range(1, n + 1)]


def evals(every: int, n: int, alignment: bool = True) -> list[EvalRecord]:
    return [EvalRecord(s, 0.01 * s, 3.0 / s, 3.2 / s, min(1, s / n), min(1, s / n), min(1, s / n) * 0.9,
                       min(1, s / n), min(1, s / n) if alignment else None) for s in range(every, n + 1, every)]


def test_long_loss_curves_are_averaged_into_at_most_max_points():
    table = bucketed(steps(5000))
    assert len(table) <= MAX_POINTS and table["step"].iloc[-1] == 5000
    assert np.isclose(table["loss"].iloc[0], np.mean([3.0 / s for s in range(1, 14)]))  # first bucket's mean
    assert len(bucketed(steps(50))) == 50  # short curves are kept as they are


def test_loss_figure_has_train_and_validation_on_a_log_axis():
    fig = loss_figure(steps(300), evals(100, 300))
    assert [t.name for t in fig.data] == ["train", "validation"]
    assert list(fig.data[1].x) == [100, 200, 300] and fig.layout.yaxis.type == "log"
    assert len(loss_figure([], []).layout.annotations) == 1  # "waiting for the first step"


def test_accuracy_figure_shows_percentages_and_the_target():
    fig = accuracy_figure(evals(100, 300), target=0.99)
    assert [t.name for t in fig.data] == ["train exact match", "validation exact match", "validation token accuracy"]
    assert np.allclose(fig.data[1].y, [30, 60, 90])
    assert fig.layout.shapes[0].y0 == 99


def test_alignment_figure_skips_models_without_alignment():
    assert np.allclose(alignment_figure(evals(100, 300)).data[0].y, [100 / 3, 200 / 3, 100])
    empty = alignment_figure(evals(100, 300, alignment=False))
    assert len(empty.data[0].x) == 0 and len(empty.layout.annotations) == 1
