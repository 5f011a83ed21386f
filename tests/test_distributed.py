"""Training on torch.distributed (explorer/training/distributed.py): ranks train as one process does, up to float
rounding; `--processes N` and torchrun (one machine or two "nodes" on the loopback address) write one
loadable checkpoint; a rank that dies ends the others with one clear line, never a hang.

Ranks are forked from a process with one thread; pytest's process may hold others (a job registry's reaper,
servers of earlier tests), so every multi-rank run happens in fresh interpreters. CPU only (gloo): where
EXPLORER_DEVICE=cuda runs the suite on a GPU, these still train on the CPU.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from explorer.checkpoints import checkpoint
from explorer.training.distributed import processes_wanted
from explorer.errors import ExplorerError

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "EXPLORER_DEVICE": "cpu", "EXPLORER_DIST_TIMEOUT": "60"}
TINY = ["--embed", "8", "--hidden", "16", "--attn-dim", "8", "--batch-size", "24", "--eval-samples", "40",
        "--threads", "1", "--min-len", "2", "--max-len", "9"]

SETUP = """
import json, sys, torch
torch.set_num_threads(1)
from explorer.training.distributed import run_ranks
from explorer.data.tasks import TaskSpec
from explorer.training.data import TaskData
from explorer.training.train import TrainConfig, Trainer, new_task_bundle

def trainer(world=None, **options):
    cfg = {k: options.pop(k) for k in list(options) if k in ("teacher_forcing", "steps")}
    bundle, task = new_task_bundle(TaskSpec("reverse", 2, 9), "p", seed=4, **{"embed": 8, "hidden": 16,
                                   "attn_dim": 8, "bidirectional": True, **options})
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, 40, 4)
    config = TrainConfig(**{"steps": 12, "batch_size": 24, "eval_every": 6, "eval_samples": 40, "seed": 4, **cfg})
    return Trainer(bundle, data, config, device="cpu", world=world)

def record(t, result):
    return {"processes": result.processes, "record": t.bundle.training["processes"],
            "losses": [h["loss"] for h in result.history], "examples": result.examples,
            "metrics": [{k: v for k, v in h.items() if k.startswith("valid_")} for h in result.history],
            "params": [p.detach().flatten().tolist() for p in t.model.parameters()]}

def ranked(options):
    def body(world):
        t = trainer(world, **options)
        return record(t, t.run())
    return body
"""


def run_script(body: str, timeout: int = 600, **env: str) -> dict:
    """Run SETUP + body in a fresh single-threaded interpreter; body prints one JSON object."""
    result = subprocess.run([sys.executable, "-c", SETUP + body], cwd=REPO, capture_output=True, text=True,
                            timeout=timeout, env={**ENV, **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_two_ranks_train_as_one_process_does_up_to_float_rounding_and_repeat_exactly() -> None:
    """The same global batches: losses within 1e-4 (relative), weights within 2e-4 (absolute) of one
    process's after 12 Adam steps (the two sum a batch's gradient in another order); two runs of two
    ranks are bit for bit alike. The forked ranks go first: the parent must not have trained before forking."""
    out = run_script("""
