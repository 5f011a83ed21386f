"""The process an app training job runs in: it builds the model and data through the recipes the CLI
uses (`train.new_task_bundle`, `recipes.translation_setup`), trains with the same `Trainer`, and sends the
server only what the Train page shows: step and evaluation records, attention snapshots, checkpoint bytes.

Why a process and not a thread of the server: the sessions' script runs hold the interpreter lock, so
a training thread got one step through a burst of twenty sessions (benchmarks/load_test.py); and a job
that crashes or runs away now takes only its own memory with it.

The pipe to the server is the process's lifeline: "stop" stops training after the current step, and
the pipe's end (the server closed the job, or the server itself ended, even by kill -9) ends the
process at once.

A translation job's data is prepared here too (parsing the file, its length limits, the tokenizers' training,
tokenizing it with an uploaded model's tokenizers): that work holds the job's training slot and its memory
estimate, a "stop" ends it at once, and a tokenizer that aborts takes only this process with it. The first
message then is "prepared": what the server shows before any step (the untrained model, the notes on what was
left out, the held-out pairs, the run's length as the data sets it).
"""

from __future__ import annotations

import copy
import io
import math
import os
import threading
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from explorer.errors import ExplorerError

MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class Recipe:
    """How to build a job's model and data, in any process: a toy task or TSV bytes, and the model's options."""

    name: str
    model_options: dict[str, Any]
    spec: Any = None  # tasks.TaskSpec of a toy task
    tsv: bytes | None = None  # translation: the uploaded file
    max_tokens: int = 12
    min_freq: int = 1
    seed: int = 0
    weights: bytes | None = None  # a toy-task model to train further (checkpoint bytes) instead of a fresh one
    file_name: str = "upload"  # the uploaded file's name, as the notes on its skipped lines say it

    def build(self):
        """(bundle, data source): the same in every process, from the seed (or the given weights)."""
        bundle, data, _ = self.setup()
        return bundle, data

    def setup(self, note=None):
        """(bundle, data source, held-out pairs as text: translation only, for BLEU and chrF); `note` hears what
        preparing a TSV left out (recipes.translation_setup)."""
        if self.weights is not None:
            from explorer.checkpoints import checkpoint
            bundle = checkpoint.from_bytes(self.weights, self.name, source="the job's model")
            for p in bundle.model.parameters():
                p.requires_grad_(True)
            if bundle.task is not None:
                from explorer.data.tasks import make_task
                return bundle, make_task(bundle.task), []
            from explorer.training.further_data import pair_data  # a saved translation model on a (new) file of pairs
            from explorer.training.recipes import pick_examples
            data, held_out = pair_data(bundle, self.tsv, self.seed, note=note, name=self.file_name)
            bundle.examples = pick_examples(bundle, held_out) or bundle.examples  # Explore's, from this file
            return bundle, data, held_out
        if self.spec is not None:
            from explorer.training.train import new_task_bundle
            bundle, task = new_task_bundle(self.spec, self.name, seed=self.seed, **self.model_options)
            return bundle, task, []
        from explorer.training.recipes import translation_setup
        return translation_setup(self.tsv, self.name, self.model_options, seed=self.seed, file_name=self.file_name,
                                 max_tokens=self.max_tokens, min_freq=self.min_freq, note=note)


