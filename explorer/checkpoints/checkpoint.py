"""Checkpoints: one safetensors file holding the weights and, in its JSON header, the readable config.

Loading never executes code from the file (safetensors has no pickle) and checks the file whole
(explorer/checkpoints/header.py) before building anything; every way a file can be wrong ends in an
ExplorerError naming the problem. Writes are atomic: a temporary file in the same folder, flushed to
disk, then renamed over the target; the shipped models' folder is never written (explorer/storage.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from explorer import storage
from explorer.engine.bundle import DeferredBundle, ModelBundle
from explorer.engine.config import ModelConfig
from explorer.errors import ExplorerError
from explorer.checkpoints.header import MAX_HEADER_BYTES, Info, JsonRefused, check_info, check_tensors, parse_json
from explorer.data.subwords import SubwordTokenizer
from explorer.data.vocab import Vocab

if TYPE_CHECKING:
    from explorer.engine.model import Seq2Seq

FORMAT = "attention-explorer/1"
SUFFIX = ".safetensors"
MAX_CHECKPOINT_BYTES = 100_000_000
PRETRAINED_DIR = Path(os.environ.get("EXPLORER_PRETRAINED", Path(__file__).resolve().parents[2] / "pretrained"))


def describe(bundle: ModelBundle, saved_at: str | None = None) -> dict[str, Any]:
    """The readable part of a checkpoint: architecture, vocabularies, data, training and metrics.

    `saved_at` is the time the file is written (to_bytes passes it); otherwise the bundle's own, read from
    its file (None for a model never saved)."""
    info = {
        "format": FORMAT,
        "name": bundle.name,
        "model": bundle.cfg.to_dict(),
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
    import torch
    from safetensors.torch import save as st_save
    dtype = torch.float16 if half else torch.float32
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in bundle.model.state_dict().items()}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return st_save(tensors, metadata={"explorer": json.dumps(describe(bundle, saved_at=now), ensure_ascii=False)})


def save(bundle: ModelBundle, path: str | Path, half: bool = False) -> Path:
    """Write the checkpoint atomically: a crash midway leaves any previous file at `path` intact.

    Never into the shipped models' folder (however the path is spelled); one writer per path at a
    time (a second is refused); temporary files of writers killed earlier are removed."""
    path = target_path(path)
    data = to_bytes(bundle, half)
    try:
        _write(path, data)
    except OSError as exc:  # full disk, no permission, a directory put in the way during training
        why = f"cannot write checkpoint {path}: {exc.strerror or exc}"
        rescue = Path(tempfile.gettempdir()) / f"explorer-{os.getpid()}-{time.strftime('%Y%m%d-%H%M%S')}{SUFFIX}"
        try:
            _write(rescue, data)
        except OSError:
            raise ExplorerError(why) from None
        raise ExplorerError(f"{why}; the model was saved to {rescue} instead") from None
    return path


def _write(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically under the path's writer lock; OSError as the system gives it."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with storage.writer_lock(path):
            storage.clean_stale_temps(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes it private; a checkpoint is an ordinary readable file
            os.replace(tmp, path)
            tmp = None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def target_path(path: str | Path) -> Path:
    """Where `save` writes for `path` (.safetensors added), checked before any work: a path the file
    system takes, outside the read-only shipped models' folder."""
    storage.check_path_text(str(path), "checkpoint path")
    path = Path(path)
    if path.suffix != SUFFIX:
        path = path.with_name(path.name + SUFFIX)
    storage.check_path_text(str(path), "checkpoint path")
    storage.refuse_read_only(path, PRETRAINED_DIR, str(path))
    longest = len(os.fsencode(f".{path.name}.XXXXXXXX.tmp"))  # the temporary file save writes first
    if longest > 255:
        raise ExplorerError(f"the checkpoint's file name {path.name[:40]!r}… is {len(os.fsencode(path.name)):,} bytes; "
                            f"with its temporary file's {longest - len(os.fsencode(path.name))} more the file system "
                            "takes at most 255: choose a shorter --out")
    if os.path.isdir(path):
        raise ExplorerError(f"cannot write checkpoint {path}: a directory is in the way")
    return path


