"""Background training jobs: run, stop, continue, snapshots, the per-session registry, its queue and its reaper.
Every run trains in a process of its own (explorer/jobs/worker.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from explorer.checkpoints import checkpoint

from explorer.jobs import worker
from explorer.errors import ExplorerError
from explorer.jobs import (FAILED, FINISHED, NEW, QUEUED, RUNNING, STOPPED, JobRegistry, Limits, TrainingJob,
                                   task_job, translation_job)
from explorer.training.probes import Thinned, Watched
from explorer.data.tasks import TaskSpec
from explorer.training.data import TaskData
from explorer.training.train import TrainConfig, Trainer, new_task_bundle

REPO = Path(__file__).resolve().parent.parent

TINY = {"embed": 8, "hidden": 16, "attn_dim": 8, "bidirectional": False}
SPEC = TaskSpec("reverse", 2, 4, "abcd")


def job_config(steps: int = 50_000, **cfg) -> TrainConfig:
    return TrainConfig(**{"steps": steps, "batch_size": 16, "lr": 1e-2, "eval_every": 10, "eval_samples": 40, **cfg})


def tiny_job(steps: int = 30, publish=None, **cfg) -> TrainingJob:
    return task_job(SPEC, "tiny", dict(TINY), job_config(steps, **cfg), publish=publish)


def wait_until(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_job_runs_to_completion_and_logs_progress():
    published = []
    job = tiny_job(steps=30, publish=published.append)
    assert job.state == NEW
    job.start()
    assert job.join(30)
    view = job.view()
    assert view.state == FINISHED and view.step == 30 and "30" in view.message
    assert [r.step for r in view.steps] == list(range(1, 31))
    assert [r.step for r in view.evals] == [10, 20, 30]
    assert view.fraction == 1.0 and view.eta is None and view.elapsed > 0
    assert all(0 <= r.valid_exact <= 1 and r.valid_loss > 0 and r.valid_alignment is not None for r in view.evals)
    assert view.snapshots[0].step == 0 and view.snapshots[-1].step == 30  # from untrained to the end
    assert len(published) == 5  # at the start, each evaluation, and the final model with its training record
    assert published[-1].training["steps_done"] == 30
    assert published[-1] is job.snapshot()


def test_snapshot_is_a_frozen_copy_not_the_live_model():
    job = tiny_job(steps=10)
    job.start()
    job.join(30)
    snap = job.snapshot()
    assert snap.name == "tiny" and job.pid is None, "the run's process ended with the run"
    assert not snap.model.training and not any(p.requires_grad for p in snap.model.parameters())
    before = [p.clone() for p in snap.model.parameters()]
    job.continue_(10)
    job.join(30)
    assert all(torch.equal(a, b) for a, b in zip(before, snap.model.parameters()))  # untouched by training
    assert job.snapshot() is not snap
    assert checkpoint.from_bytes(checkpoint.to_bytes(job.snapshot()), "again").training["steps_done"] == 20


def test_stop_keeps_the_model_and_continue_goes_on_exactly_with_a_new_lr():
    """A continued run is a new process that goes on from the state the last one sent: the weights are those
    of one Trainer in this process stopped at the same step and run on (Adam's moments, the step count and
    the random draws kept; the new learning rate from then on), bit for bit."""
    job = tiny_job(steps=50_000)
    job.start()
    wait_until(lambda: job.view().step >= 5)
    assert job.state == RUNNING and job.view().eta is not None and job.pid is not None
    job.stop()
    assert job.join(30)
    view = job.view()
    assert view.state == STOPPED and 5 <= view.step < 50_000 and "stopped" in view.message
    stopped_at = view.step
    assert job.snapshot().training["steps_done"] == stopped_at
    job.continue_(7, lr=5e-3)
    job.join(60)
    view = job.view()
    assert view.state == FINISHED and view.step == stopped_at + 7 and view.lr == 5e-3
    assert [r.step for r in view.steps] == list(range(1, stopped_at + 8))

    bundle, task = new_task_bundle(SPEC, "tiny", seed=0, **TINY)
    stop = threading.Event()
    here = Trainer(bundle, Watched(TaskData(task, bundle.src_vocab, bundle.tgt_vocab, 40, 0), None), job_config(),
                   stop=stop, on_step=lambda p: p.step == stopped_at and stop.set())
    here.run()
    stop.clear()
    here.set_lr(5e-3)
    here.run(7)
    continued = job.snapshot().model.state_dict()
    assert all(torch.equal(continued[k], v) for k, v in bundle.model.state_dict().items())
    with pytest.raises(ExplorerError):
        job.continue_(5, lr=0)


def test_continue_while_running_is_refused():
    job = tiny_job(steps=50_000)
    job.start()
    try:
        with pytest.raises(ExplorerError, match="already"):
            job.continue_(10)
    finally:
        job.stop()
        job.join(30)


def test_target_accuracy_stops_early():
    job = tiny_job(steps=2000, target_accuracy=0.01)  # any model gets 1 % exact on 2–4 symbols soon
    job.start()
    job.join(60)
    assert job.view().state == FINISHED and job.view().step < 2000 and "target" in job.view().message


def test_a_crash_in_the_training_process_becomes_a_failed_state():
    job = tiny_job(steps=20)
    job.recipe = worker.Recipe("tiny", {**TINY, "hidden": "sixteen"}, spec=SPEC)  # fails in the process only
    job.start()
    job.join(60)
    assert job.state == FAILED and job.view().message == "hidden must be a whole number, got 'sixteen'"


def test_a_training_process_killed_with_kill_9_fails_its_job_with_a_clear_message_and_the_rest_goes_on():
    killed, other = tiny_job(steps=50_000), tiny_job(steps=50_000)
    killed.start()
    other.start()
    try:
        wait_until(lambda: killed.view().step >= 2 and other.view().step >= 2)
        os.kill(killed.pid, signal.SIGKILL)
        assert killed.join(30)
        assert killed.state == FAILED and killed.view().message == "the training process was killed (SIGKILL)"
        assert killed.snapshot() is not None  # the model as of its last evaluation (or untrained) is kept
        reached = other.view().step
        wait_until(lambda: other.view().step > reached + 2)
        assert other.state == RUNNING
    finally:
        for job in (killed, other):
            job.stop()
            job.join(30)


def test_snapshots_are_thinned_evenly_to_a_cap():
    thin = Thinned(cap=6)
    for step in range(0, 100):
        thin.offer(step)
    assert len(thin.items) <= 6
    gaps = {b - a for a, b in zip(thin.items, thin.items[1:])}
    assert len(gaps) == 1 and thin.items[0] == 0


def test_limits_refuse_oversized_jobs():
    with pytest.raises(ExplorerError, match="hidden is 1024"):
        task_job(SPEC, "big", {**TINY, "hidden": 1024}, TrainConfig(steps=10))
    with pytest.raises(ExplorerError, match="steps"):
        task_job(SPEC, "long", TINY, TrainConfig(steps=60_000))
    with pytest.raises(ExplorerError, match="batch"):
        task_job(SPEC, "wide", TINY, TrainConfig(steps=10, batch_size=2048))
    with pytest.raises(ExplorerError, match="layers"):
        task_job(SPEC, "deep", {**TINY, "layers": 4}, TrainConfig(steps=10))
    with pytest.raises(ExplorerError, match="limit is 10"):
        translation_job(b"a\tb\n" * 10, "tsv", TINY, TrainConfig(steps=10), limits=Limits(max_tsv_bytes=10))


def test_translation_job_from_tsv_bytes_with_epochs(tmp_path):
    rows = "".join(f"go {w}\tva {w}\n" for w in ["home", "now", "there", "away", "back", "up"] * 5)
    job = translation_job(rows.encode(), "tsv", TINY, TrainConfig(batch_size=8, eval_samples=10), epochs=2)
    job.start()
    job.join(30)
    assert job.state == FINISHED and job.snapshot().kind == "translation"
    assert job.config.steps == pytest.approx(2 * 28 / 8, abs=1)  # set in the job's process, from the data
    assert job.view().step == job.config.steps
    own = job.snapshot().trained_on  # its training pairs as text, for Explore's nearest examples (never saved)
    assert own.total == 30 - len(job.held_out) > 0  # the file's pairs less the held-out ones
    assert own.file_name == "upload" and len(own.pairs) == len(set(own.pairs)) == 6
    assert set(own.pairs) == {tuple(line.split("\t")) for line in rows.splitlines()}


# --- an uploaded file is prepared in the job's process (issues 43 and 44) ------------------------------

ROWS = "".join(f"go {w}\tva {w}\n" for w in ["home", "now", "there", "away", "back", "up"] * 5).encode()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def slow_translation_job(name: str) -> TrainingJob:
    from tests.slow_data import slow
    job = translation_job(ROWS, name, TINY, TrainConfig(steps=10, batch_size=8, eval_samples=10))
    job.recipe = slow(job.recipe)  # its data takes a minute to prepare
    return job


def test_the_server_process_never_parses_or_tokenizes_an_uploaded_file(monkeypatch):
    """Parsing, length limits, the tokenizers' training and an uploaded model's tokenizers all run in the job's
    process: a library that hangs or aborts there takes only that process (it ran in the server's thread)."""
    from explorer.jobs.further import further_job

    def not_here(*args, **kwargs):
        raise AssertionError("the server process prepared the data")
    for where in ("explorer.training.recipes.translation_setup", "explorer.training.further_data.pair_data",
                  "explorer.data.corpus.load_tsv_bytes", "explorer.data.subwords.SubwordTokenizer.train"):
        monkeypatch.setattr(where, not_here)
    job = translation_job(ROWS, "tsv", TINY, TrainConfig(batch_size=8, eval_samples=10), auto=True, probe="go home")
    assert job.snapshot() is None and job.notes == [] and job.held_out == []
    job.start()
    assert job.join(60) and job.state == FINISHED, job.view().message
    assert job.snapshot().kind == "translation" and job.probe_text == "go home" and job.held_out
    more = further_job(job.snapshot(), "tsv-more", TrainConfig(steps=3, batch_size=8, eval_every=3, eval_samples=8),
                       tsv=ROWS)
    more.start()
    assert more.join(60) and more.state == FINISHED, more.view().message
    assert more.snapshot().examples and more.held_out
    assert more.snapshot().trained_on.pairs, "training further on a file: that file's pairs are searched"


def test_an_unusable_probe_fails_the_job_with_the_reason_once_the_tokenizers_exist():
    job = translation_job(ROWS, "tsv", TINY, TrainConfig(steps=5, batch_size=8, eval_samples=10),
                          probe=" ".join(["go"] * 200))
    job.start()
    assert job.join(60) and job.state == FAILED
    assert job.view().message == "the input has 200 tokens; this model supports at most 80"
    with pytest.raises(ExplorerError, match="the input is empty"):
        translation_job(ROWS, "tsv", TINY, TrainConfig(steps=5), probe="  ")  # no tokenizer needed: at once


def test_preparing_a_file_holds_a_training_slot_and_stop_ends_it_at_once():
    reg = JobRegistry(max_running=1)
    preparing, other = slow_translation_job("slow"), translation_job(ROWS, "other", TINY, TrainConfig(
        steps=5, batch_size=8, eval_samples=10))
    try:
        reg.admit("a", preparing)
        preparing.start()
        wait_until(lambda: preparing.pid is not None)
        view = preparing.view()
        assert view.preparing and view.running and view.message == "preparing the data"
        reg.admit("b", other)
        other.start()
        assert other.state == QUEUED and (reg.running(), reg.waiting()) == (1, 1)  # within the cap
        pid, asked = preparing.pid, time.monotonic()
        preparing.stop()
        assert preparing.join(10) and time.monotonic() - asked < 10  # not the minute the preparation takes
        assert preparing.state == STOPPED and preparing.view().message == "stopped before its first step"
        wait_until(lambda: not alive(pid), timeout=10)
        assert other.join(60) and other.state == FINISHED  # the slot went on
    finally:
        reg.stop_all()


def test_a_closed_tab_ends_the_preparation_of_its_file():
    reg = JobRegistry(max_running=1, gone_grace=0.0, session_alive=lambda sid: False)
    preparing = slow_translation_job("slow")
    try:
        reg.admit("gone", preparing)
        preparing.start()
        wait_until(lambda: preparing.pid is not None)
        pid = preparing.pid
        assert reg.reap() == ["gone"]
        assert preparing.join(10) and preparing.state == STOPPED
        wait_until(lambda: not alive(pid), timeout=10)
        assert reg.running() == 0
    finally:
        reg.stop_all()


def test_a_files_memory_is_counted_before_it_is_read():
    from explorer.limits import TSV_BYTES_FACTOR
    from explorer.jobs import job_memory
    cfg = TrainConfig(steps=2, batch_size=8, eval_samples=10)
    job, bigger = translation_job(ROWS, "tsv", TINY, cfg), translation_job(ROWS * 100, "tsv", TINY, cfg)
    assert bigger.memory - job.memory == TSV_BYTES_FACTOR * 99 * len(ROWS)
    with pytest.raises(ExplorerError, match="this training needs about"):
        JobRegistry(max_running=1, memory_budget=job.memory - 1).admit("a", job)
    job.start()
    assert job.join(60) and job.state == FINISHED
    assert job.memory >= job_memory(job.snapshot(), job.config, len(ROWS), 2 * 40 + 2)  # the model it made fits


def test_registry_one_job_per_session_and_a_queue_beyond_the_slots():
    reg = JobRegistry(max_running=1)
    first, second, third = tiny_job(steps=50_000), tiny_job(steps=10), tiny_job(steps=10)
    try:
        reg.admit("a", first)
        first.start()
        with pytest.raises(ExplorerError, match="already training"):
            reg.admit("a", second)
        reg.admit("b", second)
        second.start()
        reg.admit("c", third)
        third.start()
        assert (second.state, third.state) == (QUEUED, QUEUED) and second.pid is None
        assert (second.view().queue_place, third.view().queue_place) == (1, 2)
        assert (reg.running(), reg.waiting()) == (1, 2)
        with pytest.raises(ExplorerError, match="already training"):
            reg.admit("b", tiny_job(steps=10))
        third.stop()  # leaves the queue
        assert third.state == STOPPED and third.join(1) and second.view().queue_place == 1
        first.stop()  # its process ends: the slot goes to the next in the queue
        assert first.join(30)
        assert second.join(60) and second.state == FINISHED and second.view().step == 10
        assert (reg.running(), reg.waiting()) == (0, 0)
    finally:
        for job in (first, second, third):
            job.stop()
            job.join(30)


def test_the_default_slots_are_the_usable_cores():
    assert JobRegistry().max_running == len(os.sched_getaffinity(0))


SERVER = """
import sys, time
from explorer.jobs import task_job
from explorer.data.tasks import TaskSpec
from explorer.training.train import TrainConfig
job = task_job(TaskSpec("reverse", 2, 4, "abcd"), "tiny", {"embed": 8, "hidden": 16, "attn_dim": 8,
               "bidirectional": False}, TrainConfig(steps=50_000, batch_size=16, eval_every=10, eval_samples=40))
job.start()
while job.view().step < 2:
    time.sleep(0.05)
print(job.pid, flush=True)
time.sleep(600)
"""


def test_no_training_process_outlives_a_server_killed_with_kill_9():
    """The pipe to the server is the job process's lifeline: when the server dies, even by SIGKILL, so does the
    job, and the forkserver that started it."""
    server = subprocess.Popen([sys.executable, "-c", SERVER], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(server.stdout.readline())
        forkserver = [int(p) for p in Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()]
        assert os.getpgid(pid) >= 0 and forkserver
    finally:
        server.kill()
        server.wait()
    wait_until(lambda: not any(Path(f"/proc/{p}").exists() and "zombie" not in _status(p) for p in [pid, *forkserver]),
               timeout=30)


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


def test_reaper_stops_jobs_whose_session_stopped_its_heartbeat():
    reg = JobRegistry(idle_timeout=0.3, reap_interval=0.05)
    job = tiny_job(steps=50_000)
    reg.admit("s", job)
    job.start()
    try:
        for _ in range(10):  # while the page keeps rendering, the job lives
            reg.touch("s")
            time.sleep(0.05)
        assert job.state == RUNNING
        wait_until(lambda: job.state == STOPPED, timeout=20)  # the session went quiet: the reaper ends it
        assert reg.get("s") is None and job.snapshot() is not None  # its model is kept
    finally:
        job.stop()
        job.join(30)


def test_reaper_uses_session_liveness_with_a_grace_period():
    alive = {"s": True}
    reg = JobRegistry(idle_timeout=1e9, gone_grace=10.0, reap_interval=60,
                      session_alive=lambda sid: alive.get(sid))
    job = tiny_job(steps=50_000)
    reg.admit("s", job)
    job.start()
    try:
        t0 = time.monotonic()
        assert reg.reap(t0) == []
        alive["s"] = False
        assert reg.reap(t0 + 1) == []  # a reconnect within the grace period keeps it
        alive["s"] = True
        assert reg.reap(t0 + 20) == []
        alive["s"] = False
        assert reg.reap(t0 + 21) == []
        assert reg.reap(t0 + 32) == ["s"]
        assert job.join(30) and job.state == STOPPED
    finally:
        job.stop()
        job.join(30)


def test_probe_snapshots_are_teacher_forced_on_the_truth_so_frames_keep_their_shape():
    job = tiny_job(steps=20)
    job.start()
    job.join(30)
    frames = job.view().snapshots
    assert len(frames) >= 2
    truth = job.snapshot().ground_truth(frames[0].trace.source_tokens).target
    assert all(f.trace.teacher_forced and f.trace.weights.shape == (len(truth) + 1, len(f.trace.source_tokens))
               for f in frames)
