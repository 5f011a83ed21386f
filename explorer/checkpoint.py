"""Checkpoints: one safetensors file holding the weights and, in its JSON header, the readable config.

Loading never executes code from the file (safetensors has no pickle); every way a file can be
wrong ends in an ExplorerError naming the problem. Writes are atomic: a temporary file in the same
folder, flushed to disk, then renamed over the target.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from .bundle import ModelBundle
from .errors import ExplorerError
from .model import ModelConfig, Seq2Seq, seeded_model
from .subwords import SubwordTokenizer
from .tasks import TaskSpec
from .vocab import Vocab

FORMAT = "attention-explorer/1"
SUFFIX = ".safetensors"
MAX_CHECKPOINT_BYTES = 100_000_000
PRETRAINED_DIR = Path(os.environ.get("EXPLORER_PRETRAINED", Path(__file__).resolve().parent.parent / "pretrained"))


def describe(bundle: ModelBundle, saved_at: str | None = None) -> dict[str, Any]:
    """The readable part of a checkpoint: architecture, vocabularies, data, training and metrics.

    `saved_at` is the time the file is written (to_bytes passes it); otherwise the bundle's own, read from
    its file (None for a model never saved)."""
    info = {
        "format": FORMAT,
        "name": bundle.name,
        "model": bundle.model.cfg.to_dict(),
        "source_vocab": list(bundle.src_vocab.tokens),
        "target_vocab": list(bundle.tgt_vocab.tokens),
        "task": None if bundle.task is None else {
            "name": bundle.task.name, "min_len": bundle.task.min_len,
            "max_len": bundle.task.max_len, "alphabet": bundle.task.alphabet},
        "languages": None if bundle.languages is None else list(bundle.languages),
        "training": bundle.training,
        "metrics": bundle.metrics,
        "parameters": bundle.parameter_count,
        **({} if bundle.subwords is None else {"tokenizers": {
            "source": bundle.subwords[0].json_text, "target": bundle.subwords[1].json_text}}),
        "saved_at": saved_at if saved_at is not None else bundle.saved_at,
    }
    if bundle.examples:
        info["examples"] = [list(pair) for pair in bundle.examples]
    return info


def to_bytes(bundle: ModelBundle, half: bool = False) -> bytes:
    """The checkpoint file's bytes (also what the app offers for download)."""
    dtype = torch.float16 if half else torch.float32
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in bundle.model.state_dict().items()}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return st_save(tensors, metadata={"explorer": json.dumps(describe(bundle, saved_at=now), ensure_ascii=False)})


def save(bundle: ModelBundle, path: str | Path, half: bool = False) -> Path:
    """Write the checkpoint atomically: a crash midway leaves any previous file at `path` intact."""
    path = Path(path)
    if path.suffix != SUFFIX:
        path = path.with_name(path.name + SUFFIX)
    data = to_bytes(bundle, half)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a checkpoint is an ordinary readable file
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # full disk, no permission, a file where a folder should be
            raise ExplorerError(f"cannot write checkpoint {path}: {exc.strerror or exc}") from None
        raise
    return path


def resolve(name_or_path: str) -> Path:
    """A shipped checkpoint's name (e.g. `reverse`) or a path to a file; a path without the suffix finds
    the file `save` wrote for it (`train --out runs/rev` writes runs/rev.safetensors)."""
    candidate = PRETRAINED_DIR / f"{name_or_path}{SUFFIX}"
    if "/" not in name_or_path and candidate.exists():
        return candidate
    path = Path(name_or_path)
    if path.is_file():
        return path
    with_suffix = path.with_name(path.name + SUFFIX) if path.name and path.suffix != SUFFIX else None
    if with_suffix is not None and with_suffix.is_file():
        return with_suffix
    if path.exists():
        return path
    names = ", ".join(pretrained_names()) or "none"
    raise ExplorerError(f"no checkpoint named {name_or_path!r} (shipped: {names}) and no such file")


def pretrained_names() -> list[str]:
    """Names of the shipped checkpoints."""
    return sorted(p.name[: -len(SUFFIX)] for p in PRETRAINED_DIR.glob(f"*{SUFFIX}"))


def load(name_or_path: str | Path, name: str | None = None) -> ModelBundle:
    """Load a checkpoint by shipped name or path; ExplorerError for anything wrong with it."""
    path = resolve(str(name_or_path))
    try:
        size = path.stat().st_size
        if size > MAX_CHECKPOINT_BYTES:
            raise ExplorerError(f"{path.name} is {size:,} bytes; checkpoints are at most {MAX_CHECKPOINT_BYTES:,}")
        data = path.read_bytes()
    except OSError as exc:
        raise ExplorerError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from None
    default = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    return from_bytes(data, name or default, source=str(path))


