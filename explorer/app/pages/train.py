"""The Train page: set up a task (or a TSV) and a model, train it in the background, watch it learn.

The page only lays out widgets and figures: the job (`explorer.jobs`) trains in a process of its own and
the page reads a copy of its progress on every rerun. While a job runs, a fragment refreshes the live
panel every two seconds, so the rest of the app stays usable and the page can be left and revisited.
Session state keys start with `train_`.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

from explorer import defaults, settings
from explorer.errors import ExplorerError
from explorer.limits import LIMITS
from explorer.app.figures.attention import attention_heatmap
from explorer.app.figures.training import accuracy_figure, alignment_figure, loss_figure
from explorer.defaults import TASKS
from explorer.app.pages import common
from explorer.data.tasks import TaskSpec, make_task
from explorer.app.engine_link import engine_module

checkpoint = engine_module("explorer.checkpoints.checkpoint")
jobs = engine_module("explorer.jobs")
model_registry = engine_module("explorer.checkpoints.registry")
training = engine_module("explorer.training.train")
validation = engine_module("explorer.training.validation")

TOY, TSV = "Toy task", "Translation (your TSV file)"
NEW_MODEL = ""  # "Start from": a new model (else the name of a session model to train further)
UNITS = {"auto": "as the data needs", "steps": "steps", "epochs": "epochs"}
REFRESH_SECONDS = 2.0  # the live panel's refresh while training (each refresh takes CPU from training)
FOOTER_SECONDS = 5.0  # the server's training count refreshes this often
MAX_SCORED = 1000  # held-out pairs scored at most (greedy decoding of 1,000 short sentences: seconds on one core)

# The settings' widgets (key "train_" + the setting's name): label, range, step and default per data source come
# from explorer/settings.py, where every difference from the CLI is written with its reason.
MODEL_WIDGETS = ("cell", "attention", "hidden", "embed", "attn_dim", "layers", "bidirectional")
TRAIN_WIDGETS = ("steps", "batch_size", "lr", "seed", "teacher_forcing")
# Page-only: the steps offered when a translation run's unit is steps (until then the data sets them), and the
# target offered when "Stop at target" is ticked for one.
TSV_STEPS, TSV_TARGET = 3000, 90.0


def source_defaults(source: str) -> dict:
    """Every model and training widget's value for a data source: the settings' defaults on the page; a
    translation model is the small one until a file is uploaded (then defaults.translation_model for its pairs)."""
    kind = settings.TOY if source == TOY else settings.TRANSLATION
    values = {name: settings.setting(name).default(kind, app=True) for name in (*MODEL_WIDGETS, *TRAIN_WIDGETS)}
    if source == TSV:
        values.update({key: defaults.SMALL_MODEL[key] for key in ("embed", "hidden", "attn_dim")})
    target = settings.setting("target_accuracy").default(kind, app=True)
    return {**values, "unit": "steps" if source == TOY else "auto", "steps": values["steps"] or TSV_STEPS,
            "epochs": defaults.EPOCHS, "use_target": target is not None,
            "target": 100 * target if target is not None else TSV_TARGET,
            "curriculum": settings.setting("curriculum").default(kind, app=True) > 0}


# --- session plumbing ---------------------------------------------------------------------------

def _session_id() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def _session_alive(session_id: str) -> bool | None:
    """Whether the browser tab of a session is still connected (None outside a server, e.g. AppTest)."""
    from streamlit import runtime
    if not runtime.exists():
        return None
    return runtime.get_instance().is_active_session(session_id)


def registry() -> jobs.JobRegistry:
    """The server's job registry, told how to ask Streamlit whether a session is still there."""
    reg = jobs.registry()
    reg.session_alive = _session_alive
    return reg


def current_job() -> jobs.TrainingJob | None:
    return st.session_state.get("train_job")


DATA_DEFAULTS = {"task": "reverse", "probe": "", "base": NEW_MODEL,
                 **{name: settings.setting(name).toy for name in ("min_len", "max_len", "alphabet", "max_tokens",
                                                                  "min_freq")}}
SETUP_KEYS = (*DATA_DEFAULTS, *source_defaults(TOY))


def _defaults(source: str) -> None:
    """Put the defaults of a data source into the settings widgets (when the source changes)."""
    for key, value in source_defaults(source).items():
        st.session_state[f"train_{key}"] = value
    st.session_state["train_probe"] = ""  # a probe of one kind of data does not suit the other


def setting(name: str):
    """A setup value: the widget's, else the value kept from an earlier visit, else the default."""
    ss = st.session_state
    for key in (f"train_{name}", f"train_kept_{name}"):
        if key in ss:
            return ss[key]
    if name == "source":
        return TOY
    source = setting("source")
    return {**DATA_DEFAULTS, **source_defaults(source)}[name]


