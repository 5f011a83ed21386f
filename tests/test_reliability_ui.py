"""Hostile input through the UI (AppTest): whatever a student types or uploads, the page shows one
clear message, never a traceback, and keeps its last good state.

- Explore: unknown symbols, empty and whitespace-only input, 20,000 characters, emoji, right-to-left
  and control characters, in the input box and in the link; the previous trace stays on screen and
  can still be stepped through.
- Train: TSV uploads with wrong columns, binary data, bad UTF-8, nothing in them, or too many bytes;
  checkpoint uploads that are garbage, truncated, of another architecture, with vocabularies that
  do not fit, or a pickle whose payload would create a file (it never does); hostile settings.
  The session's models stay as they were.

The app runs on small untrained checkpoints (tests/explore_models.py). One AppTest per page is shared
by the cases of this module, the way one student's session meets one bad input after another.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from streamlit.testing.v1 import AppTest

from explorer.checkpoints import checkpoint

from explorer import jobs
from explorer.data.tasks import TaskSpec
from explorer.training.train import new_task_bundle
from tests.app_support import drawn_charts, show_page, upload


APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 120
GOOD = "2718"  # an input the shipped test model `copy` reads: its truth is itself


@pytest.fixture(scope="module", autouse=True)
def no_jobs_left():
    reg = jobs.registry()
    reg.stop_all()
    yield reg
    reg.stop_all()


def run(at: AppTest) -> AppTest:
    """Run the script; the page must not raise, show st.exception, or print a traceback."""
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [m.value for m in at.markdown] + [c.value for c in at.caption] + errors(at)
    assert not any("Traceback" in text for text in shown)
    return at


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def metric(at: AppTest, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric {label_start!r}: {[m.label for m in at.metric]}")


def open_page(at: AppTest, url_pathname: str) -> AppTest:
    """Show a page registered with st.navigation."""
    show_page(at, url_pathname)
    return run(at)


# --- Explore: the input box ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def explore(models_dir) -> AppTest:
    return run(AppTest.from_file(APP, default_timeout=TIMEOUT))


def show_good(at: AppTest) -> str:
    """Decode the good input on `copy`; returns the output shown."""
    if at.session_state["explore_model"] != "copy":
        at.selectbox(key="explore_model").set_value("copy")
    at.text_input(key="explore_input").set_value(GOOD)
    run(at)
    assert not errors(at), errors(at)
    assert metric(at, "Correct answer") == GOOD
    return metric(at, "Output")


INPUT_CASES = {
    "unknown symbols": ("12ab", "unknown symbols 'a', 'b'"),
    "empty": ("", "the input is empty"),
    "whitespace only": (" \t  \u3000 ", "the input is empty"),
    "20,000 characters": ("7" * 20_000, "the input has 20,000 characters; the limit is 1,000"),
    "20,000 emoji": ("😀" * 20_000, "the input has 20,000 characters; the limit is 1,000"),
    "emoji": ("12😀", "unknown symbol '😀'"),
    "emoji with a joiner": ("1👩\u200d💻", "U+200D (ZERO WIDTH JOINER)"),
    "right-to-left script": ("שלום", "unknown symbols 'ש', 'ל', 'ו', 'ם'"),
    "right-to-left override": ("12\u202e34", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    "zero-width space": ("12\u200b34", "U+200B (ZERO WIDTH SPACE)"),
    "terminal escape": ("1\x1b[2J2", "U+001B"),
    "bell and delete": ("1\x07\x7f2", "U+0007"),
    "markup": ("<script>alert(1)</script>**$x$**", "unknown symbols"),
}


@pytest.mark.parametrize("text, message", INPUT_CASES.values(), ids=INPUT_CASES.keys())
def test_a_bad_input_is_one_message_and_the_last_good_trace_stays(explore, text, message):
    at = explore
    output = show_good(at)
    at.text_input(key="explore_input").set_value(text)
    run(at)
    assert len(errors(at)) == 1 and message in errors(at)[0], errors(at)
    assert any(f"last good input: **{GOOD}**" in c.value for c in at.caption)
    assert metric(at, "Correct answer") == GOOD and metric(at, "Output") == output
    assert "explore_heatmap" in drawn_charts(at), "the heatmap is still drawn"
    assert at.query_params["input"] == GOOD, "the link keeps the good input"


def test_the_last_good_trace_can_still_be_stepped_through_under_a_bad_input(explore):
    at = explore
    show_good(at)
    at.text_input(key="explore_input").set_value("12😀")
    run(at)
    assert at.session_state["explore_step"] == 1
    at.button(key="explore_next").click()
    run(at)
    at.button(key="explore_next").click()
    run(at)
    assert at.session_state["explore_step"] == 3
    assert errors(at) and metric(at, "Correct answer") == GOOD


def test_other_models_meet_the_same_input_without_a_traceback(explore):
    """Translation in pieces reads anything (bytes for what it never saw); dates refuses unknown symbols."""
    at = explore
    show_good(at)
    hostile = "I 😀 שלום \u202e\x1b[2J <b>é</b>"
    at.selectbox(key="explore_model").set_value("tiny-fra")
    run(at)
    at.text_input(key="explore_input").set_value(hostile)
    run(at)
    assert not errors(at), errors(at)
    assert not any("Not in this model's vocabulary" in w.value for w in at.warning)
    at.text_input(key="explore_input").set_value("é" * 20_000)
    run(at)
    assert any("20,000 characters" in e for e in errors(at))
    at.selectbox(key="explore_model").set_value("dates")
    run(at)
    at.text_input(key="explore_input").set_value("3 March 2021 😀")
    run(at)
    assert any("unknown symbol '😀'" in e for e in errors(at)), errors(at)
    at.selectbox(key="explore_model").set_value("copy")
    run(at)


@pytest.mark.parametrize("text, message", [("😀\u202e\x07" * 6667, "20,001 characters"),
                                           ("", "the input is empty"),
                                           ("1\x002", "U+0000")])
def test_a_hostile_link_is_a_message(models_dir, text, message):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = "copy"
    at.query_params["input"] = text
    at.query_params["step"] = "-99999999999999999999"
    at.query_params["mode"] = "<script>"
    run(at)
    assert any(message in e for e in errors(at)), errors(at)
    assert any("Type an input" in i.value for i in at.info)


# --- Train: TSV uploads ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def train(models_dir) -> AppTest:
    """The Train page with one good checkpoint already uploaded (the state a bad upload must not lose)."""
    at = open_page(AppTest.from_file(APP, default_timeout=TIMEOUT).run(), "train")
    bundle, _ = new_task_bundle(TaskSpec("copy", 1, 6), "mine", seed=3, embed=4, hidden=8, attn_dim=4)
    upload(at, "train_upload", "mine.safetensors", checkpoint.to_bytes(bundle),
          "application/octet-stream")
    run(at)
    assert any("Added" in s.value for s in at.success)
    assert at.session_state["models"].names() == ["mine"]
    return at


def translation_source(at: AppTest) -> AppTest:
    if at.session_state["train_source"] != "Translation (your TSV file)":
        at.radio(key="train_source").set_value("Translation (your TSV file)")
        run(at)
    return at


MAX_TSV = jobs.LIMITS.max_tsv_bytes
TSV_CASES = {
    "wrong columns": (b"one\ttwo\tthree\tfour\nfive\n", "line 1: expected 2 or 3 tab-separated columns, found 4"),
    "binary": (bytes(range(256)) * 64, "binary file (NUL bytes)"),
    "bad UTF-8": ("café\tcafé\nthé\tthé\n".encode("latin-1"), "line 1: not valid UTF-8"),
    "UTF-16": ("go\tva\n".encode("utf-16"), "looks like UTF-16 text; save it as UTF-8"),
    "empty": (b"", "the file is empty"),
    "blank lines only": (b"\n \n  \r\n", "every line is blank"),
    "only tabs": (b"\t\t\n\t\n", "line 1: only tabs, no text"),
    "blank lines and a tab": (b"\n \n\t\r\n", "line 3: only tabs, no text"),
    "very large": (b"go\tva\n" * (MAX_TSV // 6 + 1), f"(limit {MAX_TSV:,})"),
}


@pytest.mark.parametrize("data, message", TSV_CASES.values(), ids=TSV_CASES.keys())
def test_a_bad_tsv_is_refused_with_one_message_and_nothing_is_lost(train, data, message):
    at = translation_source(train)
    upload(at, "train_tsv", "pairs.tsv", data, "text/tab-separated-values")
    run(at)
    assert any(e.startswith("This file cannot be used") and message in e for e in errors(at)), errors(at)
    at.button(key="train_start").click()
    run(at)
    assert at.session_state["train_error"] in errors(at), "starting is refused with its own message"
    assert "train_job" not in at.session_state and jobs.registry().running() == 0
    assert at.session_state["models"].names() == ["mine"]


# --- Train: checkpoint uploads ---------------------------------------------------------------------

class Payload:
    """Unpickling this creates a marker file: the proof that a loader ran code from the file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def good_bundle(**options):
    return new_task_bundle(TaskSpec("copy", 1, 6), "other", seed=1, embed=4, hidden=8, attn_dim=4, **options)[0]


