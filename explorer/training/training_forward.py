"""The forward pass training calls: where explorer/engine/fused.py applies, its path; elsewhere the reference.

`explorer/engine/model.py` is the article's equations as written; training chooses its fast path here, so
that the reference stays readable and the choice is in one place. The fused path runs on the CPU alone: its
kernels are tuned for a CPU (measured in docs/PERFORMANCE.md); on CUDA nn.GRU's cuDNN kernel and the batched
teacher-forced decoder run instead (not yet measured against fused.py on a GPU: none has been lent). `TrainingForward` is an nn.Module whose only
parameters are the Seq2Seq's (its state_dict is the model's under `model.`; checkpoints save the Seq2Seq
itself): DistributedDataParallel wraps it, because DDP prepares its gradient reduction in the forward of
the module it wraps, and this forward is the one the training step calls.

With `bf16`, the forward runs under torch's bfloat16 autocast (mixed precision): the weights, the optimizer
and what the checkpoint keeps stay float32, the recurrences in fused.py keep float32 inside, and the logits
come back as float32 for the loss.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from explorer.engine import fused, teacher_forced
from explorer.engine.devices import model_device
from explorer.engine.model import Seq2Seq


class TrainingForward(nn.Module):
    """`Seq2Seq.forward`'s logits and weights, through the fused path while autograd records.

    Under autograd: the encoder through `fused.encode` (a GRU encoder as `GRUScan`, keys and values of the
    real positions only) and, under full teacher forcing where `fused.applies` (a one-layer GRU decoder with
    attention), the decoder steps as one `DecoderLoop`; other decoders under full teacher forcing run
    `teacher_forced.teacher_forced` (every step through `decode_step`, the embeddings and readout batched), and
    under partial teacher forcing `Seq2Seq.decode_training`. Without autograd it is the reference model itself.
    """

    def __init__(self, model: Seq2Seq, bf16: bool = False) -> None:
        super().__init__()
        self.model = model
        self.bf16 = bf16

    def forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor | None]:
        model = self.model
        if not torch.is_grad_enabled():
            return model(src, lengths, tgt_in, teacher_forcing, generator)
        if not self.bf16:
            return self._forward(src, lengths, tgt_in, teacher_forcing, generator)
        with torch.autocast(src.device.type, dtype=torch.bfloat16):
            logits, weights = self._forward(src, lengths, tgt_in, teacher_forcing, generator)
        return logits.float(), weights if weights is None else weights.float()

    def _forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor, teacher_forcing: float,
                 generator: torch.Generator | None) -> tuple[Tensor, Tensor | None]:
        model = self.model
        on_cpu = model_device(model).type == "cpu"
        memory = fused.encode(model, src, lengths) if on_cpu else model.encode(src, lengths)
        if teacher_forcing >= 1.0 and on_cpu and fused.applies(model):
            return fused.teacher_forced(model, memory, tgt_in)
        if teacher_forcing >= 1.0:
            return teacher_forced.teacher_forced(model, memory, tgt_in)
        return model.decode_training(memory, tgt_in, teacher_forcing, generator)
