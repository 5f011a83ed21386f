"""The Compare page's numbers: accuracy against input length (the bottleneck curve) and model summaries.

The curve is `evaluation.accuracy_by_length`, the very function behind
`python -m explorer eval --min-len L --max-len L --seed SEED+L`, so the page and the CLI agree
number for number (see `eval_command`).

Computing a curve takes 2–4 s per model on 2 idle cores and tens of seconds on a busy machine, so the
shipped models' curves are also stored in `pretrained/curves.json` (written by
`scripts/report_pretrained.py --curves`), each under the SHA-256 of the checkpoint file it was computed
from: a record is used only for that exact file and those exact lengths, samples and seed, and anything
else is computed afresh.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from explorer.engine.bundle import ModelBundle
from explorer.errors import ExplorerError
from explorer.training.evaluation import accuracy_by_length
from explorer.engine.parameters import count_parameters

CURVE_LENGTHS: tuple[int, ...] = tuple(range(1, 41))
CURVE_SAMPLES = 200
CURVE_SEED = 12345  # the CLI's default --seed; length L uses seed CURVE_SEED + L
CURVES_FILE = "curves.json"  # stored curves of the shipped models, beside them


@dataclass(frozen=True)
class Curve:
    """Accuracy at each input length for one model, and what it cost to compute."""

    model: str
    attention: str
    lengths: tuple[int, ...]
    rows: tuple[dict[str, Any], ...]  # per length: length, n, exact_match, token_accuracy, alignment_accuracy
    samples: int
    seed: int
    trained: tuple[int, int] | None  # the input lengths the model was trained on
    seconds: float

    def at(self, length: int) -> dict[str, Any] | None:
        """The row for one length (None if the curve does not cover it)."""
        for row in self.rows:
            if row["length"] == length:
                return row
        return None


def has_curve(bundle: ModelBundle) -> bool:
    """Whether accuracy by length makes sense: a sequence task (dates and translation have no length knob)."""
    return bundle.task is not None and bundle.task.name != "dates"


def length_curve(bundle: ModelBundle, lengths: Sequence[int] = CURVE_LENGTHS, samples: int = CURVE_SAMPLES,
                 seed: int = CURVE_SEED) -> Curve:
    """Exact match, token and alignment accuracy at each input length (batched per length)."""
    if not has_curve(bundle):
        raise ExplorerError(f"{bundle.name} has no input-length knob (only copy, reverse and sort models do)")
    lengths = [n for n in lengths if n <= bundle.cfg.max_src_len]  # a model reads no longer input
    started = time.perf_counter()
    rows = accuracy_by_length(bundle, list(lengths), samples, seed)
    seconds = time.perf_counter() - started
    trained = (bundle.task.min_len, bundle.task.max_len)
    return Curve(bundle.name, bundle.cfg.attention, tuple(lengths), tuple(rows), samples, seed, trained,
                 seconds)


def eval_command(checkpoint: str, length: int, samples: int = CURVE_SAMPLES, seed: int = CURVE_SEED) -> str:
    """The CLI line that reproduces one point of the curve."""
    return (f"python -m explorer eval --checkpoint {checkpoint} --min-len {length} --max-len {length} "
            f"--samples {samples} --seed {seed + length} --json")


def parameter_breakdown(bundle: ModelBundle) -> dict[str, int]:
    """Parameters by part: encoder, decoder, attention (Query/Key/Value), output layer U."""
    m = bundle.model
    parts = {
        "encoder": count_parameters(m.encoder),
        "decoder": count_parameters(m.embed) + count_parameters(m.cells)
        + (count_parameters(m.bridge) if m.bridge is not None else 0),
        "attention": count_parameters(m.attention) if m.attention is not None else 0,
        "output": count_parameters(m.out),
    }
    parts["total"] = sum(parts.values())
    return parts


def describe_model(bundle: ModelBundle) -> dict[str, Any]:
    """A model's architecture and training in a few readable fields."""
    cfg = bundle.cfg
    what = bundle.task.name if bundle.task else f"{bundle.languages[0]}→{bundle.languages[1]}"
    lengths = None
    if bundle.task is not None and bundle.task.name != "dates":
        lengths = f"{bundle.task.min_len}–{bundle.task.max_len}"
    return {"task": what, "attention": cfg.attention, "cell": cfg.cell, "hidden": cfg.hidden,
            "bidirectional": cfg.bidirectional, "trained lengths": lengths,
            "parameters": count_parameters(bundle.model)}


def random_input(bundle: ModelBundle, length: int, seed: int) -> str:
    """A random input of exactly this length for a sequence task (dates: a random date)."""
    task = bundle.task_obj
    if task is None:
        raise ExplorerError(f"{bundle.name} is a translation model: type a sentence")
    rng = random.Random(seed)
    if task.is_dates:
        return "".join(task.sample(rng, 1)[0].source)
    if length > bundle.cfg.max_src_len:
        raise ExplorerError(f"{bundle.name} reads at most {bundle.cfg.max_src_len} symbols")
    return "".join(task.sample_length(rng, 1, length)[0].source)


# --- stored curves of the shipped checkpoints -------------------------------------------------------

