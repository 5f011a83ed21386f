"""Background training jobs: one `Trainer` per job in a daemon thread, watched through a lock.

The Train page starts a job and reads it on every rerun; it never touches the live model. The job
keeps what the page shows: a progress log (per step: loss, examples/s; per evaluation: train and
validation loss and accuracies, alignment accuracy), probe-trace snapshots thinned evenly to a cap,
a state (running / stopped / finished / failed) and, after each evaluation, a frozen deep copy of
the bundle that is safe to hand to other pages while training goes on.

`JobRegistry` bounds resources server-wide: one job per session, at most `max_running` running
jobs, and a reaper thread that stops the jobs of sessions that went away (no heartbeat for
`idle_timeout` seconds, or reported gone by `session_alive` for `gone_grace` seconds).

No streamlit here: the page passes in a session id and, optionally, a liveness check.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import random
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

import torch
from torch import nn

from .bundle import ModelBundle
from .devices import model_device
from .errors import ExplorerError
from .registry import freeze
from .tasks import TaskSpec
from .train import (DataSource, Metrics, Pair, Progress, TaskData, Trainer, TrainConfig, collate, evaluate,
                    token_loss)
from .vocab import PAD_ID

log = logging.getLogger(__name__)

NEW, RUNNING, STOPPED, FINISHED, FAILED = "new", "running", "stopped", "finished", "failed"


@dataclass(frozen=True)
class Limits:
    """What one job may ask for (a shared server has 2 cores and many visitors)."""

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

    def check(self, model_options: dict[str, Any], cfg: TrainConfig, spec: TaskSpec | None = None) -> None:
        """Raise ExplorerError naming every setting over its limit."""
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


LIMITS = Limits()
TRAINING_THREADS = max(1, int(os.environ.get("EXPLORER_TRAINING_THREADS", 1)))


# --- what the page reads ----------------------------------------------------------------------

@dataclass(frozen=True)
class StepRecord:
    """One optimisation step."""

    step: int
    loss: float  # mean token cross-entropy of the step's batch
    elapsed: float  # wall seconds of training so far (this job, all runs)
    examples_per_second: float


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation: train metrics on the most recent training examples, validation on the held-out set."""

    step: int
    elapsed: float
    train_loss: float  # the step's batch loss
    valid_loss: float  # teacher-forced, on the validation set
    train_exact: float
    train_token: float
    valid_exact: float
    valid_token: float
    valid_alignment: float | None  # toy tasks with attention only


@dataclass(frozen=True)
class Snapshot:
    """The probe input's trace at one step (the scrubber's frames)."""

    step: int
    trace: Any  # explorer.trace.Trace (frozen)


@dataclass(frozen=True)
class JobView:
    """A consistent copy of a job's state for one page render."""

    name: str
    state: str
    message: str  # why it stopped, or the error
    step: int
    run_start: int  # step the current run started at
    run_end: int  # step the current run will stop at (at the latest)
    elapsed: float
    eta: float | None  # seconds until run_end at the current pace; None when not running
    examples_per_second: float
    steps: tuple[StepRecord, ...]
    evals: tuple[EvalRecord, ...]
    snapshots: tuple[Snapshot, ...]
    target_accuracy: float | None
    lr: float

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def fraction(self) -> float:
        """How much of the current run is done (0..1)."""
        span = self.run_end - self.run_start
        return 1.0 if span <= 0 or self.state == FINISHED else min(1.0, max(0.0, (self.step - self.run_start) / span))

    @property
    def last_eval(self) -> EvalRecord | None:
        return self.evals[-1] if self.evals else None


class _Thinned:
    """Keep at most `cap` items spaced evenly in step: accept every `stride`-th offer; when full,
    drop every other kept item and double the stride."""

    def __init__(self, cap: int, stride: int = 1) -> None:
        self.cap, self.stride, self.items = max(2, cap), max(1, stride), []
        self._offers = 0

    def offer(self, item: Any) -> bool:
        take = self._offers % self.stride == 0
        self._offers += 1
        if take:
            self.items.append(item)
            if len(self.items) > self.cap:
                self.items = self.items[::2]
                self.stride *= 2
        return take


