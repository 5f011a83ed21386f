"""Is the attention the explanation? Figures read off an Explanation (explorer/faithfulness.py): α and the three
attributions as heatmaps on the same axes, the counterfactual α of one step with what it did to the output,
the agreement step by step, and Compare's faithfulness of several models.

Pure functions: records in, Plotly figures out. Rows are output steps, columns input positions (shown from 1).
Each attribution is drawn as its |score| normalised over the inputs (a row sums to 1, like α), so the panels
share one colour scale; the hover gives the signed score.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.app.figures.style import (ACCENT, ATTENTION_COLOUR, ATTENTION_SCALE, MASKED, SERIES, TRUTH, empty_figure,
                                        legend_below, set_layout, styled, token_labels)
from explorer.faithfulness import (COUNTERFACTUAL_NAMES, COUNTERFACTUALS, METHOD_NAMES, METHODS, NO_ATTENTION,
                                   Explanation)

METHOD_COLOURS = {"alpha": ATTENTION_COLOUR, "grad_x_input": "#6a3d9a", "integrated_gradients": "#17becf",
                  "erasure": "#8c564b"}
COUNTERFACTUAL_COLOURS = {"permuted": "#9467bd", "uniform": "#bcbd22", "adversarial": "#e377c2"}
PANEL_TITLES = {"alpha": "attention α", **{m: METHOD_NAMES[m].split(" (")[0] for m in METHODS}}
HOVER = ("output y<sub>%{customdata[0]}</sub> = %{y}<br>input x<sub>%{customdata[1]}</sub> = %{x}"
         "<br>share = %{z:.4f}<br>score = %{customdata[2]:.4g}<extra>%{meta}</extra>")
ROW_PX = 30
# The panels share the page's width (about 150 px each of four at 1024 px): their tick labels are angled past
# LABEL_CHARS characters (gaps counted) over all panels, and a panel title past its share of TITLE_CHARS breaks at
# a space; at 1024x768 in Chromium "1:▁How 2:▁are 3:▁you 4:?" (25 characters) overlapped flat, and "gradient ×
# input" ran into its neighbours of four panels.
LABEL_CHARS = 56
TITLE_CHARS = 48


def _panels(e: Explanation) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, shares (T, S), signed scores (T, S)) for α and each method the explanation has."""
    out = []
    if e.has_attention:
        out.append(("alpha", np.asarray(e.weights, dtype=float), np.asarray(e.weights, dtype=float)))
    for method in e.attributions.methods:
        out.append((method, e.attributions.importance(method), e.attributions.scores[method]))
    return out


