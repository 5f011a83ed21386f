"""Explore's lookup table of one decoder step as HTML: a row per input position i with its token xᵢ, key kᵢ, score
eₜᵢ, weight αₜᵢ and value vᵢ (`views.lookup_table`'s columns), drawn by the browser itself.

Why not st.dataframe: its data grid is 1.4 MB of JavaScript for the browser and pyarrow for the server, the two
largest costs of Explore's cold start after the charts (4.55 s against 4.09 s without it, eight starts a side:
benchmarks/RESULTS.md, "2026-12-08: the lookup table in HTML").
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

import numpy as np

from explorer import equations

SPARK_WIDTH, SPARK_HEIGHT = 120, 26  # px: a vector's components as bars from a midline, one scale per column
WEIGHT_BAR = 90  # px for α = 1
BLUE, RED = "#1f77b4", "#d62728"

CSS = """<style>
.explorer-lookup-frame { max-height: 36rem; overflow-y: auto; }
.explorer-lookup { border-collapse: collapse; font-size: 1rem; font-variant-numeric: tabular-nums; }
.explorer-lookup th, .explorer-lookup td { padding: .15rem .55rem; text-align: right; white-space: nowrap;
  border-bottom: 1px solid rgba(49, 51, 63, .12); }
.explorer-lookup th { font-weight: 600; color: rgba(49, 51, 63, .75); }
.explorer-lookup .token { text-align: left; white-space: normal; overflow-wrap: anywhere; }
.explorer-lookup tr.largest td { font-weight: 700; }
.explorer-lookup .bar { display: inline-block; height: .75em; margin-right: .4rem; vertical-align: middle;
  background: #1f77b4; }
.explorer-lookup img { display: block; margin-left: auto; }
</style>"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _spark(v: np.ndarray, peak: float, name: str) -> str:
    """The vector's components as bars up (positive, blue) or down (negative, red) from a midline, as an image."""
    n, mid = max(1, len(v)), SPARK_HEIGHT / 2
    step, scale = SPARK_WIDTH / n, (mid - 1) / peak if peak > 0 else 0.0
    paths = {BLUE: [], RED: []}
    for j, x in enumerate(np.asarray(v, dtype=float)):
        paths[BLUE if x >= 0 else RED].append(f"M{(j + .5) * step:.1f} {mid:.1f}V{mid - x * scale:.1f}")
    width = max(step * .8, .6)
    bars = "".join(f'<path d="{"".join(d)}" stroke="{colour}" stroke-width="{width:.2f}"/>'
                   for colour, d in paths.items() if d)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}">'
           f'<line x1="0" x2="{SPARK_WIDTH}" y1="{mid}" y2="{mid}" stroke="rgba(49,51,63,.25)"/>{bars}</svg>')
    # an image, not inline SVG: st.html's sanitiser keeps no <svg>, and an image adds no element per bar
    return (f'<img src="data:image/svg+xml,{quote(svg)}" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" '
            f'alt="{_e(name)}">')


def lookup_html(table: dict[str, Any], t: int, peak_k: float, peak_v: float) -> str:
    """The table of step t (from 1): `table` is `views.lookup_table`'s; the keys' and values' bars share the scales
    `peak_k` and `peak_v` (the largest |component| over the whole trace), so rows and steps compare."""
    sub = equations.sub(t)
    weights = np.asarray(table["weight α_ti"], dtype=float)
    largest = int(np.argmax(weights)) if weights.size else -1
    truth = table.get("true")
    head = ["i", '<th class="token">xᵢ</th>', "key kᵢ", f"score e{sub}ᵢ", f"weight α{sub}ᵢ", "value vᵢ"]
    head += ["true?"] if truth is not None else []
    cells = "".join(h if h.startswith("<th") else f"<th>{h}</th>" for h in head)
    rows = []
    for r, i in enumerate(table["i"]):
        score = "masked" if table["masked"][r] else f"{table['score e_ti'][r]:.4f}"
        a = weights[r]
        row = [f"<td>{i}</td>", f'<td class="token">{_e(table["token"][r])}</td>',
               f"<td>{_spark(table['key k_i'][r], peak_k, f'k{i}')}</td>", f'<td class="score">{score}</td>',
               f'<td class="weight"><span class="bar" style="width:{WEIGHT_BAR * a:.1f}px"></span>{a:.4f}</td>',
               f"<td>{_spark(table['value v_i'][r], peak_v, f'v{i}')}</td>"]
        if truth is not None:
            row.append(f'<td class="true">{"✓" if truth[r] else ""}</td>')
        rows.append(f'<tr{" class=largest" if r == largest else ""}>{"".join(row)}</tr>')
    return (f'{CSS}<div class="explorer-lookup-frame"><table class="explorer-lookup"><tr>{cells}</tr>{"".join(rows)}'
            '</table></div>')
