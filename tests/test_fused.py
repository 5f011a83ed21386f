"""Training's fast path (explorer/engine/fused.py, chosen by explorer/training/training_forward.py) computes
what the reference model (explorer/engine/model.py: nn.GRU, `decode_step`'s loop) computes: the same logits and
weights, the same gradient for every parameter; where it does not apply, training runs the reference itself."""

from __future__ import annotations

import pytest
import torch

from explorer.engine import fused
from explorer.engine.model import ModelConfig, Seq2Seq
from explorer.engine.seeding import seeded_model
from explorer.training.training_forward import TrainingForward

B, S, T = 6, 7, 9
LENGTHS = torch.tensor([7, 3, 5, 1, 7, 2])  # source lengths, not sorted
TARGET_STEPS = torch.tensor([9, 2, 5, 7, 1, 9])  # decoder steps per row (<sos> and target), not sorted


def batch(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A padded batch whose rows differ in source and target length, in no particular order."""
    g = torch.Generator().manual_seed(3)
    src = torch.randint(4, cfg.src_vocab, (B, S), generator=g)
    src[torch.arange(S).unsqueeze(0) >= LENGTHS.unsqueeze(1)] = 0
    tgt = torch.randint(4, cfg.tgt_vocab, (B, T), generator=g)
    tgt[torch.arange(T).unsqueeze(0) >= TARGET_STEPS.unsqueeze(1)] = 0
    return src, LENGTHS, tgt


def graph_nodes(tensor: torch.Tensor) -> set[str]:
    """Names of every autograd node behind `tensor`."""
    seen, names, todo = set(), set(), [tensor.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        todo.extend(n for n, _ in node.next_functions)
    return names


def run(model: Seq2Seq, use_fused: bool, loss_of=lambda logits, alphas: logits.sin().sum()):
    """Logits, weights and every parameter's gradient of one teacher-forced pass: training's (fused) or the
    reference model's, at the real positions (the reference also computes past a row's target; the loss
    ignores those)."""
    model.zero_grad(set_to_none=True)
    src, lengths, tgt = batch(model.cfg)
    logits, alphas = (TrainingForward(model) if use_fused else model)(src, lengths, tgt)
    assert ("DecoderLoopBackward" in graph_nodes(logits)) == use_fused
    assert ("GRUScanBackward" in graph_nodes(logits)) == use_fused
    real = (tgt != 0).unsqueeze(-1)  # (B, T, 1)
    logits, alphas = logits * real, alphas * real
    loss_of(logits, alphas).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), alphas.detach(), grads


def assert_same(fused_run, stepwise_run, tol: float) -> None:
    (l1, a1, g1), (l2, a2, g2) = fused_run, stepwise_run
    torch.testing.assert_close(l1, l2, rtol=tol, atol=tol)
    torch.testing.assert_close(a1, a2, rtol=tol, atol=tol)
    assert g1.keys() == g2.keys()
    for name in g2:
        torch.testing.assert_close(g1[name], g2[name], rtol=tol, atol=tol, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("attention", ["dot", "scaled_dot", "additive"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_the_fused_loop_gives_the_stepwise_logits_weights_and_gradients(attention, bidirectional):
    cfg = ModelConfig(src_vocab=13, tgt_vocab=14, embed=16, hidden=24, attn_dim=8, attention=attention,
                      bidirectional=bidirectional)
    model = seeded_model(cfg, 1).double()  # float64: any difference beyond rounding shows
    weighted = lambda logits, alphas: logits.sin().sum() + (alphas * torch.arange(S)).sum()  # noqa: E731
    assert_same(run(model, True, weighted), run(model, False, weighted), tol=1e-10)


def test_with_more_symbols_than_lookups_the_rows_are_multiplied_after_the_lookup():
    """A translation-sized vocabulary takes embedded_product's other branch: the same values and gradients."""
    cfg = ModelConfig(src_vocab=300, tgt_vocab=400, embed=16, hidden=24, attn_dim=8, attention="additive",
                      bidirectional=True)
    model = seeded_model(cfg, 5).double()
    assert_same(run(model, True), run(model, False), tol=1e-10)
    (h1, f1, g1), (h2, f2, g2) = encoder_run(model, True), encoder_run(model, False)
    torch.testing.assert_close(h1, h2, rtol=1e-10, atol=1e-10)
    for name in g2:
        torch.testing.assert_close(g1[name], g2[name], rtol=1e-10, atol=1e-10, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("symbols", [5, 40])
def test_embedded_products_equal_the_products_of_the_looked_up_rows(symbols):
    """Fewer symbols than lookups (5) multiplies the table first, more (40) the looked-up rows: both give
    W_p e(id) + b_p and the same gradients for the table, the weights and the biases."""
    g = torch.Generator().manual_seed(0)
    embed = torch.nn.Embedding(symbols, 6, padding_idx=0).double()
    weight = torch.randn(2, 9, 6, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(2, 9, generator=g, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(1, symbols, (2, 12), generator=g)
    upstream = torch.randn(2, 12, 9, generator=g, dtype=torch.float64)
    grads = []
    for product in (fused.embedded_product,
                    lambda e, w, b, i: torch.stack([e(i[p]) @ w[p].T + b[p] for p in range(2)])):
        out = product(embed, weight, bias, ids)
        grads.append((out, *torch.autograd.grad((out * upstream).sum(), [embed.weight, weight, bias])))
    for mine, plain in zip(*grads):
        torch.testing.assert_close(mine, plain, rtol=1e-12, atol=1e-12)


def test_a_loss_on_the_weights_alone_reaches_every_parameter_the_same_way():
    """Only α carries a gradient back (the loop's s_t and c_t outputs get none): the no-gradient branches."""
    cfg = ModelConfig(src_vocab=13, tgt_vocab=14, embed=16, hidden=24, attn_dim=8, attention="additive")
    model = seeded_model(cfg, 2).double()
    on_weights = lambda logits, alphas: (alphas ** 2 * torch.arange(S)).sum()  # noqa: E731
    assert_same(run(model, True, on_weights), run(model, False, on_weights), tol=1e-10)


def test_at_the_tutorials_sizes_in_float32_the_gradients_agree_to_rounding():
    cfg = ModelConfig(src_vocab=14, tgt_vocab=14, embed=128, hidden=128, attn_dim=128, attention="additive",
                      dropout=0.2)
    model = seeded_model(cfg, 0)
    model.eval()  # the readout's dropout masks would differ between the two passes
    assert_same(run(model, True), run(model, False), tol=2e-4)


@pytest.mark.parametrize("options", [{"cell": "lstm"}, {"cell": "rnn"}, {"layers": 2}, {"attention": "none"}])
def test_other_models_train_through_decode_step_with_the_reference_models_numbers(options):
    """Where the fused loop does not apply, training's forward falls back to the reference decoder steps: the
    reference model's logits, weights and gradients (a GRU encoder still runs GRUScan)."""
    cfg = ModelConfig(src_vocab=13, tgt_vocab=14, embed=16, hidden=24, attn_dim=8, **options)
    model = seeded_model(cfg, 6).double()
    assert not fused.applies(model)
    results = []
    for forward in (TrainingForward(model), model):
        model.zero_grad(set_to_none=True)
        src, lengths, tgt = batch(cfg)
        logits, alphas = forward(src, lengths, tgt)
        assert "DecoderLoopBackward" not in graph_nodes(logits)
        assert ("GRUScanBackward" in graph_nodes(logits)) == (forward is not model and cfg.cell == "gru")
        real = (tgt != 0).unsqueeze(-1)  # the real positions: the reference also computes past a row's target
        logits, alphas = logits * real, None if alphas is None else alphas * real
        logits.sin().sum().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        results.append((logits.detach(), alphas.detach() if alphas is not None else None, grads))
    (l1, a1, g1), (l2, a2, g2) = results
    torch.testing.assert_close(l1, l2, rtol=1e-10, atol=1e-10)
    assert (a1 is None) == (a2 is None) == (cfg.attention == "none")
    if a1 is not None:
        torch.testing.assert_close(a1, a2, rtol=1e-10, atol=1e-10)
    assert g1.keys() == g2.keys() and len(g1) > 0
    for name in g2:
        torch.testing.assert_close(g1[name], g2[name], rtol=1e-10, atol=1e-10, msg=lambda m: f"{name}: {m}")


def test_training_forward_holds_the_models_parameters_and_nothing_else():
    """DDP wraps the training forward, and checkpoints save the Seq2Seq: the same parameters, the model's
    state_dict keys under `model.`."""
    model = Seq2Seq(ModelConfig(src_vocab=13, tgt_vocab=14))
    forward = TrainingForward(model)
    assert [id(p) for p in forward.parameters()] == [id(p) for p in model.parameters()]
    assert list(forward.state_dict()) == [f"model.{k}" for k in model.state_dict()]


def test_without_autograd_the_loop_is_not_used():
    model = Seq2Seq(ModelConfig(src_vocab=13, tgt_vocab=14))
    assert fused.applies(model)
    with torch.no_grad():
        assert not fused.applies(model)
        src, lengths, tgt = batch(model.cfg)
        torch.testing.assert_close(TrainingForward(model)(src, lengths, tgt)[0], model(src, lengths, tgt)[0],
                                   rtol=0, atol=0)


def test_the_reference_model_never_takes_the_fast_path():
    """explorer/engine/model.py is the article's equations: its forward runs nn.GRU and decode_step even while
    autograd records."""
    model = Seq2Seq(ModelConfig(src_vocab=13, tgt_vocab=14, bidirectional=True))
    src, lengths, tgt = batch(model.cfg)
    logits, _ = model(src, lengths, tgt)
    assert not {"DecoderLoopBackward", "GRUScanBackward"} & graph_nodes(logits)
    keys = model.encode(src, lengths).keys
    assert "IndexCopyBackward0" not in graph_nodes(keys)  # Key(h) of every position, padding too


def test_off_the_cpu_training_runs_the_reference_encoder_and_the_batched_decoder(monkeypatch):
    """fused.py's kernels are tuned for the CPU: a model on another device (CUDA: cuDNN's GRU) trains through
    nn.GRU and teacher_forced.py, with the reference model's numbers."""
    import explorer.training.training_forward as training_forward
    model = Seq2Seq(ModelConfig(src_vocab=13, tgt_vocab=14, bidirectional=True, dropout=0.0))
    src, lengths, tgt = batch(model.cfg)
    assert {"DecoderLoopBackward", "GRUScanBackward"} <= graph_nodes(TrainingForward(model)(src, lengths, tgt)[0])
    monkeypatch.setattr(training_forward, "model_device", lambda _: torch.device("cuda"))
    logits, weights = TrainingForward(model)(src, lengths, tgt)
    assert not {"DecoderLoopBackward", "GRUScanBackward"} & graph_nodes(logits)
    reference, reference_weights = model(src, lengths, tgt)
    real = (tgt != 0).unsqueeze(-1)  # the reference also computes past a row's target
    torch.testing.assert_close(logits * real, reference * real, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weights * real, reference_weights * real, rtol=1e-5, atol=1e-5)


def encoder_run(model: Seq2Seq, use_fused: bool, seed: int = 0):
    """h, the final states and every encoder parameter's gradient, through GRUScan or nn.GRU."""
    model.zero_grad(set_to_none=True)
    model.draw_dropout_from(torch.Generator().manual_seed(seed))  # the same dropout masks in both runs
    src, lengths, _ = batch(model.cfg)
    h, final = fused.gru_encoder(model.encoder, src, lengths) if use_fused else model.encoder(src, lengths)
    assert ("GRUScanBackward" in graph_nodes(h)) == use_fused
    (h.sin().sum() + (final ** 2).sum()).backward()
    grads = {name: p.grad.clone() for name, p in model.encoder.named_parameters() if p.grad is not None}
    return h.detach(), final.detach(), grads


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
def test_the_gru_encoder_scan_gives_nn_grus_states_and_gradients(bidirectional, layers):
    cfg = ModelConfig(src_vocab=13, tgt_vocab=14, embed=16, hidden=24, attn_dim=8, bidirectional=bidirectional,
                      layers=layers, dropout=0.3)
    model = seeded_model(cfg, 4).double()
    model.train()  # dropout between the layers: the masks must fall on the same rows
    (h1, f1, g1), (h2, f2, g2) = encoder_run(model, True), encoder_run(model, False)
    torch.testing.assert_close(h1, h2, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(f1, f2, rtol=1e-10, atol=1e-10)
    assert g1.keys() == g2.keys() and len(g1) > 0
    for name in g2:
        torch.testing.assert_close(g1[name], g2[name], rtol=1e-10, atol=1e-10, msg=lambda m: f"{name}: {m}")
    assert (h1[torch.arange(S).unsqueeze(0) >= LENGTHS.unsqueeze(1)] == 0).all()  # zero on padding


@pytest.mark.parametrize("cell", ["lstm", "rnn", "unshared"])
def test_other_encoders_run_their_own_modules(cell):
    model = Seq2Seq(ModelConfig(src_vocab=13, tgt_vocab=14, cell=cell))
    assert not fused.encoder_applies(model.encoder)
    src, lengths, _ = batch(model.cfg)
    memory = fused.encode(model, src, lengths)
    assert "GRUScanBackward" not in graph_nodes(memory.h)
