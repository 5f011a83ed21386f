"""The offline trace file (`python -m explorer trace --html FILE`) in a real browser with the network off:
it draws, → moves to the next step (its heading and the heatmap's current-step box change), ← back, and the
page asks nothing of a network."""

from __future__ import annotations

from explorer.__main__ import main

from browser_support import chromium, require_browser

BOX = "document.getElementById('heatmap').layout.shapes.slice(-1)[0].y0"  # the current step's outline


def test_the_file_steps_through_with_the_keys_and_no_network(tmp_path, capsys):
    require_browser()
    path = tmp_path / "reverse.html"
    assert main(["trace", "--checkpoint", "reverse", "--input", "31415926", "--html", str(path)]) == 0
    capsys.readouterr()
    asked = []
    with chromium(1024, 768) as page:
        page.context.set_offline(True)
        page.on("request", lambda r: asked.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
        page.goto(path.as_uri())
        page.wait_for_selector("#heatmap .main-svg")
        assert page.inner_text("#where") == "t = 1 of 9" and page.evaluate(BOX) == -0.5
        first = page.locator(".step.shown h2").inner_text()
        box = page.locator("#heatmap .shapelayer path").last.get_attribute("d")
        page.keyboard.press("ArrowRight")
        page.wait_for_function("() => document.getElementById('where').textContent === 't = 2 of 9'")
        assert page.evaluate(BOX) == 0.5
        assert page.locator(".step.shown h2").inner_text() != first
        assert page.locator("#heatmap .shapelayer path").last.get_attribute("d") != box, "the drawn box moved"
        assert page.locator(".step.shown table").first.is_visible()  # the lookup table of step 2
        page.keyboard.press("ArrowLeft")
        page.wait_for_function("() => document.getElementById('where').textContent === 't = 1 of 9'")
        page.click("#next")
        page.wait_for_function("() => document.getElementById('where').textContent === 't = 2 of 9'")
    assert not asked, f"the file asked the network for {asked}"
