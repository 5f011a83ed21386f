"""Training (explorer/training/train.py): a few seconds learn `copy`; runs are reproducible, stoppable and
continuable; callbacks see progress; `evaluate` scores outputs the way its docstring says."""

from __future__ import annotations

import copy
import math
import random
import threading
from dataclasses import replace

import pytest
import torch

from explorer.engine.decoding import greedy_batch, strip_output
from explorer.errors import ExplorerError
from explorer.training.evaluation import task_pairs
from explorer.training.recipes import train_task
from explorer.data.tasks import TaskSpec, make_task
from explorer.engine.trace import Trace, trace
from explorer.training import train
from explorer.training.probes import trace_probe
from explorer.training.data import Pair, TaskData
from explorer.training.evaluation import Metrics, Tally, evaluate, tally
from explorer.training.train import (TARGET_CHECK_GAP, Progress, TrainConfig, Trainer, batch_loss, collate, new_task_bundle, token_loss)
from explorer.data.vocab import EOS_ID, PAD_ID, SOS_ID

SMALL_MODEL = {"embed": 8, "hidden": 16, "attn_dim": 8, "bidirectional": False}
SHORT_RUN = TrainConfig(steps=6, batch_size=16, lr=1e-2, eval_every=3, eval_samples=20, seed=5)
SPEC = TaskSpec("copy", 1, 6)


def short_trainer(cfg: TrainConfig = SHORT_RUN, **callbacks) -> Trainer:
    """A fresh tiny copy model and a trainer for it (nothing run yet)."""
    bundle, task = new_task_bundle(SPEC, "short", seed=cfg.seed, **SMALL_MODEL)
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, cfg.seed)
    return Trainer(bundle, data, cfg, **callbacks)


def weights_of(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


# --- it learns -----------------------------------------------------------------------------------


def test_a_few_seconds_of_training_learn_copy(trained_copy):
    result = trained_copy.result
    assert result.reason in ("target", "steps")
    assert trained_copy.wall_seconds < 60
    losses = [row["loss"] for row in result.history]
    chance = math.log(len(trained_copy.bundle.tgt_vocab))  # the loss of a uniform guess
    assert losses[-1] < 0.5 * losses[0] and losses[-1] < 0.05 * chance, "the loss falls far below chance"
    fresh = task_pairs(trained_copy.bundle, samples=300, seed=777, min_len=1, max_len=5)
    metrics = evaluate(trained_copy.bundle.model, fresh)
    assert metrics.n == 300
    assert metrics.exact_match >= 0.9
    assert metrics.token_accuracy >= 0.95
    assert metrics.alignment_accuracy >= 0.9, "copy attends along the diagonal"


def test_the_training_record_is_kept_in_the_bundle(trained_copy):
    bundle, result = trained_copy.bundle, trained_copy.result
    assert bundle.training["steps_done"] == result.steps
    assert bundle.training["stopped_because"] == result.reason
    assert bundle.training["seed"] == trained_copy.config.seed
    assert bundle.metrics == {"validation": result.metrics.to_dict()}


# --- reproducible, stoppable, continuable ------------------------------------------------------------


def test_the_same_seed_gives_identical_weights_and_metrics():
    runs = []
    for _ in range(2):
        trainer = short_trainer()
        result = trainer.run()
        runs.append((weights_of(trainer), result))
    (w1, r1), (w2, r2) = runs
    assert all(torch.equal(w1[k], w2[k]) for k in w1)
    assert r1.metrics == r2.metrics
    drop_time = lambda history: [{k: v for k, v in row.items() if k != "seconds"} for row in history]  # noqa: E731
    assert drop_time(r1.history) == drop_time(r2.history)


def test_another_seed_gives_other_weights():
    a, b = short_trainer(), short_trainer(TrainConfig(**{**SHORT_RUN.__dict__, "seed": 6}))
    a.run(2)
    b.run(2)
    assert not torch.equal(a.model.out.weight, b.model.out.weight)


def test_a_stop_flag_set_before_the_run_trains_nothing():
    stop = threading.Event()
    stop.set()
    trainer = short_trainer(stop=stop)
    before = weights_of(trainer)
    result = trainer.run()
    assert result.reason == "stopped" and result.steps == 0
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())


