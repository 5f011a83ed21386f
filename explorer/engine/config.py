"""The model's architecture as a frozen dataclass, checked on creation against the settings' definitions
(explorer/settings.py): a config read from a file may hold anything JSON can, and it is stored as JSON inside
every checkpoint."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from explorer import settings
from explorer.errors import ExplorerError
from explorer.limits import whole

MAX_LENGTH = 4096  # longest max_src_len / max_tgt_len: a config from a file must not make decoding endless
# the user's settings (their bounds and checks: explorer/settings.py) and the sizes the data and decoder set
SETTINGS = ("cell", "attention", "embed", "hidden", "attn_dim", "layers", "bidirectional", "dropout", "embed_dropout")
COUNTS = ("src_vocab", "tgt_vocab", "max_src_len", "max_tgt_len")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture; sizes as in model.py's docstring (E embed, H hidden, D attn_dim)."""

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
        normalise_types(self)

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


def normalise_types(cfg: ModelConfig) -> None:
    """The settings (explorer/settings.py) checked and normalised (numpy's ints become int, rates float, so
    the config writes back as JSON), and the data's sizes whole numbers of at least 1: every problem in one
    ExplorerError."""
    values = cfg.__dict__
    relax = {"attn_dim": settings.relaxed("attn_dim", lo=0)} if cfg.attention == "none" else {}  # no attention
    checked, problems = settings.problems(values, SETTINGS, overrides=relax)
    for name in COUNTS:
        try:
            checked[name] = whole(values[name], name, 1, MAX_LENGTH if name.startswith("max_") else None)
        except ExplorerError as exc:
            problems.append(str(exc))
    for name, value in checked.items():
        object.__setattr__(cfg, name, value)
    if cfg.cell == "unshared" and {"layers", "bidirectional"} <= checked.keys() and (cfg.layers != 1 or cfg.bidirectional):
        problems.append("the unshared RNN has one layer and one direction")
    if problems:
        raise ExplorerError("; ".join(problems))
