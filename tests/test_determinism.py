"""The same seed gives the same trained weights and metrics on CPU: through the CLI (two processes,
byte-identical tensors), and while other sessions build and train models at the same moment (the
app's sessions and training jobs are threads sharing torch's global generator).

(Trainer-level reproducibility in one thread is tests/test_train.py's.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from explorer import jobs
from explorer.data.tasks import TaskSpec
from explorer.training.train import TrainConfig, new_task_bundle

REPO = Path(__file__).resolve().parent.parent
TRAIN = ["train", "--task", "copy", "--steps", "30", "--min-len", "1", "--max-len", "5", "--embed", "8",
         "--hidden", "16", "--attn-dim", "8", "--batch-size", "16", "--eval-every", "15", "--eval-samples", "40",
         "--seed", "7", "--threads", "1", "--quiet"]


def train_cli(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "explorer", *TRAIN, "--out", str(out)], cwd=REPO,
                          capture_output=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


def tensors_and_record(path: Path) -> tuple[dict[str, bytes], dict]:
    with safe_open(str(path), "pt") as f:
        tensors = {k: f.get_tensor(k).numpy().tobytes() for k in f.keys()}
        info = json.loads(f.metadata()["explorer"])
    info.pop("saved_at")
    info["training"].pop("seconds")
    return tensors, info


def test_two_cli_runs_with_one_seed_write_byte_identical_weights_and_metrics(tmp_path):
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(train_cli, [tmp_path / "a" / "model", tmp_path / "b" / "model"]))
    for run in runs:
        assert run.returncode == 0, run.stderr.decode()
    (wa, ia), (wb, ib) = (tensors_and_record(tmp_path / n / "model.safetensors") for n in "ab")
    assert wa.keys() == wb.keys() and all(wa[k] == wb[k] for k in wa), "weights differ"
    assert ia == ib, "config, training record or metrics differ"
    sa, sb = (json.loads(r.stdout.decode().strip().splitlines()[-1]) for r in runs)
    for summary in (sa, sb):
        summary.pop("seconds")
        summary.pop("checkpoint")
    assert sa == sb


SPEC = TaskSpec("reverse", 2, 5, "abcd")
MODEL = {"embed": 8, "hidden": 32, "attn_dim": 16}


def test_models_built_at_the_same_moment_from_one_seed_are_identical():
    """Sessions build models in their own threads; the seeded initialisation must not interleave."""
    solo = new_task_bundle(SPEC, "solo", seed=3, **MODEL)[0].model.state_dict()
    barrier = threading.Barrier(4)

    def build(_):
        barrier.wait()
        return new_task_bundle(SPEC, "x", seed=3, **MODEL)[0].model.state_dict()

    for _ in range(3):
        with ThreadPoolExecutor(4) as pool:
            for built in pool.map(build, range(4)):
                assert all(torch.equal(built[k], solo[k]) for k in solo)


def test_training_jobs_running_at_once_with_one_seed_end_identical_to_a_lone_run():
    cfg = TrainConfig(steps=30, batch_size=16, lr=1e-2, eval_every=15, eval_samples=40, seed=5)

    def finished(job: jobs.TrainingJob) -> tuple[dict, list]:
        assert job.join(120) and job.state == jobs.FINISHED
        view = job.view()
        metrics = [(r.step, r.train_loss, r.valid_loss, r.valid_exact, r.valid_token, r.valid_alignment)
                   for r in view.evals]
        return job.snapshot().model.state_dict(), metrics + [(r.step, r.loss) for r in view.steps]

    lone = jobs.task_job(SPEC, "lone", dict(MODEL), cfg)
    lone.start()
    expected_weights, expected_metrics = finished(lone)
    barrier = threading.Barrier(2)

    def build_and_start(_):
        barrier.wait()
        job = jobs.task_job(SPEC, "together", dict(MODEL), cfg)
        job.start()
        return job

    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(build_and_start, range(2)))
    for job in together:
        weights, metrics = finished(job)
        assert all(torch.equal(weights[k], expected_weights[k]) for k in expected_weights)
        assert metrics == expected_metrics


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_training_jobs_with_dropout_running_at_once_end_identical_to_a_lone_run(cell):
    """Dropout draws a mask every step: each job draws from its own generator, not torch's shared one
    (with the shared one, the two jobs below took each other's draws and ended with other weights; an
    LSTM encoder's between-layer masks came from nn.LSTM, i.e. the shared one, until it ran by layer)."""
    cfg = TrainConfig(steps=20, batch_size=16, lr=1e-2, eval_every=10, eval_samples=40, seed=5)
    options = {**MODEL, "dropout": 0.3, "layers": 2, "cell": cell}  # between the layers and before the readout

    def run(_=None):
        job = jobs.task_job(SPEC, "dropout", dict(options), cfg)
        job.start()
        assert job.join(120) and job.state == jobs.FINISHED
        return job.snapshot().model.state_dict()

    expected = run()
    for _ in range(2):
        with ThreadPoolExecutor(2) as pool:
            for weights in pool.map(run, range(2)):
                assert all(torch.equal(weights[k], expected[k]) for k in expected)