def importance_heatmaps(e: Explanation, step: int | None = None, title: str | None = None,
                        panel_titles: Mapping[str, str] | None = None) -> go.Figure:
    """α and every attribution side by side, rows output steps and columns inputs, one colour scale (shares of
    each row); the current step outlined in red, the true alignment ringed in green, and the steps where
    integrated gradients did not converge (Captum's delta over 5% of the output's change) greyed over."""
    panels = _panels(e)
    if not e.steps or not e.source_tokens:
        return empty_figure("Nothing to explain: the decoding is empty.", title)
    x, y = token_labels(e.source_tokens), token_labels(e.output_tokens)
    T, S = len(y), len(x)
    names = {**PANEL_TITLES, **(panel_titles or {})}
    titles = [_wrapped(names[name], TITLE_CHARS // len(panels)) for name, _, _ in panels]
    fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, horizontal_spacing=0.02, subplot_titles=titles)
    tt, ii = np.meshgrid(np.arange(1, T + 1), np.arange(1, S + 1), indexing="ij")
    converged = e.attributions.ig_converged()
    for col, (name, shares, scores) in enumerate(panels, start=1):
        custom = np.stack([tt, ii, np.where(np.isfinite(scores), scores, np.nan)], axis=-1)
        fig.add_trace(go.Heatmap(z=np.where(np.isfinite(shares), shares, np.nan), x=x, y=y, zmin=0.0, zmax=1.0,
                                 colorscale=ATTENTION_SCALE, customdata=custom, hovertemplate=HOVER,
                                 meta=names[name], xgap=1, ygap=1, showscale=col == len(panels),
                                 colorbar={"title": {"text": "share"}, "thickness": 12}), row=1, col=col)
        axis = "" if col == 1 else str(col)
        if step is not None and 0 <= step < T:
            fig.add_shape(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=-0.5, x1=S - 0.5, y0=step - 0.5,
                          y1=step + 0.5, line={"color": ACCENT, "width": 3})
        if e.alignment is not None:
            at, ai = np.nonzero(e.alignment[:T])
            fig.add_trace(go.Scatter(x=[x[i] for i in ai], y=[y[t] for t in at], mode="markers",
                                     name="true alignment", showlegend=col == 1, hoverinfo="skip",
                                     marker={"symbol": "circle-open", "size": 12 if S <= 20 else 8, "color": TRUTH,
                                             "line": {"width": 2}}), row=1, col=col)
        if name == "integrated_gradients":
            for t in np.flatnonzero(~converged):
                fig.add_shape(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=-0.5, x1=S - 0.5, y0=t - 0.5,
                              y1=t + 0.5, line={"color": MASKED, "width": 1, "dash": "dot"},
                              fillcolor="rgba(127,127,127,0.18)")
    crowded = S > 12 or sum(len(label) + 1 for label in x) * len(panels) > LABEL_CHARS
    styled(fig, title, height=max(300, 120 + ROW_PX * T + (60 if crowded else 0)))
    fig.update_xaxes(type="category", side="bottom", tickangle=-60 if crowded else 0, showgrid=False, dtick=1)
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False, dtick=1)
    fig.update_yaxes(automargin=True, row=1, col=1)
    top = (70 if title else 40) + (20 if any("<br>" in t for t in titles) else 0)
    return set_layout(fig, margin={"t": top, "l": 10, "r": 10, "b": 60}, hovermode="closest",
                      legend={"orientation": "h", "yanchor": "top", "y": -0.12, "x": 0.0})


def _wrapped(title: str, width: int) -> str:
    """A panel title longer than `width` characters on two lines, broken at the space nearest its middle."""
    spaces = [i for i, ch in enumerate(title) if ch == " "]
    if len(title) <= width or not spaces:
        return title
    cut = min(spaces, key=lambda i: abs(i - len(title) / 2))
    return title[:cut] + "<br>" + title[cut + 1:]


def counterfactual_bars(e: Explanation, step: int, title: str | None = None) -> go.Figure:
    """At step t: the model's α_t and the three replacements as bars over the inputs, each panel titled with
    what decoding the step with it did (TVD of ŷ_t from the original, and the top token kept or changed)."""
    if e.counterfactuals is None:
        return empty_figure(NO_ATTENTION, title)
    c = e.counterfactuals
    vocab = e.target_vocab
    x = token_labels(e.source_tokens)
    kept = vocab[int(c.original_top[step])] if vocab else str(int(c.original_top[step]))
    titles = [f"model's α → {kept!r}"]
    for kind in COUNTERFACTUALS:
        top = vocab[int(c.top[kind][step])] if vocab else str(int(c.top[kind][step]))
        what = f"→ {top!r} (changed)" if c.flipped(kind)[step] else f"→ {top!r}"
        titles.append(f"{COUNTERFACTUAL_NAMES[kind]}: TVD {c.tvd[kind][step]:.2f} {what}")
    fig = make_subplots(rows=1, cols=4, shared_yaxes=True, horizontal_spacing=0.03, subplot_titles=titles)
    rows = [("alpha", np.asarray(e.weights[step], dtype=float))] + [(k, c.weights[k][step]) for k in COUNTERFACTUALS]
    for col, (kind, w) in enumerate(rows, start=1):
        colour = ATTENTION_COLOUR if kind == "alpha" else COUNTERFACTUAL_COLOURS[kind]
        flipped = kind != "alpha" and bool(c.flipped(kind)[step])
        fig.add_trace(go.Bar(x=x, y=w, marker={"color": colour, "line": {"color": ACCENT if flipped else colour,
                                                                        "width": 2 if flipped else 0}},
                             name=PANEL_TITLES["alpha"] if kind == "alpha" else COUNTERFACTUAL_NAMES[kind],
                             hovertemplate="x = %{x}<br>α = %{y:.4f}<extra></extra>", showlegend=False),
                      row=1, col=col)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1, title={"text": f"α{_sub(step + 1)},ᵢ"})
    angled = len(x) > 8 or sum(len(label) for label in x) > 24
    fig.update_xaxes(type="category", tickangle=-60 if angled else 0)
    fig.update_annotations(font={"size": 13})
    return styled(fig, title, height=380 if angled else 320)


