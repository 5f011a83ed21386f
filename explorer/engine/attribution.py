"""Is the attention the explanation? Attributions and counterfactual attention for every step of a trace.

For the chosen token y_t of each step (the prefix y_<t as decoded, teacher-forced), a score per input position:
gradient × input and integrated gradients on the encoder's input embeddings (Captum), and erasure through
Explore's own mask; then each step decoded again with α_t replaced (permuted, uniform, adversarial). Every
number comes from the model's own functions: `Seq2Seq.encode` (given the embeddings to differentiate), the
teacher-forced decoder and `Seq2Seq.decode_step` with a `Control` (the mask, or the replacement α). The
records are torch-free (explorer/faithfulness.py); docs/FAITHFULNESS.md says what the numbers mean.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import Tensor

from explorer.data.vocab import SOS_ID, SPECIALS
from explorer.engine.bundle import ModelBundle, Prepared
from explorer.engine.decoding import decode
from explorer.engine.devices import model_device
from explorer.engine.model import Control, Memory, Seq2Seq
from explorer.engine.trace import erasure_masks, trace
from explorer.errors import ExplorerError
from explorer.faithfulness import (COUNTERFACTUALS, EPSILON, IG_STEPS, IG_TARGET, SEED, Attributions,
                                   Counterfactuals, Explanation)
from explorer.record import Trace

ROWS_PER_PASS = 512  # integrated gradients' path points per forward and backward pass (memory, not numbers)
# Steps whose gradients one batched backward takes (a group runs back from its last step only): 8 was the fastest
# of 4, 8 and all on reverse, within noise on eng-fra (the timings: commit 90f6f0e).
STEP_GROUP = 8
# The adversarial α's search: Adam on its logits, from the most promising of the uniform α, the permutation and
# the one-hots; 20 steps from 3 starts reach 99% of the JSD of 40 from 4 at a third of the time.
ADVERSARY_STEPS = 20
ADVERSARY_LR = 0.5
ADVERSARY_STARTS = 3
FEASIBLE = 1 - 1e-4  # the search keeps α̃ within this share of ε: its answers are then scored through decode_step


def explain(bundle: ModelBundle, source: str | Prepared, tr: Trace | None = None, *, ig_steps: int = IG_STEPS,
            epsilon: float = EPSILON, seed: int = SEED) -> Explanation:
    """Attributions of every step of `tr` (default: the greedy decoding of `source`) and, with attention,
    its counterfactual attention. The trace must be the model as trained: a what-if changes what is explained."""
    if ig_steps < 2:
        raise ExplorerError(f"integrated gradients needs at least 2 steps on its path, got {ig_steps}")
    if not (math.isfinite(epsilon) and 0 < epsilon < 1):
        raise ExplorerError(f"epsilon must be between 0 and 1, got {epsilon}")
    started = time.perf_counter()
    prepared = bundle.prepare(source) if isinstance(source, str) else source
    if tr is None:
        tr = trace(bundle, prepared)
    if not tr.intervention.is_identity:
        raise ExplorerError("attributions explain the model as trained: clear the what-if first")
    if tuple(tr.source_tokens) != tuple(prepared.tokens):
        raise ExplorerError("the trace is not of this input")
    model = bundle.model
    device = model_device(model)
    src = torch.tensor([prepared.ids], dtype=torch.long, device=device)
    out = torch.tensor(tr.output_ids.tolist(), dtype=torch.long, device=device).unsqueeze(0)  # (1, T)
    scores, delta, change = _gradients(model, src, out, ig_steps)
    counterfactuals = None
    if model.attention is not None:
        starts = _step_starts(model, src, out)
        scores["erasure"] = _erasure(starts, src.shape[1])
        counterfactuals = _counterfactuals(starts, epsilon, seed)
    attributions = Attributions(scores, delta, change, ig_steps)
    return Explanation(bundle.name, model.cfg.attention, tuple(tr.source_tokens), tuple(tr.output_tokens),
                       np.array(tr.weights, dtype=np.float32), attributions, counterfactuals,
                       target_vocab=bundle.tgt_vocab.tokens, alignment=tr.alignment,
                       seconds=time.perf_counter() - started)


def _each_step(model: Seq2Seq, src: Tensor, out: Tensor, target: str = IG_TARGET):
    """u (P, S, E) -> T tensors (P,): y_t's score at step t for input embeddings u of this one input:
    Seq2Seq.encode given the embeddings, then decode_step fed y_<t as decoded (teacher-forced), read out at
    every step. One output per step, so a backward from step t's score runs through steps 1..t alone (the
    decoder is causal: nothing later reaches y_t)."""
    S, T = src.shape[1], out.shape[1]
    prefix = torch.cat([torch.full((1, 1), SOS_ID, dtype=torch.long, device=src.device), out[:, :-1]], dim=1)

    def each_step(u: Tensor) -> list[Tensor]:
        P = u.shape[0]
        memory = model.encode(src.expand(P, -1), torch.full((P,), S, dtype=torch.long, device=u.device),
                              embedded=u)
        tokens = prefix.expand(P, -1)
        embedded = model.embedded(tokens).unbind(1)  # y_{t-1}'s embeddings, looked up at once
        state, context = memory.s0, model.initial_context(P, u.device)
        scores = []
        for t in range(T):
            step = model.decode_step(tokens[:, t], state, context, memory, embedded=embedded[t], readout=False)
            state, context = step.state, step.context
            chosen = out[0, t].expand(P)
            if target == "logit":  # y_t's row of the readout alone
                scores.append(model.readout(step.s, context, chosen).float())
                continue
            logits = model.readout(step.s, context).float()
            probs = torch.log_softmax(logits, -1) if target == "log_probability" else torch.softmax(logits, -1)
            scores.append(probs.gather(1, chosen.unsqueeze(1)).squeeze(1))
        return scores
    return each_step


class _OnePass:
    """Captum's forward and gradient functions for rows (N, S, E) of this one input's embeddings, row n
    explaining the step `step[n]`: y_t's score (`target` as `_each_step`) and its gradients.

    Captum lays integrated gradients' path out as T rows per point (one per step explained), identical but for
    the step: one forward per point reads every step's score, and batched backwards (one cotangent per step,
    STEP_GROUP steps at a time from the group's last step down: the later steps' zero gradients are not run)
    give each row's gradient, as Captum's own `compute_gradients` would. The path's two `ends` (x and the
    baseline, (K, S, E)) ride along that pass, so gradient × input (the gradient at x) and the convergence delta
    (the scores at both ends) are read from it. Any other batch goes to Captum's own."""

    def __init__(self, model: Seq2Seq, src: Tensor, out: Tensor, ends: Tensor | None = None,
                 target: str = IG_TARGET) -> None:
        self.T = out.shape[1]
        self.each = _each_step(model, src, out, target)
        self.ends = [] if ends is None else list(ends)
        self.known: list[tuple[Tensor, Tensor, Tensor]] = []  # (point (S, E), scores (T,), gradients (T, S, E))

    def forward(self, x: Tensor, step: Tensor) -> Tensor:
        """f(x, t) -> y_t's score (N,) for embeddings x (N, S, E) and the step t (N,) each row explains."""
        if not torch.is_grad_enabled() and torch.equal(x, x[:1].expand_as(x)):  # Captum's delta: the ends
            hit = self._known(x[0])  # one row's pass reads every step: the rows are one input
            scores = hit[1] if hit is not None else torch.stack(self.each(x[:1]), dim=1)[0]
            return scores.gather(0, step)
        return torch.stack(self.each(x), dim=1).gather(1, step.unsqueeze(1)).squeeze(1)

    def gradient_func(self, forward_fn, inputs, target_ind=None, additional_forward_args=None):
        """IntegratedGradients.gradient_func (and InputXGradient's): the per-row gradients of `forward`."""
        from captum._utils.gradient import compute_gradients
        T = self.T
        x = inputs[0] if isinstance(inputs, tuple) else inputs
        args = additional_forward_args if isinstance(additional_forward_args, tuple) else (additional_forward_args,)
        P = x.shape[0] // T
        shared = (target_ind is None and len(args) == 1 and isinstance(inputs, tuple) and len(inputs) == 1
                  and x.shape[0] == P * T and torch.equal(args[0], torch.arange(T, device=x.device).repeat(P)))
        points = x.detach().view(P, T, *x.shape[1:]) if shared else None
        if not shared or not torch.equal(points, points[:, :1].expand_as(points)):
            return compute_gradients(forward_fn, inputs, target_ind, additional_forward_args)
        hit = self._known(points[0, 0]) if P == 1 else None
        if hit is not None:
            return (hit[2].to(x.dtype).reshape_as(x),)
        extra = [end for end in self.ends if self._known(end) is None]
        u = torch.cat([points[:, 0], *(end.unsqueeze(0).to(x.dtype) for end in extra)]).requires_grad_()
        scores, grads = self._gradients(u)  # (T, P + K), (T, P + K, S, E)
        self.known += [(end, scores[:, P + k], grads[:, P + k]) for k, end in enumerate(extra)]
        return (grads[:, :P].transpose(0, 1).reshape_as(x),)

    def _gradients(self, u: Tensor) -> tuple[Tensor, Tensor]:
        """Every step's score at each point u (P, S, E) and its gradient: (T, P), (T, P, S, E)."""
        T, P = self.T, u.shape[0]
        grads = []
        with torch.enable_grad():
            scores = self.each(u)  # T x (P,)
            for first in range(0, T, STEP_GROUP):
                group = scores[first:first + STEP_GROUP]
                G = len(group)
                ones = torch.eye(G, dtype=group[0].dtype, device=u.device).unsqueeze(2).expand(G, G, P)
                grads.append(torch.autograd.grad(group, u, grad_outputs=list(ones.unbind(1)), is_grads_batched=True,
                                                 retain_graph=first + G < T)[0])  # (G, P, S, E)
        return torch.stack(scores).detach(), torch.cat(grads)

    def _known(self, point: Tensor) -> tuple[Tensor, Tensor, Tensor] | None:
        return next((entry for entry in self.known if torch.equal(entry[0], point)), None)


