"""The Compare page: the bottleneck made visible (accuracy against input length), and any two models
of the session side by side on the same input.

UI only: curves come from `comparison.length_curve` through `common.accuracy_curve` (computed once
per server for shipped models), traces from `common.cached_trace`. Session keys start with `compare_`.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from explorer.errors import ExplorerError
from explorer.limits import LIMITS
from explorer.app.figures.attention import attention_heatmap
from explorer.app.figures.compare import (METRIC_LABELS, accuracy_by_length_figure, bleu_by_length_figure,
                                     parameter_figure)
from explorer.app.figures.style import plotly_config
from explorer.app.pages import addresses, common, faithfulness_compare, landing, presenter, score_twins
from explorer.app.engine_link import engine_module

comparison = engine_module("explorer.training.comparison")
views = engine_module("explorer.app.views")

DEFAULT_INPUT = "3141592653589793238462643"  # 25 digits: inside reverse's training range, hard without attention


def _default_pair(names: list[str]) -> tuple[str, str]:
    """reverse vs reverse-none when shipped; else the first attention model against the first plain one."""
    if "reverse" in names and "reverse-none" in names:
        return "reverse", "reverse-none"
    attends = [n for n in names if (b := common.model_or_none(n)) is not None and b.cfg.attention != "none"]
    plain = [n for n in names if (b := common.model_or_none(n)) is not None and b.cfg.attention == "none"]
    a = attends[0] if attends else names[0]
    b = plain[0] if plain else (names[1] if len(names) > 1 else names[0])
    return a, b


def _default_curve_models(eligible: list[str]) -> list[str]:
    """The shipped twins: every model trained on the same task as `reverse` (or the default pair)."""
    anchor = "reverse" if "reverse" in eligible else (eligible[0] if eligible else None)
    if anchor is None:
        return []
    task = common.get_model(anchor).task
    shipped = set(common.shipped_model_names())
    twins = [n for n in eligible if n in shipped and common.get_model(n).task == task]
    return twins or [anchor]


def curve_section(names: list[str]) -> None:
    st.header("The bottleneck: accuracy against input length")
    st.markdown(
        "A plain encoder–decoder must squeeze the whole input into one context vector; with attention the "
        "decoder looks back at every encoder state. Same sizes, same training data (the grey band), scored "
        f"on {comparison.CURVE_SAMPLES} fresh inputs at each length {comparison.CURVE_LENGTHS[0]}–"
        f"{comparison.CURVE_LENGTHS[-1]}, including lengths never seen in training.")
    eligible = [n for n in names if (b := common.model_or_none(n)) is not None and comparison.has_curve(b)]
    if not eligible:
        st.info("No copy, reverse or sort model is available: ship checkpoints in pretrained/ or train one on "
                "the Train page.")
        return
    if "compare_curve_models" not in st.session_state:
        st.session_state["compare_curve_models"] = _default_curve_models(eligible)
    else:  # a session model may have gone away
        st.session_state["compare_curve_models"] = [n for n in st.session_state["compare_curve_models"]
                                                    if n in eligible]
    left, right = st.container(), st.container()  # the twins' names fill a 1024-pixel row on their own
    chosen = left.multiselect("Models", eligible, key="compare_curve_models",
                              format_func=lambda n: f"{n} ({common.get_model(n).cfg.attention})")
    metric = right.radio("Score", list(METRIC_LABELS), key="compare_metric", horizontal=True,
                         format_func=METRIC_LABELS.get)
    if not chosen:
        st.info("Pick at least one model.")
        return
    curves, cold = [], 0.0
    for name in chosen:
        started = time.perf_counter()
        with st.spinner(f"Scoring {name} at every length (once; shared afterwards)…"):
            try:
                curves.append(common.accuracy_curve(name))
            except ExplorerError as exc:
                common.show_problem(exc)
                continue
        cold += time.perf_counter() - started
    if not curves:
        return
    common.chart(st, accuracy_by_length_figure(curves, metric), key="compare_fig_curve", config=plotly_config("curve"))
    computed = sum(c.seconds for c in curves)
    st.caption(f"Computed once in {computed:.1f} s (this view: {cold:.2f} s). Each point is "
               f"`{comparison.eval_command(curves[0].model, 20)}` with its length in place of 20 "
               f"and the seed {comparison.CURVE_SEED} + length.")
    with st.expander("The numbers"):
        table = pd.DataFrame({"length": list(curves[0].lengths)})
        for c in curves:
            for key in ("exact_match", "token_accuracy", "alignment_accuracy"):
                table[f"{c.model} {key}"] = [None if (r := c.at(n)) is None else r[key] for n in table["length"]]
        st.dataframe(table, hide_index=True, key="compare_curve_table")


def sentence_section() -> None:
    """The same bottleneck on real sentences: BLEU by source length of the shipped translation twins."""
    st.header("The bottleneck on real sentences: BLEU against sentence length")
    curves = common.shipped_bleu_curves()
    if not curves:
        st.info("No stored BLEU curve for the shipped translation models (pretrained/"
                f"{comparison.BLEU_FILE} is missing or was computed from other checkpoint files).")
        return
    st.markdown(
        "Bahdanau, Cho and Bengio (2015, figure 2) showed that an encoder–decoder without attention loses BLEU "
        "as sentences grow while one with attention holds up. The same experiment with the shipped English→French "
        "twins (same sizes, same data, same training budget): greedy translations of held-out sentences, "
        "grouped by the English sentence's length in words.")
    metric = st.radio("Score", ["bleu", "chrf"], key="compare_bleu_metric", horizontal=True,
                      format_func={"bleu": "BLEU", "chrf": "chrF"}.get)
    common.chart(st, bleu_by_length_figure(curves, metric), key="compare_fig_bleu", config=plotly_config("bleu"))
    table = pd.DataFrame([{"model": c.model, "score function": c.attention,
                           "source words": f"{r['lo']}–{r['hi']}" if r["hi"] < 1000 else f"{r['lo']}+",
                           "sentences": r["n"], "BLEU": r["bleu"], "chrF": r["chrf"]} for c in curves for r in c.rows])
    with st.expander("The numbers"):
        st.dataframe(table, hide_index=True, key="compare_bleu_table")
        st.caption(f"Scored on {curves[0].data} with sacrebleu's defaults ({curves[0].bleu_signature}); "
                   "computed by `python scripts/report_pretrained.py --bleu-curves`.")


def _set_random_input() -> None:
    bundle = common.model_or_none(st.session_state.get("compare_model_a", ""))
    if bundle is None:
        return
    seed = st.session_state.get("compare_random_seed", 0) + 1
    st.session_state["compare_random_seed"] = seed
    try:
        st.session_state["compare_input"] = comparison.random_input(bundle, int(st.session_state["compare_length"]),
                                                                    seed)
    except ExplorerError as exc:
        st.session_state["compare_random_error"] = str(exc)


def _colored_output(bundle, tr) -> str:
    """The output tokens, green where they match the truth and red where not (markdown)."""
    truth = bundle.ground_truth(tr.source_tokens)
    out = [tok for tok in tr.output_tokens if tok != "<eos>"]
    if truth is None:
        return "`" + bundle.detokenize_target(out) + "`"
    target = list(truth.target)
    parts = []
    for i, tok in enumerate(out):
        shown = "␣" if tok == " " else tok
        color = "green" if i < len(target) and target[i] == tok else "red"
        parts.append(f":{color}[**{shown}**]")
    if len(out) < len(target):
        parts.append(f":red[… {len(target) - len(out)} missing]")
    return " ".join(parts) if parts else ":red[(empty)]"


def _accuracy(name: str, bundle, length: int) -> tuple[str, str, str]:
    """(label, value, detail) of the model's accuracy: at this input length if it has a curve."""
    if comparison.has_curve(bundle) and length in comparison.CURVE_LENGTHS:
        row = common.accuracy_curve(name).at(length)
        if row is not None:
            return (f"Exact match at length {length}", f"{100 * row['exact_match']:.1f}%",
                    f"{row['n']} fresh inputs of length {length}")
    validation = (bundle.metrics or {}).get("validation") or {}
    if "exact_match" in validation:
        return "Exact match (validation)", f"{100 * validation['exact_match']:.1f}%", "from its training record"
    return "Exact match", "—", "not measured"


