"""Every setting of a training run, defined once: its type, help, defaults, bounds and choices.

The CLI's `train` flags (explorer/__main__.py), their checks, the Train page's widgets (label, range, default)
and the checks of ModelConfig, TrainConfig and a checkpoint's header all read the `Setting` here. A new
setting is one `Setting` in `SETTINGS` (and the field it fills: ModelConfig, TrainConfig or the data's
option); every difference between the app and the CLI is written on the field with its reason.

Contexts: a toy task or a translation file (`kind`), on the CLI or the Train page (`app`). A translation
run on the page trains as `train --data` does: the app differs from the CLI only for toy tasks.
Bounds: `lo`/`hi` are what any run or loaded checkpoint may hold; `limit` names a `Limits` field that caps
what one run may ask for (the server's `LIMITS` on the page, the user's own machine's `CLI_LIMITS`).
No torch here: `--help` and the pages read this without importing it.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from explorer import defaults
from explorer.defaults import ATTENTIONS, CELLS
from explorer.errors import ExplorerError
from explorer.limits import MAX_SEED, Limits, real, whole

TOY, TRANSLATION = "toy", "translation"
SAME = object()  # a default that is the same as the toy task's
MAX_SIZE = 8192  # hidden, embed, attention size of a loadable model (the file's 100 MB bound them anyway)
MAX_LAYERS = 16
MAX_VOCAB = 500_000
MAX_TEXT_CHARS = 1000  # a string in the training record, an example sentence
LANGUAGE = re.compile(r"[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8}){0,2}")


@dataclass(frozen=True)
class Setting:
    """One setting: where it goes, what it means, its defaults per context and what it may be."""

    name: str  # the ModelConfig / TrainConfig field or data option; the CLI's --flag spells it with dashes
    kind: type  # int, float, str or bool
    group: str  # "model", "train" or "data": which part of a run it configures
    help: str  # the CLI's help and the page's tooltip
    toy: Any = None  # the default for a toy task (None: not set; the help says who decides)
    translation: Any = SAME  # the default for a translation run, where it differs
    by_data: str | None = None  # translation: the default in words, where the data sets it
    app_toy: Any = SAME  # the Train page's toy default, where it differs from the CLI's (`why` says why)
    why: str = ""  # the reason for a deliberate app/CLI difference
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    limit: str | None = None  # a Limits field: the upper bound one run may ask for (per context)
    choices: tuple[str, ...] = ()
    app_choices: tuple[str, ...] | None = None  # the page offers fewer (`why` says why)
    pattern: re.Pattern | None = None  # text settings: the whole value matches this
    pattern_text: str = ""  # what the pattern asks for, in words
    label: str | None = None  # the Train page's label; None: not on the page
    app_lo: float | None = None  # the page's lowest value where it is above `lo` (`why` says why)
    app_hi: float | None = None  # the page's highest value where no Limits field sets it
    step: float | None = None  # the page's step

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default(self, kind: str = TOY, app: bool = False) -> Any:
        """This setting's default for a toy task or a translation run, on the CLI or the page."""
        if kind == TRANSLATION:
            return self.toy if self.translation is SAME else self.translation
        return self.toy if not app or self.app_toy is SAME else self.app_toy

    def bounds(self, limits: Limits | None = None, app: bool = False) -> tuple[Any, Any]:
        """The lowest and highest value: the setting's own, capped by `limits` (None: any run's), and the
        page's own range with `app`."""
        lo, hi = self.lo, self.hi
        if limits is not None and self.limit is not None:
            hi = getattr(limits, self.limit) if hi is None else min(hi, getattr(limits, self.limit))
        if app:
            lo = self.app_lo if self.app_lo is not None else lo
            hi = self.app_hi if self.app_hi is not None else hi
        return lo, hi

    def check(self, value: Any, what: str | None = None, limits: Limits | None = None, optional: bool = True) -> Any:
        """`value` normalised (numpy's ints become int, ints float for a rate), else ExplorerError naming
        `what` (default: the field's name) and what the setting may be; None passes when `optional` (not given:
        the default or the data decides)."""
        what = what or self.name
        if value is None and optional:
            return None
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ExplorerError(f"{what} must be true or false, got {value!r}")
            return value
        if self.kind is str:
            if not isinstance(value, str):
                raise ExplorerError(f"{what} must be text, got {str(value)[:40]!r}")
            if self.choices and value not in self.choices:
                raise ExplorerError(f"{what} must be one of {', '.join(self.choices)}, got {value[:40]!r}")
            if self.pattern is not None and not self.pattern.fullmatch(value):
                raise ExplorerError(f"{what} must be {self.pattern_text}, got {value[:40]!r}")
            if self.limit is not None and limits is not None and len(value) > getattr(limits, self.limit):
                raise ExplorerError(f"{what} has {len(value):,} symbols; the limit is {getattr(limits, self.limit):,}")
            return value
        lo, hi = self.bounds(limits)
        if self.kind is int:
            return whole(value, what, lo, hi)
        return real(value, what, lo, hi, self.lo_open, self.hi_open)


