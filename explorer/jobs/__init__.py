"""Background training jobs, as the Train page uses them: make a job (a fresh toy-task or translation
model, or a copy of a saved toy-task model), then start, stop and continue it through the registry.

Where the parts live: a job's lifecycle in the server (lifecycle.py) and the process it trains in (worker.py), what
the page reads of it (records.py), training slots (slots.py), the server's jobs by session with their reaper
(registry.py), and a saved model trained further (further.py); the probe's snapshots and the validation loss are
training's (explorer/training/probes.py, validation.py). This package makes jobs and gathers the names the pages
use, so a page imports one module.

No streamlit here: the page passes in a session id and, optionally, a liveness check.
"""

from __future__ import annotations

from typing import Any, Callable

from explorer.checkpoints import checkpoint
from explorer.engine.bundle import ModelBundle
from explorer.errors import ExplorerError
from explorer.limits import LIMITS, Limits, training_memory
from explorer.data.tasks import TaskSpec
from explorer.jobs import worker
from explorer.jobs.worker import Plan, eval_interval, training_pairs
from explorer.jobs.lifecycle import TrainingJob
from explorer.jobs.records import (FAILED, FINISHED, NEW, QUEUED, RUNNING, STOPPED, EvalRecord, JobView,
                                           StepRecord)
from explorer.jobs.registry import JobRegistry, registry
from explorer.training.train import TrainConfig

__all__ = ["FAILED", "FINISHED", "NEW", "QUEUED", "RUNNING", "STOPPED", "EvalRecord", "JobRegistry", "JobView",
           "LIMITS", "Limits", "Plan", "StepRecord", "TrainingJob", "automatic_length", "bundle_job", "eval_interval",
           "job_memory", "registry", "task_job", "training_pairs", "translation_job"]


def task_job(spec: TaskSpec, name: str, model_options: dict[str, Any], cfg: TrainConfig,
             probe: str | None = None, publish: Callable[[ModelBundle], None] | None = None,
             limits: Limits = LIMITS) -> TrainingJob:
    """A (not yet started) job training a fresh model on a toy task."""
    from explorer.training.train import task_config
    limits.check(model_options, cfg, spec)
    recipe = worker.Recipe(name, dict(model_options), spec=spec, seed=cfg.seed)
    bundle, task = recipe.build()  # here too: the untrained model is shown at once, and a bad probe refused
    cfg = task_config(cfg, task)
    if probe is not None:
        bundle.prepare(probe)  # an unusable probe is refused now, with the reason
    job = TrainingJob(recipe, bundle, cfg, probe or task.examples()[0], probe=probe, publish=publish)
    job.memory = job_memory(bundle, cfg, 0, 2 * spec.max_len + 2)
    return job


def job_memory(bundle: ModelBundle, cfg: TrainConfig, tsv_bytes: int, tokens: int) -> int:
    """The job's memory estimate (limits.training_memory) from its model and data: its own process."""
    mc = bundle.cfg
    return training_memory(tsv_bytes, bundle.parameter_count, cfg.batch_size, tokens, mc.memory_size, mc.layers)


def bundle_job(bundle: ModelBundle, cfg: TrainConfig, probe: str | None = None,
               publish: Callable[[ModelBundle], None] | None = None) -> TrainingJob:
    """A (not yet started) job training a toy-task model further (e.g. a private copy of a shipped one);
    the process trains its own copy: the result is the job's snapshot, `bundle` stays as it is."""
    import copy
    from explorer.training.train import task_config
    if not any(p.requires_grad for p in bundle.model.parameters()):
        raise ExplorerError(f"{bundle.name} is shared by every session and read-only: train a private copy")
    if bundle.task is None:
        raise ExplorerError(f"{bundle.name} is a translation model: train a new one from its TSV file")
    recipe = worker.Recipe(bundle.name, {}, spec=bundle.task, seed=cfg.seed, weights=checkpoint.to_bytes(bundle))
    task = bundle.task_obj
    return TrainingJob(recipe, copy.deepcopy(bundle), task_config(cfg, task), probe or task.examples()[0],
                       probe=probe, publish=publish)


def translation_job(tsv: bytes, name: str, model_options: dict[str, Any], cfg: TrainConfig,
                    epochs: float | None = None, max_tokens: int = 40, min_freq: int = 2,
                    publish: Callable[[ModelBundle], None] | None = None,
                    limits: Limits = LIMITS, probe: str | None = None, auto: bool = False,
                    file_name: str = "upload") -> TrainingJob:
    """A (not yet started) job training a fresh translation model on uploaded TSV bytes (named `file_name`).

    Only what needs no look at the data is checked here; the file is parsed, its tokenizers trained and the
    model made in the job's own process (worker.py), which holds a training slot meanwhile: the page can
    stop it, and a closed tab ends it. With `epochs` the number of steps follows from the training set size
    (still limited); with `auto`, the run length, evaluation interval and plateau stop come from the data as on
    the CLI (recipes.translation_run). Once prepared, the job's `held_out` keeps the validation pairs as text
    (for BLEU) and its `notes` what preparing the file left out."""
    from explorer.engine.bundle import check_text
    from explorer.training.recipes import largest_translation_model
    if len(tsv) > limits.max_tsv_bytes:
        raise ExplorerError(f"the file is {len(tsv):,} bytes; the limit is {limits.max_tsv_bytes:,}")
    if max_tokens > limits.max_tokens:
        raise ExplorerError(f"sentences of up to {max_tokens} tokens; the limit is {limits.max_tokens}")
    limits.check(model_options, cfg)
    if probe is not None:
        check_text(probe, "input")  # its pieces are checked once the tokenizers exist
    recipe = worker.Recipe(name, dict(model_options), tsv=tsv, max_tokens=max_tokens, min_freq=min_freq,
                                seed=cfg.seed, file_name=file_name)
    plan = Plan(auto=auto, epochs=epochs, max_steps=limits.max_steps)
    job = TrainingJob(recipe, None, cfg, probe or "", probe=probe, publish=publish, name=name, plan=plan)
    # the file's parse is the big cost, then the largest model these options can make: counted before it starts
    job.memory = training_memory(len(tsv), largest_translation_model(model_options, max_tokens), cfg.batch_size,
                                 2 * max_tokens + 2, int(model_options.get("hidden", 128)),
                                 int(model_options.get("layers", 1)))
    return job


def automatic_length(cfg: TrainConfig, pairs: int, limits: Limits) -> TrainConfig:
    """`cfg` with the CLI's data-sized run: steps, evaluation interval and plateau stop (explorer/defaults.py)."""
    return Plan(auto=True, max_steps=limits.max_steps).apply(cfg, pairs)