def test_a_stop_flag_stops_at_once_and_keeps_what_was_learned():
    stop = threading.Event()

    def stop_after_step_2(p: Progress) -> None:
        if p.step == 2:
            stop.set()
    trainer = short_trainer(on_step=stop_after_step_2, stop=stop)
    before = weights_of(trainer)
    result = trainer.run(100)
    assert result.reason == "stopped" and result.steps == 2 == trainer.step
    assert trainer.bundle.training["steps_done"] == 2 and trainer.bundle.training["stopped_because"] == "stopped"
    assert trainer.bundle.model is trainer.model
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items()), "training is kept"
    assert result.history[-1]["step"] == 2, "the stopped model was still evaluated"


def test_running_again_continues_where_training_stopped():
    trainer = short_trainer()
    first = trainer.run(3)
    second = trainer.run(2)
    assert (first.steps, second.steps) == (3, 5)
    assert second.examples == 5 * SHORT_RUN.batch_size
    steps = [row["step"] for row in second.history]
    assert steps == sorted(steps) and steps[-1] == 5
    assert trainer.bundle.training["steps_done"] == 5


def test_reaching_the_target_accuracy_stops_early(trained_copy):
    bundle = copy.deepcopy(trained_copy.bundle)  # already good at copy: the first evaluation hits the target
    cfg = TrainConfig(steps=50, batch_size=16, eval_every=1, eval_samples=50, target_accuracy=0.8, lr=1e-4)
    data = TaskData(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, seed=1)
    result = Trainer(bundle, data, cfg).run()
    assert result.reason == "target" and result.steps == 1
    assert result.metrics.exact_match >= 0.8


class _NeverConfirmed(TaskData):
    """Confirmation pairs whose targets have one token too many: no output is ever exactly right on them."""

    def confirmation(self, n: int, attempt: int = 0) -> list[Pair]:
        return [Pair(p.src, p.tgt + p.tgt[:1], p.alignment) for p in super().confirmation(n, attempt)]


def test_a_stop_at_the_target_waits_until_other_fresh_samples_confirm_it(trained_copy):
    """Validation alone picks the stop's moment, so it is optimistic: the stop waits for a second, larger set."""
    cfg = TrainConfig(steps=4, batch_size=16, eval_every=1, eval_samples=50, confirm_samples=300,
                      target_accuracy=0.8, lr=1e-4)

    def run(data_class, config):
        bundle = copy.deepcopy(trained_copy.bundle)  # already good at copy: validation reaches the target at once
        return Trainer(bundle, data_class(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, 50, 1), config).run()

    confirmed = run(TaskData, cfg)
    assert confirmed.reason == "target" and confirmed.steps == 1
    assert confirmed.history[0]["confirm_exact_match"] >= 0.8
    refused = run(_NeverConfirmed, cfg)
    assert refused.reason == "steps" and refused.steps == 4
    assert all(row["valid_exact_match"] >= 0.8 for row in refused.history)
    confirmations = [(row["step"], row["confirm_exact_match"]) for row in refused.history if "confirm_exact_match" in row]
    assert confirmations == [(1, 0.0), (1 + TARGET_CHECK_GAP, 0.0)], "after a refusal the next waits a few steps"
    unconfirmed = run(_NeverConfirmed, replace(cfg, confirm_samples=0))
    assert unconfirmed.reason == "target" and "confirm_exact_match" not in unconfirmed.history[0]


class _MostlyConfirmed(TaskData):
    """Confirmation pairs of which every sixth has one token too many: at most 5/6 of them can be exactly right."""

    def confirmation(self, n: int, attempt: int = 0) -> list[Pair]:
        pairs = super().confirmation(n, attempt)
        return [Pair(p.src, p.tgt + p.tgt[:1], p.alignment) if i % 6 == 0 else p for i, p in enumerate(pairs)]