def _rate(name: str, group: str, help: str, toy: float = 0.0, **kw: Any) -> Setting:
    """A share in [0, 1)."""
    return Setting(name, float, group, help, toy, lo=0.0, hi=1.0, hi_open=True, **kw)


_BY_SIZE = f"{{small}} below {defaults.SMALL_DATA_PAIRS:,} training pairs, else {{large}}"
_RUN_LENGTH = (f"{defaults.EPOCHS:g} epochs of the data within {defaults.MIN_STEPS:,}–{defaults.MAX_STEPS:,} "
               "steps")


def _sized(name: str) -> str:
    return _BY_SIZE.format(small=f"{defaults.SMALL_MODEL[name]:g}", large=f"{defaults.LARGE_MODEL[name]:g}")


SETTINGS: tuple[Setting, ...] = (
    # --- the model ---------------------------------------------------------------------------------
    Setting("cell", str, "model", "the recurrent cell", "gru", choices=CELLS, label="Cell", app_choices=("gru", "lstm", "rnn"),
            why="the page offers no unshared cell: the unshared RNN is the article's counter-example (a W_t per "
                "position), taught on Learn with its own tiny models; the CLI can still train one"),
    Setting("attention", str, "model", "the score function (none: the plain encoder–decoder, one context vector, "
            "no attention)", "dot", choices=ATTENTIONS, label="Score function"),
    Setting("embed", int, "model", "embedding size", 32, None, _sized("embed"), lo=1, hi=MAX_SIZE,
            limit="max_embed", label="Embedding size", app_lo=2, step=16,
            why="the page starts at 2: one dimension cannot separate the symbols"),
    Setting("hidden", int, "model", "hidden size", 64, None, _sized("hidden"), lo=1, hi=MAX_SIZE,
            limit="max_hidden", label="Hidden size", app_lo=4, step=16,
            why="the page starts at 4: smaller states cannot hold a sequence of the toy tasks"),
    Setting("attn_dim", int, "model", "attention size (queries, keys, values)", 32, None, _sized("attn_dim"),
            lo=1, hi=MAX_SIZE, limit="max_attn_dim", label="Attention size (q, k, v)", app_lo=2, step=16,
            why="the page starts at 2: one dimension cannot separate the positions"),
    Setting("layers", int, "model", "recurrent layers in the encoder and the decoder", 1, lo=1, hi=MAX_LAYERS,
            limit="max_layers", label="Layers"),
    Setting("bidirectional", bool, "model", "bidirectional encoder", True, label="Bidirectional encoder"),
    _rate("dropout", "model", "dropout between layers", 0.0, translation=None, by_data=_sized("dropout")),
    _rate("embed_dropout", "model", "dropout on the input and output embeddings while training; it regularises "
          "a large model on few pairs, and changes nothing the trained model computes"),
    # --- the toy task's data -------------------------------------------------------------------------
    Setting("min_len", int, "data", "toy tasks: shortest input", 5, lo=1, limit="max_seq_len",
            label="Shortest input"),
    Setting("max_len", int, "data", "toy tasks: longest input", 15, lo=1, limit="max_seq_len",
            label="Longest input"),
    Setting("alphabet", str, "data", "toy tasks: the symbols inputs are made of (sort orders them this way)",
            "0123456789", limit="max_alphabet", label="Alphabet"),
    # --- the translation file's data ------------------------------------------------------------------
    Setting("max_tokens", int, "data", "translation: longest sentence kept, in subword pieces; longer pairs are "
            "skipped", 40, lo=1, limit="max_tokens", label="Longest sentence (pieces)", app_lo=2,
            why="the page starts at 2: a sentence and its end"),
    Setting("min_freq", int, "data", "translation: a piece is learnt only if seen this often", 2, lo=1,
            hi=1_000_000_000, label="Rarest piece learnt (count)", app_hi=100,
            why="the page goes to 100: a server's files are at most 20 MB"),
    _rate("valid_fraction", "data", "translation: share of the pairs held out for validation", 0.05),
    Setting("vocab_size", int, "data", "translation: subword pieces per language, specials and bytes included",
            None, by_data="an eighth of the training pairs, within 1,000-8,000", lo=1, hi=MAX_VOCAB),
    _rate("subword_dropout", "data", "translation: BPE-dropout while training, the chance that each merge is left "
          "out when a training pair is spelt in pieces afresh each epoch (0.1 is the paper's; 0: one spelling)"),
    _rate("augment", "data", "translation: the chance of each typed variation of a training pair when it is "
          "drawn: the source's final punctuation left off, the source lower-cased, and (at twice the rate) a name "
          "or number replaced by another on both sides, so the model reads what people type (0: the text as "
          "written)", 0.25),
    Setting("extra_data", str, "data", "translation: a TSV of more pairs for the training split only (e.g. a "
            "glossary of a domain's words); validation stays the --data file's held-out pairs (default: none)"),
    Setting("extra_repeat", int, "data", "translation: how many times each --extra-data pair joins the training "
            "split", 1, lo=1),
    Setting("src_lang", str, "data", "translation: source language code (default: en)", pattern=LANGUAGE,
            pattern_text="a language code such as en, fr or zh-Hans (letters, digits, - or _)"),
    Setting("tgt_lang", str, "data", "translation: target language code (default: guessed from the text)",
            pattern=LANGUAGE, pattern_text="a language code such as en, fr or zh-Hans (letters, digits, - or _)"),
    # --- training ------------------------------------------------------------------------------------
    Setting("steps", int, "train", "optimisation steps", 800, None, _RUN_LENGTH, lo=1, limit="max_steps",
            label="Steps", step=500, app_toy=400,
            why="the page stops a toy run at its target (below) after at most 400 steps: a live demo ends as soon as "
                "the model works, and with the stop 400 are enough for reverse 5-15 (99% at step 225-325, seeds "
                "0-2); the CLI trains a fixed 800, what lengths 20-30 need, for a script wants a fixed amount of "
                "work"),
    Setting("epochs", float, "train", "translation: train this many passes over the training pairs instead of "
            "--steps", None, by_data=f"{defaults.EPOCHS:g}, kept within {defaults.MIN_STEPS:,}–"
            f"{defaults.MAX_STEPS:,} steps", lo=0.0, hi=100_000.0, lo_open=True, label="Epochs", app_lo=0.1,
            app_hi=1000.0, step=1.0, why="the page's range: a tenth of a file to a thousand passes"),
    Setting("batch_size", int, "train", "pairs per step", 128, 64, lo=1, hi=4096, limit="max_batch",
            label="Batch size", step=16),
    Setting("lr", float, "train", "peak learning rate of the cosine schedule", 3e-3, 2e-3, lo=0.0, hi=1.0,
            lo_open=True, label="Learning rate", app_lo=1e-5, step=1e-3,
            why="the page starts at 0.00001, the smallest rate its four decimals show"),
    Setting("clip", float, "train", "gradient norm clipping (0: off)", 1.0, lo=0.0),
    Setting("plateau_patience", int, "train", "halve the learning rate after N evaluations without a better "
            "validation token accuracy (0: off)", 2, 0, lo=0, hi=1_000_000),
    Setting("stop_patience", int, "train", "stop after N evaluations without a better validation token accuracy "
            "(0: off)", 0, None, f"{defaults.STOP_PATIENCE} when the run length is automatic, else 0", lo=0,
            hi=1_000_000),
    Setting("curriculum", int, "train", "toy tasks: over the first N steps (at most half the run) the longest "
            "training input grows from the shortest length to the longest; validation always uses every length "
            "(0: off)", 150, 0, lo=0, limit="max_steps", label="Short inputs first"),
    Setting("teacher_forcing", float, "train", "share of decoder steps fed the true previous token instead of the "
            "model's guess", 1.0, lo=0.0, hi=1.0, label="Teacher forcing ratio", step=0.05),
    Setting("seed", int, "train", "random seed (initial weights, batches, data split)", 0, lo=0, hi=MAX_SEED,
            label="Seed", app_hi=2**31 - 1, why="the page's seeds stay below 2^31, exact in a browser's numbers"),
    Setting("target_accuracy", float, "train", "stop once validation exact match reaches this (0-1; default: no target)", None,
            lo=0.0, hi=1.0, lo_open=True, label="Stop at target", app_toy=0.99,
            why="the page stops a toy run at 99% validation exact match (with the 400 steps above); the CLI "
                "has no target (docs/CLI.md)"),
    Setting("max_seconds", float, "train", "stop after this much training time (0: after the first step; default: "
            "no limit)", None, lo=0.0),
    # the page evaluates about 20 times a run whatever its steps (app_eval_every below: every 20 of 400)
    Setting("eval_every", int, "train", "steps between validations", 25, None,
            f"about {defaults.EVALUATIONS_PER_RUN} a run, at most every {defaults.MAX_EVAL_EVERY:,} steps", lo=1,
            limit="max_steps"),
    Setting("eval_samples", int, "train", "validation size", 500, 1000, "up to 1,000 held-out pairs", lo=1,
            hi=100_000),
    _rate("label_smoothing", "train", "share of each target's probability spread over the vocabulary", 0.0,
          translation=0.1),
    Setting("bf16", bool, "train", "train in bfloat16 mixed precision: the products of the training forward and "
            "backward in bfloat16, the weights, checkpoints and everything shown in float32 (1.3x faster at "
            "translation sizes on a CPU with AVX512-BF16 or AMX; slower on one without) (default: off)", False),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    return BY_NAME[name]


def app_eval_every(steps: int) -> int:
    """The page evaluates about EVALUATIONS_PER_RUN times whatever steps the user picks, at most every toy
    `eval_every` steps (400 steps: every 20); the CLI's toy runs every 25 (deliberate, like `steps`)."""
    return defaults.eval_interval(steps, BY_NAME["eval_every"].toy)


def defaults_for(kind: str, app: bool = False, group: str | None = None) -> dict[str, Any]:
    """Every setting's default (of one `group`, or all) for a toy task or a translation run; a translation
    setting the data decides is None."""
    return {s.name: s.default(kind, app) for s in SETTINGS if group is None or s.group == group}


def given(values: Mapping[str, Any] | Any, names: Iterable[str]) -> dict[str, Any]:
    """The settings among `names` that `values` (a mapping or an argparse Namespace) sets to other than None."""
    get = values.get if isinstance(values, Mapping) else (lambda key: getattr(values, key, None))
    return {name: get(name) for name in names if get(name) is not None}


def problems(values: Mapping[str, Any], names: Iterable[str], optional: Iterable[str] = (),
             overrides: Mapping[str, Setting] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The `names` of `values` checked against their settings (None only for the `optional` ones): the
    normalised values and every problem, for a config that reports them all at once (ModelConfig, TrainConfig)."""
    checked, found = {}, []
    for name in names:
        s = (overrides or {}).get(name, BY_NAME[name])
        try:
            checked[name] = s.check(values[name], name, optional=name in optional)
        except ExplorerError as exc:
            found.append(str(exc))
    return checked, found


def relaxed(name: str, **changes: Any) -> Setting:
    """A setting with some fields changed (e.g. attn_dim may be 0 without attention)."""
    return replace(BY_NAME[name], **changes)


def check_text_field(value: Any, what: str) -> str:
    """A short text a checkpoint may hold (a name, a date): at most MAX_TEXT_CHARS characters of one line."""
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS or "\n" in value or "\r" in value:
        shown = f"{len(value):,} characters" if isinstance(value, str) and len(value) > 80 else repr(value)[:80]
        raise ExplorerError(f"{what} must be text of one line and at most {MAX_TEXT_CHARS:,} characters, "
                            f"got {shown}")
    return value


def flag_options(s: Setting) -> dict[str, Any]:
    """argparse's keywords for a setting's --flag: its type (a --x/--no-x pair for a switch), choices and help,
    and its default where a toy task and a translation run share it (else None: the kind of run decides, in
    training/recipes.py)."""
    shared = s.default(TOY) == s.default(TRANSLATION)
    options: dict[str, Any] = {"default": s.default(TOY) if shared else None, "help": help_text(s)}
    if s.kind is bool:
        options["action"] = argparse.BooleanOptionalAction
    elif s.kind is not str:
        options["type"] = s.kind
    if s.choices:
        options["choices"] = s.choices
    return options


def help_text(s: Setting) -> str:
    """The CLI help: the setting's text and its defaults where they depend on the kind of run (argparse
    shows a single default itself)."""
    if s.default(TOY) == s.default(TRANSLATION) and s.by_data is None:
        return s.help
    if s.toy is None and s.by_data is not None:
        return f"{s.help} (default: {s.by_data})"
    other = s.by_data if s.by_data is not None else _shown(s.translation)
    return f"{s.help} (default: toy tasks {_shown(s.toy)}; translation {other})"


def _shown(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)
