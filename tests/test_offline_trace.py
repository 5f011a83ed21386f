"""`python -m explorer trace --html FILE` (and Explore's "Offline trace" download): one self-contained HTML
file of a trace, under 5 MB, that needs no server and no network: plotly.js inlined, every number written in,
the Chinese glyphs it shows embedded as a font subset (the whole served font would not fit)."""

from __future__ import annotations

import base64
import io
import re

import pytest

from explorer.__main__ import main

LIMIT = 5_000_000


def write(tmp_path, capsys, model: str, text: str) -> str:
    path = tmp_path / f"{model}.html"
    assert main(["trace", "--checkpoint", model, "--input", text, "--html", str(path)]) == 0
    capsys.readouterr()
    return path.read_text(encoding="utf-8")


def test_the_file_holds_everything_it_needs_and_fits_5_mb(tmp_path, capsys):
    page = write(tmp_path, capsys, "reverse", "31415926")
    assert len(page.encode("utf-8")) <= LIMIT
    assert "Plotly.newPlot" in page and "plotly.js" in page.lower()  # the library itself, inlined
    markup = re.sub(r"<script>.*?</script>", "<script></script>", page, flags=re.S)  # the tags, not the code
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", markup), "nothing is loaded from outside"
    assert page.count('<section class="step">') == 9  # 8 symbols reversed, then <eos>
    assert "ArrowRight" in page and "ArrowLeft" in page
    assert "@font-face" not in page  # no Chinese, no font


def test_a_chinese_trace_embeds_exactly_the_glyphs_it_shows(tmp_path, capsys):
    fontTools = pytest.importorskip("fontTools.ttLib")
    page = write(tmp_path, capsys, "eng-cmn", "I love you.")
    assert len(page.encode("utf-8")) <= LIMIT
    shown = set(re.findall(r"[\u4e00-\u9fff]", re.sub(r"<script>.*?</script>", "", page, flags=re.S)))
    assert shown, "eng-cmn writes Chinese"
    data = re.search(r"url\(data:font/woff2;base64,([A-Za-z0-9+/=]+)\)", page)
    assert data, "the Chinese glyphs travel inside the file"
    font = fontTools.TTFont(io.BytesIO(base64.b64decode(data.group(1))))
    covered = {chr(c) for c in font.getBestCmap()}
    assert shown <= covered and len(covered) < 200  # a subset, not the 1.1 MB font


def test_a_file_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, capsys):
    code = main(["trace", "--checkpoint", "reverse", "--input", "123", "--html", str(tmp_path / "no" / "x.html")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--html" in err
