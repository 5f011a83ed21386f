"""Training a saved model further: a downloaded or uploaded checkpoint, on its own task or a new TSV file.

The model keeps its architecture and vocabularies; training works on a private copy, so the model it
started from stays as it was whatever happens to the run. A translation file must mostly use words the
model's vocabularies know: its vocabulary cannot grow without changing the model's shape.
"""

from __future__ import annotations

from typing import Callable

from explorer.engine.bundle import ModelBundle
from explorer.checkpoints.registry import private_copy
from explorer.limits import LIMITS, Limits, training_memory
from explorer.training.further_data import pair_data
from explorer.training.jobs import TrainingJob
from explorer.training.train import TrainConfig, task_config


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
    from explorer.training.jobs import automatic_length, eval_interval, job_memory, registry, training_pairs
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
    job.memory = job_memory(copy, cfg, len(tsv or b""), tokens)
    job.held_out = held_out
    return job
