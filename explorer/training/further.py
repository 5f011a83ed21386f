"""Training a saved model further: a downloaded or uploaded checkpoint, on its own task or a new TSV file.

The model keeps its architecture and vocabularies; training works on a private copy, so the model it
started from stays as it was whatever happens to the run. A translation file must mostly use words the
model's vocabularies know: its vocabulary cannot grow without changing the model's shape.
"""

from __future__ import annotations

from typing import Any, Callable

from explorer import defaults
from explorer.engine.bundle import ModelBundle
from explorer.errors import ExplorerError
from explorer.training.jobs import LIMITS, Limits, TrainingJob, training_memory
from explorer.checkpoints.registry import private_copy
from explorer.training.train import Pair, PairData, TrainConfig, task_config
from explorer.data.vocab import UNK

MAX_UNKNOWN = 0.2  # a file with more of its tokens outside the model's vocabularies is refused


def known_token(token: str, vocab) -> bool:
    """A token the vocabulary has learnt: not <unk> (word-level models) and not a byte piece (a subword
    model spells text it has never seen, e.g. another script, byte by byte)."""
    return token in vocab and token != UNK and not (token.startswith("<0x") and token.endswith(">"))


def vocabulary_coverage(bundle: ModelBundle, pairs: list[tuple[str, str]]) -> tuple[float, float]:
    """The share of source and of target tokens in `pairs` that the model's vocabularies know."""
    known, total = [0, 0], [0, 0]
    for source, target in pairs:
        for side, (tokens, vocab) in enumerate(((bundle.tokenize_source(source), bundle.src_vocab),
                                               (bundle.tokenize_target(target), bundle.tgt_vocab))):
            total[side] += len(tokens)
            known[side] += sum(1 for t in tokens if known_token(t, vocab))
    return tuple(k / t if t else 0.0 for k, t in zip(known, total))  # type: ignore[return-value]


def pair_data(bundle: ModelBundle, tsv: bytes | None, seed: int,
              limits: Limits = LIMITS) -> tuple[PairData, list[tuple[str, str]]]:
    """A translation model's data to train further on: a TSV (the one it was trained on, or a new one) split
    as training splits it, and the held-out pairs as text. ExplorerError with the reason when it does not fit."""
    if tsv is None:
        raise ExplorerError(f"{bundle.name} is a translation model: upload a TSV file of sentence pairs to train "
                            "it on (the file it was trained on, or a new one in the same languages)")
    if len(tsv) > limits.max_tsv_bytes:
        raise ExplorerError(f"the file is {len(tsv):,} bytes; the limit is {limits.max_tsv_bytes:,}")
    from explorer.data.corpus import load_tsv_bytes, split_pairs
    corpus = load_tsv_bytes(tsv, name="upload")
    fraction = float(bundle.training.get("valid_fraction", defaults.TRANSLATION_DATA_DEFAULTS["valid_fraction"]))
    train_items, valid_items = split_pairs(list(enumerate(corpus.pairs)), fraction, seed)
    max_src, max_tgt = bundle.model.cfg.max_src_len, bundle.model.cfg.max_tgt_len - 1

    def usable(items) -> list[tuple[str, str]]:
        return [(s, t) for _, (s, t) in items
                if 0 < len(bundle.tokenize_source(s)) <= max_src and 0 < len(bundle.tokenize_target(t)) <= max_tgt]
    train_text, valid_text = usable(train_items), usable(valid_items)
    if not train_text:
        raise ExplorerError(f"no pair in the file fits {bundle.name} (sentences of at most {max_src} tokens)")
    src_known, tgt_known = vocabulary_coverage(bundle, train_text)
    if min(src_known, tgt_known) < 1 - MAX_UNKNOWN:
        raise ExplorerError(f"this file's vocabulary does not fit {bundle.name}: it knows {100 * src_known:.0f}% of the "
                            f"source words and {100 * tgt_known:.0f}% of the target words (at least "
                            f"{100 * (1 - MAX_UNKNOWN):.0f}% needed; a model's vocabulary cannot grow). "
                            "Train a new model on this file instead")

    def to_pair(s: str, t: str) -> Pair:
        return Pair(tuple(bundle.src_vocab.encode(bundle.tokenize_source(s))),
                    tuple(bundle.tgt_vocab.encode(bundle.tokenize_target(t))))
    probe = train_text[0][0]
    data = PairData([to_pair(s, t) for s, t in train_text], [to_pair(s, t) for s, t in valid_text], probe)
    return data, valid_text


def further_job(bundle: ModelBundle, name: str, cfg: TrainConfig, tsv: bytes | None = None,
                probe: str | None = None, publish: Callable[[ModelBundle], None] | None = None,
                limits: Limits = LIMITS, auto: bool = False, epochs: float | None = None) -> TrainingJob:
    """A (not yet started) job training a private copy of `bundle`, named `name`, with `cfg` (its
    optimizer starts afresh; the architecture and vocabularies are the bundle's), in a process of its own
    (jobs.TrainingJob): `bundle` itself is never touched. Translation: `auto` sizes the run from the file
    as a new run's (defaults.py), `epochs` sets it in passes over the file."""
    import math
    from dataclasses import replace

    from explorer.checkpoints import checkpoint

    from explorer.training import job_process
    from explorer.training.jobs import _job_memory, automatic_length, eval_interval, registry, training_pairs
    limits.check({}, cfg, bundle.task)
    copy = private_copy(bundle, name)
    if bundle.task is not None:
        task = bundle.task_obj
        cfg = task_config(cfg, task)
        held_out: list[tuple[str, str]] = []
        probe_text, tokens = probe or task.examples()[0], 2 * bundle.task.max_len + 2
        recipe = job_process.Recipe(name, {}, spec=bundle.task, seed=cfg.seed, weights=checkpoint.to_bytes(copy))
    else:
        if tsv is not None:
            registry().check_memory(training_memory(len(tsv)))
        data, held_out = pair_data(bundle, tsv, cfg.seed, limits)  # reads only its vocabularies and tokenizers
        if auto:
            cfg = automatic_length(cfg, training_pairs(data), limits)
        elif epochs is not None:
            steps = min(limits.max_steps, max(1, math.ceil(epochs * training_pairs(data) / cfg.batch_size)))
            cfg = replace(cfg, steps=steps, eval_every=eval_interval(steps, cfg.eval_every))
        from explorer.training.recipes import pick_examples
        copy.examples = pick_examples(copy, held_out) or copy.examples
        probe_text, tokens = probe or data.probe_text(), bundle.model.cfg.max_src_len
        recipe = job_process.Recipe(name, {}, tsv=tsv, seed=cfg.seed, weights=checkpoint.to_bytes(copy))
    if probe is not None:
        copy.prepare(probe)  # an unusable probe is refused now, with the reason
    job = TrainingJob(recipe, copy, cfg, probe_text, probe=probe, publish=publish)
    job.memory = _job_memory(copy, cfg, len(tsv or b""), tokens)
    job.held_out = held_out
    return job
