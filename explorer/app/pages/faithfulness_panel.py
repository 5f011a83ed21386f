"""Explore's "Is attention the explanation?" section: for the sentence on screen and its current step, α beside
three attributions (gradient × input, integrated gradients, erasure) on the same axes, how far they agree, and
what replacing α_t (permuted, uniform, adversarial) does to the output, in figures and in words.

A section that opens (drawn only while open; closed by default: explaining costs about a second). Open or closed
is in the URL (`explore_faith=true`), like the hidden states. The explanation is of the decoding without its
what-if (explorer/engine/attribution.py explains the model as trained), computed once per input and cached.
Session-state keys start with `explore_faith`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from explorer import faithfulness as F
from explorer.app.figures import faithfulness as fig_faith
from explorer.app.pages import common
from explorer.app.pages import explore_shared as shared
from explorer.app.pages.explore_state import K
from explorer.app.engine_link import engine_module

if TYPE_CHECKING:
    import pandas as pd

attribution = engine_module("explorer.engine.attribution")
views = engine_module("explorer.app.views")

KEY = K + "faith"
LARGE_CHANGE = 0.5  # a replacement α at least this far from α_t (JSD, base 2) is "a large change"
NOTHING = 0.05  # ... and an output that moved less than this (TVD) "changed nothing"
INTRO = ("Attention says where the model looked, not why it chose its output (Jain & Wallace 2019; Wiegreffe & "
         "Pinter 2019). Beside α, three attributions score each input for the chosen token yₜ with the same "
         "prefix: **gradient × input** and **integrated gradients** of yₜ's logit (Captum; from the mean token "
         "embedding at every input, in 32 steps) on the encoder's input embeddings, and **erasure**: the drop in "
         "log p(yₜ) when Explore's mask hides that input from attention at step t alone (the steps before as the "
         "model computed them). Each is drawn as its |score|'s share of the row, so "
         "all four panels read like α. Then α is **replaced** at each step (a random permutation of itself, the "
         "uniform α, and an adversarial α that stays within ε of the original output) and that step decoded "
         "again. docs/FAITHFULNESS.md has the details.")


def explanation_for(request: views.Request):
    """The explanation of the request's decoding without its what-if, once per (model version, request)."""
    original = request.original
    key = ("explain", common.model_key(request.model), original)
    e = common.cached(key, lambda: attribution.explain(common.get_model(request.model), request.text,
                                                       shared.trace_for(original)))
    st.session_state[KEY + "_last"] = (key, e)  # what the downloads may carry
    return e


def shown_explanation(request: views.Request) -> F.Explanation | None:
    """The explanation this section last showed, if it is of this request's decoding without its what-if."""
    last = st.session_state.get(KEY + "_last")
    key = ("explain", common.model_key(request.model), request.original)
    return last[1] if last is not None and last[0] == key else None


def render(request: views.Request, step: int) -> None:
    """The section: an expander bound to the URL, its content drawn only while open."""
    section = st.expander("Is attention the explanation? α beside attributions, and counterfactual α",
                          icon=":material/balance:", key=KEY, on_change="rerun", bind="query-params")
    if section.open is False or (section.open is None and not st.session_state.get(KEY)):
        return  # AppTest tracks no open state: there the session state (or the URL) opens it
    with section:
        _draw(request, step)


def _draw(request: views.Request, step: int) -> None:
    st.markdown(INTRO)
    with st.spinner("Explaining every step (gradients, integrated gradients, erasure, counterfactual α)…"):
        e = explanation_for(request)
    step = min(max(step, 0), e.steps - 1)
    if not request.intervention.is_identity:
        st.caption("This section explains the decoding without the what-if (the left side of the comparison "
                   "below).")
    if not e.has_attention:
        st.info(F.NO_ATTENTION, icon=":material/info:")
    t = step + 1
    token = shared.tok(e.output_tokens[step])
    title = f"α and attributions: rows are steps, columns inputs (red: step {t})"
    shared.chart(lambda: fig_faith.importance_heatmaps(e, step, title=title), "faithfulness-heatmaps", KEY + "_fig_maps",
                 cache=(request, ("faith", step)))
    converged = e.attributions.ig_converged()
    notes = [f"Step {t} chose **{token}**."]
    if not converged.all():
        notes.append(f"Integrated gradients converged at {int(converged.sum())} of {e.steps} steps: at the grey "
                     "rows Captum's convergence delta is over 5% of the change in yₜ's logit: the straight path "
                     "from the mean embedding crossed a point where the model's output jumps, and 32 steps do not "
                     "add up to it.")
    st.caption(" ".join(notes))
    if e.has_attention:
        st.dataframe(agreement_frame(e, step), hide_index=True, width="stretch", key=KEY + "_table",
                     column_config={c: st.column_config.NumberColumn(format="%.3f") for c in
                                    ("τ at this step", "JSD at this step", "mean τ", "mean JSD")} |
                     {"top-1 over the sentence": st.column_config.NumberColumn(format="%.0f%%")})
        st.caption("Top-1: the method's largest |score| is on α's largest input. Kendall τ: how alike the two "
                   "rankings of the inputs are (1 the same, −1 reversed). JSD: Jensen–Shannon distance between α and "
                   "the normalised |scores| (0 equal, 1 nothing in common).")
        _counterfactuals(request, e, step)
        shared.chart(lambda: fig_faith.agreement_by_step(e, title="Agreement with α, step by step"),
                     "faithfulness-agreement", KEY + "_fig_steps", cache=(request, ("faith", None)))
    st.caption(f"Explained in {e.seconds:.2f} s (once per input, then cached).")