def _init_state() -> None:
    """Give every setup widget its value: Streamlit forgets widget values while another page is shown,
    so they are kept under `train_kept_*` and put back here."""
    ss = st.session_state
    for name in ("source", *SETUP_KEYS):
        if f"train_{name}" not in ss:
            ss[f"train_{name}"] = setting(name)
    ss.setdefault("train_follow", True)


def _keep_settings() -> None:
    ss = st.session_state
    for name in ("source", *SETUP_KEYS):
        if f"train_{name}" in ss:
            ss[f"train_kept_{name}"] = ss[f"train_{name}"]


def _figure(key: tuple, build):
    """A figure built once per key (the live panel reruns every second; most figures change less often)."""
    if "train_figures" not in st.session_state:
        st.session_state["train_figures"] = model_registry.LRUCache(8)
    return st.session_state["train_figures"].get_or_compute(key, build)


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


# --- actions (widget callbacks: they run before the page renders) -------------------------------

def _settings() -> tuple[dict, training.TrainConfig, float | None]:
    """Model options, training config, and (translation, when asked) epochs from the settings."""
    names = ("source", *source_defaults(TOY))
    return train_settings({name: setting(name) for name in names}, _translation())


def train_settings(values: dict, translation: bool) -> tuple[dict, training.TrainConfig, float | None]:
    """Model options, training config and epochs (translation, when asked) from the widgets' `values`; the
    rest from the settings' defaults on the page (explorer/settings.py)."""
    kind = settings.TRANSLATION if translation else settings.TOY
    fields = {f.name for f in dataclasses.fields(training.TrainConfig)}
    recipe = {name: value for name, value in settings.defaults_for(kind, app=True, group="train").items()
              if name in fields and value is not None}
    model_options = {name: settings.setting(name).kind(values[name]) for name in MODEL_WIDGETS}
    epochs = float(values["epochs"]) if translation and values["unit"] == "epochs" else None
    shown = {name: settings.setting(name).kind(values[name]) for name in TRAIN_WIDGETS}
    cfg = training.TrainConfig(**{**recipe, **shown, "eval_every": settings.app_eval_every(shown["steps"]),
                                  "target_accuracy": float(values["target"]) / 100 if values["use_target"] else None,
                                  "curriculum": recipe["curriculum"] if values["curriculum"] else 0})
    return model_options, cfg, epochs


def _translation() -> bool:
    """Whether the run trains a translation model (a TSV file, or a translation model trained further)."""
    base = _base_model()
    return base.kind == "translation" if base is not None else setting("source") == TSV


def _base_model():
    """The model to train further ("Start from"), or None for a new one; ExplorerError if it is gone."""
    name = setting("base")
    return common.get_model(name) if name else None


def _start() -> None:
    ss = st.session_state
    ss.pop("train_error", None)
    ss.pop("train_notice", None)
    try:
        old = current_job()
        if old is not None and old.state in (jobs.RUNNING, jobs.QUEUED):
            raise ExplorerError("a model is training: stop it first")
        model_options, cfg, epochs = _settings()
        models = common.session_models()
        taken = common.shipped_model_names()
        probe = str(setting("probe")).strip() or None
        upload = ss.get("train_tsv") if _translation() else None
        if upload is not None:
            common.checked_tsv(upload)  # a file with no pair at all is refused at once (the upload check)
        base = _base_model()
        if base is not None:
            job = _further_job(base, cfg, upload, probe, models, taken)
        elif setting("source") == TOY:
            spec = TaskSpec(setting("task"), int(setting("min_len")), int(setting("max_len")), setting("alphabet"))
            name = models.unique_name(f"{spec.name}-trained", taken)
            job = jobs.task_job(spec, name, model_options, cfg, probe=probe, publish=models.put)
        else:
            if upload is None:
                raise ExplorerError("upload a TSV file of sentence pairs first")
            stem = upload.name.rsplit(".", 1)[0] or "translation"
            name = models.unique_name(f"{stem}-trained", taken)
            job = jobs.translation_job(upload.getvalue(), name, model_options, cfg, epochs=epochs,
                                       max_tokens=int(setting("max_tokens")), min_freq=int(setting("min_freq")),
                                       publish=models.put, probe=probe, auto=setting("unit") == "auto",
                                       file_name=upload.name)
        registry().admit(_session_id(), job)
        job.start()
        ss["train_job"] = job
        ss["train_follow"] = True
        ss["train_was_running"] = True
    except ExplorerError as exc:
        ss["train_error"] = str(exc)


