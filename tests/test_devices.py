"""Training on a GPU when present (explorer/engine/devices.py and how the engine follows the model's device).

The development machines have no GPU, so the CUDA path itself is tested by one test that only runs
where torch sees one. Everything else runs here:

- `pick_device`: auto takes CUDA exactly when torch sees it (torch.cuda.is_available patched),
  EXPLORER_DEVICE sets what auto means, asking for CUDA without one is an ExplorerError.
- Decoding, the trace, the validation loss and a training step put their inputs on the model's
  device. The stand-in for a GPU is torch's "meta" device, which every build has: a GRU model runs
  on it (shapes only), so a spy on the model's entry points sees where the inputs were put.
- A run moves the model to its device and back to the CPU, even when a step fails; a training
  job's published snapshot is moved to the CPU, never the live model.
"""

from __future__ import annotations

import pytest
import torch

from explorer.engine import devices
from explorer.__main__ import main
from explorer.engine.decoding import beam_search, greedy_batch
from explorer.engine.devices import model_device, pick_device
from explorer.errors import ExplorerError
from explorer.jobs import task_job
from explorer.training.validation import teacher_forced_loss
from explorer.engine.model import Seq2Seq
from explorer.data.tasks import TaskSpec
from explorer.engine.trace import Intervention, trace
from explorer.training.data import Pair, TaskData
from explorer.training.evaluation import evaluate
from explorer.training.train import TrainConfig, Trainer, new_task_bundle

SPEC = TaskSpec("copy", 1, 5)
TINY = {"embed": 6, "hidden": 8, "attn_dim": 5, "bidirectional": False}
RUN = TrainConfig(steps=4, batch_size=8, lr=1e-2, eval_every=2, eval_samples=10, seed=1)
META = torch.device("meta")


@pytest.fixture
def no_env(monkeypatch):
    """pick_device as on a machine where nobody set EXPLORER_DEVICE (the suite's conftest does)."""
    monkeypatch.delenv(devices.ENV, raising=False)


def cuda_present(monkeypatch, present: bool, count: int = 1) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: present)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count if present else 0)


# --- pick_device ------------------------------------------------------------------------------------


@pytest.mark.parametrize("requested", ["auto", None, " AUTO "])
def test_auto_takes_cuda_exactly_when_torch_sees_it(monkeypatch, no_env, requested):
    cuda_present(monkeypatch, True)
    assert pick_device(requested) == torch.device("cuda")
    cuda_present(monkeypatch, False)
    assert pick_device(requested) == torch.device("cpu")


def test_the_environment_sets_what_auto_means(monkeypatch):
    cuda_present(monkeypatch, True)
    monkeypatch.setenv(devices.ENV, "cpu")
    assert pick_device("auto") == torch.device("cpu")
    assert pick_device("cuda") == torch.device("cuda"), "an explicit choice wins over the environment"
    monkeypatch.setenv(devices.ENV, "auto")
    assert pick_device() == torch.device("cuda")


def test_explicit_choices(monkeypatch, no_env):
    cuda_present(monkeypatch, True, count=2)
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device(torch.device("cpu")) == torch.device("cpu")
    assert pick_device("cuda") == torch.device("cuda")
    assert pick_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ExplorerError, match="sees only 2 CUDA GPU"):
        pick_device("cuda:2")


def test_asking_for_cuda_without_one_names_the_problem(monkeypatch, no_env):
    cuda_present(monkeypatch, False)
    with pytest.raises(ExplorerError, match=r"device 'cuda': torch .* sees no CUDA GPU on this machine; use auto"):
        pick_device("cuda")
    monkeypatch.setenv(devices.ENV, "cuda")
    with pytest.raises(ExplorerError, match="EXPLORER_DEVICE=cuda: torch .* sees no CUDA GPU"):
        pick_device("auto")


@pytest.mark.parametrize("requested", ["tpu", "banana", "meta", ""])
def test_a_device_that_is_not_cpu_or_cuda_is_refused(no_env, requested):
    with pytest.raises(ExplorerError, match="is not a device to train on: use one of auto, cpu, cuda"):
        pick_device(requested)