def test_the_confirmation_must_clear_the_target_by_its_sampling_error(trained_copy):
    """A confirmation at 83% for a target of 80% on 300 samples is within 1.645 standard errors (the bar is
    83.8%): a model truly below the target scores that often enough, so the stop waits."""
    assert train.confirmation_bar(0.8, 300) == pytest.approx(0.8 + 1.645 * math.sqrt(0.16 / 300))
    assert train.confirmation_bar(0.99, 2000) == pytest.approx(0.99366, abs=1e-5)
    assert train.confirmation_bar(1.0, 2000) == 1.0
    cfg = TrainConfig(steps=4, batch_size=16, eval_every=1, eval_samples=50, confirm_samples=300,
                      target_accuracy=0.8, lr=1e-4)
    bundle = copy.deepcopy(trained_copy.bundle)
    result = Trainer(bundle, _MostlyConfirmed(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, 50, 1), cfg).run()
    scores = [row["confirm_exact_match"] for row in result.history if "confirm_exact_match" in row]
    assert scores and all(0.8 <= x < train.confirmation_bar(0.8, 300) for x in scores), scores
    assert result.reason == "steps"


def test_every_confirmation_scores_a_set_of_its_own(trained_copy):
    """A set that refused a stop is not asked again (a model would pass it by chance sooner or later)."""
    bundle = trained_copy.bundle
    data = TaskData(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, 50, 1)
    first, again, second = data.confirmation(100, 0), data.confirmation(100, 0), data.confirmation(100, 1)
    assert first == again and first != second
    seen = []

    class Recording(TaskData):
        def confirmation(self, n: int, attempt: int = 0) -> list[Pair]:
            seen.append(attempt)
            return [Pair(p.src, p.tgt + p.tgt[:1], p.alignment) for p in super().confirmation(n, attempt)]

    cfg = TrainConfig(steps=4, batch_size=16, eval_every=1, eval_samples=50, confirm_samples=300,
                      target_accuracy=0.8, lr=1e-4)
    model = copy.deepcopy(bundle)
    Trainer(model, Recording(model.task_obj, model.src_vocab, model.tgt_vocab, 50, 1), cfg).run()
    assert seen == [0, 1]


def test_a_hopeless_confirmation_stops_scoring_after_its_first_part(trained_copy):
    """Scored in parts of CONFIRM_PART: with none right in the first 500 of 1,200, the other 700 cannot reach
    the bar, so they are not decoded (the decision is the one scoring them all would give)."""
    cfg = TrainConfig(steps=1, batch_size=16, eval_every=1, eval_samples=50, confirm_samples=1200,
                      target_accuracy=0.8, lr=1e-4)
    bundle = copy.deepcopy(trained_copy.bundle)
    result = Trainer(bundle, _NeverConfirmed(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, 50, 1), cfg).run()
    row = result.history[0]
    assert result.reason == "steps"
    assert (row["confirm_samples"], row["confirm_exact_match"]) == (train.CONFIRM_PART, 0.0)


def test_a_batchs_exactly_right_rows_are_its_greedy_exact_match(trained_copy):
    """With every earlier token given, an argmax equal to every target token is what greedy decoding outputs:
    the count batch_loss returns with the loss is the batch's greedy exact match."""
    model = trained_copy.bundle.model  # no dropout
    pairs = task_pairs(trained_copy.bundle, samples=120, seed=11, min_len=1, max_len=9)  # trained on 1-6 only
    loss, exact = batch_loss(model, pairs)
    assert loss.requires_grad
    greedy = evaluate(model, pairs)
    assert 0 < exact < len(pairs), "a mix of right and wrong rows, or the comparison proves little"
    assert exact == round(greedy.exact_match * len(pairs))


def test_a_batch_exactly_right_as_often_as_the_target_asks_brings_the_next_evaluation_forward(trained_copy):
    """A model already good at copy: its first training batches are exactly right, so validation runs at the
    third step (TARGET_CHECK_GAP) instead of the scheduled 50th, and the run stops there on target."""
    bundle = copy.deepcopy(trained_copy.bundle)
    cfg = TrainConfig(steps=100, batch_size=32, eval_every=50, eval_samples=100, target_accuracy=0.8, lr=1e-4)
    data = TaskData(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, seed=1)
    trainer = Trainer(bundle, data, cfg)
    result = trainer.run()
    assert trainer.batch_exact_match >= 0.8
    assert result.reason == "target" and result.steps == TARGET_CHECK_GAP
    assert [row["step"] for row in result.history] == [TARGET_CHECK_GAP]
    untargeted = Trainer(copy.deepcopy(trained_copy.bundle), data, replace(cfg, target_accuracy=None)).run(10)
    assert [row["step"] for row in untargeted.history] == [10], "no target: the schedule alone"


