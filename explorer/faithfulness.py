"""Is the attention the explanation? The records of attributions and counterfactual attention, and how they
are compared with α: numpy and scipy only (no torch), so pages, figures, exports and tests read them without a
model. `explorer/engine/attribution.py` computes them; docs/FAITHFULNESS.md says what they mean.

For each decoder step t of a trace and its chosen token y_t (the prefix y_<t held as decoded), one score per
input position i from each method:

- ``grad_x_input``: Σ_e ∂z_t/∂x_ie · x_ie, z_t the logit of y_t, on the encoder's input embeddings x_i (summed
  over the embedding, signed);
- ``integrated_gradients`` (Sundararajan et al. 2017, through Captum): the same, integrated along the straight
  path from a baseline (the mean token embedding at every position) to x; Captum's convergence delta is kept
  per step;
- ``erasure`` (leave one out at the step): log p(y_t) − log p(y_t | x_i hidden from attention at step t), hidden
  by Explore's own mask at that step alone (Serrano & Smith 2019's erasure of one attention weight); a model
  without attention has nothing to hide an input from, so it has no erasure.

Agreement with α (per step, then the mean over steps): the importance of input i is |score_i| (a method's sign
says for or against y_t; α has none); top-1 agreement (the same position is largest), Kendall τ
(scipy.stats.kendalltau) and the Jensen–Shannon distance (scipy.spatial.distance.jensenshannon, base 2: 0 equal,
1 disjoint) between α_t and the importances normalised to sum to 1.

Counterfactual attention (Jain & Wallace 2019, §4): at each step α_t is replaced by a random permutation of
itself, by the uniform distribution, and by an adversarial α̃ (as far from α_t in JSD as found while the
output distribution stays within total-variation distance ε of the original), and that one step is decoded
again with the original prefix: how far the output moved (TVD) and whether its most probable token changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Sequence

import numpy as np

from explorer.data.tasks import argmax_hits

METHODS: tuple[str, ...] = ("grad_x_input", "integrated_gradients", "erasure")
METHOD_NAMES: dict[str, str] = {"grad_x_input": "gradient × input", "integrated_gradients": "integrated gradients",
                                "erasure": "erasure (leave one out)"}
COUNTERFACTUALS: tuple[str, ...] = ("permuted", "uniform", "adversarial")
COUNTERFACTUAL_NAMES: dict[str, str] = {"permuted": "α permuted", "uniform": "uniform α",
                                        "adversarial": "adversarial α"}
IG_STEPS = 32  # integrated gradients' points on the path (Gauss–Legendre, Captum's default method)
IG_BASELINE = "the mean token embedding at every position"
IG_TARGET = "logit"  # what the gradient methods explain: y_t's logit (attribution._OnePass's target)
IG_TARGET_NAME = "logit of y_t"
IG_TOLERANCE = 0.05  # IG has converged at a step when |Captum's delta| <= this share of the output's change
EPSILON = 0.05  # the adversarial α keeps the output distribution within this total-variation distance
SEED = 0  # the permutations' random generator
NO_ATTENTION = ("This model has no attention: there is no α to compare the attributions with, and no α to "
                "replace. Its attributions (gradient × input, integrated gradients) are still the model's: the "
                "input reaches the decoder only through s₀.")


def _frozen(record: Any) -> None:
    """Make a record's arrays read-only (one record is shared by every figure on a page, as a Trace is)."""
    for f in fields(record):
        value = getattr(record, f.name)
        arrays = value.values() if isinstance(value, dict) else (value,)
        for a in arrays:
            if isinstance(a, np.ndarray):
                a.flags.writeable = False


@dataclass(frozen=True, eq=False)
class Attributions:
    """Per step t and input position i, how much x_i mattered for the chosen y_t, by each method (T, S)."""

    scores: dict[str, np.ndarray]  # method -> (T, S); no "erasure" without attention
    ig_delta: np.ndarray  # (T,) Captum's convergence delta: Σ_i IG_ti − (z_t(x) − z_t(baseline)), z_t y_t's logit
    ig_change: np.ndarray  # (T,) z_t(x) − z_t(baseline), what IG's scores should add up to
    ig_steps: int = IG_STEPS
    baseline: str = IG_BASELINE

    def __post_init__(self) -> None:
        _frozen(self)

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(m for m in METHODS if m in self.scores)

    def importance(self, method: str) -> np.ndarray:
        """(T, S) |score| normalised so each row sums to 1 (a row of zeros stays zero): comparable with α."""
        return normalised(np.abs(self.scores[method]))

    def ig_converged(self, tolerance: float = IG_TOLERANCE) -> np.ndarray:
        """(T,) whether IG's scores add up to the output's change within `tolerance` of it (completeness)."""
        return np.abs(self.ig_delta) <= tolerance * np.abs(self.ig_change)