def _further_job(base, cfg: training.TrainConfig, upload, probe: str | None, models, taken: list[str]) -> jobs.TrainingJob:
    """A job training a private copy of a session or shipped model further, on its task or the uploaded TSV
    (the model it starts from is never changed)."""
    from explorer.jobs.further import further_job
    name = models.unique_name(f"{base.name.removesuffix('-trained')}-more", taken)
    return further_job(base, name, cfg, tsv=upload.getvalue() if upload is not None else None, probe=probe,
                       publish=models.put, auto=base.kind == "translation" and setting("unit") == "auto",
                       epochs=float(setting("epochs")) if setting("unit") == "epochs" else None,
                       file_name=upload.name if upload is not None else "upload")


def _on_tsv() -> None:
    """A new file: the model size its number of pairs calls for (defaults.translation_model, as on the CLI)."""
    ss = st.session_state
    common.take_upload("train_tsv", limit=LIMITS.max_tsv_bytes)
    upload = ss.get("train_tsv")
    if upload is None:
        return
    try:
        check = common.checked_tsv(upload)
    except ExplorerError:
        return
    pairs = round(check.pairs * (1 - settings.setting("valid_fraction").toy))
    for key, value in defaults.translation_model(pairs).items():
        if key in MODEL_WIDGETS:
            ss[f"train_{key}"] = value


def _continue_target() -> float | None:
    """Continue stops at the target exact match when "Stop at target" is on, as a new run does."""
    return float(setting("target")) / 100 if setting("use_target") else None


def _stop() -> None:
    job = current_job()
    if job is not None:
        job.stop()
        job.join(timeout=15)  # usually about a second: the current step, a last evaluation, the state sent back


def _continue() -> None:
    ss = st.session_state
    ss.pop("train_error", None)
    ss.pop("train_notice", None)
    job = current_job()
    if job is None:
        return
    try:
        steps = int(ss["train_more_steps"])
        if job.step + steps > LIMITS.max_steps:
            raise ExplorerError(f"{job.step:,} + {steps:,} steps is over the limit of {LIMITS.max_steps:,}")
        registry().admit(_session_id(), job)
        note = job.continue_(steps, lr=float(ss["train_more_lr"]), target_accuracy=_continue_target())
        if note:
            ss["train_notice"] = note[:1].upper() + note[1:]
        ss["train_follow"] = True
        ss["train_was_running"] = True
    except ExplorerError as exc:
        ss["train_error"] = str(exc)


# --- layout -------------------------------------------------------------------------------------

def render() -> None:
    _init_state()
    job = current_job()
    if job is not None:
        registry().touch(_session_id())
    running = job is not None and job.state in (jobs.RUNNING, jobs.QUEUED)
    st.title("Train")
    st.caption("Train a model here, live, and watch its attention go from a uniform blur to a sharp "
               "alignment. Training runs in the background: other pages stay usable, and you can come back.")
    with st.container():  # one place however many messages: what follows keeps its place (and its charts)
        if "train_error" in st.session_state:
            st.error(st.session_state["train_error"], icon=":material/warning:")
        if "train_notice" in st.session_state:  # e.g. a Continue that went on from the last evaluation
            st.info(st.session_state["train_notice"], icon=":material/info:")

    with st.expander("Set up a training run", expanded=job is None):
        _setup_panel(running)
    _keep_settings()

    if job is not None:
        refresh = REFRESH_SECONDS if running else None
        st.fragment(_live_panel, run_every=refresh)()
        _model_panel(job, running)
    # open while it holds a file, so the result ("Added …" or why the file was refused) stays in view
    with st.expander("Upload a checkpoint", expanded=st.session_state.get("train_upload") is not None
                     or bool(st.session_state.get("train_upload_refused"))):
        _upload_panel()
    st.fragment(_server_footer, run_every=FOOTER_SECONDS)()


def _server_footer() -> None:
    """How many trainings the server runs: a fragment of its own, so the count follows other sessions' jobs
    (the rest of the page reruns only when this session acts)."""
    reg = registry()
    waiting = reg.waiting()
    st.caption(f"Trainings running on this server: {reg.running()} of {reg.max_running}"
               f"{f', {waiting} waiting' if waiting else ''}. Each trains in a process of its own; a training "
               "stops when its browser tab has been closed for a while.")


def _base_options() -> list[str]:
    """"Start from": a new model, or any model of this session (trained, downloaded and uploaded again) or
    shipped one, trained further as a private copy."""
    return [NEW_MODEL, *common.session_models().names(), *common.shipped_model_names()]


