"""The Train page under AppTest: train, stop, continue, open the model elsewhere, uploads, session end.

`run_every` never fires under AppTest, so tests poll by running the script again until the job is done.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer.checkpoints import checkpoint

from explorer import jobs
from explorer.training.recipes import MODEL_DEFAULTS, TRAIN_DEFAULTS
from tests import pig_latin
from tests.app_support import show_page, upload

APP = str(Path(__file__).resolve().parent.parent / "app.py")
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY = {"train_hidden": 16, "train_embed": 8, "train_attn_dim": 8, "train_batch_size": 16, "train_min_len": 2,
        "train_max_len": 4}


@pytest.fixture(autouse=True)
def no_jobs_left():
    """Each test starts and ends with no training job in the (process-wide) registry."""
    reg = jobs.registry()
    reg.stop_all()
    saved = reg.idle_timeout, reg.reap_interval, reg.max_running
    yield reg
    reg.stop_all()
    reg.idle_timeout, reg.reap_interval, reg.max_running = saved


def open_page(at: AppTest, url_pathname: str) -> AppTest:
    """Show a page registered with st.navigation."""
    show_page(at, url_pathname)
    return at.run()


def train_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    return open_page(at, "train")


def set_tiny(at: AppTest, steps: int) -> None:
    for key, value in {**TINY, "train_steps": steps}.items():
        at.number_input(key=key).set_value(value)
    at.text_input(key="train_alphabet").set_value("abcd")
    at.checkbox(key="train_use_target").set_value(False)  # tiny runs would reach 99 % and stop early
    at.run()


def run_until(at: AppTest, predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the training job"
        time.sleep(0.1)
        at.run()
    at.run()


def job(at: AppTest) -> jobs.TrainingJob:
    return at.session_state["train_job"]


def kill_between_evaluations(running: jobs.TrainingJob, timeout: float = 60.0) -> None:
    """SIGKILL the training process at a moment when it has trained steps since its last evaluation.

    The process is paused first and its messages drained, so the step the job reports is the step it dies at:
    a kill that landed right after an evaluation (nothing lost, so no note) cannot pass for one that lost steps."""
    import signal
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, "timed out waiting for steps after an evaluation"
        os.kill(running.pid, signal.SIGSTOP)
        seen = (-1, -1)
        while seen != (running.step, len(running.view().evals)):  # the reader has everything the process sent
            seen = (running.step, len(running.view().evals))
            time.sleep(0.3)
        if running.view().evals and running.step > running.view().evals[-1].step:
            os.kill(running.pid, signal.SIGKILL)
            return
        os.kill(running.pid, signal.SIGCONT)
        time.sleep(0.05)


def prepared(at: AppTest) -> jobs.TrainingJob:
    """The session's job once its process has prepared the data (a translation job's first message)."""
    run_until(at, lambda: not job(at).view().preparing)
    return job(at)


def progress_text(at: AppTest) -> str:
    return at.get("progress")[0].proto.text


def chart_points(at: AppTest, title: str) -> list[int]:
    """Number of points of each trace of the chart with this title (Plotly 7 ships arrays base64-encoded)."""
    for element in at.get("plotly_chart"):
        spec = json.loads(element.proto.spec)
        if title in str(spec["layout"].get("title", {}).get("text")):
            return [len(np.frombuffer(base64.b64decode(t["x"]["bdata"]), t["x"]["dtype"]))
                    if isinstance(t["x"], dict) else len(t["x"]) for t in spec["data"]]
    raise AssertionError(f"no chart titled {title!r}")


def test_page_offers_the_fast_defaults():
    at = train_page()
    assert not at.exception
    assert at.selectbox(key="train_task").value == "reverse"
    assert (at.number_input(key="train_min_len").value, at.number_input(key="train_max_len").value) == (5, 15)
    assert at.number_input(key="train_hidden").value == MODEL_DEFAULTS["hidden"]
    assert at.number_input(key="train_steps").value == 400  # reaches 99 % at step 225–325 (seeds 0–2)
    assert at.checkbox(key="train_use_target").value and at.number_input(key="train_target").value == 99.0
    assert at.checkbox(key="train_curriculum").value  # the recipe's length curriculum
    assert at.selectbox(key="train_attention").options == ["none", "dot", "scaled_dot", "additive"]
    assert not at.get("progress")  # nothing trains yet
    at.selectbox(key="train_task").set_value("dates").run()
    assert "train_curriculum" not in [box.key for box in at.checkbox]  # no input length to grow


def test_short_training_runs_to_completion_and_joins_the_session_models():
    at = train_page()
    set_tiny(at, steps=30)
    at.button(key="train_start").click().run()
    assert not at.exception and not at.error
    assert job(at).state in (jobs.RUNNING, jobs.FINISHED)
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    assert not at.exception
    assert job(at).state == jobs.FINISHED
    assert progress_text(at).startswith("Trained 30 steps")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Validation exact match"].endswith("%") and metrics["Alignment accuracy"].endswith("%")
    assert len(at.get("plotly_chart")) == 4  # loss, accuracy, probe attention, alignment
    assert chart_points(at, "Loss") == [30, 3]  # every step; an evaluation every 10 steps
    assert chart_points(at, "Accuracy") == [3, 3, 3]
    scrubber = at.select_slider(key="train_frame")
    assert scrubber.options[0] == "0" and scrubber.value == 30  # from before training to the end
    assert at.session_state["models"].names() == ["reverse-trained"]
    model = at.session_state["models"].get("reverse-trained")
    assert model.training["steps_done"] == 30 and not model.model.training
    assert model.training["curriculum"] == TRAIN_DEFAULTS["curriculum"]
    assert at.get("download_button")[0].proto.label.endswith("Download checkpoint")
    assert at.button(key="train_continue") and at.button(key="train_open_explore")
    assert not at.button(key="train_start").disabled  # settings usable again


def test_stop_mid_run_keeps_the_model_and_continue_trains_on_with_a_new_lr():
    at = train_page()
    set_tiny(at, steps=50_000)
    at.checkbox(key="train_curriculum").set_value(False).run()
    at.button(key="train_start").click().run()
    run_until(at, lambda: job(at).step >= 12)
    assert at.button(key="train_start").disabled  # one job per session
    # mid-training the model is already in the session's models, as a frozen snapshot copy
    snapshot = at.session_state["models"].get("reverse-trained")
    assert snapshot is not None and not any(p.requires_grad for p in snapshot.model.parameters())
    assert job(at).pid is not None and job(at).pid != os.getpid(), "it trains in a process of its own"
    assert "Step" in progress_text(at) and "left" in progress_text(at)
    at.button(key="train_stop").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING, timeout=20)
    stopped_at = job(at).step
    assert job(at).state == jobs.STOPPED and 12 <= stopped_at < 50_000
    assert progress_text(at).startswith(f"Stopped at step {stopped_at:,}")
    assert at.session_state["models"].get("reverse-trained").training["steps_done"] == stopped_at
    assert at.session_state["models"].get("reverse-trained").training["curriculum"] == 0  # switched off

    at.number_input(key="train_more_steps").set_value(20)
    at.number_input(key="train_more_lr").set_value(0.002)
    at.button(key="train_continue").click().run()
    assert not at.error
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    view = job(at).view()
    assert view.state == jobs.FINISHED and view.step == stopped_at + 20 and view.lr == 0.002
    assert [r.step for r in view.steps] == list(range(1, stopped_at + 21))  # one log, never reset
    assert at.session_state["models"].names() == ["reverse-trained"]
    assert at.session_state["models"].get("reverse-trained").training["steps_done"] == stopped_at + 20


def test_continue_after_the_training_process_was_killed_says_where_it_goes_on_from():
    at = train_page()
    set_tiny(at, steps=50_000)
    at.button(key="train_start").click().run()
    run_until(at, lambda: len(job(at).view().evals) >= 1)
    kill_between_evaluations(job(at))
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    assert any(e.value == "Training failed: the training process was killed (SIGKILL)" for e in at.error)
    killed_at, saved = job(at).step, job(at).view().evals[-1].step
    at.number_input(key="train_more_steps").set_value(5).run()
    at.button(key="train_continue").click().run()
    assert not at.exception and not at.error
    assert any(i.value == f"The last run's process ended at step {killed_at:,}: training goes on from its last "
               f"evaluation, at step {saved:,} (the model, optimizer and step count saved there)" for i in at.info)
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    assert job(at).state == jobs.FINISHED and job(at).step == saved + 5


def test_the_model_opens_on_the_explore_page_mid_training_and_the_job_survives_the_visit():
    at = train_page()
    set_tiny(at, steps=50_000)
    at.button(key="train_start").click().run()
    run_until(at, lambda: job(at).view().evals)  # a first evaluation snapshot exists
    at.button(key="train_open_explore").click().run()  # switches page, with ?model=…&input=…
    assert not at.exception
    assert at.title[0].value.endswith("Explore")
    assert at.session_state["explore_model"] == "reverse-trained"
    assert any("reverse-trained" in o for o in at.selectbox(key="explore_model").options)
    assert at.query_params["input"] == [job(at).probe_text] or at.query_params["input"] == job(at).probe_text
    assert job(at).state == jobs.RUNNING  # the rest of the app works while training goes on
    # Explore labels models through session state, which its format_func cannot reach when AppTest calls
    # it outside the script; hand AppTest a pure copy of the labels so the next run can send the selection
    from streamlit.runtime.state.common import TESTING_KEY
    box = at.selectbox(key="explore_model")
    labels = {o.split(" (")[0]: o for o in box.options}
    at.session_state[TESTING_KEY][box.id] = lambda name: labels.get(name, name)
    open_page(at, "train")  # come back: the live panel is still there, and the settings too
    assert not at.exception and "Step" in progress_text(at)
    assert at.number_input(key="train_hidden").value == TINY["train_hidden"]
    assert at.text_input(key="train_alphabet").value == "abcd"
    at.button(key="train_stop").click().run()
    assert job(at).state == jobs.STOPPED


def test_when_every_slot_is_busy_the_start_waits_and_the_page_shows_its_place_in_the_queue(no_jobs_left):
    no_jobs_left.max_running = 0
    at = train_page()
    set_tiny(at, steps=20)
    at.button(key="train_start").click().run()
    assert not at.error and job(at).state == jobs.QUEUED and job(at).pid is None
    assert any(i.value.startswith("Waiting for a free training slot: next in the queue") for i in at.info)
    assert at.button(key="train_start").disabled
    at.button(key="train_stop").click().run()  # leaves the queue
    assert job(at).state == jobs.STOPPED and no_jobs_left.waiting() == 0


def test_a_bad_checkpoint_upload_is_refused_with_a_message_and_a_good_one_is_added(make_random_bundle):
    at = train_page()
    upload(at, "train_upload", "model.pt", b"\x80\x04\x95 pickled torch model", "application/octet-stream")
    at.run()
    assert not at.exception
    assert any("refused" in e.value and "pickled" in e.value for e in at.error)
    assert at.session_state["models"].names() == []

    good = checkpoint.to_bytes(make_random_bundle())
    upload(at, "train_upload", "mine.safetensors", good, "application/octet-stream")
    at.run()
    assert not at.exception and any("Added" in s.value for s in at.success)
    assert at.session_state["models"].names() == ["mine"]


def test_a_bad_tsv_is_refused_with_line_numbers():
    at = train_page()
    at.radio(key="train_source").set_value("Translation (your TSV file)").run()
    assert at.radio(key="train_unit").value == "auto"  # the run length comes from the data
    upload(at, "train_tsv", "pairs.tsv", b"only one column\nstill one\n", "text/plain")
    at.run()
    assert not at.exception
    assert "line 1: expected 2 or 3 tab-separated columns" in at.error[0].value
    at.button(key="train_start").click().run()
    assert "line 1" in at.error[0].value and "train_job" not in at.session_state

    partly = (FIXTURES / "eng-fra-malformed.tsv").read_bytes()
    upload(at, "train_tsv", "fra.tsv", partly, "text/plain")
    at.run()
    assert any("sentence pairs" in s.value for s in at.success)
    assert at.warning[0].value == ("4 lines of fra.tsv skipped: 1 expected 2 or 3 tab-separated columns, found 1 "
                                   "(line 2); 1 expected 2 or 3 tab-separated columns, found 4 (line 5); "
                                   "1 empty target (line 6); 1 empty source (line 7)")


def test_translation_from_an_uploaded_tsv_trains():
    rows = "".join(f"go {w}\tva {w}\n" for w in ["home", "now", "there", "away", "back", "up"] * 5)
    at = train_page()
    at.radio(key="train_source").set_value("Translation (your TSV file)").run()
    upload(at, "train_tsv", "go.tsv", rows.encode(), "text/plain")
    at.run()
    at.radio(key="train_unit").set_value("epochs").run()
    for key, value in {"train_hidden": 16, "train_embed": 8, "train_attn_dim": 8, "train_batch_size": 8}.items():
        at.number_input(key=key).set_value(value)
    at.number_input(key="train_epochs").set_value(2.0)
    at.run()
    at.button(key="train_start").click().run()
    assert not at.error
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    assert job(at).state == jobs.FINISHED and at.session_state["models"].names() == ["go-trained"]


def test_the_job_ends_when_its_session_goes_away(no_jobs_left):
    no_jobs_left.idle_timeout, no_jobs_left.reap_interval = 5.0, 0.1  # above a render's time on a loaded machine
    at = train_page()
    set_tiny(at, steps=50_000)
    at.button(key="train_start").click().run()
    running = job(at)
    for _ in range(15):  # the page keeps rendering (the browser's fragment refresh): the job lives
        time.sleep(0.1)
        at.run()
    assert running.state == jobs.RUNNING
    # the session goes quiet: no heartbeat for longer than the idle timeout
    deadline = time.monotonic() + 30
    while running.state == jobs.RUNNING:
        assert time.monotonic() < deadline, "the reaper did not stop the abandoned job"
        time.sleep(0.1)
    assert running.state == jobs.STOPPED and no_jobs_left.running() == 0


# --- your own data (issue 26) ---------------------------------------------------------------------------

PIG = "".join(f"{s}\t{t}\n" for s, t in pig_latin.pairs(300)).encode()


def upload_pig(at: AppTest) -> None:
    at.radio(key="train_source").set_value("Translation (your TSV file)").run()
    upload(at, "train_tsv", "pig.tsv", PIG, "text/plain").run()


def test_a_small_file_gets_the_clis_defaults_a_run_sized_by_the_data_and_the_typed_probe():
    from explorer import defaults, settings
    at = train_page()
    upload_pig(at)
    assert not at.exception
    assert at.number_input(key="train_hidden").value == defaults.SMALL_MODEL["hidden"]
    assert at.number_input(key="train_max_tokens").value == settings.setting("max_tokens").toy
    assert at.number_input(key="train_min_freq").value == settings.setting("min_freq").toy
    probe = pig_latin.pairs(300)[5][0]
    at.text_input(key="train_probe").set_value(probe).run()
    at.button(key="train_start").click().run()
    assert not at.error, at.error[0].value
    started = prepared(at)
    started.stop()
    started.join(30)
    cfg = started.config
    assert cfg.steps == defaults.MIN_STEPS and cfg.stop_patience == defaults.STOP_PATIENCE  # 300 pairs: the floor
    assert started.probe_text == probe
    assert started.snapshot().examples, "the checkpoint keeps held-out pairs for Explore"


def test_an_unreadable_probe_sentence_is_refused_with_a_message():
    at = train_page()
    upload_pig(at)
    at.text_input(key="train_probe").set_value(" ").run()
    at.text_input(key="train_probe").set_value("x" * 2000).run()
    at.button(key="train_start").click().run()
    assert "train_job" not in at.session_state and "characters; the limit" in at.error[0].value


def test_a_finished_translation_shows_bleu_and_chrf_beside_exact_match():
    at = train_page()
    upload_pig(at)
    at.radio(key="train_unit").set_value("steps").run()
    for key, value in {"train_hidden": 16, "train_embed": 8, "train_attn_dim": 8, "train_batch_size": 16,
                       "train_steps": 20}.items():
        at.number_input(key=key).set_value(value)
    at.run()
    at.button(key="train_start").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert {"Held-out pairs", "Held-out exact match", "BLEU", "chrF"} <= set(metrics)
    assert 0 <= float(metrics["BLEU"]) <= 100 and 0 <= float(metrics["chrF"]) <= 100
    assert int(metrics["Held-out pairs"]) == 15  # 5 % of 300
    # issue 43: each accuracy says which data it was measured on, and the smoothed loss is explained
    headline = next(m for m in at.metric if m.label == "Validation exact match")
    assert "held-out pairs" in headline.proto.help and "never trained on" in headline.proto.help
    assert any("The model as it is now, on the file's held-out pairs" in m.value for m in at.markdown)
    captions = " ".join(c.value for c in at.caption)
    assert "label smoothing 0.1" in captions and "levels at about" in captions
    assert "Validation: the file's held-out pairs, never trained on" in captions


def test_continue_stops_at_the_target_when_stop_at_target_is_on():
    at = train_page()
    set_tiny(at, steps=20)
    at.button(key="train_start").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    at.checkbox(key="train_use_target").set_value(True).run()
    at.number_input(key="train_target").set_value(1.0).run()
    at.number_input(key="train_more_steps").set_value(3000).run()
    at.button(key="train_continue").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING, timeout=120)
    assert "reached the target" in job(at).view().message
    assert job(at).step < 20 + 3000


def test_a_run_still_improving_at_its_end_is_called_undertrained_and_continue_trains_on():
    """Issue 26: the page says plainly when a finished model is undertrained and points at Continue."""
    at = train_page()
    set_tiny(at, steps=60)  # stopped while validation still climbs (40-60 steps)
    at.button(key="train_start").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING, timeout=120)
    evals = job(at).view().evals
    rise = evals[-1].valid_token - max(e.valid_token for e in evals if e.step <= 0.75 * evals[-1].step)
    warned = [w.value for w in at.warning if "Undertrained" in w.value]
    assert (rise >= 0.01) == bool(warned), (rise, warned)  # the page's verdict is the rule's, on these numbers
    assert warned and "Continue training" in warned[0], [(e.step, e.valid_token, e.train_exact, e.valid_exact) for e in evals]
    at.number_input(key="train_more_steps").set_value(20).run()
    at.button(key="train_continue").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING, timeout=120)
    assert job(at).step == 80


def test_a_refused_continue_leaves_the_model_as_it_was():
    at = train_page()
    set_tiny(at, steps=10)
    at.button(key="train_start").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    models = at.session_state["models"]
    before = (models.get("reverse-trained"), models.version("reverse-trained"), job(at).step)
    at.number_input(key="train_more_steps").set_value(jobs.LIMITS.max_steps).run()
    at.button(key="train_continue").click().run()
    assert "over the limit" in at.error[0].value
    assert (models.get("reverse-trained"), models.version("reverse-trained"), job(at).step) == before


def test_the_upload_result_stays_in_view_with_its_section_open(make_random_bundle):
    at = train_page()
    assert not at.expander[-1].proto.expanded
    upload(at, "train_upload", "mine.safetensors", checkpoint.to_bytes(make_random_bundle()),
          "application/octet-stream").run()
    box = [e for e in at.expander if e.label == "Upload a checkpoint"][0]
    assert box.proto.expanded and any("Added" in s.value for s in box.success)
    at.run()  # and on every later rerun
    box = [e for e in at.expander if e.label == "Upload a checkpoint"][0]
    assert box.proto.expanded and any("Added" in s.value for s in box.success)


def test_an_uploaded_checkpoint_trains_further_and_the_original_stays(make_random_bundle):
    import torch
    at = train_page()
    original = make_random_bundle()
    upload(at, "train_upload", "mine.safetensors", checkpoint.to_bytes(original),
          "application/octet-stream").run()
    at.selectbox(key="train_base").set_value("mine").run()
    assert at.number_input(key="train_hidden").disabled  # its architecture is kept
    at.number_input(key="train_steps").set_value(12).run()
    at.checkbox(key="train_use_target").set_value(False).run()
    at.button(key="train_start").click().run()
    assert not at.error, at.error[0].value
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    models = at.session_state["models"]
    assert models.names() == ["mine", "mine-more"]
    more, mine = models.get("mine-more"), models.get("mine")
    assert more.training["steps_done"] == 12 and more.model.cfg == mine.model.cfg
    assert any(not torch.equal(a, b) for a, b in zip(more.model.parameters(), mine.model.parameters()))
    for a, b in zip(mine.model.parameters(), original.model.parameters()):
        assert torch.equal(a, b), "the uploaded model is unchanged"


def test_a_translation_model_trains_further_only_on_a_file_it_can_read():
    from explorer.training.recipes import translation_setup
    bundle, _, _ = translation_setup(PIG, "pig", {"embed": 8, "hidden": 16, "attn_dim": 8})
    at = train_page()
    upload(at, "train_upload", "pig.safetensors", checkpoint.to_bytes(bundle),
          "application/octet-stream").run()
    at.selectbox(key="train_base").set_value("pig").run()
    assert at.radio(key="train_source").value == "Translation (your TSV file)"
    at.radio(key="train_unit").set_value("steps").run()
    at.number_input(key="train_steps").set_value(5).run()
    at.button(key="train_start").click().run()
    assert "upload a TSV file" in at.error[0].value and "train_job" not in at.session_state
    other = "".join(f"привет {w}\tздравствуй {w}\n" for w in ("дом", "кот", "лес") * 10).encode()
    upload(at, "train_tsv", "fr.tsv", other, "text/plain").run()
    at.button(key="train_start").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING)  # the file is read in the job's process
    assert job(at).state == jobs.FAILED and not at.exception
    assert any("vocabulary does not fit pig-more" in e.value for e in at.error)
    more = "".join(f"{s}\t{t}\n" for s, t in pig_latin.pairs(200, seed=7)).encode()
    upload(at, "train_tsv", "more.tsv", more, "text/plain").run()
    at.button(key="train_start").click().run()
    assert not at.error, at.error[0].value
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    assert job(at).state == jobs.FINISHED and at.session_state["models"].get("pig-more") is not None


# --- your own data without surprises (issue 43) --------------------------------------------------------

def test_the_steps_box_shows_the_steps_the_run_plans():
    from explorer import defaults
    at = train_page()
    at.radio(key="train_source").set_value("Translation (your TSV file)").run()
    assert at.text_input(key="train_steps_auto").value == "set by the data"
    upload_pig(at)
    shown = at.number_input(key="train_steps").value
    assert shown == defaults.MIN_STEPS  # 285 training pairs: 12 epochs is under the floor
    at.button(key="train_start").click().run()
    started = prepared(at)
    started.stop()
    started.join(30)
    assert started.config.steps == shown


def test_a_five_pair_file_is_warned_about_before_training():
    at = train_page()
    at.radio(key="train_source").set_value("Translation (your TSV file)").run()
    rows = b"".join(f"{s}\t{t}\n".encode() for s, t in pig_latin.pairs(6))
    upload(at, "train_tsv", "six.tsv", rows, "text/plain").run()
    assert any(w.value.startswith("Only 5 training pairs: a model learns little") for w in at.warning)


def test_one_token_targets_lead_with_exact_match_and_chrf_and_say_why_not_bleu():
    at = train_page()
    at.radio(key="train_source").set_value("Translation (your TSV file)").run()
    rows = "".join(f"{w}\t{i}\n" for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six",
                                                          "seven", "eight", "nine"] * 30)).encode()
    upload(at, "train_tsv", "numbers.tsv", rows, "text/plain").run()
    at.radio(key="train_unit").set_value("steps").run()
    for key, value in {"train_hidden": 16, "train_embed": 8, "train_attn_dim": 8, "train_batch_size": 16,
                       "train_steps": 10}.items():
        at.number_input(key=key).set_value(value)
    at.run()
    at.button(key="train_start").click().run()
    run_until(at, lambda: job(at).state != jobs.RUNNING)
    labels = [m.label for m in at.metric]
    assert labels.index("chrF") < labels.index("BLEU")
    assert any(i.value.startswith("BLEU says little here: 100% of the references are shorter than 4 tokens")
               for i in at.info)


def test_the_servers_training_count_refreshes_on_its_own(monkeypatch):
    """The footer is a fragment with a refresh of its own: it followed other sessions' jobs only when this
    session acted, and said "2 of 2, 2 waiting" for minutes after they ended."""
    import streamlit
    made = []
    real = streamlit.fragment

    def spy(func=None, *, run_every=None, **kwargs):
        made.append((getattr(func, "__name__", None), run_every))
        return real(func, run_every=run_every, **kwargs)
    monkeypatch.setattr(streamlit, "fragment", spy)
    at = train_page()
    assert not at.exception
    assert any(name == "_server_footer" and run_every for name, run_every in made), made
    assert any("Trainings running on this server: 0 of" in c.value for c in at.caption)


def test_a_training_process_does_not_run_the_app_again():
    """multiprocessing runs the starting process's main script in each job process as __mp_main__; under
    Streamlit that is app.py: every training start ran the whole app there and logged 117 'missing
    ScriptRunContext' lines."""
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", f"import runpy; runpy.run_path({APP!r}, run_name='__mp_main__')"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "ScriptRunContext" not in run.stderr and "Session state does not function" not in run.stderr


