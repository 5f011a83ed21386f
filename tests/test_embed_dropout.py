"""embed_dropout: dropout on the looked-up embeddings while training, the same masks on training's fused path
as on its stepwise one (every step through the reference's decode_step), and nothing changed in what a trained
model computes."""

from __future__ import annotations

import pytest
import torch

from explorer.checkpoints import checkpoint
from explorer.engine import fused
from explorer.engine.model import ModelConfig
from explorer.engine.seeding import seeded_model
from explorer.engine.teacher_forced import teacher_forced
from explorer.errors import ExplorerError
from explorer.training.training_forward import TrainingForward
from test_cli import assert_refused, decoded, run_cli
from test_fused import batch, graph_nodes


def pass_with_masks(model, use_fused: bool, seed: int = 5):
    """Logits, weights and gradients of one teacher-forced training pass, masks drawn from `seed`."""
    model.zero_grad(set_to_none=True)
    model.draw_dropout_from(torch.Generator().manual_seed(seed))
    src, lengths, tgt = batch(model.cfg)
    if use_fused:
        logits, alphas = TrainingForward(model)(src, lengths, tgt)
    else:
        logits, alphas = teacher_forced(model, model.encode(src, lengths), tgt)
    assert ("DecoderLoopBackward" in graph_nodes(logits)) == use_fused
    (logits.sin().sum() + alphas.square().sum()).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.draw_dropout_from(None)
    return logits.detach(), alphas.detach(), grads


@pytest.mark.parametrize("bidirectional", [False, True])
def test_the_fast_path_drops_the_same_embeddings_as_the_reference(bidirectional: bool) -> None:
    cfg = ModelConfig(src_vocab=13, tgt_vocab=14, embed=16, hidden=24, attn_dim=8, attention="additive",
                      bidirectional=bidirectional, embed_dropout=0.4)
    model = seeded_model(cfg, 2).double().train()
    (l1, a1, g1), (l2, a2, g2) = pass_with_masks(model, True), pass_with_masks(model, False)
    torch.testing.assert_close(l1, l2, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(a1, a2, rtol=1e-10, atol=1e-10)
    assert g1.keys() == g2.keys()
    for name in g2:
        torch.testing.assert_close(g1[name], g2[name], rtol=1e-10, atol=1e-10, msg=lambda m: f"{name}: {m}")
    other, _, _ = pass_with_masks(model, True, seed=6)
    assert not torch.allclose(l1, other)  # other masks, other logits: the dropout is really applied
    model.eval()
    with torch.no_grad():
        plain, _ = TrainingForward(model)(*batch(cfg))
    assert not torch.allclose(l1, plain)


def test_evaluation_and_decoding_ignore_it() -> None:
    """The same weights with and without embed_dropout compute the same outside training."""
    cfg = ModelConfig(src_vocab=30, tgt_vocab=31, embed=16, hidden=24, attn_dim=8, attention="additive",
                      bidirectional=True)
    with_drop = ModelConfig(**{**cfg.to_dict(), "embed_dropout": 0.5})
    a, b = seeded_model(cfg, 3).eval(), seeded_model(with_drop, 3).eval()
    b.load_state_dict(a.state_dict())
    src, lengths, tgt = batch(cfg)
    with torch.no_grad():
        torch.testing.assert_close(a(src, lengths, tgt), b(src, lengths, tgt), rtol=0, atol=0)
    b.train()
    with torch.no_grad():  # training mode without autograd: the reference model draws masks
        dropped, _ = b(src, lengths, tgt)
    assert not torch.allclose(dropped, a(src, lengths, tgt)[0])
    assert not fused.embeddings_drop(b.eval()) and fused.embeddings_drop(b.train())


def test_the_config_checks_it() -> None:
    with pytest.raises(ExplorerError, match="embed_dropout must be in"):
        ModelConfig(src_vocab=5, tgt_vocab=5, embed_dropout=1.0)
    with pytest.raises(ExplorerError, match="embed_dropout must be a finite number"):
        ModelConfig(src_vocab=5, tgt_vocab=5, embed_dropout="0.1")
    old = ModelConfig(src_vocab=5, tgt_vocab=5).to_dict()
    del old["embed_dropout"]  # a checkpoint written before the option
    assert ModelConfig.from_dict(old).embed_dropout == 0.0


def test_the_cli_trains_with_it_and_stores_it(tmp_path) -> None:
    out = tmp_path / "dropped"
    result = run_cli("train", "--data", "tests/fixtures/eng-fra-good.tsv", "--tgt-lang", "fr", "--embed-dropout",
                     "0.25", "--steps", "3", "--batch-size", "8", "--embed", "8", "--hidden", "16", "--attn-dim", "8",
                     "--vocab-size", "300", "--processes", "1", "--quiet", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert checkpoint.load(str(out.with_suffix(".safetensors"))).model.cfg.embed_dropout == 0.25
    bad = run_cli("train", "--task", "copy", "--embed-dropout", "1.5", "--out", str(tmp_path / "x"))
    assert_refused(bad.returncode, *decoded(bad), "--embed-dropout")