def _on_base() -> None:
    """Training a model further: its kind sets the data source (a toy model trains on its own task)."""
    ss = st.session_state
    try:
        base = _base_model()
    except ExplorerError:
        return
    if base is not None:
        source = TOY if base.kind == "task" else TSV
        if ss.get("train_source") != source:
            ss["train_source"] = source
            _defaults(source)


def _setup_panel(running: bool) -> None:
    ss = st.session_state
    options = _base_options()
    if ss.get("train_base") not in options:
        ss["train_base"] = NEW_MODEL
    st.selectbox("Start from", options, key="train_base", disabled=running, on_change=_on_base,
                 format_func=lambda n: "a new model" if n == NEW_MODEL else f"{n} (train it further)",
                 help="a new model, or one you trained, downloaded or uploaded (or a shipped one): it is trained "
                      "further as a copy, with its own architecture and vocabularies, on its task or a TSV file")
    try:
        base = _base_model()
    except ExplorerError as exc:
        st.error(str(exc), icon=":material/warning:")
        base = None
    st.radio("Data", (TOY, TSV), key="train_source", horizontal=True, disabled=running or base is not None,
             on_change=lambda: _defaults(st.session_state["train_source"]))
    fixed = running or base is not None  # a model trained further keeps its architecture
    data_col, model_col, train_col = st.columns(3, gap="large")
    with data_col:
        st.markdown("**Data**")
        if base is not None and base.task is not None:
            t = base.task
            st.caption(f"Fresh examples of {base.name}'s task: {t.name}"
                       + ("" if t.name == "dates" else f", lengths {t.min_len}–{t.max_len}, symbols {t.alphabet!r}"))
            st.text_input("Probe input", key="train_probe", disabled=running,
                          help="the input whose attention map is snapshotted as training goes")
        elif ss["train_source"] == TOY:
            st.selectbox("Task", TASKS, key="train_task", disabled=running,
                         help="copy: the diagonal; reverse: the anti-diagonal; sort: jumps; dates: field jumps")
            if ss["train_task"] != "dates":
                lo, hi = st.columns(2)
                _number(lo, "min_len", running)
                _number(hi, "max_len", running)
                alphabet = settings.setting("alphabet")
                st.text_input(alphabet.label, key="train_alphabet", max_chars=getattr(LIMITS, alphabet.limit),
                              disabled=running, help=alphabet.help.removeprefix("toy tasks: "))
            st.text_input("Probe input", key="train_probe", disabled=running, placeholder=_probe_placeholder(),
                          help="the input whose attention map is snapshotted as training goes")
        else:
            st.file_uploader("Sentence pairs (TSV: source<TAB>target[<TAB>attribution])",
                             key=common.uploader_key("train_tsv"), disabled=running,
                             max_upload_size=LIMITS.max_tsv_bytes // 1_000_000, on_change=_on_tsv,
                             help=f"UTF-8 text, one pair per line, at most {LIMITS.max_tsv_bytes // 1_000_000} MB "
                                  "(e.g. a Tatoeba/Anki export)" + ("" if base is None else
                                  f"; its words must be mostly in {base.name}'s vocabularies"))
            common.kept_upload_line("train_tsv", "Sentence pairs")
            _tsv_report()
            if base is None:
                lo, hi = st.columns(2)
                _number(lo, "max_tokens", running,
                        help="Sentences are read as subword pieces; longer pairs are skipped")
                _number(hi, "min_freq", running,
                        help="The subword vocabulary learns a piece only if it occurs this often")
            st.text_input("Probe sentence", key="train_probe", disabled=running,
                          placeholder="a sentence from your file (default: the first one of 6–9 words)",
                          help="the sentence whose attention map is snapshotted as training goes")
    with model_col:
        st.markdown("**Model**")
        if base is not None:
            st.caption(f"{base.title}: its architecture and vocabularies are kept.")
        a, b = st.columns(2)
        for where, name in ((a, "cell"), (b, "attention")):
            s = settings.setting(name)
            where.selectbox(s.label, s.app_choices or s.choices, key=f"train_{name}", disabled=fixed,
                            help="none = the plain encoder–decoder (one context vector, no attention)"
                            if name == "attention" else None)
        for where, name in ((a, "hidden"), (b, "embed"), (a, "attn_dim"), (b, "layers")):
            _number(where, name, fixed)
        st.checkbox(settings.setting("bidirectional").label, key="train_bidirectional", disabled=fixed)
    with train_col:
        st.markdown("**Training**")
        if ss["train_source"] == TSV:
            st.radio("Train for", tuple(UNITS), key="train_unit", horizontal=True, disabled=running,
                     format_func=UNITS.get,
                     help=f"as the data needs: {defaults.EPOCHS:g} epochs, at least {defaults.MIN_STEPS:,} and at most "
                          f"{defaults.MAX_STEPS:,} steps, stopping once validation has not improved for "
                          f"{defaults.STOP_PATIENCE} evaluations (the command line's default too)")
        a, b = st.columns(2)
        if ss["train_source"] == TSV and ss["train_unit"] == "auto":
            planned = _planned_steps() if base is None else None
            if planned is not None:
                ss["train_steps"] = planned
                _number(a, "steps", True, label="Steps (planned)", step=None,
                        help="set by the data (see Train for): fewer when long pairs are left out, "
                             "and the run stops sooner once validation stops improving")
            else:
                a.text_input("Steps", "set by the data", key="train_steps_auto", disabled=True,
                             help="set by the data once a file is uploaded: see Train for")
        elif ss["train_source"] == TSV and ss["train_unit"] == "epochs":
            _number(a, "epochs", running)
        else:
            _number(a, "steps", running)
        _number(b, "batch_size", running)
        _number(a, "lr", running, format="%.4f")
        _number(b, "seed", running)
        forcing = settings.setting("teacher_forcing")
        st.slider(forcing.label, *forcing.bounds(LIMITS, app=True), key="train_teacher_forcing", step=forcing.step,
                  disabled=running, help="how often the decoder is fed the true previous token instead of its own guess")
        if ss["train_source"] == TOY and ss.get("train_task") != "dates":  # dates have no length to grow
            st.checkbox(settings.setting("curriculum").label, key="train_curriculum", disabled=running,
                        help=f"a length curriculum: the longest training input grows from the shortest length to the "
                             f"longest over the first {settings.setting('curriculum').toy} steps (at most half the run); "
                             "validation always uses every length. It reaches a target sooner")
        # One below the other: side by side in this third of the page, the label read "Stop …" at 1300 px.
        st.checkbox(settings.setting("target_accuracy").label, key="train_use_target", disabled=running,
                    help="stop as soon as validation exact match reaches the target. Validation runs every "
                         f"{settings.setting('eval_every').toy} steps, and sooner when a training batch is already exactly "
                         "right as often as the target asks")
        st.number_input("Target exact match (%)", 1.0, 100.0, key="train_target", step=0.5,
                        disabled=running or not ss["train_use_target"], label_visibility="collapsed")
    st.button("Start training", key="train_start", type="primary", on_click=_start, disabled=running,
              help="trains a new model (or a copy of the one to start from); models you trained before stay in "
                   "this session")


