"""One definition per setting (explorer/settings.py): the CLI's flags, their checks, the Train page's widgets and
the configs' checks all come from it, so a default, a bound or a help text is changed in one place."""

from __future__ import annotations

import argparse
from dataclasses import asdict

import pytest

from explorer import settings
from explorer.__main__ import _parser, main
from explorer.errors import ExplorerError
from explorer.limits import CLI_LIMITS, LIMITS
from explorer.settings import SETTINGS, TOY, TRANSLATION
from explorer.training import recipes

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
