"""figures/margins.py: margins set to what a figure's labels, titles and colour bar need, so the browser draws
it in one pass (the browser side is tests/test_browser_margins.py)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.app.figures import margins
from explorer.app.figures.style import presented, styled


def _heatmap(rows: list[str], cols: list[str], title: str | None = None) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=np.random.default_rng(0).random((len(rows), len(cols))), x=cols, y=rows,
                               zmin=0.0, zmax=1.0, colorbar={"title": {"text": "α"}, "thickness": 14}))
    styled(fig, title)
    fig.layout.margin = {"l": 10, "r": 10, "t": 50, "b": 60}
    fig.layout.yaxis = {"type": "category", "automargin": True}
    fig.layout.xaxis = {"type": "category", "side": "top", "automargin": True}
    return fig


def test_text_width_counts_wide_characters_and_drops_only_plotly_tags() -> None:
    assert margins.text_px("中文", 20) > margins.text_px("ab", 20)
    assert margins.text_px("<b>ab</b>", 16) == margins.text_px("ab", 16)
    # a token such as <eos> is shown as written, not taken for markup
    assert margins.text_px("9:<eos>", 16) > margins.text_px("9:", 16) + 4 * 16 * 0.3


def test_margins_grow_to_the_labels_and_the_colour_bar() -> None:
    short = margins.fit_margins(_heatmap(["1:a", "2:b"], ["1:x", "2:y"]))
    long = margins.fit_margins(_heatmap(["1:<unk>(hippopotamus)", "2:b"], ["1:x", "2:y"]))
    assert short.layout.margin.l > 10 and short.layout.margin.r > 10  # y labels; the colour bar on the right
    assert long.layout.margin.l > short.layout.margin.l + 100
    assert short.layout.margin.t == 50 and short.layout.margin.b == 60  # room enough already: unchanged


def test_presenter_type_needs_more_room() -> None:
    base = margins.fit_margins(_heatmap(["1:abc", "2:def"], ["1:x", "2:y"]))
    shown = margins.fit_margins(presented(base))
    assert shown.layout.margin.l > base.layout.margin.l and shown.layout.margin.r > base.layout.margin.r


def test_margins_never_shrink() -> None:
    fig = _heatmap(["1:a"], ["1:x"])
    fig.layout.margin = {"l": 300, "r": 300, "t": 200, "b": 200}
    margins.fit_margins(fig)
    assert (fig.layout.margin.l, fig.layout.margin.r, fig.layout.margin.t, fig.layout.margin.b) == (300, 300, 200, 200)


def test_crowded_level_labels_turn_and_the_top_makes_room() -> None:
    """The README demo's heatmap in presenter mode (432 px wide at 1024 px): its eight 3-character input labels
    at 20 px collide, Plotly turns them 90° (seen in Chromium: the top margin grew from 50 to 55 px)."""
    inputs = [f"{i}:{d}" for i, d in enumerate("31415926", 1)]
    outputs = [f"{i}:{d}" for i, d in enumerate([*"62951413", "<eos>"], 1)]
    fig = margins.fit_margins(presented(_heatmap(outputs, inputs)))
    assert fig.layout.margin.t > 50


def test_left_alone_where_plotly_measures_better() -> None:
    """A set tick angle, several axes, a chart type it does not know: no estimate, Plotly's automargin."""
    fig = _heatmap(["1:a" * 10], ["1:x"])
    fig.layout.xaxis.tickangle = -60
    fig.layout.margin.t = 20
    assert margins.fit_margins(fig).layout.margin.t == 20
    grid = make_subplots(rows=1, cols=2)
    grid.add_trace(go.Heatmap(z=[[1, 2]], y=["a long row label"]), row=1, col=1)
    grid.add_trace(go.Heatmap(z=[[1, 2]], y=["another long label"]), row=1, col=2)
    before = grid.layout.margin.to_plotly_json()
    assert margins.fit_margins(grid).layout.margin.to_plotly_json() == before
    pie = go.Figure(go.Pie(values=[1, 2]))
    assert margins.fit_margins(pie).layout.margin.to_plotly_json() == {}