def _number(where, name: str, disabled: bool, label: str | None = None, **kw) -> None:
    """A setting's number box (key "train_" + its name): its label, its range on the page within the server's
    limits and its step, from explorer/settings.py."""
    s = settings.setting(name)
    kw.setdefault("step", s.step)
    where.number_input(label or s.label, *s.bounds(LIMITS, app=True), key=f"train_{name}", disabled=disabled, **kw)


def _probe_placeholder() -> str:
    ss = st.session_state
    try:
        task = make_task(TaskSpec(ss["train_task"], int(ss["train_min_len"]), int(ss["train_max_len"]),
                                  ss["train_alphabet"]))
        return task.examples()[0]
    except (ExplorerError, IndexError, ValueError):
        return ""


def _tsv_report() -> None:
    """Validate the uploaded TSV at once: pairs found, skipped lines with their numbers, or why it is refused."""
    upload = st.session_state.get("train_tsv")
    if upload is None:
        return
    try:
        check = common.checked_tsv(upload)
    except ExplorerError as exc:
        st.error(f"This file cannot be used: {exc}", icon=":material/warning:")
        return
    st.success(f"{check.pairs:,} sentence pairs", icon=":material/check_circle:")
    if check.skipped_note:  # the same line `train` prints on the command line
        st.warning(check.skipped_note[:1].upper() + check.skipped_note[1:], icon=":material/warning:")
    pairs = _training_pairs(check.pairs)
    if pairs < defaults.FEW_PAIRS:
        text = defaults.few_pairs_warning(pairs)
        st.warning(text[:1].upper() + text[1:], icon=":material/warning:")


def _training_pairs(pairs: int) -> int:
    """The training split of a file of `pairs` pairs (corpus.split_pairs' rule: at least one held out)."""
    fraction = settings.setting("valid_fraction").toy
    held_out = min(max(round(pairs * fraction), 1 if pairs >= 2 else 0), max(pairs - 1, 0))
    return pairs - held_out


def _planned_steps() -> int | None:
    """The steps a run "as the data needs" plans for the uploaded file (None before a file): the CLI's rule
    (defaults.translation_steps) on its training split, before pairs too long for the model are left out."""
    upload = st.session_state.get("train_tsv")
    if upload is None:
        return None
    try:
        check = common.checked_tsv(upload)
    except ExplorerError:
        return None
    steps = defaults.translation_steps(_training_pairs(check.pairs), int(setting("batch_size")))
    return min(steps, LIMITS.max_steps)


