"""The article's model, read top to bottom: RNN encoder, Query/Key/Value attention, one decoder step.

Notation follows the article (DESIGN §1):

    encoder   h_t = f(h_{t-1}, x_t)                     (rnn: h_t = tanh(W[h_{t-1}; x_t] + b))
    step 1    s_t = f(s_{t-1}, [y_{t-1}; c_{t-1}])      (c_0 = 0; plain model: s_t = f(s_{t-1}, y_{t-1}))
    step 2    q_t = Query(s_t),  k_i = Key(h_i),  v_i = Value(h_i)
    step 3    e_ti = score(q_t, k_i),  α_t = softmax(e_t / τ),  c_t = Σ_i α_ti v_i
    step 4    ŷ_t = softmax(U [s_t; c_t] + b_U)         (plain model: U s_t + b_U)

Sizes: B batch, S source length, T target length, E embedding, H hidden, D attention size, V vocabulary.
This is the reference: everything that decodes (greedy, beam, traces, interventions) calls
`Seq2Seq.decode_step`, and `Seq2Seq.forward` (teacher-forced training) runs the same steps. Training may
choose a faster path to the same numbers (explorer/training/training_forward.py, explorer/engine/fused.py,
explorer/engine/teacher_forced.py); tests/test_fused.py holds it to this module's values and gradients.
The config and its checks are in explorer/engine/config.py; the blocks that are not equations in layers.py;
the article's unshared RNN in unshared.py; parameter counts in parameters.py.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Union

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from explorer.engine.config import ModelConfig
from explorer.engine.layers import Dropout, embedding, lstm_by_layer, padding_mask, reorder, reverse_within_length
from explorer.engine.unshared import UnsharedRNN
from explorer.errors import ExplorerError

State = Union[Tensor, tuple[Tensor, Tensor]]  # (L, B, H), or (h, c) for LSTM


def _looked_up(embed: nn.Embedding, dropout: Dropout, ids: Tensor) -> Tensor:
    """embed(ids), through `dropout` when it has a rate (embed_dropout; Dropout does nothing outside training)."""
    x = embed(ids)
    return dropout(x) if dropout.p else x


class Encoder(nn.Module):
    """Embeds x_1..x_S and runs the RNN over them: h_i = f(h_{i-1}, x_i); returns every h_i and the final state.

    rnn and gru run one plain nn.RNN / nn.GRU per layer and direction over the padded batch: padding sits
    after each sequence, so the left-to-right direction never reads it before a real token, and the
    right-to-left direction reads each sequence reversed within its own length. A padded batch then gives
    exactly each sequence's states alone. lstm runs one nn.LSTM over packed sequences; unshared its own
    loop (UnsharedRNN).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = embedding(cfg.src_vocab, cfg.embed)
        self.dropout = Dropout(cfg.dropout)
        self.embed_dropout = Dropout(cfg.embed_dropout)
        dirs = 2 if cfg.bidirectional else 1
        if cfg.cell == "unshared":
            self.rnn: nn.Module = UnsharedRNN(cfg.embed, cfg.hidden, cfg.max_src_len)
        elif cfg.cell == "lstm":
            self.rnn = nn.LSTM(cfg.embed, cfg.hidden, num_layers=cfg.layers, batch_first=True,
                               bidirectional=cfg.bidirectional, dropout=cfg.dropout if cfg.layers > 1 else 0.0)
        else:
            rnn_class = {"rnn": nn.RNN, "gru": nn.GRU}[cfg.cell]
            # rnn[layer][direction]: direction 0 reads left to right, 1 right to left.
            self.rnn = nn.ModuleList(
                nn.ModuleList(rnn_class(cfg.embed if layer == 0 else dirs * cfg.hidden, cfg.hidden, batch_first=True)
                              for _ in range(dirs))
                for layer in range(cfg.layers))

    def forward(self, src: Tensor, lengths: Tensor, embedded: Tensor | None = None) -> tuple[Tensor, State]:
        """`embedded`: the embeddings of src (B, S, E) when the caller made them (attributions differentiate
        with respect to them, explorer/engine/attribution.py); else they are looked up here."""
        x = self.embedded(src) if embedded is None else embedded  # (B, S, E)
        if self.cfg.cell == "unshared":
            return self.rnn(x, lengths)
        if self.cfg.cell == "lstm":
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            own_masks = self.training and self.rnn.dropout > 0 and self.dropout.generator is not None
            out, final = lstm_by_layer(self.rnn, packed, self.dropout) if own_masks else self.rnn(packed)
            h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])  # (B, S, dirs*H)
            return h, final  # (h, c), each (L*dirs, B, H)
        B, S, _ = x.shape
        H = self.cfg.hidden
        lengths = lengths.to(src.device)
        last = (lengths - 1).view(B, 1, 1).expand(B, 1, H)  # where each sequence's final state is
        reverse = None
        if self.cfg.bidirectional:  # row b * S + i of a (B * S, ·) view: position i of sequence b, reversed
            within = reverse_within_length(lengths, S) + S * torch.arange(B, device=src.device).unsqueeze(1)
            reverse = within.reshape(-1)
        finals = []
        for layer, directions in enumerate(self.rnn):
            outs = []
            for d, rnn in enumerate(directions):
                inp = x if d == 0 else reorder(x, reverse)
                out, _ = rnn(inp)  # (B, S, H)
                finals.append(out.gather(1, last).squeeze(1))  # (B, H) state after the last real token
                outs.append(out if d == 0 else reorder(out, reverse))
            x = torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]  # (B, S, dirs*H)
            if layer + 1 < len(self.rnn):
                x = self.dropout(x)
        mask = padding_mask(src, lengths).unsqueeze(-1)  # (B, S, 1)
        return x * mask, torch.stack(finals)  # (B, S, dirs*H) zero on padding; (L*dirs, B, H)

    def embedded(self, src: Tensor) -> Tensor:
        """The embeddings of x_1..x_S (B, S) -> (B, S, E), through embed_dropout while training."""
        return _looked_up(self.embed, self.embed_dropout, src)

    def cell_weights(self, layer: int = 0, direction: int = 0) -> dict[str, Tensor]:
        """The RNN unit's parameters (W_ih, W_hh, b_ih, b_hh) for teaching by hand; not for LSTM or unshared."""
        if self.cfg.cell not in ("rnn", "gru"):
            raise ExplorerError(f"a {self.cfg.cell} encoder has no single shared RNN unit to show")
        rnn = self.rnn[layer][direction]
        return {"W_ih": rnn.weight_ih_l0, "W_hh": rnn.weight_hh_l0, "b_ih": rnn.bias_ih_l0, "b_hh": rnn.bias_hh_l0}


