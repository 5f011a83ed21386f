"""The Explore page in a real browser: `streamlit run app.py` (the README's command) driven by headless
Chromium. Types an input, steps, clicks a heatmap cell, checks the URL and saves screenshots.

Runs on the small test checkpoints; set EXPLORER_TEST_PRETRAINED to a folder of real checkpoints (with
a `copy` model) to look at trained models instead. A copy of the main screenshot goes to
EXPLORER_SCREENSHOT (default /work/runs/explore.png when /work/runs exists) for people to look at.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from browser_support import CHARTS, chromium, clipped_text, open_app, streamlit_command, wait_charts, wait_idle

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server(test_models_server):
    """The test process's server on the test checkpoints (tests/conftest.py), shared with the beam tree's tests."""
    return test_models_server


def step_heading(page) -> str:
    return page.locator("h4", has_text=re.compile(r"t = \d+ of \d+")).first.inner_text()


def current_step(page) -> int:
    return int(re.search(r"t = (\d+) of", step_heading(page)).group(1))


def cell_centre(page, key: str, row: int, col: int, rows: int, cols: int) -> tuple[float, float]:
    """Screen position of heatmap cell (row, col), 0-based, from the plot area's box."""
    area = page.locator(f".st-key-{key} .nsewdrag").first
    area.scroll_into_view_if_needed()
    box = area.bounding_box()
    assert box, "the heatmap's plot area is not on screen"
    return box["x"] + (col + 0.5) * box["width"] / cols, box["y"] + (row + 0.5) * box["height"] / rows


def test_the_readme_app_command_is_what_this_test_serves():
    """The README starts the app with `bash scripts/start.sh`, which runs `python -m explorer.app.serve "$@"`
    (`streamlit run app.py` with room for long addresses): the server below is that command with the headless
    flags appended (minus the install step)."""
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"```bash\n(bash scripts/start\.sh)\n```", readme)
    assert command, "the README's start command moved: update this test and browser_support"
    script = (ROOT / "scripts" / "start.sh").read_text()
    assert re.search(r'python -m explorer\.app\.serve "\$@"', script)
    assert streamlit_command(8501)[1:3] == ["-m", "explorer.app.serve"]


def test_type_step_click_and_screenshot(server, tmp_path):
    shots = tmp_path / "shots"
    shots.mkdir()
    logged = len(server.log_text())  # the shared server's log before this test
    with chromium(width=1600, height=4200) as page:
        open_app(page, server)
        assert page.get_by_role("heading", name=re.compile("Explore")).count() >= 1
        assert "Traceback" not in page.content()

        # Type an input and decode it.
        box = page.locator(".st-key-explore_input input")
        box.fill("2718281")
        box.press("Enter")
        wait_idle(page)
        assert "input=2718281" in page.url
        assert current_step(page) == 1
        wait_charts(page)
        page.screenshot(path=str(shots / "1-typed.png"))

        # Step forward with the button: only the step panel reruns.
        started = time.perf_counter()
        page.locator(".st-key-explore_next button").first.click()
        wait_idle(page, settle=150)
        step_seconds = time.perf_counter() - started
        assert current_step(page) == 2
        assert "step=2" in page.url

        # Click the heatmap cell of output step 5, input 3.
        steps = int(re.search(r"of (\d+)", step_heading(page)).group(1))
        assert steps >= 5
        x, y = cell_centre(page, "explore_heatmap", 4, 2, steps, 7)
        page.mouse.click(x, y)
        wait_idle(page)
        assert current_step(page) == 5, step_heading(page)
        assert "step=5" in page.url
        panel = page.get_by_text(re.compile(r"Step panel drawn in")).first.inner_text()
        wait_charts(page)
        page.screenshot(path=str(shots / "2-clicked.png"))

        # Play advances by itself (the fragment's timer) and stops at the last step.
        page.locator(".st-key-explore_play button").first.click()
        page.wait_for_function(f"""() => document.body.innerText.includes('t = {steps} of {steps}')""",
                               timeout=120_000)
        wait_idle(page)
        page.wait_for_timeout(2500)  # no timer left running: the page stays idle on the last step
        wait_idle(page)
        assert current_step(page) == steps
        assert page.locator(".st-key-explore_play button").count() >= 1

        # A bad input is a message; the last good view stays.
        box = page.locator(".st-key-explore_input input")
        box.fill("12x")
        box.press("Enter")
        wait_idle(page)
        assert page.get_by_text("unknown symbol").count() >= 1
        assert page.get_by_text("last good input").count() >= 1
        assert "Traceback" not in page.content()
        page.screenshot(path=str(shots / "3-bad-input.png"))

        # The link reopens the same view.
        page.goto(f"{server.url}/?model=copy&input=2718281&step=3")
        page.wait_for_selector('[data-testid="stApp"]')
        wait_idle(page, settle=1000)
        assert current_step(page) == 3
        page.wait_for_function("""() => document.querySelector('.st-key-explore_input input')?.value === '2718281'""",
                               timeout=30_000)  # a loaded machine may draw the box a moment after the step

    target = os.environ.get("EXPLORER_SCREENSHOT") or ("/work/runs/explore.png" if Path("/work/runs").is_dir() else "")
    if target:
        shutil.copy(shots / "2-clicked.png", target)
    print(f"step change: {step_seconds * 1000:.0f} ms from click to idle in the browser; server: {panel}; "
          f"screenshots in {shots}")
    assert "Traceback" not in server.log_text()[logged:]


