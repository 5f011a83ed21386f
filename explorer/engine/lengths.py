"""How long decoding may run: the length a user would expect from the input, one rule for every decoder.

A model that never writes <eos> (a masked input, an emoji it never saw) would otherwise run to its
`max_tgt_len` (72 or 88 steps) and show a long loop. The trace, greedy decoding (one input or a batch)
and beam search all take their cap from `output_cap`:

- toy tasks write what the task allows: copy, reverse and sort exactly the input's symbols, dates the
  ten characters of YYYY-MM-DD; one more step for <eos>;
- a translation gets room in proportion to its source: ceil(2.8 × the input's pieces) + 2 steps
  (<eos> included). 2.8 is the 99.9th percentile of target/source length in pieces over the shipped
  models' Tatoeba training pairs (eng-fra 2.8, eng-cmn 2.5; short sentences have the largest ratios),
  and the rule leaves room for 99.97% of eng-fra's 112,060 pairs and all 27,008 of eng-cmn's.

Never more than the model's own `max_tgt_len`. Teacher forcing is not capped: the target sets the length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from explorer.data.tasks import ISO_LEN
from explorer.data.vocab import EOS

if TYPE_CHECKING:
    from explorer.engine.bundle import ModelBundle

TRANSLATION_RATIO = 2.8  # output pieces per input piece (99.9th percentile of the training pairs)
TRANSLATION_EXTRA = 2  # steps on top: one piece of slack and <eos>


@dataclass(frozen=True)
class Cap:
    """The most decoding steps (<eos> included) for one input, and the rule that gave it, in words."""

    steps: int
    rule: str


def output_cap(bundle: "ModelBundle", source_len: int) -> Cap:
    """The decoding cap for an input of `source_len` tokens (see the module's docstring)."""
    limit = bundle.cfg.max_tgt_len
    task = bundle.task
    if task is not None and task.name == "dates":
        steps, rule = ISO_LEN + 1, f"an ISO date has {ISO_LEN} characters, then <eos>"
    elif task is not None:
        verb = {"copy": "a copy", "reverse": "a reversal", "sort": "a sorted output"}.get(task.name, "the output")
        steps, rule = source_len + 1, f"{verb} of {source_len} symbols has {source_len}, then <eos>"
    else:
        steps = math.ceil(TRANSLATION_RATIO * source_len) + TRANSLATION_EXTRA
        rule = (f"a translation gets {TRANSLATION_RATIO:g} × the input's {source_len} pieces + "
                f"{TRANSLATION_EXTRA}, <eos> included")
    if steps >= limit:
        return Cap(limit, f"the model decodes at most {limit} steps")
    return Cap(steps, rule)


def output_caps(bundle: "ModelBundle", sources: Sequence[Sequence[int]]) -> list[int]:
    """The cap of each input of a batch (for `greedy_batch`)."""
    return [output_cap(bundle, len(s)).steps for s in sources]


def cut_note(bundle: "ModelBundle", source_len: int, output_tokens: Sequence[str]) -> str | None:
    """A one-line note when an output stopped at the cap without <eos> (None when it ended by itself)."""
    cap = output_cap(bundle, source_len)
    if len(output_tokens) < cap.steps or (output_tokens and output_tokens[-1] == EOS):
        return None
    return f"The output was cut at {cap.steps} steps without <eos> ({cap.rule})."
