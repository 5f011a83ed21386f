"""The command line contract (python -m explorer train | eval | trace).

- `train` shows progress on stderr, prints a JSON summary and writes a checkpoint.
- `eval --json` prints one JSON object: n, exact_match, token_accuracy, alignment_accuracy.
- `trace --json` prints the trace: source_tokens, output_tokens, encoder_states, keys, values,
  decoder_states, queries, scores, weights, contexts, attention.
- A checkpoint is a path or the name of a shipped one.
- Bad input of any kind exits 2 with exactly one line on stderr naming the problem, never a traceback.

Each subprocess pays for importing torch (seconds on a busy machine), so the end-to-end runs are
few; the full bad-input matrix also runs in-process through the same `main()`.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from explorer.checkpoints import checkpoint
from explorer.__main__ import main

REPO = Path(__file__).resolve().parent.parent
TRACE_KEYS = {"source_tokens", "output_tokens", "encoder_states", "keys", "values", "decoder_states", "queries",
              "scores", "weights", "contexts", "attention"}
EVAL_KEYS = {"n", "exact_match", "token_accuracy", "alignment_accuracy"}
SHIPPED = checkpoint.pretrained_names()


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m explorer ARGS` from the repository root, as a user would run it."""
    return subprocess.run([sys.executable, "-m", "explorer", *args], cwd=REPO, capture_output=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def decoded(result: subprocess.CompletedProcess) -> tuple[str, str]:
    return result.stdout.decode("utf-8"), result.stderr.decode("utf-8")


def assert_refused(rc: int, out: str, err: str, message: str) -> None:
    """Exit code 2, nothing on stdout, one line on stderr that names the problem, no traceback."""
    assert rc == 2, (rc, err)
    assert "Traceback" not in out + err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("error: ") and message in err, err


# --- a tiny model trained through the CLI -----------------------------------------------------------

TRAIN_ARGS = ["--task", "copy", "--min-len", "1", "--max-len", "6", "--attention", "scaled_dot", "--cell", "gru",
              "--seed", "3", "--target-accuracy", "0.99", "--max-seconds", "60",
              # small and short: what `train --help` offers beyond the contract
              "--steps", "40", "--batch-size", "32", "--embed", "8", "--hidden", "24", "--attn-dim", "12",
              "--eval-every", "20", "--eval-samples", "40", "--curriculum", "10", "--threads", "1"]


@pytest.fixture(scope="module")
def cli_training(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """`train` run once for this module: its process result and the checkpoint it wrote."""
    folder = tmp_path_factory.mktemp("cli")
    result = run_cli("train", *TRAIN_ARGS, "--out", str(folder / "cli-copy"))
    return result, folder / "cli-copy.safetensors"


@pytest.fixture(scope="module")
def cli_checkpoint(cli_training) -> Path:
    result, path = cli_training
    assert result.returncode == 0, result.stderr.decode()
    return path


def test_train_shows_progress_and_writes_a_checkpoint(cli_training):
    result, path = cli_training
    out, err = decoded(result)
    assert result.returncode == 0, err
    assert "Traceback" not in out + err
    evaluations = [line for line in err.splitlines() if line.startswith("validation at step")]
    assert len(evaluations) == 2 and "exact" in evaluations[0] and "token" in evaluations[0]
    assert err.splitlines()[-1].startswith("done: 40 steps") and str(path) in err.splitlines()[-1]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["checkpoint"] == str(path) and summary["steps"] == 40
    assert summary["stopped_because"] in ("steps", "target")
    assert EVAL_KEYS <= set(summary)
    bundle = checkpoint.load(path)
    cfg = bundle.model.cfg
    assert (cfg.attention, cfg.cell, cfg.hidden, cfg.embed, cfg.attn_dim) == ("scaled_dot", "gru", 24, 8, 12)
    assert (bundle.task.name, bundle.task.min_len, bundle.task.max_len) == ("copy", 1, 6)
    assert bundle.training["seed"] == 3 and bundle.training["steps_done"] == 40
    assert bundle.training["curriculum"] == 10 and bundle.training["plateau_patience"] == 2  # flag; recipe default


class Payload:
    """Unpickling this creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, cli_checkpoint) -> dict[str, Path]:
    """Files that are not usable checkpoints, and the marker a pickle payload would create."""
    folder = tmp_path_factory.mktemp("bad")
    files = {"garbage": folder / "garbage.safetensors", "empty": folder / "empty.safetensors",
             "truncated": folder / "truncated.safetensors", "pickle": folder / "model.pt",
             "marker": folder / "payload-ran", "folder": folder}
    files["garbage"].write_bytes(bytes(range(256)) * 20)
    files["empty"].write_bytes(b"")
    data = cli_checkpoint.read_bytes()
    files["truncated"].write_bytes(data[: len(data) // 2])
    files["pickle"].write_bytes(pickle.dumps({"state_dict": Payload(files["marker"])}))
    return files


@pytest.fixture(scope="module")
def cli_runs(cli_checkpoint, bad_files) -> dict[str, subprocess.CompletedProcess]:
    """The end-to-end runs on the trained checkpoint, started together (each one waits seconds for torch)."""
    ckpt = str(cli_checkpoint)
    runs: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "eval": (["eval", "--checkpoint", ckpt, "--samples", "30", "--min-len", "2", "--max-len", "4",
                  "--seed", "9", "--json"], None),
        # a bare name is looked up among the shipped checkpoints, in EXPLORER_PRETRAINED when set
        "trace by name": (["trace", "--checkpoint", "cli-copy", "--input", "1 2 3 4", "--json"],
                          {"EXPLORER_PRETRAINED": str(cli_checkpoint.parent)}),
        "huge emoji input": (["trace", "--checkpoint", ckpt, "--input", "😀\u202e\x07" * 6667], None),
        "pickle payload": (["eval", "--checkpoint", str(bad_files["pickle"]), "--json"], None),
    }
    if SHIPPED:
        bundle = checkpoint.load(SHIPPED[0])
        text = bundle.task_obj.examples()[0] if bundle.task_obj else "I am happy."
        runs["shipped by name"] = (["trace", "--checkpoint", SHIPPED[0], "--input", text, "--json"], None)
    with ThreadPoolExecutor(len(runs)) as pool:
        started = {name: pool.submit(run_cli, *argv, env=env) for name, (argv, env) in runs.items()}
        return {name: future.result() for name, future in started.items()}


def test_eval_json_prints_one_object_with_scores_in_range(cli_runs):
    out, err = decoded(cli_runs["eval"])
    assert cli_runs["eval"].returncode == 0 and err == "", err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert EVAL_KEYS <= set(report) and report["n"] == 30
    for key in ("exact_match", "token_accuracy", "alignment_accuracy"):
        assert 0.0 <= report[key] <= 1.0, key


def test_trace_json_by_name_has_every_key_and_consistent_shapes(cli_runs, cli_checkpoint):
    out, err = decoded(cli_runs["trace by name"])
    assert cli_runs["trace by name"].returncode == 0 and err == "", err
    data = json.loads(out)
    assert TRACE_KEYS <= set(data)
    assert data["source_tokens"] == ["1", "2", "3", "4"] and data["attention"] == "scaled_dot"
    cfg = checkpoint.load(cli_checkpoint).model.cfg
    S, T = 4, len(data["output_tokens"])
    He, H, D = cfg.memory_size, cfg.hidden, cfg.attn_dim  # the CLI's toy-task encoder is bidirectional: He = 2H
    assert (He, H, D) == (48, 24, 12)
    assert 1 <= T <= cfg.max_tgt_len
    shapes = {"encoder_states": (S, He), "keys": (S, D), "values": (S, D), "decoder_states": (T, H),
              "queries": (T, D), "scores": (T, S), "weights": (T, S), "contexts": (T, D)}
    for key, (rows, cols) in shapes.items():
        assert len(data[key]) == rows and all(len(row) == cols for row in data[key]), key
    for row in data["weights"]:
        assert sum(row) == pytest.approx(1.0, abs=1e-5)


def test_shipped_checkpoints_are_found_by_name(cli_runs, capsys):
    """Every shipped checkpoint loads by its bare name, the first one also end to end (none shipped: none to find)."""
    for name in SHIPPED:
        assert main(["info", "--checkpoint", name]) == 0
        assert json.loads(capsys.readouterr().out)["name"] == name
    if SHIPPED:
        out, err = decoded(cli_runs["shipped by name"])
        assert cli_runs["shipped by name"].returncode == 0, err
        assert TRACE_KEYS <= set(json.loads(out))


def test_end_to_end_a_huge_input_of_emoji_and_control_characters_exits_2(cli_runs):
    result = cli_runs["huge emoji input"]
    assert_refused(result.returncode, *decoded(result), "20,001 characters; the limit is 1,000")


def test_end_to_end_a_pickle_payload_is_refused_and_never_run(cli_runs, bad_files):
    result = cli_runs["pickle payload"]
    assert_refused(result.returncode, *decoded(result), "pickled .pt files are refused")
    assert not bad_files["marker"].exists()


# --- bad input: the whole matrix, in-process ---------------------------------------------------------------

INPUT_CASES = {
    "unknown symbol": ("12a4", "unknown symbol 'a'"),
    "empty": ("", "the input is empty"),
    "whitespace only": (" \t \n ", "the input is empty"),
    "longer than the model supports": ("1" * 65, "the input has 65 tokens; this model supports at most 64"),
    "20,000 characters": ("7" * 20_000, "the input has 20,000 characters; the limit is 1,000"),
    "emoji": ("12😀", "unknown symbol '😀'"),
    "emoji sequence": ("1👩‍💻", "U+200D (ZERO WIDTH JOINER)"),
    "right-to-left text": ("שלום", "unknown symbols 'ש', 'ל', 'ו', 'ם'"),
    "right-to-left override": ("12\u202e34", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    "terminal escape": ("1\x1b[2J2", "U+001B"),
    "bell": ("1\x072", "U+0007"),
    "NUL": ("1\x002", "U+0000"),
    "undecodable bytes": ("1\udcff2", "not valid UTF-8 text (the byte 0xFF"),
}


@pytest.mark.parametrize("text, message", INPUT_CASES.values(), ids=INPUT_CASES.keys())
def test_a_bad_input_exits_2_with_one_line(cli_checkpoint, capsys, text, message):
    rc = main(["trace", "--checkpoint", str(cli_checkpoint), "--input", text, "--json"])
    assert_refused(rc, *capsys.readouterr(), message)


CHECKPOINT_CASES = {
    "missing": ("missing", "no checkpoint named"),
    "garbage": ("garbage", "is not an Attention Explorer checkpoint"),
    "empty": ("empty", "the file is empty or truncated"),
    "truncated": ("truncated", "truncated.safetensors is corrupt"),
    "pickle payload": ("pickle", "pickled .pt files are refused because they can run code"),
    "a folder": ("folder", "cannot read checkpoint"),
}


@pytest.mark.parametrize("command", ["trace", "eval"])
@pytest.mark.parametrize("which, message", CHECKPOINT_CASES.values(), ids=CHECKPOINT_CASES.keys())
def test_a_bad_checkpoint_exits_2_with_one_line(bad_files, capsys, command, which, message):
    path = str(bad_files.get(which, bad_files["folder"] / "missing.safetensors"))
    argv = [command, "--checkpoint", path] + (["--input", "123"] if command == "trace" else ["--json"])
    rc = main(argv)
    assert_refused(rc, *capsys.readouterr(), message)
    assert not bad_files["marker"].exists()


OPTION_CASES = {
    "no input": (["trace", "--checkpoint", "{ckpt}"], "the following arguments are required: --input"),
    "unknown command": (["serve"], "invalid choice: 'serve'"),
    "unknown attention": (["train", "--task", "copy", "--out", "x", "--attention", "cosine"], "invalid choice"),
    "unknown task": (["train", "--task", "poetry", "--out", "x"], "invalid choice: 'poetry'"),
    "min-len 0": (["train", "--task", "copy", "--out", "{tmp}/x", "--min-len", "0"], "--min-len must be between 1 and 500, got 0"),
    "min above max": (["train", "--task", "copy", "--out", "{tmp}/x", "--min-len", "9", "--max-len", "3"],
                      "max_len (3) must not be below min_len (9)"),
    "no samples": (["eval", "--checkpoint", "{ckpt}", "--samples", "0", "--json"], "--samples must be at least 1"),
    "temperature nan": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--temperature", "nan"],
                        "--temperature must be a finite number"),
    "mask out of range": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--mask", "5"],
                          "cannot mask position 5"),
    "mask everything": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--mask", "1", "--mask", "2"],
                        "at least one input position must stay visible"),
    "bad pin": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--pin", "x"], "--pin expects STEP:VALUE"),
    "mask 0": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--mask", "0"],
               "--mask position 0 is not allowed: steps and positions count from 1"),
    "pin step 0": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--pin", "0:1"],
                   "--pin step 0 is not allowed: steps and positions count from 1"),
    "pin position not a number": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--pin", "1:x"],
                                  "--pin expects STEP:VALUE with two whole numbers (STEP:POSITION), got '1:x'"),
    "pin past the input": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--pin", "1:3"],
                           "cannot pin attention to position 3: the input has positions 1–2"),
    "epochs for a toy task": (["train", "--task", "copy", "--out", "{tmp}/x", "--epochs", "3"],
                              "--epochs is for --data"),
    "unknown forced token": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--force", "1:z"],
                             "cannot force 'z'"),
    "bad target": (["trace", "--checkpoint", "{ckpt}", "--input", "12", "--target", "1b"], "unknown symbol 'b'"),
}


@pytest.mark.parametrize("argv, message", OPTION_CASES.values(), ids=OPTION_CASES.keys())
def test_a_bad_option_exits_2_with_one_line(cli_checkpoint, tmp_path, capsys, argv, message):
    argv = [a.format(ckpt=cli_checkpoint, tmp=tmp_path) for a in argv]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's usage errors leave through SystemExit, as in a real process
        rc = exc.code
    assert_refused(rc, *capsys.readouterr(), message)
    assert list(tmp_path.iterdir()) == [], "nothing was written"


# --- a CLI that explains itself (issue 26) -----------------------------------------------------------------

def _subcommands():
    from explorer.__main__ import _parser
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("command", ["train", "eval", "trace", "translate", "info"])
def test_every_flag_explains_itself_and_shows_its_default(command, capsys):
    parser = _subcommands()[command]
    one_of = {a for g in parser._mutually_exclusive_groups if g.required for a in g._group_actions}
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        assert action.help, f"{command} {action.option_strings[0]} has no help text"
        assert len(action.help) >= 12, f"{command} {action.option_strings[0]}: {action.help!r}"
        if action.required or action in one_of or action.default in (False, []):
            continue
        shown = parser.formatter_class("x")._get_help_string(action) % {"default": action.default}
        assert "default" in shown, f"{command} {action.option_strings[0]} does not show its default: {shown!r}"
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "(default: None)" not in text


def test_train_help_shows_the_shared_defaults(capsys):
    from explorer import defaults, settings
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"--steps STEPS optimisation steps (default: toy tasks {settings.setting('steps').toy};" in text
    assert f"--max-tokens MAX_TOKENS translation: longest sentence kept, in subword pieces; longer pairs are " \
           f"skipped (default: {settings.setting('max_tokens').toy})" in text
    assert f"{defaults.MIN_STEPS:,}–{defaults.MAX_STEPS:,} steps" in text


@pytest.mark.parametrize("command", ["eval", "trace", "translate", "info"])
def test_checkpoint_help_says_name_or_path_and_lists_the_shipped_names(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "NAME" in text and "PATH" in text
    for name in SHIPPED:
        assert name in text


def test_trace_help_and_readme_state_the_counting_base(capsys):
    with pytest.raises(SystemExit):
        main(["trace", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "count from 1" in text and "--mask 1 hides the first input symbol" in text
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "count from 1" in readme


def test_the_out_path_works_as_the_checkpoint(cli_checkpoint, capsys):
    """train --out DIR/cli-copy wrote DIR/cli-copy.safetensors; the same path, as given, finds it."""
    given = str(cli_checkpoint.with_suffix(""))
    assert not given.endswith(".safetensors")
    assert main(["info", "--checkpoint", given]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "cli-copy"
    assert main(["trace", "--checkpoint", given, "--input", "12"]) == 0


def test_positions_and_steps_count_from_1(cli_checkpoint, capsys):
    ckpt = str(cli_checkpoint)
    assert main(["trace", "--checkpoint", ckpt, "--input", "1234", "--mask", "1", "--pin", "2:3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    weights = data["weights"]
    assert all(row[0] == 0 for row in weights), "--mask 1 hides the first position"
    assert weights[1][2] == pytest.approx(1.0), "--pin 2:3 puts step 2's attention on position 3"
    assert data["intervention"]["masked"] == [1] and data["intervention"]["pins"] == [[2, 3]]
    assert main(["trace", "--checkpoint", ckpt, "--input", "1234", "--pin", "1:4"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "step" in line]
    assert lines[0].lstrip().startswith("step  1:") and lines[0].endswith("(α=1.000)")
    assert "at position 4" in lines[0]


def test_info_saved_at_is_when_the_file_was_saved(cli_checkpoint, capsys, monkeypatch):
    header = json.loads(json.loads(cli_checkpoint.read_bytes()[8: 8 + int.from_bytes(
        cli_checkpoint.read_bytes()[:8], "little")])["__metadata__"]["explorer"])
    import time
    monkeypatch.setattr(time, "gmtime", lambda *a: time.struct_time((2001, 1, 2, 3, 4, 5, 1, 2, 0)))
    assert main(["info", "--checkpoint", str(cli_checkpoint)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["saved_at"] == header["saved_at"] and not info["saved_at"].startswith("2001")
    again = checkpoint.from_bytes(checkpoint.to_bytes(checkpoint.load(cli_checkpoint)), "again")
    assert again.saved_at.startswith("2001-01-02T03:04:05"), "a new save stamps its own time"


def test_quiet_training_prints_nothing_on_stderr(tmp_path, capsys):
    argv = ["train", *TRAIN_ARGS[:TRAIN_ARGS.index("--steps")], "--steps", "4", "--batch-size", "8", "--embed", "4",
            "--hidden", "8", "--attn-dim", "4", "--eval-every", "2", "--eval-samples", "8", "--threads", "1",
            "--processes", "1", "--out", str(tmp_path / "q"), "--quiet"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["steps"] <= 4


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Step:
    def __init__(self, step: int, total: int = 100) -> None:
        self.step, self.total_steps, self.loss, self.examples_per_second, self.metrics = step, total, 0.5, 64.0, None


def test_progress_prints_a_line_at_least_every_5_seconds_with_eta():
    import io

    from explorer.training.progress import ConsoleProgress
    clock, out = FakeClock(), io.StringIO()
    progress = ConsoleProgress(stream=out, bar=False, clock=clock)
    for step in range(1, 101):
        clock.now = step * 0.6  # 0.6 s a step: 60 s in all
        progress.on_step(Step(step))
    text = out.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and 11 <= len(lines) <= 13, lines
    first = lines[0]
    assert first.startswith("training:  10% 10/100 [00:05<00:5") or first.startswith("training:   9% 9/100"), first
    assert "<00:54," in first or "<00:55," in first, first  # 90 steps left at 0.6 s a step
    assert first.endswith(" 1.67 steps/s, loss 0.5000, 64 ex/s]"), first


def test_progress_on_a_terminal_is_a_bar_redrawn_in_place_and_quiet_is_silent(monkeypatch):
    import io

    import tqdm.std

    from explorer.training.progress import ConsoleProgress
    clock, out = FakeClock(), io.StringIO()
    monkeypatch.setattr(tqdm.std, "time", clock)  # tqdm's own clock, for its redraw interval
    progress = ConsoleProgress(stream=out, bar=True, clock=clock)
    for step in range(1, 11):
        clock.now = step * 1.0
        progress.on_step(Step(step, 10))
    text = out.getvalue()
    assert text.count("\r") >= 9 and "\n" not in text and "| 10/10 [00:09<00:00, " in text
    assert text.endswith("steps/s, loss 0.5000, 64 ex/s]") and "100%|" in text
    progress.finish("done: 10 steps")
    assert out.getvalue()[len(text):].endswith("\rdone: 10 steps\n"), "the bar is cleared, the last line replaces it"
    quiet = io.StringIO()
    silent = ConsoleProgress(stream=quiet, quiet=True, clock=clock)
    silent.on_step(Step(1))
    silent.message("x")
    assert quiet.getvalue() == ""


def test_a_terminal_that_reports_no_size_still_gets_the_bar():
    """A fresh pty says it is 0 x 0 (`script`, some CI runners); tqdm alone then draws nothing at all."""
    import os
    import pty

    from explorer.training.progress import ConsoleProgress
    leader, follower = pty.openpty()
    assert tuple(os.get_terminal_size(follower)) == (0, 0)
    with os.fdopen(follower, "w", encoding="utf-8") as stream:
        progress = ConsoleProgress(stream=stream)
        assert progress.bar
        for step in range(1, 11):
            progress.on_step(Step(step, 10))
        progress.finish("done")
    text = os.read(leader, 65536).decode("utf-8")
    os.close(leader)
    assert "training:  10%|" in text and "| 1/10 [" in text and "loss 0.5000" in text, repr(text)


def test_a_300_pair_file_trains_a_useful_model_with_the_defaults(tmp_path, capsys):
    """English -> pig latin, 300 pairs, no flag but the data: the run length comes from the data (the old
    default of a few epochs taught nothing) and it ends on a validation plateau or the step floor."""
    from tests import pig_latin
    data = pig_latin.write_tsv(tmp_path / "pig.tsv", 300)
    assert main(["train", "--data", str(data), "--out", str(tmp_path / "pig"), "--threads", "1", "--processes", "1",
                 "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["exact_match"] >= 0.6, summary
    assert summary["stopped_because"] in ("plateau", "steps")
    bundle = checkpoint.load(tmp_path / "pig")
    assert bundle.training["stop_patience"] > 0 and bundle.training["steps"] >= 1500
    assert bundle.examples and all(s in dict(pig_latin.pairs(300)) for s, _ in bundle.examples)


def test_default_processes_fall_back_to_one_where_ranks_cannot_be_forked(tmp_path, monkeypatch, capsys):
    """main() called from a threaded program (a test runner, a notebook) trains in one process by default
    instead of refusing; an explicit --processes 2 is still refused there with one line."""
    from explorer.training import distributed
    from explorer.__main__ import main
    monkeypatch.setattr(distributed, "can_fork", lambda: False)
    monkeypatch.setattr(distributed, "usable_cores", lambda: 2)
    out = tmp_path / "rev"
    assert main(["train", "--task", "reverse", "--min-len", "2", "--max-len", "4", "--steps", "3", "--hidden", "128",
                 "--eval-every", "3", "--quiet", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["processes"] == 1
    assert main(["train", "--task", "reverse", "--steps", "3", "--processes", "2", "--quiet",
                 "--out", str(tmp_path / "two")]) == 2
    assert "one thread" in capsys.readouterr().err


def test_counted_progress_reports_items_rate_and_eta():
    import io

    from explorer.training.progress import ConsoleProgress
    clock, out = FakeClock(), io.StringIO()
    progress = ConsoleProgress(stream=out, bar=False, clock=clock)
    for done in range(0, 641, 64):  # 64 pairs every 2 s: 20 s in all
        clock.now = done / 32
        progress.on_count(done, 640, "pairs")
    lines = out.getvalue().splitlines()
    assert lines[0] == "pairs:  30% 192/640 [00:06<00:14, 32.00 pairs/s]", lines
    assert 3 <= len(lines) <= 4


def test_eval_of_a_file_shows_progress_and_a_summary_and_quiet_shows_none(tmp_path, capsys):
    """Issue 26: a long CLI job (eval --data decodes every pair) reports on stderr; --quiet keeps it silent."""
    from explorer.checkpoints import checkpoint
    from explorer.training.recipes import translation_setup
    from tests import pig_latin
    data = tmp_path / "pig.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in pig_latin.pairs(100)), encoding="utf-8")
    bundle, _, _ = translation_setup(str(data), "pig", {"embed": 8, "hidden": 16, "attn_dim": 8})
    checkpoint.save(bundle, tmp_path / "pig")
    assert main(["eval", "--checkpoint", str(tmp_path / "pig"), "--data", str(data), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["n"] == 100
    assert err.splitlines()[-1].startswith("done: 100 pairs scored in "), err
    assert main(["eval", "--checkpoint", str(tmp_path / "pig"), "--data", str(data), "--json", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["n"] == 100


def test_output_cut_short_by_its_reader_is_not_an_error():
    """`explorer translate … | head -1` printed "error: Broken pipe" and exited 2: the OSError handler caught
    BrokenPipeError before its own handler could."""
    proc = subprocess.Popen([sys.executable, "-m", "explorer", "translate", "--checkpoint", "reverse"], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(b"1234\n" * 1_000)  # 5 kB: fits the pipe, so the reader goes away while lines are left
    proc.stdin.close()
    assert proc.stdout.readline() == b"4321\n"
    proc.stdout.close()  # the reader goes away after its first line, as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(120) == 0 and err == "", err


def test_a_toy_model_below_the_ddp_size_trains_in_one_process_by_default(tmp_path, monkeypatch, capsys):
    """On two cores, the toy defaults (GRU 64) train in one process: two ranks are slower at that size."""
    from explorer.training import distributed
    from explorer.__main__ import main
    monkeypatch.setattr(distributed, "can_fork", lambda: True)
    monkeypatch.setattr(distributed, "usable_cores", lambda: 2)
    forked: list[int] = []
    real = distributed.run_ranks
    monkeypatch.setattr(distributed, "run_ranks", lambda n, *a: forked.append(n) or real(1, *a))
    assert main(["train", "--task", "reverse", "--min-len", "2", "--max-len", "4", "--steps", "3",
                 "--eval-every", "3", "--quiet", "--out", str(tmp_path / "rev")]) == 0
    assert forked == [1]
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["processes"] == 1
