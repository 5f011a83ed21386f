"""Parameter counts the lessons and the comparison tables show."""

from __future__ import annotations

from torch import nn


def count_parameters(module: nn.Module) -> int:
    """Number of learnable numbers in a module (frozen ones too: a shipped, frozen model keeps its size)."""
    return sum(p.numel() for p in module.parameters())