def test_a_file_being_prepared_says_so_and_stop_ends_it_at_once(monkeypatch):
    """The file is prepared in the job's process: the page says so, Stop ends it there and then (it ran in the
    server's thread before the job existed: the page greyed out and nothing could stop it)."""
    from tests.slow_data import slow
    real = jobs.translation_job

    def slowly(*args, **kwargs):
        made = real(*args, **kwargs)
        made.recipe = slow(made.recipe)  # a minute to prepare
        return made
    monkeypatch.setattr("explorer.jobs.translation_job", slowly)
    at = train_page()
    upload_pig(at)
    at.button(key="train_start").click().run()
    assert not at.error and not at.exception
    started = job(at)
    run_until(at, lambda: started.pid is not None)
    assert started.view().preparing
    assert any(p.proto.text.startswith("Preparing the data: reading the file") for p in at.get("progress"))
    assert any(i.value == "The model is made as soon as the data is prepared." for i in at.info)
    pid, asked = started.pid, time.monotonic()
    at.button(key="train_stop").click().run()
    assert started.state == jobs.STOPPED and time.monotonic() - asked < 15
    at.run()
    assert not at.exception and at.session_state["models"].names() == []
    assert any(p.proto.text.startswith("Stopped before its first step") for p in at.get("progress"))
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the preparing process went on"
        time.sleep(0.05)