class Attention(nn.Module):
    """Query/Key/Value attention: e_ti = score(q_t, k_i), α_t = softmax(e_t / τ), c_t = Σ_i α_ti v_i.

    Scores: dot e = q·k (the article's); scaled_dot e = q·k / √D; additive e = wᵀ tanh(W_q s_t + W_k h_i)
    (Bahdanau; here q_t = W_q s_t + b_q and k_i = W_k h_i, so e_ti = wᵀ tanh(q_t + k_i)).
    """

    def __init__(self, kind: str, state_size: int, memory_size: int, d: int) -> None:
        super().__init__()
        self.kind, self.d = kind, d
        self.query = nn.Linear(state_size, d)  # q_t = Query(s_t)
        self.key = nn.Linear(memory_size, d, bias=False)  # k_i = Key(h_i); a bias would cancel in softmax
        self.value = nn.Linear(memory_size, d)  # v_i = Value(h_i)
        self.w = nn.Linear(d, 1, bias=False) if kind == "additive" else None

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        """e_ti for every i: q (B, D), k (B, S, D) -> (B, S)."""
        if self.w is not None:
            return self.w(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)  # e_ti = wᵀ tanh(q_t + k_i)
        e = torch.bmm(q.unsqueeze(1), k.transpose(1, 2)).squeeze(1)  # (B, 1, D) x (B, D, S): e_ti = q_t · k_i
        return e / math.sqrt(self.d) if self.kind == "scaled_dot" else e


