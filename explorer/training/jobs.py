"""Background training jobs: each run of a job trains in a process of its own (explorer/training/job_process.py).

The Train page starts a job and reads it on every rerun. The server keeps what the page shows: a
progress log (per step: loss, examples/s; per evaluation: train and validation loss and accuracies,
alignment accuracy), probe-trace snapshots thinned evenly to a cap, a state (queued / running /
stopped / finished / failed) and, after each evaluation, the checkpoint the process sent, as bytes
and as a frozen bundle that is safe to hand to other pages while training goes on.

`JobRegistry` bounds resources server-wide: one job per session, at most `max_running` training
processes (the usable cores by default; the next run waits in a queue and knows its place), and a
reaper thread that stops the jobs of sessions that went away (no heartbeat for `idle_timeout`
seconds, or reported gone by `session_alive` for `gone_grace` seconds).

No streamlit here: the page passes in a session id and, optionally, a liveness check.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence


from explorer.checkpoints import checkpoint

from explorer.training import job_process
from explorer.engine.bundle import ModelBundle
from explorer.engine.devices import model_device
from explorer.training.distributed import usable_cores
from explorer.errors import ExplorerError
from explorer.limits import LIMITS, Limits, check_memory_budget, memory_budget, training_memory
from explorer.checkpoints.registry import freeze
from explorer.data.tasks import TaskSpec
from explorer.training.probes import Snapshot, Thinned
from explorer.training.train import DataSource, TrainConfig

log = logging.getLogger(__name__)

NEW, QUEUED, RUNNING, STOPPED, FINISHED, FAILED = "new", "queued", "running", "stopped", "finished", "failed"


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
    queue_place: int | None = None  # 1 = next to start, while it waits for a free training slot

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def queued(self) -> bool:
        return self.state == QUEUED

    @property
    def fraction(self) -> float:
        """How much of the current run is done (0..1)."""
        span = self.run_end - self.run_start
        return 1.0 if span <= 0 or self.state == FINISHED else min(1.0, max(0.0, (self.step - self.run_start) / span))

    @property
    def last_eval(self) -> EvalRecord | None:
        return self.evals[-1] if self.evals else None


# --- the job, as the server keeps it ---------------------------------------------------------------

_CONTEXT_LOCK = threading.Lock()
_CONTEXT: list = []


def _context():
    """forkserver: a clean process, started once with the training code imported, forks each job in
    milliseconds (the server runs many threads: forking it is unsafe; spawning imports torch each time)."""
    with _CONTEXT_LOCK:
        if not _CONTEXT:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["explorer.training.job_process", "explorer.training.probes",
                                                "explorer.training.validation", "explorer.engine.trace"])
            _CONTEXT.append(context)
        return _CONTEXT[0]


def _ending(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the training process was killed ({signal.Signals(-exitcode).name})"
    return f"the training process ended unexpectedly (exit code {exitcode})"


class TrainingJob:
    """Trains one model in a process of its own (explorer/training/job_process.py); the owner reads `view()` and
    `snapshot()`. The server keeps only what the page shows: step and evaluation records, attention
    snapshots, the latest checkpoint (bytes and the frozen bundle made from them), and between runs the
    trainer's state to continue from. Each run is one process; it ends with the run.

    `publish` (optional) is called with each new frozen snapshot, e.g. to put it into the session's models
    so other pages can open it mid-training. Given a `gate` (a JobRegistry), a run waits for a free slot.
    """

    def __init__(self, recipe: job_process.Recipe, bundle: ModelBundle, cfg: TrainConfig, probe_text: str,
                 probe: str | None = None, publish: Callable[[ModelBundle], None] | None = None,
                 max_snapshots: int = 60, probe_every: int | None = None, train_sample: int = 200) -> None:
        self.name = bundle.name
        self.publish = publish
        self.recipe = recipe
        self._first = bundle  # the untrained model, shown until the first evaluation
        self._cfg = cfg
        self._probe, self._probe_text = probe, probe_text
        self.memory = 0  # bytes, estimated by the job's maker (limits.training_memory) for the registry's budget
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._ended.set()
        self._process = None
        self._conn = None
        self._state, self._message = NEW, "not started"
        self._step = 0
        self._steps: list[StepRecord] = []
        self._evals: list[EvalRecord] = []
        self._frames = Thinned(max_snapshots)  # the probe every `_probe_every` steps, thinned
        self._latest_frame: Snapshot | None = None  # the probe at the latest evaluation
        self._probe_every = probe_every or max(1, min(50, cfg.steps // max_snapshots))
        self._train_sample = train_sample
        self.held_out: list[tuple[str, str]] = []  # translation: the validation pairs as text (for BLEU)
        self._snapshot: ModelBundle | None = None
        self._checkpoint: bytes | None = None
        self._resume: bytes | None = None
        self._new_lr = False  # the next run starts from a new peak learning rate (continue_)
        self._elapsed_before = 0.0  # wall seconds of earlier runs
        self._run_started = 0.0
        self._run_start = self._run_end = 0
        self._eps = 0.0
        self.gate: JobRegistry | None = None
        self.created = time.monotonic()
        self.last_seen = time.monotonic()

    # -- owner side --

    def start(self, steps: int | None = None) -> None:
        """Train (at most `steps` steps; default the config's) in a new process, now or when the gate has a slot."""
        with self._lock:
            if self._state in (RUNNING, QUEUED):
                raise ExplorerError("this job is already training")
            steps = self._cfg.steps if steps is None else steps
            if steps < 1:
                raise ExplorerError("train for at least one step")
            self._state, self._message = QUEUED, "waiting for a free training slot"
            self._run_start, self._run_end = self._step, self._step + steps
            self._run_steps = steps
            self._ended.clear()
            first = self._snapshot is None
        if first:  # the untrained model joins the session's models at once
            self._set_snapshot(freeze(self._first))
        if self.gate is None or self.gate.request(self):
            self.launch()

    def launch(self) -> None:
        """Start this run's process (the gate calls it when a slot frees)."""
        order = job_process.Order(self.recipe, self._cfg, self._run_steps, self._probe, self._probe_every,
                                  self._train_sample, TRAINING_THREADS, self._resume, self._new_lr)
        context = _context()
        conn, child_end = context.Pipe()
        process = context.Process(target=job_process.main, args=(child_end, order), name=f"train-{self.name}",
                                  daemon=True)
        with self._lock:
            if self._state != QUEUED:  # stopped while it waited
                return
            self._state, self._message = RUNNING, ""
            self._run_started = time.monotonic()
            process.start()
            child_end.close()
            self._process, self._conn = process, conn
        threading.Thread(target=self._read, args=(conn, process), name=f"job-{self.name}", daemon=True).start()

    def continue_(self, steps: int, lr: float | None = None, target_accuracy: float | None = None) -> None:
        """Train further from where it stopped: same model, optimizer state and step count; a new peak
        learning rate applies from now on. The target accuracy is replaced (None: train all `steps`)."""
        if self.state in (RUNNING, QUEUED):
            raise ExplorerError("this job is already training")
        cfg = self._cfg
        if lr is not None:
            cfg = TrainConfig(**{**asdict(cfg), "lr": lr})  # validates
        self._new_lr = lr is not None
        if target_accuracy is not None and not 0 < target_accuracy <= 1:
            raise ExplorerError("target accuracy must be in (0, 1]")
        self._cfg = replace(cfg, target_accuracy=target_accuracy)
        self.start(steps)

    def stop(self) -> None:
        """Stop after the current step (the model is kept as it is); a waiting run leaves the queue."""
        with self._lock:
            state, conn = self._state, self._conn
            if state == QUEUED:
                self._state, self._message = STOPPED, "stopped before it started"
                self._ended.set()
        if state == QUEUED and self.gate is not None:
            self.gate.withdraw(self)
        elif state == RUNNING and conn is not None:
            try:
                conn.send("stop")
            except (OSError, ValueError):
                pass

    def kill(self) -> None:
        """End the process now (a closed session; server shutdown)."""
        self.stop()
        process = self._process
        if process is not None and process.is_alive():
            process.kill()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the run to end; True when it is no longer running (or waiting)."""
        self._ended.wait(timeout)
        return self.state not in (RUNNING, QUEUED)

    def touch(self) -> None:
        """The owner's heartbeat (the page calls it on every render)."""
        self.last_seen = time.monotonic()

    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    @property
    def pid(self) -> int | None:
        """The training process's id while it runs."""
        process = self._process
        return process.pid if process is not None and process.is_alive() else None

    @property
    def step(self) -> int:
        with self._lock:
            return self._step

    @property
    def probe_text(self) -> str:
        """The input whose attention is snapshotted."""
        return self._probe_text

    @property
    def config(self) -> TrainConfig:
        return self._cfg

    def snapshot(self) -> ModelBundle | None:
        """The model as of the latest evaluation: a frozen bundle of its own, never the training one."""
        with self._lock:
            return self._snapshot

    def checkpoint_bytes(self) -> bytes | None:
        """The latest snapshot as checkpoint bytes (what Download offers)."""
        with self._lock:
            data = self._checkpoint
        return data if data is not None else (checkpoint.to_bytes(self._snapshot) if self._snapshot else None)

    def view(self) -> JobView:
        """Everything the page shows, copied under the lock."""
        place = self.gate.place(self) if self.gate is not None and self.state == QUEUED else None
        with self._lock:
            now = time.monotonic()
            running = self._state == RUNNING
            run_elapsed = now - self._run_started if running else 0.0
            step = self._steps[-1].step if self._steps else self._step
            done = step - self._run_start
            eta = None
            if running and done > 0:
                eta = (self._run_end - step) * run_elapsed / done
            frames = list(self._frames.items)
            if self._latest_frame is not None and (not frames or frames[-1].step < self._latest_frame.step):
                frames.append(self._latest_frame)
            return JobView(self.name, self._state, self._message, step, self._run_start, self._run_end,
                           self._elapsed_before + run_elapsed, eta, self._eps, tuple(self._steps),
                           tuple(self._evals), tuple(frames), self._cfg.target_accuracy, self._cfg.lr, place)

    # -- the reader thread: messages from the process --

    def _elapsed(self) -> float:
        return self._elapsed_before + time.monotonic() - self._run_started

    def _read(self, conn, process) -> None:
        ended = None
        while ended is None:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            try:
                ended = self._handle(message)
            except Exception:  # a message the server cannot use must not leave the job running forever
                log.exception("training job %s sent a message the server could not use", self.name)
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join(5)
        state, text = ended or (FAILED, _ending(process.exitcode))
        conn.close()
        with self._lock:
            self._elapsed_before += time.monotonic() - self._run_started
            self._state, self._message = state, text
            self._process = self._conn = None
        if ended is None:
            log.warning("training job %s: %s", self.name, text)
        self._ended.set()
        if self.gate is not None:
            self.gate.release(self)

    def _handle(self, message: tuple) -> tuple[str, str] | None:
        kind = message[0]
        if kind == "step":
            _, step, loss, eps = message
            with self._lock:
                self._steps.append(StepRecord(step, loss, self._elapsed(), eps))
                self._eps, self._step = eps, step
        elif kind == "frame":
            _, frame, scheduled = message
            with self._lock:
                if scheduled:
                    self._frames.offer(frame)
                self._latest_frame = frame
        elif kind == "eval":
            _, record, data = message
            with self._lock:
                self._evals.append(EvalRecord(record[0], self._elapsed(), *record[1:]))
            self._take_checkpoint(data)
        elif kind == "done":
            _, state, text, data, resume, cfg = message
            self._take_checkpoint(data)
            with self._lock:
                self._resume, self._cfg = resume, TrainConfig(**cfg)
            return (STOPPED if state == "stopped" else FINISHED), text
        elif kind == "failed":
            return FAILED, message[1]
        return None

    def _take_checkpoint(self, data: bytes) -> None:
        bundle = freeze(checkpoint.from_bytes(data, self.name, source="training"))
        with self._lock:
            self._checkpoint = data
        self._set_snapshot(bundle)

    def _set_snapshot(self, bundle: ModelBundle) -> None:
        with self._lock:
            self._snapshot = bundle
        if self.publish is not None:
            try:
                self.publish(bundle)
            except Exception:  # a closed session must not end the job
                log.exception("publishing a snapshot of %s failed", self.name)


def eval_interval(steps: int, default: int) -> int:
    """About 20 evaluations per run, between every 10 steps and the recipe's default interval."""
    return max(1, min(default, max(10, steps // 20)))


def task_job(spec: TaskSpec, name: str, model_options: dict[str, Any], cfg: TrainConfig,
             probe: str | None = None, publish: Callable[[ModelBundle], None] | None = None,
             limits: Limits = LIMITS) -> TrainingJob:
    """A (not yet started) job training a fresh model on a toy task."""
    from explorer.training.train import task_config
    limits.check(model_options, cfg, spec)
    recipe = job_process.Recipe(name, dict(model_options), spec=spec, seed=cfg.seed)
    bundle, task = recipe.build()  # here too: the untrained model is shown at once, and a bad probe refused
    cfg = task_config(cfg, task)
    if probe is not None:
        bundle.prepare(probe)  # an unusable probe is refused now, with the reason
    job = TrainingJob(recipe, bundle, cfg, probe or task.examples()[0], probe=probe, publish=publish)
    job.memory = job_memory(bundle, cfg, 0, 2 * spec.max_len + 2)
    return job


def job_memory(bundle: ModelBundle, cfg: TrainConfig, tsv_bytes: int, tokens: int) -> int:
    """The job's memory estimate (limits.training_memory) from its model and data: its own process."""
    mc = bundle.model.cfg
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
    recipe = job_process.Recipe(bundle.name, {}, spec=bundle.task, seed=cfg.seed, weights=checkpoint.to_bytes(bundle))
    task = bundle.task_obj
    return TrainingJob(recipe, copy.deepcopy(bundle), task_config(cfg, task), probe or task.examples()[0],
                       probe=probe, publish=publish)


def translation_job(tsv: bytes, name: str, model_options: dict[str, Any], cfg: TrainConfig,
                    epochs: float | None = None, max_tokens: int = 40, min_freq: int = 2,
                    publish: Callable[[ModelBundle], None] | None = None,
                    limits: Limits = LIMITS, probe: str | None = None, auto: bool = False) -> TrainingJob:
    """A (not yet started) job training a fresh translation model on uploaded TSV bytes.

    With `epochs`, the number of steps is computed from the training set size (and still limited); with
    `auto`, the run length, evaluation interval and plateau stop come from the data as on the CLI
    (recipes.translation_run). The job's `held_out` keeps the validation pairs as text (for BLEU)."""
    if len(tsv) > limits.max_tsv_bytes:
        raise ExplorerError(f"the file is {len(tsv):,} bytes; the limit is {limits.max_tsv_bytes:,}")
    if max_tokens > limits.max_tokens:
        raise ExplorerError(f"sentences of up to {max_tokens} tokens; the limit is {limits.max_tokens}")
    limits.check(model_options, cfg)
    # the file's parse is the big cost: refused before it starts when the server's budget lacks room
    registry().check_memory(training_memory(len(tsv)))
    recipe = job_process.Recipe(name, dict(model_options), tsv=tsv, max_tokens=max_tokens, min_freq=min_freq,
                                seed=cfg.seed)
    bundle, data, held_out = recipe.setup()
    if probe is not None:
        bundle.prepare(probe)  # an unusable probe is refused now, with the reason
    if auto:
        cfg = automatic_length(cfg, training_pairs(data), limits)
    elif epochs is not None:
        n = training_pairs(data)
        steps = max(1, math.ceil(epochs * n / cfg.batch_size))
        if steps > limits.max_steps:
            raise ExplorerError(f"{epochs:g} epochs of {n:,} pairs is {steps:,} steps; the limit is "
                                f"{limits.max_steps:,}")
        cfg = replace(cfg, steps=steps, eval_every=eval_interval(steps, cfg.eval_every))
    job = TrainingJob(recipe, bundle, cfg, probe or data.probe_text(), probe=probe, publish=publish)
    job.memory = job_memory(bundle, cfg, len(tsv), 2 * max_tokens + 2)
    job.held_out = held_out
    return job


def automatic_length(cfg: TrainConfig, pairs: int, limits: Limits) -> TrainConfig:
    """`cfg` with the CLI's data-sized run: steps, evaluation interval and plateau stop (explorer/defaults.py)."""
    from explorer.training.recipes import translation_run
    fields = translation_run({"steps": None, "batch_size": cfg.batch_size, "stop_patience": cfg.stop_patience or None,
                              "eval_every": None}, pairs)
    fields = {k: v for k, v in fields.items() if v is not None}
    return replace(cfg, **{**fields, "steps": min(fields["steps"], limits.max_steps)})


def training_pairs(data: DataSource) -> int:
    """How many pairs one epoch has (PairData.train_pairs; a toy task draws fresh ones: 0)."""
    return len(getattr(data, "train_pairs", ()))


# --- server-wide bookkeeping -------------------------------------------------------------------

@dataclass
class _Entry:
    job: TrainingJob
    gone_since: float | None = None


@dataclass
class JobRegistry:
    """Jobs by session id: one per session, at most `max_running` training processes at once (the next
    runs wait in order, and know their place), and a reaper for abandoned sessions.

    `session_alive(session_id)` returns True/False, or None when it cannot tell (then only the
    heartbeat counts)."""

    max_running: int = field(default_factory=usable_cores)
    idle_timeout: float = 600.0  # seconds without a heartbeat before a job counts as abandoned
    gone_grace: float = 30.0  # seconds a session may be disconnected (a reconnect) before its job stops
    reap_interval: float = 5.0
    session_alive: Callable[[str], bool | None] | None = None
    memory_budget: int = field(default_factory=memory_budget)  # bytes for all running jobs together
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reaper: threading.Thread | None = None
    _slots: set = field(default_factory=set)  # ids of the jobs whose process runs
    _queue: list = field(default_factory=list)  # jobs waiting for a slot, first come first served

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
        """Training processes running now."""
        with self._lock:
            return len(self._slots)

    def waiting(self) -> int:
        """Runs waiting for a slot."""
        with self._lock:
            return len(self._queue)

    def place(self, job: TrainingJob) -> int | None:
        """A waiting run's place in the queue (1: next), None when it does not wait."""
        with self._lock:
            return self._queue.index(job) + 1 if job in self._queue else None

    def admit(self, session_id: str, job: TrainingJob) -> None:
        """Register `job` for the session (replacing a finished one) before it starts or continues; its runs
        then take a slot, or wait for one. ExplorerError when the session already trains."""
        self.reap()
        with self._lock:
            current = self._entries.get(session_id)
            if current is not None and current.job is not job and current.job.state in (RUNNING, QUEUED):
                raise ExplorerError("this session is already training a model: stop it first")
            check_memory_budget(job.memory, self._committed_memory(session_id), self.memory_budget)
            job.touch()
            job.gate = self
            self._entries[session_id] = _Entry(job)
        self._ensure_reaper()

    def request(self, job: TrainingJob) -> bool:
        """A slot for `job`'s run now (True), or a place at the end of the queue (False)."""
        with self._lock:
            if len(self._slots) < self.max_running and not self._queue:
                self._slots.add(id(job))
                return True
            self._queue.append(job)
            return False

    def withdraw(self, job: TrainingJob) -> None:
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)

    def release(self, job: TrainingJob) -> None:
        """`job`'s process ended: the slot goes to the first waiting run."""
        with self._lock:
            self._slots.discard(id(job))
            nxt = self._queue.pop(0) if self._queue and len(self._slots) < self.max_running else None
            if nxt is not None:
                self._slots.add(id(nxt))
        if nxt is not None:
            nxt.launch()

    def _committed_memory(self, but: str | None = None) -> list[int]:
        """The memory estimates of the running and queued jobs (all but session `but`'s); call with the lock held."""
        return [e.job.memory for sid, e in self._entries.items() if sid != but and e.job.state in (RUNNING, QUEUED)]

    def check_memory(self, estimate: int) -> None:
        """ExplorerError when a job of `estimate` bytes would not fit beside the running and queued ones now."""
        with self._lock:
            committed = self._committed_memory()
        check_memory_budget(estimate, committed, self.memory_budget)

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
            if not entry.job.join(10):
                entry.job.kill()

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
    EXPLORER_MAX_TRAININGS, EXPLORER_TRAINING_IDLE_SECONDS, EXPLORER_TRAINING_GONE_SECONDS and
    EXPLORER_TRAINING_MEMORY_MB (limits.memory_budget)."""
    global _REGISTRY
    with _REGISTRY_LOCK:
        if _REGISTRY is None:
            env = os.environ
            _REGISTRY = JobRegistry(max_running=int(env.get("EXPLORER_MAX_TRAININGS", usable_cores())),
                                    idle_timeout=float(env.get("EXPLORER_TRAINING_IDLE_SECONDS", 600)),
                                    gone_grace=float(env.get("EXPLORER_TRAINING_GONE_SECONDS", 30)))
        return _REGISTRY