def _live_panel() -> None:
    """Progress, curves and the attention snapshots; a fragment that reruns every second while training."""
    ss = st.session_state
    job = current_job()
    if job is None:
        return
    registry().touch(_session_id())
    view = job.view()
    if view.running or view.queued:
        ss["train_was_running"] = True
    elif ss.get("train_was_running"):
        ss["train_was_running"] = False
        if ss.get("train_follow", True) and view.snapshots:
            ss["train_frame"] = view.snapshots[-1].step  # it was following: end on the final snapshot
        st.rerun()  # the whole page: settings enabled again, continue/download shown

    st.subheader(f"Training {view.name}")
    for note in job.notes:  # what preparing the file left out, as `train` says it on the command line
        st.warning(note[:1].upper() + note[1:], icon=":material/warning:")
    if view.queued:
        top, stop = st.columns([6, 1], vertical_alignment="bottom")
        top.info(f"Waiting for a free training slot: {_ordinal(view.queue_place)} in the queue. Every slot "
                 "is busy with another training; this one starts as soon as one ends.", icon="⏳")
        stop.button("Stop", key="train_stop", icon=":material/stop:", on_click=_stop, width="stretch",
                    help="leave the queue")
        return
    last = view.last_eval
    if view.preparing:
        text = (f"Preparing the data: reading the file and learning its pieces · {_fmt_seconds(view.elapsed)} "
                "elapsed · training starts when it is ready")
    elif view.running:
        text = (f"Step {view.step:,} of {view.run_end:,} · {_fmt_seconds(view.elapsed)} elapsed · "
                f"about {_fmt_seconds(view.eta)} left · {view.examples_per_second:,.0f} examples/s")
        if view.target_accuracy is not None:
            text += f" · stops early at {100 * view.target_accuracy:g}% exact match"
    else:
        what = view.message[:1].upper() + view.message[1:] if view.state != jobs.FAILED else "Failed"
        text = f"{what} · {_fmt_seconds(view.elapsed)} of training"
    top, stop = st.columns([6, 1], vertical_alignment="bottom")
    top.progress(view.fraction, text=text)
    if view.running:
        stop.button("Stop", key="train_stop", icon=":material/stop:", on_click=_stop, width="stretch",
                    help="stop now and keep the model as it is")
    if view.state == jobs.FAILED:
        st.error(f"Training failed: {view.message}", icon=":material/error:")

    m = st.columns(4)
    m[0].metric("Training loss", f"{view.steps[-1].loss:.4f}" if view.steps else "–")
    m[1].metric("Validation exact match", f"{100 * last.valid_exact:.1f}%" if last else "–",
                help=_validation_help(job, last.step if last else None))
    align = last.valid_alignment if last else None
    m[2].metric("Alignment accuracy", f"{100 * align:.1f}%" if align is not None else "–",
                help="how often the strongest attention weight lands on the true source position, on the "
                     "validation samples (toy tasks)")
    m[3].metric("Examples / second", f"{view.examples_per_second:,.0f}")

    job_key = (job.name, job.created)
    n_evals = len(view.evals)
    left, right = st.columns(2)
    common.chart(left, _figure(("loss", job_key, len(view.steps), n_evals), lambda: loss_figure(view.steps, view.evals)),
                      key="train_loss_chart", width="stretch")
    common.chart(right, _figure(("accuracy", job_key, n_evals, view.target_accuracy),
                               lambda: accuracy_figure(view.evals, view.target_accuracy)),
                       key="train_accuracy_chart", width="stretch")
    smoothing_note = _smoothing_note(job)
    if smoothing_note:
        left.caption(smoothing_note)
    right.caption("Train: the latest training examples, already learnt from. Validation: "
                  + ("the file's held-out pairs" if job.held_out else "fresh samples of the task")
                  + ", never trained on.")
    left, right = st.columns(2)
    with left:
        _scrubber(view, job_key)
    with right:
        if any(r.valid_alignment is not None for r in view.evals):
            common.chart(st, _figure(("alignment", job_key, n_evals), lambda: alignment_figure(view.evals)),
                            key="train_alignment_chart", width="stretch")
            st.caption("Alignment accuracy: the share of output steps whose strongest attention weight is on a "
                       "true source position. It rises as attention sharpens.")


def _ordinal(place: int | None) -> str:
    if place is None:
        return "next"
    return {1: "next", 2: "second"}.get(place, f"number {place}")


