"""Training in bfloat16 mixed precision (`TrainConfig.bf16`, `train --bf16`): the training forward's products
run in bfloat16 under torch's autocast, the recurrences of explorer/engine/fused.py keep float32 inside, and
the weights, the checkpoint and everything evaluated stay float32."""

from __future__ import annotations

import pytest
import torch

from explorer.__main__ import main
from explorer.checkpoints import checkpoint
from explorer.engine import fused
from explorer.engine.model import ModelConfig
from explorer.engine.seeding import seeded_model
from explorer.training.training_forward import TrainingForward
from tests.test_fused import batch, graph_nodes


def one_pass(forward: TrainingForward) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Logits and every parameter's gradient of one teacher-forced training pass."""
    forward.model.zero_grad(set_to_none=True)
    logits, _ = forward(*batch(forward.model.cfg))
    logits.sin().sum().backward()
    return logits.detach(), {n: p.grad.clone() for n, p in forward.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("attention", ["additive", "dot", "none"])
def test_a_bf16_pass_is_the_float32_pass_to_bfloat16_rounding(attention):
    cfg = ModelConfig(src_vocab=300, tgt_vocab=400, embed=32, hidden=48, attn_dim=16, attention=attention,
                      bidirectional=True)
    model = seeded_model(cfg, 4)
    exact_logits, exact_grads = one_pass(TrainingForward(model))
    bf16 = TrainingForward(model, bf16=True)
    logits, grads = one_pass(bf16)
    assert logits.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert "GRUScanBackward" in graph_nodes(bf16(*batch(cfg))[0])  # still the fast path under autocast
    assert not torch.equal(logits, exact_logits)  # the products did run in bfloat16
    torch.testing.assert_close(logits, exact_logits, rtol=0.0, atol=0.05)
    assert grads.keys() == exact_grads.keys()
    for name, grad in grads.items():
        cosine = torch.nn.functional.cosine_similarity(grad.flatten(), exact_grads[name].flatten(), dim=0)
        assert cosine > 0.99, name


def test_the_fused_decoder_loop_runs_under_autocast():
    """Under autocast the keys and values reach the loop in bfloat16; it runs them in float32 (before, its
    `out=` products refused the mix: "mat1 and mat2 must have the same dtype")."""
    cfg = ModelConfig(src_vocab=300, tgt_vocab=400, embed=32, hidden=48, attn_dim=16, attention="additive")
    model = seeded_model(cfg, 4)
    assert fused.applies(model)
    logits, _ = TrainingForward(model, bf16=True)(*batch(cfg))
    assert "DecoderLoopBackward" in graph_nodes(logits)


def test_train_bf16_learns_a_toy_task_and_saves_float32_weights(tmp_path, capsys):
    out = tmp_path / "bf16.safetensors"
    assert main(["train", "--task", "copy", "--min-len", "3", "--max-len", "6", "--steps", "250", "--bf16",
                 "--processes", "1", "--threads", "1", "--quiet", "--out", str(out)]) == 0
    bundle = checkpoint.load(out)
    assert bundle.training["bf16"] is True
    assert all(p.dtype == torch.float32 for p in bundle.model.parameters())
    assert bundle.metrics["validation"]["token_accuracy"] > 0.9