class Memory(NamedTuple):
    """What the encoder leaves for the decoder; keys and values do not depend on t."""

    h: Tensor  # (B, S, He) encoder states h_i
    keys: Tensor | None  # (B, S, D) k_i
    values: Tensor | None  # (B, S, D) v_i
    mask: Tensor  # (B, S) True where a real token is (padding is never attended)
    s0: State  # initial decoder state (L, B, H)

    def select(self, index: Tensor) -> "Memory":
        """The memory of the given batch rows (beam search repeats rows)."""
        pick = lambda t: None if t is None else t.index_select(0, index)  # noqa: E731
        s0 = tuple(s.index_select(1, index) for s in self.s0) if isinstance(self.s0, tuple) \
            else self.s0.index_select(1, index)
        return Memory(pick(self.h), pick(self.keys), pick(self.values), pick(self.mask), s0)


class Control(NamedTuple):
    """View-time and intervention settings for one decoder step (defaults: the model as trained)."""

    temperature: float = 1.0
    mask: Tensor | None = None  # (B, S) extra positions hidden from attention (True = hidden)
    pin: Tensor | None = None  # (B,) position to put all attention on, -1 for none
    weights: Tensor | None = None  # (B, S) α_t to use instead of the softmax's (counterfactual attention)


class Step(NamedTuple):
    """Everything one decoder step computed, named as in the article."""

    state: State  # s_t for every layer
    s: Tensor  # (B, H) s_t of the top layer
    query: Tensor | None  # (B, D) q_t
    scores: Tensor | None  # (B, S) e_ti (-inf where masked)
    weights: Tensor | None  # (B, S) α_ti, rows sum to 1
    context: Tensor | None  # (B, D) c_t = Σ_i α_ti v_i
    logits: Tensor | None  # (B, V) U [s_t; c_t] + b_U (None when the caller reads out later, batched)


def _identity(x: Tensor) -> Tensor:
    return x


def _stack(layers: list[Tensor]) -> Tensor:
    """(L, B, H) from L tensors (B, H); one layer is a view, not a copy."""
    return layers[0].unsqueeze(0) if len(layers) == 1 else torch.stack(layers)


