"""The model (explorer/engine/model.py): shapes, padding, the seed's RNN cell, the unshared RNN, config checks."""

from __future__ import annotations

import math

import pytest
import torch

from explorer.engine import fused
from explorer.engine.decoding import batch_sources, decode
from explorer.errors import ExplorerError
from explorer.engine import model as model_module
from explorer.engine.layers import Dropout, lstm_by_layer, reorder, reverse_within_length
from explorer.engine.model import Control, ModelConfig, Seq2Seq
from explorer.engine.parameters import count_parameters
from explorer.engine.unshared import UnsharedRNN, rnn_parameter_count
from explorer.engine.seeding import seeded_model
from explorer.engine.teacher_forced import teacher_forced
from explorer.data.vocab import EOS_ID, PAD_ID, SOS_ID

# Digit ids are 4..13 in the copy vocabulary; three inputs of different lengths, padded into one batch.
SOURCES = [[4, 5, 6, 7, 8, 9, 10], [11, 12], [13, 4, 6, 8]]
TARGET_STEPS = 6


def teacher_forced_target(batch: int, steps: int = TARGET_STEPS) -> torch.Tensor:
    """A fixed target (B, T) to feed, so every row runs the same number of steps."""
    return (torch.arange(batch * steps).reshape(batch, steps) % 10 + 4).long()


# --- shapes ---------------------------------------------------------------------------------


def test_encode_decode_step_and_forward_have_the_documented_shapes(random_bundle):
    model = random_bundle.model
    cfg = model.cfg
    B, S, T = len(SOURCES), max(map(len, SOURCES)), TARGET_STEPS
    L, H, D, V = cfg.layers, cfg.hidden, cfg.attn_dim, cfg.tgt_vocab
    src, lengths = batch_sources(SOURCES)

    memory = model.encode(src, lengths)
    assert memory.h.shape == (B, S, cfg.memory_size)
    assert memory.mask.shape == (B, S) and memory.mask.sum(1).tolist() == [len(s) for s in SOURCES]
    states = memory.s0 if model.is_lstm else (memory.s0,)
    assert all(s.shape == (L, B, H) for s in states)

    step = model.decode_step(torch.full((B,), SOS_ID), memory.s0, model.initial_context(B), memory)
    assert step.s.shape == (B, H)
    assert step.logits.shape == (B, V)
    logits, weights = model(src, lengths, teacher_forced_target(B))
    assert logits.shape == (B, T, V)
    if cfg.attention == "none":
        assert memory.keys is None and memory.values is None and model.initial_context(B) is None
        assert step.query is None and step.scores is None and step.weights is None and step.context is None
        assert weights is None
    else:
        assert memory.keys.shape == memory.values.shape == (B, S, D)
        assert step.query.shape == step.context.shape == (B, D)
        assert step.scores.shape == step.weights.shape == (B, S)
        assert weights.shape == (B, T, S)


def test_a_bidirectional_encoder_joins_both_directions_in_h(make_random_bundle):
    model = make_random_bundle(cell="gru", bidirectional=True).model
    memory = model.encode(*batch_sources(SOURCES))
    assert memory.h.shape[-1] == 2 * model.cfg.hidden == model.cfg.memory_size


# --- padding ----------------------------------------------------------------------------------


