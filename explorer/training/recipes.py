"""Ready-made training setups: sensible defaults per task, and building a translation model from a TSV.

The CLI, the Train page and `pretrained/README.md` all go through these, so a shipped checkpoint
is reproduced by the same code the app trains with.
"""

from __future__ import annotations

import argparse
import os
import threading
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from explorer import defaults, settings
from explorer.engine.bundle import ModelBundle
from explorer.errors import ExplorerError
from explorer.engine.model import ModelConfig
from explorer.engine.seeding import seeded_model
from explorer.training.distributed import World, usable_cores
from explorer.training.probes import trace_probe
from explorer.data.tasks import TaskSpec
from explorer.training.data import Pair, PairData, PairEncoder, TaskData, spelt_afresh
from explorer.training.train import Callback, Trainer, TrainConfig, TrainResult, new_task_bundle, task_config
from explorer.data.vocab import Vocab

MODEL_FIELDS = tuple(s.name for s in settings.SETTINGS if s.group == "model")
TRAIN_FIELDS = tuple(f.name for f in fields(TrainConfig) if f.name in settings.BY_NAME)
DATA_DEFAULTS: dict[str, Any] = settings.defaults_for(settings.TRANSLATION, group="data")
# A toy task's model and training defaults on the CLI (explorer/settings.py), for the benchmarks and tests
MODEL_DEFAULTS: dict[str, Any] = {name: settings.setting(name).toy for name in MODEL_FIELDS}
TRAIN_DEFAULTS: dict[str, Any] = {name: settings.setting(name).toy for name in TRAIN_FIELDS}


def auto_threads() -> int:
    """Torch threads for training here: every usable core that other work leaves idle, at least one.

    Measured on a 2-core machine shared with other jobs (load average 5–20): two OpenMP threads
    that spin-wait for each other made a training step 20–50× slower than one thread, because one
    of them is always descheduled. On an idle machine every core helps.
    """
    cores = usable_cores()
    try:
        busy = os.getloadavg()[0]
    except OSError:  # no load average on this system
        return cores
    return max(1, min(cores, int(cores - busy + 0.5)))


def _pick(args: argparse.Namespace, kind: str, names: Sequence[str]) -> dict[str, Any]:
    """The settings `names`: the flags given over the defaults for a `kind` of run (None: the data decides)."""
    base = settings.defaults_for(kind)
    return {**settings.given(base, names), **settings.given(args, names)}


def train_task(spec: TaskSpec, name: str, model_options: dict[str, Any], cfg: TrainConfig,
               on_step: Callback | None = None, on_eval: Callback | None = None,
               stop: threading.Event | None = None, device: str | torch.device | None = "auto",
               world: World | None = None, probe: bool = False, keep_best: bool = False
               ) -> tuple[ModelBundle, Trainer, TrainResult]:
    """Build a fresh model for a toy task and train it (on `device`, see devices.pick_device; as one rank
    of a `world`, see distributed.py). `probe`: trace the probe input at each evaluation for `on_eval`
    (Progress.probe); off by default, as the CLI shows no trace. `keep_best`: see Trainer."""
    bundle, task = new_task_bundle(spec, name, seed=cfg.seed, **model_options)
    cfg = task_config(cfg, task)
    data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, cfg.seed)
    trainer = Trainer(bundle, data, cfg, on_step=on_step, on_eval=on_eval, stop=stop,
                      probe=trace_probe if probe else None, device=device,
                      world=world, keep_best=keep_best)
    return bundle, trainer, trainer.run()