def agreement_by_step(e: Explanation, title: str | None = None) -> go.Figure:
    """Kendall τ between α_t and each method's |scores| at every step (1: same ranking of the inputs, 0: none,
    −1: reversed); a filled marker where the method's top input is α's."""
    if not e.has_attention:
        return empty_figure(NO_ATTENTION, title)
    fig = go.Figure()
    steps = np.arange(1, e.steps + 1)
    labels = token_labels(e.output_tokens)
    for method in e.attributions.methods:
        ag = e.agreement(method)
        fig.add_trace(go.Scatter(
            x=steps, y=ag.kendall_tau, mode="lines+markers", name=METHOD_NAMES[method],
            line={"color": METHOD_COLOURS[method]}, customdata=np.stack([ag.top1, ag.jsd], axis=-1),
            text=labels, marker={"size": 10, "symbol": ["circle" if v == 1 else "circle-open" for v in ag.top1]},
            hovertemplate="step %{text}<br>Kendall τ = %{y:.3f}<br>JSD = %{customdata[1]:.3f}<extra>%{fullData.name}"
                          "</extra>"))
    fig.add_hline(y=0, line={"color": MASKED, "width": 1})
    set_layout(fig, yaxis={"title": {"text": "Kendall τ with α"}, "range": [-1.05, 1.05]},
               xaxis={"title": {"text": "step t (filled: same top input as α)"}, "dtick": 1})
    return legend_below(styled(fig, title, height=320))


def faithfulness_comparison(reports: Mapping[str, dict], title: str | None = None) -> go.Figure:
    """Compare's chart: per model, each method's mean top-1 agreement with α and mean Kendall τ, and how often
    the three counterfactual α changed the top token (summarise()'s reports by model name)."""
    if not reports:
        return empty_figure("No models to compare.", title)
    names = list(reports)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=["top-1 agreement with α", "Kendall τ with α", "top token changed"])
    for method in METHODS:
        for col, key in ((1, "top1_agreement"), (2, "kendall_tau")):
            values = [(reports[n]["methods"].get(method) or {}).get(key) for n in names]
            fig.add_trace(go.Bar(x=names, y=[np.nan if v is None else v for v in values], name=METHOD_NAMES[method],
                                 marker={"color": METHOD_COLOURS[method]}, showlegend=col == 1, legendgroup=method,
                                 hovertemplate="%{x}<br>%{y:.3f}<extra>" + METHOD_NAMES[method] + "</extra>"),
                          row=1, col=col)
    for kind in COUNTERFACTUALS:
        values = [reports[n]["counterfactual"].get(f"{kind}_flip_rate") for n in names]
        fig.add_trace(go.Bar(x=names, y=[np.nan if v is None else v for v in values], name=COUNTERFACTUAL_NAMES[kind],
                             marker={"color": COUNTERFACTUAL_COLOURS[kind]}, legendgroup=kind,
                             hovertemplate="%{x}<br>%{y:.1%} of steps<extra>" + COUNTERFACTUAL_NAMES[kind] + "</extra>"),
                      row=1, col=3)
    for name in names:
        if reports[name].get("attention") == "none":
            for col in (1, 2, 3):
                fig.add_annotation(x=name, y=0.05, text="no α", showarrow=False, row=1, col=col,
                                   font={"color": SERIES})
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(range=[-1.05, 1.05], row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", row=1, col=3)
    fig.update_annotations(font={"size": 14})
    return legend_below(styled(set_layout(fig, barmode="group"), title, height=380), room=70)


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(n: int) -> str:
    return str(n).translate(_SUBSCRIPTS)
