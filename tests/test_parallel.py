"""Two-process training (explorer/parallel.py): the same training as one process, up to float rounding.

A helper can only be forked from a process with one thread; pytest's process may hold others (a job
registry's reaper, servers of earlier tests), so the two-process runs happen in fresh interpreters.
Two processes are a CPU path, so these trainers train on the CPU also where EXPLORER_DEVICE=cuda runs the
suite's other training on a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from explorer.errors import ExplorerError
from explorer.parallel import processes_wanted
from explorer.tasks import TaskSpec
from explorer.train import TaskData, TrainConfig, Trainer, new_task_bundle

REPO = Path(__file__).resolve().parent.parent

SETUP = """
import json, random, sys, torch
torch.set_num_threads(1)
from explorer.tasks import TaskSpec
from explorer.train import Pair, TaskData, TrainConfig, Trainer, new_task_bundle

def trainer(processes, **cfg):
    bundle, task = new_task_bundle(TaskSpec("reverse", 2, 9), "p", seed=4, embed=8, hidden=16, attn_dim=8,
                                   bidirectional=True, dropout=cfg.pop("dropout", 0.0))
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, 40, 4)
    config = TrainConfig(steps=12, batch_size=24, eval_every=6, eval_samples=40, seed=4, **cfg)
    return Trainer(bundle, data, config, probe=False, processes=processes, device="cpu")
"""


def run_script(body: str) -> dict:
    """Run SETUP + body in a fresh single-threaded interpreter; body prints one JSON object."""
    result = subprocess.run([sys.executable, "-c", SETUP + body], cwd=REPO, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_two_processes_train_as_one_does_up_to_rounding_and_repeat_exactly() -> None:
    out = run_script("""
runs = {}
for name, processes in (("one", 1), ("two", 2), ("two again", 2)):
    t = trainer(processes, dropout=0.0)
    result = t.run()
    t.close()
    runs[name] = {"processes": result.processes, "record": t.bundle.training["processes"],
                  "losses": [h["loss"] for h in result.history], "examples": result.examples,
                  "params": [p.detach().flatten().tolist() for p in t.model.parameters()]}
print(json.dumps(runs))
""")
    one, two, again = out["one"], out["two"], out["two again"]
    assert (one["processes"], two["processes"]) == (1, 2)
    assert (one["record"], two["record"]) == (1, 2)
    assert one["examples"] == two["examples"] == 12 * 24
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-4)
    for a, b in zip(one["params"], two["params"]):
        assert b == pytest.approx(a, abs=2e-4)
    assert any(a != b for a, b in zip(one["params"], two["params"])), "the helper did not change the float sums"
    assert again["params"] == two["params"] and again["losses"] == two["losses"]


def test_where_a_forked_helper_cannot_backpropagate_training_goes_on_in_one_process() -> None:
    """Where torch sees a GPU, a process forked after a backward pass cannot backpropagate (torch refuses; seen
    on an H200 machine with `device="cpu"` and a second trainer in one process). The helper tries at its start
    and says so; the trainer then trains alone: the same run as one process, recorded as one, no helper left.
    No GPU here, so the helper's check is made to fail as torch's does there (the fork inherits the patch)."""
    out = run_script("""
import multiprocessing
import explorer.parallel as parallel
one = trainer(1)
alone = one.run()
def refused():
    raise RuntimeError("Unable to handle autograd's threading in combination with fork-based multiprocessing")
parallel._autograd_works = refused
two = trainer(2)
fallback = two.run()
children = multiprocessing.active_children()
two.close()
print(json.dumps({"processes": [alone.processes, fallback.processes], "record": two.bundle.training["processes"],
                  "losses": [[h["loss"] for h in r.history] for r in (alone, fallback)],
                  "params": [[p.detach().flatten().tolist() for p in t.model.parameters()] for t in (one, two)],
                  "children": len(children)}))
""")
    assert out["processes"] == [1, 1] and out["record"] == 1
    assert out["losses"][0] == out["losses"][1] and out["params"][0] == out["params"][1]
    assert out["children"] == 0


def test_a_failure_in_the_helper_is_reported_and_the_trainer_closes() -> None:
    out = run_script("""
from explorer.errors import ExplorerError
t = trainer(2)
vocab = len(t.bundle.src_vocab)
good = Pair((3, 4, 5), (5, 4, 3))
bad = Pair((3, vocab + 50), (4, 3))  # shorter target: sorted second, so it goes to the helper
try:
    t.train_step([good, bad])
    message = None
except ExplorerError as exc:
    message = str(exc)
process = t._helper._process
t.close()
print(json.dumps({"message": message, "alive": process.is_alive()}))
""")
    assert out["message"] is not None and "helper process failed" in out["message"]
    assert "IndexError" in out["message"]
    assert out["alive"] is False


def test_a_reply_left_by_a_failed_step_is_not_taken_for_the_next_steps() -> None:
    out = run_script("""
t = trainer(2)
helper = t._gradient_helper()
first = [((3, 4, 5), (5, 4, 3))]
second = [((6, 7), (7, 6)), ((3,), (3,))]
helper.submit(first, 10)  # as if the trainer's own half had failed: never collected
helper.submit(second, 10)
left_over = helper.collect()
helper.submit(second, 10)
fresh = helper.collect()
t.close()
print(json.dumps({"left_over": left_over, "fresh": fresh}))
""")
    assert out["left_over"] == out["fresh"]


def test_in_two_processes_the_helper_scores_half_of_each_evaluation() -> None:
    out = run_script("""