def described_as(weights_from, config_from, edit=lambda info: None) -> bytes:
    """A safetensors checkpoint holding one model's weights under another model's (edited) config."""
    info = checkpoint.describe(config_from)
    edit(info)
    tensors = {k: v.detach().contiguous() for k, v in weights_from.model.state_dict().items()}
    return st_save(tensors, metadata={"explorer": json.dumps(info)})


def checkpoint_cases(tmp: Path) -> dict[str, tuple[str, bytes, str]]:
    marker = tmp / "payload-ran"
    good = checkpoint.to_bytes(good_bundle())
    torch_pickle = tmp / "torch.pt"
    torch.save({"state_dict": Payload(marker)}, torch_pickle)
    return {
        "garbage": ("model.safetensors", bytes(range(256)) * 40, "not an Attention Explorer checkpoint"),
        "empty": ("model.safetensors", b"", "empty or truncated"),
        "truncated": ("model.safetensors", good[: len(good) // 2], "corrupt"),
        "truncated header": ("model.safetensors", good[:100], "not an Attention Explorer checkpoint"),
        "another architecture": ("model.safetensors", described_as(good_bundle(cell="lstm"), good_bundle()),
                                 "does not match its architecture"),
        "mismatched vocabulary": ("model.safetensors",
                                  described_as(good_bundle(), good_bundle(),
                                               lambda info: info["source_vocab"].append("z")),
                                  "vocabularies (15, 14 tokens) do not match the model (14, 14)"),
        "pickle payload": ("model.pt", pickle.dumps({"state_dict": Payload(marker)}),
                           "pickled .pt files are refused because they can run code"),
        "torch.save payload": ("model.pth", torch_pickle.read_bytes(), "pickled .pt files are refused"),
        "pickle disguised as safetensors": ("model.safetensors", pickle.dumps(Payload(marker)),
                                            "pickled .pt files are refused"),
    }


CHECKPOINT_CASE_NAMES = ["garbage", "empty", "truncated", "truncated header", "another architecture",
                         "mismatched vocabulary", "pickle payload", "torch.save payload",
                         "pickle disguised as safetensors"]


def test_the_payload_is_live(tmp_path):
    """The pickles below do run code when unpickled: refusing them is what keeps the marker away."""
    live = tmp_path / "live"
    pickle.loads(pickle.dumps(Payload(live)))
    assert live.exists()


@pytest.mark.parametrize("case", CHECKPOINT_CASE_NAMES)
def test_a_bad_checkpoint_is_refused_never_run_and_nothing_is_lost(train, tmp_path, case):
    at = train
    name, data, message = checkpoint_cases(tmp_path)[case]
    upload(at, "train_upload", name, data, "application/octet-stream")
    run(at)
    assert any(e.startswith("This file was refused") and message in e for e in errors(at)), errors(at)
    assert not (tmp_path / "payload-ran").exists(), "loading the upload ran code from it"
    assert at.session_state["models"].names() == ["mine"]


def test_a_valid_checkpoint_with_hostile_symbols_and_name_opens_in_explore(train, monkeypatch):
    """A real model whose alphabet is markup, LaTeX specials, an RTL override and an emoji, under a
    file name full of markup: it is added, and Explore decodes it without a traceback."""
    from explorer.app.pages import explore
    # AppTest formats the model menu outside the script run, where session state (and so the
    # "(trained this session)" label) is missing: label by name so the test can pick the model.
    monkeypatch.setattr(explore, "_model_label", str)
    at = train
    alphabet = "$\\}{_^~#%&*<>\u202e😀"
    bundle, _ = new_task_bundle(TaskSpec("copy", 1, 6, alphabet), "x", seed=2, embed=4, hidden=8, attn_dim=4)
    upload(at, "train_upload", "<img src=x onerror=alert(1)>.safetensors",
          checkpoint.to_bytes(bundle), "application/octet-stream")
    run(at)
    names = at.session_state["models"].names()
    assert names == ["mine", "<img src=x onerror=alert(1)>"], names
    explore_at = open_page(at, "explore")
    explore_at.selectbox(key="explore_model").set_value(names[1])
    run(explore_at)
    explore_at.text_input(key="explore_input").set_value("$\\}{\u202e😀")
    run(explore_at)
    assert not errors(explore_at), errors(explore_at)
    assert metric(explore_at, "Correct answer") == "$\\}{\u202e😀"
    explore_at.button(key="explore_next").click()
    run(explore_at)
    open_page(explore_at, "train")


# --- Train: hostile settings ------------------------------------------------------------------------

SETTING_CASES = {
    "empty alphabet": ({"train_alphabet": ""}, "the alphabet must be a non-empty string"),
    "whitespace in the alphabet": ({"train_alphabet": "a b"}, "must not contain whitespace"),
    "repeated symbols": ({"train_alphabet": "abca"}, "the alphabet repeats 'a'"),
    "probe with unknown symbols": ({"train_alphabet": "abcd", "train_probe": "ab😀"}, "unknown symbol '😀'"),
    "probe of 20,000 characters": ({"train_alphabet": "abcd", "train_probe": "a" * 20_000}, "20,000 characters"),
}


@pytest.mark.parametrize("settings, message", SETTING_CASES.values(), ids=SETTING_CASES.keys())
def test_hostile_training_settings_are_one_message(train, settings, message):
    at = train
    if at.session_state["train_source"] != "Toy task":
        at.radio(key="train_source").set_value("Toy task")
        run(at)
    at.selectbox(key="train_task").set_value("copy")
    run(at)
    for key, value in settings.items():
        at.text_input(key=key).set_value(value)
    run(at)
    at.button(key="train_start").click()
    run(at)
    assert message in at.session_state["train_error"] and at.session_state["train_error"] in errors(at)
    assert "train_job" not in at.session_state and jobs.registry().running() == 0
    assert at.session_state["models"].names()[0] == "mine"
    at.text_input(key="train_alphabet").set_value("0123456789")
    at.text_input(key="train_probe").set_value("")
    run(at)


@pytest.mark.parametrize("part, value, message", [
    ("normalizer", {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "a"}, "content": "a" * 1000}] * 8}, "its normalizer must be null"),
    ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False},
     "its pre-tokenizer must be Metaspace then Punctuation"),
], ids=["a chain of Replace normalizers", "a backtracking Split pattern"])
def test_a_translation_checkpoint_whose_tokenizer_would_abort_is_refused_at_upload(train, part, value, message):
    """Issue 44: such a file said "Added", and the first sentence typed in Explore aborted the server."""
    from explore_models import build_models
    bundle = next(b for b in build_models() if b.name == "tiny-fra")
    data = checkpoint.to_bytes(bundle)
    tensors = st_load(data)
    info = json.loads(json.loads(data[8: 8 + int.from_bytes(data[:8], "little")])["__metadata__"]["explorer"])
    spec = json.loads(info["tokenizers"]["source"])
    spec[part] = value
    info["tokenizers"]["source"] = json.dumps(spec)
    at = train
    before = at.session_state["models"].names()
    upload(at, "train_upload", "fra.safetensors", st_save(tensors, metadata={
          "explorer": json.dumps(info)}), "application/octet-stream")
    run(at)
    assert any(e.startswith("This file was refused") and message in e for e in errors(at)), errors(at)
    assert at.session_state["models"].names() == before


