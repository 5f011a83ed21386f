"""A trace as one self-contained HTML file, for a course page, a USB stick or a room with no network: the
α heatmap, the article's four steps with their numbers and the lookup table, stepped with ← → or buttons.

Everything is inside the file: plotly.js inlined, the Chinese glyphs the trace uses embedded as a font
subset (base64), the numbers written in at build time from the Trace (no server, no model, no network).
"""

from __future__ import annotations

import html

import numpy as np
import plotly.io as pio
from plotly.offline import get_plotlyjs

from explorer import equations
from explorer.app.figures.attention import attention_heatmap
from explorer.app.figures.style import FONT_FAMILY, cjk_font_face_for
from explorer.record import Trace

SHOWN_COMPONENTS = 8  # components of a long vector written out
TOP_TOKENS = 5
CELL_NAMES = {"rnn": "RNN", "gru": "GRU", "lstm": "LSTM", "unshared": "RNN"}

_STYLE = """
body { font-family: %(family)s; font-size: 18px; margin: 1.2rem 2rem; color: #262730; }
h1 { font-size: 1.7rem; margin: 0 0 .3rem; } h2 { font-size: 1.3rem; margin: .2rem 0 .6rem; }
h3 { font-size: 1.1rem; margin: 1rem 0 .3rem; }
.bar { display: flex; gap: .8rem; align-items: center; margin: .8rem 0; position: sticky; top: 0;
       background: white; padding: .4rem 0; z-index: 2; }
button { font: inherit; padding: .3rem 1rem; border: 1px solid #bbb; border-radius: .4rem; background: #fafafa;
         cursor: pointer; } button:disabled { opacity: .4; cursor: default; }
.grid { display: grid; grid-template-columns: minmax(320px, 5fr) 6fr; gap: 2rem; align-items: start; }
@media (max-width: 900px) { .grid { grid-template-columns: 1fr; } }
.formula { font-family: "Cambria Math", "STIX Two Math", Georgia, serif, "Explorer CJK"; font-size: 1.1rem; }
.vector { font-family: ui-monospace, Menlo, Consolas, monospace, "Explorer CJK"; font-size: .95rem; color: #444; }
table { border-collapse: collapse; margin: .3rem 0; } th, td { padding: .15rem .6rem; text-align: right; }
th { border-bottom: 1px solid #999; } td.tok, th.tok { text-align: left; } tr.top td { font-weight: 600; }
.wbar { display: inline-block; height: .7rem; background: #2171b5; vertical-align: middle; margin-right: .4rem; }
.step { display: none; } .step.shown { display: block; }
.note { color: #555; font-size: .95rem; }
"""

_SCRIPT = """
const T = %(T)d, SHAPE = %(shape)d;
let t = 0;
function show(n) {
  t = Math.min(Math.max(n, 0), T - 1);
  document.querySelectorAll(".step").forEach((el, i) => el.classList.toggle("shown", i === t));
  document.getElementById("where").textContent = "t = " + (t + 1) + " of " + T;
  document.getElementById("prev").disabled = t === 0;
  document.getElementById("next").disabled = t === T - 1;
  if (SHAPE >= 0) {
    const update = {}; update["shapes[" + SHAPE + "].y0"] = t - 0.5; update["shapes[" + SHAPE + "].y1"] = t + 0.5;
    Plotly.relayout("heatmap", update);
  }
}
document.getElementById("prev").onclick = () => show(t - 1);
document.getElementById("next").onclick = () => show(t + 1);
document.addEventListener("keydown", e => {
  if (e.key === "ArrowLeft") { show(t - 1); e.preventDefault(); }
  if (e.key === "ArrowRight") { show(t + 1); e.preventDefault(); }
  if (e.key === "Home") show(0);
  if (e.key === "End") show(T - 1);
});
show(0);
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _vector(name: str, v: np.ndarray) -> str:
    shown = ", ".join(f"{x:.4f}" for x in v[:SHOWN_COMPONENTS])
    more = f", … ({v.size} numbers)" if v.size > SHOWN_COMPONENTS else ""
    return f'<div class="vector">{_e(name)} = [{shown}{more}]</div>'


def _lookup(trace: Trace, s: int) -> str:
    """Step s's lookup table: one record per input position, its score and weight."""
    masked = set(trace.intervention.masked)
    best = int(np.argmax(trace.weights[s]))
    rows = []
    for i, token in enumerate(trace.source_tokens):
        e, a = trace.scores[s, i], trace.weights[s, i]
        shown = "masked" if i in masked else f"{e:.4f}"
        rows.append(f'<tr class="{"top" if i == best else ""}"><td>{i + 1}</td><td class="tok">{_e(token)}</td>'
                    f'<td>{shown}</td><td class="tok"><span class="wbar" style="width:{100 * a:.1f}px"></span>'
                    f'{a:.4f}</td></tr>')
    t = equations.sub(s + 1)
    head = (f'<tr><th>i</th><th class="tok">xᵢ</th><th>score e{t}ᵢ</th><th class="tok">weight α{t}ᵢ</th></tr>')
    return f"<table>{head}{''.join(rows)}</table>"


