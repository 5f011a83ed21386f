"""The names a user picks from (cells, score functions), with no torch: pages and the CLI list them cheaply.

`explorer.engine.model` checks a config against these; a new cell or score function is added there and here.
"""

from __future__ import annotations

CELLS: tuple[str, ...] = ("rnn", "gru", "lstm", "unshared")
ATTENTIONS: tuple[str, ...] = ("none", "dot", "scaled_dot", "additive")
