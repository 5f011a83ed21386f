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
choose a faster path to the same numbers (explorer/training/training_forward.py, explorer/engine/fused.py);
tests/test_fused.py holds it to this module's values and gradients.
"""

from __future__ import annotations

import math
import numbers
import threading
from dataclasses import asdict, dataclass
from typing import NamedTuple, Union

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from explorer.errors import ExplorerError
from explorer.defaults import ATTENTIONS, CELLS
from explorer.data.vocab import PAD_ID

MAX_LENGTH = 4096  # longest max_src_len / max_tgt_len: a config from a file must not make decoding endless

State = Union[Tensor, tuple[Tensor, Tensor]]  # (L, B, H), or (h, c) for LSTM


@dataclass(frozen=True)
class ModelConfig:
    """Architecture; stored as JSON inside every checkpoint."""

    src_vocab: int
    tgt_vocab: int
    embed: int = 32
    hidden: int = 128
    attn_dim: int = 64  # D: size of q_t, k_i, v_i
    cell: str = "gru"
    layers: int = 1
    bidirectional: bool = False
    attention: str = "dot"
    max_src_len: int = 64  # longest input accepted (the unshared RNN has exactly this many W_t)
    max_tgt_len: int = 72  # decoding cap, <eos> included
    dropout: float = 0.0
    embed_dropout: float = 0.0  # training only: dropout on the looked-up embeddings of x_i and y_{t-1}

    def __post_init__(self) -> None:
        # Types first: a config read from a file may hold anything JSON can. Whole numbers of any
        # integer type (numpy's too) are stored as int, so the config always writes back as JSON.
        counts = ("src_vocab", "tgt_vocab", "embed", "hidden", "attn_dim", "layers", "max_src_len", "max_tgt_len")
        problems = []
        for name in counts:
            value = getattr(self, name)
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                object.__setattr__(self, name, int(value))
            else:
                problems.append(f"{name} must be a whole number, got {value!r}")
        if not isinstance(self.bidirectional, bool):
            problems.append(f"bidirectional must be true or false, got {self.bidirectional!r}")
        for name in ("dropout", "embed_dropout"):
            value = getattr(self, name)
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))
            else:
                problems.append(f"{name} must be a number, got {value!r}")
        if problems:
            raise ExplorerError("; ".join(problems))
        if self.cell not in CELLS:
            problems.append(f"cell must be one of {', '.join(CELLS)}, got {self.cell!r}")
        if self.attention not in ATTENTIONS:
            problems.append(f"attention must be one of {', '.join(ATTENTIONS)}, got {self.attention!r}")
        for name in ("src_vocab", "tgt_vocab", "embed", "hidden", "layers", "max_src_len", "max_tgt_len"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} must be at least 1")
        for name in ("max_src_len", "max_tgt_len"):
            if getattr(self, name) > MAX_LENGTH:
                problems.append(f"{name} must be at most {MAX_LENGTH}")
        if self.attention != "none" and self.attn_dim < 1:
            problems.append("attn_dim must be at least 1")
        if self.cell == "unshared" and (self.layers != 1 or self.bidirectional):
            problems.append("the unshared RNN has one layer and one direction")
        for name in ("dropout", "embed_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                problems.append(f"{name} must be in [0, 1)")
        if problems:
            raise ExplorerError("; ".join(problems))

    @property
    def memory_size(self) -> int:
        """Size of an encoder state h_i (both directions concatenated)."""
        return self.hidden * (2 if self.bidirectional else 1)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


class Dropout(nn.Dropout):
    """nn.Dropout that draws its masks from `generator` while one is set (a Trainer sets its own).

    torch's default generator is one per process, shared by every thread: two sessions training at
    once would take each other's draws, and one seed would no longer give one set of weights.
    Without a generator it is nn.Dropout itself. Masks are drawn in the elements' logical order, whatever
    the memory layout of x: equal inputs get equal masks however they were computed (nn.GRU's batch-first
    output is a transposed view; training's GRU encoder in explorer/fused.py writes a plain one).
    """

    generator: torch.Generator | None = None

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0 or self.generator is None:
            return super().forward(x)
        keep = x.new_empty(x.shape).bernoulli_(1.0 - self.p, generator=self.generator)
        return x * keep / (1.0 - self.p)


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


def count_parameters(module: nn.Module) -> int:
    """Number of learnable numbers in a module (frozen ones too: a shipped, frozen model keeps its size)."""
    return sum(p.numel() for p in module.parameters())


def rnn_parameter_count(input_size: int, hidden: int, length: int, shared: bool) -> int:
    """Parameters of one tanh RNN layer over `length` steps: constant if shared, linear if not."""
    per_step = hidden * (hidden + input_size) + hidden
    return per_step if shared else per_step * length


def reverse_within_length(lengths: Tensor, S: int) -> Tensor:
    """Index (B, S) that reverses each sequence's first `length` positions and leaves padding in place."""
    i = torch.arange(S, device=lengths.device).unsqueeze(0)  # (1, S)
    L = lengths.unsqueeze(1)  # (B, 1)
    return torch.where(i < L, L - 1 - i, i)


def _reorder(x: Tensor, rows: Tensor) -> Tensor:
    """x (B, S, F) with its B * S positions taken in the order of flat indices `rows` (B * S,)."""
    B, S, F = x.shape
    return x.reshape(B * S, F).index_select(0, rows).view(B, S, F)


def _lstm_weight_names(dirs: int, bias: bool) -> list[str]:
    """nn.LSTM's parameter names for its first layer (weight_ih_l0, ..., bias_hh_l0_reverse)."""
    kinds = ("weight", "bias") if bias else ("weight",)
    return [f"{kind}_{part}_l0{suffix}"
            for suffix in ("", "_reverse")[:dirs] for kind in kinds for part in ("ih", "hh")]


def _embedding(count: int, dim: int) -> nn.Embedding:
    """An embedding table (the padding row stays zero). On the meta device, where checkpoint loading builds
    a storage-less skeleton to check shapes, its random init is skipped: those numbers are never used."""
    if torch.get_default_device().type == "meta":
        return nn.Embedding(count, dim, padding_idx=PAD_ID, _weight=torch.empty(count, dim))
    return nn.Embedding(count, dim, padding_idx=PAD_ID)


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
        self.embed = _embedding(cfg.src_vocab, cfg.embed)
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

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, State]:
        x = self.embedded(src)  # (B, S, E)
        if self.cfg.cell == "unshared":
            return self.rnn(x, lengths)
        if self.cfg.cell == "lstm":
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            own_masks = self.training and self.rnn.dropout > 0 and self.dropout.generator is not None
            out, final = self._lstm_by_layer(packed) if own_masks else self.rnn(packed)
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
                inp = x if d == 0 else _reorder(x, reverse)
                out, _ = rnn(inp)  # (B, S, H)
                finals.append(out.gather(1, last).squeeze(1))  # (B, H) state after the last real token
                outs.append(out if d == 0 else _reorder(out, reverse))
            x = torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]  # (B, S, dirs*H)
            if layer + 1 < len(self.rnn):
                x = self.dropout(x)
        mask = (torch.arange(S, device=src.device).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
        return x * mask, torch.stack(finals)  # (B, S, dirs*H) zero on padding; (L*dirs, B, H)

    def embedded(self, src: Tensor) -> Tensor:
        """The embeddings of x_1..x_S (B, S) -> (B, S, E), through embed_dropout while training."""
        return _looked_up(self.embed, self.embed_dropout, src)

    def _lstm_by_layer(self, packed: PackedSequence) -> tuple[PackedSequence, State]:
        """nn.LSTM's own computation (its kernel, its weights), one layer at a time, with this encoder's
        Dropout between the layers: nn.LSTM draws those masks from torch's shared generator, so two
        trainings at once took each other's draws. Only while training with a generator set.

        Each layer runs a one-layer nn.LSTM (built on the meta device, no storage) with that layer's
        weights put in by torch.func.functional_call, so gradients reach this encoder's own parameters."""
        rnn = self.rnn
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
                x = PackedSequence(self.dropout(x.data), sizes)
        order = packed.unsorted_indices  # final states back in the batch's order, as nn.LSTM returns them
        final = (torch.cat(hs).index_select(1, order), torch.cat(cs).index_select(1, order))
        return PackedSequence(x.data, sizes, packed.sorted_indices, order), final

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
        self.embed = _embedding(cfg.tgt_vocab, cfg.embed)
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
        encoder's layers (Encoder._lstm_by_layer)."""
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

    def encode(self, src: Tensor, lengths: Tensor) -> Memory:
        """Run the encoder once: h_i, k_i = Key(h_i), v_i = Value(h_i), the padding mask and s_0."""
        self.check_length(src)
        h, final = self.encoder(src, lengths)  # (B, S, He), h_m per layer
        mask = padding_mask(src, lengths)
        if self.attention is None:
            return Memory(h, None, None, mask, self.initial_state(final))
        keys, values = self._keys_and_values(h)
        return Memory(h, keys, values, mask, self.initial_state(final))

    def _keys_and_values(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """k_i = Key(h_i) and v_i = Value(h_i): h (B, S, He) -> (B, S, D) each."""
        return self.attention.key(h), self.attention.value(h)

    def initial_context(self, batch: int, device: torch.device | None = None) -> Tensor | None:
        """c_0 = 0 (None for the plain encoder-decoder, which has no context)."""
        return None if self.attention is None else torch.zeros(batch, self.cfg.attn_dim, device=device)

    def embedded(self, ids: Tensor) -> Tensor:
        """The decoder's embeddings of `ids` (any shape) -> (·, E), through embed_dropout while training."""
        return _looked_up(self.embed, self.embed_dropout, ids)

    def readout(self, s: Tensor, context: Tensor | None) -> Tensor:
        """Step 4's logits U [s_t; c_t] + b_U, for one step (B, ·) or many at once (B, T, ·)."""
        drop = self.dropout if self.cfg.dropout else _identity
        if context is None:
            return self.out(drop(s))
        return self.out(drop(torch.cat([s, context], dim=-1)))

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
        context = torch.bmm(weights.unsqueeze(1), memory.values).squeeze(1)  # (B, D) c_t = Σ_i α_ti v_i
        # Step 4: ŷ_t = softmax(U [s_t; c_t] + b_U).
        logits = self.readout(s, context) if readout else None  # (B, V)
        return Step(new_state, s, q, scores, weights, context, logits)

    def forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor | None]:
        """Training pass: logits (B, T, V) and weights (B, T, S) for decoder inputs tgt_in (B, T)."""
        return self.decode_training(self.encode(src, lengths), tgt_in, teacher_forcing, generator)

    def decode_training(self, memory: Memory, tgt_in: Tensor, teacher_forcing: float = 1.0,
                        generator: torch.Generator | None = None) -> tuple[Tensor, Tensor | None]:
        """forward() after the encoder: every decoder step through `decode_step`.

        With teacher_forcing < 1, each step feeds the model's own previous guess with that
        probability's complement (one coin per step for the whole batch).
        """
        B, T = tgt_in.shape
        if teacher_forcing >= 1.0:
            return self._teacher_forced(memory, tgt_in)
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
                use_truth = torch.rand((), generator=generator).item() < teacher_forcing
                y = tgt_in[:, t + 1] if use_truth else step.logits.argmax(-1)
        return torch.stack(outputs, 1), (torch.stack(weights, 1) if weights else None)

    def _teacher_forced(self, memory: Memory, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """decode_training() with every y_{t-1} known: each step runs only the rows whose target is not over yet.

        Rows are taken longest target first (`by_target_length`), so the rows still running at step t are a
        prefix of the batch and every step works on views; finished rows' outputs stay zero (the loss
        ignores padding). The embeddings and the readout run once for all steps; the steps run through
        `decode_step` (`_stepwise`).
        """
        batch = by_target_length(memory, tgt_in)
        top, context, flat = self._stepwise(batch.memory, batch.tgt_in, batch.running)
        return self.read_out_steps(batch, top, context, flat)

    def read_out_steps(self, batch: "SortedBatch", top: Tensor, context: Tensor | None,
                       flat: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """Step 4 for every running row of every step, laid out as the caller's batch: s_t (N, H), c_t (N, D)
        and α_t (N, S), stacked step after step -> logits (B, T, V) and weights (B, T, S), zero where a row's
        target is over."""
        B, T = batch.tgt_in.shape
        packed = self.readout(top, context)  # (N, V)
        logits = packed.new_zeros(B * T, packed.shape[-1]).index_copy(0, batch.place, packed).view(B, T, -1)
        alphas = None
        if flat is not None:
            alphas = flat.new_zeros(B * T, flat.shape[-1]).index_copy(0, batch.place, flat).view(B, T, -1)
        if batch.back is not None:
            logits = logits.index_select(0, batch.back)
            alphas = alphas.index_select(0, batch.back) if alphas is not None else None
        return logits, alphas

    def _stepwise(self, memory: Memory, tgt_in: Tensor,
                  running: list[int]) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """The teacher-forced steps through `decode_step`: s_t, c_t and α_t of the running rows of every
        step, one step's rows after another's (N, ·)."""
        B = tgt_in.shape[0]
        # y_{t-1}'s embeddings looked up at once and split by step (the backward pass stacks T slices once).
        embedded = self.embedded(tgt_in).unbind(1)  # T x (B, E)
        state, c = memory.s0, self.initial_context(B, tgt_in.device)
        views: dict[int, Memory] = {B: memory}  # the memory of the first n rows
        tops, contexts, weights = [], [], []
        for t, n in enumerate(running):
            if n not in views:
                cut = lambda x: None if x is None else x[:n]  # noqa: E731
                views[n] = Memory(memory.h[:n], cut(memory.keys), cut(memory.values), memory.mask[:n], None)
            c = c[:n] if c is not None else None
            state = (state[0][:, :n], state[1][:, :n]) if self.is_lstm else state[:, :n]
            step = self.decode_step(tgt_in[:n, t], state, c, views[n], embedded=embedded[t][:n], readout=False)
            tops.append(step.s)
            if step.weights is not None:
                weights.append(step.weights)
                contexts.append(step.context)
            state, c = step.state, step.context
        return torch.cat(tops), (torch.cat(contexts) if contexts else None), (torch.cat(weights) if weights else None)


def padding_mask(src: Tensor, lengths: Tensor) -> Tensor:
    """(B, S) True where a real token is: position i < the sequence's length."""
    return torch.arange(src.shape[1], device=src.device).unsqueeze(0) < lengths.to(src.device).unsqueeze(1)


def stacked_rows(running: list[int] | tuple[int, ...], device: torch.device) -> tuple[Tensor, Tensor]:
    """For each row of the (N, ·) stacks, the batch row and the step it belongs to: step t's rows
    [0, running[t]) follow step t-1's. Row b at step t of a (B, W) layout is then rows * W + steps."""
    rows = torch.cat([torch.arange(n, device=device) for n in running])
    steps = torch.cat([torch.full((n,), t, device=device) for t, n in enumerate(running)])
    return rows, steps


class SortedBatch(NamedTuple):
    """A teacher-forced batch with its rows longest target first (`by_target_length`)."""

    memory: Memory  # the encoder's memory, rows in the sorted order
    tgt_in: Tensor  # (B, T) decoder inputs, sorted
    running: list[int]  # rows still running at each step (a prefix of the sorted rows)
    place: Tensor  # (N,) where each stacked row goes in the (B * T, ·) outputs: row b at step t is b * T + t
    back: Tensor | None  # the order back to the caller's rows; None when they were sorted already


def by_target_length(memory: Memory, tgt_in: Tensor) -> SortedBatch:
    """The batch sorted longest target first, with the rows running at each step and where they go."""
    B, T = tgt_in.shape
    steps = (tgt_in != PAD_ID).sum(1)  # (B,) decoder steps per row: <sos> and the target
    order = torch.argsort(steps, descending=True, stable=True)
    in_order = bool((order == torch.arange(B, device=order.device)).all())
    if not in_order:
        memory, tgt_in, steps = memory.select(order), tgt_in.index_select(0, order), steps.index_select(0, order)
    running = (steps.unsqueeze(0) > torch.arange(T, device=steps.device).unsqueeze(1)).sum(1).tolist()
    running = [n for n in running if n]
    rows, at = stacked_rows(running, tgt_in.device)
    return SortedBatch(memory, tgt_in, running, rows * T + at, None if in_order else torch.argsort(order))


# torch's default generator is one per process, shared by every thread: each session's script and
# each training job. Whoever seeds it and then draws (initialising a model) holds this lock, so two
# sessions building a model with the same seed at the same moment both get the weights of a lone run.
SEED_LOCK = threading.RLock()


def seeded_model(cfg: ModelConfig, seed: int) -> Seq2Seq:
    """A freshly initialised model whose weights depend only on `seed`, even while other threads draw."""
    with SEED_LOCK:
        torch.manual_seed(seed)
        return Seq2Seq(cfg)