def baseline_embedding(model: Seq2Seq) -> Tensor:
    """Integrated gradients' baseline x'_i (E,), the same at every position: the mean of the source vocabulary's
    token embeddings (<pad>, <sos>, <eos>, <unk> aside), the embedding of the uniform mixture of the tokens
    (docs/FAITHFULNESS.md: chosen over <pad>'s zero vector on held-out models)."""
    with torch.no_grad():
        return model.encoder.embed.weight[len(SPECIALS):].float().mean(0)


def _gradients(model: Seq2Seq, src: Tensor, out: Tensor,
               ig_steps: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Gradient × input and integrated gradients (Captum) of y_t's logit on the input embeddings, summed over
    the embedding (signed): scores (T, S) each, and IG's convergence delta and output change (T,).

    Row t of the batch explains step t; integrated gradients' pass also computes the gradient at x and the
    scores at both ends (`_OnePass`), which gradient × input and the convergence delta then read."""
    from captum.attr import InputXGradient, IntegratedGradients  # 1 s of imports, only when explaining
    T = out.shape[1]
    with torch.no_grad():
        x = model.encoder.embed(src)  # (1, S, E): the looked-up x_i (no dropout outside training)
    baseline = baseline_embedding(model).to(x.dtype).expand_as(x)
    one_pass = _OnePass(model, src, out, ends=torch.cat([x, baseline]))
    x = x.expand(T, -1, -1).contiguous()  # (T, S, E): one row per step explained
    baseline = baseline.expand_as(x).contiguous()
    steps = torch.arange(T, device=x.device)
    with torch.enable_grad():
        integrated = IntegratedGradients(one_pass.forward)
        integrated.gradient_func = one_pass.gradient_func
        ig, delta = integrated.attribute(
            x, baselines=baseline, additional_forward_args=steps, n_steps=ig_steps, return_convergence_delta=True,
            internal_batch_size=max(T, ROWS_PER_PASS))
        input_x_gradient = InputXGradient(one_pass.forward)
        input_x_gradient.gradient_func = one_pass.gradient_func
        grad_x_input = input_x_gradient.attribute(x.clone().requires_grad_(), additional_forward_args=steps)
    ig = ig.detach().double()
    delta = delta.detach().double()
    # Captum's delta is Σ IG − (f(x) − f(baseline)), from its own forward passes at both ends: the change follows.
    change = ig.sum(dim=(1, 2)) - delta  # (T,) y_t's logit at x minus at the baseline
    scores = {"grad_x_input": grad_x_input.sum(-1).detach().double().cpu().numpy(),
              "integrated_gradients": ig.sum(-1).cpu().numpy()}
    return scores, delta.cpu().numpy(), change.cpu().numpy()


def _erasure(starts: tuple["_StepStart", Tensor, Tensor], S: int) -> np.ndarray:
    """log p(y_t) − log p(y_t | x_i hidden from attention at step t) (T, S): Explore's mask of one position
    (trace's erasure_masks) at that step alone, decoded from the step's own start (the steps before it as the
    model computed them), every step and position as one batch through decode_step."""
    start, _, p = starts
    T = start.T
    if S < 2:  # hiding the only input would leave attention nothing to read (Explore refuses it too)
        return np.full((T, S), np.nan)
    with torch.no_grad():
        hidden = start.probs(None, mask=erasure_masks(S, p.device).repeat(T, 1), log=True)  # (T * S, V)
    chosen = start.chosen
    plain = p.gather(1, chosen.unsqueeze(1)).log()  # (T, 1): y_t is the decoding's, far from p = 0
    hidden = hidden.view(T, S, -1).gather(2, chosen.view(T, 1, 1).expand(T, S, 1)).squeeze(2)  # (T, S)
    return (plain - hidden).double().cpu().numpy()


def _step_starts(model: Seq2Seq, src: Tensor, out: Tensor) -> tuple["_StepStart", Tensor, Tensor]:
    """Where every step of the teacher-forced decoding of `out` starts, its α (T, S) and ŷ (T, V)."""
    S, T = src.shape[1], out.shape[1]
    device = src.device
    with torch.no_grad():  # not inference mode: the adversary differentiates through these tensors
        memory = model.encode(src, torch.tensor([S], device=device))
        kept = decode(model, memory, T, target=out, keep_steps=True).steps
    # What step t starts from: the state and context the previous step left, and the token it chose.
    states = [memory.s0] + [step.state for step in kept[:-1]]
    contexts = [model.initial_context(1, device)] + [step.context for step in kept[:-1]]
    previous = torch.cat([torch.full((1,), SOS_ID, dtype=torch.long, device=device), out[0, :-1]])  # (T,)
    start = _StepStart(model, memory, _stack_states(states), torch.cat(contexts), previous, out[0],
                       torch.cat([step.s for step in kept]))
    alpha = torch.cat([step.weights for step in kept]).float()  # (T, S) the model's own α_t
    p = torch.softmax(torch.cat([step.logits for step in kept]).float(), dim=-1)  # (T, V)
    return start, alpha, p


def _counterfactuals(starts: tuple["_StepStart", Tensor, Tensor], epsilon: float, seed: int) -> Counterfactuals:
    """Each step t decoded once more from its own s_{t-1}, c_{t-1} and y_{t-1}, with α_t replaced."""
    start, alpha, p = starts
    T, S = alpha.shape
    device = alpha.device
    rng = np.random.default_rng(seed)
    replaced = {"permuted": torch.stack([alpha[t, torch.as_tensor(rng.permutation(S), device=device)]
                                         for t in range(T)]),
                "uniform": torch.full_like(alpha, 1.0 / S)}
    replaced["adversarial"] = _adversarial(start, alpha, p, epsilon, replaced["permuted"])
    weights, tvd, jsd, top = {}, {}, {}, {}
    for kind in COUNTERFACTUALS:
        with torch.no_grad():
            q = start.probs(replaced[kind])
        weights[kind] = replaced[kind].double().cpu().numpy()
        tvd[kind] = (0.5 * (q - p).abs().sum(-1)).double().cpu().numpy()
        jsd[kind] = js_distance(replaced[kind], alpha).double().cpu().numpy()
        top[kind] = q.argmax(-1).cpu().numpy()
    return Counterfactuals(weights, tvd, jsd, top, p.argmax(-1).cpu().numpy(), epsilon, seed)


def _stack_states(states: list) -> object:
    """The T states s_{t-1} (each (L, 1, H), or LSTM's pair) as one batch (L, T, H)."""
    if isinstance(states[0], tuple):
        return tuple(torch.cat([s[k] for s in states], dim=1) for k in range(2))
    return torch.cat(states, dim=1)


class _MixedReadout:
    """ŷ_t for any α̃ from the logits each input alone would give: step 4 is affine in c_t and c_t = Σ_i α̃_ti v_i,
    so with Σ_i α̃_ti = 1 its logits are Σ_i α̃_ti U [s_t; v_i] + b_U. The adversary's search asks this (one (S, V)
    product a row instead of the readout's (H + D, V)); what it finds is scored again through decode_step. A
    model whose step 4 this does not reproduce (checked on α_t itself) is searched through `_StepStart.probs`."""

    def __init__(self, start: "_StepStart", alpha: Tensor, p: Tensor) -> None:
        T, S = alpha.shape
        values = start.memory.values[0]  # (S, D) the one input's v_i
        with torch.no_grad():
            alone = start.model.readout(start.s.repeat_interleave(S, 0), values.repeat(T, 1))  # U [s_t; v_i] + b_U
        self.logits = alone.float().view(T, S, -1)
        self.start = start
        self.exact = bool(torch.allclose(self._mixed(alpha.unsqueeze(1)).squeeze(1), p, atol=1e-5))

    def probs(self, weights: Tensor) -> Tensor:
        """ŷ_t for weights (T, K, S) -> (T, K, V)."""
        if self.exact:
            return self._mixed(weights)
        T, K, S = weights.shape
        return self.start.probs(weights.reshape(T * K, S)).view(T, K, -1)

    def _mixed(self, weights: Tensor) -> Tensor:
        return torch.softmax(torch.bmm(weights, self.logits), dim=-1)


class _StepStart:
    """Where every step t of a decoding starts (s_{t-1}, c_{t-1}, y_{t-1}), to decode each once more with a
    replacement α_t (Control.weights) or inputs hidden (Control.mask) through the model's own decode_step, `per`
    rows per step."""

    def __init__(self, model: Seq2Seq, memory: Memory, state, context: Tensor, previous: Tensor,
                 chosen: Tensor, s: Tensor) -> None:
        self.model, self.memory, self.state, self.context, self.previous = model, memory, state, context, previous
        self.chosen = chosen  # (T,) y_t, the token each step chose
        self.s = s  # (T, H) s_t as each step computed it: a replacement α_t changes only what follows it
        self.T = previous.shape[0]
        self._memories: dict[int, Memory] = {}

    def probs(self, weights: Tensor | None, mask: Tensor | None = None, log: bool = False) -> Tensor:
        """ŷ_t (its log with `log`) with α_t replaced (weights) or inputs hidden (mask): (T * per, S), rows
        step-major in blocks of `per` -> (T * per, V)."""
        given = weights if weights is not None else mask
        per = given.shape[0] // self.T
        rows = torch.arange(self.T, device=given.device).repeat_interleave(per)  # the step of each row
        if len(rows) not in self._memories:  # the one input's memory for every row (the adversary asks often)
            self._memories[len(rows)] = self.memory.select(torch.zeros_like(rows))
        memory = self._memories[len(rows)]
        if weights is not None and mask is None:  # decode_step's end from its own s_t (Seq2Seq.attend)
            _, logits = self.model.attend(self.s.index_select(0, rows), weights, memory)
        else:
            state = tuple(s.index_select(1, rows) for s in self.state) if isinstance(self.state, tuple) \
                else self.state.index_select(1, rows)
            logits = self.model.decode_step(self.previous[rows], state, self.context[rows], memory,
                                            Control(mask=mask, weights=weights)).logits
        return (torch.log_softmax if log else torch.softmax)(logits.float(), dim=-1)


def js_distance(a: Tensor, b: Tensor) -> Tensor:
    """Jensen–Shannon distance (base 2, in [0, 1]) between the rows of a and b; as scipy's jensenshannon."""
    return js_divergence(a, b).clamp(min=0).sqrt()


def js_divergence(a: Tensor, b: Tensor) -> Tensor:
    """Jensen–Shannon divergence (base 2) between the rows of a and b: ½ KL(a‖m) + ½ KL(b‖m), m = (a + b) / 2."""
    m = 0.5 * (a + b)
    log_m = m.clamp_min(1e-30).log()
    kl = lambda p: (p * (p.clamp_min(1e-30).log() - log_m)).sum(-1)  # noqa: E731 (0 log 0 = 0, finite gradients)
    return 0.5 * (kl(a) + kl(b)) / math.log(2)


def _adversarial(start: _StepStart, alpha: Tensor, p: Tensor, epsilon: float, permuted: Tensor) -> Tensor:
    """Per step, an α̃ as far from α_t in JSD as found while TVD(ŷ_t(α̃), ŷ_t(α_t)) <= ε (Jain & Wallace §4).

    Gradient ascent (Adam) on the logits of α̃ from a few starts per step, on JSD(α̃, α_t) − a penalty for
    TVD past ε; the answer is the farthest α̃ met that kept the output within ε: the uniform α, the permutation
    and every one-hot α count too, as they are, and α_t itself always qualifies. The searches start from those
    of them with the best JSD − penalty (all scored in one batched step)."""
    T, S = alpha.shape
    device = alpha.device
    steps = torch.arange(T, device=device)
    candidates = torch.cat([torch.full((T, 1, S), 1.0 / S, device=device), permuted.unsqueeze(1),
                            torch.eye(S, device=device).expand(T, S, S)], dim=1)  # (T, C, S)
    C = candidates.shape[1]
    mixed = _MixedReadout(start, alpha, p)
    within = epsilon * FEASIBLE
    with torch.no_grad():  # every candidate as it is: the best one within ε is the answer to beat
        q = mixed.probs(candidates)
        tvd = 0.5 * (q - p.unsqueeze(1)).abs().sum(-1)  # (T, C)
        jsd = js_divergence(candidates, alpha.unsqueeze(1).expand_as(candidates))
        score = jsd - 10.0 * (tvd - epsilon).clamp(min=0)
        feasible = torch.where(tvd <= within, jsd, torch.full_like(jsd, -1.0))
        k = feasible.argmax(dim=1)
        found = feasible[steps, k] > 0
        best = torch.where(found.unsqueeze(1), candidates[steps, k], alpha)
        best_jsd = torch.where(found, feasible[steps, k], torch.zeros(T, device=device))
    K = min(ADVERSARY_STARTS, C)
    chosen = score.topk(K, dim=1).indices  # (T, K)
    smooth = 0.98 * candidates + 0.02 / S  # the search's logits must be finite: one-hots start nearly one-hot
    logits = smooth.gather(1, chosen.unsqueeze(2).expand(T, K, S)).log().clone().requires_grad_()
    target = alpha.unsqueeze(1).expand(T, K, S)
    optimiser = torch.optim.Adam([logits], lr=ADVERSARY_LR)
    for iteration in range(ADVERSARY_STEPS + 1):
        with torch.enable_grad():
            tilde = torch.softmax(logits, dim=-1)  # (T, K, S)
            q = mixed.probs(tilde)
            tvd = 0.5 * (q - p.unsqueeze(1)).abs().sum(-1)  # (T, K)
            jsd = js_divergence(tilde, target)
            with torch.no_grad():  # keep the farthest α̃ that stayed within ε
                ok = (tvd <= within) & (jsd > best_jsd.unsqueeze(1))
                if ok.any():
                    gain = torch.where(ok, jsd, torch.full_like(jsd, -1.0))
                    k = gain.argmax(dim=1)  # (T,)
                    better = ok.any(dim=1)
                    best = torch.where(better.unsqueeze(1), tilde[steps, k], best)
                    best_jsd = torch.where(better, jsd[steps, k], best_jsd)
            if iteration == ADVERSARY_STEPS:
                break
            loss = (-jsd + (100.0 / epsilon) * (tvd - epsilon).clamp(min=0) ** 2).sum()
            optimiser.zero_grad()
            (grad,) = torch.autograd.grad(loss, logits)
            logits.grad = grad
            optimiser.step()
    return best.detach()