two = run_ranks(2, torch.device("cpu"), ranked({}))
again = run_ranks(2, torch.device("cpu"), ranked({}))
t = trainer()
one = record(t, t.run())
print(json.dumps({"one": one, "two": two, "again": again}))
""")
    one, two, again = out["one"], out["two"], out["again"]
    assert (one["processes"], two["processes"]) == (1, 2) and (one["record"], two["record"]) == (1, 2)
    assert one["examples"] == two["examples"] == 12 * 24
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-4)
    for a, b in zip(one["params"], two["params"]):
        assert b == pytest.approx(a, abs=2e-4)
    assert any(a != b for a, b in zip(one["params"], two["params"])), "the ranks did not change the float sums"
    assert again["params"] == two["params"] and again["losses"] == two["losses"]
    assert two["metrics"][-1]["valid_exact_match"] == pytest.approx(one["metrics"][-1]["valid_exact_match"], abs=0.03)


@pytest.mark.parametrize("options", [
    {"cell": "lstm", "attention": "none"},
    {"cell": "rnn", "attention": "additive", "layers": 2, "dropout": 0.1},
    {"cell": "unshared", "attention": "scaled_dot", "bidirectional": False, "teacher_forcing": 0.5},
], ids=["lstm-none", "rnn-additive-2-layers-dropout", "unshared-scaled-teacher-forcing"])
def test_every_architecture_trains_in_three_ranks_with_every_parameter_in_sync(options) -> None:
    """DDP needs a gradient for every parameter at every step (or it stops with an error): every cell, score
    function and option trains in three ranks (more ranks than a row of some batches' length groups), and the
    ranks end with the same weights as each other (DDP's averaged gradients, the same Adam steps)."""
    out = run_script(f"""
import torch.distributed as dist
def body(world):
    t = trainer(world, steps=4, **{options!r})
    result = t.run()
    flat = torch.cat([p.detach().flatten() for p in t.model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world.size)]
    dist.all_gather(gathered, flat)
    return {{"same": all(torch.equal(g, gathered[0]) for g in gathered), "steps": result.steps,
             "finite": bool(torch.isfinite(flat).all()), "processes": result.processes}}
print(json.dumps(run_ranks(3, torch.device("cpu"), body)))
""")
    assert out == {"same": True, "steps": 4, "finite": True, "processes": 3}


def test_ranks_split_each_evaluation_and_add_up_to_one_processs_metrics() -> None:
    out = run_script("""
from explorer.training.evaluation import evaluate
def body(world):
    t = trainer(world)
    t.run(steps=2)
    t.model.eval()
    split, whole = t._validate(), evaluate(t.model, t.data.validation())
    return {"split": split.to_dict(), "whole": whole.to_dict(),
            "mine": len(t.data.validation()[world.share(len(t.data.validation()))])}
print(json.dumps(run_ranks(2, torch.device("cpu"), body)))
""")
    assert out["mine"] == 20, "rank 0 scored half of the 40 validation pairs"
    assert out["split"] == out["whole"] and 0 < out["whole"]["token_accuracy"] < 1


def test_every_rank_gets_the_store_port_whole_however_many_read_at_once() -> None:
    """Rank 0 tells the forked ranks its store's port through pipes. The ranks read one pipe together and split
    each other's messages ("training process 1 failed: UnpicklingError: invalid load key" or "EOFError: Ran out
    of input", each after the 60-second timeout): half of the runs of four ranks failed. Each rank reads its own."""
    out = run_script("""
said = []
for _ in range(6):
    said.append(run_ranks(4, torch.device("cpu"), lambda world: world.sum([float(world.rank)])[0]))
print(json.dumps({"said": said}))
""", timeout=120, EXPLORER_DIST_TIMEOUT="20")
    assert out["said"] == [6.0] * 6


def test_a_ranks_own_error_reaches_rank_0_as_one_line_and_leaves_no_file(tmp_path) -> None:
    """A forked rank's error (its message as the product says it, or the type and first line of any other) ends
    rank 0's next collective, and rank 0 says which rank failed and why; torch.multiprocessing's error file for
    that rank is gone afterwards."""
    out = run_script("""
import glob, tempfile
from explorer.errors import ExplorerError
from explorer.training.distributed import DistributedError
def failing(error):
    def body(world):
        if world.rank == 2:
            raise error
        world.sum([1.0])
        world.sum([1.0])
    return body
said = []
for error in (ExplorerError("the file has no pairs"), ValueError("bad value\\nsecond line")):
    try:
        run_ranks(3, torch.device("cpu"), failing(error))
    except DistributedError as exc:
        said.append(str(exc))
print(json.dumps({"said": said, "left": glob.glob(tempfile.gettempdir() + "/pytorch-errorfile-*")}))
""", TMPDIR=str(tmp_path))
    assert out["said"] == ["training process 2 failed: the file has no pairs",
                           "training process 2 failed: ValueError: bad value"]
    assert out["left"] == []


def test_a_rank_that_failed_while_rank_0_still_joined_is_the_one_line(tmp_path) -> None:
    """Rank 1 of a run on a bad file fails at once and leaves; rank 0, slower on a busy machine, was still in gloo's
    full-mesh connect, which then fails ("Connection closed by peer"). That is rank 1's error, said in one line (it
    was an internal error: the join was outside the check that finds the rank that failed)."""
    out = run_script("""
import multiprocessing, time
import torch.distributed as dist
from explorer.errors import ExplorerError
from explorer.training.distributed import DistributedError
def joining(backend, store, rank, world_size, timeout):
    if rank == 0:
        while multiprocessing.active_children():
            time.sleep(0.05)
        raise RuntimeError("Gloo connectFullMesh failed with [..] Connection closed by peer [127.0.0.1]:5")
dist.init_process_group = joining
def body(world):
    raise ExplorerError("the file has no pairs")
try:
    run_ranks(2, torch.device("cpu"), body)
    said = None
except DistributedError as exc:
    said = str(exc)
print(json.dumps({"said": said}))
""", TMPDIR=str(tmp_path))
    assert out["said"] == "training process 1 failed: the file has no pairs"


def train_command(out: Path, *extra: str, steps: int = 12) -> list[str]:
    return [sys.executable, "-m", "explorer", "train", "--task", "reverse", "--out", str(out), "--steps", str(steps),
            "--eval-every", "6", *TINY, *extra]


def test_the_command_trains_in_two_processes_and_writes_one_checkpoint(tmp_path) -> None:
    run = subprocess.run(train_command(tmp_path / "two", "--processes", "2"), cwd=REPO, capture_output=True,
                         text=True, timeout=300, env=ENV)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["processes"] == 2 and summary["steps"] == 12
    assert run.stderr.count("training on cpu") == 1, "rank 0 alone reports progress"
    bundle = checkpoint.load(tmp_path / "two.safetensors")
    assert bundle.training["processes"] == 2 and bundle.training["steps_done"] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two.safetensors"], "one file, no leftovers"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_torchrun_nodes_on_the_loopback_address_train_one_model(tmp_path) -> None:
    """torchrun's own multi-machine flags, started once per "node", both on this machine: c10d rendezvous on
    127.0.0.1, one rank each; rank 0's node writes the checkpoint, the other writes nothing."""
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = []
    for node in range(2):
        out = tmp_path / f"node{node}" / "rev"
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                   "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "t23", "--max-restarts", "0",
                   "-m", "explorer", *train_command(out)[3:]]
        nodes.append(subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=ENV))
    outputs = [node.communicate(timeout=400) for node in nodes]
    for node, (stdout, stderr) in zip(nodes, outputs):
        assert node.returncode == 0, stderr
    written = sorted(tmp_path.glob("node*/rev.safetensors"))
    assert len(written) == 1, "exactly one rank wrote a checkpoint"
    bundle = checkpoint.load(written[0])
    assert bundle.training["processes"] == 2 and bundle.training["steps_done"] == 12
    summaries = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs if stdout.strip()]
    assert len(summaries) == 1 and summaries[0]["processes"] == 2