@dataclass(frozen=True, eq=False)
class Counterfactuals:
    """Each step decoded again with α_t replaced (Jain & Wallace 2019, §4); kinds: COUNTERFACTUALS."""

    weights: dict[str, np.ndarray]  # kind -> (T, S) the α̃_t used
    tvd: dict[str, np.ndarray]  # kind -> (T,) total-variation distance of ŷ_t from the original ŷ_t
    jsd: dict[str, np.ndarray]  # kind -> (T,) Jensen–Shannon distance of α̃_t from α_t (base 2)
    top: dict[str, np.ndarray]  # kind -> (T,) id of ŷ_t's most probable token with α̃_t
    original_top: np.ndarray  # (T,) id of the most probable token with the model's own α_t
    epsilon: float = EPSILON
    seed: int = SEED

    def __post_init__(self) -> None:
        _frozen(self)

    def flipped(self, kind: str) -> np.ndarray:
        """(T,) whether the most probable token changed."""
        return self.top[kind] != self.original_top


@dataclass(frozen=True)
class Agreement:
    """How one method's importances agree with α, per step (T,): NaN where a step has nothing to compare."""

    top1: np.ndarray  # 1.0 where the largest importance and the largest α_ti are the same position, else 0.0
    kendall_tau: np.ndarray  # Kendall τ-b between α_t and the importances (NaN when either is constant)
    jsd: np.ndarray  # Jensen–Shannon distance between α_t and the normalised importances

    def means(self) -> dict[str, float | None]:
        return {"top1_agreement": _mean(self.top1), "kendall_tau": _mean(self.kendall_tau), "jsd": _mean(self.jsd)}


@dataclass(frozen=True, eq=False)
class Explanation:
    """Attributions and counterfactuals of one trace (the trace's own α beside them), and the seconds they took."""

    model_name: str
    attention: str  # the score function; "none" has no α and no counterfactuals
    source_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]
    weights: np.ndarray  # α (T, S) of the trace explained; (T, 0) without attention
    attributions: Attributions
    counterfactuals: Counterfactuals | None
    target_vocab: tuple[str, ...] = field(repr=False, default=())
    alignment: np.ndarray | None = None  # ground truth (T_true, S), toy tasks only
    seconds: float = 0.0

    def __post_init__(self) -> None:
        _frozen(self)

    @property
    def has_attention(self) -> bool:
        return self.attention != "none"

    @property
    def steps(self) -> int:
        return len(self.output_tokens)

    def agreement(self, method: str) -> Agreement | None:
        """`method`'s agreement with α per step; None without attention (no α to compare)."""
        if not self.has_attention:
            return None
        return agreement(self.weights, self.attributions.scores[method])

    def truth_hits(self, method: str | None = None) -> tuple[int, int]:
        """(hits, counted steps): how often the top input of `method` (None: α) is a true position of the task."""
        if self.alignment is None:
            return 0, 0
        rows = self.weights if method is None else np.abs(self.attributions.scores[method])
        if rows.shape[1] == 0:
            return 0, 0
        sets = tuple(tuple(np.flatnonzero(r).tolist()) for r in self.alignment)
        return argmax_hits(rows.argmax(axis=1).tolist(), sets)

    def summary(self) -> dict[str, Any]:
        """This sentence's figures, as `summarise` reports many (means over steps)."""
        return summarise([self])


