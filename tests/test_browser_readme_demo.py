"""The README's five-minute demo, link by link, in a real browser at a projector's 1024×768: each link is
read from the README (so the script cannot rot), opened on a fresh server, and must show its view: the
right page, no exception or error, presenter mode on, and on Explore the model, input, step, what-if and
open sections the link names. Each link names its figure (#heatmap, ...): the page must open scrolled to
it, the figure inside the first screen; at least 90% of the visible text at 16 px or more, and every table on
screen drawn at 16 px or more; no text or table cut off its box. Screenshots go to $EXPLORER_SHOTS when it is set."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from browser_support import ROOT, chromium, clipped_text, open_app, wait_charts
from explorer.app.pages.landing import ANCHORS

VIEWPORT = (1024, 768)
TOP_BAR = 60  # Streamlit's header covers the top of the screen

# The visible text of the screen, by characters: how much is drawn at 16 px or more (SVG chart text too).
# Tables are measured on their own (TABLE_TEXT): this walk skips the grid's hidden copy of its cells.
TEXT_SIZES = """() => {
  let large = 0, small = 0; const smallest = [];
  const walker = document.createTreeWalker(document.querySelector('[data-testid="stApp"]'), NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.textContent.trim(), el = n.parentElement;
    if (!text || el.closest('.katex-mathml, style, script, [data-testid="stDataFrame"]')) continue;
    const range = document.createRange(); range.selectNodeContents(n); const box = range.getBoundingClientRect();
    if (box.width < 1 || box.height < 1 || box.bottom <= 0 || box.top >= innerHeight || box.right <= 0
        || box.left >= innerWidth) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || +style.opacity === 0) continue;
    let px = parseFloat(style.fontSize);
    if (el instanceof SVGElement) { const m = el.getScreenCTM(); if (m) px *= Math.hypot(m.b, m.d); }  // a scale()d label
    if (px >= 15.9) large += text.length; else { small += text.length; smallest.push(text.slice(0, 20) + ' ' + px); }
  }
  return {share: large / Math.max(1, large + small), smallest: smallest.slice(0, 8)};
}"""

# Every label drawn in a chart, at the size it is drawn: Plotly keeps a label's font-size and shrinks it with a
# scale() transform to fit its bar. Axis ticks may be 14 px (dense), the rest 16 px.
SMALL_CHART_TEXT = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] .main-svg text')).flatMap(t => {
  const box = t.getBoundingClientRect(), m = t.getScreenCTM();
  if (box.width < 1 || !t.textContent.trim() || !m) return [];
  const px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.b, m.d);
  const tick = /tick/.test((t.getAttribute('class') || '') + ' ' + (t.parentElement.getAttribute('class') || ''));
  const chart = (t.closest('[class*="st-key-"]')?.className.match(/st-key-[\\w-]+/g) || ['?']).slice(-1)[0];
  return px < (tick ? 13.9 : 15.9) ? [`${chart}: ${t.textContent.trim().slice(0, 12)} ${px.toFixed(1)} px`] : [];
})"""

# Tables on screen whose text is drawn under 16 px. A table (st.dataframe) draws its cells on a canvas: at its
# grid's font (--gdg-base-font-style) times any CSS zoom, and a progress column's labels at 0.9 of that (the
# grid's range cell), which counts as the table's size.
TABLE_TEXT = """() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]')).flatMap(t => {
  const box = t.getBoundingClientRect(), grid = t.querySelector('[style*="--gdg-base-font-style"]');
  if (!grid || box.width < 1 || box.bottom <= 0 || box.top >= innerHeight || box.left >= innerWidth) return [];
  const font = getComputedStyle(grid).getPropertyValue('--gdg-base-font-style');
  const px = parseFloat(font.match(/([0-9.]+)px/)[1]) * 0.9 * (grid.currentCSSZoom || 1);
  const key = (t.closest('[class*="st-key-"]')?.className.match(/st-key-[\\w-]+/g) || ['a table']).slice(-1)[0];
  return px < 15.9 ? [`${key}: ${px.toFixed(1)} px`] : [];
})"""

# Tables on screen that do not fit: columns hidden past the grid's edge (it scrolls sideways), or the grid
# itself running past its column or the window (a zoomed table overflowed at 1024 px).
TABLES_CUT = """() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]')).flatMap(t => {
  const box = t.getBoundingClientRect(), room = t.closest('[data-testid="stElementContainer"]').getBoundingClientRect();
  if (box.width < 1 || box.bottom <= 0 || box.top >= innerHeight) return [];
  const key = (t.closest('[class*="st-key-"]')?.className.match(/st-key-[\\w-]+/g) || ['a table']).slice(-1)[0];
  const scroller = t.querySelector('.dvn-scroller'), out = [];
  if (scroller && scroller.scrollWidth > scroller.clientWidth + 2)
    out.push(`${key}: columns hidden (${scroller.scrollWidth} px of columns in ${scroller.clientWidth})`);
  if (box.right > Math.min(room.right, innerWidth) + 1)
    out.push(`${key}: runs ${Math.round(box.right - Math.min(room.right, innerWidth))} px past its box`);
  return out;
})"""

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
    assert all(urlsplit(link).fragment in ANCHORS for link in links), "every link names the figure it is about"