def _step(trace: Trace, s: int, cell: str) -> str:
    t = s + 1
    attends = trace.has_attention
    chosen, previous = trace.output_tokens[s], trace.previous_tokens[s]
    parts = [f"<h2>t = {t} of {trace.steps}: “{_e(previous)}” → “{_e(chosen)}”</h2>",
             "<h3>① Update the decoder state</h3>",
             f'<div class="formula">{_e(equations.state_update_title(t, CELL_NAMES.get(cell, cell), previous, attends))}</div>',
             _vector(f"s{equations.sub(t)}", trace.decoder_states[s])]
    if attends:
        best = int(np.argmax(trace.weights[s]))
        tau = trace.intervention.temperature
        weights = equations.temperature_title() if tau != 1.0 else "α = softmax(e)"
        parts += ["<h3>② Ask a question: the query</h3>",
                  f'<div class="formula">{_e(equations.query_line(t))}</div>',
                  _vector(f"q{equations.sub(t)}", trace.queries[s]),
                  "<h3>③ Look it up: scores, weights and the context</h3>",
                  f'<div class="formula">{_e(equations.score_title(trace.attention))}, &nbsp; {_e(weights)}'
                  f'{f" (τ = {tau:g})" if tau != 1.0 else ""}, &nbsp; {_e(equations.context_title(t))}</div>',
                  f'<p class="note">Largest weight: i = {best + 1} (“{_e(trace.source_tokens[best])}”), '
                  f"α = {trace.weights[s, best]:.4f}.</p>",
                  _lookup(trace, s), _vector(f"c{equations.sub(t)}", trace.contexts[s])]
    top = trace.top_k(s, TOP_TOKENS)
    rows = "".join(f'<tr class="{"top" if tok == chosen else ""}"><td class="tok">{_e(tok)}</td><td>{p:.4f}</td></tr>'
                   for tok, p in top)
    parts += ["<h3>④ Predict the next token</h3>",
              f'<div class="formula">{_e(equations.output_line(t, attends))}</div>',
              f'<p class="note">Chosen: “{_e(chosen)}”, p = {float(trace.probs[s, trace.output_ids[s]]):.4f}. '
              f"The {len(top)} most probable:</p>",
              f'<table><tr><th class="tok">token</th><th>p</th></tr>{rows}</table>']
    return f'<section class="step">{"".join(parts)}</section>'


def trace_page(trace: Trace, cell: str, input_text: str, output_text: str) -> str:
    """The whole file: a heading, the step bar, the heatmap and one section per step (only one shown)."""
    fig = attention_heatmap(trace, 0)
    fig.update_layout(width=None, autosize=True)
    shape = len(fig.layout.shapes) - 1 if trace.has_attention else -1
    heatmap = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id="heatmap",
                          config={"displaylogo": False, "responsive": True})
    steps = "".join(_step(trace, s, cell) for s in range(trace.steps))
    title = f"{trace.model_name}: {input_text}"
    body = (f"<h1>{_e(title)}</h1>"
            f'<p>Input: <b>{_e(input_text)}</b> · output: <b>{_e(output_text)}</b> · '
            f"score function: {_e(trace.attention)}. ← → (or the buttons) step through decoding.</p>"
            '<div class="bar"><button id="prev">← Prev</button><span id="where"></span>'
            '<button id="next">Next →</button></div>'
            f'<div class="grid"><div>{heatmap}</div><div>{steps}</div></div>')
    face = cjk_font_face_for(body + "".join(trace.source_tokens + trace.output_tokens))
    style = _STYLE % {"family": FONT_FAMILY}
    script = _SCRIPT % {"T": trace.steps, "shape": shape}
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{face}{style}</style><script>{get_plotlyjs()}</script></head>"
            f"<body>{body}<script>{script}</script></body></html>")
