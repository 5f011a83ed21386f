"""The names a user picks (cells, score functions, tasks) and the rules a translation file sizes its run by.

Each setting's default, bounds and help live in explorer/settings.py; the measurements behind the toy tasks'
defaults are docs/PERFORMANCE.md's and benchmarks/RESULTS.md's. No torch here: `python -m explorer --help` and
the pages list these without importing it.
"""

from __future__ import annotations

import math
from typing import Any

# --- names ------------------------------------------------------------------------------------------
# explorer/engine/config.py checks a config against these, explorer/data/tasks.py builds the tasks: a new cell,
# score function or task is added there (a cell or score function also in explorer/engine/model.py) and here.
CELLS: tuple[str, ...] = ("rnn", "gru", "lstm", "unshared")
ATTENTIONS: tuple[str, ...] = ("none", "dot", "scaled_dot", "additive")
TASKS: tuple[str, ...] = ("copy", "reverse", "sort", "dates")

# --- toy tasks ------------------------------------------------------------------------------------
# Below this hidden size a run trains in one process unless told otherwise (distributed.processes_wanted says why).
DDP_MIN_HIDDEN = 128

# --- translation (your own TSV) -------------------------------------------------------------------
LARGE_MODEL: dict[str, Any] = {"embed": 128, "hidden": 256, "attn_dim": 128, "bidirectional": True, "dropout": 0.2}
SMALL_MODEL: dict[str, Any] = {"embed": 64, "hidden": 128, "attn_dim": 64, "bidirectional": True, "dropout": 0.0}
SMALL_DATA_PAIRS = 10_000  # below this many training pairs, the small model
FEW_PAIRS = 100  # below this many training pairs a run is warned that it can learn little more than the pairs
EPOCHS = 12.0  # the shipped eng-fra and eng-cmn reached their BLEU in 12-13 epochs
MIN_STEPS = 1500  # the floor: 300 pig-latin pairs need ~1,000 steps (225 epochs) to be useful
MAX_STEPS = 20_000  # the ceiling: about 2 h on 2 cores at the large model's size
STOP_PATIENCE = 5  # stop after this many evaluations without a better validation token accuracy
EVALUATIONS_PER_RUN = 20  # evaluate about this often in a run (at most every MAX_EVAL_EVERY steps)
MAX_EVAL_EVERY = 1000
EXAMPLES_KEPT = 40  # held-out pairs a translation checkpoint keeps for Explore's Examples and Random

# --- undertrained? -------------------------------------------------------------------------------
GAP = 0.25  # validation exact match this far below training's: the model has not generalised yet
STILL_IMPROVING = 0.01  # validation token accuracy rose this much over the last quarter of the run


def translation_model(pairs: int) -> dict[str, Any]:
    """The model size for a file with this many training pairs."""
    return dict(SMALL_MODEL if pairs < SMALL_DATA_PAIRS else LARGE_MODEL)


def few_pairs_warning(pairs: int) -> str:
    """The warning for a run on few pairs, the same in the CLI and the app."""
    return (f"only {pairs:,} training pair{'s' if pairs != 1 else ''}: a model learns little more than "
            f"these sentences from under {FEW_PAIRS:,} (the shipped models saw tens of thousands)")


def translation_steps(pairs: int, batch_size: int, epochs: float | None = None) -> int:
    """Steps for `epochs` (default EPOCHS) over `pairs` training pairs; without explicit epochs, kept
    within [floor, ceiling]; explicit epochs are honoured as asked (at least one step)."""
    steps = math.ceil((EPOCHS if epochs is None else epochs) * pairs / max(1, batch_size))
    return max(1, steps) if epochs is not None else max(MIN_STEPS, min(MAX_STEPS, steps))


def eval_interval(steps: int, most: int = MAX_EVAL_EVERY) -> int:
    """About EVALUATIONS_PER_RUN evaluations a run, at least every `most` steps, at most every 10."""
    return max(1, min(most, max(10, steps // EVALUATIONS_PER_RUN)))


def undertrained(evals: list[dict[str, float]], reason: str) -> str | None:
    """Why a finished run looks undertrained, in one sentence for the user, or None.

    `evals` are the run's evaluations in order, each with train_exact, valid_exact and valid_token (0-1);
    `reason` is why the run stopped ("steps", "target", "time", "stopped", "plateau")."""
    if not evals or reason == "target":
        return None
    last = evals[-1]
    quarter = [e for e in evals if e["step"] <= last["step"] * 0.75] if len(evals) >= 4 else []
    if reason in ("steps", "time", "stopped") and quarter:
        before = max(e["valid_token"] for e in quarter)
        if last["valid_token"] - before >= STILL_IMPROVING:
            return (f"Still improving when it stopped: validation token accuracy rose from {100 * before:.1f}% to "
                    f"{100 * last['valid_token']:.1f}% over the last quarter of the run. Continue training.")
    if last["train_exact"] - last["valid_exact"] >= GAP:
        return (f"Validation exact match ({100 * last['valid_exact']:.1f}%) is far below training "
                f"({100 * last['train_exact']:.1f}%): the model knows its training pairs but not yet new ones. "
                "Training longer can help; with few pairs, more data helps most.")
    return None
