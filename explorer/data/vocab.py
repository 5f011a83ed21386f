"""Vocabularies: token <-> id maps with the four special tokens at fixed ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from explorer.errors import ExplorerError

PAD, SOS, EOS, UNK = "<pad>", "<sos>", "<eos>", "<unk>"
SPECIALS: tuple[str, ...] = (PAD, SOS, EOS, UNK)
PAD_ID, SOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


@dataclass(frozen=True)
class Vocab:
    """An ordered, immutable token list; ids are positions. Specials always come first."""

    tokens: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if tuple(self.tokens[: len(SPECIALS)]) != SPECIALS:
            raise ExplorerError("vocabulary must start with <pad>, <sos>, <eos>, <unk>")
        if len(set(self.tokens)) != len(self.tokens):
            raise ExplorerError("vocabulary has duplicate tokens")
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(self.tokens)})

    @classmethod
    def build(cls, symbols: Iterable[str]) -> "Vocab":
        """A vocabulary of the given symbols in first-seen order (toy tasks: a fixed alphabet)."""
        seen: dict[str, None] = {}
        for s in symbols:
            if s not in SPECIALS:
                seen.setdefault(s, None)
        return cls(SPECIALS + tuple(seen))

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def id(self, token: str) -> int:
        """The id of a token, or the <unk> id."""
        return self._index.get(token, UNK_ID)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids for tokens; unknown tokens map to <unk> (callers decide whether that is an error)."""
        return [self._index.get(t, UNK_ID) for t in tokens]

    def unknown(self, tokens: Sequence[str]) -> list[str]:
        """The tokens this vocabulary does not know, in order of appearance, without repeats."""
        return list(dict.fromkeys(t for t in tokens if t not in self._index))

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens for ids (stops at nothing: <eos> is kept so callers can see it)."""
        return [self.tokens[i] for i in ids]
