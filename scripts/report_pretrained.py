"""Print the shipped models' measured metrics as Markdown tables (the figures quoted in the READMEs).

    python scripts/report_pretrained.py [--samples 1000] [--lengths 1-40] [--data-root ../shared/data]
    python scripts/report_pretrained.py --curves   # (re)write pretrained/curves.json, the Compare page's curves
    python scripts/report_pretrained.py --bleu-curves   # (re)write pretrained/bleu_by_length.json

Toy tasks: `explorer eval` over each model's own length range (fresh samples, seed 12345) and
accuracy by input length for the reversal twins; translation: BLEU on the held-out split.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.checkpoints import checkpoint  # noqa: E402
from explorer.data.corpus import load_tsv  # noqa: E402
from explorer.training.evaluation import (accuracy_by_length, attention_focus, evaluate_checkpoint,  # noqa: E402
                                 evaluate_tsv, held_out_pairs)

BEAM = 5  # translation BLEU is reported greedy (what the app's traces show) and with this beam width
TRANSLATION_DATA = {"eng-fra": "eng-fra/pairs.tsv", "eng-fra-none": "eng-fra/pairs.tsv",
                    "eng-cmn": "eng-cmn/pairs.tsv"}
BLEU_TWINS = ("eng-fra", "eng-fra-none")  # the translation bottleneck pair drawn on Compare


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--lengths", default="1-40", help="range for the accuracy-by-length table")
    parser.add_argument("--per-length", type=int, default=200)
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--curves", action="store_true",
                        help="store the accuracy-by-length curves of the shipped sequence models (after retraining one)")
    parser.add_argument("--bleu-curves", action="store_true",
                        help="store BLEU by source length of the translation twins (needs --data-root)")
    args = parser.parse_args()
    if args.bleu_curves:
        from explorer.training.comparison import bleu_by_length, store_bleu_curves
        entries = []
        for name in BLEU_TWINS:
            bundle, path = checkpoint.load(name), checkpoint.resolve(name)
            data = Path(args.data_root) / TRANSLATION_DATA[name]
            pairs = held_out_pairs(bundle, load_tsv(str(data)).pairs)
            curve = bleu_by_length(bundle, pairs, f"the held-out split of {data.parent.name}/{data.name}")
            print(name, [(r["lo"], r["hi"], r["n"], r["bleu"], r["chrf"]) for r in curve.rows], file=sys.stderr)
            entries.append((path, curve))
        print(store_bleu_curves(entries))
        return 0
    if args.curves:
        from explorer.training.comparison import has_curve, store_curves
        entries = [(checkpoint.resolve(n), checkpoint.load(n)) for n in checkpoint.pretrained_names()]
        print(store_curves([(path, bundle) for path, bundle in entries if has_curve(bundle)]))
        return 0
    lo, hi = (int(x) for x in args.lengths.split("-"))

    names = checkpoint.pretrained_names()
    focus: dict[str, dict] = {}
    signatures: set[str] = set()
    print("| model | task / languages | trained lengths | exact match | token accuracy | alignment accuracy | BLEU | chrF | parameters | file size |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        bundle = checkpoint.load(name)
        size = checkpoint.resolve(name).stat().st_size
        started = time.perf_counter()
        if bundle.task is not None:
            r = evaluate_checkpoint(bundle, samples=args.samples)
            lengths = f"{bundle.task.min_len}–{bundle.task.max_len}" if bundle.task.name != "dates" else "–"
            print(f"| `{name}` | {bundle.task.name} | {lengths} | {fmt(r['exact_match'])} | {fmt(r['token_accuracy'])} "
                  f"| {fmt(r['alignment_accuracy'])} | – | – | {bundle.parameter_count:,} | {size / 1e6:.1f} MB |")
        else:
            data = Path(args.data_root) / TRANSLATION_DATA.get(name, "")
            if not data.is_file():
                print(f"| `{name}` | {'→'.join(bundle.languages)} | – | – | – | – | (no data at {data}) | – "
                      f"| {bundle.parameter_count:,} | {size / 1e6:.1f} MB |")
                continue
            r = evaluate_tsv(bundle, str(data), split="valid")
            pairs = load_tsv(str(data)).pairs
            if bundle.model.attention is not None:
                focus[name] = attention_focus(bundle, [src for src, _ in held_out_pairs(bundle, pairs)[:200]])
            beam = evaluate_tsv(bundle, str(data), split="valid", beam=BEAM)
            signatures.add(r.get("bleu_signature", "lower-cased word-level references"))
            signatures.add(r.get("chrf_signature", ""))
            print(f"| `{name}` | {'→'.join(bundle.languages)} | held-out {r['n']:,} pairs | {fmt(r['exact_match'])} "
                  f"| {fmt(r['token_accuracy'])} | – | {r['bleu']:.1f} (beam {BEAM}: {beam['bleu']:.1f}) "
                  f"| {r.get('chrf', 0.0):.1f} (beam {BEAM}: {beam.get('chrf', 0.0):.1f}) "
                  f"| {bundle.parameter_count:,} | {size / 1e6:.1f} MB |")
        print(f"  ({name}: {time.perf_counter() - started:.1f} s)", file=sys.stderr)
    if signatures:
        print()
        print("BLEU and chrF: sacrebleu's defaults on cased, detokenised output against the file's references "
              "(Chinese in simplified script on both sides); signatures: " + "; ".join(sorted(s for s in signatures if s)))
    if focus:
        print()
        print("Attention focus on 200 held-out sentences (greedy traces): share of output steps whose largest "
              "weight is on the sentence's last token, and the mean largest weight:")
        print()
        for name, f in focus.items():
            print(f"- `{name}`: {f['argmax_on_last']:.0%} of {f['steps']:,} steps on the last token; mean peak "
                  f"{f['mean_peak']:.2f}")

    twins = [n for n in ("reverse", "reverse-none") if n in names]
    if twins:
        print()
        print("Exact match by input length (200 fresh samples per length, seed 12345 + length):")
        print()
        print("| length | " + " | ".join(f"`{n}`" for n in twins) + " |")
        print("| --- | " + " | ".join("---" for _ in twins) + " |")
        rows = {n: accuracy_by_length(checkpoint.load(n), range(lo, hi + 1), args.per_length) for n in twins}
        for k, length in enumerate(range(lo, hi + 1)):
            print(f"| {length} | " + " | ".join(fmt(rows[n][k]["exact_match"]) for n in twins) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
