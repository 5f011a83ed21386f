"""Training's two recurrences, each one autograd node with a hand-written backward pass.

`DecoderLoop`: under teacher forcing every y_{t-1} is known, so training runs `Seq2Seq.decode_step`'s
equations for all steps of a batch in one node instead of a few dozen nodes per step:

    step 1    s_t = GRU(s_{t-1}, [y_{t-1}; c_{t-1}])
    step 2    q_t = Query(s_t)
    step 3    e_ti = score(q_t, k_i),  α_t = softmax(e_t),  c_t = Σ_i α_ti v_i

`GRUScan` (`gru_encoder`): the GRU encoder h_i = GRU(h_{i-1}, x_i), each direction of each layer.

Why: at the PyTorch tutorial's sizes autograd's per-step backward spent most of a training step on small
weight-gradient products (one per step and weight, each written out and added up), on zero-filled
(B, S, D) gradients of the per-step key and value views, and on bookkeeping; nn.GRU also ran every
padding position. Here the weight gradients are one matrix product per weight over every row of every
step, the value (and dot-product key) gradients one product per row after the loop, input products run
once for all steps (`gru_input`; with a task's few symbols, as products of the embedding table's rows,
`embedded_product`), and rows sorted longest first let step t run only the rows still going (a prefix,
as views).

`real_keys_and_values`: on a padded batch, k_i = Key(h_i) and v_i = Value(h_i) of the real positions only.

Only what training needs is covered: GRU cells, a one-layer decoder with attention, no interventions,
temperature 1, on the CPU, and only while autograd records. explorer/training/training_forward.py chooses this
path where it applies; every other model, and everything shown in the app (traces, decoding), runs explorer/engine/model.py's
`decode_step` and nn.GRU. tests/test_fused.py checks that both paths give the same outputs and gradients.

Under bfloat16 autocast (training's `bf16` option) the products around the two recurrences run in bfloat16,
and the recurrences themselves in float32 (`_float32_inside`): their in-place, `out=` arithmetic and the
state carried from step to step keep full precision, and their backward passes stay hand-written.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from explorer.engine.layers import padding_mask
from explorer.engine.model import Memory, Seq2Seq
from explorer.engine.teacher_forced import by_target_length, read_out_steps, stacked_rows


def applies(model: Any) -> bool:
    """Whether `model`'s teacher-forced training may run `DecoderLoop` (a one-layer GRU with attention,
    while autograd records)."""
    cfg = model.cfg
    return cfg.cell == "gru" and cfg.layers == 1 and cfg.attention != "none" and torch.is_grad_enabled()


def gru_input(model: Any, tgt_in: Tensor, place: Tensor) -> Tensor:
    """W_ih[:, :E] y_{t-1} + b_ih for the running rows of every step at once: the part of step 1's input
    product that does not wait for c_{t-1}. tgt_in (B, T) ids, place (N,) the running rows' places in
    tgt_in.view(B·T) -> (N, 3H).

    While embed_dropout is on, the embeddings are looked up and dropped out over tgt_in whole, as
    `teacher_forced.stepwise` does, so the masks are the reference's own (same generator, same order of draws).
    """
    cell = model.cells[0]
    E = model.cfg.embed
    if embeddings_drop(model):
        rows = model.embedded(tgt_in).reshape(-1, E).index_select(0, place)  # (N, E)
        return torch.addmm(cell.bias_ih, rows, cell.weight_ih[:, :E].t())
    return embedded_product(model.embed, cell.weight_ih[:, :E].unsqueeze(0), cell.bias_ih.unsqueeze(0),
                            tgt_in.reshape(-1).index_select(0, place).unsqueeze(0))[0]


def embeddings_drop(module: Any) -> bool:
    """Whether `module` (a Seq2Seq or its Encoder) drops out its embeddings now (embed_dropout, training)."""
    return bool(module.cfg.embed_dropout) and module.training


def embedded_product(embed: torch.nn.Embedding, weight: Tensor, bias: Tensor, ids: Tensor) -> Tensor:
    """W_p e(ids[p, j]) + b_p for P weights at once: weight (P, F, E), bias (P, F), ids (P, N), never padding
    -> (P, N, F).

    Why: an embedding lookup picks rows, and picking rows commutes with a product, so with fewer symbols
    than lookups (a task's dozen symbols against hundreds of tokens a batch) the table's V rows are
    multiplied once and the products picked: the same numbers (to rounding) for V rows' work instead of
    N's, forward and backward. A large vocabulary (translation) multiplies the looked-up rows as before.
    """
    P, N = ids.shape
    table = embed.weight
    V = table.shape[0]
    if V > N:
        return torch.baddbmm(bias.unsqueeze(1), embed(ids), weight.transpose(1, 2))
    products = torch.baddbmm(bias.unsqueeze(1), table.expand(P, V, -1), weight.transpose(1, 2))  # (P, V, F)
    flat = ids + V * torch.arange(P, device=ids.device).unsqueeze(1)  # row of products.view(P * V, F)
    return products.view(P * V, -1).index_select(0, flat.view(-1)).view(P, N, -1)


def decoder_loop(model: Any, gi_e: Tensor, s0: Tensor, keys: Tensor, values: Tensor, mask: Tensor,
                 running: list[int]) -> tuple[Tensor, Tensor, Tensor]:
    """s_t, c_t and α_t of every running row of every step, stacked step after step (N, ·) where N =
    Σ running; step t runs rows [0, running[t]) (the batch is sorted longest target first).

    gi_e (N, 3H) from `gru_input`, s0 (B, H), keys and values (B, S, D), mask (B, S) True on real tokens.
    """
    cell, attention = model.cells[0], model.attention
    E = model.cfg.embed
    w = attention.w.weight[0] if attention.w is not None else None
    return DecoderLoop.apply(gi_e, s0, keys, values, cell.weight_ih[:, E:], cell.weight_hh, cell.bias_hh,
                             attention.query.weight, attention.query.bias, w, mask, tuple(running),
                             model.cfg.attention)


def _offsets(running: tuple[int, ...]) -> list[int]:
    """Where each step's rows start in the stacked (N, ·) tensors."""
    out, total = [], 0
    for n in running:
        out.append(total)
        total += n
    return out


def _gru_cell(gi: Tensor, gh: Tensor, s_prev: Tensor, gates: Tensor, hidden_n: Tensor | None, out: Tensor) -> Tensor:
    """s_t = (1 − z) n + z s_{t-1} (nn.GRUCell's equations) for one step's rows, written into `out`;
    keeps [r, z, n] in `gates` (·, 3H) and, given `hidden_n`, W_hn s_{t-1} + b_hn there for the backward
    pass. gi: W_ih x_t + b_ih, gh: W_hh s_{t-1} + b_hh (·, 3H); any leading dimensions (directions)."""
    H = s_prev.shape[-1]
    r_z = torch.add(gi[..., :2 * H], gh[..., :2 * H], out=gates[..., :2 * H]).sigmoid_()  # r and z at once
    h_n = gh[..., 2 * H:]
    if hidden_n is not None:
        hidden_n.copy_(h_n)
    new = torch.addcmul(gi[..., 2 * H:], r_z[..., :H], h_n, out=gates[..., 2 * H:]).tanh_()
    return torch.addcmul(new, r_z[..., H:], s_prev - new, out=out)


def _gru_cell_backward(ds: Tensor, s_prev: Tensor, gates: Tensor, hidden_n: Tensor, d_gi: Tensor,
                       d_gh: Tensor, direct: Tensor | None = None) -> Tensor:
    """`_gru_cell` backward: writes the gradients of gi and gh into d_gi and d_gh; returns (in `direct`, if
    given) the part of s_{t-1}'s gradient that does not go through W_hh (the caller adds d_gh W_hh)."""
    H = s_prev.shape[-1]
    r, z, new = gates[..., :H], gates[..., H:2 * H], gates[..., 2 * H:]
    # through n = tanh(i_n + r (W_hn s_{t-1} + b_hn)): dn (1 − n²), with dn = ds (1 − z)
    d_new = torch.addcmul(ds, ds, z, value=-1).mul_(torch.addcmul(torch.ones_like(new), new, new, value=-1))
    torch.mul(d_new, hidden_n, out=d_gi[..., :H]).mul_(torch.addcmul(r, r, r, value=-1))  # r (1 − r)
    torch.mul(ds, s_prev - new, out=d_gi[..., H:2 * H]).mul_(torch.addcmul(z, z, z, value=-1))  # z (1 − z)
    d_gi[..., 2 * H:] = d_new
    d_gh[..., :2 * H] = d_gi[..., :2 * H]
    torch.mul(d_new, r, out=d_gh[..., 2 * H:])
    return torch.mul(ds, z, out=direct) if direct is not None else ds * z


def _previous(first: Tensor, stacked: Tensor, running: tuple[int, ...], offsets: list[int]) -> Tensor:
    """The state each stacked row started its step from (rows along dim -2): first's first running[0]
    rows for step 0, then each step's rows of the step before; the input of the weight gradients'
    single products."""
    return torch.cat([first.narrow(-2, 0, running[0])]
                     + [stacked.narrow(-2, offsets[t - 1], n) for t, n in enumerate(running) if t > 0], dim=-2)


def _float32_inside(function: type[torch.autograd.Function]) -> type[torch.autograd.Function]:
    """`function` with its floating inputs cast to float32 and autocast off inside its forward and backward
    passes, on the CPU and on a GPU (torch.amp.custom_fwd / custom_bwd); without autocast, unchanged.

    Why: under autocast the products before it (embeddings, keys, values) give bfloat16 tensors, which its
    `out=` products would refuse, and autocast would otherwise reach into its loops step by step."""
    forward, backward = function.forward, function.backward
    for device in ("cpu", "cuda"):
        forward = torch.amp.custom_fwd(forward, device_type=device, cast_inputs=torch.float32)
        backward = torch.amp.custom_bwd(backward, device_type=device)
    function.forward, function.backward = staticmethod(forward), staticmethod(backward)
    return function


@_float32_inside
class DecoderLoop(torch.autograd.Function):
    """Steps 1-3 for every step of a teacher-forced batch, forward and backward (see the module docstring).

    s_t feeds two products, W_hh s_t + b_hh (step t+1's GRU) and q_t = W_q s_t + b_q (step t's query), so
    they run as one, s_t [W_hh; W_q]ᵀ, kept for every step in `projected` (N, 3H + D): its W_hh part is the
    next step's gh and the GRU's W_hn s + b_hn (first rows: the next step runs a prefix), its W_q part the
    queries. The backward pass mirrors it: one product sends both gradients back to s_t, and one product
    over the stacked rows gives both weights' gradients. The additive score takes 2q + 2k (see `forward`),
    so its W_q part holds 2q.
    """

    @staticmethod
    def forward(ctx: Any, gi_e: Tensor, s0: Tensor, keys: Tensor, values: Tensor, w_ic: Tensor, w_hh: Tensor,
                b_hh: Tensor, w_q: Tensor, b_q: Tensor, w: Tensor | None, mask: Tensor,
                running: tuple[int, ...], kind: str) -> tuple[Tensor, Tensor, Tensor]:
        B, S, D = keys.shape
        H = w_hh.shape[1]
        N = sum(running)
        offsets = _offsets(running)
        additive = kind == "additive"
        scale = 2.0 if additive else 1.0  # what the W_q part of `projected` holds: scale · q
        w_sq = torch.cat([w_hh, scale * w_q])  # (3H + D, H)
        b_sq = torch.cat([b_hh, scale * b_q])
        tops = s0.new_empty(N, H)  # s_t
        contexts = s0.new_empty(N, D)  # c_t
        alphas = s0.new_empty(N, S)  # α_t
        gates = s0.new_empty(N, 3 * H)  # r, z and n of the GRU
        projected = s0.new_empty(N, 3 * H + D)  # s_t [W_hh; scale W_q]ᵀ + [b_hh; scale b_q]
        # additive: u = σ(2q + 2k), since tanh x = 2σ(2x) − 1 gives wᵀ tanh(q + k) = 2 wᵀ u − Σ w (softmax ignores
        # the − Σ w every score shares); torch's CPU sigmoid is ~6x faster than its tanh
        squashed = s0.new_empty(N, S, D) if additive else None
        w2 = 2 * w if w is not None else None
        hidden = ~mask
        w_ic_t, w_sq_t = w_ic.t(), w_sq.t()
        gh0 = torch.addmm(b_hh, s0, w_hh.t())  # (B, 3H) W_hh s_0 + b_hh
        s, c, gh = s0, s0.new_zeros(B, D), gh0
        for t, n in enumerate(running):
            rows = slice(offsets[t], offsets[t] + n)
            s_prev, gh = s[:n], gh[:n]
            gi = torch.addmm(gi_e[rows], c[:n], w_ic_t)  # (n, 3H) W_ih [y_{t-1}; c_{t-1}] + b_ih
            s = _gru_cell(gi, gh, s_prev, gates[rows], None, tops[rows])  # (n, H)
            both = torch.addmm(b_sq, s, w_sq_t, out=projected[rows])  # (n, 3H + D)
            gh, q = both[:, :3 * H], both[:, 3 * H:]  # W_hh s_t + b_hh, scale · q_t
            if additive:
                u = torch.add(q.unsqueeze(1), keys[:n], alpha=2, out=squashed[rows]).sigmoid_()  # (n, S, D)
                e = u @ w2
            else:
                e = torch.bmm(q.unsqueeze(1), keys[:n].transpose(1, 2)).squeeze(1)  # (n, S), as Attention.score
                if kind == "scaled_dot":
                    e = e / math.sqrt(D)
            a = torch.softmax(e.masked_fill_(hidden[:n], float("-inf")), dim=-1)
            alphas[rows] = a
            c = torch.bmm(a.unsqueeze(1), values[:n], out=contexts[rows].unsqueeze(1)).squeeze(1)  # (n, D)
        ctx.running, ctx.kind, ctx.scale = running, kind, scale
        ctx.save_for_backward(s0, keys, values, w_ic, w_sq, w, tops, contexts, alphas, gates, projected, gh0,
                              squashed)
        ctx.set_materialize_grads(False)
        return tops, contexts, alphas

    @staticmethod
    def backward(ctx: Any, d_tops: Tensor | None, d_contexts: Tensor | None,
                 d_alphas: Tensor | None) -> tuple[Tensor | None, ...]:
        (s0, keys, values, w_ic, w_sq, w, tops, contexts, alphas, gates, projected, gh0,
         squashed) = ctx.saved_tensors
        running, kind, scale = ctx.running, ctx.kind, ctx.scale
        B, S, D = keys.shape
        H = w_sq.shape[1]
        w_hh = w_sq[:3 * H]  # [W_hh; scale W_q]
        N = sum(running)
        offsets = _offsets(running)
        additive = squashed is not None
        d_gi = s0.new_empty(N, 3 * H)  # gradient of W_ih [y_{t-1}; c_{t-1}] + b_ih
        # gradient of `projected`: step t's block holds step t+1's d gh in its first rows (zero in the rest,
        # and in the last step's) and d(scale · q_t)
        d_projected = s0.new_empty(N, 3 * H + D)
        d_projected[offsets[-1]:, :3 * H] = 0
        d_gh0 = s0.new_zeros(B, 3 * H)
        d_scores = s0.new_empty(N, S)  # gradient of e_t (dot: times 1/√D when scaled)
        d_contexts_all = s0.new_empty(N, D)  # gradient of c_t, from the readout and from step t+1
        d_keys = torch.zeros_like(keys) if additive else None  # additive: Σ_t de_t u (1 − u), times 4w at the end
        d_s, d_c = s0.new_zeros(B, H), s0.new_zeros(B, D)  # what steps t+1.. send back to s_t and c_t
        w2 = 2 * w if w is not None else None
        for t in range(len(running) - 1, -1, -1):
            n = running[t]
            rows = slice(offsets[t], offsets[t] + n)
            dc = d_contexts_all[rows]
            if d_contexts is not None:
                torch.add(d_c[:n], d_contexts[rows], out=dc)
            else:
                dc.copy_(d_c[:n])
            a = alphas[rows]
            # c_t = Σ_i α_ti v_i (the values' gradient Σ_t α_ti dc_t: one product per row after the loop)
            da = torch.bmm(dc.unsqueeze(1), values[:n].transpose(1, 2)).squeeze(1)  # (n, S)
            if d_alphas is not None:
                da = da + d_alphas[rows]
            # α_t = softmax(e_t); hidden positions have α = 0 and get no gradient
            de = a * (da - (a * da).sum(-1, keepdim=True))  # (n, S)
            dq = d_projected[rows, 3 * H:]  # gradient of scale · q_t
            if additive:  # e = 2 wᵀ σ(2q + 2k) − Σ w: d(2q) = d(2k) = 2 e' w u (1 − u)
                u = squashed[rows]
                d_scores[rows] = de
                slope = torch.addcmul(u, u, u, value=-1)  # (n, S, D) u (1 − u)
                torch.mul(torch.bmm(de.unsqueeze(1), slope).squeeze(1), w2, out=dq)
                d_keys[:n].addcmul_(slope, de.unsqueeze(-1))
            else:
                if kind == "scaled_dot":
                    de = de / math.sqrt(D)
                d_scores[rows] = de  # the keys' gradient Σ_t de_ti q_t: one product per row after the loop
                dq.copy_(torch.bmm(de.unsqueeze(1), keys[:n]).squeeze(1))  # (n, D)
            # s_t feeds step t+1's gh and q_t: both gradients back in one product
            ds = d_s[:n] if d_tops is None else d_s[:n] + d_tops[rows]
            ds = torch.addmm(ds, d_projected[rows], w_sq)
            if t == 0:
                s_prev, gh, d_gh = s0[:n], gh0[:n], d_gh0[:n]
            else:
                before = slice(offsets[t - 1], offsets[t - 1] + n)  # the first n rows of step t-1's block
                s_prev, gh, d_gh = tops[before], projected[before, :3 * H], d_projected[before, :3 * H]
                d_projected[offsets[t - 1] + n:offsets[t], :3 * H] = 0  # rows that stop at step t-1
            _gru_cell_backward(ds, s_prev, gates[rows], gh[:, 2 * H:], d_gi[rows], d_gh, direct=d_s[:n])
            torch.mm(d_gi[rows], w_ic, out=d_c[:n])  # W_ih [y_{t-1}; c_{t-1}] = W_iy y_{t-1} + W_ic c_{t-1}
        d_s0 = torch.addmm(d_s, d_gh0, w_hh)  # s_0 feeds step 1's GRU directly and through W_hh
        # Weight gradients: one product per weight over every row of every step.
        prev_c = _previous(contexts.new_zeros(running[0], D), contexts, running, offsets)  # c_{t-1} (N, D)
        d_w_ic = d_gi.t() @ prev_c
        d_w_sq = d_projected.t() @ tops  # (3H + D, H)
        d_b_sq = d_projected.sum(0)
        d_w_hh = torch.addmm(d_w_sq[:3 * H], d_gh0.t(), s0)
        d_b_hh = d_b_sq[:3 * H] + d_gh0.sum(0)
        d_w_q, d_b_q = scale * d_w_sq[3 * H:], scale * d_b_sq[3 * H:]
        # Σ over each row's steps as one (S, T) x (T, D) product per row, the steps laid out (B, T, ·)
        T = len(running)
        rows, steps = stacked_rows(running, s0.device)
        place = rows * T + steps
        by_row = lambda x: x.new_zeros(B * T, x.shape[1]).index_copy_(0, place, x).view(B, T, -1)  # noqa: E731
        d_values = by_row(alphas).transpose(1, 2) @ by_row(d_contexts_all)  # (B, S, D)
        d_w = None
        if not additive:
            d_keys = by_row(d_scores).transpose(1, 2) @ by_row(projected[:, 3 * H:])
        else:
            d_keys.mul_(2 * w2)  # d k = 2 d(2k)
            # ∂e/∂w = 2u − 1 (the −1 sums to nothing: softmax's gradient adds up to 0 in each row)
            d_w = 2 * (d_scores.view(1, N * S) @ squashed.view(N * S, D)).squeeze(0) - d_scores.sum()
        return (d_gi, d_s0, d_keys, d_values, d_w_ic, d_w_hh, d_b_hh, d_w_q, d_b_q, d_w, None, None, None)


@_float32_inside
class GRUScan(torch.autograd.Function):
    """A GRU layer over rows sorted longest first, in P directions at once (each its own weights, the same
    rows): step t runs rows [0, running[t]) (no work on padding). gi (P, N, 3H) W_ih x + b_ih for every
    stacked row, h0 (P, B, H), w_hh (P, 3H, H), b_hh (P, 3H) -> h (P, N, H)."""

    @staticmethod
    def forward(ctx: Any, gi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor,
                running: tuple[int, ...]) -> Tensor:
        P, N, H = gi.shape[0], gi.shape[1], w_hh.shape[2]
        offsets = _offsets(running)
        out = gi.new_empty(P, N, H)
        gates = gi.new_empty(P, N, 3 * H)
        hidden_n = gi.new_empty(P, N, H)
        w_hh_t, b_hh = w_hh.transpose(1, 2), b_hh.unsqueeze(1)
        h = h0
        for t, n in enumerate(running):
            rows = slice(offsets[t], offsets[t] + n)
            h_prev = h[:, :n]
            gh = torch.baddbmm(b_hh, h_prev, w_hh_t)  # (P, n, 3H) W_hh h_{t-1} + b_hh
            h = _gru_cell(gi[:, rows], gh, h_prev, gates[:, rows], hidden_n[:, rows], out[:, rows])
        ctx.running = running
        ctx.save_for_backward(h0, w_hh, out, gates, hidden_n)
        return out

    @staticmethod
    def backward(ctx: Any, d_out: Tensor) -> tuple[Tensor | None, ...]:
        h0, w_hh, out, gates, hidden_n = ctx.saved_tensors
        running = ctx.running
        P, N, H = out.shape
        offsets = _offsets(running)
        d_gi, d_gh = out.new_empty(P, N, 3 * H), out.new_empty(P, N, 3 * H)
        d_h = torch.zeros_like(h0)  # what steps t+1.. send back to h_t
        for t in range(len(running) - 1, -1, -1):
            n = running[t]
            rows = slice(offsets[t], offsets[t] + n)
            h_prev = h0[:, :n] if t == 0 else out[:, offsets[t - 1]:offsets[t - 1] + n]
            direct = _gru_cell_backward(d_h[:, :n] + d_out[:, rows], h_prev, gates[:, rows], hidden_n[:, rows],
                                        d_gi[:, rows], d_gh[:, rows])
            d_h[:, :n] = torch.baddbmm(direct, d_gh[:, rows], w_hh)
        d_w_hh = d_gh.transpose(1, 2) @ _previous(h0, out, running, offsets)  # (P, 3H, H)
        return d_gi, d_h, d_w_hh, d_gh.sum(1), None


def encoder_applies(encoder: Any) -> bool:
    """Whether `encoder`'s RNN may run as `GRUScan`s (a GRU encoder, while autograd records)."""
    return encoder.cfg.cell == "gru" and torch.is_grad_enabled()


def gru_encoder(encoder: Any, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """The GRU encoder's forward over input ids src (B, S): every h_i (B, S, dirs·H), zero on padding, and
    the final states (L·dirs, B, H), as Encoder.forward's nn.GRU loop computes them.

    Rows are sorted longest first, so position j of every sequence still running is a prefix of the rows;
    the right-to-left direction reads position len − 1 − j at its step j, so it runs the same prefixes,
    and both directions of a layer run as one `GRUScan`.
    """
    B, S = src.shape
    H = encoder.cfg.hidden
    device = src.device
    lengths = lengths.to(device)
    order = torch.argsort(lengths, descending=True, stable=True)
    back = torch.argsort(order)
    ordered = lengths.index_select(0, order)
    running = tuple(n for n in (ordered.unsqueeze(0) > torch.arange(S, device=device).unsqueeze(1))
                    .sum(1).tolist() if n)
    rows, steps = stacked_rows(running, device)
    # row b's input at step j: position j left to right, position len_b − 1 − j right to left (rows of (B·S, ·))
    places = [rows * S + steps, rows * S + ordered.index_select(0, rows) - 1 - steps]
    offsets = torch.tensor(_offsets(running), device=device)
    last = offsets.index_select(0, ordered - 1) + torch.arange(B, device=device)  # each row's final step
    P = 2 if encoder.cfg.bidirectional else 1
    where = torch.cat(places[:P])
    h0 = encoder.embed.weight.new_zeros(P, B, H)
    finals = []
    x = None  # the layer's input (B, S, ·) in sorted order: after the first layer, or dropped-out embeddings
    if embeddings_drop(encoder):  # masks over the batch in its own order, as Encoder.forward draws them
        x = encoder.embedded(src).index_select(0, order)
    for layer, directions in enumerate(encoder.rnn):
        stacked = lambda name: torch.stack([getattr(rnn, name) for rnn in directions])  # noqa: E731
        w_ih, b_ih = stacked("weight_ih_l0"), stacked("bias_ih_l0")
        if x is None:
            ids = src.index_select(0, order).reshape(B * S).index_select(0, where).view(P, len(rows))
            gi = embedded_product(encoder.embed, w_ih, b_ih, ids)  # (P, N, 3H)
        else:
            inputs = x.reshape(B * S, -1).index_select(0, where).view(P, len(rows), -1)  # (P, N, in)
            gi = torch.baddbmm(b_ih.unsqueeze(1), inputs, w_ih.transpose(1, 2))
        h = GRUScan.apply(gi, h0, stacked("weight_hh_l0"), stacked("bias_hh_l0"), running)  # (P, N, H)
        finals.extend(h.index_select(1, last).index_select(1, back).unbind(0))
        outs = [h.new_zeros(B * S, H).index_copy(0, places[d], h[d]).view(B, S, H) for d in range(P)]
        x = torch.cat(outs, dim=-1) if P > 1 else outs[0]
        if layer + 1 < len(encoder.rnn):  # dropout's masks fall on the rows in their own order, as in nn.GRU's loop
            x = encoder.dropout(x.index_select(0, back)).index_select(0, order)
    return x.index_select(0, back), torch.stack(finals)


def real_keys_and_values(attention: nn.Module, h: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """k_i = Key(h_i) and v_i = Value(h_i) (B, S, D), multiplying only the real positions of a padded batch;
    padding, which attention never reads, gets k = 0 and v = b_v. Without padding, Key(h) and Value(h)."""
    key, value = attention.key, attention.value
    if bool(mask.all()):
        return key(h), value(h)
    B, S, He = h.shape
    real = mask.reshape(-1).nonzero().squeeze(1)
    h_real = h.reshape(B * S, He).index_select(0, real)
    D = key.out_features
    keys = h.new_zeros(B * S, D).index_copy(0, real, key(h_real)).view(B, S, D)
    values = value.bias.expand(B * S, D).index_copy(0, real, value(h_real)).view(B, S, D)
    return keys, values


def encode(model: Seq2Seq, src: Tensor, lengths: Tensor) -> Memory:
    """`Seq2Seq.encode`'s memory for training: a GRU encoder through `gru_encoder` (while autograd records),
    keys and values of the real positions only."""
    model.check_length(src)
    encoder = model.encoder
    h, final = gru_encoder(encoder, src, lengths) if encoder_applies(encoder) else encoder(src, lengths)
    mask = padding_mask(src, lengths)
    if model.attention is None:
        return Memory(h, None, None, mask, model.initial_state(final))
    keys, values = real_keys_and_values(model.attention, h, mask)
    return Memory(h, keys, values, mask, model.initial_state(final))


def teacher_forced(model: Seq2Seq, memory: Memory, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
    """`Seq2Seq.decode_training` under full teacher forcing with the steps in one `DecoderLoop` (where
    `applies`): logits (B, T, V) and weights (B, T, S)."""
    batch = by_target_length(memory, tgt_in)
    gi_e = gru_input(model, batch.tgt_in, batch.place)
    sorted_memory = batch.memory
    top, context, flat = decoder_loop(model, gi_e, sorted_memory.s0[0], sorted_memory.keys, sorted_memory.values,
                                      sorted_memory.mask, batch.running)
    return read_out_steps(model, batch, top, context, flat)
