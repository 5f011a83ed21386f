"""A model initialised from a seed alone: torch's default generator is one per process, shared by the app's
session threads, so whoever seeds it and then draws holds `SEED_LOCK`."""

from __future__ import annotations

import threading

import torch

from explorer.engine.config import ModelConfig
from explorer.engine.model import Seq2Seq

# Two sessions building a model with the same seed at the same moment both get the weights of a lone run.
SEED_LOCK = threading.RLock()


def seeded_model(cfg: ModelConfig, seed: int) -> Seq2Seq:
    """A freshly initialised model whose weights depend only on `seed`, even while other threads draw."""
    with SEED_LOCK:
        torch.manual_seed(seed)
        return Seq2Seq(cfg)
