"""One definition per setting (explorer/settings.py): the CLI's flags, their checks, the Train page's widgets and
the configs' checks all come from it, so a default, a bound or a help text is changed in one place."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer import defaults, settings
from explorer.__main__ import _parser, main
from explorer.app.pages import train as train_page
from explorer.errors import ExplorerError
from explorer.limits import CLI_LIMITS, LIMITS
from explorer.settings import SETTINGS, TOY, TRANSLATION
from explorer.training import recipes
from tests.app_support import show_page

# `train` flags that say what to train on, where the checkpoint goes and how this machine runs it: not settings
# of the model, the data or the training (nothing the Train page or a checkpoint's record holds).
RUN_FLAGS = {"--task", "--data", "--out", "--overwrite", "--name", "--resume", "--half", "--threads", "--processes",
             "--device", "--quiet"}


def train_parser() -> argparse.ArgumentParser:
    parser = _parser()
    return next(a for a in parser._subparsers._group_actions if a.choices).choices["train"]


def test_every_train_flag_is_a_setting_or_a_run_flag_and_every_setting_is_a_flag():
    flags = {a.option_strings[0]: a for a in train_parser()._actions if a.option_strings and a.dest != "help"}
    assert set(flags) == RUN_FLAGS | {s.flag for s in SETTINGS}
    for s in SETTINGS:
        action = flags[s.flag]
        assert action.dest == s.name
        assert tuple(action.choices or ()) == s.choices
        assert action.type is (None if s.kind in (str, bool) else s.kind)
        shared = s.default(TOY) == s.default(TRANSLATION)
        assert action.default == (s.default(TOY) if shared else None), s.name  # else the kind of run decides
        assert s.help in action.help


def test_the_cli_trains_with_the_settings_defaults():
    toy = settings.defaults_for(TOY)
    model, cfg = recipes.task_settings(_parser().parse_args(["train", "--task", "reverse", "--out", "x"]))
    assert model == {name: toy[name] for name in recipes.MODEL_FIELDS}
    assert {name: getattr(cfg, name) for name in recipes.TRAIN_FIELDS} == {name: toy[name] for name in recipes.TRAIN_FIELDS}
    # translation: what the data decides (the model's size, the run's length) is left out for it to fill in
    translation = settings.defaults_for(TRANSLATION)
    args = _parser().parse_args(["train", "--data", "pairs.tsv", "--out", "x"])
    model, train = recipes.translation_settings(args)
    assert model == {name: translation[name] for name in recipes.MODEL_FIELDS if translation[name] is not None}
    assert train == {name: translation[name] for name in recipes.TRAIN_FIELDS if translation[name] is not None}
    assert recipes._data_options(args) == {name: translation[name] for name in recipes._data_options(args)}


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_a_value_out_of_bounds_is_refused_by_the_cli_with_the_settings_message(s, capsys, tmp_path):
    lo, hi = s.bounds(CLI_LIMITS)
    if s.kind is bool:
        return
    if s.kind is str:
        bad = "x" * (CLI_LIMITS.max_alphabet + 1) if s.limit else "bogus!" if (s.choices or s.pattern) else None
    else:
        bad = lo - 1 if lo is not None else hi + 1 if hi is not None else None
    if bad is None:  # no bound to cross (a free text: a path)
        assert s.name == "extra_data"
        return
    with pytest.raises(ExplorerError) as refused:
        s.check(s.kind(bad), s.flag, CLI_LIMITS)
    argv = ["train", "--task", "copy", "--out", str(tmp_path / "x"), s.flag, str(bad)]
    if s.choices:  # argparse refuses a name it does not know, with the choices
        with pytest.raises(SystemExit):
            main(argv)
        assert "invalid choice" in capsys.readouterr().err
        return
    assert main(argv) == 2
    assert capsys.readouterr().err == f"error: {refused.value}\n"


@pytest.mark.parametrize("flag, value, message", [
    # each was accepted by the CLI's own checks and refused by TrainConfig only after the data was prepared
    ("--batch-size", "8192", "--batch-size must be between 1 and 4,096, got 8,192"),
    ("--lr", "5", "--lr must be in (0, 1], got 5"),
    ("--label-smoothing", "1", "--label-smoothing must be in [0, 1), got 1"),
    ("--stop-patience", "-1", "--stop-patience must be between 0 and 1,000,000, got -1"),
])
def test_the_cli_refuses_what_the_training_config_would_refuse_before_any_work(flag, value, message, capsys, tmp_path):
    assert main(["train", "--task", "copy", "--out", str(tmp_path / "x"), flag, value]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_clip_0_is_off_as_its_help_says():
    """--clip's help said 0 turns clipping off, and the CLI refused 0 ((0, inf))."""
    settings.setting("clip").check(0.0, "--clip", CLI_LIMITS)
    args = _parser().parse_args(["train", "--task", "copy", "--out", "x", "--clip", "0"])
    assert recipes.task_settings(args)[1].clip == 0.0


