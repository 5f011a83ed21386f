"""Training a saved model further: a downloaded or uploaded checkpoint, on its own task or a new TSV file.

The model keeps its architecture and vocabularies; training works on a private copy, so the model it
started from stays as it was whatever happens to the run. A translation file must mostly use words the
model's vocabularies know: its vocabulary cannot grow without changing the model's shape.
"""

from __future__ import annotations

from typing import Callable

from explorer.engine.bundle import ModelBundle
from explorer.checkpoints.registry import private_copy
from explorer.limits import LIMITS, Limits
from explorer.jobs import TrainingJob
from explorer.training.train import TrainConfig, task_config


def further_job(bundle: ModelBundle, name: str, cfg: TrainConfig, tsv: bytes | None = None,
                probe: str | None = None, publish: Callable[[ModelBundle], None] | None = None,
                limits: Limits = LIMITS, auto: bool = False, epochs: float | None = None,
                file_name: str = "upload") -> TrainingJob:
    """A (not yet started) job training a private copy of `bundle`, named `name`, with `cfg` (its
    optimizer starts afresh; the architecture and vocabularies are the bundle's), in a process of its own
    (jobs.TrainingJob): `bundle` itself is never touched. Translation: `auto` sizes the run from the file
    as a new run's (defaults.py), `epochs` sets it in passes over the file."""
    from explorer.checkpoints import checkpoint
    from explorer.engine.bundle import check_text
    from explorer.jobs import worker
    from explorer.training.further_data import check_file
    from explorer.jobs import job_memory
    limits.check({}, cfg, bundle.task)
    copy = private_copy(bundle, name)
    plan = None
    if bundle.task is not None:
        task = bundle.task_obj
        cfg = task_config(cfg, task)
        probe_text, tokens = probe or task.examples()[0], 2 * bundle.task.max_len + 2
        recipe = worker.Recipe(name, {}, spec=bundle.task, seed=cfg.seed, weights=checkpoint.to_bytes(copy))
        if probe is not None:
            copy.prepare(probe)  # an unusable probe is refused now, with the reason
    else:  # the file is read, and tokenized with the model's own tokenizers, in the job's process (worker.py)
        check_file(bundle, tsv, limits)
        if probe is not None:
            check_text(probe, "input")  # its pieces are checked there
        probe_text, tokens = probe or "", bundle.cfg.max_src_len
        recipe = worker.Recipe(name, {}, tsv=tsv, seed=cfg.seed, weights=checkpoint.to_bytes(copy),
                                    file_name=file_name)
        plan = worker.Plan(auto=auto, epochs=epochs, max_steps=limits.max_steps)
    job = TrainingJob(recipe, copy, cfg, probe_text, probe=probe, publish=publish, plan=plan)
    job.memory = job_memory(copy, cfg, len(tsv or b""), tokens)
    return job
