"""Training slots: at most `max_running` training processes at once (the usable cores by default); the
next runs wait in order, first come first served, and each knows its place in the queue.

A slot is per run, not per job: a job between runs holds none. The memory a job may take is checked when
it is admitted (registry.JobRegistry.admit, limits.check_memory_budget), not here.
"""

from __future__ import annotations

import threading
from typing import Protocol


class Runnable(Protocol):
    """A job as the slots see it: something to launch once it has a slot."""

    def launch(self) -> bool:
        """Start the run; False when it no longer wants to (stopped while it waited): the slot is not taken."""


class Slots:
    """Hands out training slots and keeps the queue of runs waiting for one."""

    def __init__(self, max_running: int) -> None:
        self.max_running = max_running
        self._lock = threading.Lock()
        self._running: set[int] = set()  # ids of the jobs whose process runs
        self._queue: list[Runnable] = []

    def request(self, job: Runnable) -> bool:
        """A slot for `job`'s run now (True), or a place at the end of the queue (False)."""
        with self._lock:
            if len(self._running) < self.max_running and not self._queue:
                self._running.add(id(job))
                return True
            self._queue.append(job)
            return False

    def withdraw(self, job: Runnable) -> None:
        """A waiting run leaves the queue (stopped before it started)."""
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)

    def release(self, job: Runnable) -> None:
        """`job`'s process ended: the slot goes to the first waiting run that launches. A run stopped between
        leaving the queue and launching declines it, and the slot goes on to the next (never lost)."""
        with self._lock:
            self._running.discard(id(job))
            nxt = self._queue.pop(0) if self._queue and len(self._running) < self.max_running else None
            if nxt is not None:
                self._running.add(id(nxt))
        if nxt is not None and not nxt.launch():
            self.release(nxt)

    def place(self, job: Runnable) -> int | None:
        """A waiting run's place in the queue (1: next), None when it does not wait."""
        with self._lock:
            return self._queue.index(job) + 1 if job in self._queue else None

    def running(self) -> int:
        """Training processes running now."""
        with self._lock:
            return len(self._running)

    def waiting(self) -> int:
        """Runs waiting for a slot."""
        with self._lock:
            return len(self._queue)
