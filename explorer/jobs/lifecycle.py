"""One background training job as the server keeps it: its lifecycle (start, wait for a slot, stop, continue),
the process each run trains in (explorer/jobs/worker.py), and the reader thread that turns the
process's messages into the records the page shows, the latest checkpoint and its frozen bundle.

Its `gate` (explorer/jobs/registry.py's JobRegistry) hands out training slots; without one a run
starts at once.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import asdict, replace
from typing import Callable, Protocol

from explorer.checkpoints import checkpoint
from explorer.checkpoints.registry import freeze
from explorer.engine.bundle import ModelBundle, TrainingSample
from explorer.errors import ExplorerError
from explorer.jobs import worker
from explorer.jobs.records import (FAILED, FINISHED, NEW, QUEUED, RUNNING, STOPPED, EvalRecord, JobView,
                                           StepRecord)
from explorer.training.probes import Snapshot, Thinned
from explorer.training.train import TrainConfig

log = logging.getLogger(__name__)


class Gate(Protocol):
    """What hands out training slots (registry.JobRegistry): a job asks for one per run."""

    def request(self, job: "TrainingJob") -> bool: ...
    def withdraw(self, job: "TrainingJob") -> None: ...
    def release(self, job: "TrainingJob") -> None: ...
    def place(self, job: "TrainingJob") -> int | None: ...

PREPARING = "preparing the data"  # a run's message until its data is ready (worker.py)
TRAINING_THREADS = max(1, int(os.environ.get("EXPLORER_TRAINING_THREADS", 1)))


_CONTEXT_LOCK = threading.Lock()
_CONTEXT: list = []


def _context():
    """forkserver: a clean process, started once with the training code imported, forks each job in
    milliseconds (the server runs many threads: forking it is unsafe; spawning imports torch each time)."""
    with _CONTEXT_LOCK:
        if not _CONTEXT:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["explorer.jobs.worker", "explorer.training.probes",
                                            "explorer.training.validation", "explorer.engine.trace"])
            _CONTEXT.append(context)
        return _CONTEXT[0]


def _ending(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the training process was killed ({signal.Signals(-exitcode).name})"
    return f"the training process ended unexpectedly (exit code {exitcode})"


class TrainingJob:
    """Trains one model in a process of its own (explorer/jobs/worker.py); the owner reads `view()` and
    `snapshot()`. The server keeps only what the page shows: step and evaluation records, attention
    snapshots, the latest checkpoint (bytes and the frozen bundle made from them), and between runs the
    trainer's state to continue from. Each run is one process; it ends with the run.

    `publish` (optional) is called with each new frozen snapshot, e.g. to put it into the session's models
    so other pages can open it mid-training. Given a `gate` (a JobRegistry), a run waits for a free slot.
    """

    def __init__(self, recipe: worker.Recipe, bundle: ModelBundle | None, cfg: TrainConfig, probe_text: str,
                 probe: str | None = None, publish: Callable[[ModelBundle], None] | None = None,
                 max_snapshots: int = 60, probe_every: int | None = None, train_sample: int = 200,
                 name: str | None = None, plan: worker.Plan | None = None) -> None:
        """`bundle` None: the model is made in the job's process from the data (a file of pairs: `plan` says how
        the run's length follows from it), and arrives with the "prepared" message."""
        self.name = name if name is not None else bundle.name
        self.publish = publish
        self.recipe = recipe
        self._first = bundle  # the untrained model, shown until the first evaluation
        self._plan = plan
        self._max_snapshots = max_snapshots
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
        self.trained_on: TrainingSample | None = None  # translation: its training pairs as text (neighbours)
        self.notes: list[str] = []  # what preparing the data left out, one line each (recipes.translation_setup)
        self._snapshot: ModelBundle | None = None
        self._checkpoint: bytes | None = None
        self._resume: bytes | None = None
        self._resume_step = 0  # the step `_resume` holds: a run that died after it left no state to go on from
        self._new_lr = False  # the next run starts from a new peak learning rate (continue_)
        self._elapsed_before = 0.0  # wall seconds of earlier runs
        self._run_started = 0.0
        self._run_start = self._run_end = 0
        self._eps = 0.0
        self.gate: Gate | None = None
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
        if first and self._first is not None:  # the untrained model joins the session's models at once
            self._set_snapshot(freeze(self._first))
        if (self.gate is None or self.gate.request(self)) and not self.launch() and self.gate is not None:
            self.gate.release(self)  # stopped in between: the slot it was given goes on

    def launch(self) -> bool:
        """Start this run's process (the gate calls it when a slot frees); False when the run was stopped while it
        waited, so the gate gives the slot to the next one."""
        plan = self._plan if self._resume is None else None
        order = worker.Order(self.recipe, self._cfg, self._run_steps, self._probe, self._probe_every,
                                  self._train_sample, TRAINING_THREADS, self._resume, self._new_lr, plan,
                                  self._max_snapshots)
        context = _context()
        conn, child_end = context.Pipe()
        process = context.Process(target=worker.main, args=(child_end, order), name=f"train-{self.name}",
                                  daemon=True)
        with self._lock:
            if self._state != QUEUED:  # stopped while it waited
                return False
            try:
                process.start()
            except (OSError, RuntimeError) as exc:  # no process (out of memory, too many processes)
                self._state, self._message = FAILED, f"the training process could not start: {exc}"
                self._ended.set()
                return False
            self._state, self._message = RUNNING, PREPARING if plan is not None else ""
            self._run_started = time.monotonic()
            child_end.close()
            self._process, self._conn = process, conn
        threading.Thread(target=self._read, args=(conn, process), name=f"job-{self.name}", daemon=True).start()
        return True

    def continue_(self, steps: int, lr: float | None = None, target_accuracy: float | None = None) -> str | None:
        """Train further from where it stopped: same model, optimizer state and step count; a new peak
        learning rate applies from now on. The target accuracy is replaced (None: train all `steps`).
        When the last run's process died (killed from outside), it goes on from that run's last evaluation and
        says so (the returned note); before any evaluation there is nothing to go on from: ExplorerError."""
        if self.state in (RUNNING, QUEUED):
            raise ExplorerError("this job is already training")
        with self._lock:
            step, saved, state = self._step, self._resume_step, self._resume
        note = None
        if step > saved:  # the process died: what it trained since its last evaluation is gone
            if state is None:
                raise ExplorerError(f"the last run's process ended at step {step:,} before its first evaluation: "
                                    "nothing of it was saved to go on from. Start a new training")
            self._back_to(saved)
            note = (f"the last run's process ended at step {step:,}: training goes on from its last evaluation, "
                    f"at step {saved:,} (the model, optimizer and step count saved there)")
        cfg = self._cfg
        if lr is not None:
            cfg = TrainConfig(**{**asdict(cfg), "lr": lr})  # validates
        self._new_lr = lr is not None
        if target_accuracy is not None and not 0 < target_accuracy <= 1:
            raise ExplorerError("target accuracy must be in (0, 1]")
        self._cfg = replace(cfg, target_accuracy=target_accuracy)
        self.start(steps)
        return note

    def _back_to(self, step: int) -> None:
        """Forget the records after `step` (a run whose process died after its last evaluation at `step`)."""
        with self._lock:
            self._step = step
            self._steps = [r for r in self._steps if r.step <= step]
            self._evals = [r for r in self._evals if r.step <= step]
            self._frames.items = [f for f in self._frames.items if f.step <= step]
            if self._latest_frame is not None and self._latest_frame.step > step:
                self._latest_frame = None

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
                           tuple(self._evals), tuple(frames), self._cfg.target_accuracy, self._cfg.lr, place,
                           running and self._message == PREPARING)

    # -- the reader thread: messages from the process --

    def _elapsed(self) -> float:
        return self._elapsed_before + time.monotonic() - self._run_started

    def _read(self, conn, process) -> None:
        """Take the process's messages until it ends; whatever happens here, the run's slot is released."""
        try:
            self._follow(conn, process)
        finally:
            self._ended.set()
            if self.gate is not None:
                self.gate.release(self)

    def _follow(self, conn, process) -> None:
        ended, refused = None, None
        while ended is None:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            try:
                ended = self._handle(message)
            except ExplorerError as exc:  # e.g. a checkpoint the process wrote and loading refuses: say which
                refused = f"the trained model could not be taken over: {exc}"
                if message[0] == "done":
                    ended = FAILED, refused
            except Exception:  # a message the server cannot use must not leave the job running forever
                log.exception("training job %s sent a message the server could not use", self.name)
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join(5)
        state, text = ended or (FAILED, refused or _ending(process.exitcode))
        conn.close()
        with self._lock:
            self._elapsed_before += time.monotonic() - self._run_started
            self._state, self._message = state, text
            self._process = self._conn = None
        if ended is None:
            log.warning("training job %s: %s", self.name, text)

    def _handle(self, message: tuple) -> tuple[str, str] | None:
        kind = message[0]
        if kind == "prepared":
            _, data, held_out, notes, probe_text, cfg, trained_on = message
            bundle = freeze(checkpoint.from_bytes(data, self.name, source="training"))
            with self._lock:
                self.held_out, self.notes, self._probe_text = list(held_out), list(notes), probe_text
                if trained_on is not None:
                    pairs, total, file_name = trained_on
                    self.trained_on = TrainingSample(tuple((s, t) for s, t in pairs), int(total), str(file_name))
                self._cfg = TrainConfig(**cfg)
                self._run_end = self._run_start + self._cfg.steps
                self._checkpoint, self._message = data, ""
            self._set_snapshot(bundle)
        elif kind == "stopped":  # before its first step: nothing was trained
            return STOPPED, message[1]
        elif kind == "step":
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
            _, record, data, state = message
            with self._lock:
                self._evals.append(EvalRecord(record[0], self._elapsed(), *record[1:]))
            self._take_checkpoint(data)
            with self._lock:  # what a Continue goes on from, should the process die before the run ends
                self._resume, self._resume_step = state, record[0]
        elif kind == "done":
            _, state, text, data, resume, cfg = message
            self._take_checkpoint(data)
            with self._lock:
                self._resume, self._cfg = resume, TrainConfig(**cfg)
                self._resume_step = self._step
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
            bundle.trained_on = self.trained_on
            self._snapshot = bundle
        if self.publish is not None:
            try:
                self.publish(bundle)
            except Exception:  # a closed session must not end the job
                log.exception("publishing a snapshot of %s failed", self.name)
