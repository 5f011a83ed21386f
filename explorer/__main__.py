"""Command line: train, eval, trace, translate, info. Bad input exits 2 with one line on stderr."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Callable, Sequence

from .cli_checks import check_args
from .errors import ExplorerError

if TYPE_CHECKING:  # torch is imported by the commands that need it (startup time)
    import torch

ATTENTION_CHOICES = ("none", "dot", "scaled_dot", "additive")
CELL_CHOICES = ("rnn", "gru", "lstm", "unshared")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m explorer", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("train", help="train a model on a toy task or a TSV of sentence pairs")
    source = t.add_mutually_exclusive_group(required=True)
    source.add_argument("--task", choices=("copy", "reverse", "sort", "dates"))
    source.add_argument("--data", help="a TSV file: source<TAB>target[<TAB>attribution]")
    t.add_argument("--out", required=True, help="checkpoint path (.safetensors is added if missing)")
    t.add_argument("--name", help="model name stored in the checkpoint (default: the file's stem)")
    t.add_argument("--attention", choices=ATTENTION_CHOICES, default="dot")
    t.add_argument("--cell", choices=CELL_CHOICES, default="gru")
    t.add_argument("--min-len", type=int, default=5)
    t.add_argument("--max-len", type=int, default=15)
    t.add_argument("--alphabet", default="0123456789")
    t.add_argument("--embed", type=int, default=None)
    t.add_argument("--hidden", type=int, default=None)
    t.add_argument("--attn-dim", type=int, default=None)
    t.add_argument("--layers", type=int, default=1)
    t.add_argument("--bidirectional", action=argparse.BooleanOptionalAction, default=None,
                   help="bidirectional encoder (default: on for toy tasks and translation)")
    t.add_argument("--dropout", type=float, default=0.0)
    t.add_argument("--steps", type=int, default=None)
    t.add_argument("--batch-size", type=int, default=None)
    t.add_argument("--lr", type=float, default=None)
    t.add_argument("--clip", type=float, default=1.0)
    t.add_argument("--plateau-patience", type=int, default=None,
                   help="halve the learning rate after N evaluations without a better validation token accuracy "
                        "(0: off; toy-task default in recipes.TRAIN_DEFAULTS)")
    t.add_argument("--curriculum", type=int, default=None,
                   help="toy tasks: over the first N steps the longest training input grows from --min-len to "
                        "--max-len (0: off; default in recipes.TRAIN_DEFAULTS)")
    t.add_argument("--teacher-forcing", type=float, default=1.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--target-accuracy", type=float, default=None)
    t.add_argument("--max-seconds", type=float, default=None)
    t.add_argument("--eval-every", type=int, default=None)
    t.add_argument("--eval-samples", type=int, default=None)
    t.add_argument("--half", action="store_true", help="store weights in float16 (smaller file)")
    t.add_argument("--src-lang", default=None, help="translation: source language code (default en)")
    t.add_argument("--tgt-lang", default=None, help="translation: target language code (default: guessed)")
    t.add_argument("--max-tokens", type=int, default=40,
                   help="translation: longest sentence kept, in subword pieces (default 40)")
    t.add_argument("--min-freq", type=int, default=2,
                   help="translation: a piece is learnt only if seen this often (default 2)")
    t.add_argument("--vocab-size", type=int, default=None,
                   help="translation: subword pieces per language, specials and bytes included "
                        "(default: an eighth of the training pairs, within 1,000-8,000)")
    t.add_argument("--extra-data", default=None,
                   help="translation: a TSV of more pairs for the training split only (e.g. a glossary of a "
                        "domain's words); validation stays the --data file's held-out pairs")
    t.add_argument("--extra-repeat", type=int, default=1,
                   help="translation: how many times each --extra-data pair joins the training split (default 1)")
    t.add_argument("--label-smoothing", type=float, default=None,
                   help="share of each target's probability spread over the vocabulary (default 0.1 for "
                        "translation, 0 for toy tasks)")
    t.add_argument("--valid-fraction", type=float, default=0.05)
    t.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads per training process (default: the idle cores over the processes)")
    t.add_argument("--processes", type=int, default=None,
                   help="training processes on this machine's CPU (torch.distributed, gloo): each takes a share of "
                        "every batch (default: 2 where this process may use two cores; 1 gives the single-process "
                        "float sums). Under torchrun, its --nproc-per-node and --nnodes set them instead")
    t.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where to train (default auto: a CUDA GPU when torch sees one, else the CPU; "
                        "the EXPLORER_DEVICE environment variable sets what auto picks)")
    t.add_argument("--quiet", action="store_true")

    e = sub.add_parser("eval", help="score a checkpoint on fresh task samples or a TSV file")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--samples", type=int, default=None,
                   help="toy tasks: fresh samples (default 1000); --data: first N pairs (default all)")
    e.add_argument("--min-len", type=int, default=None)
    e.add_argument("--max-len", type=int, default=None)
    e.add_argument("--seed", type=int, default=12345)
    e.add_argument("--data", default=None)
    e.add_argument("--beam", type=int, default=1, help="translation: beam width")
    e.add_argument("--split", choices=("all", "valid"), default="all",
                   help="translation: score the whole file, or only the held-out split the model was trained beside")
    e.add_argument("--json", action="store_true")

    r = sub.add_parser("trace", help="decode one input and print every intermediate")
    r.add_argument("--checkpoint", required=True)
    r.add_argument("--input", required=True)
    r.add_argument("--target", default=None, help="teacher-force this output instead of decoding freely")
    r.add_argument("--temperature", type=float, default=1.0)
    r.add_argument("--mask", type=int, action="append", default=[], help="hide input position i (repeatable)")
    r.add_argument("--pin", action="append", default=[], help="T:I pins step T's attention to position I")
    r.add_argument("--force", action="append", default=[], help="T:TOKEN forces the token chosen at step T")
    r.add_argument("--json", action="store_true")

    tr = sub.add_parser("translate", help="translate --input, or stdin line by line")
    tr.add_argument("--checkpoint", required=True)
    tr.add_argument("--input", default=None)
    tr.add_argument("--beam", type=int, default=1)

    i = sub.add_parser("info", help="print a checkpoint's readable config")
    i.add_argument("--checkpoint", required=True)
    return p


def _pair_arg(text: str, what: str) -> tuple[int, str]:
    step, sep, rest = text.partition(":")
    if not sep or not step.strip().lstrip("-").isdigit():
        raise ExplorerError(f"--{what} expects STEP:VALUE, got {text!r}")
    return int(step), rest


def _progress_printer(quiet: bool):
    last = [0.0]

    def on_eval(p) -> None:
        if quiet:
            return
        m = p.metrics
        align = "" if m.alignment_accuracy is None else f" align {m.alignment_accuracy:.3f}"
        print(f"step {p.step:>6}/{p.total_steps}  {p.seconds:6.1f}s  loss {p.loss:.4f}  "
              f"exact {m.exact_match:.3f}  token {m.token_accuracy:.3f}{align}  {p.examples_per_second:,.0f} seq/s",
              file=sys.stderr, flush=True)
        last[0] = time.time()
    return on_eval


def _device_notice(device: torch.device, quiet: bool) -> Callable[[object], None] | None:
    """An on_step callback that names the training device once, at the first step: only then are the
    arguments known to be good (a refused one must stay the only line on stderr)."""
    if quiet:
        return None
    import torch
    name = f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)
    shown = [False]

    def on_step(p) -> None:
        if not shown[0]:
            shown[0] = True
            print(f"training on {name}", file=sys.stderr, flush=True)
    return on_step


def cmd_train(args: argparse.Namespace) -> int:
    """One process, N processes on this machine (--processes), or one rank of a torchrun launch: the same
    training in each (explorer/distributed.py); rank 0 alone prints progress and writes the checkpoint."""
    import os

    from . import distributed
    from .devices import pick_device
    from .recipes import auto_threads
    device = pick_device(args.device)
    idle = auto_threads()
    if distributed.under_torchrun():
        if args.processes not in (None, 1):
            raise ExplorerError("under torchrun, its --nproc-per-node and --nnodes set the processes: "
                                "leave out --processes")
        local = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        world = distributed.from_environment(device)
        try:
            return _train_rank(args, world, args.threads or max(1, idle // local))
        except RuntimeError as exc:  # a collective another rank never joined (DDP's all_reduce in backward)
            if distributed.is_collective_failure(exc):
                raise distributed.DistributedError(distributed.stopped_message(exc)) from exc
            raise
        finally:
            distributed.leave()
    processes = distributed.processes_wanted(args.processes if device.type == "cpu" else args.processes or 1)
    if args.processes is None and not distributed.can_fork():
        processes = 1  # the default where this process cannot fork ranks (main() called from a threaded program)
    if processes > 1 and device.type != "cpu":
        raise ExplorerError("--processes is for the CPU: train on several GPUs with torchrun --nproc-per-node N")
    threads = args.threads or max(1, idle // processes)
    return distributed.run_ranks(processes, device, lambda world: _train_rank(args, world, threads))


def _train_rank(args: argparse.Namespace, world, threads: int) -> int:
    """Train as rank `world.rank` of `world.size`; rank 0 writes the checkpoint (atomically) and the summary."""
    import torch

    from . import checkpoint
    import contextlib

    from .recipes import train_from_args
    torch.set_num_threads(threads)
    quiet = args.quiet or not world.leader
    # rank 0 writes: a second training to the same --out is refused now, not overwritten at its end
    with checkpoint.writer(args.out) if world.leader else contextlib.nullcontext():
        bundle, result = train_from_args(args, on_eval=_progress_printer(quiet),
                                         on_step=_device_notice(world.device, quiet), device=world.device, world=world)
        if not world.leader:
            return 0
        path = checkpoint.save(bundle, args.out, half=args.half)
    m = result.metrics
    print(json.dumps({"checkpoint": str(path), "device": world.device.type, "processes": result.processes,
                      "steps": result.steps, "examples": result.examples, "seconds": round(result.seconds, 2),
                      "stopped_because": result.reason, **m.to_dict()}))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from . import checkpoint
    from .evaluation import evaluate_checkpoint
    bundle = checkpoint.load(args.checkpoint)
    if args.samples is not None and args.samples < 1:
        raise ExplorerError("--samples must be at least 1")
    samples = args.samples if args.samples is not None else (None if args.data else 1000)
    report = evaluate_checkpoint(bundle, samples=samples, min_len=args.min_len, max_len=args.max_len,
                                 seed=args.seed, data=args.data, beam=args.beam, split=args.split)
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>20}: {value}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from . import checkpoint
    from .lengths import cut_note
    from .trace import Intervention, trace
    bundle = checkpoint.load(args.checkpoint)
    pins = tuple((t, int(v)) for t, v in (_pair_arg(p, "pin") for p in args.pin))
    forced = tuple(_pair_arg(f, "force") for f in args.force)
    intervention = Intervention(args.temperature, tuple(args.mask), pins, forced)
    tr = trace(bundle, args.input, intervention, target=args.target)
    if tr.unknown_tokens:
        print(f"warning: unknown tokens shown as <unk>: {' '.join(tr.unknown_tokens)}", file=sys.stderr)
    cut = None if args.target is not None else cut_note(bundle, len(tr.source_tokens), tr.output_tokens)
    if cut:
        print(f"note: {cut}", file=sys.stderr)
    if args.json:
        print(tr.to_json())
    else:
        print(f"input : {' '.join(tr.source_tokens)}")
        print(f"output: {' '.join(tr.output_tokens)}")
        if tr.has_attention:
            for t, tok in enumerate(tr.output_tokens):
                i = int(tr.weights[t].argmax())
                print(f"  step {t:>2}: {tok!r:>8} attends {tr.source_tokens[i]!r} at {i} (α={tr.weights[t, i]:.3f})")
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    from . import checkpoint
    from .evaluation import translate_one
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
    for number, line in enumerate(sys.stdin, start=1):
        line = line.rstrip("\n").rstrip("\r")
        try:
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
    from . import checkpoint
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"train": cmd_train, "eval": cmd_eval, "trace": cmd_trace,
               "translate": cmd_translate, "info": cmd_info}[args.command]
    try:
        check_args(args)
        return handler(args)
    except ExplorerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory: try a smaller model, batch, beam or file", file=sys.stderr)
        return 2
    except OSError as exc:  # the system refused (disk full, permissions): the user's to fix, not a bug
        where = f" ({str(exc.filename)[:120]})" if exc.filename else ""
        print(f"error: {exc.strerror or type(exc).__name__}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug, not bad input: still one line, never a traceback
        print(f"error: internal error ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