class _Watched:
    """A data source that remembers its most recent training pairs (for train accuracy) and can
    override the probe input."""

    def __init__(self, inner: DataSource, probe: str | None, keep: int = 256) -> None:
        self.inner, self._probe, self.keep = inner, probe, keep
        self.recent: list[Pair] = []

    def batch(self, rng: random.Random, n: int, share: float = 1.0) -> list[Pair]:
        pairs = self.inner.batch(rng, n, share)
        self.recent = (self.recent + list(pairs))[-self.keep:]
        return pairs

    def validation(self) -> list[Pair]:
        return self.inner.validation()

    def probe_text(self) -> str:
        return self._probe or self.inner.probe_text()


def teacher_forced_loss(model: nn.Module, pairs: Sequence[Pair], chunk: int = 512) -> float:
    """Mean token cross-entropy with the true previous tokens fed in (the validation loss), on the model's device."""
    device = model_device(model)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for start in range(0, len(pairs), chunk):
                src, lengths, tgt_in, tgt_out = collate(pairs[start: start + chunk], device)
                logits, _ = model(src, lengths, tgt_in, 1.0, None)
                total += token_loss(logits, tgt_out, reduction="sum").item()
                count += int((tgt_out != PAD_ID).sum())
    finally:
        model.train(was_training)
    return total / count if count else float("nan")


# --- the job ----------------------------------------------------------------------------------