@contextmanager
def writer(path: str | Path) -> Iterator[Path]:
    """Hold the right to write `path` (as `save` would name it) for a whole run, e.g. a training:
    a second writer of the same path is refused at once instead of silently winning or losing."""
    target = target_path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExplorerError(f"cannot write checkpoint {target}: {exc.strerror or exc}") from None
    with storage.writer_lock(target):
        try:  # the folder takes a file of the temporary name save writes, now rather than after the work
            fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise ExplorerError(f"cannot write checkpoint {target}: {exc.strerror or exc}") from None
        yield target


def resolve(name_or_path: str) -> Path:
    """A shipped checkpoint's name (e.g. `reverse`) or a path to a file; a path without the suffix finds
    the file `save` wrote for it (`train --out runs/rev` writes runs/rev.safetensors)."""
    storage.check_path_text(name_or_path, "checkpoint name")
    if name_or_path and "/" not in name_or_path and os.sep not in name_or_path:
        candidate = PRETRAINED_DIR / f"{name_or_path}{SUFFIX}"
        if _exists(candidate):
            return candidate
    path = Path(name_or_path)
    if name_or_path and _exists(path):
        return path
    with_suffix = path.with_name(path.name + SUFFIX) if name_or_path and path.name and path.suffix != SUFFIX else None
    if with_suffix is not None and _exists(with_suffix):
        return with_suffix
    names = ", ".join(pretrained_names()) or "none"
    shown = name_or_path if len(name_or_path) <= 80 else name_or_path[:60] + "…"
    raise ExplorerError(f"no checkpoint named {shown!r} (shipped: {names}) and no such file")


def _exists(path: Path) -> bool:
    """Whether anything is at `path` (an unreadable or impossible path counts as nothing)."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def pretrained_names() -> list[str]:
    """Names of the shipped checkpoints."""
    return sorted(p.name[: -len(SUFFIX)] for p in PRETRAINED_DIR.glob(f"*{SUFFIX}"))


def load(name_or_path: str | Path, name: str | None = None) -> ModelBundle:
    """Load a checkpoint by shipped name or path; ExplorerError for anything wrong with it.

    Only a regular file is read, and at most MAX_CHECKPOINT_BYTES of it, whatever it claims."""
    path, data, default, trusted = _read_file(name_or_path)
    return from_bytes(data, name or default, source=str(path), trusted=trusted)


def _read_file(name_or_path: str | Path) -> tuple[Path, bytes, str, bool]:
    """(path, bytes, the model's name from the file name, whether it is a shipped model's) of a checkpoint."""
    path = resolve(str(name_or_path))
    data = storage.read_regular(path, "checkpoint", MAX_CHECKPOINT_BYTES)
    name = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    return path, data, name, path.resolve().parent == PRETRAINED_DIR.resolve()


def from_bytes(data: bytes, name: str, source: str = "upload", trusted: bool = False) -> ModelBundle:
    """Build a bundle from checkpoint bytes (files and uploads alike), every part checked first. `trusted`: a
    shipped model's, whose tokenizers the app's server runs in its own process (subwords.isolate_untrusted)."""
    checked, fields = _read_header(data, source, trusted)
    return ModelBundle(name=name, model=_build_model(checked.cfg, data, source), **fields)


def load_deferred(name_or_path: str | Path, prepare: Callable[[Seq2Seq], Seq2Seq] = lambda m: m) -> DeferredBundle:
    """`load` with the weights read and checked when the model is first used (then `prepare`d): the header's
    checks run now, and nothing here imports torch."""
    path, data, name, trusted = _read_file(name_or_path)
    source = str(path)
    checked, fields = _read_header(data, source, trusted)
    return DeferredBundle(checked.cfg, lambda: prepare(_build_model(checked.cfg, data, source)),
                          hashlib.sha256(data).hexdigest(), name=name, **fields)


def _read_header(data: bytes, source: str, trusted: bool) -> tuple[Info, dict[str, Any]]:
    """The checked header and the bundle's fields but its model; ExplorerError naming any problem."""
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise ExplorerError(f"{source} is {len(data):,} bytes; checkpoints are at most {MAX_CHECKPOINT_BYTES:,}")
    if len(data) < 8:
        raise ExplorerError(f"{source} is not a checkpoint: the file is empty or truncated")
    header_len = int.from_bytes(data[:8], "little")
    if header_len <= 0 or header_len > len(data) - 8:
        raise ExplorerError(f"{source} is not an Attention Explorer checkpoint (not a safetensors file, "
                            "or truncated); pickled .pt files are refused because they can run code")
    if header_len > MAX_HEADER_BYTES:
        raise ExplorerError(f"{source} has a {header_len:,}-byte header; the limit is {MAX_HEADER_BYTES:,}")
    try:
        header = parse_json(data[8: 8 + header_len], "header")
        meta = header.get("__metadata__") or {}
        info = parse_json(meta["explorer"], "config")
    except JsonRefused as exc:
        raise ExplorerError(f"{source} has an invalid config: {exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ExplorerError(f"{source} is a safetensors file without an Attention Explorer config") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        shown = str(info.get("format"))[:40] if isinstance(info, dict) else None
        raise ExplorerError(f"{source} has an unknown checkpoint format {shown!r}")
    try:
        checked = check_info(info)
        subwords = _subwords_from_info(checked.tokenizers, checked.src_vocab, checked.tgt_vocab, checked.languages,
                                       trusted)
    except ExplorerError as exc:
        raise ExplorerError(f"{source} has an invalid config: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ExplorerError(f"{source} has an invalid config ({type(exc).__name__}: {str(exc)[:200]})") from None
    saved_at = info.get("saved_at")
    return checked, dict(src_vocab=checked.src_vocab, tgt_vocab=checked.tgt_vocab, task=checked.task,
                         languages=checked.languages, training=checked.training, metrics=checked.metrics,
                         subwords=subwords, examples=checked.examples,
                         saved_at=saved_at if isinstance(saved_at, str) else None)


def _build_model(cfg: ModelConfig, data: bytes, source: str) -> Seq2Seq:
    """The model of a checked header with the file's weights, checked against it first."""
    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load as st_load

    from explorer.engine.model import Seq2Seq
    from explorer.engine.seeding import seeded_model
    # Check the weights against a model without storage first: a config claiming a huge model
    # must not make us allocate (or initialise) it.
    try:
        with torch.device("meta"):
            skeleton = Seq2Seq(cfg)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ExplorerError(f"{source} has an invalid config ({type(exc).__name__}: {str(exc)[:200]})") from None
    try:
        tensors = st_load(data)
    except (SafetensorError, ValueError, RuntimeError, TypeError) as exc:
        raise ExplorerError(f"{source} is corrupt: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}") from None
    check_tensors(skeleton.state_dict(), tensors, source)
    with torch.inference_mode(False):  # a deferred model is built on first use, maybe inside a trace's inference mode
        model = seeded_model(cfg, 0)
        model.load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()})
    model.eval()
    return model


