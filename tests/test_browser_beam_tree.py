"""The beam tree in a real browser: click a node of the drawn tree, see the step panel trace its prefix, force
it, and check the URL at each point; screenshots to look at.

Runs on the small test checkpoints; EXPLORER_TEST_PRETRAINED points it at real ones (with a `copy` model).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from browser_support import chromium, open_app, wait_charts, wait_idle

NODE_CENTRE = """([key, index]) => {
    const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    const trace = gd.data.find(t => t.name === 'nodes');
    const x = trace.x[index], y = trace.y[index];
    const size = gd._fullLayout._size, box = gd.getBoundingClientRect();
    return [box.left + size.l + gd._fullLayout.xaxis.d2p(x), box.top + size.t + gd._fullLayout.yaxis.d2p(y),
            Array.from(trace.customdata[index])];
}"""
PRUNED_NODE = """(key) => {
    const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    const trace = gd.data.find(t => t.name === 'nodes');
    const text = Array.from(trace.hovertext);
    return text.findIndex((t, i) => t.endsWith('pruned') && trace.x[i] >= 2);
}"""


@pytest.fixture(scope="module")
def server(test_models_server):
    """The test process's server on the test checkpoints (tests/conftest.py), shared with Explore's tests."""
    return test_models_server


def test_click_a_node_then_force_its_prefix(server, tmp_path):
    shots = tmp_path / "shots"
    shots.mkdir()
    logged = len(server.log_text())  # the shared server's log before this test
    with chromium(width=1500, height=2600) as page:
        open_app(page, server, "?model=copy&input=31415926&mode=beam&width=4")
        wait_charts(page)
        assert page.get_by_text("Beam tree").count() >= 1
        index = page.evaluate(PRUNED_NODE, "explore_beam_tree")
        assert index >= 0, "an untrained model's beam prunes some branch after step 1"
        page.locator(".st-key-explore_beam_tree").scroll_into_view_if_needed()
        x, y, custom = page.evaluate(NODE_CENTRE, ["explore_beam_tree", index])
        assert int(custom[0]) == index
        page.mouse.click(x, y)
        wait_idle(page)
        wait_charts(page)
        assert f"node={index + 1}" in page.url, page.url
        assert page.get_by_text(re.compile(rf"Node {index + 1}\b")).count() >= 1
        step = int(custom[1])
        assert page.locator("h4", has_text=re.compile(rf"t = {step} of {step}\b")).count() >= 1, \
            "the step panel steps through the node's prefix, at its step"
        page.locator(".st-key-explore_beam_tree").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "beam-node.png"))

        page.locator(".st-key-explore_force_prefix button").first.click()
        wait_idle(page)
        assert "mode=greedy" in page.url and "force=" in page.url, page.url
        assert page.get_by_text(re.compile(r"step 1 forced to")).count() >= 1
        assert "Traceback" not in page.content()

        # the link reopens the node
        page.goto(f"{server.url}/?model=copy&input=31415926&mode=beam&width=4&node={index + 1}")
        page.wait_for_selector('[data-testid="stApp"]')
        wait_idle(page, settle=1000)
        assert page.get_by_text(re.compile(rf"Node {index + 1}\b")).count() >= 1
    target = os.environ.get("EXPLORER_SCREENSHOT_DIR")
    if target:
        shutil.copy(shots / "beam-node.png", Path(target) / "beam-node.png")
    assert "Traceback" not in server.log_text()[logged:]


OVERLAPS = """(key) => {
  const boxes = Array.from(document.querySelectorAll(`.st-key-${key} .textpoint text`))
    .map(t => [t.textContent.trim(), t.getBoundingClientRect(),
               parseFloat(getComputedStyle(t).fontSize) * Math.hypot(t.getScreenCTM().b, t.getScreenCTM().d)])
    .filter(([text, box]) => text && box.width > 0);
  const found = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, p] = [boxes[i][1], boxes[j][1]];
    const w = Math.min(a.right, p.right) - Math.max(a.left, p.left), h = Math.min(a.bottom, p.bottom) - Math.max(a.top, p.top);
    if (w > 2 && h > 2) found.push(`${boxes[i][0]} / ${boxes[j][0]}`);
  }
  return {labels: boxes.length, overlaps: found, smallest: Math.min(...boxes.map(b => b[2]))};
}"""


def test_a_width_5_tree_is_readable_at_1024_px(shipped_server, tmp_path):  # the shipped eng-fra
    """Width 5 on a long sentence at a projector's 1024 px: no label runs into another (they did: pruned
    branches' labels piled up, neighbouring steps' labels ran together), none under 16 px in presenter mode;
    where the steps need more room than the screen, the tree scrolls sideways."""
    with chromium(1024, 768) as page:
        open_app(page, shipped_server, "?model=eng-fra&input=Tom went to the station yesterday to buy a ticket."
                                       "&mode=beam&width=5&present=1")
        wait_charts(page)
        tree = page.locator(".st-key-explore_beam_scroll")
        tree.scroll_into_view_if_needed()
        found = page.evaluate(OVERLAPS, "explore_beam_tree")
        assert found["labels"] >= 20 and not found["overlaps"], found
        assert found["smallest"] >= 15.9, found
        scroll = tree.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert scroll[0] > scroll[1], "the wide tree scrolls in its box"
        page.screenshot(path=str(tmp_path / "beam-width-5.png"))
