"""Where training runs: a CUDA GPU when one is present, else the CPU.

Only training moves: everything a page, a trace or a checkpoint reads stays on the CPU, so the
rest of the engine just follows the device of the model it is given (`model_device`).
"""

from __future__ import annotations

import os

import torch
from torch import nn

from explorer.errors import ExplorerError

ENV = "EXPLORER_DEVICE"  # what "auto" means on this machine: auto (the default), cpu or cuda
CHOICES = ("auto", "cpu", "cuda")


def pick_device(requested: str | torch.device | None = "auto") -> torch.device:
    """The device to train on: "auto" (or None) reads EXPLORER_DEVICE, then takes CUDA when torch sees a
    GPU; "cpu"; "cuda" (or "cuda:N"), an ExplorerError when there is no such GPU."""
    choice = "auto" if requested is None else str(requested).strip().lower()
    asked = f"device {choice!r}"
    if choice == "auto":
        choice = os.environ.get(ENV, "").strip().lower() or "auto"
        asked = f"{ENV}={choice}"
        if choice == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(choice)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ExplorerError(f"{asked} is not a device to train on: use one of {', '.join(CHOICES)}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ExplorerError(f"{asked}: torch {torch.__version__} sees no CUDA GPU on this machine; "
                                "use auto or cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ExplorerError(f"{asked}: torch sees only {torch.cuda.device_count()} CUDA GPU(s)")
    return device


def model_device(model: nn.Module) -> torch.device:
    """The device a model's weights are on (decoding puts its inputs there)."""
    first = next(model.parameters(), None)
    return torch.device("cpu") if first is None else first.device