def test_limits_cap_a_run_below_what_any_run_may_hold():
    hidden = settings.setting("hidden")
    assert hidden.bounds() == (1, settings.MAX_SIZE)
    assert hidden.bounds(CLI_LIMITS) == (1, CLI_LIMITS.max_hidden)
    assert hidden.bounds(LIMITS, app=True) == (4, LIMITS.max_hidden)


def test_every_deliberate_difference_says_why():
    for s in SETTINGS:
        differs = (s.app_toy is not settings.SAME or s.app_choices is not None or s.app_lo is not None
                   or s.app_hi is not None)
        assert bool(s.why) == differs, s.name


# --- the Train page ---------------------------------------------------------------------------------
APP = str(Path(__file__).resolve().parent.parent / "app.py")
# Widgets of the Train page that are not one setting each: the run's unit, a target in percent (the settings'
# target_accuracy, ticked on or off), the length curriculum on or off, and continuing a finished run.
PAGE_ONLY = {"train_unit", "train_use_target", "train_target", "train_curriculum", "train_more_steps",
             "train_more_lr", "train_task", "train_probe", "train_base", "train_source", "train_follow",
             "train_steps_auto"}


def settings_widgets(at: AppTest) -> dict[str, object]:
    found = {}
    for kind in ("number_input", "selectbox", "checkbox", "slider", "text_input", "radio"):
        for widget in getattr(at, kind):
            if widget.key and widget.key.startswith("train_") and widget.key not in PAGE_ONLY:
                found[widget.key.removeprefix("train_")] = widget
    return found


def expected_value(s: settings.Setting, source: str) -> object:
    kind = TOY if source == train_page.TOY else TRANSLATION
    if source == train_page.TSV and s.name in ("embed", "hidden", "attn_dim"):
        return defaults.SMALL_MODEL[s.name]  # the small model until a file is uploaded
    if source == train_page.TSV and s.name == "steps":
        return train_page.TSV_STEPS  # offered when the unit is steps; "as the data needs" until then
    return s.default(kind, app=True)


@pytest.mark.parametrize("source", ["Toy task", "Translation (your TSV file)"])
def test_every_settings_widget_on_the_train_page_comes_from_its_setting(source):
    at = AppTest.from_file(APP, default_timeout=60).run()
    show_page(at, "train")
    at.run()
    at.radio(key="train_source").set_value(source).run()
    if source == train_page.TSV:
        at.radio(key="train_unit").set_value("steps").run()
    widgets = settings_widgets(at)
    assert widgets, "no settings widget found"
    for name, widget in widgets.items():
        s = settings.setting(name)  # a KeyError: a widget that is no setting
        assert widget.label == s.label, name
        if name in ("cell", "attention"):
            assert list(widget.options) == list(s.app_choices or s.choices), name
        elif hasattr(widget, "max") and s.kind in (int, float):
            assert (widget.min, widget.max) == s.bounds(LIMITS, app=True), name
            assert s.step is None or widget.step == s.step, name
        if name != "alphabet" or source == train_page.TOY:
            assert widget.value == expected_value(s, source), name
    shown = {"cell", "attention", "hidden", "embed", "attn_dim", "layers", "bidirectional", "steps", "batch_size",
             "lr", "seed", "teacher_forcing"}
    shown |= {"min_len", "max_len", "alphabet"} if source == train_page.TOY else {"max_tokens", "min_freq"}
    assert set(widgets) == shown
    labelled = {s.name for s in SETTINGS if s.label} - {"target_accuracy", "curriculum", "epochs"}  # page-only views
    assert labelled - {"min_len", "max_len", "alphabet", "max_tokens", "min_freq"} <= set(widgets)


def model_config(options: dict) -> dict:
    """The architecture these options build (ModelConfig's own defaults for the rest)."""
    from explorer.engine.config import ModelConfig
    return asdict(ModelConfig(src_vocab=10, tgt_vocab=10, **options))