def test_the_pairs_left_out_for_length_are_said_on_the_page_as_on_the_command_line():
    at = train_page()
    at.radio(key="train_source").set_value("Translation (your TSV file)").run()
    long = " ".join(["word"] * 50)
    upload(at, "train_tsv", "long.tsv", PIG + f"{long}\tshort\n".encode(), "text/plain").run()
    at.button(key="train_start").click().run()
    started = prepared(at)
    started.stop()
    started.join(30)
    at.run()
    assert any(w.value == "1 of 301 pairs left out: longer than 40 pieces could hold (line 301)" for w in at.warning)


def test_the_lines_training_skipped_are_said_with_the_files_name():
    at = train_page()
    at.radio(key="train_source").set_value("Translation (your TSV file)").run()
    upload(at, "train_tsv", "mine.tsv", PIG + b"no tab here\n", "text/plain").run()
    at.button(key="train_start").click().run()
    started = prepared(at)
    started.stop()
    started.join(30)
    at.run()
    note = "1 line of mine.tsv skipped: 1 expected 2 or 3 tab-separated columns, found 1 (line 301)"
    assert started.notes == [note] and any(w.value == note for w in at.warning)


def _uploaded_files_in(state) -> list:
    """Every Streamlit UploadedFile a session's state still references (each holds its file's bytes)."""
    from streamlit.runtime.uploaded_file_manager import UploadedFile
    return [state[k] for k in state if isinstance(state[k], UploadedFile)]