def test_a_padded_batch_gives_each_sequence_exactly_what_it_gets_alone(random_bundle):
    """Encoder states, attention, logits and greedy outputs do not depend on batch neighbours."""
    model = random_bundle.model
    src, lengths = batch_sources(SOURCES)
    target = teacher_forced_target(len(SOURCES))
    with torch.no_grad():
        memory = model.encode(src, lengths)
        forced = decode(model, memory, TARGET_STEPS, target=target, keep_steps=True)
        free = decode(model, memory, model.cfg.max_tgt_len)
        for b, seq in enumerate(SOURCES):
            n = len(seq)
            alone_mem = model.encode(*batch_sources([seq]))
            alone_forced = decode(model, alone_mem, TARGET_STEPS, target=target[b: b + 1], keep_steps=True)
            alone_free = decode(model, alone_mem, model.cfg.max_tgt_len)

            torch.testing.assert_close(memory.h[b, :n], alone_mem.h[0], rtol=1e-5, atol=1e-6)
            s0, alone_s0 = (memory.s0, alone_mem.s0) if model.is_lstm else ((memory.s0,), (alone_mem.s0,))
            for s, alone in zip(s0, alone_s0):
                torch.testing.assert_close(s[:, b], alone[:, 0], rtol=1e-5, atol=1e-6)
            for step, alone_step in zip(forced.steps, alone_forced.steps):
                torch.testing.assert_close(step.logits[b], alone_step.logits[0], rtol=1e-5, atol=1e-6)
                if step.weights is not None:
                    torch.testing.assert_close(step.weights[b, :n], alone_step.weights[0], rtol=1e-5, atol=1e-6)
                    torch.testing.assert_close(step.context[b], alone_step.context[0], rtol=1e-5, atol=1e-6)
            T = int(alone_free.lengths[0])
            assert free.ids[b, :T].tolist() == alone_free.ids[0, :T].tolist()
            assert int(free.lengths[b]) == T


def test_reversing_within_length_by_flat_rows_equals_gather_along_positions():
    """The encoder's backward direction reads each sequence reversed: reorder (index_select on a flat
    view, for speed) must give exactly what gather along the positions gives, values and gradients."""
    torch.manual_seed(0)
    lengths = torch.tensor([4, 1, 3, 4])
    B, S = 4, 4
    index = reverse_within_length(lengths, S)
    assert index.tolist()[:2] == [[3, 2, 1, 0], [0, 1, 2, 3]]
    x = torch.randn(B, S, 5, requires_grad=True)
    flat = (index + S * torch.arange(B).unsqueeze(1)).reshape(-1)
    g = torch.randn(B, S, 5)
    mine = reorder(x, flat)
    (mine_grad,) = torch.autograd.grad(mine, x, g)
    theirs = x.gather(1, index.unsqueeze(-1).expand(B, S, 5))
    (theirs_grad,) = torch.autograd.grad(theirs, x, g)
    assert torch.equal(mine, theirs) and torch.equal(mine_grad, theirs_grad)
    assert torch.equal(mine[2, 3], x[2, 3]) and torch.equal(mine[2, 0], x[2, 2]), "padding stays in place"


def test_padding_is_never_attended(random_attention_bundle):
    model = random_attention_bundle.model
    src, lengths = batch_sources(SOURCES)
    with torch.no_grad():
        _, weights = model(src, lengths, teacher_forced_target(len(SOURCES)))  # (B, T, S)
    for b, seq in enumerate(SOURCES):
        assert torch.all(weights[b, :, len(seq):] == 0.0), "padding got attention"
        torch.testing.assert_close(weights[b].sum(-1), torch.ones(TARGET_STEPS))


def test_padding_embeds_to_zero_and_the_padding_row_stays_zero():
    cfg = ModelConfig(src_vocab=14, tgt_vocab=14, embed=4, hidden=6, attn_dim=3)
    model = Seq2Seq(cfg)
    assert torch.all(model.encoder.embed.weight[PAD_ID] == 0)
    assert torch.all(model.embed.weight[PAD_ID] == 0)


# --- the seed's RNN cell -----------------------------------------------------------------------


def test_the_rnn_encoder_is_tanh_of_W_times_h_and_x_plus_b(make_random_bundle):
    """h_t = tanh(W [h_{t-1}; x_t] + b), with W and b read from the RNN unit's weights (b = b_ih + b_hh)."""
    model = make_random_bundle(cell="rnn", attention="dot", seed=7).model
    unit = model.encoder.cell_weights()
    W = torch.cat([unit["W_hh"], unit["W_ih"]], dim=1)  # (H, H + E)
    b = unit["b_ih"] + unit["b_hh"]
    source = SOURCES[0]
    with torch.no_grad():
        memory = model.encode(*batch_sources([source]))
        x = model.encoder.embed(torch.tensor(source))  # (S, E)
        h = torch.zeros(model.cfg.hidden)
        for t in range(len(source)):
            h = torch.tanh(W @ torch.cat([h, x[t]]) + b)
            torch.testing.assert_close(memory.h[0, t], h, rtol=1e-5, atol=1e-6)
        assert torch.allclose(memory.s0[0, 0], h, atol=1e-6), "s_0 is the encoder's last state h_m"