def default_vocab_size(pairs: int) -> int:
    """Pieces per language for a corpus of this many training pairs: an eighth of the pairs, within
    1,000-8,000 (a small file learns few merges anyway: BPE stops at pieces seen fewer than twice)."""
    return max(1000, min(MAX_DEFAULT_VOCAB, pairs // 8))


MAX_DEFAULT_VOCAB = 8000  # default_vocab_size's largest


def largest_translation_model(model_options: dict[str, Any], max_tokens: int) -> int:
    """The most parameters translation_setup can make with these options (the largest vocabularies, and the data's
    default size where an option is not given), counted without allocating: a job's memory before its data is read."""
    from explorer.engine.model import Seq2Seq
    from explorer.engine.parameters import count_parameters
    counts = []
    for base in (defaults.SMALL_MODEL, defaults.LARGE_MODEL):
        options = {**base, **model_options, "max_src_len": max(64, max_tokens * 2),
                   "max_tgt_len": max(64, max_tokens * 2) + 8}
        cfg = ModelConfig(src_vocab=MAX_DEFAULT_VOCAB, tgt_vocab=MAX_DEFAULT_VOCAB, **options)
        with torch.device("meta"):
            counts.append(count_parameters(Seq2Seq(cfg)))
    return max(counts)


def translation_setup(path: str | Path | bytes, name: str, model_options: dict[str, Any], seed: int = 0,
                      src_lang: str | None = None, tgt_lang: str | None = None,
                      max_tokens: int = DATA_DEFAULTS["max_tokens"],
                      min_freq: int = DATA_DEFAULTS["min_freq"],
                      valid_fraction: float = DATA_DEFAULTS["valid_fraction"], max_vocab: int | None = None,
                      extra: Sequence[tuple[str, str]] = (), extra_repeat: int = 1,
                      subword_dropout: float = DATA_DEFAULTS["subword_dropout"],
                      augment: float = DATA_DEFAULTS["augment"],
                      note: Callable[[str], None] | None = None, file_name: str | None = None,
                      ) -> tuple[ModelBundle, PairData, list[tuple[str, str]]]:
    """A fresh translation model and its data from a TSV file (or uploaded bytes).

    Both sides are cleaned (Chinese made simplified), a byte-fallback BPE is learnt per language from
    the training split (a bounded sample of a large one: subwords.training_sample; at most `max_vocab` pieces,
    pieces seen at least `min_freq` times), and pairs of at most `max_tokens` pieces a side are kept. `extra` pairs (e.g. a glossary of a domain's words), each
    `extra_repeat` times, join the training split only: validation stays the file's own held-out pairs.
    `subword_dropout` > 0 spells each training pair afresh whenever it is drawn (BPE-dropout at that rate,
    `SubwordTokenizer.sample`; a spelling longer than `max_tokens` falls back to the usual one); validation
    and everything after training use the usual pieces. `augment` > 0 draws training pairs as typed variants
    at that rate (data/robust.Variation: no final punctuation, lower case, other names and numbers).
    A side too long to fit `max_tokens` pieces is left out before any tokenizer is trained (its cost grows
    faster than the line). `note` hears, one line each, which lines were skipped or left out and why, and a
    warning when few pairs are left to train on, naming uploaded bytes `file_name` (default: the model's name).
    Returns the bundle, the id pairs for training/validation, and the kept validation pairs as the file's
    text (for BLEU)."""
    from explorer.data.corpus import guess_language, load_tsv, load_tsv_bytes, split_pairs
    from explorer.data.robust import Variation
    from explorer.data.subwords import SubwordTokenizer, is_chinese, prepare_source, prepare_text, training_sample
    corpus = load_tsv_bytes(path, name=file_name or name) if isinstance(path, bytes) else load_tsv(path)
    say = note or (lambda _text: None)
    if corpus.skipped:
        say(corpus.skipped_note())
    src_lang = src_lang or "en"
    tgt_lang = tgt_lang or guess_language([t for _, t in corpus.pairs[:2000]])
    indexed = list(enumerate(corpus.pairs))
    train_items, valid_items = split_pairs(indexed, valid_fraction, seed)  # the split before any filter: reproducible
    too_long = [i for i, (s, t) in indexed if not (may_fit(s, max_tokens) and may_fit(t, max_tokens))]
    if too_long:
        unfit = set(too_long)
        train_items = [item for item in train_items if item[0] not in unfit]
        valid_items = [item for item in valid_items if item[0] not in unfit]
        say(_left_out(len(too_long), len(indexed), f"longer than {max_tokens} pieces could hold",
                      [corpus.lines[i] for i in too_long[:3]] if corpus.lines else []))
    if extra_repeat < 1:
        raise ExplorerError("extra pairs must be repeated at least once")
    train_pairs = [p for _, p in train_items] + list(extra) * extra_repeat
    train_text = [(prepare_source(s, src_lang), prepare_text(t, tgt_lang)) for s, t in train_pairs]
    train_text = [(s, t) for s, t in train_text if s and t]
    if not train_text:
        raise ExplorerError("no sentence pair with text on both sides to train on")
    vocab_size = max_vocab or default_vocab_size(len(train_text))
    src_sub, tgt_sub = (SubwordTokenizer.train(training_sample([p[i] for p in train_text], seed), vocab_size,
                                               min_freq, not is_chinese(lang)) for i, lang in ((0, src_lang), (1, tgt_lang)))
    src_vocab, tgt_vocab = Vocab(src_sub.vocab), Vocab(tgt_sub.vocab)
    options = {**defaults.translation_model(len(train_text)), **model_options,
               "max_src_len": max(64, max_tokens * 2), "max_tgt_len": max(64, max_tokens * 2) + 8}
    cfg = ModelConfig(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), **options)
    bundle = ModelBundle(name, seeded_model(cfg, seed), src_vocab, tgt_vocab, languages=(src_lang, tgt_lang),
                         subwords=(src_sub, tgt_sub))

    to_pair = PairEncoder(src_vocab, tgt_vocab)

    ids = zip(train_text, *(sub.ids_many([p[i] for p in train_text]) for i, sub in enumerate((src_sub, tgt_sub))))
    kept = [(text, Pair(tuple(src), tuple(tgt))) for text, src, tgt in ids
            if 1 <= len(src) <= max_tokens and 1 <= len(tgt) <= max_tokens]
    if not kept:
        raise ExplorerError(f"no sentence pair of at most {max_tokens} pieces to train on")
    if len(kept) < len(train_text):
        say(_left_out(len(train_text) - len(kept), len(train_text), f"of more than {max_tokens} pieces a side "
                      "(--max-tokens, the Train page's longest sentence)", [], "training pairs"))
    if len(kept) < defaults.FEW_PAIRS:
        say(defaults.few_pairs_warning(len(kept)))
    valid_kept, valid_tok = [], []
    for s, t in (p for _, p in valid_items):
        src, tgt = bundle.tokenize_source(s), bundle.tokenize_target(t)
        if 1 <= len(src) <= max_tokens and 1 <= len(tgt) <= max_tokens:
            valid_kept.append((s, t))
            valid_tok.append(to_pair(src, tgt))
    probe = next((s for s, _t in train_text if 6 <= len(s.split()) <= 9), None) or default_probe(train_text)
    usual = [pair for _, pair in kept]
    vary = Variation(augment, is_chinese(tgt_lang)) if augment else None
    texts = [text for text, _ in kept]
    data = PairData(usual, valid_tok, probe, spelt_afresh((src_sub, tgt_sub), texts, usual, to_pair, subword_dropout,
                                                          max_tokens, max_tokens, vary), texts)
    bundle.examples = pick_examples(bundle, valid_kept)
    return bundle, data, valid_kept


def default_probe(pairs: Sequence[tuple[str, str]]) -> str:
    """A probe for a file of short sentences: its first longest source of at most 9 words (one word, as in
    "zero" of a numbers file, shows no alignment at all)."""
    return max((s for s, _ in pairs if len(s.split()) <= 9), key=lambda s: len(s.split()), default=pairs[0][0])


MAX_PIECE_CHARS = 32  # a side longer than max_tokens * this cannot be spelt in max_tokens pieces of usual words


def may_fit(text: str, max_tokens: int) -> bool:
    """Whether a side could be spelt in `max_tokens` pieces, judged without a tokenizer: every word is a piece
    at least (the pre-tokenizer splits at spaces), and no piece is longer than MAX_PIECE_CHARS characters."""
    return len(text) <= max_tokens * MAX_PIECE_CHARS and len(text.split(None, max_tokens)) <= max_tokens


def _left_out(n: int, total: int, why: str, lines: Sequence[int], what: str = "pairs") -> str:
    where = f" (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}{', …' if n > len(lines) else ''})" \
        if lines else ""
    return f"{n:,} of {total:,} {what} left out: {why}{where}"


def train_from_args(args: argparse.Namespace, on_eval: Callback | None = None, on_step: Callback | None = None,
                    device: str | torch.device | None = None, world: World | None = None,
                    note: Callable[[str], None] | None = None, stop: threading.Event | None = None
                    ) -> tuple[ModelBundle, TrainResult]:
    """The CLI's `train`: a toy task or a TSV, with the given options over the defaults, on `device`
    (default: `args.device`, else auto), as one rank of `world` (None: alone); `note` hears what the data
    preparation left out (translation_setup); `stop` ends the run on its best validation's weights so far."""
    device = device if device is not None else getattr(args, "device", "auto")
    name = args.name or Path(args.out).name.removesuffix(".safetensors")
    if getattr(args, "resume", None):
        return resume_from_args(args, name, on_eval=on_eval, on_step=on_step, device=device, world=world, note=note,
                                stop=stop)
    if args.task:
        model_options, cfg = task_settings(args)
        spec = TaskSpec(args.task, args.min_len, args.max_len, args.alphabet)
        bundle, trainer, result = train_task(spec, name, model_options, cfg, on_step=on_step, on_eval=on_eval,
                                             device=device, world=world, stop=stop, keep_best=stop is not None)
        trainer.close()
        return bundle, result
    model_options, train_options = translation_settings(args)
    extra = ()
    if args.extra_data:
        from explorer.data.corpus import load_tsv
        extra = load_tsv(args.extra_data).pairs
    data_options = _data_options(args)
    bundle, data, _ = translation_setup(args.data, name, model_options, seed=train_options.get("seed", 0),
                                        src_lang=args.src_lang, tgt_lang=args.tgt_lang, **data_options,
                                        max_vocab=args.vocab_size, extra=extra, extra_repeat=args.extra_repeat,
                                        note=note)
    cfg = TrainConfig(**translation_run(train_options, len(data.train_pairs), getattr(args, "epochs", None)))
    result = _run(Trainer(bundle, data, cfg, on_step=on_step, on_eval=on_eval, device=device, world=world, stop=stop,
                          keep_best=stop is not None))
    bundle.training = {**bundle.training, "data": Path(args.data).name, "max_tokens": args.max_tokens,
                       "min_freq": args.min_freq, "valid_fraction": args.valid_fraction,
                       "vocab_size": args.vocab_size or "auto", "subword_dropout": args.subword_dropout,
                       "augment": args.augment, **_extra_record(args)}
    return bundle, result


def _run(trainer: Trainer) -> TrainResult:
    try:
        return trainer.run()
    finally:
        trainer.close()


def _extra_record(args: argparse.Namespace) -> dict[str, Any]:
    return {"extra_data": Path(args.extra_data).name, "extra_repeat": args.extra_repeat} if args.extra_data else {}


def _data_options(args: argparse.Namespace) -> dict[str, Any]:
    return _pick(args, settings.TRANSLATION, ("max_tokens", "min_freq", "valid_fraction", "subword_dropout",
                                               "augment"))


def resume_from_args(args: argparse.Namespace, name: str, on_eval: Callback | None = None,
                     on_step: Callback | None = None, device: str | torch.device | None = None,
                     world: World | None = None, note: Callable[[str], None] | None = None,
                     stop: threading.Event | None = None) -> tuple[ModelBundle, TrainResult]:
    """The CLI's `train --resume`: a saved model trained further with this run's flags, its shape and
    vocabularies kept; a translation model on --data (split as its first training split it), a toy model on
    fresh samples of its own task. The training record keeps the run it came from. As a fresh run: `note` hears
    which lines were skipped or left out, and `stop` ends the run on its best validation's weights so far."""
    from explorer.checkpoints import checkpoint
    bundle = checkpoint.load(args.resume, name=name)
    before = dict(bundle.training)
    for p in bundle.model.parameters():
        p.requires_grad_(True)
    if bundle.task is not None:
        if not args.task or args.task != bundle.task.name:
            raise ExplorerError(f"--resume {args.resume} is a {bundle.task.name} model: give --task {bundle.task.name}")
        task = bundle.task_obj
        cfg = task_config(TrainConfig(**_pick(args, settings.TOY, TRAIN_FIELDS)), task)
        data: Any = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, cfg.seed)
        recorded: dict[str, Any] = {}
    else:
        if not args.data:
            raise ExplorerError(f"--resume {args.resume} is a translation model: give --data, a TSV of its languages")
        from explorer.data.corpus import load_tsv
        from explorer.training.further_data import pair_data
        extra = load_tsv(args.extra_data).pairs * args.extra_repeat if args.extra_data else ()
        seed = int(before.get("seed", 0)) if isinstance(before.get("seed"), int) else 0
        from explorer.limits import CLI_LIMITS
        from explorer.storage import read_regular
        tsv = read_regular(args.data, "TSV file", CLI_LIMITS.max_tsv_bytes)  # bounded, as a fresh run's load_tsv
        data, _ = pair_data(bundle, tsv, seed, CLI_LIMITS, extra=extra, augment=args.augment, note=note,
                            name=str(args.data))
        _, train_options = translation_settings(args)
        cfg = TrainConfig(**translation_run(train_options, len(data.train_pairs), getattr(args, "epochs", None)))
        recorded = {key: before[key] for key in ("max_tokens", "min_freq", "valid_fraction", "vocab_size",
                                                 "subword_dropout") if key in before}
        recorded.update({"data": Path(args.data).name, "augment": args.augment, **_extra_record(args)})
    result = _run(Trainer(bundle, data, cfg, on_step=on_step, on_eval=on_eval, device=device, world=world, stop=stop,
                          keep_best=stop is not None))
    bundle.training = {**bundle.training, **recorded, "resumed_from": Path(str(args.resume)).name,
                       "resumed_after_steps": int(before.get("steps_done", 0) or 0),
                       "resumed_after_seconds": float(before.get("seconds", 0.0) or 0.0)}
    return bundle, result