def from_bytes(data: bytes, name: str, source: str = "upload") -> ModelBundle:
    """Build a bundle from checkpoint bytes (files and uploads alike)."""
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise ExplorerError(f"{source} is {len(data):,} bytes; checkpoints are at most {MAX_CHECKPOINT_BYTES:,}")
    if len(data) < 8:
        raise ExplorerError(f"{source} is not a checkpoint: the file is empty or truncated")
    header_len = int.from_bytes(data[:8], "little")
    if header_len <= 0 or header_len > len(data) - 8:
        raise ExplorerError(f"{source} is not an Attention Explorer checkpoint (not a safetensors file, "
                            "or truncated); pickled .pt files are refused because they can run code")
    try:
        header = json.loads(data[8: 8 + header_len])
        meta = header.get("__metadata__") or {}
        info = json.loads(meta["explorer"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ExplorerError(f"{source} is a safetensors file without an Attention Explorer config") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ExplorerError(f"{source} has an unknown checkpoint format {info.get('format') if isinstance(info, dict) else None!r}")
    try:
        tensors = st_load(data)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise ExplorerError(f"{source} is corrupt: {str(exc).splitlines()[0][:200]}") from None
    bundle = _bundle_from_info(info, name, source, tensors)
    bundle.model.load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()})
    bundle.model.eval()
    return bundle


def _bundle_from_info(info: dict[str, Any], name: str, source: str, tensors: dict[str, torch.Tensor]) -> ModelBundle:
    """The bundle the config describes, once the file's tensors are known to fit it (weights not loaded yet)."""
    try:
        cfg = ModelConfig.from_dict(info["model"])
        src_vocab = Vocab(tuple(info["source_vocab"]))
        tgt_vocab = Vocab(tuple(info["target_vocab"]))
        task = TaskSpec(**info["task"]) if info.get("task") else None
        languages = tuple(info["languages"]) if info.get("languages") else None
        subwords = _subwords_from_info(info.get("tokenizers"), src_vocab, tgt_vocab, languages)
    except ExplorerError as exc:
        raise ExplorerError(f"{source} has an invalid config: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ExplorerError(f"{source} has an invalid config ({type(exc).__name__}: {exc})") from None
    if len(src_vocab) != cfg.src_vocab or len(tgt_vocab) != cfg.tgt_vocab:
        raise ExplorerError(f"{source}: vocabularies ({len(src_vocab)}, {len(tgt_vocab)} tokens) do not match "
                            f"the model ({cfg.src_vocab}, {cfg.tgt_vocab})")
    # Check the weights against a model without storage first: a config claiming a huge model
    # must not make us allocate (or initialise) it.
    try:
        with torch.device("meta"):
            skeleton = Seq2Seq(cfg)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ExplorerError(f"{source} has an invalid config ({type(exc).__name__}: {exc})") from None
    _check_weights(skeleton.state_dict(), tensors, source)
    return ModelBundle(name=name, model=seeded_model(cfg, 0), src_vocab=src_vocab, tgt_vocab=tgt_vocab, task=task,
                       languages=languages, training=dict(info.get("training") or {}),
                       metrics=dict(info.get("metrics") or {}), subwords=subwords,
                       examples=_examples(info.get("examples"), source),
                       saved_at=info["saved_at"] if isinstance(info.get("saved_at"), str) else None)


def _subwords_from_info(spec: Any, src_vocab: Vocab, tgt_vocab: Vocab,
                        languages: tuple[str, ...] | None) -> tuple[SubwordTokenizer, SubwordTokenizer] | None:
    """The stored subword tokenizers, checked to give exactly the stored vocabularies (None: word level)."""
    if spec is None:
        return None
    if languages is None or not isinstance(spec, dict) or set(spec) != {"source", "target"}:
        raise ExplorerError("tokenizers must be {\"source\": ..., \"target\": ...} of a translation model")
    pair = SubwordTokenizer(spec["source"]), SubwordTokenizer(spec["target"])
    if pair[0].vocab != src_vocab.tokens or pair[1].vocab != tgt_vocab.tokens:
        raise ExplorerError("the subword tokenizers do not match the stored vocabularies")
    return pair


def _examples(value: Any, source: str) -> tuple[tuple[str, str], ...]:
    """The checkpoint's held-out example pairs (absent in older files: none)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value):
        raise ExplorerError(f"{source} has an invalid config: examples must be a list of [source, target] texts")
    return tuple((p[0], p[1]) for p in value)


def _check_weights(expected: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor], source: str) -> None:
    """ExplorerError unless the file holds exactly the expected tensors, with their shapes, as floats."""
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {extra[:3]}"
        raise ExplorerError(f"{source} does not match its architecture: {detail}")
    for key, value in expected.items():
        if tensors[key].shape != value.shape:
            raise ExplorerError(f"{source} does not match its architecture: {key} has shape "
                                f"{tuple(tensors[key].shape)}, expected {tuple(value.shape)}")
        if not tensors[key].is_floating_point():
            raise ExplorerError(f"{source}: {key} is not a floating-point tensor")
