"""Your own data (issue 26): run length from the data, the undertrained verdict, a checkpoint's own example
pairs (Explore's Examples and Random), BLEU and chrF on held-out pairs, and training a saved model further.

Models here are tiny translation models on the pig-latin corpus of tests/pig_latin.py (built in a blink).
"""

from __future__ import annotations

import json
import random
import re

import pytest
import sacrebleu
import torch

from explorer.checkpoints import checkpoint

from explorer import defaults, settings

from explorer.app import views
from explorer.errors import ExplorerError
from explorer.training.evaluation import translate_one
from explorer.jobs.further import further_job
from explorer.training.further_data import vocabulary_coverage
from explorer.training.recipes import pick_examples, translation_run, translation_setup
from explorer.training.evaluation import score_pairs
from explorer.training.train import TrainConfig
from tests import pig_latin

TINY = {"embed": 8, "hidden": 16, "attn_dim": 8}


def tsv(n: int = 300, seed: int = 0) -> bytes:
    return "".join(f"{s}\t{t}\n" for s, t in pig_latin.pairs(n, seed)).encode()


@pytest.fixture(scope="module")
def pig():
    """A tiny untrained pig-latin model, its data and its held-out pairs as text."""
    return translation_setup(tsv(), "pig", TINY, seed=0)


# --- run length and model size from the data ----------------------------------------------------------

def test_the_run_length_scales_with_the_data_within_a_floor_and_a_ceiling():
    assert defaults.translation_steps(285, 64) == defaults.MIN_STEPS  # 12 epochs = 54 steps: the floor
    assert defaults.translation_steps(200_000, 64) == defaults.MAX_STEPS  # 37,500 for 12 epochs: the ceiling
    assert defaults.translation_steps(20_000, 64) == 3750  # 12 epochs
    assert defaults.translation_steps(285, 64, epochs=2) == 9  # asked for explicitly: as asked
    run = translation_run({"batch_size": 64, "lr": 2e-3}, 285)
    assert run["steps"] == defaults.MIN_STEPS and run["stop_patience"] == defaults.STOP_PATIENCE
    assert run["eval_every"] == defaults.MIN_STEPS // defaults.EVALUATIONS_PER_RUN
    recipe = translation_run({"steps": 5000, "batch_size": 64}, 25_000)  # a shipped recipe: runs in full
    assert recipe["steps"] == 5000 and "stop_patience" not in recipe


def test_a_small_file_gets_the_small_model_and_a_large_one_the_large(pig):
    bundle, data, _ = pig
    assert defaults.translation_model(285)["hidden"] == defaults.SMALL_MODEL["hidden"]
    assert defaults.translation_model(50_000)["hidden"] == defaults.LARGE_MODEL["hidden"]
    default_sized, _, _ = translation_setup(tsv(), "pig", {}, seed=0)
    assert default_sized.model.cfg.hidden == defaults.SMALL_MODEL["hidden"]
    assert default_sized.model.cfg.dropout == defaults.SMALL_MODEL["dropout"]


def test_training_stops_on_a_validation_plateau(pig):
    from explorer.training.train import Trainer
    bundle, data, _ = translation_setup(tsv(60), "flat", TINY, seed=0)
    cfg = TrainConfig(steps=400, batch_size=8, lr=1e-5, eval_every=2, stop_patience=2)  # too small an lr to move
    result = Trainer(bundle, data, cfg, device="cpu").run()
    assert result.reason == "plateau" and result.steps < 400
    assert bundle.training["stopped_because"] == "plateau"


# --- the undertrained verdict ---------------------------------------------------------------------------

def ev(step: int, train_exact: float, valid_exact: float, valid_token: float) -> dict:
    return {"step": step, "train_exact": train_exact, "valid_exact": valid_exact, "valid_token": valid_token}


def test_a_run_still_improving_at_its_end_is_undertrained():
    evals = [ev(s, 0.1, 0.0, 0.2 + s / 1000) for s in range(10, 110, 10)]
    message = defaults.undertrained(evals, "steps")
    assert message.startswith("Still improving") and "Continue" in message
    assert defaults.undertrained(evals, "target") is None  # it reached what was asked


def test_validation_far_below_training_is_undertrained_and_a_converged_run_is_not():
    flat = [ev(s, 0.9, 0.3, 0.6) for s in range(10, 110, 10)]
    assert "far below training" in defaults.undertrained(flat, "plateau")
    good = [ev(s, 0.95, 0.9, 0.97) for s in range(10, 110, 10)]
    assert defaults.undertrained(good, "steps") is None
    assert defaults.undertrained([], "steps") is None


# --- a checkpoint's own example pairs --------------------------------------------------------------------

def test_the_checkpoint_keeps_held_out_pairs_and_explore_draws_from_them(pig, tmp_path):
    bundle, _, held_out = pig
    assert 0 < len(bundle.examples) <= defaults.EXAMPLES_KEPT
    assert set(bundle.examples) <= set(held_out)  # validation pairs, never training ones
    loaded = checkpoint.load(checkpoint.save(bundle, tmp_path / "pig"))
    assert loaded.examples == bundle.examples
    own = [s for s, _ in bundle.examples]
    assert views.example_inputs(loaded) == own[:views.EXAMPLES_SHOWN]
    drawn = {views.random_input(loaded, random.Random(n)) for n in range(40)}
    assert drawn <= set(own) and len(drawn) > 1
    assert "I have a red car." not in views.example_inputs(loaded)


