"""Batched training, driven through callbacks so a CLI or a web page can watch and stop it: its settings
(`TrainConfig`), the loss, and the loop (`Trainer`). The examples come from explorer/training/data.py, the
validation's scores from explorer/training/evaluation.py.

The trainer knows nothing of pages: it reports a `Progress` per step and an evaluation every
`eval_every` steps (loss, accuracies, a probe input's trace), and checks a stop flag each step.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, NamedTuple, Sequence

import torch
from torch import nn

from explorer.checkpoints.checkpoint import check_savable
from explorer.engine.bundle import ModelBundle
from explorer.engine.devices import pick_device
from explorer.training.distributed import World
from explorer import settings
from explorer.errors import ExplorerError
from explorer.engine.model import ModelConfig
from explorer.engine.seeding import SEED_LOCK, seeded_model
from explorer.training.data import DataSource, Pair
from explorer.training.evaluation import Metrics, Tally, tally
from explorer.training.training_forward import TrainingForward
from explorer.training.optim import Adam
from explorer.data.tasks import Task, TaskSpec, curriculum_share, make_task
from explorer.data.vocab import EOS_ID, PAD_ID, SOS_ID, Vocab


CONFIRM_Z = 1.645  # the confirmation must clear the target by this many standard errors (one-sided 95%)
CONFIRM_PART = 500  # confirmation samples scored at a time (a hopeless confirmation stops after its first part)
TARGET_CHECK_GAP = 3  # fewest steps between evaluations that a training batch's exact match asks for


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; stored in the checkpoint as the training record."""

    steps: int = 3000
    batch_size: int = 128
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # cosine decay from lr to lr * this over `steps`
    plateau_patience: int = 0  # also halve the lr after this many evaluations without a better validation
    #                            token accuracy, down to lr * min_lr_ratio (0: off)
    curriculum: int = 0  # toy sequence tasks: over this many first steps (at most half of `steps`) the longest
    #                      training input grows from min_len to max_len (0: off); validation covers the whole range
    clip: float = 1.0
    teacher_forcing: float = 1.0
    seed: int = 0
    target_accuracy: float | None = None  # stop once validation exact match reaches it
    eval_every: int = 100
    eval_samples: int = 500
    confirm_samples: int = 2000  # toy tasks: a validation reaching the target stops the run only when this many
    #                              other fresh samples reach it too (0: validation alone decides)
    max_seconds: float | None = None
    label_smoothing: float = 0.0  # share of each target's probability spread over the vocabulary (translation)
    stop_patience: int = 0  # stop after this many evaluations without a better validation token accuracy (0: off)
    bf16: bool = False  # the training forward's products in bfloat16 mixed precision (training_forward.py);
    #                     evaluation, checkpoints and everything shown stay float32

    def __post_init__(self) -> None:
        names = [f.name for f in fields(self) if f.name in settings.BY_NAME]  # checked as explorer/settings.py says
        optional = [f.name for f in fields(self) if f.default is None]  # target_accuracy, max_seconds
        checked, problems = settings.problems(self.__dict__, names, optional)
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if not isinstance(self.confirm_samples, int) or self.confirm_samples < 0:
            problems.append("the confirmation set's size cannot be negative")
        if problems:
            raise ExplorerError("; ".join(problems))