def test_the_rnn_decoder_step_is_tanh_of_W_times_s_and_y_c_plus_b(make_random_bundle):
    """s_t = tanh(W [s_{t-1}; y_{t-1}; c_{t-1}] + b), then ŷ_t = U [s_t; c_t] + b_U."""
    model = make_random_bundle(cell="rnn", attention="dot", seed=8).model
    cell = model.cells[0]
    W = torch.cat([cell.weight_hh, cell.weight_ih], dim=1)
    b = cell.bias_ih + cell.bias_hh
    with torch.no_grad():
        memory = model.encode(*batch_sources([SOURCES[2]]))
        state, s, c, y = memory.s0, memory.s0[0, 0], model.initial_context(1)[0], SOS_ID
        for y_next in [5, 6, 7]:
            step = model.decode_step(torch.tensor([y]), state, c[None], memory)
            s = torch.tanh(W @ torch.cat([s, model.embed.weight[y], c]) + b)
            torch.testing.assert_close(step.s[0], s, rtol=1e-5, atol=1e-6)
            c = step.context[0]
            logits = model.out.weight @ torch.cat([s, c]) + model.out.bias
            torch.testing.assert_close(step.logits[0], logits, rtol=1e-5, atol=1e-6)
            state, y = step.state, y_next


# --- sharing parameters over time, or not --------------------------------------------------------


@pytest.mark.parametrize("max_len", [4, 8, 16])
def test_the_unshared_rnn_has_one_W_t_per_position(max_len):
    E, H = 6, 8
    rnn = UnsharedRNN(E, H, max_len)
    assert count_parameters(rnn) == rnn_parameter_count(E, H, max_len, shared=False)
    assert count_parameters(rnn) == max_len * (H * (H + E) + H)


def test_parameter_count_grows_linearly_with_length_only_when_unshared(make_random_bundle):
    def encoder_parameters(cell: str, max_len: int) -> int:
        return count_parameters(make_random_bundle(cell=cell, max_src_len=max_len).model.encoder.rnn)

    unshared = [encoder_parameters("unshared", n) for n in (5, 10, 20)]
    assert unshared[1] == 2 * unshared[0] and unshared[2] == 4 * unshared[0]
    shared = [encoder_parameters("rnn", n) for n in (5, 10, 20)]
    assert shared[0] == shared[1] == shared[2]
    # nn.RNN keeps two bias vectors (b_ih, b_hh) where the seed writes one b: H more numbers.
    E, H = 6, 8
    assert shared[0] == rnn_parameter_count(E, H, 5, shared=True) + H
    assert rnn_parameter_count(E, H, 5, shared=True) == rnn_parameter_count(E, H, 500, shared=True)


def test_the_unshared_rnn_refuses_a_longer_input_with_a_clear_message(make_random_bundle):
    model = make_random_bundle(cell="unshared", max_src_len=5).model
    model.encode(*batch_sources([[4] * 5]))  # as long as it was built for: fine
    with pytest.raises(ExplorerError, match="at most 5"):
        model.encode(*batch_sources([[4] * 6]))
    rnn = UnsharedRNN(3, 4, max_len=5)
    with pytest.raises(ExplorerError, match="weights for 5 positions only; this input has 6"):
        rnn(torch.zeros(1, 6, 3), torch.tensor([6]))


def test_a_shared_model_refuses_inputs_beyond_its_configured_maximum(make_random_bundle):
    model = make_random_bundle(cell="gru", max_src_len=5).model
    with pytest.raises(ExplorerError, match="supports at most 5"):
        model.encode(*batch_sources([[4] * 6]))


