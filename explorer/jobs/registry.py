"""The server's training jobs by session: one per session, admitted within the memory budget, given a
training slot (explorer/jobs/slots.py) per run, and stopped by a reaper thread when their session went
away (no heartbeat for `idle_timeout` seconds, or reported gone by `session_alive` for `gone_grace` seconds).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from explorer.limits import check_memory_budget
from explorer.limits import jobs_budget
from explorer.training.distributed import usable_cores
from explorer.jobs.lifecycle import TrainingJob
from explorer.jobs.records import QUEUED, RUNNING
from explorer.jobs.slots import Slots
from explorer.errors import ExplorerError

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    job: TrainingJob
    gone_since: float | None = None


class JobRegistry:
    """Jobs by session id: one per session, their runs given training slots (`max_running` at once, the
    next ones wait in order and know their place), and a reaper for abandoned sessions.

    `session_alive(session_id)` returns True/False, or None when it cannot tell (then only the
    heartbeat counts)."""

    def __init__(self, max_running: int | None = None, idle_timeout: float = 600.0, gone_grace: float = 30.0,
                 reap_interval: float = 5.0, session_alive: Callable[[str], bool | None] | None = None,
                 memory_budget: int | None = None) -> None:
        self.slots = Slots(usable_cores() if max_running is None else max_running)
        self.idle_timeout = idle_timeout  # seconds without a heartbeat before a job counts as abandoned
        self.gone_grace = gone_grace  # seconds a session may be disconnected (a reconnect) before its job stops
        self.reap_interval = reap_interval
        self.session_alive = session_alive
        self.memory_budget = jobs_budget() if memory_budget is None else memory_budget  # bytes, all running jobs
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None

    @property
    def max_running(self) -> int:
        return self.slots.max_running

    @max_running.setter
    def max_running(self, value: int) -> None:
        self.slots.max_running = value

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
        return self.slots.running()

    def waiting(self) -> int:
        """Runs waiting for a slot."""
        return self.slots.waiting()

    def place(self, job: TrainingJob) -> int | None:
        """A waiting run's place in the queue (1: next), None when it does not wait."""
        return self.slots.place(job)

    def request(self, job: TrainingJob) -> bool:
        """A slot for `job`'s run now (True), or a place at the end of the queue (False)."""
        return self.slots.request(job)

    def withdraw(self, job: TrainingJob) -> None:
        self.slots.withdraw(job)

    def release(self, job: TrainingJob) -> None:
        """`job`'s process ended: the slot goes to the first waiting run."""
        self.slots.release(job)

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

    def _committed_memory(self, but: str | None = None) -> list[int]:
        """The memory estimates of the running and queued jobs (all but session `but`'s); call with the lock held."""
        return [e.job.memory for sid, e in self._entries.items() if sid != but and e.job.state in (RUNNING, QUEUED)]

    def stop_all(self) -> None:
        """Stop every job and forget them (tests: a server that ends needs none of this, its job processes end when
        their pipe closes, worker.py)."""
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
    EXPLORER_TRAINING_MEMORY_MB and EXPLORER_PARSED_TSV_MB (limits.jobs_budget)."""
    global _REGISTRY
    with _REGISTRY_LOCK:
        if _REGISTRY is None:
            env = os.environ
            _REGISTRY = JobRegistry(max_running=int(env.get("EXPLORER_MAX_TRAININGS", usable_cores())),
                                    idle_timeout=float(env.get("EXPLORER_TRAINING_IDLE_SECONDS", 600)),
                                    gone_grace=float(env.get("EXPLORER_TRAINING_GONE_SECONDS", 30)))
        return _REGISTRY
