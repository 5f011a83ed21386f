"""Explore's step charts are live charts (explorer/app/pages/live_chart.py): a step change updates each plot in
place with Plotly.react instead of unmounting and drawing it from scratch (st.plotly_chart's element id hashes the
figure, so before every step chart was rebuilt on each step), and a chart off the screen is redrawn only when it
comes near it, hidden until then. On the README's demo view at 1024×768: the same plot elements stay after → and
the heatmap's box is on the new row; the α bars below the first screen are hidden, not showing step 1's numbers
under step 2, until scrolled to, and then show step 2's; a click on a heatmap cell still goes to its step; and
plotly.js comes from this server, loaded once."""

from __future__ import annotations

import pytest

from browser_support import CHARTS, chromium, open_app, wait_charts, wait_idle
from explorer.app.pages import live_chart

STEP_CHARTS = ("explore_heatmap", "explore_fig_state", "explore_fig_query", "explore_fig_weights",
               "explore_fig_context", "explore_fig_output")

# Mark every step chart's plot element, so a later look tells whether it is still the same element.
MARK = """(keys) => keys.forEach(key => { document.querySelector(`.st-key-${key} .js-plotly-plot`).__mark = key; })"""
MARKED = """(keys) => keys.filter(key => document.querySelector(`.st-key-${key} .js-plotly-plot`)?.__mark === key)"""

# The row of the heatmap's current-step box (its last shape), 0-based: in the figure as Plotly holds it, and where
# its outline is on the screen (the row whose middle is nearest the outline's).
BOX_ROW = """() => { const gd = document.querySelector('.st-key-explore_heatmap .js-plotly-plot');
  const s = gd._fullLayout.shapes; return Math.round(s[s.length - 1].y0 + 0.5); }"""
DRAWN_BOX_ROW = """() => { const gd = document.querySelector('.st-key-explore_heatmap .js-plotly-plot');
  const paths = gd.querySelectorAll('.shapelayer path'), r = paths[paths.length - 1].getBoundingClientRect();
  const middle = r.top + r.height / 2 - gd.getBoundingClientRect().top - gd._fullLayout._size.t;
  const rows = gd._fullLayout.yaxis._categories || [];
  const ya = gd._fullLayout.yaxis, n = Math.max(rows.length, gd._fullData[0].z.length);
  let best = 0;
  for (let t = 0; t < n; t++) if (Math.abs(ya.l2p(t) - middle) < Math.abs(ya.l2p(best) - middle)) best = t;
  return best; }"""

# The α bars as drawn (the weights of the current step): their x and y.
WEIGHTS = """() => { const d = document.querySelector('.st-key-explore_fig_weights .js-plotly-plot')._fullData[0];
  return [Array.from(d.x || []).map(String), Array.from(d.y || []).map(String)]; }"""

# The screen point of the heatmap cell (row t, column i), 0-based.
CELL = """([t, i]) => { const gd = document.querySelector('.st-key-explore_heatmap .js-plotly-plot');
  const fl = gd._fullLayout, r = gd.getBoundingClientRect();
  return [r.left + fl._size.l + fl.xaxis.l2p(i), r.top + fl._size.t + fl.yaxis.l2p(t)]; }"""

DEMO = "?model=reverse&input=31415926&step=1&present=1#heatmap"


@pytest.fixture(scope="module")
def server(shipped_server):
    return shipped_server


def test_a_step_change_updates_the_step_charts_in_place(server):
    with chromium(width=1024, height=768) as page:
        scripts = []
        page.on("response", lambda r: scripts.append((r.url, r.status)) if r.url.endswith(".js") and "plotly" in r.url.lower()
                else None)
        open_app(page, server, DEMO)
        wait_charts(page)
        assert page.locator(CHARTS).count() >= len(STEP_CHARTS)
        assert page.evaluate(BOX_ROW) == page.evaluate(DRAWN_BOX_ROW) == 0
        first_weights = page.evaluate(WEIGHTS)
        page.evaluate(MARK, list(STEP_CHARTS))
        page.mouse.click(5, 400)  # the page, not a field, has the keyboard
        page.keyboard.press("ArrowRight")
        wait_idle(page)
        wait_charts(page)
        assert "step=2" in page.url
        assert page.evaluate(BOX_ROW) == page.evaluate(DRAWN_BOX_ROW) == 1
        weights = page.locator(".st-key-explore_fig_weights .js-plotly-plot")
        assert page.evaluate(WEIGHTS) == first_weights and not weights.is_visible(), "off the screen: not redrawn, hidden"
        weights.scroll_into_view_if_needed()
        page.wait_for_function(f"(old) => JSON.stringify(({WEIGHTS})()) !== JSON.stringify(old)", arg=first_weights)
        page.wait_for_timeout(300)
        assert weights.is_visible() and page.evaluate(WEIGHTS) != first_weights, "on the screen: step 2's α"
        assert page.evaluate(MARKED, list(STEP_CHARTS)) == list(STEP_CHARTS), "a step chart was drawn anew"
        ours = [(u, status) for u, status in scripts if u.endswith("/" + live_chart.PLOTLY_FILE)]
        assert len(ours) == 1 and ours[0][0].startswith(server.url) and ours[0][1] == 200, scripts  # from here, once
        # Explore's views draw live charts only: the warm-up loads their plotly.js, not Streamlit's chart renderer
        # (4.7 MB of JavaScript evaluated for nothing on a cold start: pages/warmup.py).
        assert not [u for u, _ in scripts if "/PlotlyChart" in u], scripts


