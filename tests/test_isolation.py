"""Many users at once: shared models are read-only, sessions do not see each other, a session that goes
away gives back its training job and its memory.

- The shipped models are loaded once for every session, and after sessions have traced, stepped,
  intervened (mask, pin, force, temperature), beam-searched, teacher-forced, compared and trained,
  their weights and readable config are byte-identical to the files on disk (training works on a
  private copy; the shared model itself cannot even be trained).
- Two sessions training at once each see only their own model and progress; stopping one leaves the
  other running.
- A session whose browser tab is gone loses its job to the reaper, and the job's model is freed.

Under AppTest every session has the same id, so these tests give each AppTest its own id (as the
server does) through the Train page's `_session_id`.
"""

from __future__ import annotations

import gc
import hashlib
import json
import time
import weakref
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from explorer.checkpoints import checkpoint, registry

from explorer import jobs
from explorer.training import comparison
from explorer.errors import ExplorerError
from explorer.app.pages import common
from explorer.app.pages import train as train_page
from explorer.checkpoints.registry import private_copy
from explorer.training.train import TrainConfig
from tests.app_support import show_page

from explore_models import NAMES, write_models

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 120
TINY = {"train_hidden": 16, "train_embed": 8, "train_attn_dim": 8, "train_batch_size": 16, "train_min_len": 2,
        "train_max_len": 4}


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The test checkpoints as the shipped models, with a count of how often each is loaded."""
    folder = write_models(tmp_path_factory.mktemp("isolation-models"))
    loads: dict[str, int] = {}
    real_load = registry.load_shipped

    def counting_load(name: str):
        loads[name] = loads.get(name, 0) + 1
        return real_load(name)

    saved = checkpoint.PRETRAINED_DIR
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checkpoint, "PRETRAINED_DIR", folder)
        mp.setattr(registry, "load_shipped", counting_load)  # what the pages call, on first use
        st.cache_resource.clear()
        yield loads
    assert checkpoint.PRETRAINED_DIR == saved
    st.cache_resource.clear()


@pytest.fixture(autouse=True)
def own_session_ids(monkeypatch):
    """Each AppTest gets the session id stored in its state (the server gives each tab its own)."""
    monkeypatch.setattr(train_page, "_session_id", lambda: st.session_state.get("test_session_id", "no-session"))
    reg = jobs.registry()
    reg.stop_all()
    saved = reg.idle_timeout, reg.gone_grace, reg.reap_interval, reg.session_alive
    yield reg
    reg.stop_all()
    reg.idle_timeout, reg.gone_grace, reg.reap_interval, reg.session_alive = saved


def fingerprint(bundle) -> dict[str, str]:
    """A hash of every weight tensor's bytes, plus the readable config (without its save time)."""
    out = {k: hashlib.sha256(v.detach().contiguous().numpy().tobytes()).hexdigest()
           for k, v in bundle.model.state_dict().items()}
    info = {k: v for k, v in checkpoint.describe(bundle).items() if k != "saved_at"}
    out["config"] = hashlib.sha256(json.dumps(info, sort_keys=True, default=str).encode()).hexdigest()
    return out


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def session(sid: str, page: str = "explore") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["test_session_id"] = sid
    run(at)
    return open_page(at, page) if page != "explore" else at


def open_page(at: AppTest, url_pathname: str) -> AppTest:
    """Show a page registered with st.navigation."""
    show_page(at, url_pathname)
    return run(at)


def set_tiny(at: AppTest, task: str, steps: int) -> None:
    at.selectbox(key="train_task").set_value(task)
    run(at)
    for key, value in {**TINY, "train_steps": steps}.items():
        at.number_input(key=key).set_value(value)
    at.text_input(key="train_alphabet").set_value("abcd")
    at.checkbox(key="train_use_target").set_value(False)
    run(at)