class TrainingJob:
    """Trains one bundle in a background thread; the owner reads `view()` and `snapshot()`.

    `publish` (optional) is called from the training thread with each new frozen snapshot, e.g. to
    put it into the session's models so other pages can open it mid-training.
    """

    def __init__(self, bundle: ModelBundle, data: DataSource, cfg: TrainConfig, probe: str | None = None,
                 publish: Callable[[ModelBundle], None] | None = None, max_snapshots: int = 60,
                 probe_every: int | None = None, train_sample: int = 200) -> None:
        if not any(p.requires_grad for p in bundle.model.parameters()):
            raise ExplorerError(f"{bundle.name} is shared by every session and read-only: train a private copy")
        self.name = bundle.name
        self.publish = publish
        self._bundle = bundle  # live: only the training thread touches it after start()
        self._data = _Watched(data, probe)
        self._stop = threading.Event()
        self._trainer = Trainer(bundle, self._data, cfg, on_step=self._on_step, on_eval=self._on_eval,
                                stop=self._stop, probe=False)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._state, self._message = NEW, "not started"
        self._steps: list[StepRecord] = []
        self._evals: list[EvalRecord] = []
        self._frames = _Thinned(max_snapshots)  # the probe every `_probe_every` steps, thinned
        self._latest_frame: Snapshot | None = None  # the probe at the latest evaluation
        self._probe_every = probe_every or max(1, min(50, cfg.steps // max_snapshots))
        self._train_sample = train_sample
        self._probe_target_cache: str | None = None
        self.held_out: list[tuple[str, str]] = []  # translation: the validation pairs as text (for BLEU)
        self._snapshot: ModelBundle | None = None
        self._elapsed_before = 0.0  # wall seconds of earlier runs
        self._run_started = 0.0
        self._run_start = self._run_end = 0
        self._eps = 0.0
        self.created = time.monotonic()
        self.last_seen = time.monotonic()

    # -- owner side --

    def start(self, steps: int | None = None) -> None:
        """Begin training in a daemon thread (at most `steps` steps; default the config's)."""
        with self._lock:
            if self._state == RUNNING:
                raise ExplorerError("this job is already training")
            steps = self._trainer.cfg.steps if steps is None else steps
            if steps < 1:
                raise ExplorerError("train for at least one step")
            self._stop.clear()
            self._state, self._message = RUNNING, ""
            self._run_start = self._trainer.step
            self._run_end = self._trainer.step + steps
            self._run_started = time.monotonic()
            first = self._snapshot is None
        if first:  # the untrained model joins the session's models at once (the thread has not started)
            self._publish_snapshot(final=False)
        self._thread = threading.Thread(target=self._run, args=(steps,), name=f"train-{self.name}", daemon=True)
        self._thread.start()

    def continue_(self, steps: int, lr: float | None = None, target_accuracy: float | None = None) -> None:
        """Train further from where it stopped: same model, optimizer state and step count; a new peak
        learning rate applies from now on. The target accuracy is replaced (None: train all `steps`)."""
        if self.state == RUNNING:
            raise ExplorerError("this job is already training")
        if lr is not None:
            self._trainer.set_lr(lr)  # validates like TrainConfig
        if target_accuracy is not None and not 0 < target_accuracy <= 1:
            raise ExplorerError("target accuracy must be in (0, 1]")
        self._trainer.cfg = replace(self._trainer.cfg, target_accuracy=target_accuracy)
        self.start(steps)

    def stop(self) -> None:
        """Ask the thread to stop after the current step; the model is kept as it is."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; True when it is no longer running."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.state != RUNNING

    def touch(self) -> None:
        """The owner's heartbeat (the page calls it on every render)."""
        self.last_seen = time.monotonic()

    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    @property
    def step(self) -> int:
        return self._trainer.step

    @property
    def probe_text(self) -> str:
        """The input whose attention is snapshotted."""
        return self._data.probe_text()

    @property
    def config(self) -> TrainConfig:
        return self._trainer.cfg

    def snapshot(self) -> ModelBundle | None:
        """The model as of the latest evaluation: a frozen deep copy, never the live one."""
        with self._lock:
            return self._snapshot

    def view(self) -> JobView:
        """Everything the page shows, copied under the lock."""
        with self._lock:
            now = time.monotonic()
            running = self._state == RUNNING
            run_elapsed = now - self._run_started if running else 0.0
            step = self._steps[-1].step if self._steps else self._trainer.step
            done = step - self._run_start
            eta = None
            if running and done > 0:
                eta = (self._run_end - step) * run_elapsed / done
            frames = list(self._frames.items)
            if self._latest_frame is not None and (not frames or frames[-1].step < self._latest_frame.step):
                frames.append(self._latest_frame)
            return JobView(self.name, self._state, self._message, step, self._run_start, self._run_end,
                           self._elapsed_before + run_elapsed, eta, self._eps, tuple(self._steps),
                           tuple(self._evals), tuple(frames), self._trainer.cfg.target_accuracy,
                           self._trainer.cfg.lr)

    # -- training thread --

    def _elapsed(self) -> float:
        return self._elapsed_before + time.monotonic() - self._run_started

    def _run(self, steps: int) -> None:
        state, message = FINISHED, ""
        # One intra-op thread for this thread only (OpenMP's thread count is per calling thread): on a
        # busy 2-core server, two spinning OpenMP threads per job made training 50x slower (measured).
        torch.set_num_threads(TRAINING_THREADS)
        try:
            if self._trainer.step == 0 and not self._frames.items:
                self._take_probe(0, scheduled=True)  # attention before any training: the starting point
            result = self._trainer.run(steps)
            message = {"steps": f"trained {result.steps:,} steps",
                       "target": f"reached the target accuracy at step {result.steps:,}",
                       "time": "time limit reached", "stopped": f"stopped at step {result.steps:,}",
                       "plateau": f"validation stopped improving: ended at step {result.steps:,}"}[result.reason]
            state = STOPPED if result.reason == "stopped" else FINISHED
            self._publish_snapshot(final=True)
        except Exception as exc:  # the page shows it; the server keeps going
            log.exception("training job %s failed", self.name)
            state, message = FAILED, f"{type(exc).__name__}: {exc}"
        finally:
            with self._lock:
                self._elapsed_before += time.monotonic() - self._run_started
                self._state, self._message = state, message

    def _probe_target(self) -> str | None:
        """The probe's true output, so every snapshot is teacher-forced on it: the heatmap keeps the same
        rows from frame to frame (greedy output of an untrained model runs to the length cap)."""
        if self._probe_target_cache is None:
            target = ""
            try:
                prepared = self._bundle.prepare(self._data.probe_text())
                truth = self._bundle.ground_truth(prepared.tokens)
                if truth is not None:
                    target = "".join(truth.target)
                else:  # translation: the probe is a training sentence; find its pair
                    pair = next((p for p in getattr(self._data.inner, "_train", ()) if p.src == prepared.ids), None)
                    if pair is not None:
                        target = self._bundle.detokenize_target(self._bundle.tgt_vocab.decode(pair.tgt))
            except ExplorerError:
                target = ""
            self._probe_target_cache = target
        return self._probe_target_cache or None

    def _take_probe(self, step: int, scheduled: bool) -> None:
        from .trace import trace
        was_training = self._bundle.model.training
        self._bundle.model.eval()
        try:
            text, target = self._data.probe_text(), self._probe_target()
            try:
                frame = Snapshot(step, trace(self._bundle, text, target=target))
            except ExplorerError:
                frame = Snapshot(step, trace(self._bundle, text))
        except ExplorerError:
            return
        finally:
            self._bundle.model.train(was_training)
        with self._lock:
            if scheduled:
                self._frames.offer(frame)
            self._latest_frame = frame

    def _on_step(self, p: Progress) -> None:
        record = StepRecord(p.step, p.loss, self._elapsed(), p.examples_per_second)
        with self._lock:
            self._steps.append(record)
            self._eps = p.examples_per_second
        if p.step % self._probe_every == 0:
            self._take_probe(p.step, scheduled=True)

    def _on_eval(self, p: Progress) -> None:
        model = self._bundle.model
        recent = self._data.recent[-self._train_sample:]
        train = evaluate(model, recent) if recent else Metrics(0, float("nan"), float("nan"))
        valid = p.metrics
        record = EvalRecord(p.step, self._elapsed(), p.loss, teacher_forced_loss(model, self._data.validation()),
                            train.exact_match, train.token_accuracy, valid.exact_match, valid.token_accuracy,
                            valid.alignment_accuracy)
        with self._lock:
            self._evals.append(record)
        if p.step % self._probe_every:
            self._take_probe(p.step, scheduled=False)
        self._publish_snapshot(final=False)

    def _publish_snapshot(self, final: bool) -> None:
        """Copy the live bundle (we are on the training thread, so it is not changing) and freeze the copy.

        The copy is on the CPU, where pages, traces and checkpoint saving expect it, even while the live
        model trains on a GPU."""
        clone = copy.deepcopy(self._bundle)
        if model_device(clone.model).type != "cpu":
            clone.model.to("cpu")
        if not final:
            last = self._evals[-1] if self._evals else None
            clone.training = {**asdict(self._trainer.cfg), "steps_done": self._trainer.step,
                              "examples": self._trainer.examples, "seconds": round(self._trainer.seconds, 2),
                              "stopped_because": "in progress"}
            if last is not None:
                clone.metrics = {"validation": {"exact_match": last.valid_exact, "token_accuracy": last.valid_token,
                                                "alignment_accuracy": last.valid_alignment}}
        freeze(clone)
        with self._lock:
            self._snapshot = clone
        if self.publish is not None:
            try:
                self.publish(clone)
            except Exception:  # a closed session must not kill training
                log.exception("publishing a snapshot of %s failed", self.name)


def eval_interval(steps: int, default: int) -> int:
    """About 20 evaluations per run, between every 10 steps and the recipe's default interval."""
    return max(1, min(default, max(10, steps // 20)))


def task_job(spec: TaskSpec, name: str, model_options: dict[str, Any], cfg: TrainConfig,
             probe: str | None = None, publish: Callable[[ModelBundle], None] | None = None,
             limits: Limits = LIMITS) -> TrainingJob:
    """A (not yet started) job training a fresh model on a toy task."""
    from .train import new_task_bundle, task_config
    limits.check(model_options, cfg, spec)
    bundle, task = new_task_bundle(spec, name, seed=cfg.seed, **model_options)
    cfg = task_config(cfg, task)
    if probe is not None:
        bundle.prepare(probe)  # an unusable probe is refused now, with the reason
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, cfg.seed)
    return TrainingJob(bundle, data, cfg, probe=probe, publish=publish)


def translation_job(tsv: bytes, name: str, model_options: dict[str, Any], cfg: TrainConfig,
                    epochs: float | None = None, max_tokens: int = 40, min_freq: int = 2,
                    publish: Callable[[ModelBundle], None] | None = None,
                    limits: Limits = LIMITS, probe: str | None = None, auto: bool = False) -> TrainingJob:
    """A (not yet started) job training a fresh translation model on uploaded TSV bytes.

    With `epochs`, the number of steps is computed from the training set size (and still limited); with
    `auto`, the run length, evaluation interval and plateau stop come from the data as on the CLI
    (recipes.translation_run). The job's `held_out` keeps the validation pairs as text (for BLEU)."""
    from .recipes import translation_setup
    if len(tsv) > limits.max_tsv_bytes:
        raise ExplorerError(f"the file is {len(tsv):,} bytes; the limit is {limits.max_tsv_bytes:,}")
    if max_tokens > limits.max_tokens:
        raise ExplorerError(f"sentences of up to {max_tokens} tokens; the limit is {limits.max_tokens}")
    limits.check(model_options, cfg)
    bundle, data, held_out = translation_setup(tsv, name, model_options, seed=cfg.seed, max_tokens=max_tokens,
                                               min_freq=min_freq)
    if probe is not None:
        bundle.prepare(probe)  # an unusable probe is refused now, with the reason
    if auto:
        cfg = _automatic_length(cfg, training_pairs(data), limits)
    elif epochs is not None:
        n = training_pairs(data)
        steps = max(1, math.ceil(epochs * n / cfg.batch_size))
        if steps > limits.max_steps:
            raise ExplorerError(f"{epochs:g} epochs of {n:,} pairs is {steps:,} steps; the limit is "
                                f"{limits.max_steps:,}")
        cfg = replace(cfg, steps=steps, eval_every=eval_interval(steps, cfg.eval_every))
    job = TrainingJob(bundle, data, cfg, probe=probe, publish=publish)
    job.held_out = held_out
    return job


def _automatic_length(cfg: TrainConfig, pairs: int, limits: Limits) -> TrainConfig:
    """`cfg` with the CLI's data-sized run: steps, evaluation interval and plateau stop (explorer/defaults.py)."""
    from .recipes import translation_run
    fields = translation_run({"steps": None, "batch_size": cfg.batch_size, "stop_patience": cfg.stop_patience or None,
                              "eval_every": None}, pairs)
    fields = {k: v for k, v in fields.items() if v is not None}
    return replace(cfg, **{**fields, "steps": min(fields["steps"], limits.max_steps)})


def training_pairs(data: DataSource) -> int:
    """How many pairs one epoch has (PairData keeps them in `_train`)."""
    return len(getattr(data, "_train", ()))


# --- server-wide bookkeeping -------------------------------------------------------------------

@dataclass
class _Entry:
    job: TrainingJob
    gone_since: float | None = None


@dataclass
class JobRegistry:
    """Jobs by session id: one per session, a server-wide cap, and a reaper for abandoned sessions.

    `session_alive(session_id)` returns True/False, or None when it cannot tell (then only the
    heartbeat counts)."""

    max_running: int = 4
    idle_timeout: float = 600.0  # seconds without a heartbeat before a job counts as abandoned
    gone_grace: float = 30.0  # seconds a session may be disconnected (a reconnect) before its job stops
    reap_interval: float = 5.0
    session_alive: Callable[[str], bool | None] | None = None
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reaper: threading.Thread | None = None

    def get(self, session_id: str) -> TrainingJob | None:
        with self._lock:
            entry = self._entries.get(session_id)
            return entry.job if entry else None

    def touch(self, session_id: str) -> None:
        """The session's heartbeat."""
        job = self.get(session_id)
        if job is not None:
            job.touch()

    def running(self) -> int:
        with self._lock:
            return sum(e.job.state == RUNNING for e in self._entries.values())

    def admit(self, session_id: str, job: TrainingJob) -> None:
        """Register `job` for the session (replacing a finished one) before it starts or continues;
        ExplorerError when the session already trains or the server is full."""
        self.reap()
        with self._lock:
            current = self._entries.get(session_id)
            if current is not None and current.job is not job and current.job.state == RUNNING:
                raise ExplorerError("this session is already training a model: stop it first")
            others = sum(e.job.state == RUNNING for sid, e in self._entries.items() if sid != session_id)
            if others >= self.max_running:
                raise ExplorerError(f"the server is busy: {others} trainings are running (the limit is "
                                    f"{self.max_running}); try again in a minute")
            job.touch()
            self._entries[session_id] = _Entry(job)
        self._ensure_reaper()

    def forget(self, session_id: str) -> None:
        with self._lock:
            entry = self._entries.pop(session_id, None)
        if entry is not None:
            entry.job.stop()

    def stop_all(self) -> None:
        """Stop every job and forget them (server shutdown, tests)."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.job.stop()
        for entry in entries:
            entry.job.join(10)

    def reap(self, now: float | None = None) -> list[str]:
        """Stop and drop the jobs of sessions that went away; returns their session ids."""
        now = time.monotonic() if now is None else now
        gone: list[str] = []
        with self._lock:
            items = list(self._entries.items())
        for sid, entry in items:
            alive = None
            if self.session_alive is not None:
                try:
                    alive = self.session_alive(sid)
                except Exception:
                    alive = None
            if alive is False:
                entry.gone_since = entry.gone_since if entry.gone_since is not None else now
                abandoned = now - entry.gone_since >= self.gone_grace
            else:
                entry.gone_since = None
                abandoned = alive is None and now - entry.job.last_seen >= self.idle_timeout
            if abandoned:
                gone.append(sid)
        for sid in gone:
            with self._lock:
                entry = self._entries.get(sid)
                if entry is None:
                    continue
                del self._entries[sid]
            entry.job.stop()
            log.info("stopped the training job of session %s: the session went away", sid)
        return gone

    def _ensure_reaper(self) -> None:
        with self._lock:
            if self._reaper is not None and self._reaper.is_alive():
                return
            self._reaper = threading.Thread(target=self._reap_forever, name="train-reaper", daemon=True)
            self._reaper.start()

    def _reap_forever(self) -> None:
        while True:
            time.sleep(self.reap_interval)
            try:
                self.reap()
            except Exception:
                log.exception("the training reaper failed")
            with self._lock:
                if not self._entries:
                    self._reaper = None
                    return


_REGISTRY: JobRegistry | None = None
_REGISTRY_LOCK = threading.Lock()


def registry() -> JobRegistry:
    """The process-wide registry (all sessions of one server). Operators (and tests) can set
    EXPLORER_MAX_TRAININGS, EXPLORER_TRAINING_IDLE_SECONDS and EXPLORER_TRAINING_GONE_SECONDS."""
    global _REGISTRY
    with _REGISTRY_LOCK:
        if _REGISTRY is None:
            env = os.environ
            _REGISTRY = JobRegistry(max_running=int(env.get("EXPLORER_MAX_TRAININGS", 4)),
                                    idle_timeout=float(env.get("EXPLORER_TRAINING_IDLE_SECONDS", 600)),
                                    gone_grace=float(env.get("EXPLORER_TRAINING_GONE_SECONDS", 30)))
        return _REGISTRY