def test_an_uploaded_translation_model_tokenizes_in_the_worker_and_its_abort_is_a_message(train, monkeypatch):
    """Explore on an uploaded model: its tokenizer runs in tokenizer_worker's process (app.py turns that on), so
    an abort in the library is one message on the page and the server (this process) goes on."""
    import os
    from explore_models import build_models
    from explorer.app.pages import explore
    from explorer.data import tokenizer_worker
    monkeypatch.setattr(explore, "_model_label", str)
    bundle = next(b for b in build_models() if b.name == "tiny-fra")
    at = train
    upload(at, "train_upload", "fra.safetensors", checkpoint.to_bytes(bundle),
          "application/octet-stream")
    run(at)
    explore_at = open_page(at, "explore")
    explore_at.selectbox(key="explore_model").set_value("fra")
    run(explore_at)
    explore_at.text_input(key="explore_input").set_value("the cat")
    run(explore_at)
    assert not errors(explore_at), errors(explore_at)
    worker = tokenizer_worker.worker_pid()
    assert worker is not None and worker != os.getpid()

    real_call = tokenizer_worker.call

    def aborting(json_text, op, arg, seconds=tokenizer_worker.CALL_SECONDS):
        """The issue's Replace chain, as if the whitelist had let it in: the library aborts on any text."""
        spec = json.loads(json_text)
        spec["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"String": "a"}, "content": "a" * 1000}] * 8}
        return real_call(json.dumps(spec), op, "a " + arg if isinstance(arg, str) else arg, seconds)
    monkeypatch.setattr(tokenizer_worker, "call", aborting)
    explore_at.text_input(key="explore_input").set_value("the dog")
    run(explore_at)
    assert any("own process ended (SIGABRT)" in e for e in errors(explore_at)), errors(explore_at)
    monkeypatch.setattr(tokenizer_worker, "call", real_call)
    explore_at.text_input(key="explore_input").set_value("the cat sat")
    run(explore_at)
    assert not errors(explore_at), errors(explore_at)  # a fresh worker answers
