"""A shipped model's first trace (its first example, greedy) stored beside its checkpoint, so that the app's
first view draws without importing torch (~1-2 s of a cold start, benchmarks/demo.py).

The file is made by the same `trace()` as every other trace (`python -m explorer.app.first_trace`)
and names the SHA-256 of the checkpoint it came from: a stored trace is used only for that very file and that
very input, anything else is traced as usual. tests/test_first_trace.py traces each one again and compares.
Saved as .npz (numbers exact, no pickle) with its text fields as one JSON string.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from explorer.app.views import example_inputs
from explorer.checkpoints.checkpoint import PRETRAINED_DIR
from explorer.engine.bundle import ModelBundle
from explorer.record import Trace

FOLDER = PRETRAINED_DIR / "first-traces"
MAX_FILE_BYTES = 2_000_000
_ARRAYS = ("encoder_states", "keys", "values", "initial_state", "decoder_states", "queries", "scores", "weights",
           "contexts", "probs", "output_ids", "alignment")
_TEXTS = ("model_name", "attention", "source_tokens", "output_tokens", "previous_tokens", "unknown_tokens",
          "target_vocab", "teacher_forced", "source_words", "output_words")


def path_for(name: str, folder: Path = FOLDER) -> Path:
    return folder / f"{name}.npz"


def first_input(bundle: ModelBundle) -> str:
    """The input Explore opens a shipped model on: its first example."""
    return example_inputs(bundle, article=True)[0]


def write(bundle: ModelBundle, digest: str, folder: Path = FOLDER) -> Path:
    """Trace the bundle's first input and store it under the checkpoint's digest."""
    from explorer.engine.trace import trace
    text = first_input(bundle)
    tr = trace(bundle, text)
    arrays = {name: getattr(tr, name) for name in _ARRAYS if getattr(tr, name) is not None}
    meta = {"text": text, "digest": digest, **{name: getattr(tr, name) for name in _TEXTS}}
    folder.mkdir(parents=True, exist_ok=True)
    path = path_for(bundle.name, folder)
    np.savez_compressed(path, meta=np.array(json.dumps(meta, ensure_ascii=False)), **arrays)
    return path


def read(bundle: ModelBundle, text: str, folder: Path = FOLDER) -> Trace | None:
    """The stored trace of `text` on `bundle` when one was made from this very checkpoint file, else None."""
    digest = getattr(bundle, "digest", None)
    path = path_for(bundle.name, folder)
    if digest is None or not path.is_file():
        return None
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        with np.load(path, allow_pickle=False) as stored:
            meta = json.loads(str(stored["meta"]))
            if meta.get("digest") != digest or meta.get("text") != text:
                return None
            arrays = {name: stored[name] for name in _ARRAYS if name in stored.files}
        return Trace(**arrays, **{name: _tuples(meta[name]) for name in _TEXTS})
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile):  # damaged: trace as usual
        return None


def _tuples(value: Any) -> Any:
    """JSON's lists back as the trace's tuples (nested for the word groups)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def main(names: list[str]) -> None:
    """Store the first trace of each shipped model (all when none are named)."""
    from explorer.checkpoints import checkpoint
    for name in names or checkpoint.pretrained_names():
        bundle = checkpoint.load_deferred(name)
        print(write(bundle, bundle.digest))


if __name__ == "__main__":
    main(sys.argv[1:])