def agreement_frame(e: F.Explanation, step: int) -> pd.DataFrame:
    """One row per method: agreement with α at this step and over the sentence."""
    rows = []
    for method in e.attributions.methods:
        ag = e.agreement(method)
        means = ag.means()
        top = ag.top1[step]
        rows.append({"method": F.METHOD_NAMES[method],
                     "same top input at this step": "–" if np.isnan(top) else ("yes" if top else "no"),
                     "τ at this step": ag.kendall_tau[step], "JSD at this step": ag.jsd[step],
                     "top-1 over the sentence": None if means["top1_agreement"] is None
                     else 100 * means["top1_agreement"],
                     "mean τ": means["kendall_tau"], "mean JSD": means["jsd"]})
    import pandas as pd  # here: a first view draws no table (pandas: 0.3 s of a cold start)

    return pd.DataFrame(rows)


def _counterfactuals(request: views.Request, e: F.Explanation, step: int) -> None:
    c = e.counterfactuals
    t = step + 1
    st.markdown(f"**Counterfactual attention at step {t}**: α{_sub(t)} replaced, the same prefix, this one step "
                f"decoded again (the adversarial α keeps the output within total variation ε = {c.epsilon:g}).")
    shared.chart(lambda: fig_faith.counterfactual_bars(e, step), "faithfulness-counterfactual", KEY + "_fig_cf",
                 cache=(request, ("faith-cf", step)))
    for line in counterfactual_words(e, step):
        st.markdown(line)


def large_change_kept(e: F.Explanation, step: int) -> bool:
    """Whether some replacement far from α_t (JSD >= LARGE_CHANGE) left ŷ_t nearly as it was (TVD < NOTHING)
    with the same top token: a large change in α that changed nothing."""
    return bool(_unmoved(e, step))


def _unmoved(e: F.Explanation, step: int) -> list[str]:
    c = e.counterfactuals
    if c is None:
        return []
    return [kind for kind in F.COUNTERFACTUALS
            if c.jsd[kind][step] >= LARGE_CHANGE and c.tvd[kind][step] < NOTHING and not c.flipped(kind)[step]]


def counterfactual_words(e: F.Explanation, step: int) -> list[str]:
    """What the replacements did, in words: where a large change in α changed nothing, it says so."""
    c = e.counterfactuals
    if c is None:
        return [F.NO_ATTENTION]
    t = step + 1
    out = []
    unmoved = _unmoved(e, step)
    if unmoved:
        names = ", ".join(f"{F.COUNTERFACTUAL_NAMES[k]} (JSD {c.jsd[k][step]:.2f} from α)" for k in unmoved)
        out.append(f"**A large change in α changed nothing here.** At step {t}, {names} left the output "
                   f"distribution within TVD {max(c.tvd[k][step] for k in unmoved):.2f} and the same top token: "
                   "this α is not the only one that explains the choice.")
    moved = [kind for kind in F.COUNTERFACTUALS if c.flipped(kind)[step]]
    if moved:
        vocab = e.target_vocab
        out.append(f"At step {t} the top token changed with " + ", ".join(
            f"{F.COUNTERFACTUAL_NAMES[k]} (to **{vocab[int(c.top[k][step])]}**)" for k in moved) +
            ": here the model's output does depend on where it attends.")
    if not unmoved and not moved:
        out.append(f"At step {t} no replacement changed the top token, and none was both far from α (JSD ≥ "
                   f"{LARGE_CHANGE:g}) and nearly harmless to the output (TVD < {NOTHING:g}).")
    flips = {kind: int(c.flipped(kind).sum()) for kind in F.COUNTERFACTUALS}
    out.append(f"Over the sentence ({e.steps} steps): the top token changed at {flips['permuted']} with α permuted, "
               f"{flips['uniform']} with the uniform α and {flips['adversarial']} with the adversarial α, which went "
               f"{np.mean(c.jsd['adversarial']):.2f} from α on average (JSD) while keeping every output within "
               f"ε = {c.epsilon:g}.")
    return out


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(n: int) -> str:
    return str(n).translate(_SUBSCRIPTS)
