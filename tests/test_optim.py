"""explorer.training.optim.Adam against torch.optim.Adam: the same parameters, and no torch._dynamo import."""

import subprocess
import sys

import torch

from explorer.training.optim import Adam


def _trained(make_optimizer, lr_schedule=(3e-3, 2e-3, 1e-3, 1e-3, 5e-4, 5e-4)) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    frozen = torch.nn.Linear(2, 2)  # has no gradient: skipped, as torch skips it
    optimizer = make_optimizer(list(model.parameters()) + list(frozen.parameters()))
    x = torch.randn(16, 5)
    for i, lr in enumerate(lr_schedule):
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).pow(2).mean() if i != 3 else model[2](torch.randn(16, 7)).sum()  # step 3: layer 0 idle
        loss.backward()
        optimizer.step()
    return [p.detach().clone() for p in [*model.parameters(), *frozen.parameters()]]


def test_adam_gives_torch_adams_parameters_exactly() -> None:
    ours = _trained(lambda params: Adam(params, lr=1.0))
    theirs = _trained(lambda params: torch.optim.Adam(params, lr=1.0, foreach=True))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)


def test_zero_grad_without_set_to_none_keeps_zeroed_tensors() -> None:
    p = torch.nn.Parameter(torch.ones(3))
    optimizer = Adam([p], lr=0.1)
    p.grad = torch.ones(3)
    optimizer.zero_grad(set_to_none=False)
    assert torch.equal(p.grad, torch.zeros(3))
    optimizer.zero_grad()
    assert p.grad is None


def test_training_does_not_import_torch_dynamo() -> None:
    """torch.optim's optimizers import torch._dynamo on their first step: 1.5 s of every training."""
    code = ("import sys, torch\n"
            "from explorer.data.tasks import TaskSpec\n"
            "from explorer.training.recipes import train_task\n"
            "from explorer.training.train import TrainConfig\n"
            "cfg = TrainConfig(steps=3, batch_size=8, eval_every=3, eval_samples=8)\n"
            "bundle, trainer, result = train_task(TaskSpec('reverse', 3, 5), 'r', {'hidden': 8, 'embed': 8}, cfg)\n"
            "assert result.steps == 3\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