# --- attention details ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dot", "scaled_dot", "additive"])
def test_attention_scores_follow_their_formula(make_random_bundle, kind):
    model = make_random_bundle(attention=kind, seed=3).model
    attention = model.attention
    q, k = torch.randn(2, model.cfg.attn_dim), torch.randn(2, 4, model.cfg.attn_dim)
    expected = {
        "dot": torch.einsum("bd,bsd->bs", q, k),
        "scaled_dot": torch.einsum("bd,bsd->bs", q, k) / math.sqrt(model.cfg.attn_dim),
        "additive": (torch.tanh(q[:, None] + k) @ attention.w.weight[0]) if kind == "additive" else None,
    }[kind]
    torch.testing.assert_close(attention.score(q, k), expected)


def test_control_mask_and_pin_act_on_one_decoder_step(make_random_bundle):
    model = make_random_bundle(attention="dot", seed=4).model
    src, lengths = batch_sources([SOURCES[0]])
    memory = model.encode(src, lengths)
    y, s0, c0 = torch.tensor([SOS_ID]), memory.s0, model.initial_context(1)
    hidden = torch.zeros(1, src.shape[1], dtype=torch.bool)
    hidden[0, [0, 2]] = True
    masked = model.decode_step(y, s0, c0, memory, Control(mask=hidden))
    assert torch.all(masked.weights[0, [0, 2]] == 0)
    pinned = model.decode_step(y, s0, c0, memory, Control(pin=torch.tensor([3])))
    assert pinned.weights[0].tolist() == [0, 0, 0, 1, 0, 0, 0]
    torch.testing.assert_close(pinned.context[0], memory.values[0, 3])


def test_readout_of_chosen_tokens_is_their_column_of_the_full_readout(make_random_bundle):
    model = make_random_bundle(attention="additive", seed=5).model
    src, lengths = batch_sources(SOURCES)
    memory = model.encode(src, lengths)
    step = model.decode_step(torch.full((len(SOURCES),), SOS_ID), memory.s0, model.initial_context(len(SOURCES)),
                             memory)
    tokens = torch.tensor([EOS_ID, 7, 11])
    torch.testing.assert_close(model.readout(step.s, step.context, tokens),
                               step.logits.gather(1, tokens.unsqueeze(1)).squeeze(1))


def test_attend_from_a_steps_own_s_gives_what_the_step_gives_with_that_alpha(make_random_bundle):
    model = make_random_bundle(attention="dot", seed=6).model
    src, lengths = batch_sources([SOURCES[0]])
    memory = model.encode(src, lengths)
    y, s0, c0 = torch.tensor([SOS_ID]), memory.s0, model.initial_context(1)
    alpha = torch.softmax(torch.arange(src.shape[1], dtype=torch.float32).unsqueeze(0), -1)
    replaced = model.decode_step(y, s0, c0, memory, Control(weights=alpha))
    context, logits = model.attend(model.decode_step(y, s0, c0, memory).s, alpha, memory)
    torch.testing.assert_close(context, replaced.context)
    torch.testing.assert_close(logits, replaced.logits)


def test_forward_with_teacher_forcing_zero_feeds_the_models_own_guesses(make_random_bundle):
    model = make_random_bundle(attention="dot", seed=5).model
    src, lengths = batch_sources([SOURCES[1]])
    target = torch.tensor([[SOS_ID, 4, 5, 6, EOS_ID]])
    with torch.no_grad():
        logits, _ = model(src, lengths, target, teacher_forcing=0.0)
        greedy = decode(model, model.encode(src, lengths), 5, keep_steps=True)
    # decode stops feeding after <eos>; compare the steps both ran identically up to there
    T = int(greedy.lengths[0])
    for t in range(T):
        torch.testing.assert_close(logits[0, t], greedy.steps[t].logits[0])