def _scrubber(view: jobs.JobView, job_key: tuple) -> None:
    """Step through the probe's attention snapshots (while training, optionally following the newest)."""
    ss = st.session_state
    frames = view.snapshots
    if not frames:
        st.info("The first attention snapshot appears in a moment.")
        return
    steps = [f.step for f in frames]
    # While training, a toggle follows the newest snapshot (the slider is then disabled: a value set by the
    # page on a live slider would race the browser's own value at every refresh).
    follow = view.running and st.toggle("Follow the newest snapshot", key="train_follow")
    if follow or ss.get("train_frame") not in steps:
        wanted = steps[-1] if follow or "train_frame" not in ss else ss["train_frame"]
        ss["train_frame"] = min(steps, key=lambda s: abs(s - wanted))
    if len(steps) > 1:
        st.select_slider("Attention snapshot at step", options=steps, key="train_frame", disabled=follow,
                         help="drag to watch attention emerge (switch off following first while training)")
    frame = frames[steps.index(ss["train_frame"])]
    trace = frame.trace
    if not trace.has_attention:
        st.info("This model has no attention (score function `none`): its decoder sees one context vector.")
        st.caption(f"Probe {''.join(trace.source_tokens)!r} → {' '.join(trace.output_tokens)!r} at step {frame.step:,}")
        return
    title = f"Probe at step {frame.step:,}"
    figure = _figure(("probe", job_key, frame.step, id(trace)), lambda: attention_heatmap(trace, title=title))
    common.chart(st, figure, key="train_probe_chart", width="stretch")


def _model_panel(job: jobs.TrainingJob, running: bool) -> None:
    """The model this job makes: open it in Explore or download it (also mid-training: the latest
    evaluation's snapshot), and, when it is not training, continue training it."""
    ss = st.session_state
    if job.snapshot() is None:  # a file's model is made in the job's process once its data is prepared
        st.info("The model is made as soon as the data is prepared." if running else
                "No model: the run stopped before its first step. Start training again above.",
                icon=":material/info:")
        return
    with st.container(border=True):
        when = "its latest snapshot" if running else "the model as it is now"
        st.markdown(f"**{job.name}** is in this session's models: Explore and Compare open {when}.")
        a, b = st.columns(2)
        if a.button("Open in Explore", key="train_open_explore", icon=":material/search:", width="stretch"):
            _open_in_explore(job)
        with b:
            st.download_button("Download checkpoint", icon=":material/download:", data=job.checkpoint_bytes,
                               file_name=f"{job.name}{checkpoint.SUFFIX}", mime="application/octet-stream",
                               key="train_download", on_click="ignore", width="stretch",
                               disabled=job.snapshot() is None,
                               help="weights and a readable config (safetensors: loading it never runs code)")
        if running:
            return
        _verdict(job)
        _held_out_scores(job)
        ss.setdefault("train_more_steps", 1000)
        if ss.get("train_more_lr_for") is not job or "train_more_lr" not in ss:  # a new job: offer its rate
            ss["train_more_lr"] = float(job.config.lr)
            ss["train_more_lr_for"] = job
        a, b, c = st.columns(3, vertical_alignment="bottom")
        a.number_input("More steps", 1, LIMITS.max_steps, key="train_more_steps", step=500)
        b.number_input("Learning rate", 1e-5, 1.0, key="train_more_lr", format="%.4f", step=1e-3,
                       help="a new peak learning rate; the model, optimizer and step count are kept")
        c.button("Continue training", key="train_continue", on_click=_continue, type="primary", width="stretch")


def _verdict(job: jobs.TrainingJob) -> None:
    """Say plainly when a finished model looks undertrained (defaults.undertrained) and point at Continue."""
    snapshot = job.snapshot()
    reason = (snapshot.training.get("stopped_because") if snapshot is not None else None) or "steps"
    evals = [{"step": e.step, "train_exact": e.train_exact, "valid_exact": e.valid_exact, "valid_token": e.valid_token}
             for e in job.view().evals]
    message = defaults.undertrained(evals, reason)
    if message:
        st.warning(f"**Undertrained.** {message} Continue training below.", icon="⏳")