def token_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean",
               label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross-entropy over the real tokens of (B, T, V) logits and (B, T) targets (padding ignored), their
    mean or ("sum") their total.

    Under 16 classes (the toy tasks' vocabularies), torch's CPU log-softmax takes a scalar path that is
    8x slower than at 16 (measured: 220 vs 26 µs for 1,024 rows); columns of -inf bring it to 16 and
    change neither the loss nor the gradient (they get probability 0)."""
    V = logits.shape[-1]
    flat = logits.reshape(-1, V)
    if V < 16 and not label_smoothing:  # smoothing would spread probability onto the padding columns
        flat = nn.functional.pad(flat, (0, 16 - V), value=float("-inf"))
    return nn.functional.cross_entropy(flat, targets.reshape(-1), ignore_index=PAD_ID, reduction=reduction,
                                       label_smoothing=label_smoothing)


def collate(pairs: Sequence[Pair], device: torch.device | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad a batch: src (B, S), lengths (B,), decoder inputs <sos> y (B, T) and targets y <eos> (B, T),
    on `device` (default the CPU, where they are built).

    Padded as Python tuples and made into tensors in one call each: a tensor per row cost ~4 ms a
    batch of 128, a tenth of a training step at the default sizes."""
    S = max(len(p.src) for p in pairs)
    T = max(len(p.tgt) for p in pairs) + 1
    src = torch.tensor([tuple(p.src) + (PAD_ID,) * (S - len(p.src)) for p in pairs], dtype=torch.long)
    pads = [(PAD_ID,) * (T - 1 - len(p.tgt)) for p in pairs]
    tgt_in = torch.tensor([(SOS_ID,) + tuple(p.tgt) + pad for p, pad in zip(pairs, pads)], dtype=torch.long)
    tgt_out = torch.tensor([tuple(p.tgt) + (EOS_ID,) + pad for p, pad in zip(pairs, pads)], dtype=torch.long)
    lengths = torch.tensor([len(p.src) for p in pairs], dtype=torch.long)
    if device is not None and device.type != "cpu":
        src, lengths, tgt_in, tgt_out = (t.to(device, non_blocking=True) for t in (src, lengths, tgt_in, tgt_out))
    return src, lengths, tgt_in, tgt_out


class BatchLoss(NamedTuple):
    """A training batch's loss and how many of its rows the model already gets exactly right."""

    loss: torch.Tensor
    exact: int  # rows whose every target token and <eos> is the argmax of its logits


def batch_loss(model: nn.Module, pairs: Sequence[Pair], teacher_forcing: float = 1.0,
               generator: torch.Generator | None = None, device: torch.device | None = None,
               tokens: int | None = None, label_smoothing: float = 0.0) -> BatchLoss:
    """The training loss of a batch: its mean token loss, or (given `tokens`, the token count of a
    whole batch this is part of) its summed token loss divided by that count, so that the parts of a
    split batch add up to the whole batch's mean (distributed.py).

    Its exactly right rows come free with the logits. Given every earlier target token, an argmax equal
    to every target token means greedy decoding follows the same path and outputs exactly the target, so
    under full teacher forcing and without dropout this is the batch's greedy exact match, on examples the
    model has not trained on yet (a toy task draws every batch afresh): the trainer reads it as a hint
    that validation may have reached the target (Trainer._target_in_sight)."""
    src, lengths, tgt_in, tgt_out = collate(pairs, device)
    logits, _ = model(src, lengths, tgt_in, teacher_forcing, generator)
    if tokens is None:
        loss = token_loss(logits, tgt_out, label_smoothing=label_smoothing)
    else:
        loss = token_loss(logits, tgt_out, "sum", label_smoothing) / tokens
    with torch.no_grad():
        exact = int(((logits.argmax(-1) == tgt_out) | (tgt_out == PAD_ID)).all(1).sum())
    return BatchLoss(loss, exact)


@dataclass
class Progress:
    """What the trainer reports: after every step, and with metrics (and a probe trace) after evaluations."""

    step: int
    total_steps: int
    examples: int
    seconds: float  # training time so far (evaluation excluded)
    loss: float
    lr: float
    examples_per_second: float
    metrics: Metrics | None = None
    probe: object | None = None  # what the trainer's probe returned, e.g. the probe input's Trace (evaluations only)


@dataclass
class TrainResult:
    """How a run ended and its record."""

    steps: int
    examples: int
    seconds: float
    reason: str  # "steps", "target", "time", "stopped", "plateau"
    metrics: Metrics
    history: list[dict] = field(default_factory=list)
    processes: int = 1  # ranks that trained it together (explorer/training/distributed.py)


Callback = Callable[[Progress], None]


def confirmation_bar(target: float, n: int) -> float:
    """The exact match a confirmation set of n samples must reach before a stop at `target` is believed: the
    target plus CONFIRM_Z binomial standard errors, so that a model whose true accuracy is below the target
    passes at most ~5% of the time."""
    return min(1.0, target + CONFIRM_Z * math.sqrt(target * (1.0 - target) / max(n, 1)))


Probe = Callable[[ModelBundle, str], Any]
"""What a Trainer calls at each evaluation, with the model in eval mode, on the data's probe input; its result
is Progress.probe (e.g. probes.trace_probe: the input's Trace). The caller picks it: none by default."""


class Trainer:
    """Trains one bundle's model; `run` can be called again to continue (optimizer state kept).

    `device` (default "auto": a CUDA GPU when present, see devices.pick_device) is where `run` trains:
    the model moves there for the run and back to the CPU when it ends, so the bundle the caller
    keeps (pages, traces, checkpoints) is a CPU one; on the CPU nothing moves at all. Given a `world`
    (explorer/training/distributed.py) of several ranks, this is one of them: DistributedDataParallel wraps the
    model, each rank trains on its rows of the same global batch and scores its part of each evaluation.
    """

    def __init__(self, bundle: ModelBundle, data: DataSource, cfg: TrainConfig,
                 on_step: Callback | None = None, on_eval: Callback | None = None,
                 stop: threading.Event | None = None, probe: Probe | None = None,
                 device: str | torch.device | None = "auto", world: World | None = None,
                 keep_best: bool = False) -> None:
        check_savable(bundle)  # before any step: a model its checkpoint would refuse is never trained
        self.bundle, self.data, self.cfg = bundle, data, cfg
        self.on_step, self.on_eval = on_step, on_eval
        self.stop = stop or threading.Event()
        self.keep_best = keep_best  # a stopped run ends on its best scheduled validation's weights (the CLI's Ctrl-C)
        self.probe = probe
        self.world = world if world is not None and world.size > 1 else None
        self.device = self.world.device if self.world is not None else pick_device(device)
        self.model = bundle.model
        # the fast path where it applies, in bfloat16 mixed precision if asked (training_forward.py)
        self.forward_pass = TrainingForward(self.model, bf16=cfg.bf16)
        self._ddp: nn.Module | None = None  # DistributedDataParallel around forward_pass, for a run of several ranks
        self.optimizer = Adam(self.model.parameters(), lr=cfg.lr)  # torch.optim.Adam's update (explorer/training/optim.py)
        self.rng = random.Random(cfg.seed)
        self.generator = torch.Generator().manual_seed(cfg.seed)  # teacher-forcing coins, drawn on the CPU
        # Dropout masks are drawn where the activations are, and a generator draws on its own device only;
        # every rank draws its own (its rows are not the others').
        rank = self.world.rank if self.world is not None else 0
        self.dropout_generator = self.generator if self.device.type == "cpu" and rank == 0 \
            else torch.Generator(self.device).manual_seed(cfg.seed + 1_000_003 * rank)
        self.step = 0
        self.examples = 0
        self.seconds = 0.0
        self.history: list[dict] = []
        self.last_metrics: Metrics | None = None
        self.batch_exact_match = 0.0  # share of the last training batch exactly right (see batch_loss)
        self._lr_scale = 1.0  # halved on each plateau (cfg.plateau_patience)
        self._best_token_accuracy = -1.0  # the best scheduled validation so far (plateau halving and stop)
        self._stale_for_lr = 0  # scheduled evaluations since the best or the last halving (plateau_patience)
        self._evaluations_since_best = 0  # scheduled evaluations since the best (stop_patience)
        self._best_weights: tuple[int, dict[str, torch.Tensor]] | None = None  # (step, weights) at the best
        self._agreed_stop = False  # a run of several ranks: some rank was asked to stop (agreed at each step)
        self._agreed_time_up = False
        self._attempts = 0  # confirmations so far (each scores a set of its own)
        self._refuted_at: int | None = None  # the step of the last confirmation that failed (_confirmed)

    def state(self, data: bool = True) -> dict:
        """Everything `run` needs to go on exactly where it stopped, in another process (load_state): the
        weights, Adam's moments, the step counters, the random generators and the data source's position
        (without `data`, the data source is left out: a run going on from it draws its own order afresh)."""
        state = {"model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
                "adam": {i: dict(v) for i, v in self.optimizer.state.items()}, "cfg": asdict(self.cfg),
                "counters": (self.step, self.examples, self.seconds, self.batch_exact_match, self._lr_scale,
                             self._best_token_accuracy, self._stale_for_lr, self._evaluations_since_best),
                "best_weights": self._best_weights,
                "history": list(self.history), "last_metrics": self.last_metrics, "rng": self.rng.getstate(),
                "generator": self.generator.get_state()}
        if data:
            state["data"] = self.data
        return state

    def load_state(self, state: dict) -> None:
        """Go on from `state` (Trainer.state of a trainer of the same model)."""
        with torch.no_grad():
            self.model.load_state_dict(state["model"])
        self.optimizer.state = {int(i): dict(v) for i, v in state["adam"].items()}
        self.cfg = TrainConfig(**state["cfg"])
        (self.step, self.examples, self.seconds, self.batch_exact_match, self._lr_scale,
         self._best_token_accuracy, self._stale_for_lr, self._evaluations_since_best) = state["counters"]
        self._best_weights = state["best_weights"]
        self.history, self.last_metrics = list(state["history"]), state["last_metrics"]
        self.rng.setstate(state["rng"])
        self.generator.set_state(state["generator"])
        self.data = state.get("data", self.data)

    @property
    def processes(self) -> int:
        """How many ranks train this model together."""
        return self.world.size if self.world is not None else 1

    def set_lr(self, lr: float) -> None:
        """Change the peak learning rate for the next `run` without resetting anything else."""
        self.cfg = TrainConfig(**{**asdict(self.cfg), "lr": lr})
        self._lr_scale = 1.0

    def _lr_at(self, step: int, total: int) -> float:
        progress = min(1.0, step / max(1, total))
        floor = self.cfg.lr * self.cfg.min_lr_ratio
        cosine = floor + 0.5 * (self.cfg.lr - floor) * (1 + math.cos(math.pi * progress))
        return max(floor, cosine * self._lr_scale)

    def _watch_validation(self, metrics: Metrics) -> None:
        """Keep the best scheduled validation token accuracy (token accuracy, not exact match: exact match sits
        at 0 for a while on long inputs), its weights when a plateau may stop the run, and two counts of
        evaluations without a better one: one halves the learning rate (`plateau_patience`, counted again after
        each halving), one stops the run (`stop_patience`). All are in `state`, so a Continue goes on counting."""
        if not (self.cfg.plateau_patience or self.cfg.stop_patience or self.keep_best):
            return
        if metrics.token_accuracy > self._best_token_accuracy:
            self._best_token_accuracy, self._stale_for_lr, self._evaluations_since_best = metrics.token_accuracy, 0, 0
            if self.cfg.stop_patience or self.keep_best:
                self._best_weights = (self.step, {k: v.detach().to("cpu", copy=True)
                                                  for k, v in self.model.state_dict().items()})
            return
        self._evaluations_since_best += 1
        if self.cfg.plateau_patience:
            self._stale_for_lr += 1
            if self._stale_for_lr >= self.cfg.plateau_patience:
                self._lr_scale *= 0.5
                self._stale_for_lr = 0

    def _plateaued(self) -> bool:
        """Whether validation token accuracy has not improved for `stop_patience` scheduled evaluations
        (a fixed file of pairs: once it stops improving, more steps only fit the training pairs)."""
        return bool(self.cfg.stop_patience) and self._evaluations_since_best >= self.cfg.stop_patience

    def _restore_best(self) -> None:
        """A plateau stop keeps the weights of the best validation, not the last ones: the evaluations since
        only fitted the training pairs (a 300-pair run fell from 100% to 93% exact before it stopped). The
        run's step count and history stay what it trained; its final metrics are scored on the restored weights."""
        if self._best_weights is None:
            return
        best_step, weights = self._best_weights
        self.model.load_state_dict(weights)
        self.last_metrics = self._validate()
        self.history[-1]["restored_best_from_step"] = best_step
        self._evaluations_since_best = 0  # the model is the best one again: a Continue starts counting from it

    def _target_in_sight(self) -> bool:
        """Whether to evaluate before the next scheduled evaluation: the last training batch was exactly right
        at least as often as the target asks (batch_loss), so validation may have reached it by now. At most
        every TARGET_CHECK_GAP steps, for a model that hovers at the target. Validation alone decides a stop:
        on reverse 5-15 runs stop at a median step of 301 instead of 325, 5-7% less time (twelve seeds)."""
        target = self.cfg.target_accuracy
        last = self.history[-1]["step"] if self.history else 0
        return target is not None and self.batch_exact_match >= target and self.step - last >= TARGET_CHECK_GAP \
            and not self._confirmation_waits()

    def _confirmation_waits(self) -> bool:
        """Whether a confirmation failed too recently for another: a full one costs about four evaluations, so
        after one that failed the next waits half an evaluation interval (at least TARGET_CHECK_GAP steps).
        Meanwhile an unscheduled evaluation could not stop the run, so none is made."""
        return self._refuted_at is not None and \
            self.step - self._refuted_at < max(TARGET_CHECK_GAP, self.cfg.eval_every // 2)

    def _forward_model(self) -> nn.Module:
        """What the training forward pass goes through: DDP around `forward_pass` in a run of several ranks
        (DDP prepares its gradient reduction in the forward it wraps, and its hooks average the ranks'
        gradients during backward), else `forward_pass` itself. Its parameters are the model's."""
        if self.world is None:
            return self.forward_pass
        if self._ddp is None:
            from torch.nn.parallel import DistributedDataParallel
            ids = [self.device.index] if self.device.type == "cuda" else None
            # The model is built from the same seed on every rank; DDP checks that and broadcasts rank 0's anyway.
            self._ddp = DistributedDataParallel(self.forward_pass, device_ids=ids)
        return self._ddp

    def train_step(self, pairs: Sequence[Pair]) -> float:
        """One optimisation step on a (global) batch; returns its mean token loss. A rank of several trains
        on its rows of it (every rank draws the same batch): rows rank, rank + N, ... of the batch sorted
        longest first, so every rank's part stays longest first and about as long as the others'."""
        # Longest target first: the model then runs each decoder step on a prefix of the batch (views)
        # instead of reordering it; the loss is a mean over tokens, so the order changes nothing else.
        pairs = sorted(pairs, key=lambda p: len(p.tgt), reverse=True)
        rows = len(pairs)
        tokens, scale = None, 1.0
        if self.world is not None:
            # Each rank's summed token loss over the whole batch's token count: the ranks' losses add up to the
            # batch's mean loss, and DDP averages gradients, so each rank's is scaled by the number of ranks.
            tokens = sum(len(p.tgt) + 1 for p in pairs)  # every target token and its <eos>
            pairs = pairs[self.world.rank::self.world.size]
            scale = float(self.world.size)
        model = self._forward_model()
        self.optimizer.zero_grad(set_to_none=True)
        if pairs:
            loss, exact = batch_loss(model, pairs, self.cfg.teacher_forcing, self.generator, self.device, tokens,
                                     self.cfg.label_smoothing)
            (loss * scale if scale != 1.0 else loss).backward()
            value = loss.item()
        else:  # fewer rows than ranks: this rank still takes part in the gradient's all_reduce, with zeros
            value, exact = 0.0, 0
            sum(p.sum() * 0.0 for p in self.model.parameters()).backward()
        if self.world is not None:
            time_up = self.cfg.max_seconds is not None and self.seconds >= self.cfg.max_seconds
            value, exact, stops, times = self.world.sum([value, exact, float(self.stop.is_set()), float(time_up)])
            self._agreed_stop, self._agreed_time_up = stops > 0, times > 0
        self.batch_exact_match = exact / rows
        if self.cfg.clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        self.optimizer.step()
        return value

    def next_batch(self) -> list[Pair]:
        """The next (global) training batch; only this trainer's generator draws them, so every rank draws
        the same ones."""
        return self._draw(self.step)

    def _draw(self, step: int) -> list[Pair]:
        """A batch for 0-based `step`: with a curriculum, inputs no longer than its ramp allows by then (the
        ramp takes at most half the configured steps, so a short run still trains on every length)."""
        share = curriculum_share(step, self.cfg.curriculum, self.cfg.steps)
        return self.data.batch(self.rng, self.cfg.batch_size, share)

    def close(self) -> None:
        """Let go of DDP's hold on the model (its gradient hooks); the model trains alone after this."""
        self._ddp = None
        self.world = None

    def _score(self, pairs: Sequence[Pair]) -> Metrics:
        """evaluate() on `pairs`; in a run of several ranks each scores its part and the counts are summed."""
        return self._tally(pairs).metrics()

    def _tally(self, pairs: Sequence[Pair]) -> Tally:
        if self.world is None:
            return tally(self.model, pairs)
        return tally(self.model, pairs[self.world.share(len(pairs))]).summed(self.world)

    def _validate(self) -> Metrics:
        return self._score(self.data.validation())

    def _confirmed(self, metrics: Metrics) -> bool:
        """Whether validation's reaching the target holds on `confirm_samples` other fresh samples too.

        Why: a run stops the first time validation reaches the target, so the stop picks a moment when the
        validation samples happen to score high; a second, larger set that played no part in picking the moment
        makes the promise hold on samples it never saw (benchmarks/RESULTS.md, "the honest stop"). It must clear
        the target by CONFIRM_Z standard errors (`confirmation_bar`): a set scoring just at the target is as likely
        to come from a model below it as above. It is scored in parts and given up once the parts left could not
        lift it to the bar (the same decision, sooner). After one that failed, the next waits
        (`_confirmation_waits`)."""
        target = self.cfg.target_accuracy
        if target is None or metrics.exact_match < target:
            return False
        if self._confirmation_waits():
            return False
        pairs = self.data.confirmation(self.cfg.confirm_samples, self._attempts) if self.cfg.confirm_samples else []
        if not pairs:
            return True
        self._attempts += 1
        needed = confirmation_bar(target, len(pairs)) * len(pairs)
        counts = Tally()
        for start in range(0, len(pairs), CONFIRM_PART):  # refused as soon as the rest could not lift it to the bar
            part = pairs[start: start + CONFIRM_PART]
            counts = counts + self._tally(part)
            if counts.exact + (len(pairs) - counts.n) < needed:
                break
        self.history[-1]["confirm_exact_match"] = counts.metrics().exact_match
        self.history[-1]["confirm_samples"] = counts.n
        if counts.n < len(pairs) or counts.exact < needed:
            self._refuted_at = self.step
            return False
        return True

    def evaluate_now(self, loss: float) -> Progress:
        """Validation metrics, the probe's result (when the caller gave a probe), and the callback."""
        metrics = self._validate()
        self.last_metrics = metrics
        probe = None
        if self.probe:  # None: no probe (probe=False, as callers passed it before, means the same)
            self.model.eval()
            try:
                probe = self.probe(self.bundle, self.data.probe_text())
            finally:
                self.model.train()
        progress = Progress(self.step, self._total, self.examples, self.seconds, loss, self._lr_at(self.step, self._total),
                            self.examples / self.seconds if self.seconds else 0.0, metrics, probe=probe)
        self.history.append({"step": self.step, "examples": self.examples, "seconds": round(self.seconds, 3),
                             "loss": loss, **{f"valid_{k}": v for k, v in metrics.to_dict().items() if k != "n"}})
        if self.on_eval:
            self.on_eval(progress)
        return progress

    def _stop_asked(self) -> bool:
        """The stop flag; in a run of several ranks, as the ranks agreed at the last step (all stop together)."""
        return self._agreed_stop if self.world is not None else self.stop.is_set()

    def _time_up(self) -> bool:
        if self.world is not None:
            return self._agreed_time_up
        return self.cfg.max_seconds is not None and self.seconds >= self.cfg.max_seconds

    def run(self, steps: int | None = None) -> TrainResult:
        """Train up to `steps` more steps (default the config's), stopping early on target, time or stop flag."""
        steps = self.cfg.steps if steps is None else steps
        self._total = self.step + steps
        with SEED_LOCK:  # not while another thread is initialising a model from its seed
            torch.manual_seed(self.cfg.seed + self.step)  # for anything that still draws from the shared one
        self.model.draw_dropout_from(self.dropout_generator)  # this job's own draws, whatever runs beside it
        on_gpu = self.device.type != "cpu"
        try:
            if on_gpu:  # in place: the optimizer keeps the same parameters (and its state stays on the GPU)
                self.model.to(self.device)
            self.model.train()
            reason, loss = "steps", float("nan")
            end = self.step + steps
            while self.step < end:
                if self._stop_asked():
                    reason = "stopped"
                    break
                for group in self.optimizer.param_groups:
                    group["lr"] = self._lr_at(self.step - (end - steps), steps)
                started = time.perf_counter()
                batch = self.next_batch()
                loss = self.train_step(batch)
                self.seconds += time.perf_counter() - started
                self.step += 1
                self.examples += len(batch)
                if self.on_step:
                    self.on_step(Progress(self.step, self._total, self.examples, self.seconds, loss,
                                          self.optimizer.param_groups[0]["lr"], self.examples / self.seconds))
                scheduled = self.step % self.cfg.eval_every == 0 or self.step == end
                if scheduled or self._target_in_sight():
                    progress = self.evaluate_now(loss)
                    if scheduled:  # the schedule alone sets the learning rate: an extra check changes no step
                        self._watch_validation(progress.metrics)
                    if self._confirmed(progress.metrics):
                        reason = "target"
                        break
                    if scheduled and self._plateaued():
                        reason = "plateau"
                        self._restore_best()
                        break
                if self._time_up():
                    reason = "time"
                    break
            if self.last_metrics is None or self.history[-1]["step"] != self.step:
                self.evaluate_now(loss)
            if reason == "stopped" and self.keep_best and self.last_metrics.token_accuracy < self._best_token_accuracy:
                self._restore_best()
        finally:  # a failed step or callback must not leave a shared model in training mode (dropout on)
            self.model.eval()
            self.model.draw_dropout_from(None)
            if on_gpu:
                self.model.to("cpu")
        self.bundle.training = {**asdict(self.cfg), "steps_done": self.step, "examples": self.examples,
                                "seconds": round(self.seconds, 2), "stopped_because": reason,
                                "processes": self.processes}
        self.bundle.metrics = {"validation": self.last_metrics.to_dict()}
        return TrainResult(self.step, self.examples, self.seconds, reason, self.last_metrics, self.history,
                           self.processes)


def task_config(cfg: TrainConfig, task: Task) -> TrainConfig:
    """`cfg` as it applies to `task`: dates have no input length to grow, so no curriculum (nor one recorded)."""
    return replace(cfg, curriculum=0) if task.is_dates and cfg.curriculum else cfg


def new_task_bundle(spec: TaskSpec, name: str, seed: int = 0, **model_options) -> tuple[ModelBundle, Task]:
    """A freshly initialised model for a toy task (vocabularies from the task's symbols)."""
    task = make_task(spec)
    src_vocab, tgt_vocab = Vocab.build(task.source_symbols()), Vocab.build(task.target_symbols())
    max_src = max(spec.max_len, 32) if spec.name != "dates" else 40
    options = {"max_src_len": max(2 * max_src, 64), "max_tgt_len": max(2 * max_src, 64) + 8, **model_options}
    cfg = ModelConfig(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), **options)
    return ModelBundle(name, seeded_model(cfg, seed), src_vocab, tgt_vocab, task=spec), task