def wait_for(process: subprocess.Popen, text: str, timeout: float = 240) -> str:
    """Read `process`'s stderr until a line contains `text`; the lines read so far."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"never saw {text!r}: {''.join(seen)}")


def children_of(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_a_rank_that_dies_ends_the_others_with_one_clear_line(tmp_path) -> None:
    """kill -9 of rank 1 of `--processes 2`: rank 0 stops within seconds (gloo sees the closed socket; the
    process group's timeout covers a rank that hangs), says which rank died and how, and writes nothing."""
    run = subprocess.Popen(train_command(tmp_path / "never", "--processes", "2", steps=1_000_000), cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        wait_for(run, "training on cpu")
        ranks = children_of(run.pid)
        assert len(ranks) == 1
        os.kill(ranks[0], signal.SIGKILL)
        _, stderr = run.communicate(timeout=90)
    finally:
        run.kill()
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("training: ")]  # progress lines
    assert run.returncode == 2, stderr
    assert lines[-1] == "error: training process 1 was killed (SIGKILL)", stderr
    assert "Traceback" not in stderr and not list(tmp_path.iterdir())


def test_under_torchrun_a_rank_that_dies_ends_rank_0_with_one_clear_line(tmp_path) -> None:
    """Two ranks started as torchrun starts them (its environment variables), rank 1 killed mid-run."""
    port = str(free_port())
    ranks = []
    for rank in range(2):
        env = {**ENV, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        ranks.append(subprocess.Popen(train_command(tmp_path / "never", steps=1_000_000), cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    try:
        wait_for(ranks[0], "training on cpu")
        ranks[1].kill()
        _, stderr = ranks[0].communicate(timeout=90)
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    last = stderr.strip().splitlines()[-1]
    assert ranks[0].returncode == 2, stderr
    assert last.startswith("error: another training process stopped or stopped answering, so this one stops too")
    assert "Traceback" not in stderr and not list(tmp_path.iterdir())


def test_processes_wanted_defaults_to_two_on_two_cores_and_checks_a_request() -> None:
    assert processes_wanted(None, cores=1) == 1 and processes_wanted(None, cores=2) == 2
    assert processes_wanted(None, cores=16) == 2 and processes_wanted(3) == 3
    assert processes_wanted(None, cores=2, hidden=64) == 1, "the toy defaults train faster in one process"
    assert processes_wanted(None, cores=2, hidden=128) == 2 and processes_wanted(2, cores=2, hidden=64) == 2
    with pytest.raises(ExplorerError, match="training processes must be 1–64"):
        processes_wanted(0)