def normalised(rows: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (rows of zeros stay zero)."""
    rows = np.asarray(rows, dtype=np.float64)
    total = rows.sum(axis=-1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0)


def agreement(weights: np.ndarray, scores: np.ndarray) -> Agreement:
    """Per step, α_t against |scores_t|: top-1, Kendall τ and Jensen–Shannon distance (NaN: nothing to compare)."""
    from scipy.spatial.distance import jensenshannon
    from scipy.stats import kendalltau
    weights = np.asarray(weights, dtype=np.float64)
    importance = np.abs(np.asarray(scores, dtype=np.float64))
    T, S = weights.shape
    top1, tau, jsd = np.full(T, np.nan), np.full(T, np.nan), np.full(T, np.nan)
    for t in range(T):
        a, b = weights[t], importance[t]
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))) or b.sum() <= 0:
            continue
        top1[t] = float(a.argmax() == b.argmax())
        if S > 1 and np.ptp(a) > 0 and np.ptp(b) > 0:
            tau[t] = kendalltau(a, b).statistic
        jsd[t] = jensenshannon(a, b / b.sum(), base=2)
    return Agreement(top1, tau, jsd)


def _mean(values: Iterable[float] | np.ndarray) -> float | None:
    values = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else None


def summarise(explanations: Sequence[Explanation]) -> dict[str, Any]:
    """The figures of many sentences (means over all their steps): the CLI's --json object and Compare's table.

    `methods` maps each method to its mean top-1 agreement, Kendall τ and JSD with α (None without attention);
    `counterfactual` holds the flip rates and mean output TVDs of the three replacements and the adversarial α's
    mean JSD from α; `truth` (toy tasks) the share of steps whose top input is a true position, per method and
    for α; `integrated_gradients` the share of steps where IG converged (completeness within IG_TOLERANCE)."""
    if not explanations:
        raise ValueError("nothing to summarise")
    first = explanations[0]
    attends = first.has_attention
    steps = sum(e.steps for e in explanations)
    methods: dict[str, dict[str, float | None]] = {}
    for method in METHODS:
        if method not in first.attributions.scores:
            continue
        if attends:
            per = [e.agreement(method) for e in explanations]
            methods[method] = {"top1_agreement": _mean(np.concatenate([a.top1 for a in per])),
                               "kendall_tau": _mean(np.concatenate([a.kendall_tau for a in per])),
                               "jsd": _mean(np.concatenate([a.jsd for a in per]))}
        else:
            methods[method] = {"top1_agreement": None, "kendall_tau": None, "jsd": None}
    ig = [e.attributions for e in explanations]
    converged = np.concatenate([a.ig_converged() for a in ig])
    relative = np.concatenate([np.abs(a.ig_delta) / np.maximum(np.abs(a.ig_change), 1e-12) for a in ig])
    out: dict[str, Any] = {
        "model": first.model_name,
        "attention": first.attention,
        "sentences": len(explanations),
        "steps": steps,
        "seconds_per_sentence": float(np.mean([e.seconds for e in explanations])),
        "methods": methods,
        "integrated_gradients": {"steps": ig[0].ig_steps, "baseline": ig[0].baseline, "target": IG_TARGET_NAME,
                                 "converged_share": _mean(converged.astype(float)),
                                 "median_relative_delta": float(np.median(relative)) if relative.size else None,
                                 "tolerance": IG_TOLERANCE},
    }
    if attends:
        cfs = [e.counterfactuals for e in explanations if e.counterfactuals is not None]
        counter: dict[str, Any] = {"epsilon": cfs[0].epsilon if cfs else EPSILON}
        for kind in COUNTERFACTUALS:
            counter[f"{kind}_flip_rate"] = _mean(np.concatenate([c.flipped(kind).astype(float) for c in cfs]))
            counter[f"{kind}_tvd"] = _mean(np.concatenate([c.tvd[kind] for c in cfs]))
            counter[f"{kind}_jsd"] = _mean(np.concatenate([c.jsd[kind] for c in cfs]))
        out["counterfactual"] = counter
    else:
        out["counterfactual"] = {f"{kind}_flip_rate": None for kind in COUNTERFACTUALS}
        out["note"] = NO_ATTENTION
    if first.alignment is not None:
        truth: dict[str, float | None] = {}
        for method in ((None,) if attends else ()) + tuple(methods):
            hits = [e.truth_hits(method) for e in explanations]
            counted = sum(c for _, c in hits)
            truth["alpha" if method is None else method] = sum(h for h, _ in hits) / counted if counted else None
        out["truth"] = truth
    return out


# --- exports -----------------------------------------------------------------------------------------

def _array(a: np.ndarray) -> Any:
    return np.where(np.isfinite(a), a, np.nan).astype(float).tolist()


def explanation_json_dict(e: Explanation) -> dict[str, Any]:
    """The explanation as plain JSON types, arrays indexed [t][i] from 0 like the trace's (NaN: null)."""
    a = e.attributions
    out: dict[str, Any] = {
        "attributions": {method: _array(a.scores[method]) for method in a.methods},
        "integrated_gradients": {"steps": a.ig_steps, "baseline": a.baseline, "target": IG_TARGET_NAME,
                                 "convergence_delta": _array(a.ig_delta), "output_change": _array(a.ig_change),
                                 "converged": a.ig_converged().tolist()},
        "summary": e.summary(),
    }
    if e.has_attention:
        out["agreement"] = {method: {k: _array(v) for k, v in
                                     (("top1", ag.top1), ("kendall_tau", ag.kendall_tau), ("jsd", ag.jsd))}
                            for method in a.methods for ag in (e.agreement(method),)}
    if e.counterfactuals is not None:
        c = e.counterfactuals
        vocab = e.target_vocab
        out["counterfactual"] = {
            "epsilon": c.epsilon, "seed": c.seed,
            **{kind: {"weights": _array(c.weights[kind]), "tvd": _array(c.tvd[kind]), "jsd": _array(c.jsd[kind]),
                      "top_token": [vocab[i] if i < len(vocab) else int(i) for i in c.top[kind].tolist()],
                      "flipped": c.flipped(kind).tolist()} for kind in COUNTERFACTUALS}}
    else:
        out["note"] = NO_ATTENTION
    return out


def step_frame_columns(e: Explanation) -> dict[str, np.ndarray]:
    """Columns to add to the trace's tidy table (one row per step × input position, step-major): each method's
    score, for explorer.record.trace_frame."""
    return {method: e.attributions.scores[method].reshape(-1) for method in e.attributions.methods}


def json_ready(x: Any) -> Any:
    """Plain JSON: NaN and infinities become null (JSON has neither), numpy numbers plain ones."""
    if isinstance(x, dict):
        return {k: json_ready(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_ready(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def _figure(value: float | None, form: str = ".2f") -> str:
    return "–" if value is None or not np.isfinite(value) else format(value, form)


def explanation_lines(e: Explanation) -> list[str]:
    """The CLI's text for one input: per step the chosen token, where α and each method point, and what the
    counterfactual α did; then the sentence's means."""
    a = e.attributions
    src = e.source_tokens
    lines = [f"input : {' '.join(src)}", f"output: {' '.join(e.output_tokens)}"]
    if not e.has_attention:
        lines.append(NO_ATTENTION)
    converged = a.ig_converged()
    for t, token in enumerate(e.output_tokens):
        parts = []
        if e.has_attention:
            i = int(e.weights[t].argmax())
            parts.append(f"α x{i + 1} {src[i]!r} ({e.weights[t, i]:.2f})")
        for method in a.methods:
            row = np.abs(a.scores[method][t])
            if np.all(np.isfinite(row)) and row.sum() > 0:
                i = int(row.argmax())
                mark = "" if method != "integrated_gradients" or converged[t] else " (not converged)"
                parts.append(f"{METHOD_NAMES[method].split(' (')[0]} x{i + 1} {src[i]!r}{mark}")
        if e.counterfactuals is not None:
            c = e.counterfactuals
            parts.append("flips: " + ", ".join(f"{kind} {'yes' if c.flipped(kind)[t] else 'no'} "
                                               f"(TVD {c.tvd[kind][t]:.2f})" for kind in COUNTERFACTUALS))
        lines.append(f"  step {t + 1:>2}: {token!r:>10}  " + " · ".join(parts))
    lines += report_lines(e.summary(), sentence=True)
    return lines


def report_lines(report: dict[str, Any], sentence: bool = False) -> list[str]:
    """The CLI's text for summarise()'s figures."""
    what = "this sentence" if sentence else f"{report['sentences']:,} sentences"
    lines = [f"{report['model']} (attention {report['attention']}): {what}, {report['steps']:,} steps, "
             f"{report['seconds_per_sentence']:.2f} s a sentence"]
    if report.get("note"):
        lines.append(report["note"])
    else:
        lines.append(f"  {'agreement with α':<28}{'top-1':>8}{'Kendall τ':>11}{'JSD':>7}")
        for method, m in report["methods"].items():
            lines.append(f"  {METHOD_NAMES[method]:<28}{_figure(m['top1_agreement'], '.1%'):>8}"
                         f"{_figure(m['kendall_tau']):>11}{_figure(m['jsd']):>7}")
        c = report["counterfactual"]
        lines.append(f"  counterfactual α (ε = {c['epsilon']:g}): top token changes at "
                     + ", ".join(f"{_figure(c[kind + '_flip_rate'], '.1%')} of steps ({kind}, mean TVD "
                                 f"{_figure(c[kind + '_tvd'])}, JSD from α {_figure(c[kind + '_jsd'])})"
                                 for kind in COUNTERFACTUALS))
    ig = report["integrated_gradients"]
    lines.append(f"  integrated gradients: {ig['steps']} steps from {ig['baseline']}; converged (|delta| <= "
                 f"{ig['tolerance']:.0%} of the output's change) at {_figure(ig['converged_share'], '.1%')} of steps")
    if report.get("truth"):
        lines.append("  top input is a true position: " + ", ".join(
            f"{'α' if key == 'alpha' else METHOD_NAMES[key]} {_figure(v, '.1%')}" for key, v in report["truth"].items()))
    return lines