def test_the_pages_run_differs_from_the_clis_only_where_a_setting_says_why():
    """The Train page's untouched toy run against `train --task reverse`: every difference is a setting's
    app_toy (written with its reason) or the page's evaluation interval (settings.app_eval_every)."""
    values = {"source": train_page.TOY, **train_page.source_defaults(train_page.TOY)}
    app_model, app_cfg, _ = train_page.train_settings(values, translation=False)
    cli_model, cli_cfg = recipes.task_settings(_parser().parse_args(["train", "--task", "reverse", "--out", "x"]))
    assert model_config(app_model) == model_config(cli_model)
    app, cli = asdict(app_cfg), asdict(cli_cfg)
    differ = {key for key in app if app[key] != cli[key]}
    assert differ == {s.name for s in SETTINGS if s.app_toy is not settings.SAME} | {"eval_every"}
    assert app["eval_every"] == settings.app_eval_every(app["steps"])
    for name in differ - {"eval_every"}:
        assert app[name] == settings.setting(name).app_toy


@pytest.mark.parametrize("pairs", [500, 50_000])  # the small model, the large one
def test_a_tsv_trains_alike_on_the_cli_and_on_the_train_page(pairs):
    """`train --data` and the page's "as the data needs" with the same number of training pairs: the same model
    (sized by the data) and the same training config (its length from the data)."""
    from explorer import jobs
    from explorer.training.train import TrainConfig
    args = _parser().parse_args(["train", "--data", "pairs.tsv", "--out", "x"])
    cli_model, cli_train = recipes.translation_settings(args)
    cli_cfg = TrainConfig(**recipes.translation_run(cli_train, pairs))
    values = {"source": train_page.TSV, **train_page.source_defaults(train_page.TSV)}
    sized = defaults.translation_model(pairs)
    values.update({key: value for key, value in sized.items() if key in values})  # the page's _on_tsv
    app_model, app_cfg, _ = train_page.train_settings(values, translation=True)
    app_cfg = jobs.automatic_length(app_cfg, pairs, jobs.LIMITS)
    assert model_config({**sized, **cli_model}) == model_config({**sized, **app_model})
    assert asdict(cli_cfg) == asdict(app_cfg)


def shipped_info(name: str) -> dict:
    """The readable config of a shipped checkpoint, as its safetensors header holds it."""
    import json
    import struct
    raw = (Path(__file__).resolve().parent.parent / "pretrained" / f"{name}.safetensors").read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    return json.loads(json.loads(raw[8:8 + size])["__metadata__"]["explorer"])


@pytest.mark.parametrize("flag, value, part", [
    ("--dropout", 1.0, "model"), ("--hidden", 0, "model"), ("--cell", "transformer", "model"),
    ("--lr", 5.0, "training"), ("--valid-fraction", 1.0, "training"), ("--seed", -1, "training"),
    ("--batch-size", 5000, "training"), ("--augment", 1.0, "training"), ("--eval-samples", 0, "training"),
])
def test_a_bad_value_is_refused_in_the_same_words_by_the_cli_and_the_checkpoint_header(flag, value, part, capsys,
                                                                                        tmp_path):
    from explorer.checkpoints.header import check_info
    s = settings.setting(flag[2:].replace("-", "_"))
    info = shipped_info("copy")
    info.setdefault(part, {})[s.name] = value
    with pytest.raises(ExplorerError) as refused:
        check_info(info)
    name = s.name if part == "model" else f"training.{s.name}"
    assert str(refused.value).startswith(name + " ")
    header_words = str(refused.value).removeprefix(name)
    if s.choices:  # argparse refuses a name that is no choice first; the setting's own check says the header's words
        with pytest.raises(ExplorerError) as cli_refused:
            s.check(value, flag, CLI_LIMITS)
        assert str(cli_refused.value).removeprefix(flag) == header_words
        return
    assert main(["train", "--task", "copy", "--out", str(tmp_path / "x"), flag, str(value)]) == 2
    cli_words = capsys.readouterr().err.removeprefix(f"error: {flag}").rstrip("\n")
    if s.limit is None:
        assert cli_words == header_words
    else:  # the CLI caps a run below what a checkpoint may hold: the same words, its own bound
        assert cli_words.split(" between ")[0] == header_words.split(" between ")[0]
