"""Atomic saves, proved with a real kill: a process saving over a good checkpoint is SIGKILLed in the
middle of writing (and, separately, after writing but before the rename); the good checkpoint is
still there, byte for byte, loads, and nothing half-written took its place.

The child process writes the new checkpoint in small chunks and tells the test through a file when it
is halfway (so the kill lands inside the write loop every time, not by luck), then waits to be killed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from explorer.checkpoints import checkpoint
from explorer.data.tasks import TaskSpec
from explorer.training.train import new_task_bundle

REPO = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent("""
    import json, os, sys, time
    target, ready, where = sys.argv[1], sys.argv[2], sys.argv[3]
    import torch
    from explorer.checkpoints import checkpoint
    from explorer.data.tasks import TaskSpec
    from explorer.training.train import new_task_bundle

    real_fdopen, real_replace = os.fdopen, os.replace

    def announce(**facts):
        with open(ready + ".part", "w") as f:
            json.dump(facts, f)
        real_replace(ready + ".part", ready)  # the test sees the whole note or none of it
        time.sleep(120)  # wait here for the kill

    class SlowFile:
        # the checkpoint's temporary file, written 64 KiB at a time
        def __init__(self, f):
            self.f = f
        def write(self, data):
            view = memoryview(data)
            for start in range(0, len(view), 65536):
                self.f.write(view[start:start + 65536])
                self.f.flush()
                if where == "write" and start >= len(view) // 2:
                    tmp = os.readlink(f"/proc/self/fd/{self.f.fileno()}")
                    announce(tmp=tmp, written=start + 65536, total=len(view))
        def __getattr__(self, name):
            return getattr(self.f, name)
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return self.f.__exit__(*exc)

    def fdopen(fd, *args, **kwargs):
        return SlowFile(real_fdopen(fd, *args, **kwargs))

    def replace(src, dst):
        if where == "rename":
            announce(tmp=str(src), written=os.path.getsize(src), total=os.path.getsize(src))
        return real_replace(src, dst)

    os.fdopen, os.replace = fdopen, replace
    bundle, _ = new_task_bundle(TaskSpec("copy", 1, 6), "new", seed=99, embed=64, hidden=256, attn_dim=128)
    checkpoint.save(bundle, target)
    print("saved", flush=True)
""")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def good(tmp_path) -> Path:
    """A good checkpoint at the path the child will save over."""
    bundle, _ = new_task_bundle(TaskSpec("copy", 1, 6), "old", seed=1, embed=8, hidden=16, attn_dim=8)
    return checkpoint.save(bundle, tmp_path / "model.safetensors")


def kill_while_saving(target: Path, where: str, tmp_path: Path) -> dict:
    """Start a child that saves over `target`, wait until it is at `where`, SIGKILL it; its note."""
    ready = tmp_path / "ready.json"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, str(script), str(target), str(ready), where], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert child.poll() is None, f"the child ended early: {child.communicate()[1].decode()[-2000:]}"
            assert time.monotonic() < deadline, "the child never reached the write"
            time.sleep(0.05)
        note = json.loads(ready.read_text())
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    assert child.returncode == -signal.SIGKILL
    assert b"saved" not in child.stdout.read()
    return note


@pytest.mark.parametrize("where", ["write", "rename"])
def test_a_save_killed_midway_leaves_the_previous_checkpoint_intact(good, tmp_path, where):
    before = digest(good)
    old = checkpoint.load(good)
    note = kill_while_saving(good, where, tmp_path)

    partial = Path(note["tmp"])
    assert partial.parent == good.parent and partial != good
    if where == "write":
        assert 0 < note["written"] < note["total"], "killed inside the write loop"
    assert note["total"] > good.stat().st_size, "the new checkpoint is larger: a partial write would show"

    assert digest(good) == before, "the previous checkpoint is byte-identical"
    loaded = checkpoint.load(good)
    assert loaded.name == "model" and loaded.model.cfg == old.model.cfg
    assert all(torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(), old.model.state_dict().values()))
    # what the kill left behind is a hidden temporary file that is never taken for a checkpoint
    # (the writer's lock file may stay too: the kernel released its lock with the process)
    left = [p for p in good.parent.iterdir() if p.name.startswith(".model.safetensors.") and p.suffix != ".lock"]
    assert left == [partial] and partial.name.endswith(".tmp")
    assert sorted(p.name for p in good.parent.glob(f"*{checkpoint.SUFFIX}")) == ["model.safetensors"]
    # the next save of that path removes the orphan and leaves nothing of its own behind
    checkpoint.save(old, good)
    assert sorted(p.name for p in good.parent.iterdir() if p.name.startswith(".model.")) == []
