"""Peak memory of the review's heaviest attacks (issue 27), each in its own process.

Each case runs `python -m explorer ARGS` in a fresh subprocess; its peak resident memory is read
with resource.getrusage(RUSAGE_CHILDREN) (ru_maxrss, KiB on Linux) after it exits. A baseline
(`info --checkpoint reverse`, a good shipped model) shows what importing torch alone costs.

    python benchmarks/reliability_peak.py
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = ["info", "--checkpoint", "reverse"]  # a good shipped model: what importing torch and loading costs


def peak(argv: list[str]) -> tuple[int, int, str]:
    """(exit code, peak RSS in MB, stderr's last line) of one CLI run in a fresh process."""
    code = ("import json, resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "print(json.dumps([p.returncode, rss, (p.stderr.strip().splitlines() or [''])[-1][:100]]))\n")
    done = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "explorer", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    out = done.stdout.strip()
    if not out:
        raise SystemExit(f"the measuring process failed: {done.stderr[-500:]}")
    rc, rss, line = json.loads(out)
    return int(rc), int(rss) // 1024, line


def deep_header(folder: Path) -> Path:
    """The worst case: a 14 MB safetensors header of JSON nested 7,000,000 levels deep."""
    deep = folder / "deep.safetensors"
    header = (b'{"__metadata__":{"explorer":"{}"},"x":' + b"[" * 7_000_000 + b"]" * 7_000_000 + b"}")
    deep.write_bytes(len(header).to_bytes(8, "little") + header)
    return deep


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="reliability-peak-"))
    deep = deep_header(folder)
    fifo = folder / "x.safetensors"
    os.mkfifo(fifo)
    big = folder / "big.tsv"
    with open(big, "wb") as f:
        f.truncate(60_000_000)
    cases = {
        "baseline: info reverse": BASELINE,
        "translate --beam 100000": ["translate", "--checkpoint", "eng-fra", "--input", "Hello", "--beam", "100000"],
        "eval --max-len 100000000": ["eval", "--checkpoint", "reverse", "--max-len", "100000000", "--samples", "5"],
        "train --hidden 100000": ["train", "--task", "reverse", "--hidden", "100000", "--out", str(folder / "h")],
        "info /dev/zero": ["info", "--checkpoint", "/dev/zero"],
        "info FIFO": ["info", "--checkpoint", str(fifo)],
        "14 MB header nested 7,000,000 deep": ["info", "--checkpoint", str(deep)],
        "train --data 60 MB (sparse)": ["train", "--data", str(big), "--out", str(folder / "t")],
    }
    rows = {}
    for name, argv in cases.items():
        rc, mb, line = peak(argv)
        rows[name] = {"exit": rc, "peak_rss_mb": mb, "message": line}
        print(f"{name:<38} exit {rc}  peak {mb:>5} MB  {line}", flush=True)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