def task_settings(args: argparse.Namespace) -> tuple[dict[str, Any], TrainConfig]:
    """The CLI's toy-task model options and training config: the given flags over the toy defaults."""
    return _pick(args, settings.TOY, MODEL_FIELDS), TrainConfig(**_pick(args, settings.TOY, TRAIN_FIELDS))


def translation_settings(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The CLI's translation model options (only those given: the data sizes the rest) and training options
    (the given flags over the translation defaults; `translation_run` fills in what the data decides)."""
    return _pick(args, settings.TRANSLATION, MODEL_FIELDS), _pick(args, settings.TRANSLATION, TRAIN_FIELDS)


def translation_run(options: dict[str, Any], pairs: int, epochs: float | None = None) -> dict[str, Any]:
    """A translation run's TrainConfig fields: `options` (what the user set, over the defaults) with the run
    length, evaluation interval and plateau stop filled in from the data's size where not set.

    Without explicit steps the run is `epochs` (default defaults.EPOCHS, kept within the floor and ceiling)
    and stops on a validation plateau; explicit steps (a recipe to reproduce) run in full unless a stop
    patience is given too."""
    out = dict(options)
    automatic = out.get("steps") is None
    if automatic:
        out["steps"] = defaults.translation_steps(pairs, int(out.get("batch_size", settings.setting("batch_size").translation)), epochs)
        if out.get("stop_patience") is None:
            out["stop_patience"] = defaults.STOP_PATIENCE
    if out.get("eval_every") is None:
        out["eval_every"] = defaults.eval_interval(out["steps"])
    return out


def pick_examples(bundle: ModelBundle, pairs: list[tuple[str, str]],
                  count: int = defaults.EXAMPLES_KEPT) -> tuple[tuple[str, str], ...]:
    """Up to `count` held-out pairs for Explore's Examples and Random (kept in the checkpoint): first those
    whose every source word the model knows, in the split's order."""
    from explorer.training.further_data import known_token
    known, other = [], []
    for source, target in pairs:
        try:
            prepared = bundle.prepare(source)
            reads = not prepared.unknown and all(known_token(t, bundle.src_vocab) for t in prepared.tokens)
            (known if reads else other).append((source, target))
        except ExplorerError:
            continue
        if len(known) >= count:
            break
    return tuple((known + other)[:count])