def test_an_uploaded_tsv_is_held_once_by_the_server_within_the_uploads_budget(monkeypatch):
    """Streamlit's own copy of an upload (its file manager and the box's value) is let go once the page has
    taken the file: the bytes are held once per server in the budgeted store, however many sessions send it."""
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
    from explorer.app.pages import common
    common.parsed_uploads.clear()
    dropped = []
    remove = MemoryUploadedFileManager.remove_file
    monkeypatch.setattr(MemoryUploadedFileManager, "remove_file",
                        lambda self, session_id, file_id: (dropped.append(file_id), remove(self, session_id, file_id)))
    sessions = [train_page(), train_page()]
    for at in sessions:
        at.radio(key="train_source").set_value("Translation (your TSV file)").run()
        before = len(dropped)
        upload(at, "train_tsv", "pig.tsv", PIG, "text/plain").run()
        assert not at.exception
        assert len(dropped) == before + 1  # Streamlit's manager let its copy go
        assert not _uploaded_files_in(at.session_state)  # nor does the box's value: a new, empty box
        assert at.file_uploader(key=f"train_tsv_box{at.session_state['train_tsv_round']}").value is None
        assert any(m.value.startswith("Sentence pairs: **pig\\.tsv**") for m in at.markdown)
        assert any("300 sentence pairs" in s.value for s in at.success)
    store = common.parsed_uploads()
    held = [size for (_, name, what), (_, size) in store._data.items() if what == "bytes"]
    assert held == [len(PIG)] and store.used <= store.max_bytes  # once for both sessions, in the budget