def _held_out_scores(job: jobs.TrainingJob) -> None:
    """BLEU and chrF (sacrebleu, default settings) beside exact match, on the held-out pairs of the file."""
    from explorer.training.evaluation import score_pairs
    snapshot = job.snapshot()
    if snapshot is None or snapshot.kind != "translation" or not job.held_out:
        return
    try:
        scores = common.cached(("train_scores", job.name, job.created, job.step),
                               lambda: score_pairs(snapshot, job.held_out, limit=MAX_SCORED))
    except ExplorerError as exc:
        st.info(f"No held-out score: {exc}")
        return
    if not scores["n"]:
        st.info("No held-out score: no held-out pair fits this model")
        return
    st.markdown(f"**The model as it is now, on the file's held-out pairs** ({scores['n']:,} decoded greedily; "
                "the Validation exact match above was scored during training, at its last evaluation)")
    m = st.columns(4)
    m[0].metric("Held-out pairs", f"{scores['n']:,}")
    m[1].metric("Held-out exact match", f"{100 * scores['exact_match']:.1f}%",
                help="share of the held-out pairs whose translation is exactly the file's")
    bleu = ("BLEU", f"{scores['bleu']:.1f}", f"sacrebleu corpus BLEU ({scores['bleu_signature']})")
    chrf = ("chrF", f"{scores['chrf']:.1f}", f"sacrebleu chrF, character n-gram F-score ({scores['chrf_signature']})")
    for column, (label, value, help_text) in zip(m[2:], (chrf, bleu) if "bleu_note" in scores else (bleu, chrf)):
        column.metric(label, value, help=help_text)
    if "bleu_note" in scores:
        st.info(f"BLEU says little here: {scores['bleu_note']}.", icon=":material/info:")


def _validation_help(job: jobs.TrainingJob, step: int | None) -> str:
    """Which data the headline's exact match was measured on, and when."""
    when = f"at the last evaluation (step {step:,})" if step is not None else "at each evaluation"
    if job.held_out:
        return (f"share of held-out pairs (up to {job.config.eval_samples:,} of the file's {len(job.held_out):,}, "
                f"never trained on) translated exactly right, scored {when}; the held-out panel below scores "
                "them all on the model as it ends")
    return (f"share of {job.config.eval_samples:,} fresh samples of the task, never trained on, answered exactly "
            f"right, scored {when}")


def _smoothing_note(job: jobs.TrainingJob) -> str:
    """Why the training loss levels off above the validation loss when labels are smoothed."""
    smoothing = job.config.label_smoothing
    bundle = job.snapshot()
    if not smoothing or bundle is None:
        return ""
    floor = validation.smoothed_loss_floor(smoothing, bundle.cfg.tgt_vocab)
    return (f"The training loss is measured with label smoothing {smoothing:g}: each target keeps "
            f"{100 * (1 - smoothing):g}% of its probability and spreads the rest over the vocabulary, so even a "
            f"perfect model's training loss levels at about {floor:.2f}. The validation loss is plain "
            "cross-entropy and can fall to 0.")


def _open_in_explore(job: jobs.TrainingJob) -> None:
    """Switch to Explore on this model and the probe input, through Explore's URL parameters."""
    from explorer.app.pages import explore
    from explorer.app.pages.addresses import explore_page
    params = {"model": job.name, "input": job.probe_text}
    st.session_state.pop("explore_init", None)  # Explore reads its URL once per session: let it read this one
    st.switch_page(explore_page(explore.render), query_params=params)


def _upload_panel() -> None:
    """The checkpoint uploader and the result of its file ("Added …" or why it was refused)."""
    ss = st.session_state
    st.file_uploader("Checkpoint (.safetensors, saved by this app)", key=common.uploader_key("train_upload"),
                     max_upload_size=checkpoint.MAX_CHECKPOINT_BYTES // 1_000_000, on_change=_take_upload)
    if ss.get("train_upload_refused"):
        st.error(f"This file was refused: {ss['train_upload_refused']}", icon=":material/warning:")
    upload = ss.get("train_upload")
    if upload is None:
        return
    kind, message = ss["train_uploaded"][upload.file_id]
    (st.success if kind == "ok" else st.error)(message, icon=":material/check_circle:" if kind == "ok" else ":material/warning:")


def _take_upload() -> None:
    """Add the uploaded checkpoint file to this session's models, once per file (validated; loading never
    runs code from it); its bytes are not kept. On the box's change, so "Start from" offers the model at once."""
    common.take_upload("train_upload", keep=False, use=_add_checkpoint, limit=checkpoint.MAX_CHECKPOINT_BYTES)


def _add_checkpoint(upload, data: bytes) -> None:
    done = st.session_state.setdefault("train_uploaded", {})
    if upload.file_id not in done:
        models = common.session_models()
        stem = upload.name.rsplit(".", 1)[0] or "uploaded"
        name = models.unique_name(stem, common.shipped_model_names())
        try:
            bundle = model_registry.freeze(checkpoint.from_bytes(data, name, source=upload.name))
            models.put(bundle)
            done[upload.file_id] = ("ok", f"Added **{bundle.title}** to this session's models.")
        except ExplorerError as exc:
            done[upload.file_id] = ("error", f"This file was refused: {exc}")