def test_model_device_is_where_the_weights_are():
    bundle, _ = new_task_bundle(SPEC, "m", **TINY)
    assert model_device(bundle.model) == torch.device("cpu")
    assert model_device(bundle.model.to(META)) == META
    assert model_device(torch.nn.Module()) == torch.device("cpu"), "no weights: the CPU"


# --- the CLI ------------------------------------------------------------------------------------------

CLI_TRAIN = ["train", "--task", "copy", "--min-len", "1", "--max-len", "4", "--steps", "2", "--batch-size", "8",
             "--embed", "6", "--hidden", "8", "--attn-dim", "4", "--eval-every", "2", "--eval-samples", "8",
             "--threads", "1"]


def test_cli_asked_for_cuda_without_one_exits_2_with_one_line(monkeypatch, capsys, tmp_path, no_env):
    cuda_present(monkeypatch, False)
    assert main([*CLI_TRAIN, "--out", str(tmp_path / "m"), "--device", "cuda"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: device 'cuda': ") and "no CUDA GPU" in err
    assert list(tmp_path.iterdir()) == [], "nothing was written"


def test_cli_names_the_device_it_trains_on(capsys, tmp_path):
    assert main([*CLI_TRAIN, "--out", str(tmp_path / "m"), "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[0] == "training on cpu", "named before the first progress line"
    assert '"device": "cpu"' in out.splitlines()[-1]


def test_cli_refuses_an_unknown_device(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main([*CLI_TRAIN, "--out", str(tmp_path / "m"), "--device", "tpu"])
    assert exc.value.code == 2 and "invalid choice: 'tpu'" in capsys.readouterr().err


# --- the engine follows the model's device -------------------------------------------------------------


class Reached(Exception):
    """Raised by a spy once it has seen the model's inputs: nothing on the meta device has data to read."""


def spy_on_steps(monkeypatch, model: Seq2Seq) -> dict[str, torch.device]:
    """Record the device of every tensor that reaches the first decode_step (ids, state, context, memory,
    the intervention's mask and pin), then run it: a tensor on another device than the weights fails there."""
    seen: dict[str, torch.device] = {}
    real = model.decode_step

    def decode_step(y_prev, state, c_prev, memory, control=None, **kwargs):
        tensors = {"y_prev": y_prev, "state": state, "c_prev": c_prev, "memory.h": memory.h,
                   "memory.mask": memory.mask, "control.mask": getattr(control, "mask", None),
                   "control.pin": getattr(control, "pin", None)}
        seen.update({name: t.device for name, t in tensors.items() if isinstance(t, torch.Tensor)})
        real(y_prev, state, c_prev, memory, control, **kwargs)
        raise Reached
    monkeypatch.setattr(model, "decode_step", decode_step)
    return seen


def spy_on_forward(monkeypatch, model: torch.nn.Module) -> list[torch.device]:
    """Record the device of the batch a training pass (the trainer's `forward_pass`) or a validation-loss
    pass (the model) gets."""
    seen: list[torch.device] = []

    def forward(src, lengths, tgt_in, *args):
        seen.extend(t.device for t in (src, lengths, tgt_in))
        raise Reached
    monkeypatch.setattr(model, "forward", forward)
    return seen


@pytest.fixture
def meta_bundle():
    """A GRU model with dot attention whose weights are on the meta device (a stand-in for a GPU)."""
    bundle, _ = new_task_bundle(SPEC, "meta", **TINY)
    bundle.model.to(META).eval()
    return bundle


def test_greedy_decoding_and_evaluation_put_inputs_on_the_models_device(monkeypatch, meta_bundle):
    for decoding in (lambda m: greedy_batch(m, [[4, 5, 6], [5]]), lambda m: evaluate(m, [Pair((4, 5), (4, 5))]),
                     lambda m: beam_search(m, [4, 5, 6], width=2)):
        seen = spy_on_steps(monkeypatch, meta_bundle.model)
        with pytest.raises(Reached):
            decoding(meta_bundle.model)
        assert seen == dict.fromkeys(["y_prev", "state", "c_prev", "memory.h", "memory.mask"], META)


@pytest.mark.parametrize("intervention, target", [
    (Intervention(), None),
    (Intervention(temperature=2.0, masked=(0,), pins=((0, 1),)), None),
    (Intervention(masked=(1,)), "1 2 3"),
])
def test_the_trace_puts_inputs_and_interventions_on_the_models_device(monkeypatch, meta_bundle, intervention,
                                                                     target):
    seen = spy_on_steps(monkeypatch, meta_bundle.model)
    with pytest.raises(Reached):
        trace(meta_bundle, "1 2 3", intervention, target=target)
    expected = ["y_prev", "state", "c_prev", "memory.h", "memory.mask"]
    expected += ["control.mask"] * bool(intervention.masked) + ["control.pin"] * bool(intervention.pins)
    assert seen == dict.fromkeys(expected, META)


def test_the_validation_loss_puts_its_batch_on_the_models_device(monkeypatch, meta_bundle):
    seen = spy_on_forward(monkeypatch, meta_bundle.model)
    with pytest.raises(Reached):
        teacher_forced_loss(meta_bundle.model, [Pair((4, 5), (4, 5)), Pair((6,), (6,))])
    assert seen == [META] * 3


def test_a_run_trains_on_its_device_and_leaves_the_model_on_the_cpu(monkeypatch):
    """The trainer's device is set to meta after construction (pick_device never returns it); the model's
    `to` is recorded, not run, so the weights stay usable and the move back can be checked."""
    bundle, task = new_task_bundle(SPEC, "moved", seed=RUN.seed, **TINY)
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, RUN.eval_samples, RUN.seed)
    trainer = Trainer(bundle, data, RUN, device="cpu")
    trainer.device = META
    moves: list[torch.device] = []
    monkeypatch.setattr(bundle.model, "to", lambda device: moves.append(torch.device(device)) or bundle.model)
    seen = spy_on_forward(monkeypatch, trainer.forward_pass)
    with pytest.raises(Reached):
        trainer.run()
    assert seen == [META] * 3, "the batch went to the trainer's device"
    assert moves == [META, torch.device("cpu")], "to the device for the run, back to the CPU after a failed step"
    assert not bundle.model.training


def test_on_the_cpu_a_run_moves_nothing_and_returns_a_cpu_bundle(monkeypatch):
    bundle, task = new_task_bundle(SPEC, "cpu", seed=RUN.seed, **TINY)
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, RUN.eval_samples, RUN.seed)
    trainer = Trainer(bundle, data, RUN, device="cpu")
    assert trainer.dropout_generator is trainer.generator, "one generator on the CPU, as before"
    monkeypatch.setattr(bundle.model, "to", lambda *a, **k: pytest.fail("a CPU run must not move the model"))
    result = trainer.run()
    assert result.steps == RUN.steps and result.reason == "steps"
    assert {p.device for p in bundle.model.parameters()} == {torch.device("cpu")}


# --- on a real GPU (skipped where torch sees none, as on the development machines) -----------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_training_on_cuda_end_to_end(monkeypatch, cell):
    def on_cpu(bundle) -> bool:
        return {p.device.type for p in bundle.model.parameters()} == {"cpu"}

    options = {**TINY, "cell": cell, "layers": 2, "dropout": 0.1}
    bundle, task = new_task_bundle(SPEC, "gpu", seed=RUN.seed, **options)
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, RUN.eval_samples, RUN.seed)
    during = []
    trainer = Trainer(bundle, data, RUN, on_step=lambda p: during.append(model_device(bundle.model).type),
                      device="cuda")
    result = trainer.run()  # with the probe trace at each evaluation, on the GPU
    assert result.steps == RUN.steps and set(during) == {"cuda"} and on_cpu(bundle)
    trainer.run(2)  # continuing: back to the GPU, where the optimizer state stayed
    assert trainer.step == RUN.steps + 2 and on_cpu(bundle)
    assert trace(bundle, "1 2 3").steps >= 1

    monkeypatch.setenv(devices.ENV, "cuda")  # what "auto" means for the job process's trainer
    published = []
    job = task_job(SPEC, "gpu-job", options, RUN, publish=published.append)
    job.start()
    assert job.join(120) and job.view().state == "finished", job.view().message
    assert len(published) >= 3 and all(on_cpu(b) for b in published)