def test_clicking_a_heatmap_cell_goes_to_its_step(server):
    with chromium(width=1024, height=768) as page:
        open_app(page, server, DEMO)
        wait_charts(page)
        page.locator(".st-key-explore_heatmap .js-plotly-plot").scroll_into_view_if_needed()
        page.mouse.click(*page.evaluate(CELL, [5, 2]))
        wait_idle(page)
        wait_charts(page)
        assert "step=6" in page.url
        assert page.evaluate(BOX_ROW) == page.evaluate(DRAWN_BOX_ROW) == 5


# Every step chart's figure data as drawn (its traces), scrolled to one after another so that each is drawn.
DRAWN_FIGURES = """async (keys) => {
  const out = {};
  for (const key of keys) {
    const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    gd.scrollIntoView({block: 'center'});
    const until = Date.now() + 20000;
    while ((gd.style.visibility === 'hidden' || gd.__pending) && Date.now() < until)
      await new Promise(r => setTimeout(r, 50));
    out[key] = JSON.stringify(gd.data);
  }
  return out; }"""

# The heatmap box's row at every frame, from now on (window.__rows).
WATCH_BOX = """() => { window.__rows = []; const watch = () => { const gd = document.querySelector(
  '.st-key-explore_heatmap .js-plotly-plot'); const s = gd && gd._fullLayout && gd._fullLayout.shapes;
  if (s && s.length) { const row = Math.round(s[s.length - 1].y0 + 0.5);
    if (window.__rows[window.__rows.length - 1] !== row) window.__rows.push(row); }
  requestAnimationFrame(watch); }; watch(); }"""


def test_fast_presses_end_on_their_step_with_every_chart_showing_it(server):
    """→ pressed three times without waiting: the page ends on step 4 (not fewer steps: the presses are not merged
    on a busy server), the heatmap's box never goes back to an earlier row on the way, and every step chart shows
    the same figure as a page opened at step 4; then ← twice and Next once by mouse, the same."""
    with chromium(width=1024, height=768) as page:
        open_app(page, server, DEMO.replace("step=1", "step=4"))
        wait_charts(page)
        truth4 = page.evaluate(DRAWN_FIGURES, list(STEP_CHARTS))
        open_app(page, server, DEMO.replace("step=1", "step=3"))
        wait_charts(page)
        truth3 = page.evaluate(DRAWN_FIGURES, list(STEP_CHARTS))
    with chromium(width=1024, height=768) as page:
        open_app(page, server, DEMO)
        wait_charts(page)
        page.wait_for_timeout(500)
        page.evaluate(WATCH_BOX)
        page.mouse.click(5, 400)  # the page, not a field, has the keyboard
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        page.wait_for_function("() => window.__rows[window.__rows.length - 1] === 3")
        wait_idle(page)
        page.wait_for_timeout(1500)  # any late answer of the server would have come by now
        wait_idle(page)
        assert "step=4" in page.url
        assert page.evaluate("() => window.__rows") == sorted(set(page.evaluate("() => window.__rows")))
        assert "t = 4 of 9" in page.locator(".st-key-explore_step_panel").inner_text()
        assert page.evaluate(DRAWN_FIGURES, list(STEP_CHARTS)) == truth4
        page.locator(".st-key-explore_heatmap").scroll_into_view_if_needed()
        page.evaluate(WATCH_BOX)
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowLeft")
        page.locator(".st-key-explore_next button").first.click()  # (a run under way may show two for a moment)
        page.wait_for_function("() => window.__rows[window.__rows.length - 1] === 2")
        wait_idle(page)
        page.wait_for_timeout(1500)
        wait_idle(page)
        assert "step=3" in page.url
        assert "t = 3 of 9" in page.locator(".st-key-explore_step_panel").inner_text()
        assert page.evaluate(DRAWN_FIGURES, list(STEP_CHARTS)) == truth3