def test_the_hidden_states_section_opens_with_its_charts_and_stays_open_while_stepping(server):
    """The section starts closed (its charts are not drawn on the first view); a click opens it, its charts
    draw, and the step panel's reruns keep it open."""
    with chromium(width=1600, height=3000) as page:
        open_app(page, server)
        wait_charts(page)
        charts = page.locator(CHARTS)
        closed = charts.count()
        assert page.locator(".st-key-explore_fig_h").count() == 0
        page.locator(".st-key-explore_hidden summary").click()
        wait_idle(page)
        wait_charts(page)
        assert charts.count() == closed + 2  # hᵢ and sₜ
        assert page.locator(".st-key-explore_fig_h .main-svg").count() >= 1
        assert "explore_hidden=true" in page.url, "a shared link should open the section too"
        page.locator(".st-key-explore_next button").first.click()
        wait_idle(page)
        wait_charts(page)
        assert current_step(page) == 2
        assert charts.count() == closed + 2
        assert "Traceback" not in page.content()


def test_a_link_with_100_kb_of_input_says_why_and_the_page_stays_usable(server):
    """A shared link with ~100 KB of text in ?input= (136 KB once its spaces are encoded) got a 400 from the
    HTTP parser and a blank page; served by explorer.app.serve, the page says what is wrong and an example
    still decodes."""
    from urllib.parse import quote
    with chromium(width=1400, height=1600) as page:
        response = page.goto(f"{server.url}/?model=copy&input=" + quote("1 2 3 " * 17_000))
        assert response is not None and response.status == 200
        page.wait_for_selector('[data-testid="stApp"]')
        wait_idle(page, settle=1000)
        assert page.get_by_text("the input has 102,000 characters; the limit is 1,000").count() == 1
        example = page.locator(".st-key-explore_example button").first
        text = example.inner_text().strip()
        example.click()
        wait_idle(page)
        assert page.locator(".st-key-explore_input input").input_value() == text
        assert current_step(page) == 1 and "Traceback" not in page.content()


def test_the_explore_pages_own_address_opens_explore(server):
    """`/explore` (the page's name in links people type or share) opens Explore with the URL's view: the
    default page lives at the root, and Streamlit answered its own name with a "Page not found" dialog."""
    with chromium(width=1400, height=2400) as page:
        page.goto(f"{server.url}/explore?model=copy&input=31415&step=2")
        page.wait_for_selector('[data-testid="stApp"]')
        # The hidden page at /explore switches to the root: a second run, after the first went idle.
        page.wait_for_selector(".st-key-explore_input input", timeout=60_000)
        wait_idle(page, settle=1000)
        assert page.get_by_text("Page not found").count() == 0
        assert page.locator(".st-key-explore_input input").input_value() == "31415"
        assert current_step(page) == 2
        assert "model=copy" in page.url and "input=31415" in page.url


# The boxes of the heatmap's input labels as the browser laid them out.
LABEL_BOXES = """() => Array.from(document.querySelectorAll('.st-key-explore_heatmap .xtick text'))
    .map(t => { const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right, r.top, r.bottom]; })"""


def test_heatmap_input_labels_do_not_run_into_each_other(server):
    """Twelve inputs in the heatmap's column at several window widths: upright labels ran into each other
    ("10:311:112:2") where the column was narrow; where they would, the browser's layout turns them."""
    with chromium(width=1600, height=2400) as page:
        open_app(page, server, "?model=copy&input=312312312312")
        for width in (1600, 1450, 1300):
            page.set_viewport_size({"width": width, "height": 2400})
            page.wait_for_timeout(1000)  # Plotly redraws on resize
            wait_charts(page)
            boxes = page.evaluate(LABEL_BOXES)
            assert [b[0] for b in boxes] == [f"{i}:{d}" for i, d in enumerate("312312312312", 1)]
            for (a, *ra), (b, *rb) in zip(boxes, boxes[1:]):
                apart = ra[1] <= rb[0] or rb[1] <= ra[0] or ra[3] <= rb[2] or rb[3] <= ra[2]
                assert apart, f"at width {width}, labels {a!r} {ra} and {b!r} {rb} overlap"


# Whether any part of the element's content is wider than its box (cut off with an ellipsis).
CUT_OFF = "e => Array.from(e.querySelectorAll('*')).some(c => c.scrollWidth > c.clientWidth + 1)"


@pytest.mark.parametrize("width", [1300, 1024])
def test_no_text_is_cut_off_in_a_narrower_window(server, width):
    """The decoding choices, the metric labels and the step's formulas fit in each decoding mode, also on a
    1024-pixel projector. At 1300 px "Teacher-forced" and "Alignment accuracy" were cut and the argmax
    formula ran past its column; at 1024 px, beside the sidebar the page links were in, most labels were.
    At 1300 px the step buttons show their words too (checked on the same visit)."""
    with chromium(width=width, height=2400) as page:
        open_app(page, server, "?model=copy&input=31231231")
        wait_charts(page)
        assert clipped_text(page) == []
        if width == 1300:  # Prev, Play and Next each show icon and word in a 1300-pixel window (they read "P…", "N…")
            for key in ("prev", "play", "next"):
                button = page.locator(f".st-key-explore_{key} button").first
                assert not button.evaluate(CUT_OFF), f"the {key} button's label is cut off"
        for mode in ("Beam search", "Teacher-forced"):
            page.locator(".st-key-explore_mode").get_by_text(mode, exact=True).click()
            wait_idle(page)
            wait_charts(page)
            assert clipped_text(page) == [], mode