class Seq2Seq(nn.Module):
    """Encoder, attention and decoder; `encode` once per input, then `decode_step` per output token."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        H, D = cfg.hidden, cfg.attn_dim
        self.encoder = Encoder(cfg)
        # A bidirectional encoder's final states (2H) are mapped to the decoder's size H.
        self.bridge = nn.Linear(cfg.memory_size, H) if cfg.bidirectional else None
        self.embed = embedding(cfg.tgt_vocab, cfg.embed)
        attends = cfg.attention != "none"
        cell_class = {"rnn": nn.RNNCell, "gru": nn.GRUCell, "lstm": nn.LSTMCell, "unshared": nn.RNNCell}[cfg.cell]
        first_in = cfg.embed + (D if attends else 0)  # [y_{t-1}; c_{t-1}]
        self.cells = nn.ModuleList(cell_class(first_in if i == 0 else H, H) for i in range(cfg.layers))
        self.attention = Attention(cfg.attention, H, cfg.memory_size, D) if attends else None
        self.dropout = Dropout(cfg.dropout)
        self.embed_dropout = Dropout(cfg.embed_dropout)
        self.out = nn.Linear(H + (D if attends else 0), cfg.tgt_vocab)  # U, b_U

    def draw_dropout_from(self, generator: torch.Generator | None) -> None:
        """Dropout masks from `generator` (None: torch's default), also between a multi-layer LSTM
        encoder's layers (layers.lstm_by_layer)."""
        for module in self.modules():
            if isinstance(module, Dropout):
                module.generator = generator

    @property
    def is_lstm(self) -> bool:
        return self.cfg.cell == "lstm"

    def initial_state(self, final: State) -> State:
        """s_0 from the encoder's final state h_m (per layer; both directions joined)."""
        def join(x: Tensor) -> Tensor:
            if not self.cfg.bidirectional:
                return x  # (L, B, H)
            L2, B, H = x.shape
            both = x.view(L2 // 2, 2, B, H).permute(0, 2, 1, 3).reshape(L2 // 2, B, 2 * H)
            return torch.tanh(self.bridge(both))  # (L, B, H)
        if self.is_lstm:
            return join(final[0]), join(final[1])
        return join(final)

    def check_length(self, src: Tensor) -> None:
        """Refuse an input longer than the model was built for (src (B, S) ids)."""
        if src.shape[1] > self.cfg.max_src_len:
            raise ExplorerError(
                f"input has {src.shape[1]} tokens; this model supports at most {self.cfg.max_src_len}")

    def encode(self, src: Tensor, lengths: Tensor, embedded: Tensor | None = None) -> Memory:
        """Run the encoder once: h_i, k_i = Key(h_i), v_i = Value(h_i), the padding mask and s_0
        (`embedded`: src's embeddings, made by the caller; see Encoder.forward)."""
        self.check_length(src)
        h, final = self.encoder(src, lengths, embedded)  # (B, S, He), h_m per layer
        keys = values = None
        if self.attention is not None:
            keys, values = self.attention.key(h), self.attention.value(h)  # (B, S, D) each
        return Memory(h, keys, values, padding_mask(src, lengths), self.initial_state(final))

    def initial_context(self, batch: int, device: torch.device | None = None) -> Tensor | None:
        """c_0 = 0 (None for the plain encoder-decoder, which has no context)."""
        return None if self.attention is None else torch.zeros(batch, self.cfg.attn_dim, device=device)

    def embedded(self, ids: Tensor) -> Tensor:
        """The decoder's embeddings of `ids` (any shape) -> (·, E), through embed_dropout while training."""
        return _looked_up(self.embed, self.embed_dropout, ids)

    def readout(self, s: Tensor, context: Tensor | None, tokens: Tensor | None = None) -> Tensor:
        """Step 4's logits U [s_t; c_t] + b_U, for one step (B, ·) or many at once (B, T, ·). With `tokens`
        (one id per row, s's shape without its last axis), only those tokens' logits: U's rows for them alone
        (attributions explain one logit per row; the other V - 1 would be computed and thrown away)."""
        drop = self.dropout if self.cfg.dropout else _identity
        x = drop(s if context is None else torch.cat([s, context], dim=-1))
        if tokens is None:
            return self.out(x)
        return (self.out.weight[tokens] * x).sum(-1) + self.out.bias[tokens]

    def decode_step(self, y_prev: Tensor, state: State, c_prev: Tensor | None, memory: Memory,
                    control: Control | None = None, embedded: Tensor | None = None,
                    readout: bool = True) -> Step:
        """One output step: the article's four steps. y_prev (B,) ids, state s_{t-1}, c_prev c_{t-1} (B, D).

        Training passes `embedded` (the embedding of y_prev, looked up and dropped out for all steps at once) and
        `readout=False` (it applies `readout` to all steps at once): the same computation, far fewer small
        operations in the backward pass.
        """
        drop = self.dropout if self.cfg.dropout else _identity
        x = self.embedded(y_prev) if embedded is None else embedded  # (B, E)
        if c_prev is not None:
            x = torch.cat([x, c_prev], dim=-1)  # (B, E + D): [y_{t-1}; c_{t-1}]
        # Step 1: s_t = f(s_{t-1}, [y_{t-1}; c_{t-1}]), layer by layer.
        if self.is_lstm:
            hs, cs = [], []
            for i, cell in enumerate(self.cells):
                h_i, c_i = cell(x, (state[0][i], state[1][i]))
                hs.append(h_i)
                cs.append(c_i)
                x = drop(h_i)
            new_state: State = (_stack(hs), _stack(cs))
            s = hs[-1]
        else:
            hs = []
            for i, cell in enumerate(self.cells):
                h_i = cell(x, state[i])
                hs.append(h_i)
                x = drop(h_i)
            new_state = _stack(hs)  # (L, B, H)
            s = hs[-1]  # (B, H)
        if self.attention is None:
            return Step(new_state, s, None, None, None, None, self.readout(s, None) if readout else None)
        # Step 2: q_t = Query(s_t); the keys and values were computed once in encode().
        q = self.attention.query(s)  # (B, D)
        # Step 3: scores, softmax weights, context = expectation of V under the weights.
        scores = self.attention.score(q, memory.keys)  # (B, S)
        visible = memory.mask
        temperature = 1.0
        if control is not None:
            temperature = control.temperature
            if control.mask is not None:
                visible = visible & ~control.mask
        scores = scores.masked_fill(~visible, float("-inf"))
        weights = torch.softmax(scores / temperature if temperature != 1.0 else scores, dim=-1)  # (B, S) α_t
        if control is not None and control.pin is not None:
            pinned = control.pin >= 0  # (B,)
            one_hot = torch.zeros_like(weights).scatter_(1, control.pin.clamp(min=0).unsqueeze(1), 1.0)
            weights = torch.where(pinned.unsqueeze(1), one_hot, weights)
        if control is not None and control.weights is not None:
            weights = control.weights  # (B, S): the step reads its values through this α instead
        context, logits = self.attend(s, weights, memory, readout)
        return Step(new_state, s, q, scores, weights, context, logits)

    def attend(self, s: Tensor, weights: Tensor, memory: Memory,
               readout: bool = True) -> tuple[Tensor, Tensor | None]:
        """The end of a step given s_t (B, H) and α_t (B, S): c_t and step 4's logits (B, V) (None without
        `readout`). decode_step ends here; counterfactual α (explorer/engine/attribution.py) starts here from
        the s_t the step computed, since s_t does not depend on α_t."""
        context = torch.bmm(weights.unsqueeze(1), memory.values).squeeze(1)  # (B, D) c_t = Σ_i α_ti v_i
        # Step 4: ŷ_t = softmax(U [s_t; c_t] + b_U).
        return context, (self.readout(s, context) if readout else None)

    def forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor | None]:
        """Training pass: logits (B, T, V) and weights (B, T, S) for decoder inputs tgt_in (B, T)."""
        return self.decode_training(self.encode(src, lengths), tgt_in, teacher_forcing, generator)

    def decode_training(self, memory: Memory, tgt_in: Tensor, teacher_forcing: float = 1.0,
                        generator: torch.Generator | None = None) -> tuple[Tensor, Tensor | None]:
        """forward() after the encoder: every decoder step through `decode_step`.

        With teacher_forcing < 1, each step feeds the model's own previous guess with that
        probability's complement (one coin per step for the whole batch; none drawn under full teacher forcing).
        Training takes explorer/engine/teacher_forced.py's batched path to the same numbers.
        """
        B, T = tgt_in.shape
        state, c = memory.s0, self.initial_context(B, tgt_in.device)
        y = tgt_in[:, 0]
        outputs, weights = [], []
        for t in range(T):
            step = self.decode_step(y, state, c, memory)
            outputs.append(step.logits)
            if step.weights is not None:
                weights.append(step.weights)
            state, c = step.state, step.context
            if t + 1 < T:
                use_truth = teacher_forcing >= 1.0 or torch.rand((), generator=generator).item() < teacher_forcing
                y = tgt_in[:, t + 1] if use_truth else step.logits.argmax(-1)
        return torch.stack(outputs, 1), (torch.stack(weights, 1) if weights else None)
