"""Adam, as torch.optim.Adam computes it, without going through torch.optim.

torch.optim imports torch._dynamo when an optimizer is built or first steps (torch._disable_dynamo): with torch
2.13.0, building torch.optim.Adam and its first step take 1.5-2.2 s on these 2-core machines (load 2.7-4),
paid by every `explorer train` run, a sixth of a 10-second training, for a compiler that training never
uses. This is the same update, operation for operation (torch's foreach implementation, without weight
decay or amsgrad); tests/test_optim.py checks it gives torch.optim.Adam's parameters exactly.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import Tensor


class Adam:
    """Adam (Kingma & Ba) with torch's defaults; `param_groups[0]["lr"]` is read at each step, so a
    schedule sets it there as it would on a torch optimizer."""

    def __init__(self, params: Iterable[Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.param_groups: list[dict[str, Any]] = [{"params": self.params, "lr": lr, "betas": betas, "eps": eps}]
        self.state: dict[int, dict[str, Any]] = {}  # by index in params: step, exp_avg, exp_avg_sq

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        index = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not index:
            return
        for i in index:
            if i not in self.state:
                p = self.params[i]
                self.state[i] = {"step": 0, "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
            self.state[i]["step"] += 1
        params = [self.params[i] for i in index]
        grads = [p.grad for p in params]
        exp_avgs = [self.state[i]["exp_avg"] for i in index]
        exp_avg_sqs = [self.state[i]["exp_avg_sq"] for i in index]
        steps = [self.state[i]["step"] for i in index]
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        step_size = [-(lr / (1 - beta1 ** s)) for s in steps]
        correction2_sqrt = [(1 - beta2 ** s) ** 0.5 for s in steps]
        denominators = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denominators, correction2_sqrt)
        torch._foreach_add_(denominators, eps)
        torch._foreach_addcdiv_(params, exp_avgs, denominators, step_size)