def test_an_upload_the_server_let_go_of_is_a_message_at_start_and_remove_empties_the_page(monkeypatch):
    """A held file makes room for newer ones (least recently used first): the session that sent it is told to
    upload it again when it starts, instead of training on nothing or failing; Remove lets a file go."""
    from explorer.app.pages import common
    common.parsed_uploads.clear()
    monkeypatch.setenv("EXPLORER_PARSED_TSV_MB", str(2.5 * len(PIG) / 1e6))
    try:
        first, second = train_page(), train_page()
        upload_pig(first)
        other = PIG.replace(b"ay", b"ai")
        second.radio(key="train_source").set_value("Translation (your TSV file)").run()
        upload(second, "train_tsv", "other.tsv", other, "text/plain").run()
        assert any("300 sentence pairs" in s.value for s in second.success)
        first.button(key="train_start").click().run()
        assert not first.exception
        assert first.session_state["train_error"] == ("the server no longer holds pig.tsv (room was made for newer "
                                                      "uploads): upload it again")
        assert "train_job" not in first.session_state
        second.button(key="train_tsv_remove").click().run()
        assert second.session_state["train_tsv"] is None
        assert not any(m.value.startswith("Sentence pairs: **") for m in second.markdown)
    finally:
        common.parsed_uploads.clear()


def test_the_page_keeps_its_places_when_a_message_comes_and_goes():
    """An error or a notice above the setup and the live panel moved them on the runs it came and went, and a
    moved element is drawn anew (the live curves from scratch, the live panel a fragment with a new id)."""
    at = train_page()
    places = [i for i, node in at.main.children.items() if getattr(node, "type", None) == "expander"]
    assert len(places) == 2  # setting up a run, uploading a checkpoint
    at.session_state["train_error"] = "a problem the page reports"
    at.run()
    assert at.error and at.error[0].value == "a problem the page reports"
    assert [i for i, node in at.main.children.items() if getattr(node, "type", None) == "expander"] == places
    del at.session_state["train_error"]
    at.run()
    assert not at.error
    assert [i for i, node in at.main.children.items() if getattr(node, "type", None) == "expander"] == places