@pytest.mark.parametrize("batched", [False, True], ids=["forward", "teacher_forced"])
def test_teacher_forced_forward_gives_each_row_what_its_own_steps_give(random_bundle, batched):
    """The reference forward, and training's batched path (which skips rows whose target is over and sorts rows by
    target length internally): at every real position each equals decode_step run on that row alone, in the
    caller's row order."""
    model = random_bundle.model
    targets = [[4, 5], [6, 7, 8, 9, 10], [11, 12, 13]]  # not sorted by length: forward must put rows back
    src, lengths = batch_sources(SOURCES)
    T = max(map(len, targets)) + 1
    tgt_in = torch.full((len(targets), T), PAD_ID)
    for b, y in enumerate(targets):
        tgt_in[b, : len(y) + 1] = torch.tensor([SOS_ID, *y])
    with torch.no_grad():
        logits, weights = (teacher_forced(model, model.encode(src, lengths), tgt_in) if batched
                           else model(src, lengths, tgt_in))
        for b, y in enumerate(targets):
            alone_src, alone_len = batch_sources([SOURCES[b]])
            memory = model.encode(alone_src, alone_len)
            state, c = memory.s0, model.initial_context(1)
            for t, prev in enumerate([SOS_ID, *y]):
                step = model.decode_step(torch.tensor([prev]), state, c, memory)
                torch.testing.assert_close(logits[b, t], step.logits[0])
                if weights is not None:
                    S = len(SOURCES[b])
                    torch.testing.assert_close(weights[b, t, :S], step.weights[0])
                    assert weights[b, t, S:].abs().sum() == 0
                state, c = step.state, step.context
            if batched:
                assert logits[b, len(y) + 1:].abs().sum() == 0  # padding: nothing computed, the loss ignores it


# --- configuration --------------------------------------------------------------------------------


def test_model_config_round_trips_through_a_dict():
    cfg = ModelConfig(src_vocab=14, tgt_vocab=12, cell="lstm", attention="additive", layers=2,
                      bidirectional=True, hidden=10)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert ModelConfig.from_dict({**cfg.to_dict(), "from_the_future": 1}) == cfg
    assert cfg.memory_size == 20


@pytest.mark.parametrize("options, message", [
    ({"cell": "transformer"}, "cell must be one of rnn, gru, lstm, unshared"),
    ({"attention": "cosine"}, "attention must be one of none, dot, scaled_dot, additive"),
    ({"hidden": 0}, "hidden must be between 1 and 8,192, got 0"),
    ({"src_vocab": 0}, "src_vocab must be at least 1"),
    ({"layers": 0}, "layers must be between 1 and 16, got 0"),
    ({"max_src_len": 0}, "max_src_len must be between 1 and 4,096, got 0"),
    ({"attn_dim": 0}, "attn_dim must be between 1 and 8,192, got 0"),
    ({"cell": "unshared", "layers": 2}, "the unshared RNN has one layer and one direction"),
    ({"cell": "unshared", "bidirectional": True}, "the unshared RNN has one layer and one direction"),
    ({"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
    ({"dropout": -0.1}, r"dropout must be in \[0, 1\)"),
    ({"hidden": "64"}, "hidden must be a whole number"),
    ({"hidden": 32.5}, "hidden must be a whole number"),
    ({"layers": True}, "layers must be a whole number"),
    ({"bidirectional": "yes"}, "bidirectional must be true or false"),
    ({"dropout": "0.1"}, "dropout must be a finite number"),
])
def test_model_config_rejects_impossible_settings(options, message):
    with pytest.raises(ExplorerError, match=message):
        ModelConfig(**{"src_vocab": 14, "tgt_vocab": 14, **options})


def test_model_config_names_every_problem_at_once():
    with pytest.raises(ExplorerError) as info:
        ModelConfig(src_vocab=14, tgt_vocab=14, cell="x", attention="y", hidden=0)
    assert str(info.value).count(";") == 2


def test_no_attention_without_attention_size_is_fine():
    ModelConfig(src_vocab=14, tgt_vocab=14, attention="none", attn_dim=0)


def test_a_multi_layer_lstm_encoder_trained_with_its_own_generator_computes_what_nn_lstm_does(monkeypatch):
    """With a Trainer's generator set, a 2-layer LSTM encoder runs layer by layer (its dropout masks come
    from that generator, not torch's shared one): with the masks switched off it equals nn.LSTM's own
    result, values and gradients, on a padded batch in any order."""
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab=9, tgt_vocab=9, embed=6, hidden=10, attn_dim=8, cell="lstm", layers=2,
                      bidirectional=True, dropout=0.3)
    encoder = Seq2Seq(cfg).encoder
    src = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 3, 4], [5, 6, 0, 0, 0]])
    lengths = torch.tensor([3, 5, 2])

    encoder.eval()  # nn.LSTM's path, no dropout
    h_ref, (hn_ref, cn_ref) = encoder(src, lengths)
    ref_grads = torch.autograd.grad(h_ref.sum() + hn_ref.sum() + cn_ref.sum(), list(encoder.rnn.parameters()))

    encoder.train()
    encoder.dropout.generator = torch.Generator().manual_seed(1)
    encoder.dropout.p = 0.0  # the layer-by-layer path (nn.LSTM's own dropout is still set), masks off
    calls = []
    monkeypatch.setattr(model_module, "lstm_by_layer", lambda *args: calls.append(1) or lstm_by_layer(*args))
    h, (hn, cn) = encoder(src, lengths)
    assert calls, "the layer-by-layer path ran"
    grads = torch.autograd.grad(h.sum() + hn.sum() + cn.sum(), list(encoder.rnn.parameters()))
    assert torch.allclose(h, h_ref, atol=1e-6) and torch.allclose(hn, hn_ref, atol=1e-6)
    assert torch.allclose(cn, cn_ref, atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, ref_grads))