def _model_column(name: str, source: str, side: str) -> dict | None:
    """One side of the comparison; returns the model's parameter breakdown for the shared chart."""
    bundle = common.model_or_none(name)
    if bundle is None:
        st.error(f"No model named {name!r}.")
        return None
    info = comparison.describe_model(bundle)
    st.subheader(name)
    st.caption(f"{info['task']} · {info['cell']} {info['hidden']}{' bidirectional' if info['bidirectional'] else ''}"
               f" · attention {info['attention']}"
               + (f" · trained on lengths {info['trained lengths']}" if info["trained lengths"] else ""))
    try:
        tr = common.cached_trace(name, source)
    except ExplorerError as exc:
        common.show_problem(exc)
        return comparison.parameter_breakdown(bundle)
    label, value, detail = _accuracy(name, bundle, len(tr.source_tokens))
    a, b = st.columns(2)
    a.metric("Parameters", f"{info['parameters']:,}")
    b.metric(label, value, help=detail)
    verdict = ""
    truth = bundle.ground_truth(tr.source_tokens)
    if truth is not None:
        right = [tok for tok in tr.output_tokens if tok != "<eos>"] == list(truth.target)
        verdict = " — :green[**✓ correct**]" if right else " — :red[**✗ wrong**]"
    st.markdown("**Output:** " + _colored_output(bundle, tr) + verdict)
    if tr.has_attention:
        score = tr.alignment_accuracy()
        if score is not None:
            st.caption(f"Attention on the true position at {100 * score:.0f}% of the steps.")
        common.chart(st, attention_heatmap(tr), key=f"compare_fig_attention_{side}",
                        config=plotly_config(f"attention_{name}"))
    else:
        st.info(f"No attention: the decoder saw only the context vector s₀ ({tr.initial_state.size} numbers) "
                f"for all {len(tr.source_tokens)} input symbols.")
    common.explore_link("Open in Explore", name, source, 1)
    return comparison.parameter_breakdown(bundle)