def test_extra_evaluations_leave_the_learning_rate_to_the_schedule(trained_copy):
    """Evaluations a good batch brings forward do not count towards a plateau: a run with them trains
    step for step as a run without them. Here validation never improves and never reaches the target, so
    each counted evaluation would halve the rate (patience 1)."""
    cfg = TrainConfig(steps=12, batch_size=32, eval_every=1000, eval_samples=50, target_accuracy=0.8, lr=1e-3,
                      plateau_patience=1)
    runs = []
    for target in (0.8, None):
        bundle = copy.deepcopy(trained_copy.bundle)
        data = TaskData(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, seed=1)
        trainer = Trainer(bundle, data, replace(cfg, target_accuracy=target))
        trainer._validate = lambda: Metrics(n=50, exact_match=0.5, token_accuracy=0.5)
        result = trainer.run()
        runs.append((weights_of(trainer), [row["step"] for row in result.history], trainer._lr_scale))
    (early_weights, early_steps, early_scale), (plain_weights, plain_steps, plain_scale) = runs
    assert early_steps == [3, 6, 9, 12] and plain_steps == [12]
    assert early_scale == plain_scale == 1.0
    assert all(torch.equal(early_weights[k], plain_weights[k]) for k in plain_weights)


def test_a_time_limit_stops_the_run():
    trainer = short_trainer(TrainConfig(**{**SHORT_RUN.__dict__, "max_seconds": 0.0, "steps": 100}))
    result = trainer.run()
    assert result.reason == "time" and result.steps == 1


def test_a_run_that_fails_leaves_the_model_in_eval_mode():
    def broken(progress: Progress) -> None:
        raise RuntimeError("a callback failed")
    trainer = short_trainer(on_step=broken)
    with pytest.raises(RuntimeError, match="callback failed"):
        trainer.run()
    assert not trainer.model.training  # a shared model left in training mode would trace with dropout on


# --- callbacks -------------------------------------------------------------------------------------------


def test_callbacks_receive_progress_metrics_and_a_probe_trace():
    steps, evals = [], []
    trainer = short_trainer(on_step=steps.append, on_eval=evals.append, probe=trace_probe)
    trainer.run()
    assert [p.step for p in steps] == [1, 2, 3, 4, 5, 6]
    assert all(p.total_steps == 6 and math.isfinite(p.loss) and p.lr > 0 and p.metrics is None for p in steps)
    assert [p.examples for p in steps] == [16 * i for i in range(1, 7)]
    assert [p.step for p in evals] == [3, 6]
    for p in evals:
        assert 0 <= p.metrics.exact_match <= 1 and 0 <= p.metrics.token_accuracy <= 1
        assert p.metrics.n == SHORT_RUN.eval_samples
        assert isinstance(p.probe, Trace)
        assert "".join(p.probe.source_tokens) == trainer.data.probe_text()
        assert p.probe.weights.shape == (p.probe.steps, len(p.probe.source_tokens))


def test_the_learning_rate_decays_over_a_run():
    lrs = []
    trainer = short_trainer(on_step=lambda p: lrs.append(p.lr))
    trainer.run()
    assert lrs[0] == pytest.approx(SHORT_RUN.lr) and lrs == sorted(lrs, reverse=True)
    assert lrs[-1] >= SHORT_RUN.lr * SHORT_RUN.min_lr_ratio


# --- evaluate() and collate() on hand-made cases ------------------------------------------------------------


def ids(bundle, text: str) -> tuple[int, ...]:
    return tuple(bundle.src_vocab.encode(tuple(text)))


