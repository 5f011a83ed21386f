"""The nearest-examples view (Explore) and the score-function twins (Compare) in a real browser, on the shipped
checkpoints (the twins are shipped ones): they draw, keep their state in the URL, and screenshots are saved
(EXPLORER_SCREENSHOT_DIR copies them for people to look at)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from browser_support import chromium, open_app, require_browser, streamlit_server, wait_charts, wait_idle
from explorer.checkpoints import checkpoint
from tests import app_support


@pytest.fixture(scope="module")
def server(request):
    """The test process's shared server on the shipped checkpoints (tests/conftest.py) when they hold the twins,
    else one on tiny twins trained here."""
    folder = app_support.twin_dir()
    if folder == checkpoint.PRETRAINED_DIR:
        yield request.getfixturevalue("shipped_server")
        return
    require_browser()
    with streamlit_server(folder) as running:
        yield running


def keep(shot: Path) -> None:
    target = os.environ.get("EXPLORER_SCREENSHOT_DIR")
    if target:
        shutil.copy(shot, Path(target) / shot.name)


def test_nearest_examples_open_from_the_link_and_follow_the_controls(server, tmp_path):
    logged = len(server.log_text())  # a shared server's log before this test
    with chromium(width=1500, height=2600) as page:
        open_app(page, server, "?model=reverse&input=2718281&nn=s3&nnk=5")
        wait_charts(page)
        section = page.locator(".st-key-explore_nn_section")
        section.scroll_into_view_if_needed()
        assert section.get_by_text(re.compile(r"The 5 states nearest to")).count() == 1
        assert section.locator('[data-testid="stDataFrame"]').count() == 1
        assert section.get_by_text(re.compile(r"Euclidean distance over [\d,]+ states")).count() == 1
        page.screenshot(path=str(tmp_path / "neighbours.png"))
        keep(tmp_path / "neighbours.png")
        section.get_by_text("encoder hᵢ").first.click()
        wait_idle(page)
        assert re.search(r"nn=h3\b", page.url), page.url
        assert section.get_by_text(re.compile(r"nearest to h₃")).count() == 1
        # closing the view drops the query from the URL
        section.locator("summary").first.click()
        wait_idle(page)
        assert "nn=" not in page.url
    assert "Traceback" not in server.log_text()[logged:]


def test_score_function_twins_side_by_side(server, tmp_path):
    twins = [n for n in checkpoint.pretrained_names() if n.startswith("reverse")]
    logged = len(server.log_text())  # a shared server's log before this test
    with chromium(width=1600, height=3400) as page:
        open_app(page, server, "compare?twins=73625184092736")
        header = page.get_by_role("heading", name="Score functions side by side")
        header.scroll_into_view_if_needed()
        wait_charts(page)
        for name in twins:
            assert page.locator(f".st-key-compare_twins_heat_{name}").count() == (0 if name == "reverse-none" else 1)
        assert page.get_by_text("mean peak weight on this input").count() == len(twins) - 1
        page.evaluate("""() => { const main = document.querySelector('[data-testid="stMain"]');
                                 main.scrollTo(0, main.scrollHeight); }""")
        page.wait_for_timeout(500)
        page.screenshot(path=str(tmp_path / "twins.png"))
        keep(tmp_path / "twins.png")
        box = page.locator(".st-key-compare_twins_input input")
        box.fill("8462")
        box.press("Enter")
        wait_idle(page)
        assert "twins=8462" in page.url
    assert "Traceback" not in server.log_text()[logged:]
