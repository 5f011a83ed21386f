"""Data-parallel training on torch.distributed: the ranks of one run, how they start, how they agree.

Why: at our sizes a training step is hundreds of small operations, each too small to split across
cores (two OpenMP threads made steps slower, not faster), so one process keeps one core busy.
Splitting each batch over processes keeps every core busy, and DistributedDataParallel (DDP) is the
field's way to do it: the same code runs two CPU processes here, or many GPU nodes under `torchrun`.

How a run starts:
- under `torchrun` (its RANK, WORLD_SIZE, MASTER_ADDR... in the environment), `from_environment` joins
  the process group torchrun describes: one machine or many, gloo on the CPU, nccl on CUDA;
- `explorer train --processes N` on one machine: `run_ranks` forks N - 1 ranks from the command's own
  process (rank 0) before anything has run a tensor operation, and they meet through a TCPStore on the
  loopback address. Forking, not spawning: a spawned rank would import torch again (2-3 s here).

Every rank draws the same global batch from the same seed and trains on its rows (Trainer), so N ranks
follow the one-process run up to float rounding; the gradients are averaged by DDP. Everything the
ranks must decide alike (stop now? is the target in sight?) goes through one small all_reduce per step.
A rank that dies makes the others' next collective fail at once (gloo sees the closed socket); a rank
that hangs makes them fail after `TIMEOUT` (the process group's timeout): never a silent hang.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import multiprocessing
import os
import pickle
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

import torch
import torch.distributed as dist
from torch.multiprocessing import ProcessContext, start_processes

from explorer.defaults import DDP_MIN_HIDDEN
from explorer.errors import ExplorerError

T = TypeVar("T")
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("EXPLORER_DIST_TIMEOUT", 180)))
MAX_PROCESSES = 64


class DistributedError(ExplorerError):
    """Another rank of this training stopped (died, failed or stopped answering): this one stops too."""


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def processes_wanted(requested: int | None, cores: int | None = None, hidden: int | None = None) -> int:
    """How many training processes to run on this machine: `requested`, or (None) two where this
    process may use two cores or more and the model has a hidden size of at least DDP_MIN_HIDDEN.

    By the cores this process may use, not by how busy they are now: one process and two round float
    sums differently, and a seed must give the same weights on a machine however busy it is. Not below
    DDP_MIN_HIDDEN: on 2 cores two ranks train the toy defaults (GRU 64) at 0.91x one process's rate (syncing
    costs 20% of a step that small) and reach 99% later, while at GRU 128 they train 1.23x faster
    (docs/PERFORMANCE.md)."""
    if requested is not None:
        if not 1 <= requested <= MAX_PROCESSES:
            raise ExplorerError(f"training processes must be 1–{MAX_PROCESSES}, got {requested}")
        return requested
    if hidden is not None and hidden < DDP_MIN_HIDDEN:
        return 1
    return 2 if (usable_cores() if cores is None else cores) >= 2 else 1


@dataclass(frozen=True)
class World:
    """This process's place in a data-parallel run: rank `rank` of `size`, on `device`."""

    rank: int
    size: int
    device: torch.device
    local_rank: int = 0

    @property
    def leader(self) -> bool:
        """Rank 0: the one that prints progress and writes the checkpoint."""
        return self.rank == 0

    def share(self, n: int) -> slice:
        """This rank's contiguous part of n items (the parts of all ranks cover them once)."""
        return slice(self.rank * n // self.size, (self.rank + 1) * n // self.size)

    def sum(self, values: list[float], dtype: torch.dtype = torch.float64) -> list[float]:
        """Each value summed over every rank (one all_reduce)."""
        tensor = torch.tensor(values, dtype=dtype, device=self.device if self.device.type == "cuda" else "cpu")
        try:
            dist.all_reduce(tensor)
        except (RuntimeError, dist.DistError) as exc:
            raise DistributedError(stopped_message(exc)) from exc
        return tensor.tolist()


def stopped_message(exc: BaseException) -> str:
    """One line for a failed collective: another rank is gone, or silent past the timeout."""
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return f"another training process stopped or stopped answering, so this one stops too ({text})"


def is_collective_failure(exc: BaseException) -> bool:
    """Whether an error came from a collective that another rank never joined (gloo, nccl or the store)."""
    if isinstance(exc, dist.DistError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(word in text for word in ("gloo", "NCCL", "Connection closed",
                                                                           "Connection reset", "TCPStore"))


def backend_for(device: torch.device) -> str:
    """nccl between GPUs, gloo between CPUs."""
    return "nccl" if device.type == "cuda" else "gloo"


def under_torchrun() -> bool:
    """Whether torchrun (or another launcher with its environment variables) started this process."""
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE")) and "MASTER_ADDR" in os.environ


@dataclass(frozen=True)
class Launch:
    """What torchrun's environment says of this process, checked (`launch_from`)."""

    rank: int
    size: int
    local_rank: int
    local_size: int


def _whole(env: Mapping[str, str], name: str, default: int | None, lo: int, hi: int) -> int:
    text = env.get(name)
    if text is None and default is not None:
        return default
    value = (text or "").strip()
    if not value.isascii() or not value.isdigit() or len(value) > 6 or not lo <= int(value) <= hi:
        raise ExplorerError(f"torchrun's environment: {name}={str(text)[:40]!r} must be a whole number from "
                            f"{lo} to {hi:,}")
    return int(value)


def launch_from(env: Mapping[str, str] = os.environ) -> Launch:
    """RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT checked before any process
    group is made: one line naming the variable, instead of a ValueError or c10d's pages of retries."""
    size = _whole(env, "WORLD_SIZE", None, 1, 100_000)
    rank = _whole(env, "RANK", None, 0, 100_000)
    local_size = _whole(env, "LOCAL_WORLD_SIZE", 1, 1, 100_000)
    local_rank = _whole(env, "LOCAL_RANK", 0, 0, 100_000)
    if rank >= size:
        raise ExplorerError(f"torchrun's environment: RANK {rank} is not below WORLD_SIZE {size}")
    if local_rank >= local_size or local_size > size:
        raise ExplorerError(f"torchrun's environment: LOCAL_RANK {local_rank} must be below LOCAL_WORLD_SIZE "
                            f"{local_size}, itself at most WORLD_SIZE {size}")
    _whole(env, "MASTER_PORT", 29500, 1, 65535)
    host = env.get("MASTER_ADDR", "")
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError, ValueError):
        raise ExplorerError(f"torchrun's environment: MASTER_ADDR {host[:80]!r} is not a host this machine can "
                            "find") from None
    return Launch(rank, size, local_rank, local_size)


def from_environment(device: torch.device) -> World:
    """Join the process group torchrun describes (env://); on CUDA each rank takes GPU LOCAL_RANK."""
    launch = launch_from()
    rank, size, local = launch.rank, launch.size, launch.local_rank
    if device.type == "cuda":
        device = torch.device("cuda", local % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(device)
    try:
        dist.init_process_group(backend_for(device), init_method="env://", rank=rank, world_size=size,
                                timeout=TIMEOUT)
    except (RuntimeError, ValueError, dist.DistError) as exc:
        raise DistributedError(f"could not join the other training processes: {stopped_message(exc)}") from exc
    return World(rank, size, device, local)


def leave() -> None:
    """Leave the process group (idempotent)."""
    if dist.is_initialized():
        dist.destroy_process_group()


class _RankFailed(Exception):
    """A forked rank's error as the one line rank 0 says (torch.multiprocessing writes its traceback to a file)."""


def _rank(index: int, size: int, device: torch.device, ports, body: Callable[[World], object]) -> None:
    """Forked rank `index + 1` (start_processes counts its children from 0): take rank 0's store port from its
    own pipe (`ports[index]`: ranks reading one pipe together split each other's messages), join, run `body`.
    Its own error reaches rank 0 as one line; a collective another rank broke exits with code 3."""
    with contextlib.suppress(OSError, AttributeError):  # Linux's PR_SET_PDEATHSIG: end with rank 0, whatever it does
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is rank 0's to handle; this one ends with it
    try:
        store = dist.TCPStore("127.0.0.1", ports[index].recv(), size, is_master=False, timeout=TIMEOUT)
        dist.init_process_group(backend_for(device), store=store, rank=index + 1, world_size=size, timeout=TIMEOUT)
        body(World(index + 1, size, device))
    except BaseException as exc:  # noqa: BLE001 - said to rank 0 in one line
        if isinstance(exc, DistributedError) or is_collective_failure(exc):
            os._exit(3)  # not this rank's fault: rank 0 finds the rank that failed first
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise _RankFailed(text if isinstance(exc, ExplorerError) else f"{type(exc).__name__}: {text}") from None
    finally:
        leave()
        sys.stdout.flush()
        sys.stderr.flush()


def can_fork() -> bool:
    """Forking is only safe from a process that runs one thread and has not touched a GPU."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def run_ranks(size: int, device: torch.device, body: Callable[[World], T]) -> T:
    """Run `body` as every rank of a `size`-process run on this machine; return rank 0's result.

    This process is rank 0; ranks 1.. are forked from it (torch.multiprocessing.start_processes), so call this
    before any tensor work (a forked child cannot use autograd's or CUDA's threads of its parent). An error in any
    rank ends all of them and is raised here as one line (DistributedError)."""
    if size < 2:
        return body(World(0, 1, device))
    if not can_fork():
        raise ExplorerError("training in several processes needs fork and a process with one thread; "
                            "use --processes 1 or torchrun")
    pipes = [multiprocessing.get_context("fork").Pipe(duplex=False) for _ in range(size - 1)]
    ranks = start_processes(_rank, (size, device, [reader for reader, _ in pipes], body), nprocs=size - 1,
                            join=False, daemon=True, start_method="fork")
    for reader, _ in pipes:
        reader.close()
    try:
        store = dist.TCPStore("127.0.0.1", 0, size, is_master=True, timeout=TIMEOUT, wait_for_workers=False)
        for _, writer in pipes:
            writer.send(store.port)
        try:  # a rank whose body failed at once may have left while this one still joins (gloo's full mesh)
            dist.init_process_group(backend_for(device), store=store, rank=0, world_size=size, timeout=TIMEOUT)
            result = body(World(0, size, device))
        except (DistributedError, RuntimeError, dist.DistError) as exc:
            why = _why_ranks_stopped(ranks)
            if why is None and not isinstance(exc, DistributedError) and not is_collective_failure(exc):
                raise  # rank 0's own error (a bug): as it is
            raise DistributedError(why or (str(exc) if isinstance(exc, DistributedError) else stopped_message(exc))) \
                from exc
        for process in ranks.processes:
            process.join(TIMEOUT.total_seconds())
        failed = _why_ranks_stopped(ranks)
        if failed:
            raise DistributedError(failed)
        return result
    finally:
        leave()
        for _, writer in pipes:
            writer.close()
        for process, error_file in zip(ranks.processes, ranks.error_files):
            if process.is_alive():
                process.join(2)
            if process.is_alive():
                process.kill()
                process.join()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(error_file)


def _why_ranks_stopped(ranks: ProcessContext) -> str | None:
    """What ended the first rank that failed: its own one-line error (the file start_processes gave it), or how
    it was killed."""
    for process in ranks.processes:
        process.join(2)  # a rank that saw the same failed collective is exiting now
    for rank, (process, error_file) in enumerate(zip(ranks.processes, ranks.error_files), start=1):
        message = None
        if os.path.exists(error_file):
            with open(error_file, "rb") as fh:
                message = pickle.load(fh).strip().splitlines()[-1].partition(f"{_RankFailed.__name__}: ")[2]
        code = process.exitcode
        if message:
            return f"training process {rank} failed: {message}"
        if code is not None and code < 0:
            return f"training process {rank} was killed ({signal.Signals(-code).name})"
        if code not in (None, 0, 3):
            return f"training process {rank} ended with exit code {code}"
    return None
