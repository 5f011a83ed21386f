"""Building blocks model.py uses that are not the article's equations: dropout whose masks come from a trainer's
own generator, nn.LSTM run layer by layer for that dropout, embeddings that skip their init on the meta device,
the index arithmetic that reverses padded sequences for a bidirectional encoder, and the padding mask."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence

from explorer.data.vocab import PAD_ID


class Dropout(nn.Dropout):
    """nn.Dropout that draws its masks from `generator` while one is set (a Trainer sets its own).

    The trainer's generator is saved with its state (Continue goes on with the same draws) and every rank has
    its own; without a generator it is nn.Dropout itself. Masks are drawn in the elements' logical order, whatever
    the memory layout of x: equal inputs get equal masks however they were computed (nn.GRU's batch-first
    output is a transposed view; training's GRU encoder in explorer/engine/fused.py writes a plain one).
    """

    generator: torch.Generator | None = None

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0 or self.generator is None:
            return super().forward(x)
        keep = x.new_empty(x.shape).bernoulli_(1.0 - self.p, generator=self.generator)
        return x * keep / (1.0 - self.p)


def embedding(count: int, dim: int) -> nn.Embedding:
    """An embedding table (the padding row stays zero). On the meta device, where checkpoint loading builds
    a storage-less skeleton to check shapes, its random init is skipped: it imported torch._dynamo (1.2 s of a
    cold start) for numbers that are never used."""
    if torch.get_default_device().type == "meta":
        return nn.Embedding(count, dim, padding_idx=PAD_ID, _weight=torch.empty(count, dim))
    return nn.Embedding(count, dim, padding_idx=PAD_ID)


def _lstm_weight_names(dirs: int, bias: bool) -> list[str]:
    """nn.LSTM's parameter names for its first layer (weight_ih_l0, ..., bias_hh_l0_reverse)."""
    kinds = ("weight", "bias") if bias else ("weight",)
    return [f"{kind}_{part}_l0{suffix}"
            for suffix in ("", "_reverse")[:dirs] for kind in kinds for part in ("ih", "hh")]


def lstm_by_layer(rnn: nn.LSTM, packed: PackedSequence, dropout: Dropout) -> tuple[PackedSequence, tuple[Tensor, Tensor]]:
    """nn.LSTM's own computation (its kernel, its weights), one layer at a time, with `dropout` between the
    layers: nn.LSTM draws those masks from torch's default generator, not the trainer's.

    Each layer runs a one-layer nn.LSTM (built on the meta device, no storage) with that layer's
    weights put in by torch.func.functional_call, so gradients reach the encoder's own parameters."""
    dirs = 2 if rnn.bidirectional else 1
    sizes = packed.batch_sizes
    x = PackedSequence(packed.data, sizes)  # in sorted order; the final states are put back in order below
    zeros = x.data.new_zeros(dirs, int(sizes[0]), rnn.hidden_size)
    hs, cs = [], []
    for layer in range(rnn.num_layers):
        with torch.device("meta"):
            shell = nn.LSTM(rnn.input_size if layer == 0 else dirs * rnn.hidden_size, rnn.hidden_size,
                            bias=rnn.bias, bidirectional=rnn.bidirectional)
        weights = {name: getattr(rnn, name.replace("_l0", f"_l{layer}"))
                   for name in _lstm_weight_names(dirs, rnn.bias)}
        x, (h, c) = torch.func.functional_call(shell, weights, (x, (zeros, zeros)))
        hs.append(h)
        cs.append(c)
        if layer + 1 < rnn.num_layers:
            x = PackedSequence(dropout(x.data), sizes)
    order = packed.unsorted_indices  # final states back in the batch's order, as nn.LSTM returns them
    final = (torch.cat(hs).index_select(1, order), torch.cat(cs).index_select(1, order))
    return PackedSequence(x.data, sizes, packed.sorted_indices, order), final


def reverse_within_length(lengths: Tensor, S: int) -> Tensor:
    """Index (B, S) that reverses each sequence's first `length` positions and leaves padding in place."""
    i = torch.arange(S, device=lengths.device).unsqueeze(0)  # (1, S)
    L = lengths.unsqueeze(1)  # (B, 1)
    return torch.where(i < L, L - 1 - i, i)


def reorder(x: Tensor, rows: Tensor) -> Tensor:
    """x (B, S, F) with its B * S positions taken in the order of flat indices `rows` (B * S,)."""
    B, S, F = x.shape
    return x.reshape(B * S, F).index_select(0, rows).view(B, S, F)


def padding_mask(src: Tensor, lengths: Tensor) -> Tensor:
    """(B, S) True where a real token is: position i < the sequence's length."""
    return torch.arange(src.shape[1], device=src.device).unsqueeze(0) < lengths.to(src.device).unsqueeze(1)