URL_KEYS = {"a": "compare_model_a", "b": "compare_model_b", "input": "compare_input"}


def _apply_url(names: list[str]) -> None:
    """Models and input from the address (`?a=eng-fra&b=eng-fra-none&input=...`) on the session's first run."""
    if st.session_state.get("compare_url_applied"):
        return
    st.session_state["compare_url_applied"] = True
    for param, key in URL_KEYS.items():
        value = st.query_params.get(param)
        if value is None:
            continue
        if key != "compare_input" and value not in names:
            st.session_state["compare_url_problem"] = f"the link names a model {value!r} that is not available here"
            continue
        st.session_state[key] = value


def _sync_url() -> None:
    """The side-by-side view in the address, so a bookmark reopens it."""
    want = {param: st.session_state[key] for param, key in URL_KEYS.items() if st.session_state.get(key) is not None}
    addresses.write_query(want, "compare_url_sent")


def _on_model_a() -> None:
    """A new model A keeps the input only if it reads it (the same kind of input), else takes its first example."""
    bundle = common.model_or_none(st.session_state.get("compare_model_a", ""))
    previous = common.model_or_none(st.session_state.get("compare_model_a_shown", ""))
    if bundle is None:
        return
    offered = views.example_inputs(bundle, article=common.is_shipped(st.session_state.get("compare_model_a", "")))
    if offered and not views.keeps_input(previous, bundle, st.session_state.get("compare_input") or ""):
        st.session_state["compare_input"] = offered[0]


