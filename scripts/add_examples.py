"""Give a translation checkpoint the held-out example pairs Explore draws from, without retraining.

    python scripts/add_examples.py --checkpoint eng-fra --data ../shared/data/eng-fra/pairs.tsv --out /tmp/eng-fra

The pairs are the model's own validation split of the file it was trained on, split exactly as training
split it (evaluation.held_out_pairs: the recorded valid_fraction and seed), chosen as a new training
chooses them (recipes.pick_examples). The weights are written unchanged (float16 stays float16); only
the readable config gains "examples" and a new saved_at. The file's SHA-256 changes, so stored results
keyed by it (pretrained/curves.json, bleu_by_length.json) must be computed again for a shipped model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.checkpoints import checkpoint  # noqa: E402
from explorer.data.corpus import load_tsv  # noqa: E402
from explorer.errors import ExplorerError  # noqa: E402
from explorer.training.evaluation import held_out_pairs  # noqa: E402
from explorer.training.recipes import pick_examples  # noqa: E402


def add_examples(name_or_path: str, data: str, out: str) -> tuple[Path, int]:
    """Write `name_or_path` with examples from its held-out split of `data` to `out`; (path, pairs kept)."""
    from safetensors import safe_open
    source = checkpoint.resolve(name_or_path)
    bundle = checkpoint.load(str(source))
    if bundle.kind != "translation":
        raise ExplorerError(f"{bundle.name} is a toy-task model: Explore draws its examples from the task")
    with safe_open(str(source), framework="pt") as f:
        half = any(f.get_slice(k).get_dtype() == "F16" for k in f.keys())
    bundle.examples = pick_examples(bundle, held_out_pairs(bundle, list(load_tsv(data).pairs)))
    if not bundle.examples:
        raise ExplorerError(f"no held-out pair of {data} can be read by {bundle.name}: is it the file it was trained on?")
    return checkpoint.save(bundle, out, half=half), len(bundle.examples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="a shipped model's NAME or a checkpoint PATH")
    parser.add_argument("--data", required=True, help="the TSV file the model was trained on")
    parser.add_argument("--out", required=True, help="where to write the new checkpoint (not pretrained/)")
    args = parser.parse_args(argv)
    try:
        path, kept = add_examples(args.checkpoint, args.data, args.out)
    except ExplorerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path} with {kept} held-out example pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