def _subwords_from_info(spec: Any, src_vocab: Vocab, tgt_vocab: Vocab, languages: tuple[str, ...] | None,
                        trusted: bool = False) -> tuple[SubwordTokenizer, SubwordTokenizer] | None:
    """The stored subword tokenizers, checked to give exactly the stored vocabularies (None: a toy task's)."""
    if spec is None and languages is None:
        return None
    if spec is None:
        raise ExplorerError("this translation model has no subword tokenizers: it is a word-level model of an "
                            "older version, which this app no longer reads; train it again")
    if languages is None or not isinstance(spec, dict) or set(spec) != {"source", "target"}:
        raise ExplorerError("tokenizers must be {\"source\": ..., \"target\": ...} of a translation model")
    pair = SubwordTokenizer(spec["source"], trusted), SubwordTokenizer(spec["target"], trusted)
    if pair[0].vocab != src_vocab.tokens or pair[1].vocab != tgt_vocab.tokens:
        raise ExplorerError("the subword tokenizers do not match the stored vocabularies")
    return pair


def check_savable(bundle: ModelBundle) -> None:
    """ExplorerError when `bundle` would be saved as a checkpoint that loading refuses (a name, a language
    code, a vocabulary entry, an example or a tokenizer out of the header's bounds): training calls it before
    its first step, so what it accepts is what a checkpoint may hold and no trained model is lost to it."""
    text = json.dumps(describe(bundle, saved_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
                      ensure_ascii=False)
    try:
        checked = check_info(parse_json(text.encode("utf-8"), "config"))
        _subwords_from_info(checked.tokenizers, checked.src_vocab, checked.tgt_vocab, checked.languages)
    except UnicodeEncodeError as exc:
        raise ExplorerError(f"this model cannot be saved: its config holds text that is not valid UTF-8 "
                            f"({exc.object[exc.start:exc.start + 1]!a})") from None
    except (ExplorerError, JsonRefused) as exc:
        raise ExplorerError(f"this model cannot be saved as a checkpoint: {exc}") from None
