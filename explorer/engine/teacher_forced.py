"""Training's teacher-forced decoder: `Seq2Seq.decode_training` under full teacher forcing with fewer, larger
operations, the steps still through `decode_step`.

Rows are taken longest target first (`by_target_length`), so the rows still running at step t are a prefix of
the batch and every step works on views; finished rows' outputs stay zero (the loss ignores padding). The
embeddings and the readout run once for all steps. explorer/training/training_forward.py chooses it (and
explorer/engine/fused.py's loop shares its layout); tests/test_model.py holds it to the reference's steps.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from explorer.data.vocab import PAD_ID
from explorer.engine.model import Memory, Seq2Seq


class SortedBatch(NamedTuple):
    """A teacher-forced batch with its rows longest target first (`by_target_length`)."""

    memory: Memory  # the encoder's memory, rows in the sorted order
    tgt_in: Tensor  # (B, T) decoder inputs, sorted
    running: list[int]  # rows still running at each step (a prefix of the sorted rows)
    place: Tensor  # (N,) where each stacked row goes in the (B * T, ·) outputs: row b at step t is b * T + t
    back: Tensor | None  # the order back to the caller's rows; None when they were sorted already


def stacked_rows(running: list[int] | tuple[int, ...], device: torch.device) -> tuple[Tensor, Tensor]:
    """For each row of the (N, ·) stacks, the batch row and the step it belongs to: step t's rows
    [0, running[t]) follow step t-1's. Row b at step t of a (B, W) layout is then rows * W + steps."""
    rows = torch.cat([torch.arange(n, device=device) for n in running])
    steps = torch.cat([torch.full((n,), t, device=device) for t, n in enumerate(running)])
    return rows, steps


def by_target_length(memory: Memory, tgt_in: Tensor) -> SortedBatch:
    """The batch sorted longest target first, with the rows running at each step and where they go."""
    B, T = tgt_in.shape
    steps = (tgt_in != PAD_ID).sum(1)  # (B,) decoder steps per row: <sos> and the target
    order = torch.argsort(steps, descending=True, stable=True)
    in_order = bool((order == torch.arange(B, device=order.device)).all())
    if not in_order:
        memory, tgt_in, steps = memory.select(order), tgt_in.index_select(0, order), steps.index_select(0, order)
    running = (steps.unsqueeze(0) > torch.arange(T, device=steps.device).unsqueeze(1)).sum(1).tolist()
    running = [n for n in running if n]
    rows, at = stacked_rows(running, tgt_in.device)
    return SortedBatch(memory, tgt_in, running, rows * T + at, None if in_order else torch.argsort(order))


def teacher_forced(model: Seq2Seq, memory: Memory, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
    """decode_training() with every y_{t-1} known: logits (B, T, V) and weights (B, T, S), zero where a row's
    target is over."""
    batch = by_target_length(memory, tgt_in)
    top, context, flat = stepwise(model, batch.memory, batch.tgt_in, batch.running)
    return read_out_steps(model, batch, top, context, flat)


def read_out_steps(model: Seq2Seq, batch: SortedBatch, top: Tensor, context: Tensor | None,
                   flat: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """Step 4 for every running row of every step, laid out as the caller's batch: s_t (N, H), c_t (N, D)
    and α_t (N, S), stacked step after step -> logits (B, T, V) and weights (B, T, S), zero where a row's
    target is over."""
    B, T = batch.tgt_in.shape
    packed = model.readout(top, context)  # (N, V)
    logits = packed.new_zeros(B * T, packed.shape[-1]).index_copy(0, batch.place, packed).view(B, T, -1)
    alphas = None
    if flat is not None:
        alphas = flat.new_zeros(B * T, flat.shape[-1]).index_copy(0, batch.place, flat).view(B, T, -1)
    if batch.back is not None:
        logits = logits.index_select(0, batch.back)
        alphas = alphas.index_select(0, batch.back) if alphas is not None else None
    return logits, alphas


def stepwise(model: Seq2Seq, memory: Memory, tgt_in: Tensor,
             running: list[int]) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """The teacher-forced steps through `decode_step`: s_t, c_t and α_t of the running rows of every
    step, one step's rows after another's (N, ·)."""
    B = tgt_in.shape[0]
    # y_{t-1}'s embeddings looked up at once and split by step (the backward pass stacks T slices once).
    embedded = model.embedded(tgt_in).unbind(1)  # T x (B, E)
    state, c = memory.s0, model.initial_context(B, tgt_in.device)
    views: dict[int, Memory] = {B: memory}  # the memory of the first n rows
    tops, contexts, weights = [], [], []
    for t, n in enumerate(running):
        if n not in views:
            cut = lambda x: None if x is None else x[:n]  # noqa: E731
            views[n] = Memory(memory.h[:n], cut(memory.keys), cut(memory.values), memory.mask[:n], None)
        c = c[:n] if c is not None else None
        state = (state[0][:, :n], state[1][:, :n]) if model.is_lstm else state[:, :n]
        step = model.decode_step(tgt_in[:n, t], state, c, views[n], embedded=embedded[t][:n], readout=False)
        tops.append(step.s)
        if step.weights is not None:
            weights.append(step.weights)
            contexts.append(step.context)
        state, c = step.state, step.context
    return torch.cat(tops), (torch.cat(contexts) if contexts else None), (torch.cat(weights) if weights else None)