def wait_until(predicate, timeout: float = 30.0, at: AppTest | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
        if at is not None:
            run(at)


# --- shared models are read-only ---------------------------------------------------------------------

def use_explore(at: AppTest) -> None:
    """Trace and step on every shipped model; on `copy` also intervene, beam-search and teacher-force."""
    for name, text in (("dates", "3 March 2021"), ("reverse-none", "1234"), ("tiny-fra", "I am happy."),
                       ("copy", "2718")):
        at.selectbox(key="explore_model").set_value(name)
        run(at)
        at.text_input(key="explore_input").set_value(text)
        run(at)
        if not at.button(key="explore_next").disabled:  # an untrained model may stop after one step
            at.button(key="explore_next").click()
            run(at)
    at.select_slider(key="explore_temperature").set_value(0.25)
    at.multiselect(key="explore_masked").set_value([0])
    at.number_input(key="explore_pin_step").set_value(1)
    at.selectbox(key="explore_pin_pos").set_value(1)
    at.button(key="explore_pin").click()
    run(at)
    at.selectbox(key="explore_force_token").set_value("9")
    at.button(key="explore_force").click()
    run(at)
    active = next(m.value for m in at.markdown if m.value.startswith("**Active:**"))
    assert all(what in active for what in ("τ = 0.25", "masked x1", "pinned to x2", "forced to '9'")), active
    at.segmented_control(key="explore_mode").set_value("beam")
    run(at)
    at.segmented_control(key="explore_mode").set_value("teacher")
    run(at)
    at.text_input(key="explore_target").set_value("2718")
    run(at)
    assert not at.error, [e.value for e in at.error]


def test_shipped_models_are_loaded_once_and_stay_byte_identical(shipped):
    first = session("reader")
    models = {name: common.shipped_model(name) for name in NAMES}
    before = {name: fingerprint(bundle) for name, bundle in models.items()}
    on_disk = {name: fingerprint(checkpoint.load(name)) for name in NAMES}
    assert before == on_disk

    use_explore(first)
    second = session("trainer", "train")  # a second session, training at the same time as it explores
    set_tiny(second, "copy", steps=40)
    second.button(key="train_start").click()
    run(second)
    with pytest.MonkeyPatch.context() as mp:  # accuracy curves (shorter here) and side-by-side traces
        mp.setattr(comparison, "CURVE_LENGTHS", (1, 2, 3, 20))
        mp.setattr(comparison, "CURVE_SAMPLES", 20)
        open_page(first, "compare")
    wait_until(lambda: second.session_state["train_job"].state != jobs.RUNNING, at=second)
    assert second.session_state["train_job"].state == jobs.FINISHED

    # training a shipped model works on a private copy ...
    shared = common.shipped_model("copy")
    tuned = private_copy(shared, "copy-tuned")
    cfg = TrainConfig(steps=5, batch_size=8, eval_every=5, eval_samples=8)
    job = jobs.bundle_job(tuned, cfg)
    job.start()
    assert job.join(60) and job.state == jobs.FINISHED
    weights = lambda fp: {k: v for k, v in fp.items() if k != "config"}  # noqa: E731
    assert weights(fingerprint(job.snapshot())) != weights(before["copy"]), "the private copy did train"
    # ... and the shared model itself is refused (it has no gradients to train)
    with pytest.raises(ExplorerError, match="read-only: train a private copy"):
        jobs.bundle_job(shared, cfg)

    for name in NAMES:
        bundle = common.shipped_model(name)
        assert bundle is models[name], f"{name} was loaded again"
        assert fingerprint(bundle) == before[name], f"{name} changed"
        assert not bundle.model.training and not any(p.requires_grad for p in bundle.model.parameters())
        assert shipped[name] == 1, f"{name} loaded {shipped[name]} times"
    assert fingerprint(checkpoint.load("copy")) == on_disk["copy"], "the file on disk is untouched"


# --- sessions do not see each other ------------------------------------------------------------------

def test_two_sessions_training_at_once_see_only_their_own_models_and_progress(shipped):
    a, b = session("alice", "train"), session("bob", "train")
    set_tiny(a, "copy", steps=50_000)
    set_tiny(b, "reverse", steps=50_000)
    a.button(key="train_start").click()
    run(a)
    b.button(key="train_start").click()
    run(b)
    job_a, job_b = a.session_state["train_job"], b.session_state["train_job"]
    assert job_a is not job_b and job_a.pid != job_b.pid
    reg = jobs.registry()
    assert reg.get("alice") is job_a and reg.get("bob") is job_b
    assert job_a.state == job_b.state == jobs.RUNNING and reg.running() == 2

    run(a)  # each job put its untrained model into its own session's models when it started
    run(b)
    assert a.session_state["models"].names() == ["copy-trained"]
    assert b.session_state["models"].names() == ["reverse-trained"]
    assert a.session_state["models"].get("copy-trained").task.name == "copy"
    assert b.session_state["models"].get("reverse-trained").task.name == "reverse"
    assert any(h.value == "Training copy-trained" for h in a.subheader)
    assert not any("reverse" in h.value for h in a.subheader)
    assert any(h.value == "Training reverse-trained" for h in b.subheader)

    a.button(key="train_stop").click()  # one session stops: the other trains on
    run(a)
    wait_until(lambda: job_a.state != jobs.RUNNING, timeout=60)  # its process's last evaluation and state
    assert job_a.state == jobs.STOPPED and job_b.state == jobs.RUNNING
    step_b = job_b.step
    wait_until(lambda: job_b.step > step_b)
    assert job_a.state == jobs.STOPPED

    at_a_explore = open_page(a, "explore")
    options = at_a_explore.selectbox(key="explore_model").options
    assert any(o.startswith("copy-trained") for o in options)
    assert not any(o.startswith("reverse-trained") for o in options)
    b.button(key="train_stop").click()
    run(b)
    wait_until(lambda: job_b.state != jobs.RUNNING, timeout=60)
    assert job_b.state == jobs.STOPPED


# --- a session that goes away ------------------------------------------------------------------------

def test_a_closed_tab_loses_its_job_and_the_jobs_memory_is_freed(shipped, own_session_ids, monkeypatch):
    reg = own_session_ids
    gone: set[str] = set()
    reg.gone_grace, reg.reap_interval = 0.3, 0.05
    # the server asks Streamlit whether the tab is still connected; here the test says so
    monkeypatch.setattr(train_page, "_session_alive", lambda sid: sid not in gone)
    stays, leaves = session("stays", "train"), session("leaves", "train")
    for at in (stays, leaves):
        set_tiny(at, "copy", steps=50_000)
        at.button(key="train_start").click()
        run(at)
    job = leaves.session_state["train_job"]
    model_ref, job_ref = weakref.ref(job.snapshot().model), weakref.ref(job)
    assert job.state == jobs.RUNNING and reg.running() == 2

    gone.add("leaves")  # the tab closes: its script never runs again
    del leaves, job, at
    wait_until(lambda: reg.get("leaves") is None)
    assert reg.get("stays") is not None and reg.get("stays").state == jobs.RUNNING
    wait_until(lambda: job_ref() is None or job_ref().state != jobs.RUNNING)
    if job_ref() is not None:
        job_ref().join(10)
    deadline = time.monotonic() + 10
    while (model_ref() is not None or job_ref() is not None) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert job_ref() is None and model_ref() is None, "the closed session's job and model are still held"
    assert reg.running() == 1


def test_one_session_cannot_open_another_sessions_model_by_name(shipped):
    """A link naming a model trained in another session is a warning, not that session's model."""
    owner = session("owner")
    owner.session_state["models"].put(private_copy(common.shipped_model("copy"), "secret-model"))
    visitor = AppTest.from_file(APP, default_timeout=TIMEOUT)
    visitor.query_params["model"] = "secret-model"
    visitor.query_params["input"] = "12"
    run(visitor)
    assert any("secret-model" in w.value for w in visitor.warning)
    assert visitor.session_state["explore_model"] == "copy"
    assert "secret-model" not in visitor.session_state["models"].names()
