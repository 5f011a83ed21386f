"""The model's architecture as a frozen dataclass, checked on creation: a config read from a file may hold anything
JSON can, and it is stored as JSON inside every checkpoint."""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass

from explorer.defaults import ATTENTIONS, CELLS
from explorer.errors import ExplorerError

MAX_LENGTH = 4096  # longest max_src_len / max_tgt_len: a config from a file must not make decoding endless
COUNTS = ("src_vocab", "tgt_vocab", "embed", "hidden", "attn_dim", "layers", "max_src_len", "max_tgt_len")
RATES = ("dropout", "embed_dropout")


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
        check_ranges(self)

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
    """Whole numbers of any integer type (numpy's too) become int and rates float, so the config writes back as
    JSON; anything else is refused before a range is compared."""
    problems = []
    for name in COUNTS:
        value = getattr(cfg, name)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            object.__setattr__(cfg, name, int(value))
        else:
            problems.append(f"{name} must be a whole number, got {value!r}")
    if not isinstance(cfg.bidirectional, bool):
        problems.append(f"bidirectional must be true or false, got {cfg.bidirectional!r}")
    for name in RATES:
        value = getattr(cfg, name)
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            object.__setattr__(cfg, name, float(value))
        else:
            problems.append(f"{name} must be a number, got {value!r}")
    if problems:
        raise ExplorerError("; ".join(problems))


def check_ranges(cfg: ModelConfig) -> None:
    """Every problem of a typed config in one ExplorerError: names it does not know, sizes out of range."""
    problems = []
    if cfg.cell not in CELLS:
        problems.append(f"cell must be one of {', '.join(CELLS)}, got {cfg.cell!r}")
    if cfg.attention not in ATTENTIONS:
        problems.append(f"attention must be one of {', '.join(ATTENTIONS)}, got {cfg.attention!r}")
    for name in ("src_vocab", "tgt_vocab", "embed", "hidden", "layers", "max_src_len", "max_tgt_len"):
        if getattr(cfg, name) < 1:
            problems.append(f"{name} must be at least 1")
    for name in ("max_src_len", "max_tgt_len"):
        if getattr(cfg, name) > MAX_LENGTH:
            problems.append(f"{name} must be at most {MAX_LENGTH}")
    if cfg.attention != "none" and cfg.attn_dim < 1:
        problems.append("attn_dim must be at least 1")
    if cfg.cell == "unshared" and (cfg.layers != 1 or cfg.bidirectional):
        problems.append("the unshared RNN has one layer and one direction")
    for name in RATES:
        if not 0.0 <= getattr(cfg, name) < 1.0:
            problems.append(f"{name} must be in [0, 1)")
    if problems:
        raise ExplorerError("; ".join(problems))
