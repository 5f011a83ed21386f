"""Faithfulness over many sentences: the inputs (fresh toy-task samples, a TSV file's sources, or one text),
each explained (explorer/engine/attribution.py), and the figures over all of them (explorer.faithfulness).

The CLI's `faithfulness` and the Compare page's faithfulness table both run through `explain_sources`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable, Sequence

from explorer.data.tasks import make_task
from explorer.engine.attribution import explain
from explorer.engine.bundle import ModelBundle, Prepared
from explorer.errors import ExplorerError
from explorer.faithfulness import EPSILON, IG_STEPS, SEED, Explanation, json_ready, summarise
from explorer.limits import check_samples
from explorer.training.comparison import file_digest, stored_record


def task_sources(bundle: ModelBundle, samples: int, seed: int) -> list[Prepared]:
    """Fresh inputs of the bundle's toy task (its own lengths), the same for the same seed."""
    if bundle.task is None:
        raise ExplorerError(f"{bundle.name} is a translation model: give --data FILE.tsv or --input TEXT")
    check_samples(samples)
    task = make_task(bundle.task)
    return [Prepared(task.detokenize(e.source), tuple(e.source), tuple(bundle.src_vocab.encode(e.source)), ())
            for e in task.sample(random.Random(seed), samples)]


def tsv_sources(bundle: ModelBundle, path: str, samples: int | None = None, split: str = "all") -> list[Prepared]:
    """The sources of a TSV file the model can read (the first `samples` of them), as its tokens; split "valid":
    only the held-out part of the file the model was trained on, split as training split it."""
    from explorer.data.corpus import load_tsv
    from explorer.training.evaluation import held_out_pairs
    if samples is not None:
        check_samples(samples)
    if split not in ("all", "valid"):
        raise ExplorerError(f"split must be 'all' or 'valid', got {split!r}")
    pairs = list(load_tsv(path).pairs)
    if split == "valid":
        pairs = held_out_pairs(bundle, pairs)
    out = []
    for source, _ in pairs:
        if samples is not None and len(out) >= samples:
            break
        try:
            out.append(bundle.prepare(source))
        except ExplorerError:  # too long for this model, or symbols a toy task does not know
            continue
    if not out:
        raise ExplorerError(f"no source in {path} that {bundle.name} can read")
    return out


def explain_sources(bundle: ModelBundle, sources: Sequence[Prepared | str], *, ig_steps: int = IG_STEPS,
                    epsilon: float = EPSILON, seed: int = SEED,
                    on_progress: Callable[[int, int], None] | None = None) -> list[Explanation]:
    """Every source explained (its greedy decoding), `on_progress(done, total)` after each."""
    out = []
    for number, source in enumerate(sources, start=1):
        out.append(explain(bundle, source, ig_steps=ig_steps, epsilon=epsilon, seed=seed))
        if on_progress is not None:
            on_progress(number, len(sources))
    return out


def faithfulness_report(bundle: ModelBundle, samples: int = 100, seed: int = 12345, *, ig_steps: int = IG_STEPS,
                        epsilon: float = EPSILON,
                        on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """summarise() of `samples` fresh inputs of a toy model's task (Compare's faithfulness of the twins)."""
    explained = explain_sources(bundle, task_sources(bundle, samples, seed), ig_steps=ig_steps, epsilon=epsilon,
                                on_progress=on_progress)
    return summarise(explained)


# --- the shipped models' figures, stored beside them (Compare reads them instantly) ----------------------

FAITHFULNESS_FILE = "faithfulness.json"
STORED_SAMPLES = 100  # fresh inputs per model in the stored reports
STORED_SEED = 12345


def stored_report(checkpoint_path: Path, samples: int = STORED_SAMPLES, seed: int = STORED_SEED) -> dict | None:
    """The report stored for exactly this checkpoint file and these settings, or None (then compute it).
    A missing, unreadable or mismatched store is never an error: it only means computing."""
    record = stored_record(checkpoint_path, FAITHFULNESS_FILE, samples, seed)
    try:
        return None if record is None else dict(record["report"])
    except (KeyError, TypeError, ValueError):
        return None


def store_reports(entries: Sequence[tuple[Path, dict]], samples: int = STORED_SAMPLES,
                  seed: int = STORED_SEED) -> Path:
    """Write the reports of these checkpoints (files in one folder) to its FAITHFULNESS_FILE."""
    folder = Path(entries[0][0]).parent
    records = {Path(path).name: {"sha256": file_digest(path), "samples": samples, "seed": seed,
                                 "report": json_ready(report)} for path, report in entries}
    target = folder / FAITHFULNESS_FILE
    target.write_text(json.dumps(records, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return target