@pytest.fixture(scope="module")
def server(shipped_server):
    return shipped_server


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
    return found + on_screen(page, url.fragment)


def on_screen(page, anchor: str) -> list[str]:
    """What the first screen lacks: the named figure, large type (tables too), texts and tables that fit."""
    found = []
    figure = next((page.locator(s).first for s in ANCHORS[anchor] if page.locator(s).count()), None)
    box = figure.bounding_box() if figure is not None else None
    if box is None:
        found.append(f"the figure #{anchor} is not on the page")
    else:
        seen = min(box["y"] + box["height"], VIEWPORT[1]) - max(box["y"], TOP_BAR)
        if seen < min(box["height"], VIEWPORT[1] - TOP_BAR) * 0.9:
            found.append(f"the figure #{anchor} is not in the first screen (top {box['y']:.0f}, "
                         f"height {box['height']:.0f})")
    sizes = page.evaluate(TEXT_SIZES)
    if sizes["share"] < 0.9:
        found.append(f"only {sizes['share']:.0%} of the visible text is 16 px or more: {sizes['smallest']}")
    cut = clipped_text(page)
    if cut:
        found.append(f"texts cut off their box: {cut[:5]}")
    found += [f"a table's text is under 16 px: {t}" for t in page.evaluate(TABLE_TEXT)]
    found += [f"a table does not fit: {t}" for t in page.evaluate(TABLES_CUT)]
    return found


def test_every_demo_link_opens_its_view(server, tmp_path):
    shots = Path(os.environ["EXPLORER_SHOTS"]) if os.environ.get("EXPLORER_SHOTS") else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    problems = []
    with chromium(*VIEWPORT) as page:
        for number, link in enumerate(demo_links(), start=1):
            url = urlsplit(link)
            open_app(page, server, url.path.lstrip("/") + "?" + url.query + "#" + url.fragment)
            wait_charts(page)
            page.wait_for_function(f"() => document.body.dataset.explorerLanded === {url.fragment!r}",
                                   timeout=30_000)
            page.screenshot(path=str(shots / f"readme-demo-{number}.png"))
            problems += [f"link {number} ({link}): {p}" for p in problems_on(page, link)]
    assert not problems, "\n".join(problems)


def test_presenter_mode_offers_a_qr_code_of_the_view(server):
    """The QR code's address is the view's: the page, its model, input and step (a phone opens the same)."""
    link = demo_links()[1]
    url = urlsplit(link)
    with chromium(*VIEWPORT) as page:
        open_app(page, server, url.path.lstrip("/") + "?" + url.query)
        page.get_by_role("button", name="QR code").click()
        image = page.get_by_role("img", name="QR code of this view")
        image.wait_for()
        assert image.get_attribute("src").startswith("data:image/svg+xml")
        address = page.locator('[data-testid="stPopoverBody"] code').inner_text()
        params = parse_qs(urlsplit(address).query)
        assert address.startswith(server.url) and params["model"] == ["reverse"] and params["present"] == ["1"]
        assert params["input"] == ["31415926"] and params["step"] == ["1"]


def test_presenter_chart_labels_are_large_and_the_score_twins_stay_readable_at_1024_px(server):
    """Bar labels, ticks and markers in every chart of a step with a what-if, of Compare and of Learn's
    attention section, at their drawn size (α's bar labels drew at 12.5 px, the "masked" marker at 6.6 px,
    ŷ's probabilities at 11.4 px). On Compare, the score twins' heatmaps: four twins in one row drew heatmaps
    ~10 px wide at 1024 px; two to a row, each keeps a third of the screen or more, in presenter mode too
    (checked on the same visit: the width is the projector's, whatever the window's height)."""
    small = []
    with chromium(1024, 4000) as page:  # tall: every chart of the page drawn in one screen
        for view in ("?model=reverse&input=31415926&step=3&mask=3&present=1", "compare?present=1",
                     "learn?section=6&present=1"):
            open_app(page, server, view)
            wait_charts(page)
            if view.startswith("?"):
                assert page.locator(".st-key-explore_fig_weights .bartext").count() >= 2, "α's bars are labelled"
            small += [f"{view}: {text}" for text in page.evaluate(SMALL_CHART_TEXT)]
            if view.startswith("compare"):
                heatmaps = page.locator('[class*="st-key-compare_twins_heat_"]')
                heatmaps.first.scroll_into_view_if_needed()
                wait_charts(page)
                assert heatmaps.count() >= 3
                widths = [heatmaps.nth(i).bounding_box()["width"] for i in range(heatmaps.count())]
                assert min(widths) >= VIEWPORT[0] / 3, widths
    assert not small, small