def test_without_the_key_explore_falls_back_to_todays_examples(pig, tmp_path):
    bundle, _, _ = pig
    bundle = checkpoint.from_bytes(checkpoint.to_bytes(bundle), "old")
    bundle.examples = ()
    data = checkpoint.to_bytes(bundle)
    assert b'"examples"' not in data[:200_000]
    old = checkpoint.from_bytes(data, "old")
    assert old.examples == ()
    assert set(views.example_inputs(old)) <= set(views.TRANSLATION_EXAMPLES)


def test_a_malformed_examples_key_is_refused_with_a_message(pig):
    bundle, _, _ = pig
    data = checkpoint.to_bytes(bundle)
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8: 8 + n])
    info = json.loads(header["__metadata__"]["explorer"])
    info["examples"] = [["only one side"]]
    header["__metadata__"]["explorer"] = json.dumps(info)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with pytest.raises(ExplorerError, match=r"examples\[0\] must be a \[source, target\] pair"):
        checkpoint.from_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n:], "bad")


def test_pick_examples_prefers_sentences_the_model_knows(pig):
    bundle, _, _ = pig
    pairs = [("zebra xylophone", "x"), *bundle.examples[:3]]
    picked = pick_examples(bundle, pairs, count=3)
    assert picked == tuple(bundle.examples[:3])


# --- BLEU and chrF ---------------------------------------------------------------------------------------

def test_held_out_scores_are_sacrebleus_on_the_models_own_translations(pig):
    bundle, _, held_out = pig
    scores = score_pairs(bundle, held_out)
    hypotheses = [translate_one(bundle, s).text for s, _ in held_out]
    references = [t for _, t in held_out]
    assert scores["n"] == len(held_out)
    assert scores["bleu"] == pytest.approx(round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2))
    assert scores["chrf"] == pytest.approx(round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2))
    perfect = sacrebleu.corpus_bleu(references, [references]).score
    assert perfect == pytest.approx(100.0) and scores["bleu"] < perfect  # an untrained model is not perfect
    assert "tok:13a" in scores["bleu_signature"]
    assert score_pairs(bundle, held_out, limit=3)["n"] == 3


def test_scores_of_no_readable_pair_are_none(pig):
    bundle, _, _ = pig
    assert score_pairs(bundle, [("", "x")]) == {"n": 0}


# --- training a saved model further ----------------------------------------------------------------------

def test_a_saved_translation_model_trains_further_on_a_compatible_file(pig):
    bundle, _, _ = pig
    saved = checkpoint.from_bytes(checkpoint.to_bytes(bundle), "pig")  # as downloaded and uploaded again
    before = {k: v.clone() for k, v in saved.model.state_dict().items()}
    job = further_job(saved, "pig-more", TrainConfig(steps=3, batch_size=8, eval_every=3, eval_samples=8),
                      tsv=tsv(300, seed=1))  # new sentences of the same words
    job.start()
    assert job.join(60) and job.state == "finished", job.view().message
    after = job.snapshot()
    assert after.name == "pig-more" and after.tgt_vocab.tokens == saved.tgt_vocab.tokens
    assert any(not torch.equal(after.model.state_dict()[k], before[k]) for k in before)
    assert all(torch.equal(saved.model.state_dict()[k], before[k]) for k in before), "the original is untouched"


def test_a_file_of_other_words_is_refused_with_the_reason(pig):
    bundle, _, _ = pig
    french = "".join(f"привет {w}\tздравствуй {w}\n" for w in ("дом", "кот", "пёс", "лес") * 10).encode()
    assert all(c < 0.2 for c in vocabulary_coverage(bundle, [("привет дом", "здравствуй дом")]))  # another script
    assert vocabulary_coverage(bundle, pig_latin.pairs(20, seed=3)) == (1.0, 1.0)
    job = further_job(bundle, "pig-more", TrainConfig(steps=3), tsv=french)  # the file is read in its process
    job.start()
    assert job.join(60) and job.state == "failed"
    assert re.match(r"this file's vocabulary does not fit pig-more: it knows \d+% of the source words", job.view().message)
    with pytest.raises(ExplorerError, match="upload a TSV file"):
        further_job(bundle, "pig-more", TrainConfig(steps=3))


# --- examples for a checkpoint saved without them (the shipped translation models) ------------------------

def test_add_examples_gives_an_old_checkpoint_its_own_held_out_pairs_and_keeps_its_weights(pig, tmp_path):
    from scripts.add_examples import main as add_examples
    bundle, _, held_out = pig
    old = checkpoint.from_bytes(checkpoint.to_bytes(bundle), "old")
    old.examples, old.training = (), {"valid_fraction": settings.setting("valid_fraction").toy,
                                      "seed": 0}
    checkpoint.save(old, tmp_path / "old", half=True)
    (tmp_path / "pairs.tsv").write_bytes(tsv())
    assert add_examples(["--checkpoint", str(tmp_path / "old"), "--data", str(tmp_path / "pairs.tsv"),
                         "--out", str(tmp_path / "new")]) == 0
    new, before = checkpoint.load(tmp_path / "new"), checkpoint.load(tmp_path / "old")
    assert new.examples == bundle.examples and set(new.examples) <= set(held_out)
    assert all(torch.equal(new.model.state_dict()[k], v) for k, v in before.model.state_dict().items())
    from safetensors import safe_open
    with safe_open(str(tmp_path / "new.safetensors"), framework="pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}  # written as it was: float16
    assert add_examples(["--checkpoint", str(tmp_path / "old"), "--data", str(tmp_path / "pairs.tsv"),
                         "--out", "pretrained/old"]) == 2  # never into the shipped folder
