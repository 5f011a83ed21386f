"""The limits every entry point shares (app pages, training jobs, CLI): one place, no torch.

A request is checked against these before any work starts, so an oversized beam, sample count,
model or file is refused with one line instead of filling memory. Training jobs also share a
memory budget: `training_memory` estimates one job's peak from its sizes (a pure function, so
jobs in threads or processes can call it) and `check_memory_budget` refuses a job that would not
fit beside the running ones.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from explorer.errors import ExplorerError

MAX_BEAM_WIDTH = 10  # beams of width k keep k hypotheses per step; the app's slider goes this far
MAX_SAMPLES = 100_000  # fresh samples or TSV pairs one `eval` scores
MAX_EVAL_LENGTH = 1_000  # the longest toy-task input `eval` may ask for (the model's own limit comes first)
# A TSV file given on the command line: the app's limit. Preparing a file is linear in its size beyond the
# tokenizers' bounded training: 20 MB of sentences takes ~27 CPU s (benchmarks/RESULTS.md).
MAX_TSV_BYTES_CLI = 20_000_000
MAX_PINS = 1_000  # interventions (masks, pins, forced tokens) in one trace
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Limits:
    """What one training run may ask for (a shared server has 2 cores and many visitors)."""

    max_hidden: int = 512
    max_embed: int = 512
    max_attn_dim: int = 512
    max_layers: int = 3
    max_steps: int = 50_000
    max_batch: int = 1024
    max_seq_len: int = 50  # toy-task source length
    max_alphabet: int = 64
    max_tsv_bytes: int = 20_000_000
    max_tokens: int = 40  # translation sentence length in subword pieces

    def check(self, model_options: Mapping[str, Any], cfg: Any, spec: Any = None) -> None:
        """Raise ExplorerError naming every setting over its limit (`cfg` has steps and batch_size,
        `spec` is a TaskSpec or None)."""
        problems = []
        for key, limit in (("hidden", self.max_hidden), ("embed", self.max_embed),
                           ("attn_dim", self.max_attn_dim), ("layers", self.max_layers)):
            value = model_options.get(key)
            if value is not None and value > limit:
                problems.append(f"{key} is {value}; the limit is {limit}")
        if cfg.steps > self.max_steps:
            problems.append(f"{cfg.steps:,} steps; the limit is {self.max_steps:,}")
        if cfg.batch_size > self.max_batch:
            problems.append(f"batch size {cfg.batch_size}; the limit is {self.max_batch}")
        if spec is not None and spec.name != "dates":
            if spec.max_len > self.max_seq_len:
                problems.append(f"length up to {spec.max_len}; the limit is {self.max_seq_len}")
            if len(spec.alphabet) > self.max_alphabet:
                problems.append(f"{len(spec.alphabet)} symbols; the limit is {self.max_alphabet}")
        if problems:
            raise ExplorerError("too large for this server: " + "; ".join(problems))


LIMITS = Limits()  # the app's training jobs
# The CLI runs on the user's own machine: larger models, longer runs and files, still bounded so a
# typo (--hidden 100000) is a message, not minutes of swapping.
CLI_LIMITS = Limits(max_hidden=2048, max_embed=2048, max_attn_dim=2048, max_layers=6, max_steps=10_000_000,
                    max_batch=8192, max_seq_len=500, max_alphabet=1000, max_tsv_bytes=MAX_TSV_BYTES_CLI,
                    max_tokens=200)


def whole(value: Any, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as an int within [lo, hi], else ExplorerError naming `what` and the range."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ExplorerError(f"{what} must be a whole number, got {value!r}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if hi is None:
            raise ExplorerError(f"{what} must be at least {lo:,}, got {value:,}")
        if lo is None:
            raise ExplorerError(f"{what} must be at most {hi:,}, got {value:,}")
        raise ExplorerError(f"{what} must be between {lo:,} and {hi:,}, got {value:,}")
    return value


def real(value: Any, what: str, lo: float | None = None, hi: float | None = None,
         lo_open: bool = False, hi_open: bool = False) -> float:
    """`value` as a finite float within the range (ends open when asked), else ExplorerError."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ExplorerError(f"{what} must be a finite number, got {value!r}")
    value = float(value)
    below = lo is not None and (value <= lo if lo_open else value < lo)
    above = hi is not None and (value >= hi if hi_open else value > hi)
    if below or above:
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        raise ExplorerError(f"{what} must be in {left}{'-inf' if lo is None else f'{lo:g}'}, "
                            f"{'inf' if hi is None else f'{hi:g}'}{right}, got {value:g}")
    return value


MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0  # the attention softmax's; 1e-38 makes every weight NaN
_URL_INT = re.compile(r"[+-]?[0-9]{1,15}")
_URL_REAL = re.compile(r"[+-]?(?:[0-9]{1,15}(?:\.[0-9]{0,15})?|\.[0-9]{1,15})(?:[eE][+-]?[0-9]{1,3})?")


def check_temperature(value: Any, what: str = "the temperature") -> float:
    """An attention temperature within [MIN_TEMPERATURE, MAX_TEMPERATURE] (every entry point's)."""
    return real(value, what, MIN_TEMPERATURE, MAX_TEMPERATURE)


