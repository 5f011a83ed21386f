"""Autoregressive decoding: greedy (batched), forced and teacher-forced, and beam search.

All of it loops over `Seq2Seq.decode_step`, the reference training's equations are held to (training's
fast path, explorer/engine/fused.py, is tested equal to it); the trace is the greedy loop with its steps kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
from torch import Tensor

from explorer.engine.devices import model_device
from explorer.engine.model import Control, Memory, Seq2Seq, Step
from explorer.record import BeamNode, BeamRecord, Candidate
from explorer.data.vocab import EOS_ID, PAD_ID, SOS_ID


@dataclass
class Decoded:
    """Greedy output of a batch: ids (B, T) padded after <eos>, the weights (B, T, S) and, if kept, every Step."""

    ids: Tensor
    lengths: Tensor  # (B,) tokens up to and including <eos> (or the cap)
    weights: Tensor | None
    steps: list[Step] | None


def batch_sources(sequences: Sequence[Sequence[int]], device: torch.device | None = None) -> tuple[Tensor, Tensor]:
    """Pad id lists into (B, S) plus their lengths (B,)."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    src = torch.full((len(sequences), int(lengths.max())), PAD_ID, dtype=torch.long)
    for i, s in enumerate(sequences):
        src[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return src.to(device), lengths.to(device)


def decode(model: Seq2Seq, memory: Memory, max_len: int | Sequence[int], *, target: Tensor | None = None,
           forced: Mapping[int, int] | None = None, controls: Mapping[int, Control] | None = None,
           default_control: Control | None = None, keep_steps: bool = False) -> Decoded:
    """Greedy decoding from <sos>; `target` (B, T) teacher-forces the fed tokens, `forced` {t: id} overrides
    the chosen token at step t, `controls` {t: Control} applies an intervention at step t.

    `max_len` caps the steps (<eos> included), one number for the batch or one per row
    (explorer/engine/lengths.py: what a user expects of each input); a row at its cap stops without <eos>.
    With a target, the chosen tokens are the target's (so the trace analyses an output the model
    may not have chosen) and decoding runs exactly T steps.
    """
    B = memory.h.shape[0]
    device = memory.h.device
    caps = torch.as_tensor(max_len, dtype=torch.long).expand(B)  # on the CPU: read here without a device sync
    steps_total = target.shape[1] if target is not None else int(caps.max())
    caps = caps.to(device)
    y = torch.full((B,), SOS_ID, dtype=torch.long, device=device)
    state, c = memory.s0, model.initial_context(B, device)
    finished = torch.zeros(B, dtype=torch.bool, device=device)
    lengths = torch.full((B,), steps_total, dtype=torch.long, device=device)
    ids, weights, kept = [], [], []
    for t in range(steps_total):
        control = (controls or {}).get(t, default_control)
        step = model.decode_step(y, state, c, memory, control)
        if target is not None:
            choice = target[:, t]
        else:
            choice = step.logits.argmax(-1)
            if forced and t in forced:
                choice = torch.full_like(choice, forced[t])
        choice = torch.where(finished, torch.full_like(choice, PAD_ID), choice)
        ids.append(choice)
        if step.weights is not None:
            weights.append(step.weights)
        if keep_steps:
            kept.append(step)
        ended = choice == EOS_ID
        if target is None:
            ended = ended | (caps <= t + 1)  # the row's last allowed step
        newly = ~finished & ended
        lengths = torch.where(newly, torch.full_like(lengths, t + 1), lengths)
        finished = finished | newly
        state, c, y = step.state, step.context, choice
        if target is None and bool(finished.all()):
            break
    return Decoded(torch.stack(ids, 1), lengths, torch.stack(weights, 1) if weights else None,
                   kept if keep_steps else None)


@torch.inference_mode()
def greedy_batch(model: Seq2Seq, sources: Sequence[Sequence[int]], max_len: int | Sequence[int] | None = None,
                 device: torch.device | None = None) -> Decoded:
    """Greedy outputs for many inputs at once (evaluation); padding is masked, so each equals its lone decode.
    `max_len`: the cap for all rows or each row's (lengths.output_caps); default the model's max_tgt_len.

    The inputs go to `device`, by default the model's (evaluation during training on a GPU)."""
    src, lengths = batch_sources(sources, device if device is not None else model_device(model))
    memory = model.encode(src, lengths)
    return decode(model, memory, model.cfg.max_tgt_len if max_len is None else max_len)


def strip_output(ids: Sequence[int]) -> list[int]:
    """Output ids up to (not including) <eos>, without padding."""
    out = []
    for i in ids:
        if i == EOS_ID or i == PAD_ID:
            break
        out.append(int(i))
    return out


@torch.inference_mode()
def beam_search(model: Seq2Seq, source: Sequence[int], width: int, max_len: int | None = None) -> list[Candidate]:
    """Beam search for one input; returns every finished (or capped) candidate, best first.

    Beams are batch rows of the same step function; width 1 is exactly greedy decoding.
    """
    return list(beam_record(model, source, width, max_len).candidates)


@torch.inference_mode()
def beam_record(model: Seq2Seq, source: Sequence[int], width: int, max_len: int | None = None) -> BeamRecord:
    """Beam search for one input, keeping every hypothesis it kept at every step (the beam tree)."""
    if width < 1:
        raise ValueError("beam width must be at least 1")
    max_len = max_len or model.cfg.max_tgt_len
    device = model_device(model)
    src, lengths = batch_sources([source], device)
    memory = model.encode(src, lengths)
    beams: list[tuple[tuple[int, ...], float, int]] = [((), 0.0, -1)]  # ids, log P, node index
    state, c = memory.s0, model.initial_context(1, device)
    done: list[tuple[Candidate, int]] = []
    nodes: list[dict] = []
    for t in range(max_len):
        n = len(beams)
        rows = torch.zeros(n, dtype=torch.long, device=device)
        mem = memory.select(rows)
        y = torch.tensor([b[0][-1] if b[0] else SOS_ID for b in beams], dtype=torch.long, device=device)
        step = model.decode_step(y, state, c, mem)
        log_probs = torch.log_softmax(step.logits, dim=-1)  # (n, V)
        total = torch.tensor([b[1] for b in beams], device=device).unsqueeze(1) + log_probs  # (n, V)
        flat = total.flatten()
        k = min(width, flat.numel())
        top = torch.topk(flat, k)  # ties resolve to the lowest index, like argmax
        V = log_probs.shape[1]
        keep_rows, next_beams = [], []
        for score, index in zip(top.values.tolist(), top.indices.tolist()):
            row, token = divmod(index, V)
            ids = beams[row][0] + (token,)
            node = len(nodes)
            nodes.append({"index": node, "step": t, "token": token, "log_prob": score, "parent": beams[row][2],
                          "finished": token == EOS_ID})
            if token == EOS_ID:
                done.append((Candidate(ids, score, True), node))
            else:
                keep_rows.append(row)
                next_beams.append((ids, score, node))
        if not next_beams or len(done) >= width:
            break
        index = torch.tensor(keep_rows, dtype=torch.long, device=device)
        state = tuple(s.index_select(1, index) for s in step.state) if isinstance(step.state, tuple) \
            else step.state.index_select(1, index)
        c = None if step.context is None else step.context.index_select(0, index)
        beams = next_beams
    else:
        done.extend((Candidate(ids, score, False), node) for ids, score, node in beams)
    if not done:
        done.extend((Candidate(ids, score, False), node) for ids, score, node in beams)
    ranked = sorted(done, key=lambda pair: pair[0].normalized, reverse=True)
    rank = {node: r for r, (_, node) in enumerate(ranked)}
    parents = {n["parent"] for n in nodes}
    kept = tuple(BeamNode(**n, pruned=not n["finished"] and n["index"] not in parents and n["index"] not in rank,
                          candidate=rank.get(n["index"])) for n in nodes)
    return BeamRecord(width, kept, tuple(cand for cand, _ in ranked))