def _partner(name_a: str, partners: list[str]) -> str:
    """Model B when model A changes kind: one on the same task or languages first, then any other."""
    first = common.model_or_none(name_a)
    others = [n for n in partners if n != name_a]
    same = [n for n in others if first is not None and (b := common.model_or_none(n)) is not None
            and (b.task, b.languages) == (first.task, first.languages)]
    return (same or others or [name_a])[0]


def _partners(name_a: str, names: list[str]) -> list[str]:
    """The models model B may be: those of model A's kind (a toy model fed a sentence, or a translation model
    fed digits, showed only byte pieces)."""
    first = common.model_or_none(name_a)
    if first is None:
        return names
    return [n for n in names if (b := common.model_or_none(n)) is not None and b.kind == first.kind]


def side_by_side_section(names: list[str]) -> None:
    with st.container(key="compare_side_by_side"):
        _side_by_side(names)


def _side_by_side(names: list[str]) -> None:
    st.header("Side by side")
    _apply_url(names)
    # Each message in a container drawn on every run, shown or not: an element that comes and goes moves everything
    # after it, and a moved element is drawn anew (its charts from scratch).
    with st.container():
        if "compare_url_problem" in st.session_state:
            st.warning(st.session_state.pop("compare_url_problem"), icon=":material/link_off:")
    default_a, default_b = _default_pair(names)
    for key, default in (("compare_model_a", default_a), ("compare_model_b", default_b)):
        if st.session_state.get(key) not in names:
            st.session_state[key] = default
    a, b = st.columns(2)
    name_a = a.selectbox("Model A", names, key="compare_model_a", on_change=_on_model_a)
    partners = _partners(name_a, names)
    notice = st.container()
    if st.session_state.get("compare_model_b") not in partners:
        wanted = st.session_state.get("compare_model_b")
        st.session_state["compare_model_b"] = default_b if default_b in partners else _partner(name_a, partners)
        if wanted is not None and wanted != st.session_state["compare_model_b"]:
            notice.caption(f"Model B is now {st.session_state['compare_model_b']}: {wanted} reads another kind of "
                           f"input than {name_a}.")
    name_b = b.selectbox("Model B", partners, key="compare_model_b",
                         help="models that read the same kind of input as model A: a toy model its task's symbols, "
                              "a translation model sentences")
    st.session_state["compare_model_a_shown"] = name_a
    if "compare_input" not in st.session_state:
        bundle = common.model_or_none(name_a)
        ok = bundle is not None and bundle.task is not None and bundle.task.name != "dates" \
            and all(c in bundle.task.alphabet for c in DEFAULT_INPUT)
        st.session_state["compare_input"] = DEFAULT_INPUT if ok or bundle is None or bundle.task_obj is None \
            else bundle.task_obj.examples()[0]
    left, mid, right = st.columns([4, 1, 1], vertical_alignment="bottom")
    source = left.text_input("Input (the same for both)", key="compare_input")
    mid.number_input("Length", 1, 64, 25, key="compare_length")
    right.button("Random input", key="compare_random", on_click=_set_random_input)
    _sync_url()
    with st.container():
        if "compare_random_error" in st.session_state:
            st.error(st.session_state.pop("compare_random_error"), icon=":material/warning:")
    col_a, col_b = st.columns(2)
    breakdowns = {}
    with col_a:
        part = _model_column(name_a, source, "a")
        if part:
            breakdowns[name_a] = part
    with col_b:
        part = _model_column(name_b, source, "b")
        if part:
            breakdowns[f"{name_b} " if name_b in breakdowns else name_b] = part
    if breakdowns:
        common.chart(st, parameter_figure(breakdowns, "Parameters by part"), key="compare_fig_parameters",
                        config=plotly_config("parameters"))
        frame = pd.DataFrame(breakdowns).T[["encoder", "decoder", "attention", "output", "total"]]
        st.dataframe(frame, key="compare_parameter_table")
    translation_scores_section(name_a, name_b)


