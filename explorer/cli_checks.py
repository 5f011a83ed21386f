"""Every command-line argument checked before any work, as carefully as a URL parameter.

argparse has turned the text into ints and floats; `train`'s settings are checked against their one
definition (explorer/settings.py) at the CLI's limits (explorer/limits.py); the rest here: paths for what
a file system takes, the other commands' numbers and the shapes of `--pin` and `--force`, so each refusal
is one line and exit 2 rather than a RuntimeError minutes into training or gigabytes into a beam. No torch
here: a refusal stays fast.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from explorer.errors import ExplorerError
from explorer.limits import CLI_LIMITS, MAX_PINS, MAX_SEED, check_beam, check_samples, check_temperature, real, whole
from explorer.settings import SETTINGS, check_text_field
from explorer.storage import check_path_text

_STEP_VALUE = re.compile(r"\s*-?\d{1,9}\s*:")
_STEP_POSITION = re.compile(r"\s*-?\d{1,9}\s*:\s*-?\d{1,9}\s*")


def check_args(args: argparse.Namespace) -> None:
    """ExplorerError naming the first argument out of range (the command's own checks follow)."""
    for attr, what in (("checkpoint", "--checkpoint"), ("data", "--data"), ("out", "--out"), ("resume", "--resume"),
                       ("extra_data", "--extra-data")):
        value = getattr(args, attr, None)
        if isinstance(value, str):
            if not value.strip():
                raise ExplorerError(f"{what} is empty")
            check_path_text(value, f"{what} path")
    {"train": _train, "eval": _eval, "trace": _trace, "translate": _translate,
     "faithfulness": _faithfulness}.get(args.command, _none)(args)


def _none(args: argparse.Namespace) -> None:
    return None


def _optional(args: argparse.Namespace, attr: str, check, *bounds: Any, **kw: Any) -> None:
    value = getattr(args, attr, None)
    if value is not None:
        check(value, "--" + attr.replace("_", "-"), *bounds, **kw)


def _train(args: argparse.Namespace) -> None:
    """Every setting against its definition (explorer/settings.py) at the CLI's limits, then what is not a
    setting: where the checkpoint goes and what it may hold."""
    from explorer.checkpoints.checkpoint import target_path
    target_path(args.out)  # a path the file system takes, outside the shipped models
    if args.name is not None:  # what the checkpoint may hold, before any work (checkpoint.check_savable at the start)
        check_text_field(args.name, "--name")
    for s in SETTINGS:
        s.check(getattr(args, s.name), s.flag, CLI_LIMITS)
    _optional(args, "threads", whole, 1, 1024)
    if args.epochs is not None and (args.task or args.steps is not None):
        raise ExplorerError("--epochs is for --data (a file of pairs) without --steps")


def _eval(args: argparse.Namespace) -> None:
    if args.samples is not None:
        if isinstance(args.samples, int) and args.samples < 1:
            raise ExplorerError("--samples must be at least 1")
        check_samples(args.samples)
    check_beam(args.beam)
    _optional(args, "min_len", whole, 1, None)
    _optional(args, "max_len", whole, 1, None)
    _optional(args, "seed", whole, 0, MAX_SEED)


def _trace(args: argparse.Namespace) -> None:
    check_temperature(args.temperature, "--temperature")
    if len(args.mask) + len(args.pin) + len(args.force) > MAX_PINS:
        raise ExplorerError(f"at most {MAX_PINS:,} --mask, --pin and --force options together")
    for value in args.mask:
        whole(value, "--mask", -10**9, 10**9)
    for text in args.pin:
        if not _STEP_POSITION.fullmatch(text):
            raise ExplorerError(f"--pin expects STEP:VALUE with two whole numbers (STEP:POSITION), got {text[:40]!r}")
    for text in args.force:
        if not _STEP_VALUE.match(text):
            raise ExplorerError(f"--force expects STEP:VALUE (STEP:TOKEN), got {text[:40]!r}")
    if args.attributions and (args.mask or args.pin or args.force or args.temperature != 1.0):
        raise ExplorerError("--attributions explain the model as trained: leave out --mask, --pin, --force and "
                            "--temperature")


def _translate(args: argparse.Namespace) -> None:
    check_beam(args.beam)


def _faithfulness(args: argparse.Namespace) -> None:
    if args.samples is not None:
        check_samples(args.samples)
    if args.limit is not None:
        if args.data is None:
            raise ExplorerError("--limit is for --data (how many of the file's sources to explain)")
        check_samples(args.limit)
    if args.split != "all" and args.data is None:
        raise ExplorerError("--split is for --data (the held-out part of the file the model was trained on)")
    if args.input is not None and not args.input.strip():
        raise ExplorerError("--input is empty: type some symbols")
    _optional(args, "seed", whole, 0, MAX_SEED)
    _optional(args, "ig_steps", whole, 2, 1024)
    _optional(args, "epsilon", real, 0.0, 1.0, lo_open=True, hi_open=True)
    _optional(args, "threads", whole, 1, 1024)
