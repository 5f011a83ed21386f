"""The Train page in a real browser: the curves grow while the default model trains, and a closed
tab's training stops. Saves a screenshot of the live page to /work/runs/train.png (or $EXPLORER_SHOTS)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from browser_support import chromium, clipped_text, wait_charts, wait_idle

SHOTS = Path(os.environ.get("EXPLORER_SHOTS", "/work/runs"))


@pytest.fixture(scope="module")
def server(shipped_server):
    """The shared server on the shipped checkpoints (tests/conftest.py): a closed tab's training stops 1 s after
    the browser disconnects there."""
    return shipped_server

# Plotly keeps numeric arrays base64-encoded in `data`; `_fullData` holds the decoded arrays
CHARTS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(d => ({
    title: d.layout && d.layout.title ? d.layout.title.text.replace(/<[^>]+>/g, '') : null,
    points: d._fullData && d._fullData[0] && d._fullData[0].x ? d._fullData[0].x.length : 0}))"""


def points(page, title: str) -> int:
    return max([c["points"] for c in page.evaluate(CHARTS) if c["title"] == title] or [0])


def wait_for_points(page, title: str, more_than: int, timeout: float = 120_000) -> None:
    page.wait_for_function(
        f"""() => ({CHARTS})().some(c => c.title === {title!r} && c.points > {more_than})""",
        timeout=timeout)


def progress(page) -> str:
    return page.locator('[data-testid="stProgress"]').first.inner_text()


def set_number(page, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    wait_idle(page)


def test_curves_update_while_training(server):
    with chromium(width=1600, height=2000) as page:
        page.goto(server.url + "/train")
        wait_idle(page, settle=1000)
        # the default task (reverse 5–15) with a smaller model, so the test is quick on a busy machine; more
        # steps than the test lasts and no target, so the run is still going when Stop is clicked (a 300-step
        # run could finish first on a quiet machine)
        set_number(page, "Hidden size", "32")
        set_number(page, "Batch size", "32")
        set_number(page, "Steps", "20000")
        page.get_by_text("Stop at target").click()
        wait_idle(page)
        assert not page.get_by_role("checkbox", name="Stop at target").is_checked()
        page.get_by_role("button", name="Start training").click()
        wait_for_points(page, "Loss", 0)
        first_points, first_text = points(page, "Loss"), progress(page)
        assert re.search(r"Step [\d,]+ of 20,000", first_text)
        wait_for_points(page, "Loss", first_points)  # the fragment refreshes the chart on its own
        assert points(page, "Loss") > first_points
        page.wait_for_function(f"() => document.querySelector('[data-testid=\"stProgress\"]').innerText "
                               f"!== {first_text!r}")
        wait_for_points(page, "Accuracy", 1, timeout=120_000)  # two evaluations: the curves have a shape
        page.wait_for_timeout(1500)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "train.png"))
        page.get_by_role("button", name="Stop").click()
        page.get_by_text("Stopped at step").wait_for(timeout=30_000)
        wait_idle(page)
        assert page.get_by_role("button", name="Continue training").is_visible()
        assert "Traceback" not in page.content()


def test_closing_the_tab_stops_its_training(server):
    with chromium(width=1400, height=1600) as page:
        page.goto(server.url + "/train")
        wait_idle(page, settle=1000)
        page.get_by_role("button", name="Start training").click()
        page.locator('[data-testid="stProgress"]').first.wait_for()
        page.goto("about:blank")  # the tab leaves: its websocket closes, its session goes away
        page.goto(server.url + "/train")
        wait_idle(page, settle=1000)
        for _ in range(20):  # the reaper checks every few seconds
            if page.get_by_text("Trainings running on this server: 0 of").count():
                break
            page.wait_for_timeout(1000)
            page.reload()
            wait_idle(page, settle=500)
        assert page.get_by_text("Trainings running on this server: 0 of").count()


@pytest.mark.parametrize("width", [1300, 1024])
def test_no_text_is_cut_off_on_the_other_pages_in_a_narrower_window(server, width):
    """At 1300 px the Train page's "Stop at target" read "Stop …" and the Learn page's RNN formula ran past
    the page's edge; at 1024 px, beside the sidebar the page links were in, more labels were cut."""
    with chromium(width=width, height=2400) as page:
        for path in ("/train", "/learn", "/compare"):
            page.goto(server.url + path)
            wait_idle(page, settle=1000)
            wait_charts(page)
            assert clipped_text(page) == [], path


def test_an_uploaded_checkpoints_result_stays_in_view(server, tmp_path):
    """Issue 26: uploading a checkpoint closed its section and hid "Added …" / "This file was refused: …"."""
    from explorer.checkpoints import checkpoint
    from explorer.training.recipes import translation_setup
    from tests import pig_latin
    tsv = "".join(f"{s}\t{t}\n" for s, t in pig_latin.pairs(300)).encode()
    bundle, _, _ = translation_setup(tsv, "pig", {"embed": 8, "hidden": 16, "attn_dim": 8})
    good = checkpoint.save(bundle, tmp_path / "pig")
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"\x80\x04\x95 pickled torch model")
    with chromium(width=1400, height=2400) as page:
        page.goto(server.url + "/train")
        wait_idle(page, settle=1000)
        page.get_by_text("Upload a checkpoint").click()
        wait_idle(page)
        for path, message in ((bad, "This file was refused"), (good, "to this session's models")):
            page.locator('[data-testid="stFileUploaderDropzoneInput"]').last.set_input_files(str(path))
            wait_idle(page, settle=1500)
            shown = page.get_by_text(message)
            assert shown.count() and shown.first.is_visible(), message
            set_number(page, "Seed", "3")  # another widget reruns the page: the section stays open on its result
            assert page.get_by_text(message).first.is_visible(), message


def test_an_uploaded_tsv_is_kept_by_the_page_with_its_box_empty_and_survives_a_visit_elsewhere(server, tmp_path):
    """The server holds an uploaded TSV once, out of Streamlit's per-session copy: the page names the file it
    holds (the box is empty again, for another file), keeps it across a visit to another page, and Remove
    lets it go."""
    from tests import pig_latin
    path = tmp_path / "my_pairs [v2]*$1.tsv"  # shown as named, not as markdown
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pig_latin.pairs(300)))
    with chromium(width=1400, height=2400) as page:
        page.goto(server.url + "/train")
        wait_idle(page, settle=1000)
        page.get_by_text("Translation (your TSV file)").click()
        wait_idle(page)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(path))
        wait_idle(page, settle=1500)
        assert page.get_by_text("300 sentence pairs").first.is_visible()
        assert page.get_by_text("Sentence pairs: my_pairs [v2]*$1.tsv").first.is_visible()
        assert page.locator('[data-testid="stFileUploaderFile"]').count() == 0  # the box holds no file now
        page.get_by_role("link", name="Explore").first.click()
        wait_idle(page, settle=1000)
        page.get_by_role("link", name="Train").first.click()
        wait_idle(page, settle=1000)
        assert page.get_by_text("300 sentence pairs").first.is_visible()
        page.get_by_role("button", name="Remove").click()
        wait_idle(page)
        assert page.get_by_text("300 sentence pairs").count() == 0
