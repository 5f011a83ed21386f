"""The README's five-minute demo, link by link, in a real browser at a projector's 1024×768: each link is
read from the README (so the script cannot rot), opened on a fresh server, and must show its view: the
right page, no exception or error, presenter mode on, and on Explore the model, input, step, what-if and
open sections the link names. Screenshots go to $EXPLORER_SHOTS when it is set."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from browser_support import ROOT, chromium, open_app, require_browser, streamlit_server, wait_charts

README = ROOT / "README.md"
PAGE_TITLES = {"": "Explore", "compare": "Compare", "learn": None}  # Learn's heading is its section's


def demo_links() -> list[str]:
    """The README's demo links, in order (the section "## Five-minute demo")."""
    section = re.search(r"^## Five-minute demo\n(.*?)^## ", README.read_text(), re.S | re.M)
    assert section, "the README has no '## Five-minute demo' section"
    return re.findall(r"<(http://localhost:8501/[^>\s]*)>", section.group(1))


def test_the_demo_script_is_a_handful_of_links_in_order():
    links = demo_links()
    assert 6 <= len(links) <= 10
    assert all("present=1" in link for link in links), "every demo view opens in presenter mode"


@pytest.fixture(scope="module")
def server():
    require_browser()
    with streamlit_server() as running:
        yield running


def problems_on(page, link: str) -> list[str]:
    """What the opened view lacks, judged from the link's own parameters."""
    url = urlsplit(link)
    path = url.path.strip("/")
    params = {k: v[0] for k, v in parse_qs(url.query).items()}
    found = []
    if page.locator('[data-testid="stException"]').count() or "Traceback" in page.content():
        found.append("an exception is shown")
    errors = page.locator('[data-testid="stAlertContentError"]')
    if errors.count():
        found.append(f"an error: {errors.first.inner_text()[:120]!r}")
    title = PAGE_TITLES[path]
    if title and page.locator("h1").first.inner_text().strip() != title:
        found.append(f"the page is not {title}")
    if not page.get_by_role("switch", name="Presenter mode").is_checked():
        found.append("presenter mode is off")
    for key, value in params.items():  # the app keeps what the link asked for (a refused part is dropped)
        if key not in ("step",) and f"{key}=" not in page.url:
            found.append(f"the address lost {key}={value}")
    if path == "learn" and f"section={params.get('section')}" not in page.url:
        found.append("Learn is not at the linked section")
    if path == "":
        model = page.locator(".st-key-explore_model input").input_value()
        if model != params["model"]:
            found.append(f"the model shown is {model!r}")
        if page.locator(".st-key-explore_input input").input_value() != params["input"]:
            found.append("the input differs")
        if "step" in params and page.locator("h4", has_text=f"t = {params['step']} of").count() == 0:
            found.append(f"the step panel is not at t = {params['step']}")
        if any(k in params for k in ("mask", "temp", "pin", "force")) and \
                page.locator("h4", has_text="Changed:").count() == 0:
            found.append("the what-if's changed decoding is not shown")
        if params.get("explore_hidden") == "true" and page.locator(".st-key-explore_fig_h .main-svg").count() == 0:
            found.append("the hidden-states section is not open")
    return found


def test_every_demo_link_opens_its_view(server, tmp_path):
    shots = Path(os.environ["EXPLORER_SHOTS"]) if os.environ.get("EXPLORER_SHOTS") else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    problems = []
    with chromium(1024, 768) as page:
        for number, link in enumerate(demo_links(), start=1):
            url = urlsplit(link)
            open_app(page, server, url.path.lstrip("/") + "?" + url.query)
            wait_charts(page)
            page.screenshot(path=str(shots / f"readme-demo-{number}.png"))
            problems += [f"link {number} ({link}): {p}" for p in problems_on(page, link)]
    assert not problems, "\n".join(problems)
