"""Chinese on a machine without a CJK font: the app serves its own (static/fonts/explorer-cjk.woff2) and
the browser draws eng-cmn's output with it, in the page and in the heatmap's labels.

Chromium's DevTools report which font actually drew a node's glyphs (CSS.getPlatformFontsForNode), so
the test reads the real answer instead of guessing from widths. Where the machine has no Chinese font
(this project's headless Chromium; `fc-list :lang=zh` is empty), only the served font can draw them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from browser_support import chromium, open_app, wait_charts

ROOT = Path(__file__).resolve().parent.parent
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
FONT = ROOT / "static" / "fonts" / "explorer-cjk.woff2"


@pytest.fixture(scope="module")
def server(shipped_server):
    return shipped_server  # the shipped checkpoints: eng-cmn is a real Chinese model


def platform_fonts(page, selector: str) -> dict[str, int]:
    """{font family: glyphs drawn} for the first element matching a CSS selector, from Chromium itself."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    assert node, f"nothing matches {selector}"
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return {f["familyName"]: f["glyphCount"] for f in fonts}


def test_the_font_is_small_licensed_and_rebuildable():
    assert FONT.is_file() and FONT.stat().st_size < 3_000_000, "the served Chinese font should stay a few MB"
    licence = (FONT.parent / "OFL.txt").read_text()
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Noto Sans CJK SC" in licence
    assert (ROOT / "scripts" / "build_cjk_font.py").is_file()


def test_an_eng_cmn_output_is_drawn_with_the_served_font(server, tmp_path):
    if shutil.which("fc-list"):
        system = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout.strip()
        print("system Chinese fonts:", system or "none")
    with urllib.request.urlopen(f"{server.url}/app/static/fonts/explorer-cjk.woff2", timeout=10) as r:
        assert r.status == 200 and r.read() == FONT.read_bytes()
    with chromium(1024, 1400) as page:
        open_app(page, server, "?model=eng-cmn&input=I love you.")
        wait_charts(page)
        output = page.locator('[data-testid="stMetricValue"]').first.inner_text()
        chinese = CJK.findall(output)
        assert chinese, f"eng-cmn's output should be Chinese, got {output!r}"
        page.wait_for_function('() => document.fonts.check(\'16px "Explorer CJK"\', "我")')
        drawn = platform_fonts(page, '[data-testid="stMetricValue"] div')
        assert drawn.get("Explorer CJK", 0) >= len(chinese), f"the output's glyphs came from {drawn}"
        # the heatmap's row labels (the output tokens) are SVG text: drawn with the same font
        labels = page.locator('.st-key-explore_heatmap .ytick text')
        assert labels.count() >= 2
        label = labels.filter(has_text=CJK).first
        assert CJK.search(label.text_content() or ""), "the heatmap's row labels should include Chinese"
        label.evaluate("e => e.setAttribute('data-probe', '1')")
        drawn = platform_fonts(page, '[data-probe="1"]')
        assert drawn.get("Explorer CJK", 0) >= 1, f"the heatmap label's glyphs came from {drawn}"
        page.screenshot(path=str(tmp_path / "eng-cmn-1024.png"))


def probe_chinese(page, container: str) -> tuple[str, dict[str, int]]:
    """The innermost element under `container` whose own text is Chinese, and the fonts that drew it."""
    found = page.evaluate("""(container) => {
        const re = /[\\u3000-\\u303f\\u4e00-\\u9fff\\uff00-\\uffef]/;
        for (const el of document.querySelectorAll(container + ' *')) {
            if (el.closest('.katex-mathml')) continue;
            const own = Array.from(el.childNodes).filter(n => n.nodeType === 3).map(n => n.textContent).join('');
            if (re.test(own)) { el.setAttribute('data-probe', '2'); return own; }
        }
        return null;
    }""", container)
    assert found, f"no Chinese text under {container}"
    return found, platform_fonts(page, '[data-probe="2"]')


def test_a_formula_naming_a_chinese_token_is_drawn_with_the_served_font(server):
    """Step 2's state update names the fed token: s₂ = GRU(s₁, ["我"; c₁]); KaTeX's own fonts have no Chinese
    (it showed empty boxes)."""
    with chromium(1024, 1400) as page:
        open_app(page, server, "?model=eng-cmn&input=I love you.&step=2")
        wait_charts(page)
        page.wait_for_function('() => document.fonts.check(\'16px "Explorer CJK"\', "我")')
        text, drawn = probe_chinese(page, ".st-key-explore_step_panel .katex")
        assert drawn.get("Explorer CJK", 0) >= len(CJK.findall(text)), f"{text!r} was drawn with {drawn}"


def test_compares_side_by_side_chinese_output_is_drawn_with_the_served_font(server):
    with chromium(1024, 1400) as page:
        open_app(page, server, "compare?a=eng-cmn&b=eng-fra&input=I love you.")
        wait_charts(page)
        page.wait_for_function('() => document.fonts.check(\'16px "Explorer CJK"\', "我")')
        text, drawn = probe_chinese(page, ".st-key-compare_side_by_side [data-testid='stMarkdownContainer']")
        assert drawn.get("Explorer CJK", 0) >= len(CJK.findall(text)), f"{text!r} was drawn with {drawn}"
