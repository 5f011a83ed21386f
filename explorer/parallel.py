"""Data-parallel training over two CPU processes: a forked helper computes half of each batch's gradient
and scores half of each evaluation's validation set.

Why: at our sizes a training step is hundreds of small operations, each too small to split across
cores (two OpenMP threads made steps slower, not faster), so one process keeps one core busy.
Splitting the batch instead keeps both busy: on 2 cores a step of 128 sequences costs about what
a step of 64 does (measured 31 vs 47 ms).

How: the model's parameters move to shared memory and the helper is forked, so it sees every
optimizer step the trainer makes without copying anything. Each step the trainer sends the helper
half of the batch (its odd rows) and the token count of the whole batch; both sides compute the
summed token loss over their half divided by that count, so the two gradients add up to exactly the
gradient of the batch's mean loss. The helper writes its gradient into a shared buffer; the trainer
adds it to its own, clips and steps as before. At an evaluation the helper greedy-decodes the second
half of the validation set while the trainer decodes the first; their counts add up (train.Tally).

Forking is only safe from a process with one thread (the command line's trainer, not the app's
server, whose training runs in threads beside the web server's): `available` says when it is. Where
torch sees a GPU, autograd starts a thread per device at the first backward pass, and a process forked
after that cannot backpropagate (torch refuses: "Unable to handle autograd's threading in combination
with fork-based multiprocessing"); no thread count shows it, so the helper tries one backward pass as
soon as it starts and says whether it can (`HelperUnavailable` if not; the trainer then trains alone).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import traceback
from typing import TYPE_CHECKING, Sequence

import torch
from torch import nn

from .errors import ExplorerError

if TYPE_CHECKING:
    from .train import Tally

_FORK = "fork" in multiprocessing.get_all_start_methods()


def available(model: nn.Module) -> bool:
    """Whether a forked helper can train beside this process: fork exists, this process runs one
    thread, and the model is on the CPU."""
    first = next(model.parameters(), None)
    on_cpu = first is None or first.device.type == "cpu"
    return _FORK and threading.active_count() == 1 and on_cpu


def _flat_views(buffer: torch.Tensor, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    views, start = [], 0
    for p in params:
        views.append(buffer[start: start + p.numel()].view_as(p))
        start += p.numel()
    return views


class HelperUnavailable(ExplorerError):
    """The forked helper cannot train here (see the module's docstring): train in one process instead."""


def _autograd_works() -> None:
    """One tiny backward pass: raises RuntimeError in a process forked after autograd started its device
    threads (on a machine where torch sees a GPU and the parent had already backpropagated)."""
    torch.ones(1, requires_grad=True).sum().backward()


def _helper_loop(conn, model: nn.Module, buffer: torch.Tensor, seed: int) -> None:
    """The helper process. For ("gradient", rows, tokens): backpropagate its share of the loss, put the
    gradient in the shared buffer and reply with the loss and its exactly right rows; for ("evaluate",
    pairs): reply with their tally. An error is replied too. The first reply says whether it can
    backpropagate at all."""
    from .train import Pair, batch_loss, tally
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle; this one ends with it
    torch.set_num_threads(1)
    try:
        _autograd_works()
    except RuntimeError as exc:
        conn.send(("unavailable", str(exc), None))
        return
    conn.send(("ready", None, None))
    params = [p for p in model.parameters() if p.requires_grad]
    views = _flat_views(buffer, params)
    generator = torch.Generator().manual_seed(seed)
    model.draw_dropout_from(generator)
    model.train()
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        try:
            if message[0] == "evaluate":
                conn.send(("ok", tally(model, message[1]), None))
                continue
            _, rows, tokens = message
            for p in params:
                p.grad = None
            loss, exact = batch_loss(model, [Pair(s, t) for s, t in rows], 1.0, generator, tokens=tokens)
            loss.backward()
            used = []
            for p, view in zip(params, views):
                used.append(p.grad is not None)
                if p.grad is None:
                    view.zero_()
                else:
                    view.copy_(p.grad)
            conn.send(("ok", (loss.item(), exact), used))
        except Exception:  # reported to the trainer, which raises it there
            conn.send(("error", traceback.format_exc(), None))


class GradientHelper:
    """A forked process that computes the gradient of half of each batch and scores half of each
    validation set (see the module's docstring)."""

    def __init__(self, model: nn.Module, seed: int) -> None:
        if not available(model):
            raise ExplorerError("a training helper process needs fork, one thread and a CPU model")
        self.params = [p for p in model.parameters() if p.requires_grad]
        model.share_memory()  # in place: the trainer's optimizer keeps the same parameters
        self.buffer = torch.zeros(sum(p.numel() for p in self.params)).share_memory_()
        self.views = _flat_views(self.buffer, self.params)
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_helper_loop, args=(child, model, self.buffer, seed + 1_000_003),
                                        daemon=True)
        self._process.start()
        child.close()
        self._waiting = False
        status, value, _ = self._receive_raw()  # the helper's first reply: whether it can backpropagate
        if status != "ready":
            self.close()
            raise HelperUnavailable(f"the training helper process cannot backpropagate: {value}")

    def submit(self, rows: list[tuple[tuple[int, ...], tuple[int, ...]]], tokens: int) -> None:
        """Start the helper on these (source ids, target ids) rows; `tokens` counts the whole batch's."""
        self._send(("gradient", rows, tokens))

    def submit_evaluation(self, pairs: Sequence) -> None:
        """Start the helper scoring these validation pairs (train.Pair) with the current parameters."""
        self._send(("evaluate", list(pairs)))

    def _send(self, message: tuple) -> None:
        if self._waiting:  # a step failed between submit and collect: its reply must not pass for this one's
            self._conn.recv()
        self._conn.send(message)
        self._waiting = True

    def _receive_raw(self) -> tuple:
        try:
            return self._conn.recv()
        except EOFError as exc:
            raise ExplorerError("the training helper process ended unexpectedly") from exc
        finally:
            self._waiting = False

    def _receive(self) -> tuple:
        status, value, used = self._receive_raw()
        if status != "ok":
            raise ExplorerError(f"the training helper process failed:\n{value}")
        return value, used

    def collect_evaluation(self) -> Tally:
        """Wait for the helper's tally (train.Tally) of the pairs given to submit_evaluation."""
        return self._receive()[0]

    def collect(self) -> tuple[float, int]:
        """Wait for the helper and add its gradient to the parameters' own; returns its share of the loss and
        how many of its rows it found exactly right (train.batch_loss)."""
        value, used = self._receive()
        for p, view, helper_used in zip(self.params, self.views, used):
            if helper_used:
                if p.grad is None:
                    p.grad = view.clone()
                else:
                    p.grad.add_(view)
        return value

    def close(self) -> None:
        """Stop the helper (idempotent)."""
        if self._process is None:
            return
        try:
            if self._waiting:
                self._conn.recv()
            self._conn.send(None)
        except (BrokenPipeError, EOFError, OSError):
            pass
        self._conn.close()
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
        self._process = None


def processes_wanted(requested: int | None, cores: int | None = None) -> int:
    """How many processes to train with: `requested`, or (None) two where this process may use two cores.

    By the cores this process may use, not by how busy they are now: the two choices round float sums
    differently, and a seed must give the same weights on a machine however busy it is."""
    if requested is not None:
        if requested not in (1, 2):
            raise ExplorerError(f"training processes must be 1 or 2, got {requested}")
        return requested
    return 2 if (usable_cores() if cores is None else cores) >= 2 else 1


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
