"""Command line: train, eval, trace, translate, info, faithfulness. Bad input exits 2 with one line on stderr."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from explorer import defaults, settings
from explorer.cli_checks import check_args
from explorer.errors import ExplorerError
from explorer.outside_text import check_arguments, lines
from explorer.training.progress import ConsoleProgress, fmt_seconds

if TYPE_CHECKING:  # torch is imported by the commands that need it (startup time)
    import torch

COUNTING = ("Steps and input positions count from 1, as in the app and its links: --mask 1 hides the first "
            "input symbol, --pin 2:1 puts all of step 2's attention on the first symbol, --force 1:a makes "
            "the first output token 'a', and the text trace prints steps from 1.")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Every flag's help shows its default; a default of None (set by the data or the task) says so in
    the help text itself, so "(default: None)" is never printed."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False or action.default == [] \
                or isinstance(action, argparse._HelpAction):  # `in (None, False)` hid a default of 0 (0 == False)
            return action.help or ""
        return super()._get_help_string(action)


def _shipped_names() -> list[str]:
    """The shipped checkpoints' names for --help, found as checkpoint.pretrained_names does (without
    importing torch, which --help does not need)."""
    folder = Path(os.environ.get("EXPLORER_PRETRAINED", Path(__file__).resolve().parent.parent / "pretrained"))
    return sorted(p.name[: -len(".safetensors")] for p in folder.glob("*.safetensors"))


def _checkpoint_help() -> str:
    names = ", ".join(_shipped_names()) or "none found"
    return (f"a shipped model's NAME ({names}) or the PATH of a checkpoint file; the path given to "
            "`train --out` works as it is (.safetensors may be left off)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m explorer", description=__doc__ + "\n\n" + COUNTING, formatter_class=_Help)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, help: str, epilog: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, epilog=epilog, formatter_class=_Help)

    t = command("train", "train a model on a toy task or a TSV of sentence pairs",
                epilog="Defaults are shared with the app's Train page (explorer/settings.py). A translation run "
                       f"without --steps lasts {defaults.EPOCHS:g} epochs of the data, at least "
                       f"{defaults.MIN_STEPS:,} and at most {defaults.MAX_STEPS:,} steps, and stops once validation "
                       f"token accuracy has not improved for {defaults.STOP_PATIENCE} evaluations.")
    source = t.add_mutually_exclusive_group(required=True)
    source.add_argument("--task", choices=defaults.TASKS, help="a toy task to train on")
    source.add_argument("--data", help="a TSV file to train on: source<TAB>target[<TAB>attribution] per line")
    t.add_argument("--out", required=True, help="checkpoint path (.safetensors is added if missing); give the "
                                                "same path to --checkpoint later")
    t.add_argument("--overwrite", action="store_true", help="replace the --out file if it exists (without it, an "
                                                            "existing file is refused before training)")
    t.add_argument("--name", help="model name stored in the checkpoint (default: the file's stem)")
    t.add_argument("--resume", default=None, metavar="CHECKPOINT",
                   help="train this checkpoint further (a shipped NAME or a PATH) instead of a new model, on --data "
                        "(the file it was trained on, or a new one in its languages) or on its --task; its sizes and "
                        "vocabularies are kept, the training flags apply to this run (default: a new model)")
    for s in settings.SETTINGS:  # every model, data and training setting, from its one definition
        t.add_argument(s.flag, **settings.flag_options(s))
    t.add_argument("--half", action="store_true", help="store weights in float16 (smaller file)")
    t.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads per training process (default: the idle cores over the processes)")
    t.add_argument("--processes", type=int, default=None,
                   help="training processes on this machine's CPU (torch.distributed, gloo): each takes a share of "
                        "every batch (default: 2 where this process may use two cores and the hidden size is "
                        f"{defaults.DDP_MIN_HIDDEN} or more, else 1: smaller models train faster in one; 1 gives the "
                        "single-process float sums). Under torchrun, its --nproc-per-node and --nnodes set them instead")
    t.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where to train (auto: a CUDA GPU when torch sees one, else the CPU; "
                        "the EXPLORER_DEVICE environment variable sets what auto picks)")
    t.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (by default: a line every few seconds, a bar on a terminal)")

    e = command("eval", "score a checkpoint on fresh task samples or a TSV file")
    e.add_argument("--checkpoint", required=True, help=_checkpoint_help())
    e.add_argument("--samples", type=int, default=None,
                   help="toy tasks: fresh samples (default 1000); --data: first N pairs (default all)")
    e.add_argument("--min-len", type=int, default=None, help="toy tasks: shortest input (default: the model's)")
    e.add_argument("--max-len", type=int, default=None, help="toy tasks: longest input (default: the model's)")
    e.add_argument("--seed", type=int, default=12345, help="toy tasks: seed of the fresh samples")
    e.add_argument("--data", default=None, help="translation: a TSV file of pairs to score on (default: none; "
                                                "translation models need one)")
    e.add_argument("--beam", type=int, default=1, help="translation: beam width (1: greedy)")
    e.add_argument("--split", choices=("all", "valid"), default="all",
                   help="translation: score the whole file, or only the held-out split the model was trained beside")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (by default, with --data: a line every few seconds, a bar on a terminal)")

    r = command("trace", "decode one input and print every intermediate", epilog=COUNTING)
    r.add_argument("--checkpoint", required=True, help=_checkpoint_help())
    r.add_argument("--input", required=True, help="the text to decode")
    r.add_argument("--target", default=None, help="teacher-force this output instead of decoding freely (default: decode freely)")
    r.add_argument("--temperature", type=float, default=1.0, help="softmax temperature of the attention weights")
    r.add_argument("--mask", type=int, action="append", default=[], metavar="I",
                   help="hide input position I (from 1) from attention at every step (repeatable)")
    r.add_argument("--pin", action="append", default=[], metavar="T:I",
                   help="put all of step T's attention on input position I (both from 1; repeatable)")
    r.add_argument("--force", action="append", default=[], metavar="T:TOKEN",
                   help="make TOKEN the output chosen at step T (from 1; repeatable): an output token of the model; "
                        "a translation model's pieces that start a word begin with ▁, and a word typed without it "
                        "is taken as its one piece (--force 1:Nous forces ▁Nous)")
    r.add_argument("--json", action="store_true", help="print the whole trace as JSON (its arrays are indexed "
                                                       "from 0, as JSON arrays are; its 'intervention' counts from 1)")
    r.add_argument("--attributions", action="store_true",
                   help="also explain every step: attributions beside α and counterfactual attention (as "
                        "`faithfulness --input`; in the JSON under 'faithfulness'); only without a what-if")
    r.add_argument("--html", default=None, metavar="FILE",
                   help="also write the trace as one self-contained HTML file that steps through decoding with "
                        "← → and works offline (plotly.js and the Chinese glyphs it uses inside; default: none)")

    tr = command("translate", "translate --input, or stdin line by line")
    tr.add_argument("--checkpoint", required=True, help=_checkpoint_help())
    tr.add_argument("--input", default=None, help="one sentence (default: read stdin, one sentence a line)")
    tr.add_argument("--beam", type=int, default=1, help="beam width (1: greedy)")

    i = command("info", "print a checkpoint's readable config")
    i.add_argument("--checkpoint", required=True, help=_checkpoint_help())

    f = command("faithfulness", "is the attention the explanation? attributions (gradient × input, integrated "
                                "gradients, erasure) beside α and counterfactual attention, per decoder step",
                epilog="Each step's chosen token is explained with its own prefix: gradient × input and integrated "
                       "gradients of its logit (Captum; baseline: the mean token embedding at every input) on the "
                       "encoder's input embeddings, and erasure (the drop in log p when Explore's mask hides one "
                       "input from attention at that step alone). Agreement with α: top-1, Kendall τ, Jensen–Shannon distance of the |scores|. "
                       "Counterfactuals (Jain & Wallace 2019): α replaced by a permutation, the uniform α and an "
                       "adversarial α that keeps the output within --epsilon (total variation). docs/FAITHFULNESS.md")
    f.add_argument("--checkpoint", required=True, help=_checkpoint_help())
    inputs = f.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--input", default=None, help="one text: every step's attributions and counterfactuals")
    inputs.add_argument("--samples", type=int, default=None,
                        help="toy tasks: this many fresh inputs of the model's task (means over all their steps)")
    inputs.add_argument("--data", default=None, help="a TSV file whose sources (the first --limit of them) are "
                                                     "explained (means over all their steps)")
    f.add_argument("--limit", type=int, default=None, help="--data: explain only the first N sources it can read "
                                                           "(default: all)")
    f.add_argument("--split", choices=("all", "valid"), default="all",
                   help="--data: the whole file, or only the held-out split the model was trained beside")
    f.add_argument("--seed", type=int, default=12345, help="--samples: seed of the fresh inputs")
    f.add_argument("--ig-steps", type=int, default=32, help="integrated gradients: points on the path")
    f.add_argument("--epsilon", type=float, default=0.05,
                   help="the adversarial α keeps the output distribution within this total-variation distance")
    f.add_argument("--json", action="store_true", help="print one JSON object (--input: with every step's arrays)")
    f.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: the cores other work leaves idle, at least one)")
    f.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _pair_arg(text: str, what: str) -> tuple[int, str]:
    """STEP:VALUE with STEP counted from 1; returns the 0-based step."""
    step, sep, rest = text.partition(":")
    if not sep or not step.strip().lstrip("-").isdigit():
        raise ExplorerError(f"--{what} expects STEP:VALUE, got {text!r}")
    return _from_one(int(step), f"--{what} step"), rest


def _from_one(number: int, what: str) -> int:
    """A 1-based step or position as the 0-based index the trace uses."""
    if number < 1:
        raise ExplorerError(f"{what} {number} is not allowed: steps and positions count from 1")
    return number - 1


def _device_notice(device: torch.device, progress: ConsoleProgress) -> Callable[[object], None]:
    """An on_step callback that names the training device once, at the first step (only then are the
    arguments known to be good: a refused one must stay the only line on stderr), then shows progress."""
    import torch
    name = f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)
    shown = [False]

    def on_step(p) -> None:
        if not shown[0]:
            shown[0] = True
            progress.message(f"training on {name}")
        progress.on_step(p)
    return on_step


class _Interrupt:
    """Ctrl-C (SIGINT) or SIGTERM during `train`: the first, once training has begun, stops it after the current
    step, so the best weights so far are saved; before training, or a second time, it interrupts at once."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.signal: int | None = None
        self.training = False
        self._old: dict[int, object] = {}

    def __enter__(self) -> "_Interrupt":
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            for number in (signal.SIGINT, signal.SIGTERM):
                self._old[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, old in self._old.items():
            signal.signal(number, old)  # type: ignore[arg-type]

    def _handle(self, number: int, frame: object) -> None:
        if not self.training or self.stop.is_set():
            raise KeyboardInterrupt
        self.signal = number
        self.stop.set()
        sys.stderr.write(f"\n{signal.Signals(number).name}: stopping after this step to save the best weights so "
                         "far (again: quit without saving)\n")


def cmd_train(args: argparse.Namespace) -> int:
    """One process, N processes on this machine (--processes), or one rank of a torchrun launch: the same
    training in each (explorer/training/distributed.py); rank 0 alone prints progress and writes the checkpoint."""
    with _Interrupt() as interrupt:
        return _train_here(args, interrupt)


def _train_here(args: argparse.Namespace, interrupt: _Interrupt) -> int:
    import os

    from explorer.checkpoints.checkpoint import target_path
    from explorer.training import distributed
    from explorer.engine.devices import pick_device
    from explorer.training.recipes import auto_threads
    out = target_path(args.out)
    if not args.overwrite and os.path.lexists(out):
        raise ExplorerError(f"--out {out} exists: give --overwrite to replace it, or another --out")
    device = pick_device(args.device)
    idle = auto_threads()
    if distributed.under_torchrun():
        if args.processes not in (None, 1):
            raise ExplorerError("under torchrun, its --nproc-per-node and --nnodes set the processes: "
                                "leave out --processes")
        local = distributed.launch_from().local_size
        world = distributed.from_environment(device)
        try:
            return _train_rank(args, world, args.threads or max(1, idle // local), interrupt)
        except RuntimeError as exc:  # a collective another rank never joined (DDP's all_reduce in backward)
            if distributed.is_collective_failure(exc):
                raise distributed.DistributedError(distributed.stopped_message(exc)) from exc
            raise
        finally:
            distributed.leave()
    hidden = args.hidden or (settings.setting("hidden").toy if args.task else None)  # translation: >= 128
    processes = distributed.processes_wanted(args.processes if device.type == "cpu" else args.processes or 1,
                                             hidden=hidden)
    if args.processes is None and not distributed.can_fork():
        processes = 1  # the default where this process cannot fork ranks (main() called from a threaded program)
    if processes > 1 and device.type != "cpu":
        raise ExplorerError("--processes is for the CPU: train on several GPUs with torchrun --nproc-per-node N")
    threads = args.threads or max(1, idle // processes)
    return distributed.run_ranks(processes, device, lambda world: _train_rank(args, world, threads, interrupt))


def _train_rank(args: argparse.Namespace, world, threads: int, interrupt: _Interrupt) -> int:
    """Train as rank `world.rank` of `world.size`; rank 0 writes the checkpoint (atomically) and the summary;
    an interrupted run saves its best weights so far and exits 128 + the signal's number."""
    import torch

    from explorer.checkpoints import checkpoint
    import contextlib

    from explorer.training.recipes import train_from_args
    torch.set_num_threads(threads)
    progress = ConsoleProgress(quiet=args.quiet or not world.leader)
    # rank 0 writes: a second training to the same --out is refused now, not overwritten at its end
    with checkpoint.writer(args.out) if world.leader else contextlib.nullcontext():
        shown = _device_notice(world.device, progress)

        def on_step(p) -> None:
            interrupt.training = True
            shown(p)
        bundle, result = train_from_args(args, on_eval=progress.on_eval, on_step=on_step, device=world.device,
                                         stop=interrupt.stop, world=world, note=lambda text: progress.message(f"note: {text}"))
        if not world.leader:
            return 0
        path = checkpoint.save(bundle, args.out, half=args.half)
    m = result.metrics
    progress.summary(result.steps, result.seconds, result.reason, m.exact_match, m.token_accuracy, str(path))
    print(json.dumps({"checkpoint": str(path), "device": world.device.type, "processes": result.processes,
                      "steps": result.steps, "examples": result.examples, "seconds": round(result.seconds, 2),
                      "stopped_because": result.reason, **m.to_dict()}))
    if interrupt.signal is not None and result.reason == "stopped":
        best = result.history[-1].get("restored_best_from_step", result.steps) if result.history else result.steps
        sys.stderr.write(f"interrupted at step {result.steps:,}: saved the weights of step {best:,} (the best "
                         f"validation so far, token accuracy {m.token_accuracy:.3f}) to {path}; go on with "
                         f"{_resume_command(args, path)}\n")
        return 128 + interrupt.signal
    return 0


def _resume_command(args: argparse.Namespace, path: Path) -> str:
    """The whole command that trains a saved model further: --resume alone is refused (its data and --out)."""
    source = ["--task", args.task] if args.task else ["--data", str(args.data)]
    stem = path.name.removesuffix(".safetensors")
    return shlex.join(["python", "-m", "explorer", "train", "--resume", str(path), *source, "--out",
                       str(path.with_name(f"{stem}-more"))])


def cmd_eval(args: argparse.Namespace) -> int:
    from explorer.checkpoints import checkpoint
    from explorer.training.evaluation import evaluate_checkpoint
    bundle = checkpoint.load(args.checkpoint)
    if args.samples is not None and args.samples < 1:
        raise ExplorerError("--samples must be at least 1")
    samples = args.samples if args.samples is not None else (None if args.data else 1000)
    progress = ConsoleProgress(quiet=args.quiet)
    report = evaluate_checkpoint(bundle, samples=samples, min_len=args.min_len, max_len=args.max_len,
                                 seed=args.seed, data=args.data, beam=args.beam, split=args.split,
                                 on_progress=lambda done, total: progress.on_count(done, total, "pairs"),
                                 note=lambda text: progress.message(f"note: {text}"))
    if args.data is not None and progress.started is not None:
        progress.finish(f"done: {report['n']:,} pairs scored in {fmt_seconds(progress.clock() - progress.started)}")
    if "bleu_note" in report:  # BLEU says nothing here: exact match and chrF lead, and the note says why
        first = [key for key in ("n", "exact_match", "chrf") if key in report]
        report = {**{key: report[key] for key in first}, **report}
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>20}: {value}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from explorer.checkpoints import checkpoint
    from explorer.engine.lengths import cut_note
    from explorer.engine.trace import Intervention, trace
    html = _html_target(args.html) if args.html else None  # before any work
    bundle = checkpoint.load(args.checkpoint)
    pins = tuple((t, _from_one(int(v), "--pin position")) for t, v in  # cli_checks: whole numbers
                 (_pair_arg(p, "pin") for p in args.pin))
    from explorer.engine.trace import output_piece
    forced = tuple((t, output_piece(bundle, token)) for t, token in (_pair_arg(f, "force") for f in args.force))
    masked = tuple(_from_one(i, "--mask position") for i in args.mask)
    intervention = Intervention(args.temperature, masked, pins, forced)
    tr = trace(bundle, args.input, intervention, target=args.target)
    if tr.unknown_tokens:
        print(f"warning: unknown tokens shown as <unk>: {' '.join(tr.unknown_tokens)}", file=sys.stderr)
    cut = None if args.target is not None else cut_note(bundle, len(tr.source_tokens), tr.output_tokens)
    if cut:
        print(f"note: {cut}", file=sys.stderr)
    if html is not None:
        _write_trace_html(bundle, tr, args.input, html)
    explanation = None
    if args.attributions:
        from explorer.engine.attribution import explain
        explanation = explain(bundle, args.input, tr)
    if args.json:
        print(tr.to_json(explanation))
    else:
        print(f"input : {' '.join(tr.source_tokens)}")
        print(f"output: {' '.join(tr.output_tokens)}")
        if tr.has_attention:
            for t, tok in enumerate(tr.output_tokens):
                i = int(tr.weights[t].argmax())
                print(f"  step {t + 1:>2}: {tok!r:>8} attends {tr.source_tokens[i]!r} at position {i + 1} "
                      f"(α={tr.weights[t, i]:.3f})")
        if explanation is not None:
            from explorer.faithfulness import explanation_lines
            print("\n".join(explanation_lines(explanation)[2:]))  # input and output are printed above
    return 0


def _html_target(name: str) -> Path:
    """--html FILE checked before the model is loaded: a folder or a missing folder is one line."""
    path = Path(name)
    if path.is_dir():
        raise ExplorerError(f"--html {path} is a folder, not a file")
    if not path.parent.is_dir():
        raise ExplorerError(f"--html: the folder {path.parent} does not exist")
    return path


def _write_trace_html(bundle, tr, text: str, path: Path) -> None:
    """The offline trace page (explorer/app/figures/offline.py), written whole or not at all."""
    from explorer.app.figures.offline import trace_page
    from explorer.app.views import output_text
    page = trace_page(tr, bundle.cfg.cell, text, output_text(bundle, tr))
    try:
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_text(page, encoding="utf-8")
        temp.replace(path)
    except OSError as exc:
        raise ExplorerError(f"--html: cannot write {path}: {exc.strerror or exc}") from None
    print(f"wrote {path} ({len(page.encode('utf-8')) / 1e6:.1f} MB)", file=sys.stderr)


def cmd_translate(args: argparse.Namespace) -> int:
    from explorer.checkpoints import checkpoint
    from explorer.training.evaluation import translate_one
    bundle = checkpoint.load(args.checkpoint)
    if args.input is not None:
        done = translate_one(bundle, args.input, beam=args.beam)
        if done.unknown:
            print(f"warning: unknown words: {' '.join(done.unknown)}", file=sys.stderr)
        if done.cut:
            print(f"note: {done.cut}", file=sys.stderr)
        print(done.text)
        return 0
    status = 0
    for number, line in lines(sys.stdin.buffer):
        try:
            if isinstance(line, ExplorerError):
                raise line
            done = translate_one(bundle, line, beam=args.beam)
            text = done.text
            if done.unknown:
                print(f"line {number}: warning: unknown words: {' '.join(done.unknown)}", file=sys.stderr)
            if done.cut:
                print(f"line {number}: note: {done.cut}", file=sys.stderr)
        except ExplorerError as exc:
            print(f"line {number}: {exc}", file=sys.stderr)
            text = ""
        print(text, flush=True)
    return status


def cmd_info(args: argparse.Namespace) -> int:
    from explorer.checkpoints import checkpoint
    bundle = checkpoint.load(args.checkpoint)
    info = checkpoint.describe(bundle)
    for key in ("source_vocab", "target_vocab"):
        vocab = info[key]
        info[key] = vocab if len(vocab) <= 60 else vocab[:60] + [f"… {len(vocab) - 60} more"]
    if "tokenizers" in info:
        info["tokenizers"] = {side: f"byte-fallback BPE, {len(vocab)} pieces ({len(text):,} characters of JSON)"
                              for side, text, vocab in (("source", info["tokenizers"]["source"], bundle.src_vocab),
                                                        ("target", info["tokenizers"]["target"], bundle.tgt_vocab))}
    print(json.dumps(info, indent=2, ensure_ascii=False))
    return 0


def cmd_faithfulness(args: argparse.Namespace) -> int:
    import torch

    from explorer import faithfulness
    from explorer.checkpoints import checkpoint
    from explorer.training import explanations
    from explorer.training.recipes import auto_threads
    torch.set_num_threads(args.threads or auto_threads())  # two threads on one busy core: 20-50x slower
    bundle = checkpoint.load(args.checkpoint)
    options = {"ig_steps": args.ig_steps, "epsilon": args.epsilon}
    progress = ConsoleProgress(quiet=args.quiet)
    if args.input is not None:
        done = explanations.explain_sources(bundle, [args.input], **options)[0]
        if args.json:
            print(json.dumps(faithfulness.json_ready(faithfulness.explanation_json_dict(done)), ensure_ascii=False))
        else:
            print("\n".join(faithfulness.explanation_lines(done)))
        return 0
    if args.samples is not None:
        sources = explanations.task_sources(bundle, args.samples, args.seed)
    else:
        sources = explanations.tsv_sources(bundle, args.data, args.limit, args.split)
    progress.on_count(0, len(sources), "sentences")
    done = explanations.explain_sources(bundle, sources, **options,
                                        on_progress=lambda n, total: progress.on_count(n, total, "sentences"))
    if progress.started is not None:
        progress.finish(f"done: {len(done):,} sentences explained in "
                         f"{fmt_seconds(progress.clock() - progress.started)}")
    report = faithfulness.summarise(done)
    if args.json:
        print(json.dumps(faithfulness.json_ready(report), ensure_ascii=False))
    else:
        print("\n".join(faithfulness.report_lines(report)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"train": cmd_train, "eval": cmd_eval, "trace": cmd_trace,
               "translate": cmd_translate, "info": cmd_info, "faithfulness": cmd_faithfulness}[args.command]
    try:
        check_arguments(args)
        check_args(args)
        return handler(args)
    except ExplorerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory: try a smaller model, batch, beam or file", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`| head`): what it wanted was written; not an error
        try:
            sys.stdout = open(os.devnull, "w")  # so the interpreter's last flush does not complain
        except OSError:
            pass
        return 0
    except OSError as exc:  # the system refused (disk full, permissions): the user's to fix, not a bug
        where = f" ({str(exc.filename)[:120]})" if exc.filename else ""
        print(f"error: {exc.strerror or type(exc).__name__}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: still one line, never a traceback
        print(f"error: internal error ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})",
              file=sys.stderr)
        return 1


def run() -> None:
    """The command line (`python -m explorer` and the installed `explorer`): main(), then exit with its code once
    what was printed is out, without the interpreter's teardown: by then every file is written and closed, child
    processes are joined, and the teardown was torch's finalizers, 0.4-0.8 s of a 10-second `train`
    (benchmarks/RESULTS.md, "2026-12-07 evening")."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone (| head) or a stream closed: what it took was written
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