def eval_interval(steps: int, default: int) -> int:
    """About 20 evaluations per run, between every 10 steps and the recipe's default interval."""
    return max(1, min(default, max(10, steps // 20)))


def training_pairs(data: Any) -> int:
    """How many pairs one epoch has (PairData.train_pairs; a toy task draws fresh ones: 0)."""
    return len(getattr(data, "train_pairs", ()))


def trained_on(data: Any, file_name: str) -> tuple[list[tuple[str, str]], int, str] | None:
    """The first TRAINING_PAIRS distinct training pairs of a translation job's file as text, how many it has
    and the file's name: the app indexes the trained model's states of them (a toy task's are replayed instead)."""
    from explorer.engine.neighbours import TRAINING_PAIRS
    texts = getattr(data, "texts", None)
    if not texts:
        return None
    return list(dict.fromkeys(texts))[:TRAINING_PAIRS], len(texts), file_name


def automatic_length(cfg: Any, pairs: int, max_steps: int) -> Any:
    """`cfg` with the CLI's data-sized run: steps, evaluation interval and plateau stop (explorer/defaults.py)."""
    from explorer.training.recipes import translation_run
    fields = translation_run({"steps": None, "batch_size": cfg.batch_size, "stop_patience": cfg.stop_patience or None,
                              "eval_every": None}, pairs)
    fields = {k: v for k, v in fields.items() if v is not None}
    return replace(cfg, **{**fields, "steps": min(fields["steps"], max_steps)})


@dataclass(frozen=True)
class Plan:
    """How a translation run's length follows from its data, known only once the data is prepared: `auto` as
    the CLI sizes it (recipes.translation_run), `epochs` passes over the training pairs, else the config's."""

    auto: bool = False
    epochs: float | None = None
    max_steps: int = 50_000

    def apply(self, cfg: Any, pairs: int) -> Any:
        if self.auto:
            return automatic_length(cfg, pairs, self.max_steps)
        if self.epochs is not None:
            steps = max(1, math.ceil(self.epochs * pairs / cfg.batch_size))
            if steps > self.max_steps:
                raise ExplorerError(f"{self.epochs:g} epochs of {pairs:,} pairs is {steps:,} steps; the limit is "
                                    f"{self.max_steps:,}")
            return replace(cfg, steps=steps, eval_every=eval_interval(steps, cfg.eval_every))
        return cfg


@dataclass(frozen=True)
class Order:
    """One run of a job: what to build, its config, how many steps, and where to go on from."""

    recipe: Recipe
    cfg: Any  # train.TrainConfig
    steps: int
    probe: str | None
    probe_every: int
    train_sample: int
    threads: int
    resume: bytes | None = None  # Trainer.state of the run before, as torch.save bytes
    new_lr: bool = False  # a continued run: cfg.lr is a new peak learning rate (Trainer.set_lr)
    plan: Plan | None = None  # a first run of a file: its length from the data, and a "prepared" message first
    snapshots: int = 60  # attention snapshots a run keeps: with a plan, how often to take one follows from its length


def main(conn, order: Order) -> None:
    """The job process: train, report, and end with the run (or at once when the pipe to the server closes)."""
    torch.set_num_threads(order.threads)
    stop = threading.Event()
    send_lock = threading.Lock()
    preparing = [True]  # until the first message after the data is ready: a stop ends the process at once

    def send(message: tuple) -> None:
        with send_lock:
            preparing[0] = False
            conn.send(message)

    def listen() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                os._exit(0)  # the server closed this job, or ended: nothing is left to train for
            if message == "stop":
                stop.set()
                with send_lock:
                    if preparing[0]:  # no step yet, nothing to keep: the preparation need not finish
                        conn.send(("stopped", "stopped before its first step"))
                        os._exit(0)

    threading.Thread(target=listen, name="job-pipe", daemon=True).start()
    try:
        _train(order, stop, send)
    except Exception as exc:  # reported to the page, which shows it; the server goes on
        text = str(exc).strip().splitlines()[0][:MESSAGE_LIMIT] if str(exc).strip() else ""
        send(("failed", text if isinstance(exc, ExplorerError) else f"{type(exc).__name__}: {text}"))
    finally:
        try:
            conn.close()
        except OSError:
            pass
    os._exit(0)


def _train(order: Order, stop: threading.Event, send) -> None:
    from explorer.checkpoints import checkpoint
    from explorer.training.probes import Watched, probe_target, take_probe
    from explorer.training.validation import teacher_forced_loss
    from explorer.training.data import TaskData
    from explorer.training.evaluation import Metrics, evaluate
    from explorer.training.train import Trainer, task_config
    notes: list[str] = []
    bundle, built, held_out = order.recipe.setup(note=notes.append)
    cfg, steps = order.cfg, order.steps
    if order.plan is not None:
        cfg = order.plan.apply(cfg, training_pairs(built))
        steps = cfg.steps
        if order.probe is not None:
            bundle.prepare(order.probe)  # an unusable probe is refused with the reason
        send(("prepared", checkpoint.to_bytes(bundle), held_out, notes, order.probe or built.probe_text(),
              asdict(cfg), trained_on(built, order.recipe.file_name)))
    if order.recipe.spec is not None:
        cfg = task_config(cfg, built)
        built = TaskData(built, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, cfg.seed)
    data = Watched(built, order.probe)
    probe_every = order.probe_every if order.plan is None else max(1, min(50, steps // order.snapshots))
    target_text = [None]

    def frame(step: int, scheduled: bool) -> None:
        if target_text[0] is None:
            target_text[0] = probe_target(bundle, data)
        snap = take_probe(bundle, data.probe_text(), target_text[0], step)
        if snap is not None:
            send(("frame", snap, scheduled))

    def snapshot_bytes(trainer: Trainer, final: bool, last: tuple | None) -> bytes:
        clone = copy.deepcopy(bundle)
        if not final:
            clone.training = {**asdict(trainer.cfg), "steps_done": trainer.step, "examples": trainer.examples,
                              "seconds": round(trainer.seconds, 2), "stopped_because": "in progress"}
            if last is not None:
                clone.metrics = {"validation": {"exact_match": last[0], "token_accuracy": last[1],
                                                "alignment_accuracy": last[2]}}
        return checkpoint.to_bytes(clone)

    def on_step(p) -> None:
        send(("step", p.step, p.loss, p.examples_per_second))
        if p.step % probe_every == 0:
            frame(p.step, True)

    def on_eval(p) -> None:
        recent = data.recent[-order.train_sample:]
        train = evaluate(bundle.model, recent) if recent else Metrics(0, float("nan"), float("nan"))
        valid = p.metrics
        record = (p.step, p.loss, teacher_forced_loss(bundle.model, data.validation()), train.exact_match,
                  train.token_accuracy, valid.exact_match, valid.token_accuracy, valid.alignment_accuracy)
        if p.step % probe_every:
            frame(p.step, False)
        was = bundle.model.training
        bundle.model.eval()
        # the state to go on from should this process die before the run ends (the data's order is drawn afresh;
        # this evaluation's plateau and best-weights bookkeeping, done after the callback, is not in it)
        state = io.BytesIO()
        torch.save(trainer.state(data=False), state)
        try:
            send(("eval", record, snapshot_bytes(trainer, False, record[5:]), state.getvalue()))
        finally:
            bundle.model.train(was)

    trainer = Trainer(bundle, data, cfg, on_step=on_step, on_eval=on_eval, stop=stop)
    if order.resume is not None:
        trainer.load_state(torch.load(io.BytesIO(order.resume), weights_only=False))  # this server's own bytes
        data = trainer.data
        if order.new_lr:
            trainer.set_lr(order.cfg.lr)
        trainer.cfg = replace(trainer.cfg, target_accuracy=order.cfg.target_accuracy)
    elif trainer.step == 0:
        frame(0, True)  # attention before any training: the starting point
    result = trainer.run(steps)
    message = {"steps": f"trained {result.steps:,} steps",
               "target": f"reached the target accuracy at step {result.steps:,}",
               "time": "time limit reached", "stopped": f"stopped at step {result.steps:,}",
               "plateau": f"validation stopped improving: ended at step {result.steps:,}"}[result.reason]
    state = io.BytesIO()
    torch.save(trainer.state(), state)
    send(("done", "stopped" if result.reason == "stopped" else "finished", message,
          snapshot_bytes(trainer, True, None), state.getvalue(), asdict(trainer.cfg)))