def render() -> None:
    arrived = "side-by-side" if any(param in st.query_params for param in URL_KEYS) else None
    st.title("Compare")
    names = common.model_names()
    if not names:
        st.info("No model yet: ship checkpoints in pretrained/ or train one on the Train page.")
        return
    curve_section(names)
    st.divider()
    sentence_section()
    st.divider()
    side_by_side_section(names)
    st.divider()
    score_twins.section()
    st.divider()
    faithfulness_compare.section()
    landing.once("compare", arrived)
    presenter.qr_code()


# --- BLEU and chrF of two translation models ------------------------------------------------------

OWN_PAIRS = "the held-out pairs kept in {}'s checkpoint"
MAX_SCORED = 1000  # pairs scored at most (greedy decoding of 1,000 short sentences: seconds on one core)


def _score_pairs(choice: str, bundles: dict) -> list[tuple[str, str]]:
    """The pairs both models are scored on: one model's kept held-out pairs, or an uploaded TSV file."""
    for name, bundle in bundles.items():
        if choice == OWN_PAIRS.format(name):
            return list(bundle.examples)
    upload = st.session_state.get("compare_tsv")
    if upload is None:
        raise ExplorerError("upload a TSV file of sentence pairs to score both models on")
    return list(common.uploaded_pairs(upload))  # kept once per server within the uploads' budget, not per session


def translation_scores_section(name_a: str, name_b: str) -> None:
    """Two translation models of the same languages: BLEU and chrF (sacrebleu, default settings) and exact
    match on the same pairs."""
    from explorer.training.evaluation import score_pairs
    bundles = {name: common.model_or_none(name) for name in (name_a, name_b)}
    if any(b is None or b.kind != "translation" for b in bundles.values()) or name_a == name_b:
        return
    st.subheader("Translation scores")
    a, b = bundles[name_a], bundles[name_b]
    if a.languages != b.languages:
        st.info(f"{name_a} translates {'→'.join(a.languages)} and {name_b} {'→'.join(b.languages)}: "
                "BLEU compares models on the same language pair.")
        return
    choices = [OWN_PAIRS.format(n) for n, bundle in bundles.items() if bundle.examples] + ["a TSV file"]
    if st.session_state.get("compare_score_pairs") not in choices:
        st.session_state["compare_score_pairs"] = choices[0]
    choice = st.radio("Score both on", choices, key="compare_score_pairs", horizontal=True)
    if choice == "a TSV file":
        st.file_uploader("Sentence pairs (TSV: source<TAB>target)", key=common.uploader_key("compare_tsv"),
                         max_upload_size=LIMITS.max_tsv_bytes // 1_000_000, on_change=common.take_upload,
                         args=("compare_tsv",), kwargs={"limit": LIMITS.max_tsv_bytes})
        common.kept_upload_line("compare_tsv", "Sentence pairs")
    try:
        pairs = _score_pairs(choice, bundles)
        rows = {}
        for name, bundle in bundles.items():
            key = ("compare_scores", common.model_key(name), choice,
                   getattr(st.session_state.get("compare_tsv"), "file_id", None))
            scores = common.cached(key, lambda: score_pairs(bundle, pairs, limit=MAX_SCORED))
            if not scores["n"]:
                raise ExplorerError(f"no pair of these fits {name}")
            signature = scores["bleu_signature"]
            rows[name] = {"pairs scored": scores["n"], "exact match (%)": round(100 * scores["exact_match"], 1),
                          "BLEU": round(scores["bleu"], 1), "chrF": round(scores["chrf"], 1)}
    except ExplorerError as exc:
        st.error(str(exc), icon=":material/warning:")
        return
    st.dataframe(pd.DataFrame(rows).T, key="compare_score_table")
    st.caption(f"sacrebleu with its default settings ({signature}), greedy decoding, at most {MAX_SCORED:,} "
               "pairs each model can read.")