def url_number(text: Any, what: str, lo: float | None = None, hi: float | None = None,
               kind: type = int) -> int | float:
    """A number from a link (or any text from outside): plain ASCII digits of bounded length, then the range;
    ExplorerError naming `what` otherwise ("²" passes str.isdigit and 5,000 digits pass it too)."""
    pattern = _URL_INT if kind is int else _URL_REAL
    if not isinstance(text, str) or not pattern.fullmatch(text.strip()):
        raise ExplorerError(f"the link's {what} {str(text)[:20]!r} is not a number")
    value = kind(text.strip())
    if not math.isfinite(value):
        raise ExplorerError(f"the link's {what} {str(text)[:20]!r} is not a number")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ExplorerError(f"the link's {what} {str(text)[:20]!r} must be "
                            + (f"{lo:g} or more" if hi is None else f"from {lo:g} to {hi:g}" if lo is not None
                               else f"at most {hi:g}"))
    return value


def check_beam(width: Any) -> int:
    """A beam width: 1 (greedy) to MAX_BEAM_WIDTH."""
    return whole(width, "the beam width", 1, MAX_BEAM_WIDTH)


def check_samples(samples: Any) -> int:
    """A number of samples or pairs to score: 1 to MAX_SAMPLES."""
    return whole(samples, "the number of samples", 1, MAX_SAMPLES)


def check_lengths(min_len: int | None, max_len: int | None, longest: int) -> None:
    """Toy-task input lengths asked of a model that reads at most `longest` tokens: checked before
    any sample is drawn."""
    for value in (min_len, max_len):
        if value is not None:
            whole(value, "an input length", 1, None)
            if value > min(longest, MAX_EVAL_LENGTH):
                raise ExplorerError(f"inputs of length {value:,} are longer than this model reads "
                                    f"(at most {min(longest, MAX_EVAL_LENGTH)})")
    if min_len is not None and max_len is not None and min_len > max_len:
        raise ExplorerError(f"the shortest input length ({min_len}) is above the longest ({max_len})")


# --- memory ---------------------------------------------------------------------------------

# Measured with resource.getrusage on CPU (README, "Reliability"): a process that has imported torch
# and the app's modules holds ~400 MB; a parsed TSV costs about 60 bytes of Python objects (strings,
# tuples, token lists, id pairs) per byte of file; weights, gradients and Adam's two moments are four
# float32 copies of the parameters; activations of one step are about 40 floats per
# (batch row, token, hidden unit, layer).
BASE_BYTES = 400_000_000
TSV_BYTES_FACTOR = 60
PARSED_TSV_FACTOR = 12  # a parsed upload kept for the Train page (pairs as strings): ~235 MB for a 19.5 MB file
ACTIVATION_FLOATS = 40


def training_memory(tsv_bytes: int = 0, parameters: int = 0, batch: int = 64, tokens: int = 64,
                    hidden: int = 128, layers: int = 1) -> int:
    """An upper estimate, in bytes, of one training job's peak memory (pure: sizes in, bytes out)."""
    data = TSV_BYTES_FACTOR * max(0, tsv_bytes)
    weights = 4 * 4 * max(0, parameters)
    activations = 4 * ACTIVATION_FLOATS * batch * tokens * hidden * layers
    return BASE_BYTES + data + weights + activations


def memory_budget(env: Mapping[str, str] = os.environ) -> int:
    """Bytes the server may use for training jobs and kept uploads together: EXPLORER_TRAINING_MEMORY_MB, else
    4 GB."""
    try:
        return int(float(env.get("EXPLORER_TRAINING_MEMORY_MB", 4000)) * 1_000_000)
    except ValueError:
        return 4_000_000_000


def uploads_budget(env: Mapping[str, str] = os.environ) -> int:
    """The part of `memory_budget` kept for uploaded files parsed in the server (every session's together):
    EXPLORER_PARSED_TSV_MB, else 300 MB, at most half the budget; training jobs share the rest."""
    try:
        wanted = int(float(env.get("EXPLORER_PARSED_TSV_MB", 300)) * 1_000_000)
    except ValueError:
        wanted = 300_000_000
    return max(0, min(wanted, memory_budget(env) // 2))


def jobs_budget(env: Mapping[str, str] = os.environ) -> int:
    """Bytes all training jobs of one server may use together: the memory budget less the uploads' part."""
    return memory_budget(env) - uploads_budget(env)


def check_memory_budget(new: int, running: Iterable[int], budget: int) -> None:
    """ExplorerError when a job estimated at `new` bytes does not fit beside the `running` ones."""
    used = sum(running)
    if new > budget:
        raise ExplorerError(f"this training needs about {new / 1e9:.1f} GB; the server allows "
                            f"{budget / 1e9:.1f} GB: use a smaller file or model")
    if used + new > budget:
        raise ExplorerError(f"the server is busy: running trainings use about {used / 1e9:.1f} GB of "
                            f"{budget / 1e9:.1f} GB, this one needs {new / 1e9:.1f} GB; try again in a minute")