def test_dropout_with_a_generator_masks_equal_inputs_alike_whatever_their_memory_layout():
    """nn.GRU's batch-first output is a transposed view; the same values laid out contiguously got other
    masks (the draws filled memory in order), so the GRU encoder's two paths trained differently."""
    dropout = Dropout(0.5)
    x = torch.randn(5, 4, 3).transpose(0, 1)  # (4, 5, 3), not contiguous
    masks = []
    for same in (x, x.contiguous()):
        dropout.generator = torch.Generator().manual_seed(0)
        masks.append(dropout(same) == 0)
    assert torch.equal(masks[0], masks[1])
    assert 0 < int(masks[0].sum()) < masks[0].numel()


def test_training_projects_keys_and_values_of_real_positions_only_with_the_same_numbers_and_gradients():
    """With autograd on and padding in the batch, training's encode multiplies only the real positions: the same keys
    and values everywhere (padding's h is zero: key 0, value b_v) and the same gradients."""
    cfg = ModelConfig(src_vocab=10, tgt_vocab=10, embed=6, hidden=8, attn_dim=5, attention="additive")
    model = seeded_model(cfg, 0).double()
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([4, 1, 3])
    mask = torch.arange(4).unsqueeze(0) < lengths.unsqueeze(1)
    h_values = torch.randn(3, 4, 8, generator=g, dtype=torch.float64) * mask.unsqueeze(-1)
    upstream = torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64)
    results = []
    for train in (True, False):
        model.zero_grad(set_to_none=True)
        h = h_values.clone().requires_grad_()
        if train:
            keys, values = fused.real_keys_and_values(model.attention, h, mask)
            assert type(keys.grad_fn.next_functions[0][0]).__name__ == "IndexCopyBackward0"  # real rows only
        else:
            keys, values = model.attention.key(h), model.attention.value(h)
        ((keys * upstream[0]).sum() + (values * upstream[1]).sum()).backward()
        results.append([keys, values, h.grad[mask]] + [p.grad for p in model.attention.parameters()
                                                       if p.grad is not None])
    assert len(results[0]) == len(results[1]) == 6  # keys, values, h's gradient, W_k, W_v, b_v
    for mine, plain in zip(*results):
        torch.testing.assert_close(mine, plain, rtol=1e-12, atol=1e-12)