def test_evaluate_scores_hand_made_cases(trained_copy):
    bundle = trained_copy.bundle
    for text in ("123", "4567"):
        assert strip_output(greedy_batch(bundle.model, [ids(bundle, text)]).ids[0].tolist()) == list(ids(bundle, text))

    def score(*pairs):
        return evaluate(bundle.model, [Pair(ids(bundle, s), ids(bundle, t)) for s, t in pairs])

    # the model outputs "1 2 3 <eos>" for "123"
    right = score(("123", "123"))
    assert (right.n, right.exact_match, right.token_accuracy, right.alignment_accuracy) == (1, 1.0, 1.0, None)
    one_wrong = score(("123", "124"))  # 1 2 3 <eos> against 1 2 4 <eos>: 3 of 4 tokens
    assert (one_wrong.exact_match, one_wrong.token_accuracy) == (0.0, 0.75)
    too_long = score(("123", "12"))  # against 1 2 <eos>: the output's 3 is where <eos> should be
    assert (too_long.exact_match, too_long.token_accuracy) == (0.0, 2 / 3)
    too_short = score(("123", "1234"))  # against 1 2 3 4 <eos>: 3 of 5
    assert (too_short.exact_match, too_short.token_accuracy) == (0.0, 3 / 5)
    mixed = score(("123", "123"), ("4567", "4567"), ("123", "124"))
    assert mixed.exact_match == pytest.approx(2 / 3)
    assert mixed.token_accuracy == pytest.approx((4 + 5 + 3) / (4 + 5 + 4)), "pooled over tokens, not averaged"


def test_evaluate_scores_alignment_as_often_as_attention_hits_the_truth(trained_copy):
    bundle = trained_copy.bundle
    argmax = trace(bundle, "1234").weights.argmax(-1)[:4].tolist()  # where each output step looks
    diagonal = tuple(frozenset({i}) for i in range(4))
    anti = tuple(frozenset({3 - i}) for i in range(4))
    expected_diagonal = sum(argmax[t] == t for t in range(4)) / 4
    expected_anti = sum(argmax[t] == 3 - t for t in range(4)) / 4
    src, tgt = ids(bundle, "1234"), ids(bundle, "1234")
    assert evaluate(bundle.model, [Pair(src, tgt, diagonal)]).alignment_accuracy == expected_diagonal == 1.0
    assert evaluate(bundle.model, [Pair(src, tgt, anti)]).alignment_accuracy == expected_anti
    no_truth = tuple(frozenset() for _ in range(4))  # steps without a true position are not counted
    assert evaluate(bundle.model, [Pair(src, tgt, no_truth)]).alignment_accuracy is None


def test_alignment_of_a_padded_batch_counts_as_each_input_alone(trained_copy):
    """tally takes each step's attention argmax over whole padded rows at once: padding has weight 0, so
    every input scores as its own trace does (against the anti-diagonal, so hits and misses both occur)."""
    from explorer.data.tasks import alignment_hits
    bundle = trained_copy.bundle
    texts = ["1234", "98", "5551234", "7", "31415"]
    pairs = [Pair(ids(bundle, t), ids(bundle, t), tuple(frozenset({len(t) - 1 - i}) for i in range(len(t))))
             for t in texts]
    together = tally(bundle.model, pairs)
    alone = [alignment_hits(trace(bundle, t).weights, p.alignment) for t, p in zip(texts, pairs)]
    assert together.alignment_hits == sum(hits for hits, _ in alone)
    assert together.alignment_counted == sum(counted for _, counted in alone) == sum(len(t) for t in texts)
    assert 0 < together.alignment_hits < together.alignment_counted


def test_evaluate_keeps_the_models_mode_and_handles_no_pairs(trained_copy):
    model = copy.deepcopy(trained_copy.bundle.model).train()
    assert evaluate(model, []).to_dict() == {"n": 0, "exact_match": 0.0, "token_accuracy": 0.0,
                                            "alignment_accuracy": None}
    evaluate(model, [Pair((4, 5), (4, 5))])
    assert model.training


