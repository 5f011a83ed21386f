"""The article's "mistake": an RNN with its own weights at every position, and what that costs in parameters."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from explorer.errors import ExplorerError


class UnsharedRNN(nn.Module):
    """h_t = tanh(W_t [h_{t-1}; x_t] + b_t) with a separate W_t per position: the article's "mistake".

    It exists to be taught: its parameter count grows with the length, and it has no weights
    for a position it was not built for.
    """

    def __init__(self, input_size: int, hidden: int, max_len: int) -> None:
        super().__init__()
        self.hidden, self.max_len = hidden, max_len
        bound = 1.0 / math.sqrt(hidden)
        self.W = nn.Parameter(torch.empty(max_len, hidden, hidden + input_size).uniform_(-bound, bound))
        self.b = nn.Parameter(torch.empty(max_len, hidden).uniform_(-bound, bound))

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        B, S, _ = x.shape
        if S > self.max_len:
            raise ExplorerError(
                f"the unshared RNN has weights for {self.max_len} positions only; this input has {S}")
        h = x.new_zeros(B, self.hidden)
        outputs = []
        for t in range(S):
            h_new = torch.tanh(torch.cat([h, x[:, t]], dim=-1) @ self.W[t].T + self.b[t])  # (B, H)
            alive = (t < lengths).unsqueeze(1)  # (B, 1): past a sequence's end its state stays put
            h = torch.where(alive, h_new, h)
            outputs.append(torch.where(alive, h_new, torch.zeros_like(h_new)))
        return torch.stack(outputs, dim=1), h.unsqueeze(0)  # (B, S, H), (1, B, H)


def rnn_parameter_count(input_size: int, hidden: int, length: int, shared: bool) -> int:
    """Parameters of one tanh RNN layer over `length` steps: constant if shared, linear if not."""
    per_step = hidden * (hidden + input_size) + hidden
    return per_step if shared else per_step * length
