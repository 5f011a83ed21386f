"""Every command-line argument checked before any work, as carefully as a URL parameter.

argparse has turned the text into ints and floats; this module checks their ranges against the
limits the app shares (explorer/limits.py), paths for what a file system takes, and the shapes of
`--pin` and `--force`, so each refusal is one line and exit 2 rather than a RuntimeError minutes
into training or gigabytes into a beam. No torch here: a refusal stays fast.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from explorer.errors import ExplorerError
from explorer.limits import (CLI_LIMITS, MAX_PINS, MAX_SEED, check_beam, check_samples, check_temperature, real,
                             whole)
from explorer.storage import check_path_text

_STEP_VALUE = re.compile(r"\s*-?\d{1,9}\s*:")
_STEP_POSITION = re.compile(r"\s*-?\d{1,9}\s*:\s*-?\d{1,9}\s*")


def check_args(args: argparse.Namespace) -> None:
    """ExplorerError naming the first argument out of range (the command's own checks follow)."""
    for attr, what in (("checkpoint", "--checkpoint"), ("data", "--data"), ("out", "--out"), ("resume", "--resume")):
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
    from explorer.checkpoints.checkpoint import target_path
    lim = CLI_LIMITS
    from explorer.checkpoints.header import check_language_code, check_text_field
    target_path(args.out)  # a path the file system takes, outside the shipped models
    if args.name is not None:  # what the checkpoint may hold, before any work (checkpoint.check_savable at the start)
        check_text_field(args.name, "--name")
    for attr in ("src_lang", "tgt_lang"):
        if getattr(args, attr, None) is not None:
            check_language_code(getattr(args, attr), "--" + attr.replace("_", "-"))
    for attr, hi in (("hidden", lim.max_hidden), ("embed", lim.max_embed), ("attn_dim", lim.max_attn_dim),
                     ("layers", lim.max_layers), ("steps", lim.max_steps), ("batch_size", lim.max_batch)):
        _optional(args, attr, whole, 1, hi)
    _optional(args, "max_len", whole, None, lim.max_seq_len)
    _optional(args, "min_len", whole, None, lim.max_seq_len)
    if args.alphabet is not None and len(args.alphabet) > lim.max_alphabet:
        raise ExplorerError(f"--alphabet has {len(args.alphabet):,} symbols; the limit is {lim.max_alphabet:,}")
    _optional(args, "dropout", real, 0.0, 1.0, hi_open=True)
    _optional(args, "embed_dropout", real, 0.0, 1.0, hi_open=True)
    _optional(args, "lr", real, 0.0, 10.0, lo_open=True)
    _optional(args, "clip", real, 0.0, None, lo_open=True)
    _optional(args, "teacher_forcing", real, 0.0, 1.0)
    _optional(args, "target_accuracy", real, 0.0, 1.0, lo_open=True)
    _optional(args, "max_seconds", real, 0.0, None, lo_open=True)
    _optional(args, "valid_fraction", real, 0.0, 1.0, hi_open=True)
    _optional(args, "subword_dropout", real, 0.0, 1.0, hi_open=True)
    _optional(args, "augment", real, 0.0, 1.0, hi_open=True)
    _optional(args, "seed", whole, 0, MAX_SEED)
    _optional(args, "eval_every", whole, 1, lim.max_steps)
    _optional(args, "eval_samples", whole, 1, 100_000)
    _optional(args, "plateau_patience", whole, 0, 1_000_000)
    _optional(args, "curriculum", whole, 0, lim.max_steps)
    _optional(args, "max_tokens", whole, 1, lim.max_tokens)
    _optional(args, "min_freq", whole, 1, 1_000_000_000)
    _optional(args, "threads", whole, 1, 1024)
    if args.epochs is not None:
        if args.task or args.steps is not None:
            raise ExplorerError("--epochs is for --data (a file of pairs) without --steps")
        _optional(args, "epochs", real, 0.0, 100_000.0, lo_open=True)


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