from explorer.parallel import GradientHelper
from explorer.train import evaluate, tally
asked = []
submit = GradientHelper.submit_evaluation
GradientHelper.submit_evaluation = lambda self, pairs: (asked.append(len(pairs)), submit(self, pairs))[1]
t = trainer(2, dropout=0.0)
result = t.run()  # 12 steps, an evaluation every 6
asked_in_run, evaluations = list(asked), len(result.history)
t.model.train()
split = t._validate()
whole = evaluate(t.model, t.data.validation())
with torch.no_grad():
    t.model.out.bias[5] += 100.0  # in place, in the trainer: every output is now token 5
t._helper.submit_evaluation(t.data.validation())
helper_alone = t._helper.collect_evaluation()
mine_alone = tally(t.model, t.data.validation())
training = t.model.training
t.close()
print(json.dumps({"asked": asked_in_run, "evaluations": evaluations, "split": split.to_dict(),
                  "whole": whole.to_dict(), "training": training, "helper": helper_alone.metrics().to_dict(),
                  "mine": mine_alone.metrics().to_dict()}))
""")
    assert out["evaluations"] == 2 and out["asked"] == [20, 20], "the helper scored half of the 40 validation pairs"
    assert out["split"] == out["whole"], "the halves' counts add up to one process's metrics"
    assert 0 < out["whole"]["token_accuracy"] < 1
    assert out["mine"] != out["whole"] and out["mine"]["exact_match"] == 0
    assert out["helper"] == out["mine"], "the helper scores with the trainer's current parameters"
    assert out["training"] is True


def test_a_failed_evaluation_in_the_helper_is_reported_and_the_next_step_runs() -> None:
    out = run_script("""
from explorer.errors import ExplorerError
t = trainer(2)
t.run(steps=1)
vocab = len(t.bundle.src_vocab)
try:
    t._helper.submit_evaluation([Pair((3, vocab + 50), (4, 3))])
    t._helper.collect_evaluation()
    message = None
except ExplorerError as exc:
    message = str(exc)
t._helper.submit_evaluation([Pair((3, 4), (4, 3))])  # as if the trainer's own half had failed: never collected
loss = t.train_step(t.next_batch())
t.close()
print(json.dumps({"message": message, "loss": loss}))
""")
    assert out["message"] is not None and "IndexError" in out["message"]
    assert out["loss"] > 0


def test_the_helper_ignores_ctrl_c_and_ends_when_closed() -> None:
    out = run_script("""
import os, signal, time
t = trainer(2)
t.run(steps=1)
process = t._helper._process
os.kill(process.pid, signal.SIGINT)
time.sleep(0.3)
alive_after_sigint = process.is_alive()
t.train_step(t.next_batch())  # still computing its half
t.close()
print(json.dumps({"after_sigint": alive_after_sigint, "after_close": process.is_alive(), "helper": t._helper}))
""")
    assert out == {"after_sigint": True, "after_close": False, "helper": None}


def test_beside_other_threads_training_stays_in_one_process() -> None:
    """Forking a process that runs other threads (the app's server) is unsafe: no helper there."""
    bundle, task = new_task_bundle(TaskSpec("copy", 1, 4), "t", seed=0, embed=8, hidden=8, attn_dim=8)
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, 8, 0)
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        trainer = Trainer(bundle, data, TrainConfig(steps=2, batch_size=8, eval_every=2, eval_samples=8),
                          probe=False, processes=2, device="cpu")
        result = trainer.run()
    finally:
        release.set()
        other.join()
    assert result.processes == 1 and trainer._helper is None


def test_processes_wanted() -> None:
    assert processes_wanted(None, cores=1) == 1
    assert processes_wanted(None, cores=2) == 2
    assert processes_wanted(None, cores=16) == 2
    assert processes_wanted(1, cores=16) == 1
    with pytest.raises(ExplorerError, match="1 or 2"):
        processes_wanted(3)


def test_cli_trains_in_the_processes_asked_for(tmp_path) -> None:
    args = ["train", "--task", "copy", "--min-len", "1", "--max-len", "4", "--steps", "4", "--batch-size", "8",
            "--embed", "8", "--hidden", "8", "--attn-dim", "8", "--eval-every", "4", "--eval-samples", "8",
            "--threads", "1", "--quiet", "--device", "cpu"]
    for processes in ("1", "2"):
        result = subprocess.run([sys.executable, "-m", "explorer", *args, "--processes", processes,
                                 "--out", str(tmp_path / processes)], cwd=REPO, capture_output=True, text=True,
                                timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.strip().splitlines()[-1])["processes"] == int(processes)


def test_in_two_processes_a_batchs_exactly_right_rows_add_up_over_both_halves() -> None:
    """The helper counts its half's exactly right rows (train.batch_loss) and the trainer adds them to its own:
    the share is the whole batch's, as one process would count it with the same weights."""
    out = run_script("""
import copy
from explorer.train import batch_loss
t = trainer(2, lr=1e-2)
t.run(150)  # part-trained: some rows right, some wrong
before = copy.deepcopy(t.model)
batch = t.next_batch()
t.train_step(batch)
t.close()
exact = batch_loss(before, batch).exact
print(json.dumps({"two": t.batch_exact_match, "one": exact / len(batch), "exact": exact, "rows": len(batch)}))
""")
    assert 0 < out["exact"] < out["rows"], out
    assert out["two"] == out["one"]
