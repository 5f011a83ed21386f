"""How long "Is the attention the explanation?" takes (explorer/engine/attribution.py), and the shipped models'
figures.

1. All methods and the counterfactuals for one 12-piece eng-fra sentence (aim: at most 1.5 s on 2 cores):
   gradient × input, integrated gradients (32 steps), erasure, the permuted, uniform and adversarial α. The
   median of --repeats runs after one warm-up, wall and CPU seconds, and each part's share.
2. `python -m explorer faithfulness --checkpoint reverse --samples 500` (aim: at most 5 minutes), in a fresh
   process, with its JSON figures.

    python benchmarks/faithfulness.py [--threads 2] [--samples 500] [--repeats 5] [--json out.json]
    python benchmarks/faithfulness.py --store   # (re)write pretrained/faithfulness.json, Compare's twins
    python benchmarks/faithfulness.py --ig-study 60 copy reverse   # IG's true input under other choices

3. `--ig-study N MODEL...`: on N fresh inputs of each toy model (seed 12345, the stored reports' inputs), how
   often integrated gradients' top input is the true one and how often Captum's delta is within 5%, for the
   shipped choice (32 points from the <pad> embedding, the zero vector), for 4 × 32 points at the steps where
   32 missed completeness, and for a uniform baseline: the mean embedding of the source vocabulary's tokens
   (the embedding of the maximum-entropy mixture of the tokens; Sturmfels, Lundberg & Lee 2020, Distill,
   "Visualizing the Impact of Feature Attribution Baselines"; Zhang et al. 2022, "Maximum Entropy Baseline for
   Integrated Gradients"). Each variant's seconds of IG are summed over the same inputs, run one after the other.

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
             "erasure": lambda: attribution._erasure(model, src, out),
             "counterfactual α": lambda: attribution._counterfactuals(model, src, out, 0.05, 0)}
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


def ig_study(samples: int, names: list[str], threads: int) -> dict:
    import numpy as np
    import torch
    from captum.attr import IntegratedGradients

    from explorer.checkpoints.registry import load_shipped
    from explorer.data.tasks import argmax_hits
    from explorer.data.vocab import SPECIALS
    from explorer.engine import attribution
    from explorer.engine.trace import trace
    from explorer.faithfulness import IG_TOLERANCE
    from explorer.training.explanations import STORED_SEED, task_sources
    torch.set_num_threads(threads)
    results = {}
    for name in names:
        bundle = load_shipped(name)
        model = bundle.model
        mean = model.encoder.embed.weight.detach()[len(SPECIALS):].mean(0)
        tally = {v: {"hits": 0, "counted": 0, "converged": 0, "steps": 0, "seconds": 0.0}
                 for v in ("zero, 32", "zero, 32 then 128 where missed", "mean embedding, 32")}
        for prepared in task_sources(bundle, samples, STORED_SEED):
            tr = trace(bundle, prepared)
            src, out = torch.tensor([prepared.ids]), torch.tensor([tr.output_ids.tolist()])
            T = out.shape[1]
            forward = attribution._chosen_probability(model, src, out)
            with torch.no_grad():
                x = model.encoder.embed(src).expand(T, -1, -1).contiguous()
            steps = torch.arange(T)

            def integrate(rows, base, n):
                with torch.enable_grad():
                    ig, delta = IntegratedGradients(forward).attribute(
                        x[rows], baselines=base[rows], additional_forward_args=steps[rows], n_steps=n,
                        return_convergence_delta=True, internal_batch_size=512)
                return ig.detach().double(), delta.detach().double()

            zero, uniform = torch.zeros_like(x), mean.expand_as(x).contiguous()
            for variant, base, refine in (("zero, 32", zero, False), ("zero, 32 then 128 where missed", zero, True),
                                          ("mean embedding, 32", uniform, False)):
                started = time.perf_counter()
                ig, delta = integrate(steps, base, 32)
                change = ig.sum((1, 2)) - delta
                missed = (delta.abs() > IG_TOLERANCE * change.abs()).nonzero().squeeze(1)
                if refine and len(missed):
                    ig[missed], delta[missed] = integrate(missed, base, 128)
                    change = ig.sum((1, 2)) - delta
                t = tally[variant]
                t["seconds"] += time.perf_counter() - started
                sets = tuple(tuple(np.flatnonzero(row).tolist()) for row in tr.alignment)
                hits, counted = argmax_hits(ig.sum(-1).abs().argmax(1).tolist(), sets)
                t["hits"] += hits
                t["counted"] += counted
                t["converged"] += int((delta.abs() <= IG_TOLERANCE * change.abs()).sum())
                t["steps"] += T
        results[name] = {}
        for variant, t in tally.items():
            results[name][variant] = {"true_input": t["hits"] / t["counted"], "converged": t["converged"] / t["steps"],
                                      "seconds": t["seconds"], "steps": t["counted"]}
            print(f"3. {name}, IG {variant}: true input {t['hits'] / t['counted']:.1%} of {t['counted']} steps, "
                  f"converged {t['converged'] / t['steps']:.1%}, {t['seconds']:.1f} s (load {load()})", flush=True)
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
    parser.add_argument("--ig-study", nargs="+", metavar=("N", "MODEL"), default=None,
                        help="integrated gradients' true input on N inputs of each toy MODEL under other choices")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()
    if args.store:
        store(args.threads)
        return 0
    if args.ig_study:
        study = ig_study(int(args.ig_study[0]), args.ig_study[1:] or ["copy", "reverse"], args.threads)
        if args.json:
            Path(args.json).write_text(json.dumps({"ig_study": study}, indent=1) + "\n", encoding="utf-8")
        return 0
    results = {"sentence": sentence_section(args.threads, args.repeats)}
    if not args.skip_samples:
        results["samples"] = samples_section(args.samples, args.threads)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
