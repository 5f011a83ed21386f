"""How long a file of pairs takes to prepare (parse, length limits, tokenizer training, encoding), at the size limits.

    python benchmarks/preparation.py [--cases NAME ...] [--json OUT]

Issue 43 asks that any file within the size limits prepare in at most 30 s on 2 cores, and that the issue's file
with one 5 MB line be refused or trimmed with a message within 30 s in the CLI and in the app. Each case writes a
generated file (no corpus needed) and times, each from a fresh start:
- cli: `python -m explorer train --data FILE --steps 1 ...` until it prints "training on" (its notes come
  before), i.e. the whole preparation of the command line, interpreter start and imports included;
- app: the Train page's path: the upload check in the server (`check_tsv_bytes`, as common.checked_tsv),
  then `jobs.translation_job` started in its own process until the process's "prepared" message arrives.
The files (all generated with a fixed seed): the issue's 400 pairs with one 5 MB line; 20 MB (the app's limit) of
short sentences of a 20,000-word Zipf vocabulary; 20 MB of sides at the length bound a tokenizer still sees (40
words of 31 letters, all different); 20 MB of lines just under the 10,000-byte line bound (left out before any
tokenizer); and the length-bound sides of the CLI's --max-tokens 200 (its limit: sides of 150 words of 31 letters).
The CLI's file limit is the app's, 20 MB, since 2026-12-06 (50 MB of sentences took 64-70 CPU s).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LETTERS = "abcdefghijklmnopqrstuvwxyz"
AIM_SECONDS = 30.0


def zipf_words(rng: random.Random, n: int = 20_000) -> tuple[list[str], list[float]]:
    """`n` made-up words and their cumulative Zipf weights (for random.choices' cum_weights)."""
    words = ["".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 10))) for _ in range(n)]
    return words, list(itertools.accumulate(1 / (rank + 1) for rank in range(n)))


def short_sentences(size: int, seed: int = 0) -> bytes:
    """`size` bytes of pairs of 3-12 word sentences (a Zipf vocabulary, as real text)."""
    rng = random.Random(seed)
    words, weights = zipf_words(rng)
    lines, total = [], 0
    while total < size:
        src = " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(3, 12)))
        tgt = " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(3, 12)))
        line = f"{src}\t{tgt}\n".encode()
        lines.append(line)
        total += len(line)
    return b"".join(lines)[:size].rsplit(b"\n", 1)[0] + b"\n"


def long_unique_sides(size: int, words_per_side: int, seed: int = 1) -> bytes:
    """`size` bytes of pairs whose sides are `words_per_side` words of 31 random letters: as long as a side may be
    and still reach the tokenizer (recipes.may_fit), with nothing for byte-pair merges to share."""
    rng = random.Random(seed)
    lines, total = [], 0
    while total < size:
        sides = [" ".join("".join(rng.choices(LETTERS, k=31)) for _ in range(words_per_side)) for _ in range(2)]
        line = f"{sides[0]}\t{sides[1]}\n".encode()
        lines.append(line)
        total += len(line)
    return b"".join(lines)[:size].rsplit(b"\n", 1)[0] + b"\n"


def near_line_bound(size: int, seed: int = 2) -> bytes:
    """`size` bytes of lines just under the 10,000-byte bound (too long for any model: left out by length)."""
    rng = random.Random(seed)
    lines, total = [], 0
    while total < size:
        side = " ".join("".join(rng.choices(LETTERS, k=8)) for _ in range(550))
        line = f"{side}\t{side}\n".encode()
        lines.append(line)
        total += len(line)
    return b"".join(lines)[:size].rsplit(b"\n", 1)[0] + b"\n"


def one_huge_line(seed: int = 3) -> bytes:
    """The issue's file: 400 usual pairs and one line of 5 MB."""
    rng = random.Random(seed)
    words, weights = zipf_words(rng, 2_000)
    def sentence() -> str:
        return " ".join(rng.choices(words, cum_weights=weights, k=6))
    pairs = [f"{sentence()}\t{sentence()}" for _ in range(400)]
    pairs.insert(200, "x" * (5 * 1024 * 1024) + "\ty")
    return ("\n".join(pairs) + "\n").encode()