def stored_record(checkpoint_path: Path, store: str, samples: int, seed: int) -> dict | None:
    """The record that the JSON file `store` beside a checkpoint keeps for exactly that file (its sha256),
    these samples and this seed; None when missing, unreadable or made for something else."""
    checkpoint_path = Path(checkpoint_path)
    try:
        record = json.loads((checkpoint_path.parent / store).read_text(encoding="utf-8"))[checkpoint_path.name]
        if (record["sha256"] != file_digest(checkpoint_path) or record["samples"] != samples
                or record["seed"] != seed):
            return None
        return record
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def stored_curve(checkpoint_path: Path, lengths: Sequence[int] = CURVE_LENGTHS, samples: int = CURVE_SAMPLES,
                 seed: int = CURVE_SEED) -> Curve | None:
    """The curve stored for exactly this checkpoint file and these settings, or None (then compute it).
    A missing, unreadable or mismatched store is never an error: it only means computing."""
    record = stored_record(checkpoint_path, CURVES_FILE, samples, seed)
    if record is None:
        return None
    try:
        rows = tuple(dict(row) for row in record["rows"])
        wanted = [n for n in lengths if n <= record["max_src_len"]]
        by_length = {row["length"]: row for row in rows}
        if any(n not in by_length for n in wanted):
            return None
        trained = record["trained"]
        return Curve(record["model"], record["attention"], tuple(wanted), tuple(by_length[n] for n in wanted),
                     samples, seed, tuple(trained) if trained else None, 0.0)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store_curves(entries: Sequence[tuple[Path, ModelBundle]], lengths: Sequence[int] = CURVE_LENGTHS,
                 samples: int = CURVE_SAMPLES, seed: int = CURVE_SEED) -> Path:
    """Compute and store the curves of these checkpoints (files in one folder) in its CURVES_FILE."""
    folder = Path(entries[0][0]).parent
    records = {}
    for path, bundle in entries:
        curve = length_curve(bundle, lengths, samples, seed)
        records[Path(path).name] = {**asdict(curve), "sha256": file_digest(path),
                                    "max_src_len": bundle.cfg.max_src_len}
    target = folder / CURVES_FILE
    target.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return target


# --- BLEU against sentence length (translation: the bottleneck on real sentences) -------------------

BLEU_FILE = "bleu_by_length.json"  # stored BLEU-by-length curves of the shipped translation models
# Source length in words (whitespace-separated, as the data's own filter counts them); the last bucket
# holds whatever is longer than the shipped data has (its English side has at most 12 words).
BLEU_BUCKETS: tuple[tuple[int, int], ...] = ((1, 3), (4, 5), (6, 7), (8, 9), (10, 12), (13, 1000))


@dataclass(frozen=True)
class BleuCurve:
    """Corpus BLEU and chrF of one translation model's greedy output, per bucket of source length."""

    model: str
    attention: str
    rows: tuple[dict[str, Any], ...]  # per bucket: lo, hi (source words), n, bleu, chrf
    data: str  # which pairs: file name and split
    bleu_signature: str


def bleu_by_length(bundle: ModelBundle, pairs: Sequence[tuple[str, str]], data: str,
                   buckets: Sequence[tuple[int, int]] = BLEU_BUCKETS) -> BleuCurve:
    """Score greedy translations of `pairs` (source, reference) by the source's length in words, the
    picture of Bahdanau et al. (2015, fig. 2): does the score hold up as sentences grow?"""
    from explorer.data.corpus import translation_scores
    from explorer.training.evaluation import translate_ids
    if bundle.languages is None:
        raise ExplorerError(f"{bundle.name} is not a translation model")
    limit = bundle.cfg.max_src_len
    usable = [(s, t, bundle.prepare(s).ids) for s, t in pairs
              if s.strip() and 0 < len(bundle.tokenize_source(s)) <= limit]
    outputs: list[list[int]] = []
    for start in range(0, len(usable), 256):
        outputs += translate_ids(bundle, [ids for _, _, ids in usable[start: start + 256]])
    rows, signature = [], ""
    for lo, hi in buckets:
        members = [k for k, (s, _, _) in enumerate(usable) if lo <= len(s.split()) <= hi]
        if not members:
            continue
        hyps = [bundle.detokenize_target(bundle.tgt_vocab.decode(outputs[k])) for k in members]
        refs = [bundle.reference_text(usable[k][1]) for k in members]
        scores = translation_scores(hyps, refs, bundle.languages[1])
        signature = str(scores["bleu_signature"])
        rows.append({"lo": lo, "hi": hi, "n": len(members), "bleu": scores["bleu"], "chrf": scores["chrf"]})
    return BleuCurve(bundle.name, bundle.cfg.attention, tuple(rows), data, signature)


def store_bleu_curves(entries: Sequence[tuple[Path, BleuCurve]]) -> Path:
    """Store BLEU curves beside their checkpoints (one folder), each under its file's SHA-256."""
    folder = Path(entries[0][0]).parent
    records = {Path(path).name: {**asdict(curve), "sha256": file_digest(path)} for path, curve in entries}
    target = folder / BLEU_FILE
    target.write_text(json.dumps(records, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


def stored_bleu_curve(checkpoint_path: Path) -> BleuCurve | None:
    """The stored BLEU curve of exactly this checkpoint file, or None (the held-out pairs it was scored
    on are not shipped, so there is nothing to compute it from: the page says so)."""
    checkpoint_path = Path(checkpoint_path)
    try:
        records = json.loads((checkpoint_path.parent / BLEU_FILE).read_text(encoding="utf-8"))
        record = records[checkpoint_path.name]
        if record["sha256"] != file_digest(checkpoint_path):
            return None
        return BleuCurve(record["model"], record["attention"], tuple(dict(r) for r in record["rows"]),
                         record["data"], record["bleu_signature"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
