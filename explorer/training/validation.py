"""The validation loss a training job reports: teacher-forced token cross-entropy on the held-out pairs.

The Trainer's own evaluation scores decoding (exact match, token accuracy); the Train page also plots
this loss beside the training loss, so a gap between them (fitting the training pairs) shows.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from explorer.data.vocab import PAD_ID
from explorer.engine.devices import model_device
from explorer.training.data import Pair
from explorer.training.train import collate, token_loss


def teacher_forced_loss(model: nn.Module, pairs: Sequence[Pair], chunk: int = 512) -> float:
    """Mean token cross-entropy with the true previous tokens fed in (the validation loss), on the model's device."""
    device = model_device(model)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for start in range(0, len(pairs), chunk):
                src, lengths, tgt_in, tgt_out = collate(pairs[start: start + chunk], device)
                logits, _ = model(src, lengths, tgt_in, 1.0, None)
                total += token_loss(logits, tgt_out, reduction="sum").item()
                count += int((tgt_out != PAD_ID).sum())
    finally:
        model.train(was_training)
    return total / count if count else float("nan")


def smoothed_loss_floor(smoothing: float, classes: int) -> float:
    """The least training loss label smoothing allows (the entropy of its target: 1 - ε + ε/V on the true token,
    ε/V on each other), which a perfect model's training loss levels at while its validation loss falls to 0."""
    if not smoothing or classes < 2:
        return 0.0
    true, other = 1 - smoothing + smoothing / classes, smoothing / classes
    return -(true * math.log(true) + (classes - 1) * other * math.log(other))
