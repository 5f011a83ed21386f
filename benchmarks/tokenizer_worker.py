"""How much isolating a tokenizer costs: a sentence through explorer/data/tokenizer_worker.py against in-process.

    python benchmarks/tokenizer_worker.py [--calls N]

Issue 44 asks that untrusted tokenization run where an abort cannot take the server down. The app's server runs an
uploaded model's tokenizer in a worker process; this times the worker's first start (its first call) and a
sentence's round trip through it, against the same tokenizer in this process (the shipped eng-fra's source side).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEXT = "How can we use variable input lengths in a model that reads one word at a time?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    import os
    from explorer.checkpoints import checkpoint
    from explorer.data import tokenizer_worker
    tok = checkpoint.load("eng-fra").subwords[0]
    started = time.perf_counter()
    first = tokenizer_worker.call(tok.json_text, "tokens", TEXT)
    cold = time.perf_counter() - started
    worker, local = [], []
    for _ in range(args.calls):
        started = time.perf_counter()
        through = tokenizer_worker.call(tok.json_text, "tokens", TEXT)
        worker.append(time.perf_counter() - started)
        started = time.perf_counter()
        here = tok.tokenize(TEXT)
        local.append(time.perf_counter() - started)
    assert through == here == first

    def ms(xs: list[float]) -> list[float]:
        return [round(1e3 * statistics.median(xs), 3), round(1e3 * sorted(xs)[int(0.95 * len(xs))], 3)]
    print(json.dumps({"first_call_with_start_s": round(cold, 3), "worker_ms_p50_p95": ms(worker),
                      "in_process_ms_p50_p95": ms(local), "pieces": len(here), "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