def test_tallies_of_parts_add_up_to_the_whole_sets_metrics(trained_copy):
    """What lets ranks score parts of a validation set (explorer/training/distributed.py)."""
    bundle = trained_copy.bundle
    pairs = task_pairs(bundle, samples=60, seed=31, min_len=1, max_len=7)
    pairs = [Pair(p.src, p.tgt[:-1] if i % 4 == 0 else p.tgt, p.alignment) for i, p in enumerate(pairs)]  # some wrong
    whole = evaluate(bundle.model, pairs)
    assert 0 < whole.exact_match < 1 and whole.alignment_accuracy is not None
    parts = tally(bundle.model, pairs[:25]) + tally(bundle.model, pairs[25:])
    assert parts == tally(bundle.model, pairs) and parts.metrics() == whole
    assert parts.n == 60 and parts.tokens_total == sum(len(p.tgt) + 1 for p in pairs)
    assert Tally() + parts == parts and Tally().metrics() == evaluate(bundle.model, [])


def test_collate_pads_sources_and_shifts_targets():
    src, lengths, tgt_in, tgt_out = collate([Pair((4, 5, 6), (7, 8)), Pair((9,), (10, 11, 12))])
    assert src.tolist() == [[4, 5, 6], [9, PAD_ID, PAD_ID]] and lengths.tolist() == [3, 1]
    assert tgt_in.tolist() == [[SOS_ID, 7, 8, PAD_ID], [SOS_ID, 10, 11, 12]]
    assert tgt_out.tolist() == [[7, 8, EOS_ID, PAD_ID], [10, 11, 12, EOS_ID]]


def test_validation_data_is_fixed_by_the_seed_and_batches_are_fresh():
    bundle, task = new_task_bundle(SPEC, "data")
    a = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, 30, seed=1)
    b = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, 30, seed=1)
    assert a.validation() == b.validation()
    rng = random.Random(0)
    assert a.batch(rng, 8) != a.batch(rng, 8)
    assert all(1 <= len(p.src) <= 6 and p.src == p.tgt for p in a.batch(rng, 50))


@pytest.mark.parametrize("options, message", [
    ({"steps": 0}, "steps must be at least 1, got 0"),
    ({"batch_size": 0}, "batch_size must be between 1 and 4,096, got 0"),
    ({"lr": 0}, r"lr must be in \(0, 1\], got 0"),
    ({"teacher_forcing": 1.5}, r"teacher_forcing must be in \[0, 1\], got 1.5"),
    ({"target_accuracy": 0}, r"target_accuracy must be in \(0, 1\], got 0"),
    ({"eval_every": 0}, "eval_every must be at least 1, got 0"),
    ({"curriculum": -1}, "curriculum must be at least 0, got -1"),
    ({"steps": None}, "steps must be a whole number, got None"),
])
def test_train_config_rejects_impossible_settings(options, message):
    with pytest.raises(ExplorerError, match=message):
        TrainConfig(**options)


