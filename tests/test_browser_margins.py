"""The step panel's charts are laid out in one pass (explorer/app/figures/margins.py): on the README's demo view
at a projector's 1024×768, in presenter mode and out of it, and after a step change, every chart's margins as
sent already hold its labels and colour bar, so Plotly's automargin never widens them (which costs a second
layout of the whole chart on each step change)."""

from __future__ import annotations

import pytest

from browser_support import IDLE, chromium, open_app, require_browser, streamlit_server, wait_charts

STEP_CHARTS = ("explore_heatmap", "explore_fig_state", "explore_fig_query", "explore_fig_weights",
               "explore_fig_context", "explore_fig_output")

# Per chart: the margins it was sent with and the margins Plotly drew it with.
MARGINS = """(keys) => keys.map(key => {
  const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  if (!gd || !gd._fullLayout) return [key, null, null];
  const m = gd._fullLayout.margin, s = gd._fullLayout._size;
  return [key, [m.l, m.r, m.t, m.b], [s.l, s.r, s.t, s.b].map(Math.round)];
})"""


@pytest.fixture(scope="module")
def server():
    require_browser()
    with streamlit_server() as running:  # the shipped checkpoints: the README demo's reverse model
        yield running


def widened(page) -> list[str]:
    wait_charts(page)
    out = []
    for key, sent, drawn in page.evaluate(MARGINS, list(STEP_CHARTS)):
        assert sent is not None, f"{key} is not drawn"
        if any(d > s + 1 for s, d in zip(sent, drawn)):
            out.append(f"{key}: sent l r t b {sent}, drawn {drawn}")
    return out


@pytest.mark.parametrize("query", ["?model=reverse&input=31415926&step=1&present=1#heatmap",
                                   "?model=reverse&input=31415926&step=4"])
def test_step_charts_are_not_widened_by_automargin(server, query):
    with chromium(width=1024, height=768) as page:
        open_app(page, server, query)
        assert widened(page) == []
        page.locator('[class*="st-key-explore_next"] button').first.click()
        page.wait_for_timeout(300)
        page.wait_for_selector(IDLE)
        assert widened(page) == []
