"""Average two checkpoints of one model's shape and vocabularies, weight by weight (a "model soup").

    python scripts/average_checkpoints.py FIRST SECOND --weight W --out PATH [--half]

Each weight becomes (1 - W) * FIRST + W * SECOND; the header (vocabularies, tokenizers, examples) is FIRST's
and the training record SECOND's, with the averaging recorded. pretrained/README.md uses it to keep the
as-written quality of a model together with the typed-text robustness of its further training.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.checkpoints import checkpoint  # noqa: E402
from explorer.errors import ExplorerError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("--weight", type=float, required=True, help="the share of SECOND in every weight (0-1)")
    p.add_argument("--out", required=True)
    p.add_argument("--half", action="store_true", help="store weights in float16")
    args = p.parse_args(argv)
    try:
        if not 0.0 <= args.weight <= 1.0:
            raise ExplorerError("--weight must be within 0-1")
        first, second = checkpoint.load(args.first), checkpoint.load(args.second)
        a, b = first.model.state_dict(), second.model.state_dict()
        if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a) or \
                first.src_vocab.tokens != second.src_vocab.tokens or first.tgt_vocab.tokens != second.tgt_vocab.tokens:
            raise ExplorerError("the two checkpoints differ in shape or vocabulary")
        with torch.no_grad():
            for key, value in a.items():
                value.copy_((1 - args.weight) * value + args.weight * b[key])
        first.training = {**second.training, "averaged_with": Path(args.first).name, "averaged_weight": args.weight}
        print(checkpoint.save(first, args.out, half=args.half))
    except ExplorerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