class _Recorded(TaskData):
    """TaskData that notes the share of the length range and the longest source of each batch drawn."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.drawn: list[tuple[float, int]] = []

    def batch(self, rng: random.Random, n: int, share: float = 1.0) -> list[Pair]:
        pairs = super().batch(rng, n, share)
        self.drawn.append((share, max(len(p.src) for p in pairs)))
        return pairs


def test_a_curriculum_grows_the_longest_input_over_its_steps_then_draws_every_length():
    """Step k of a 4-step curriculum draws lengths up to min_len + (k+1)/4 of the range. The ramp takes at
    most half the run."""
    spec = TaskSpec("reverse", 2, 10)
    cfg = TrainConfig(steps=10, batch_size=64, eval_every=10, eval_samples=60, seed=3, curriculum=4)
    bundle, task = new_task_bundle(spec, "c", seed=3, **SMALL_MODEL)
    data = _Recorded(task, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, cfg.seed)
    trainer = Trainer(bundle, data, cfg)
    trainer.run()
    shares = [share for share, _ in data.drawn]
    assert shares[:10] == [0.25, 0.5, 0.75] + [1.0] * 7
    assert [longest for _, longest in data.drawn[:3]] == [4, 6, 8]  # 64 draws reach the top of each range
    assert max(longest for _, longest in data.drawn[3:10]) == 10
    assert all(len(p.src) in range(2, 11) for p in data.validation()) and \
        max(len(p.src) for p in data.validation()) == 10  # validation always spans the whole range
    short = Trainer(bundle, _Recorded(task, bundle.src_vocab, bundle.tgt_vocab, 10, 3),
                    TrainConfig(steps=4, batch_size=8, eval_every=4, eval_samples=10, curriculum=100))
    short.run()
    assert [share for share, _ in short.data.drawn][:4] == [0.5, 1.0, 1.0, 1.0]


def test_dates_have_no_length_to_grow_so_train_without_a_curriculum():
    cfg = TrainConfig(steps=4, batch_size=8, eval_every=4, eval_samples=10, curriculum=2)
    dates, _, _ = train_task(TaskSpec("dates"), "d", dict(SMALL_MODEL), cfg)
    digits, _, _ = train_task(SPEC, "c", dict(SMALL_MODEL), cfg)
    assert dates.training["curriculum"] == 0 and digits.training["curriculum"] == 2


def test_without_a_curriculum_every_batch_draws_the_whole_range():
    trainer = short_trainer()
    recorded = _Recorded(trainer.data.task, trainer.bundle.src_vocab, trainer.bundle.tgt_vocab, 20, 5)
    trainer.data = recorded
    trainer.run()
    assert {share for share, _ in recorded.drawn} == {1.0}


def test_train_task_builds_trains_and_reports():
    evals = []
    bundle, trainer, result = train_task(SPEC, "mini", dict(SMALL_MODEL), SHORT_RUN, on_eval=evals.append)
    assert bundle.task == SPEC and bundle.name == "mini" and trainer.bundle is bundle
    assert result.steps == SHORT_RUN.steps and result.reason == "steps"
    assert make_task(SPEC).max_source_len <= bundle.model.cfg.max_src_len
    # the CLI shows no probe trace, so by default none is made at each evaluation (0.1 s of a 5-15 run)
    assert [p.step for p in evals] == [3, 6] and all(p.probe is None for p in evals)


def test_train_task_traces_the_probe_when_asked():
    evals = []
    train_task(SPEC, "mini", dict(SMALL_MODEL), SHORT_RUN, on_eval=evals.append, probe=True)
    assert len(evals) == 2 and all(isinstance(p.probe, Trace) for p in evals)


def test_attention_focus_of_an_aligning_model_and_of_one_without_attention(trained_copy, make_random_bundle):
    from explorer.training.evaluation import attention_focus
    texts = ["31415", "271828", "1234", "99887", "6053"]
    focus = attention_focus(trained_copy.bundle, texts)
    assert focus["steps"] == sum(len(t) for t in texts)  # one per output token before <eos>
    # copy attends along the diagonal: the last token only at the last step of each input (5 of 24)
    assert focus["argmax_on_last"] <= 0.3 and focus["mean_peak"] > 0.5
    with pytest.raises(ExplorerError, match="no attention"):
        attention_focus(make_random_bundle(attention="none"), texts)


@pytest.mark.parametrize("classes", [5, 14, 16, 40])
def test_token_loss_is_cross_entropy_over_real_tokens_with_its_gradient(classes):
    """token_loss pads small vocabularies with -inf columns (a faster kernel): same value, same gradient."""
    torch.manual_seed(classes)
    logits = torch.randn(3, 4, classes, requires_grad=True)
    targets = torch.randint(4, classes, (3, 4))
    targets[0, 2:] = PAD_ID
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, classes), targets.reshape(-1),
                                                 ignore_index=PAD_ID)
    (grad_expected,) = torch.autograd.grad(expected, logits)
    loss = token_loss(logits, targets)
    (grad,) = torch.autograd.grad(loss, logits)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(grad, grad_expected)
    assert torch.isfinite(grad).all() and grad[0, 2:].abs().sum() == 0
    total = torch.nn.functional.cross_entropy(logits.reshape(-1, classes), targets.reshape(-1),
                                              ignore_index=PAD_ID, reduction="sum")
    torch.testing.assert_close(token_loss(logits, targets, reduction="sum"), total)


def test_a_plateau_stop_keeps_the_best_validations_weights(trained_copy):
    """Validation token accuracy scripted to peak at step 2 and fall after: the run stops on the plateau at
    step 4 and its model is the one validated at step 2 (it had kept training the weights to step 4)."""
    bundle = copy.deepcopy(trained_copy.bundle)
    cfg = TrainConfig(steps=10, batch_size=16, eval_every=1, eval_samples=50, stop_patience=2, lr=1e-2)
    trainer = Trainer(bundle, TaskData(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, 50, 1), cfg)
    scripted = iter([0.5, 0.9, 0.8, 0.7])
    seen: list[tuple[int, dict[str, torch.Tensor]]] = []  # (step, weights) at each validation, in order

    def validate() -> Metrics:
        seen.append((trainer.step, {k: v.clone() for k, v in trainer.model.state_dict().items()}))
        return Metrics(50, 0.0, next(scripted, 0.95))

    trainer._validate = validate
    result = trainer.run()
    assert result.reason == "plateau" and result.steps == 4
    assert result.history[-1]["restored_best_from_step"] == 2
    assert result.metrics.token_accuracy == 0.95  # scored again, on the restored weights
    assert [step for step, _ in seen] == [1, 2, 3, 4, 4]  # the last: the restored weights scored again
    weights, best, trained = trainer.model.state_dict(), seen[1][1], seen[3][1]
    assert all(torch.equal(weights[k], best[k]) for k in weights)
    assert not all(torch.equal(trained[k], best[k]) for k in weights)  # step 4 had moved on


def test_a_continue_goes_on_counting_towards_the_plateau_stop(trained_copy):
    """Patience 3, validation flat after the first evaluation: a run of 3 steps ends with 2 evaluations
    without a better one; continued from its state (as the Train page's Continue does, in a new trainer),
    it stops at the next one (patience - 2 more), not after 3 more. Both counters and the best are in the
    state; the restored weights are the best's from the first run."""
    bundle = copy.deepcopy(trained_copy.bundle)
    cfg = TrainConfig(steps=3, batch_size=16, eval_every=1, eval_samples=50, stop_patience=3, plateau_patience=2,
                      lr=1e-2)

    def trainer_for(b) -> Trainer:
        trainer = Trainer(b, TaskData(b.task_obj, b.src_vocab, b.tgt_vocab, 50, 1), cfg)
        trainer._validate = lambda: Metrics(50, 0.0, 0.5)
        return trainer

    first = trainer_for(bundle)
    assert first.run().reason == "steps"
    state = first.state()
    later = trainer_for(copy.deepcopy(bundle))
    later.load_state(state)
    result = later.run(10)
    assert (result.reason, result.steps) == ("plateau", 4)
    assert result.history[-1]["restored_best_from_step"] == 1
    best = state["best_weights"]
    assert state["counters"][-3:] == (0.5, 0, 2) and best[0] == 1  # halved once at step 3; 2 since the best
    weights = later.model.state_dict()
    assert all(torch.equal(weights[k], best[1][k]) for k in weights)


def test_while_a_refused_confirmation_waits_no_unscheduled_evaluation_runs(trained_copy):
    """An evaluation brought forward could not stop the run while the next confirmation must wait (half an
    evaluation interval after a refusal), so none runs then: validation at step 3, the next try at 3 + 25."""
    bundle = copy.deepcopy(trained_copy.bundle)
    cfg = TrainConfig(steps=40, batch_size=32, eval_every=50, eval_samples=100, confirm_samples=300,
                      target_accuracy=0.8, lr=1e-4)
    data = _NeverConfirmed(bundle.task_obj, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, 1)
    trainer = Trainer(bundle, data, cfg)
    result = trainer.run()
    assert trainer.batch_exact_match >= 0.8 and result.reason == "steps"
    wait = cfg.eval_every // 2
    assert [row["step"] for row in result.history] == [TARGET_CHECK_GAP, TARGET_CHECK_GAP + wait, 40]
    assert [row["step"] for row in result.history if "confirm_exact_match" in row] == \
        [TARGET_CHECK_GAP, TARGET_CHECK_GAP + wait]
