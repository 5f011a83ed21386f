"""Compare's faithfulness section: is the attention the explanation, for the `reverse` twins that differ only in
the score function (dot, scaled dot, additive) and for attention against none? Over N fresh inputs: each
attribution's mean top-1 agreement and Kendall τ with α, how often the counterfactual α changed the top token,
and how often each method's top input is the true one.

The shipped twins' figures for the stored sample count come from pretrained/faithfulness.json (written by
`benchmarks/faithfulness.py --store` for exactly those checkpoint files); another count is computed on request,
once per server. Session keys start with `compare_faith_`.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer import faithfulness as F
from explorer.app.figures.faithfulness import faithfulness_comparison
from explorer.app.figures.style import plotly_config
from explorer.app.pages import common, score_twins
from explorer.app.engine_link import engine_module

explanations = engine_module("explorer.training.explanations")
checkpoints = engine_module("explorer.checkpoints.checkpoint")

K = "compare_faith_"
SAMPLE_CHOICES = (20, 50, 100, 200)


@st.cache_resource(show_spinner=False, max_entries=32)
def _shipped_report(name: str, samples: int, seed: int) -> dict:
    """A shipped model's report: the stored one when it matches its file, else computed (once per server)."""
    stored = explanations.stored_report(checkpoints.resolve(name), samples, seed)
    if stored is not None:
        return stored
    return explanations.faithfulness_report(common.shipped_model(name), samples, seed)


def _stored(name: str, samples: int, seed: int) -> dict | None:
    return explanations.stored_report(checkpoints.resolve(name), samples, seed)


def section() -> None:
    st.header("Is attention the explanation? The twins compared")
    names = score_twins.twin_names()
    if len(names) < 2:
        st.info("This needs the reverse twins trained with different score functions (pretrained/README.md).")
        return
    st.markdown(
        "Explore's section *Is attention the explanation?* for one sentence; here the same figures over many fresh "
        "inputs, for the twins that differ only in the score function, and for attention against none: how often "
        "each attribution's top input is α's (top-1), how alike their rankings are (Kendall τ), and how often "
        "replacing α changed the model's top token (flip rate). A model without attention has attributions and no α.")
    st.session_state.setdefault(K + "samples", explanations.STORED_SAMPLES)
    samples = st.select_slider("Fresh inputs per model", SAMPLE_CHOICES, key=K + "samples")
    seed = explanations.STORED_SEED
    reports = {n: r for n in names if (r := _stored(n, samples, seed)) is not None}
    missing = [n for n in names if n not in reports]
    if missing:
        st.caption(f"Not stored for {samples} inputs: {', '.join(missing)} (about a second per input and model "
                   "on one core).")
        if st.button(f"Compute over {samples} fresh inputs", key=K + "compute", icon=":material/play_arrow:"):
            st.session_state[K + "asked"] = samples
        if st.session_state.get(K + "asked") == samples:
            with st.spinner(f"Explaining {samples} inputs with {len(missing)} models…"):
                for name in missing:
                    reports[name] = _shipped_report(name, samples, seed)
    if not reports:
        return
    shown = [n for n in names if n in reports]
    frame = comparison_frame({n: reports[n] for n in shown})
    st.dataframe(measures_by_model(frame), hide_index=True, width="stretch", key=K + "table")
    common.chart(st, faithfulness_comparison({n: reports[n] for n in shown}), key=K + "fig",
                 config=plotly_config("faithfulness-twins"))
    first = reports[shown[0]]
    st.caption(f"{samples} fresh inputs per model (seed {seed}), {first['steps']:,} steps for {shown[0]}. "
               "Top-1 and τ compare α with each method's |scores|; the adversarial α keeps every output within "
               f"total variation ε = {first['counterfactual'].get('epsilon', F.EPSILON):g}, so its flips are rare "
               "by design: its distance from α (JSD) is the figure to read.")


def comparison_frame(reports: dict[str, dict]) -> pd.DataFrame:
    """One row per model: agreement per method, flip rates, the adversarial α's distance, IG's convergence and
    (toy tasks) how often α and each method find the true input; percentages as 0–100."""
    rows = []
    short = {"grad_x_input": "grad×input", "integrated_gradients": "IG", "erasure": "erasure"}
    for name, r in reports.items():
        row: dict = {"model": name, "attention": r["attention"]}
        for method in F.METHODS:
            m = r["methods"].get(method) or {}
            row[f"top-1 {short[method]}"] = _pct(m.get("top1_agreement"))
        for method in F.METHODS:
            m = r["methods"].get(method) or {}
            row[f"τ {short[method]}"] = m.get("kendall_tau")
        for kind in F.COUNTERFACTUALS:
            row[f"flips {kind}"] = _pct(r["counterfactual"].get(f"{kind}_flip_rate"))
        row["adversarial JSD"] = r["counterfactual"].get("adversarial_jsd")
        row["IG converged"] = _pct(r["integrated_gradients"].get("converged_share"))
        truth = r.get("truth") or {}
        row["true input: α"] = _pct(truth.get("alpha"))
        row["true input: IG"] = _pct(truth.get("integrated_gradients"))
        rows.append(row)
    return pd.DataFrame(rows)


def measures_by_model(frame: pd.DataFrame) -> pd.DataFrame:
    """The comparison turned on its side, one row per measure and one column per model, as text: fourteen
    measures side by side hid columns at 1400 px, while models are few."""
    rows = []
    for column in frame.columns[2:]:
        row = {"measure": column}
        for _, r in frame.iterrows():
            row[r["model"]] = _shown(column, r[column])
        rows.append(row)
    attention = {"measure": "attention", **{r["model"]: r["attention"] for _, r in frame.iterrows()}}
    return pd.DataFrame([attention, *rows])


def _shown(column: str, value: float | None) -> str:
    if value is None or pd.isna(value):
        return "–"
    return f"{value:.2f}" if column.startswith(("τ", "adversarial JSD")) else f"{value:.0f}%"


def _pct(x: float | None) -> float | None:
    return None if x is None else 100 * x
