"""What the Train page reads of a job: its states, a record per step and per evaluation, and one
consistent view of it all per render (copied under the job's lock)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.training.probes import Snapshot

NEW, QUEUED, RUNNING, STOPPED, FINISHED, FAILED = "new", "queued", "running", "stopped", "finished", "failed"


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
    preparing: bool = False  # running, but its process still prepares the data (no step yet)

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
