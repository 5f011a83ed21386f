"""Compare's score-function section: the `reverse` twins (dot, scaled dot, additive, none) side by side on
one input: accuracy by length, how sharp their attention is (mean peak weight, score spread) and their
heatmaps. The input lives in the URL (`twins=...`). Session keys start with `compare_twins_`.

UI only: numbers from explorer.engine.score_functions (one batched decode per model, once per server for shipped
models), curves from `common.accuracy_curve`, traces from `common.cached_trace`.
"""

from __future__ import annotations

import streamlit as st

from explorer.errors import ExplorerError
from explorer.app.figures.attention import attention_heatmap
from explorer.app.figures.style import plotly_config
from explorer.app.pages import addresses, common
from explorer.app.engine_link import engine_module

sf = engine_module("explorer.engine.score_functions")

K = "compare_twins_"
DEFAULT_INPUT = "73625184092736"  # 14 digits: every twin with attention gets it right, the plain one does not


def twin_names() -> list[str]:
    """The shipped models that differ only in the score function, in score-function order."""
    bundles = []
    for name in common.shipped_model_names():
        try:
            bundles.append(common.get_model(name))
        except ExplorerError:
            continue
    return [b.name for b in sf.twins(bundles)]


@st.cache_resource(show_spinner=False, max_entries=8)
def _shipped_sharpness(names: tuple[str, ...]) -> list[sf.Sharpness]:
    sources = sf.sample_inputs(common.shipped_model(names[0]))
    return [sf.sharpness(common.shipped_model(n), sources) for n in names]


def sharpness(names: tuple[str, ...]) -> list[sf.Sharpness]:
    """Every twin's sharpness on the same fresh inputs (computed once per server)."""
    return _shipped_sharpness(names)


def _input() -> str:
    incoming = st.query_params.get("twins")
    if incoming is not None and incoming != st.session_state.get(K + "synced"):
        st.session_state[K + "input"] = incoming
    st.session_state.setdefault(K + "input", DEFAULT_INPUT)
    return st.session_state[K + "input"]


def section() -> None:
    st.header("Score functions side by side")
    names = twin_names()
    if len(names) < 2:
        st.info("This needs the reverse twins trained with different score functions (pretrained/README.md).")
        return
    st.markdown("The same model trained once per score function, changing only how a query is scored against a key: "
                + ", ".join(f"`{n}` ({sf.LABELS[common.get_model(n).cfg.attention]})" for n in names) + ".")
    _input()
    source = st.text_input("Input (the same for every twin)", key=K + "input")
    addresses.write_query({"twins": source}, K + "url_sent")
    st.session_state[K + "synced"] = source
    stats = sharpness(tuple(names))
    # Six columns fit a 1024-pixel projector; accuracy by length is the curve at the top of the page.
    rows = [{"model": stat.model, "score function": stat.attention, "exact match (sample)": stat.exact_match,
             "mean peak weight": stat.mean_peak, "spread of e": stat.score_spread, "spread of q·k": stat.dot_spread}
            for stat in stats]
    import pandas as pd  # here: a first view draws no table (pandas: 0.3 s of a cold start)

    frame = pd.DataFrame(rows)
    st.dataframe(frame, hide_index=True, width="stretch", key=K + "table",
                 column_config={c: st.column_config.NumberColumn(format="%.3f") for c in frame.columns[2:]})
    first = stats[0]
    st.caption(f"Sharpness over the same {sf.SAMPLES} fresh inputs (seed {sf.SEED}, lengths "
               f"{common.get_model(names[0]).task.min_len}–{common.get_model(names[0]).task.max_len}, "
               f"{first.steps:,} output steps): the mean of maxᵢ αₜᵢ (1 = all weight on one input) and the "
               "mean standard deviation of the scores eₜᵢ over the input at a step. Exact match by length: "
               "the curves at the top of the page (200 fresh inputs per length).")
    # Two to a row (2×2 for the four twins): four heatmaps in one row were ~10 px wide at 1024 px.
    for first_of_row in range(0, len(names), 2):
        row = names[first_of_row:first_of_row + 2]
        for col, name in zip(st.columns(2, gap="large"), row):
            with col:
                _twin(name, source)


def _twin(name: str, source: str) -> None:
    bundle = common.get_model(name)
    st.markdown(f"**{name}** · {sf.LABELS[bundle.cfg.attention]}")
    try:
        tr = common.cached_trace(name, source)
    except ExplorerError as exc:
        common.show_problem(exc)
        return
    out = bundle.detokenize_target([t for t in tr.output_tokens if t != "<eos>"])
    truth = bundle.ground_truth(tr.source_tokens)
    verdict = "" if truth is None else (" ✓" if list(truth.target) == [t for t in tr.output_tokens
                                                                       if t != "<eos>"] else " ✗")
    st.markdown(f"`{out or '∅'}`{verdict}")
    if not tr.has_attention:
        st.info(f"No attention: one context vector s₀ ({tr.initial_state.size} numbers) for the whole input.")
        return
    st.caption(f"mean peak weight on this input: {sf.mean_peak(tr.weights):.3f}")
    common.chart(st, attention_heatmap(tr, height=420), key=f"{K}heat_{name}", config=plotly_config(f"attention_{name}"))


def scaling_note(t: dict) -> None:
    """The Learn tour's paragraph on what scaling changes, filled with the shipped twins' measured numbers
    (nothing when no dot / scaled-dot pair is shipped)."""
    names = twin_names()
    stats = {s.attention: s for s in sharpness(tuple(names))} if len(names) > 1 else {}
    dot, scaled = stats.get("dot"), stats.get("scaled_dot")
    if dot is None or scaled is None:
        return
    text = t["s6_scaling"].format(D=scaled.attn_dim, sqrtD=scaled.attn_dim ** 0.5, dot=dot.model, scaled=scaled.model,
                                  dot_spread=dot.score_spread, dot_peak=dot.mean_peak,
                                  scaled_spread=scaled.score_spread, scaled_raw=scaled.dot_spread,
                                  scaled_peak=scaled.mean_peak, dot_exact=dot.exact_match,
                                  scaled_exact=scaled.exact_match)
    for kind in ("additive", "none"):
        other = stats.get(kind)
        if other is not None:
            peak = "–" if other.mean_peak is None else f"{other.mean_peak:.3f}"
            text += t["s6_scaling_more"].format(name=other.model, kind=kind, peak=peak, exact=other.exact_match)
    st.markdown(text)
    st.caption(t["s6_scaling_where"].format(n=sf.SAMPLES))
