"""Building a trace: run the model on one input and keep every intermediate (the record is `explorer.record`).

The Trace is the contract between the engine and everything that shows or checks it (pages,
figures, exports, tests); it lives in the torch-free `explorer.record`. It is built here by
`decoding.decode` with its steps kept, i.e. by the very step function training and plain decoding use.
"""

from __future__ import annotations


import numpy as np
import torch

from explorer.engine.bundle import ModelBundle, Prepared
from explorer.engine.decoding import decode
from explorer.engine.devices import model_device
from explorer.errors import ExplorerError
from explorer.engine.lengths import output_cap
from explorer.engine.model import Control
from explorer.limits import check_temperature
from explorer.record import Intervention, Trace
from explorer.data.tasks import alignment_matrix
from explorer.data.vocab import SOS


def _controls(intervention: Intervention, source_len: int, steps: int,
              device: torch.device | None = None) -> tuple[Control | None, dict[int, Control]]:
    """Translate an intervention into per-step Controls for the step function (tensors on `device`)."""
    check_temperature(intervention.temperature)
    for pos in intervention.masked:
        if not 0 <= pos < source_len:
            raise ExplorerError(f"cannot mask position {pos + 1}: the input has positions 1–{source_len}")
    if len(set(intervention.masked)) >= source_len:
        raise ExplorerError("at least one input position must stay visible to attention")
    mask = None
    if intervention.masked:
        mask = torch.zeros(1, source_len, dtype=torch.bool, device=device)
        mask[0, list(intervention.masked)] = True
    base = Control(intervention.temperature, mask, None)
    per_step: dict[int, Control] = {}
    for t, pos in intervention.pins:
        if not 0 <= pos < source_len:
            raise ExplorerError(f"cannot pin attention to position {pos + 1}: the input has positions 1–{source_len}")
        if not 0 <= t < steps:
            raise ExplorerError(f"cannot pin at step {t + 1}: decoding has steps 1–{steps}")
        if pos in intervention.masked:  # all the weight on an input attention may not see: a contradiction
            raise ExplorerError(f"cannot pin attention to position {pos + 1}: it is masked (hidden from attention)")
        per_step[t] = Control(intervention.temperature, mask, torch.tensor([pos], device=device))
    needs_base = bool(intervention.masked) or intervention.temperature != 1.0
    return (base if needs_base else None), per_step


@torch.inference_mode()
def output_piece(bundle: ModelBundle, token: str) -> str:
    """The output token to force for what a user typed: the token itself when the model has it, else the one
    piece a subword model spells the word as ("Nous" is "▁Nous"); unchanged otherwise (trace says why)."""
    if token in bundle.tgt_vocab or bundle.subwords is None:
        return token
    pieces = bundle.tokenize_target(token)
    return pieces[0] if len(pieces) == 1 else token


def _spelt(bundle: ModelBundle, token: str) -> str:
    """How a subword model spells a word it has no single piece for, for the refusal's message."""
    if bundle.subwords is None or not token.strip():
        return ""
    pieces = bundle.tokenize_target(token)
    return f" (it spells {token!r} as {' '.join(pieces)}: force one piece, e.g. {pieces[0]!r})" if pieces else ""


def erasure_masks(source_len: int, device: torch.device | None = None) -> torch.Tensor:
    """(S, S) masks, row i hiding input position i alone, each made as Explore's mask of that one position
    (an Intervention through _controls): erasure (explorer/engine/attribution.py) decodes them as one batch."""
    return torch.cat([_controls(Intervention(masked=(i,)), source_len, 1, device)[0].mask for i in range(source_len)])


@torch.inference_mode()
def trace(bundle: ModelBundle, source: str | Prepared, intervention: Intervention | None = None,
          target: str | Prepared | None = None) -> Trace:
    """Decode one input greedily (or teacher-forced on `target`) and keep every intermediate.

    Runs on the model's device (a probe during GPU training); the trace itself is always numpy."""
    model = bundle.model
    device = model_device(model)
    prepared = bundle.prepare(source) if isinstance(source, str) else source
    intervention = intervention or Intervention()
    tgt = None
    if target is not None:
        tgt_prepared = bundle.prepare_target(target) if isinstance(target, str) else target
        tgt = torch.tensor([tgt_prepared.ids], dtype=torch.long, device=device)
    max_len = output_cap(bundle, len(prepared.ids)).steps  # what the task or the source length allows
    default, per_step = _controls(intervention, len(prepared.ids), max_len if tgt is None else tgt.shape[1], device)
    forced = {}
    for t, token in intervention.forced:
        if token not in bundle.tgt_vocab:
            raise ExplorerError(f"cannot force {token!r}: the model has no such output token" + _spelt(bundle, token))
        if not 0 <= t < max_len:
            raise ExplorerError(f"cannot force a token at step {t + 1}: decoding has steps 1–{max_len}")
        forced[t] = bundle.tgt_vocab.id(token)
    src = torch.tensor([prepared.ids], dtype=torch.long, device=device)
    memory = model.encode(src, torch.tensor([len(prepared.ids)], device=device))
    result = decode(model, memory, max_len, target=tgt, forced=forced, controls=per_step,
                    default_control=default, keep_steps=True)
    steps = result.steps
    T = int(result.lengths[0])
    steps = steps[:T]
    out_ids = result.ids[0, :T].cpu().numpy()
    out_tokens = tuple(bundle.tgt_vocab.decode(out_ids.tolist()))
    S = len(prepared.ids)

    def stack(get, width: int) -> np.ndarray:
        rows = [get(s) for s in steps]
        if rows[0] is None:
            return np.zeros((T, width), dtype=np.float32)
        return torch.stack([r[0] for r in rows]).float().cpu().numpy()

    s0 = memory.s0[0] if isinstance(memory.s0, tuple) else memory.s0
    has_attn = model.attention is not None
    empty_sd = np.zeros((S, 0), dtype=np.float32)
    truth = bundle.ground_truth(prepared.tokens)
    alignment = None
    if truth is not None and truth.alignment is not None:
        alignment = alignment_matrix(truth.alignment, S)
    return Trace(
        model_name=bundle.name,
        attention=model.cfg.attention,
        source_tokens=prepared.tokens,
        output_tokens=out_tokens,
        previous_tokens=(SOS,) + out_tokens[:-1],
        unknown_tokens=prepared.unknown,
        encoder_states=memory.h[0].float().cpu().numpy(),
        keys=memory.keys[0].float().cpu().numpy() if has_attn else empty_sd,
        values=memory.values[0].float().cpu().numpy() if has_attn else empty_sd,
        initial_state=s0[-1, 0].float().cpu().numpy(),
        decoder_states=stack(lambda s: s.s, model.cfg.hidden),
        queries=stack(lambda s: s.query, 0),
        scores=stack(lambda s: s.scores, S) if has_attn else np.zeros((T, 0), dtype=np.float32),
        weights=stack(lambda s: s.weights, S) if has_attn else np.zeros((T, 0), dtype=np.float32),
        contexts=stack(lambda s: s.context, 0),
        probs=torch.softmax(torch.stack([s.logits[0] for s in steps]).float(), dim=-1).cpu().numpy(),
        output_ids=out_ids,
        target_vocab=bundle.tgt_vocab.tokens,
        alignment=alignment,
        teacher_forced=tgt is not None,
        intervention=intervention,
        source_words=_words(bundle.source_words(prepared.tokens)) if bundle.uses_pieces else (),
        output_words=_words(bundle.target_words(out_tokens)) if bundle.uses_pieces else (),
    )


def _words(groups: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(g) for g in groups)