CASES = {  # name: (file maker, where (cli, app), max tokens on the CLI)
    "one-5mb-line": (one_huge_line, ("cli", "app"), None),
    "app-limit-short-sentences": (lambda: short_sentences(20_000_000), ("cli", "app"), None),
    "app-limit-long-unique-sides": (lambda: long_unique_sides(20_000_000, 40), ("cli", "app"), None),
    "app-limit-lines-near-10000-bytes": (lambda: near_line_bound(20_000_000), ("cli", "app"), None),
    "cli-limit-long-unique-sides-max-tokens-200": (lambda: long_unique_sides(20_000_000, 150), ("cli",), 200),
}


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux /proc), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_cli(path: Path, max_tokens: int | None, timeout: float) -> dict:
    """Seconds (wall, and the process's CPU) from starting `train` to its "training on" line, or to its exit when
    it refuses the file; its notes."""
    out = Path(tempfile.mkdtemp()) / "m"
    args = [sys.executable, "-m", "explorer", "train", "--data", str(path), "--steps", "1", "--embed", "8",
            "--hidden", "16", "--attn-dim", "8", "--batch-size", "8", "--threads", "1", "--processes", "1",
            "--out", str(out), *(["--max-tokens", str(max_tokens)] if max_tokens else [])]
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    notes, outcome = [], "timed out"
    try:
        for line in run.stderr:
            if line.startswith("training on"):
                outcome = "prepared"
                break
            notes.append(line.strip()[:300])
            if line.startswith("error:"):
                outcome = "refused"
                break
            if time.perf_counter() - started > timeout:
                break
        else:
            outcome = "ended"
        seconds = time.perf_counter() - started
    finally:
        run.kill()
        run.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"outcome": outcome, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2), "notes": notes}


def time_app(data: bytes, timeout: float) -> dict:
    """The upload check in this (server) process, then the job's process until "prepared"."""
    from explorer.data.corpus import check_tsv_bytes
    from explorer.errors import ExplorerError
    from explorer.limits import LIMITS
    from explorer.jobs import TrainingJob, translation_job
    from explorer.training.train import TrainConfig
    started = time.perf_counter()
    try:
        checked = check_tsv_bytes(data, "upload.tsv", LIMITS.max_tsv_bytes)
        check = {"pairs": checked.pairs, "note": checked.skipped_note[:300]}
    except ExplorerError as exc:
        check = {"refused": str(exc)[:300]}
    parse = time.perf_counter() - started
    job: TrainingJob = translation_job(data, "bench", {"embed": 8, "hidden": 16, "attn_dim": 8},
                                       TrainConfig(steps=1, batch_size=8, eval_samples=8), auto=False)
    started = time.perf_counter()
    job.start()
    cpu = None
    while job.view().preparing:
        pid = job.pid
        cpu = cpu_seconds(pid) if pid is not None else cpu
        if time.perf_counter() - started > timeout:
            break
        time.sleep(0.05)
    prepared = time.perf_counter() - started
    state, message = job.state, job.view().message
    job.stop()
    job.join(30)
    return {"upload_check_seconds": round(parse, 2), "upload_check": check,
            "job_seconds": round(prepared, 2), "job_cpu_seconds_by_its_last_look": cpu,
            "job_outcome": "refused" if state == "failed" else "prepared", "job_state": state, "job_message": message[:300], "notes": job.notes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    results: dict = {"command": " ".join(["python", "benchmarks/preparation.py", *sys.argv[1:]]),
                     "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "cores": os.cpu_count(),
                     "load_at_start": os.getloadavg(), "aim_seconds": AIM_SECONDS, "cases": {}}
    with tempfile.TemporaryDirectory() as folder:
        for name in args.cases:
            make, where, max_tokens = CASES[name]
            data = make()
            path = Path(folder) / f"{name}.tsv"
            path.write_bytes(data)
            case: dict = {"bytes": len(data), "lines": data.count(b"\n")}
            if "cli" in where:
                case["cli"] = time_cli(path, max_tokens, args.timeout)
            if "app" in where:
                case["app"] = time_app(data, args.timeout)
            results["cases"][name] = case
            print(json.dumps({name: case}, ensure_ascii=False), flush=True)
            path.unlink()
    results["load_at_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
