"""Your own data without surprises (issue 43): preparation bounded before any tokenizer is trained, and every
skipped or left-out line said the same way in the CLI and the app.

Files here are the pig-latin corpus of tests/pig_latin.py with bad lines mixed in; models are tiny and train a
few steps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from explorer.__main__ import main
from explorer.checkpoints import checkpoint
from explorer.data import subwords
from explorer.training.recipes import MAX_PIECE_CHARS, may_fit, translation_setup
from tests import pig_latin

REPO = Path(__file__).resolve().parent.parent
TINY = {"embed": 8, "hidden": 16, "attn_dim": 8}
QUICK = ["--steps", "2", "--batch-size", "8", "--embed", "8", "--hidden", "16", "--attn-dim", "8",
         "--eval-every", "2", "--eval-samples", "8", "--threads", "1", "--processes", "1"]


def good_lines(n: int = 300) -> list[bytes]:
    return [f"{s}\t{t}".encode() for s, t in pig_latin.pairs(n, 0)]


def test_a_side_too_long_for_max_tokens_never_reaches_the_tokenizer(monkeypatch):
    seen: list[str] = []
    real = subwords.SubwordTokenizer.train.__func__

    def spy(cls, texts, *args, **kwargs):
        texts = list(texts)
        seen.extend(texts)
        return real(cls, texts, *args, **kwargs)
    monkeypatch.setattr(subwords.SubwordTokenizer, "train", classmethod(spy))
    words = " ".join(["word"] * 41)
    one_word = "x" * (40 * MAX_PIECE_CHARS + 1)
    data = b"\n".join(good_lines() + [f"{words}\tshort".encode(), f"short\t{one_word}".encode()]) + b"\n"
    notes: list[str] = []
    translation_setup(data, "pig", TINY, max_tokens=40, note=notes.append)
    assert seen and max(len(t) for t in seen) < 200
    assert any(n.startswith("2 of 302 pairs left out: longer than 40 pieces could hold (lines 301, 302)")
               for n in notes), notes


def test_may_fit_counts_words_and_characters():
    assert may_fit("a b c", 3) and not may_fit("a b c d", 3)
    assert may_fit("y" * (3 * MAX_PIECE_CHARS), 3) and not may_fit("y" * (3 * MAX_PIECE_CHARS + 1), 3)


def test_the_cli_says_which_lines_it_skipped_and_why(tmp_path, capsys):
    latin1 = [f"{s}\t{t} été".encode("latin-1") for s, t in pig_latin.pairs(40, 1)]
    huge = b"x" * (5 * 1024 * 1024) + b"\ty"
    path = tmp_path / "mixed.tsv"
    path.write_bytes(b"\n".join(good_lines() + latin1 + [huge, b"no tab here"]) + b"\n")
    assert main(["train", "--data", str(path), *QUICK, "--out", str(tmp_path / "m")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["steps"] == 2
    assert (f"note: 42 lines of {path} skipped: 40 not valid UTF-8 (lines 301, 302, 303, …); "
            "1 longer than 10,000 bytes (line 341); 1 expected 2 or 3 tab-separated columns, found 1 (line 342)"
            ) in err


def test_a_file_with_nothing_usable_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("\n".join(f"{s}\t{t} été" for s, t in pig_latin.pairs(20, 1)).encode("latin-1"))
    assert main(["train", "--data", str(path), *QUICK, "--out", str(tmp_path / "m")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"error: no usable sentence pairs in {path}: line 1: not valid UTF-8")


def test_a_few_pairs_train_with_a_warning(tmp_path, capsys):
    path = tmp_path / "five.tsv"
    path.write_bytes(b"\n".join(good_lines(6)) + b"\n")
    assert main(["train", "--data", str(path), *QUICK, "--out", str(tmp_path / "m")]) == 0
    err = capsys.readouterr().err
    assert "note: only 5 training pairs: a model learns little more than these sentences" in err


# --- the CLI keeps work ------------------------------------------------------------------------------

TOY = ["--task", "copy", "--min-len", "1", "--max-len", "5", "--embed", "8", "--hidden", "16", "--attn-dim", "8",
       "--batch-size", "16", "--eval-every", "5", "--eval-samples", "16", "--threads", "1", "--processes", "1"]


def cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "explorer", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def interrupted(out: Path, which: int, *more: str) -> tuple[subprocess.Popen, str, str]:
    """A CLI training to `out` (with `more` arguments), sent `which` after a few evaluations."""
    run = cli("train", *TOY, "--steps", "100000", "--out", str(out), *more)
    try:
        assert run.stderr.readline().startswith("training on")
        time.sleep(3)  # a few evaluations: a best validation to keep
        run.send_signal(which)
        stdout, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    return run, stdout, stderr


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    """The checkpoint a CLI training interrupted by Ctrl-C saved."""
    out = tmp_path_factory.mktemp("interrupted") / "stopped"
    run, stdout, stderr = interrupted(out, signal.SIGINT)
    assert run.returncode == 128 + signal.SIGINT, stderr
    assert "Traceback" not in stderr
    saved = out.with_name("stopped.safetensors")
    command = f"python -m explorer train --resume {saved} --task copy --out {saved.with_name('stopped-more')}"
    assert f"to {saved}; go on with {command}\n" in stderr  # a command that runs as it is (the next test)
    assert json.loads(stdout)["stopped_because"] == "stopped"
    return saved


def test_ctrl_c_saves_the_best_weights_so_far_and_info_reads_them(stopped):
    info = subprocess.run([sys.executable, "-m", "explorer", "info", "--checkpoint", str(stopped)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["training"]["stopped_because"] == "stopped"


def test_sigterm_saves_too(tmp_path):
    run, stdout, stderr = interrupted(tmp_path / "term", signal.SIGTERM)
    assert run.returncode == 128 + signal.SIGTERM, stderr
    assert "SIGTERM: stopping after this step" in stderr
    assert checkpoint.load(str(tmp_path / "term")).training["stopped_because"] == "stopped"


def test_out_onto_an_existing_file_asks_for_overwrite(tmp_path, capsys):
    args = ["train", *TOY, "--steps", "2", "--quiet", "--out", str(tmp_path / "m")]
    assert main(args) == 0
    before = (tmp_path / "m.safetensors").read_bytes()
    capsys.readouterr()
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"error: --out {tmp_path / 'm.safetensors'} exists: give --overwrite to replace it, "
                                 "or another --out\n")
    assert (tmp_path / "m.safetensors").read_bytes() == before
    assert main([*args, "--overwrite", "--seed", "5"]) == 0
    assert (tmp_path / "m.safetensors").read_bytes() != before


def test_a_stopped_run_that_keeps_its_best_ends_on_the_best_validation_weights():
    import torch

    from explorer.data.tasks import TaskSpec
    from explorer.training.recipes import train_task
    from explorer.training.train import TrainConfig
    stop, kept = threading.Event(), {}

    def on_eval(p) -> None:
        kept[p.step] = (p.metrics.token_accuracy, {k: v.clone() for k, v in bundle_ref[0].model.state_dict().items()})

    def on_step(p) -> None:
        if p.step == 21:  # spoil the weights: the last ones are now the worst
            with torch.no_grad():
                for w in bundle_ref[0].model.parameters():
                    w.zero_()
        if p.step == 23:
            stop.set()
    bundle_ref: list = []
    real_init = __import__("explorer.training.train", fromlist=["Trainer"]).Trainer.__init__

    def remember(self, bundle, *args, **kwargs):
        bundle_ref.append(bundle)
        real_init(self, bundle, *args, **kwargs)
    cfg = TrainConfig(steps=1000, batch_size=8, eval_every=10, eval_samples=16, lr=3e-2, seed=1, plateau_patience=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("explorer.training.train.Trainer.__init__", remember)
        bundle, _, result = train_task(TaskSpec("copy", 1, 4, "abc"), "c", TINY, cfg, on_step=on_step,
                                       on_eval=on_eval, stop=stop, keep_best=True)
    assert result.reason == "stopped" and result.steps == 23
    best_step = max((10, 20), key=lambda step: kept[step][0])
    assert result.history[-1]["restored_best_from_step"] == best_step
    for key, value in bundle.model.state_dict().items():
        assert torch.equal(value, kept[best_step][1][key]), key



def test_clean_text_by_table_is_the_character_loop_it_replaced():
    """The sentence cleaning every prepared pair goes through, now a translate table and a regex: the same
    text as the loop over characters on random mixes of spaces, kept spaces, controls and marks."""
    import random
    import unicodedata

    from explorer.data.subwords import _KEPT_SPACES, clean_text

    def loop(text: str) -> str:
        out: list[str] = []
        for ch in unicodedata.normalize("NFC", text):
            if ch in _KEPT_SPACES:
                out.append(ch)
            elif ch.isspace():
                if out and out[-1] != " ":
                    out.append(" ")
            elif unicodedata.category(ch) not in ("Cc", "Cf"):
                out.append(ch)
        return "".join(out).strip()
    rng = random.Random(1)
    alphabet = list("ab é\t\n\r \u00a0\u202f\u200b\u200e\x00\x7f\u2028\u3000e\u0301Z.!")
    alphabet += [chr(rng.randrange(0x20, 0x3000)) for _ in range(200)]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert clean_text(text) == loop(text), repr(text)


def test_a_checkpoint_saved_on_ctrl_c_is_continued_by_train_resume(stopped, tmp_path):
    more = tmp_path / "more"
    assert main(["train", *TOY, "--steps", "5", "--resume", str(stopped), "--out", str(more), "--quiet"]) == 0
    assert checkpoint.load(str(more)).training["resumed_from"] == stopped.name
    said = ["train", "--resume", str(stopped), "--task", "copy", "--out", str(tmp_path / "as-said"), "--steps", "2",
            "--quiet"]  # the command the interruption printed (it printed only --resume before: refused, exit 2)
    assert main(said) == 0


def test_sigterm_during_train_resume_saves_as_a_fresh_run_does(stopped, tmp_path):
    run, stdout, stderr = interrupted(tmp_path / "more", signal.SIGTERM, "--resume", str(stopped))
    assert run.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    saved = tmp_path / "more.safetensors"
    assert f"to {saved}; go on with python -m explorer train --resume {saved} --task copy --out " in stderr
    training = checkpoint.load(str(saved)).training
    assert training["stopped_because"] == "stopped" and training["resumed_from"] == stopped.name


def trained_and_mixed(tmp_path: Path) -> Path:
    """A model trained on good lines (m.safetensors) and a file mixing them with 42 bad ones (returned)."""
    good = tmp_path / "good.tsv"
    good.write_bytes(b"\n".join(good_lines()) + b"\n")
    assert main(["train", "--data", str(good), *QUICK, "--out", str(tmp_path / "m"), "--quiet"]) == 0
    latin1 = [f"{s}\t{t} été".encode("latin-1") for s, t in pig_latin.pairs(40, 1)]
    mixed = tmp_path / "mixed.tsv"
    mixed.write_bytes(b"\n".join(good_lines() + latin1 + [b"x" * 20_000 + b"\ty", b"no tab here"]) + b"\n")
    return mixed


def mixed_note(mixed: Path) -> str:
    return (f"note: 42 lines of {mixed} skipped: 40 not valid UTF-8 (lines 301, 302, 303, …); "
            "1 longer than 10,000 bytes (line 341); 1 expected 2 or 3 tab-separated columns, found 1 (line 342)")


def test_train_resume_says_which_lines_it_skipped_as_a_fresh_run_does(tmp_path, capsys):
    mixed = trained_and_mixed(tmp_path)
    capsys.readouterr()
    assert main(["train", "--data", str(mixed), *QUICK, "--resume", str(tmp_path / "m.safetensors"),
                 "--out", str(tmp_path / "more")]) == 0
    assert mixed_note(mixed) in capsys.readouterr().err


def test_eval_says_which_lines_of_its_file_it_skipped_as_train_does(tmp_path, capsys):
    mixed = trained_and_mixed(tmp_path)
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(tmp_path / "m.safetensors"), "--data", str(mixed), "--samples", "5"]) == 0
    assert mixed_note(mixed) in capsys.readouterr().err

# --- metrics that do not mislead ---------------------------------------------------------------------

ONES = "zero one two three four five six seven eight nine".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    if n < 10:
        return ONES[n]
    if n < 20:
        return ("ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())[n - 10]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    return ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + number_words(n % 100))


def numbers_file(path: Path, n: int = 400) -> Path:
    path.write_text("".join(f"{number_words(i)}\t{i}\n" for i in range(n)))
    return path


def test_the_default_probe_of_a_numbers_file_is_a_number_of_several_words(tmp_path):
    _bundle, data, _ = translation_setup(numbers_file(tmp_path / "n.tsv").read_bytes(), "n", TINY)
    assert len(data.probe_text().split()) >= 4, data.probe_text()


def test_eval_on_one_token_targets_explains_bleu_and_leads_with_exact_match_and_chrf(tmp_path, capsys):
    numbers = numbers_file(tmp_path / "numbers.tsv")
    assert main(["train", "--data", str(numbers), *QUICK, "--out", str(tmp_path / "m"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(tmp_path / "m"), "--data", str(numbers), "--samples", "50",
                 "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].strip() for line in lines[:3]] == ["n", "exact_match", "chrf"]
    note = next(line for line in lines if line.strip().startswith("bleu_note"))
    assert "100% of the references are shorter than 4 tokens" in note and "exact match and chrF" in note


# --- the CLI's small things ----------------------------------------------------------------------------

def test_the_command_alone_points_at_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("error: the following arguments are required: command "
                                       "(see python -m explorer --help)\n")


def test_seed_and_other_zero_defaults_are_shown_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "random seed (initial weights, batches, data split) (default: 0)" in text


def test_force_takes_a_word_as_its_word_starting_piece(capsys):
    assert main(["trace", "--checkpoint", "eng-fra", "--input", "We are here.", "--force", "1:Nous", "--json"]) == 0
    trace = json.loads(capsys.readouterr().out)
    assert trace["output_tokens"][0] == "\u2581Nous"
    assert trace["intervention"]["forced"] == [[1, "\u2581Nous"]]


def test_a_word_of_several_pieces_is_refused_with_its_spelling(capsys):
    assert main(["trace", "--checkpoint", "eng-fra", "--input", "We are here.", "--force", "1:Nouszzq"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: cannot force 'Nouszzq': the model has no such output token (it spells 'Nouszzq' "
                          "as \u2581Nous")
    assert "force one piece, e.g. '\u2581Nous'" in err


def test_output_piece_finds_a_words_one_piece_and_leaves_the_rest():
    from explorer.engine.trace import output_piece
    bundle = checkpoint.load("eng-fra")
    assert output_piece(bundle, "Nous") == output_piece(bundle, "\u2581Nous") == "\u2581Nous"
    assert output_piece(bundle, "Nouszzq") == "Nouszzq"
    assert output_piece(checkpoint.load("reverse"), "7") == "7"
