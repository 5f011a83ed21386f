"""How long "Is the attention the explanation?" takes (explorer/engine/attribution.py), and the shipped models'
figures.

1. All methods and the counterfactuals for one 12-piece eng-fra sentence (aim: at most 1.5 s on 2 cores):
   gradient × input, integrated gradients (32 steps), erasure, the permuted, uniform and adversarial α. The
   median of --repeats runs after one warm-up, wall and CPU seconds, and each part's share.
2. `python -m explorer faithfulness --checkpoint reverse --samples 500` (aim: at most 5 minutes), in a fresh
   process, with its JSON figures.

    python benchmarks/faithfulness.py [--threads 2] [--samples 500] [--repeats 5] [--json out.json]
    python benchmarks/faithfulness.py --store   # (re)write pretrained/faithfulness.json, Compare's twins
    python benchmarks/faithfulness.py --attribution-study 20 [MODEL...] [--seed 999]   # the choices compared

3. `--attribution-study N MODEL...` (default: the held-out toy models reverse-scaled, reverse-additive, sort,
   dates; seed 999, inputs the tests and the stored reports do not use): how often each choice's top input is
   the true one (attribution_study says which choices), and IG's convergence and seconds. It chose what
   explorer/engine/attribution.py computes (docs/FAITHFULNESS.md).

Wall time depends on what else the machine runs: each figure is printed with the load average it ran under.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Sentences eng-fra reads in exactly 12 pieces (the first it still spells in 12 is used).
SENTENCES = ("Can you tell me how to get to the train station?", "How can we use variable input lengths in this new model?",
             "I think that we should go home before it gets dark.")


def load() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def sentence_section(threads: int, repeats: int) -> dict:
    import torch

    from explorer.checkpoints.registry import load_shipped
    from explorer.engine import attribution
    from explorer.engine.trace import trace
    torch.set_num_threads(threads)
    bundle = load_shipped("eng-fra")
    text = next((s for s in SENTENCES if len(bundle.prepare(s).ids) == 12), None)
    if text is None:
        raise SystemExit("none of the sentences is 12 pieces for this eng-fra: add one to SENTENCES")
    prepared = bundle.prepare(text)
    tr = trace(bundle, prepared)
    attribution.explain(bundle, prepared, tr)  # warm-up: Captum's imports, first allocations
    model = bundle.model
    src = torch.tensor([prepared.ids])
    out = torch.tensor([tr.output_ids.tolist()])
    parts = {"gradients (grad × input, IG 32 steps)": lambda: attribution._gradients(model, src, out, 32),
             "where each step starts (a teacher-forced decode)": lambda: attribution._step_starts(model, src, out),
             "erasure": lambda: attribution._erasure(starts, src.shape[1]),
             "counterfactual α": lambda: attribution._counterfactuals(starts, 0.05, 0)}
    starts = attribution._step_starts(model, src, out)
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        attribution.explain(bundle, prepared, tr)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    shares = {}
    for name, run in parts.items():
        started = time.perf_counter()
        run()
        shares[name] = time.perf_counter() - started
    result = {"sentence": text, "pieces": len(prepared.ids), "steps": tr.steps, "threads": threads,
              "wall_median_s": statistics.median(walls), "wall_min_s": min(walls),
              "cpu_median_s": statistics.median(cpus), "parts_s": shares, "load_average": load()}
    print(f"1. one eng-fra sentence of {len(prepared.ids)} pieces, {tr.steps} steps ({text!r}), {threads} threads, "
          f"load {result['load_average']}: median {result['wall_median_s']:.2f} s wall (min "
          f"{result['wall_min_s']:.2f} s), {result['cpu_median_s']:.2f} s CPU over {repeats} runs", flush=True)
    for name, seconds in shares.items():
        print(f"   {name}: {seconds:.2f} s", flush=True)
    return result


def samples_section(samples: int, threads: int) -> dict:
    started, load_before = time.perf_counter(), load()
    done = subprocess.run([sys.executable, "-m", "explorer", "faithfulness", "--checkpoint", "reverse", "--samples",
                           str(samples), "--json", "--quiet", "--threads", str(threads)],
                          cwd=ROOT, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"faithfulness --samples {samples} failed: {done.stderr.strip()[-500:]}")
    report = json.loads(done.stdout)
    print(f"2. faithfulness --checkpoint reverse --samples {samples} --threads {threads}: {seconds:.0f} s wall "
          f"(load {load_before} → {load()}), {report['seconds_per_sentence']:.2f} s a sentence, "
          f"{report['steps']:,} steps", flush=True)
    for method, m in report["methods"].items():
        print(f"   {method}: top-1 {m['top1_agreement']:.3f}, Kendall τ {m['kendall_tau']:.3f}, JSD {m['jsd']:.3f}")
    c = report["counterfactual"]
    print("   flip rates: " + ", ".join(f"{k} {c[k + '_flip_rate']:.3f}" for k in ("permuted", "uniform", "adversarial"))
          + f"; adversarial JSD {c['adversarial_jsd']:.3f}")
    print(f"   IG converged at {report['integrated_gradients']['converged_share']:.3f} of steps; true input: "
          + ", ".join(f"{k} {v:.3f}" for k, v in report.get("truth", {}).items()), flush=True)
    return {"samples": samples, "threads": threads, "wall_s": seconds, "report": report}


def erasure_every_step(model, src, out):
    """Erasure as a user sees it in Explore (the input hidden at every step, the prefix teacher-forced): log p(y_t)
    − log p(y_t | x_i hidden) (T, S), one batch row per position."""
    import torch

    from explorer.engine.decoding import decode
    from explorer.engine.model import Control
    from explorer.engine.trace import erasure_masks
    S, T = src.shape[1], out.shape[1]
    with torch.no_grad():
        memory = model.encode(src, torch.tensor([S]))
        runs = [decode(model, memory.select(torch.zeros(n, dtype=torch.long)), T, target=out.expand(n, -1),
                       default_control=control, keep_steps=True).steps
                for n, control in ((1, None), (S, Control(mask=erasure_masks(S))))]
        plain, hidden = (torch.log_softmax(torch.stack([s.logits for s in r], 1).float(), -1)
                         .gather(2, out.expand(len(r[0].logits), -1).unsqueeze(2)).squeeze(2) for r in runs)
    return (plain - hidden).T.double().numpy()


def attribution_study(samples: int, seed: int, names: list[str], threads: int) -> dict:
    """How often each choice's top input is the true one, on `samples` fresh inputs of each toy model (seed
    `seed`): gradient × input and integrated gradients for each target (p(y_t), log p(y_t), y_t's logit), IG from
    each baseline (the <pad> embedding, i.e. zero; the mean token embedding; the average of IG from 4 baselines of
    uniformly drawn tokens, 4x the cost), each aggregated over the embedding three ways (signed sum, L2 norm, sum
    of absolute values); IG's convergence (|delta| within 5% of the output's change) and seconds; α; erasure with
    the input hidden at every step (Explore's mask as a user sets it) and at step t alone."""
    import numpy as np
    import torch
    from captum.attr import InputXGradient, IntegratedGradients

    from explorer.checkpoints.registry import load_shipped
    from explorer.data.tasks import argmax_hits
    from explorer.data.vocab import SPECIALS
    from explorer.engine import attribution
    from explorer.engine.trace import trace
    from explorer.faithfulness import IG_TOLERANCE
    from explorer.training.explanations import task_sources
    torch.set_num_threads(threads)
    aggregations = {"signed sum": lambda a: a.sum(-1).abs(), "L2 norm": lambda a: a.norm(dim=-1),
                    "absolute sum": lambda a: a.abs().sum(-1)}
    results: dict = {}
    for name in names:
        bundle = load_shipped(name)
        model = bundle.model
        table = model.encoder.embed.weight.detach()
        generator = torch.Generator().manual_seed(0)
        tally: dict = {}
        seconds: dict = {}

        def add(key: str, top, sets, converged=None) -> None:
            t = tally.setdefault(key, {"hits": 0, "counted": 0, "converged": 0, "steps": 0})
            hits, counted = argmax_hits(top.tolist(), sets)
            t["hits"] += hits
            t["counted"] += counted
            if converged is not None:
                t["converged"] += int(converged.sum())
                t["steps"] += len(converged)
        for prepared in task_sources(bundle, samples, seed):
            tr = trace(bundle, prepared)
            sets = tuple(tuple(np.flatnonzero(row).tolist()) for row in tr.alignment)
            src, out = torch.tensor([prepared.ids]), torch.tensor([tr.output_ids.tolist()])
            T, S = out.shape[1], src.shape[1]
            steps = torch.arange(T)
            with torch.no_grad():
                x = model.encoder.embed(src).expand(T, -1, -1).contiguous()
            add("alpha", np.asarray(tr.weights).argmax(1), sets)
            for target in ("probability", "log_probability", "logit"):
                forward = attribution._OnePass(model, src, out, target=target).forward
                with torch.enable_grad():
                    gxi = InputXGradient(forward).attribute(x.clone().requires_grad_(),
                                                            additional_forward_args=steps).detach()
                for agg, reduce in aggregations.items():
                    add(f"grad_x_input | {target} | {agg}", reduce(gxi).argmax(1).numpy(), sets)
                drawn = torch.randint(len(SPECIALS), table.shape[0], (4, S), generator=generator)
                baselines = {"zero (<pad>)": [torch.zeros_like(x)],
                             "mean embedding": [table[len(SPECIALS):].mean(0).expand_as(x).contiguous()],
                             "4 random-token baselines": [table[drawn[k]].expand_as(x).contiguous() for k in range(4)]}
                for base_name, bases in baselines.items():
                    started = time.perf_counter()
                    runs = []
                    for base in bases:
                        with torch.enable_grad():
                            ig, delta = IntegratedGradients(forward).attribute(
                                x, baselines=base, additional_forward_args=steps, n_steps=32,
                                return_convergence_delta=True, internal_batch_size=512)
                        runs.append((ig.detach().double(), delta.detach().double()))
                    key = f"{target} | {base_name}"
                    seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - started
                    ig = sum(r[0] for r in runs) / len(runs)
                    delta = sum(r[1] for r in runs) / len(runs)
                    change = ig.sum((1, 2)) - delta
                    converged = (delta.abs() <= IG_TOLERANCE * change.abs()).numpy()
                    for agg, reduce in aggregations.items():
                        add(f"integrated_gradients | {key} | {agg}", reduce(ig).argmax(1).numpy(), sets, converged)
            if S > 1:
                every = erasure_every_step(model, src, out)
                add("erasure | every step", np.abs(every).argmax(1), sets)
                at_step = attribution._erasure(attribution._step_starts(model, src, out), S)
                add("erasure | at step t", np.abs(at_step).argmax(1), sets)
        results[name] = {key: {"true_input": t["hits"] / max(t["counted"], 1), "steps": t["counted"],
                               **({"converged": t["converged"] / t["steps"]} if t["steps"] else {})}
                         for key, t in tally.items()}
        results[name]["seconds"] = seconds
        print(f"3. {name} ({samples} inputs, seed {seed}, load {load()}):", flush=True)
        for key, r in results[name].items():
            if key != "seconds":
                print(f"   {key:<62} true input {r['true_input']:.1%} of {r['steps']}"
                      + (f", converged {r['converged']:.1%}" if "converged" in r else ""), flush=True)
    return results


def store(threads: int) -> None:
    """The Compare page's stored figures of the reverse twins (explanations.STORED_SAMPLES fresh inputs each)."""
    import torch

    from explorer.checkpoints import checkpoint
    from explorer.checkpoints.registry import load_shipped
    from explorer.training import explanations
    torch.set_num_threads(threads)
    entries = []
    for name in ("reverse", "reverse-scaled", "reverse-additive", "reverse-none"):
        if name not in checkpoint.pretrained_names():
            continue
        started = time.perf_counter()
        report = explanations.faithfulness_report(load_shipped(name), explanations.STORED_SAMPLES,
                                                  explanations.STORED_SEED)
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)
        entries.append((checkpoint.resolve(name), report))
    print(explanations.store_reports(entries))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-samples", action="store_true", help="only the one-sentence measurement")
    parser.add_argument("--store", action="store_true", help="write pretrained/faithfulness.json and stop")
    parser.add_argument("--attribution-study", nargs="+", metavar=("N", "MODEL"), default=None,
                        help="the attributions' true input on N inputs of each toy MODEL under other choices")
    parser.add_argument("--seed", type=int, default=999, help="--attribution-study: the inputs' seed")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()
    if args.store:
        store(args.threads)
        return 0
    if args.attribution_study:
        names = args.attribution_study[1:] or ["reverse-scaled", "reverse-additive", "sort", "dates"]
        study = attribution_study(int(args.attribution_study[0]), args.seed, names, args.threads)
        if args.json:
            Path(args.json).write_text(json.dumps({"attribution_study": study, "seed": args.seed}, indent=1) + "\n",
                                       encoding="utf-8")
        return 0
    results = {"sentence": sentence_section(args.threads, args.repeats)}
    if not args.skip_samples:
        results["samples"] = samples_section(args.samples, args.threads)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
