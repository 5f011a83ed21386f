"""Translation as people type it: the shipped translation models on held-out sentences varied the ways typing varies.

    python benchmarks/robustness.py --data DATA [--models eng-fra eng-cmn] [--limit 600] [--beam 1] [--json OUT]
                                   [--no-copy]

DATA is the folder of the Tatoeba exports (DATA/eng-fra/pairs.tsv, DATA/eng-cmn/pairs.tsv), as in
pretrained/README.md. For each model, on the first `--limit` pairs of its held-out split (the split training left
out, as `eval --split valid` takes it), sacrebleu BLEU (defaults, cased, detokenised) of the sentences
- as written; without their final punctuation; lower-cased; upper-cased (each as a share of as written);
and on all held-out pairs:
- digits: of the sentences whose source has a number, the share whose output has every one of its numbers;
- unseen names: sentences whose source names a person the target names too, that name replaced in the source by
  one from `benchmarks/unseen_names.txt` (no name there occurs in either corpus or in data/names.txt): the share of
  outputs that contain the new name;
- emoji: an emoji put after the first word of each sentence: the share of outputs identical to the output without it.
Outputs are what the app shows: numbers and unknown names copied through attention (`--no-copy`: the model's own).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.checkpoints import checkpoint  # noqa: E402
from explorer.data.corpus import load_tsv, translation_scores  # noqa: E402
from explorer.data.robust import names_in, numbers_in, replace_word, target_name, without_final_punctuation  # noqa: E402
from explorer.data.subwords import is_chinese  # noqa: E402
from explorer.engine.bundle import ModelBundle  # noqa: E402
from explorer.engine.copying import copied_outputs  # noqa: E402
from explorer.errors import ExplorerError  # noqa: E402
from explorer.training.evaluation import held_out_pairs, translate_ids  # noqa: E402

UNSEEN_NAMES = Path(__file__).with_name("unseen_names.txt")
EMOJI = ("🙂", "🚗", "❤️", "👍", "🎉")
DATA_DIR = {("en", "fr"): "eng-fra", ("en", "zh"): "eng-cmn"}  # by (source, target) language


def unseen_names() -> list[str]:
    lines = UNSEEN_NAMES.read_text(encoding="utf-8").splitlines()
    return [n for line in lines if not line.startswith("#") for n in line.split()]


def translate(bundle: ModelBundle, texts: Sequence[str], beam: int = 1, copy: bool = True,
              chunk: int = 128) -> list[str]:
    """Each text's translation as the app shows it ("" for a text the model cannot read); `copy=False`: the
    model's own words, without copying through attention (explorer/engine/copying.py)."""
    out: list[str] = [""] * len(texts)
    readable = []
    for i, text in enumerate(texts):
        try:
            readable.append((i, bundle.prepare(text)))
        except ExplorerError:
            continue
    for start in range(0, len(readable), chunk):
        part = readable[start: start + chunk]
        outputs = translate_ids(bundle, [p.ids for _, p in part], beam)
        if copy:
            texts_out = copied_outputs(bundle, [p.tokens for _, p in part], [p.ids for _, p in part], outputs)
        else:
            texts_out = [bundle.detokenize_target(bundle.tgt_vocab.decode(ids)) for ids in outputs]
        for (i, _), text in zip(part, texts_out):
            out[i] = text
    return out


def bleu(bundle: ModelBundle, sources: Sequence[str], targets: Sequence[str], beam: int, copy: bool) -> float:
    hypotheses = translate(bundle, sources, beam, copy)
    references = [bundle.reference_text(t) for t in targets]
    return float(translation_scores(hypotheses, references, bundle.languages[1])["bleu"])


VARIANTS: dict[str, Callable[[str], str]] = {"as_written": lambda s: s, "no_final_punctuation": without_final_punctuation,
                                             "lower": str.lower, "upper": str.upper}


def report(bundle: ModelBundle, held_out: Sequence[tuple[str, str]], limit: int, beam: int,
           copy: bool = True) -> dict[str, Any]:
    chinese = is_chinese(bundle.languages[1])
    first = list(held_out[:limit])
    sources, targets = [s for s, _ in first], [t for _, t in first]
    out: dict[str, Any] = {"n": len(first), "beam": beam, "copy": copy}
    for name, change in VARIANTS.items():
        out[f"bleu_{name}"] = round(bleu(bundle, [change(s) for s in sources], targets, beam, copy), 2)
    for name in VARIANTS:
        out[f"kept_{name}"] = round(out[f"bleu_{name}"] / out["bleu_as_written"], 3) if out["bleu_as_written"] else 0.0

    with_numbers = [s for s, _ in held_out if numbers_in(s)]
    outputs = translate(bundle, with_numbers, beam, copy)
    kept = sum(all(n in o for n in numbers_in(s)) for s, o in zip(with_numbers, outputs))
    out["digits"] = {"sentences": len(with_numbers), "kept": round(kept / len(with_numbers), 3) if with_numbers else None}

    rng, names = random.Random(12345), unseen_names()
    named = []
    for s, t in held_out:
        found = [n for n in names_in(s) if target_name(n, t, chinese)]
        if found:
            new = names[rng.randrange(len(names))]
            named.append((replace_word(s, found[0], new), new))
    outputs = translate(bundle, [s for s, _ in named], beam, copy)
    copied = sum(new in o for (_, new), o in zip(named, outputs))
    out["unseen_names"] = {"sentences": len(named), "copied": round(copied / len(named), 3) if named else None}

    plain = translate(bundle, sources, beam, copy)
    decorated = [" ".join(s.split(" ", 1)[:1] + [EMOJI[i % len(EMOJI)]] + s.split(" ", 1)[1:]) for i, s in enumerate(sources)]
    same = sum(a == b for a, b in zip(plain, translate(bundle, decorated, beam, copy)))
    out["emoji"] = {"sentences": len(sources), "same_output": round(same / len(sources), 3) if sources else None}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="folder holding eng-fra/pairs.tsv and eng-cmn/pairs.tsv")
    p.add_argument("--models", nargs="+", default=["eng-fra", "eng-cmn"], help="shipped names or paths")
    p.add_argument("--limit", type=int, default=600, help="held-out pairs for the BLEU rows")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--no-copy", action="store_true", help="the model's own words: no copying through attention")
    args = p.parse_args(argv)
    results = {}
    for model in args.models:
        bundle = checkpoint.load(model)
        folder = DATA_DIR.get(tuple(bundle.languages or ()), bundle.name)
        pairs = load_tsv(Path(args.data) / folder / "pairs.tsv").pairs
        started = time.perf_counter()
        results[model] = report(bundle, held_out_pairs(bundle, pairs), args.limit, args.beam, not args.no_copy)
        results[model]["seconds"] = round(time.perf_counter() - started, 1)
        print(model, json.dumps(results[model], ensure_ascii=False), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
