"""A checkpoint's header checked whole, before anything is built from it.

A checkpoint is a file from anywhere: every field of its readable config is checked for type and
range here, the JSON for depth and size, and the tensors for dtype, shape and finiteness, so a
crafted file is refused at load with one message naming the problem instead of failing later in a
page or a command (a traceback, a RecursionError, NaN in a chart).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.errors import ExplorerError
from explorer import settings
from explorer.settings import LANGUAGE, MAX_TEXT_CHARS, MAX_VOCAB, check_text_field
from explorer.outside_text import valid_strings
from explorer.engine.config import MAX_LENGTH, ModelConfig
from explorer.data.tasks import TaskSpec, make_task
from explorer.data.vocab import Vocab

if TYPE_CHECKING:
    import torch

MAX_HEADER_BYTES = 16_000_000  # the safetensors JSON header, vocabularies and tokenizers included
MAX_JSON_DEPTH = 32  # our own configs nest 3 deep; json.loads recurses per level
MAX_TOKEN_CHARS = 200  # one vocabulary entry
MAX_ALPHABET = 1000
MAX_LIST_ITEMS = 1000
MAX_RECORD_KEYS = 200
MAX_TOKENIZER_CHARS = 4_000_000  # one HF tokenizers JSON document
MAX_EXAMPLES = 100
FLOAT_DTYPES = ("float32", "float16")  # torch.dtype names: torch is imported only when tensors are checked
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


@dataclass(frozen=True)
class Info:
    """The checked readable config: everything a bundle is built from."""

    cfg: ModelConfig
    src_vocab: Vocab
    tgt_vocab: Vocab
    task: TaskSpec | None
    languages: tuple[str, str] | None
    training: dict[str, Any]
    metrics: dict[str, Any]
    tokenizers: dict[str, str] | None
    examples: tuple[tuple[str, str], ...]


def json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (strings skipped), without parsing it."""
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    opens = (codes == ord("[")) | (codes == ord("{"))
    steps = opens.view(np.int8) * np.int8(2) - np.int8(1)  # +1 opens, -1 closes; one byte each
    return int(np.cumsum(steps, dtype=np.int32).max())


class JsonRefused(ValueError):
    """JSON over a bound (size, depth) or with a constant JSON does not allow (NaN, Infinity)."""


def _no_constants(name: str) -> Any:
    raise JsonRefused(f"{name} is not a number JSON allows")


def parse_json(raw: bytes | str, what: str) -> Any:
    """JSON of bounded size and depth, NaN and Infinity refused; ValueError otherwise."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > MAX_HEADER_BYTES:
        raise JsonRefused(f"the {what} is {len(data):,} bytes (limit {MAX_HEADER_BYTES:,})")
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise JsonRefused(f"the {what} nests {depth} levels deep (limit {MAX_JSON_DEPTH})")
    return json.loads(data, parse_constant=_no_constants)


# --- fields ------------------------------------------------------------------------------------

def _fail(message: str) -> None:
    raise ExplorerError(message)


def _scalar_ok(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 2**63
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and len(value) <= MAX_TEXT_CHARS


def _check_record(record: Any, field: str, nested: bool) -> dict[str, Any]:
    """A dict of str -> JSON scalars or lists of them (and, when `nested`, one level of such dicts)."""
    if record is None:
        return {}
    if not isinstance(record, dict):
        _fail(f"{field} must be an object, got {type(record).__name__}")
    if len(record) > MAX_RECORD_KEYS:
        _fail(f"{field} has {len(record):,} entries (limit {MAX_RECORD_KEYS})")
    for key, value in record.items():
        if len(key) > 100:
            _fail(f"{field} has a key of {len(key):,} characters")
        if _scalar_ok(value):
            continue
        if isinstance(value, list) and len(value) <= MAX_LIST_ITEMS and all(map(_scalar_ok, value)):
            continue
        if nested and isinstance(value, dict):
            _check_record(value, f"{field}.{key}", nested=False)
            continue
        _fail(f"{field}.{key} must be a number, text, true/false, null or a list of those")
    return dict(record)


def _check_training(record: Any) -> dict[str, Any]:
    """The training record: each setting it holds within the setting's bounds (explorer/settings.py; None where
    the data decided, "auto" for a vocabulary sized by the data), the run's counts whole numbers >= 0."""
    training = _check_record(record, "training", nested=False)
    for key, value in training.items():
        if key in settings.BY_NAME and value is not None and not (key == "vocab_size" and value == "auto"):
            settings.setting(key).check(value, f"training.{key}")
    for key in ("steps_done", "examples"):
        value = training.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            _fail(f"training.{key} must be a whole number >= 0, got {value!r}")
    return training


def _check_metrics(record: Any) -> dict[str, Any]:
    metrics = _check_record(record, "metrics", nested=True)
    for part in metrics.values():
        for key, value in (part.items() if isinstance(part, dict) else ()):
            if isinstance(value, (str, list)) or (key != "n" and isinstance(value, (int, float))
                                                  and not isinstance(value, bool) and not -1e12 < value < 1e12):
                _fail(f"metrics: {key} must be a number or null, got {value!r}")
    return metrics


def _check_vocab(tokens: Any, field: str) -> Vocab:
    if not isinstance(tokens, list) or len(tokens) > MAX_VOCAB:
        _fail(f"{field} must be a list of at most {MAX_VOCAB:,} tokens")
    for i, token in enumerate(tokens):
        if not isinstance(token, str) or not token:
            _fail(f"{field}[{i}] must be a non-empty string, got {str(token)[:40]!r}")
        if len(token) > MAX_TOKEN_CHARS:
            _fail(f"{field}[{i}] has {len(token):,} characters (limit {MAX_TOKEN_CHARS})")
    return Vocab(tuple(tokens))  # its own checks: the specials first, no duplicates


def _check_config(model: Any) -> ModelConfig:
    if not isinstance(model, dict):
        _fail(f"model must be an object, got {type(model).__name__}")
    cfg = ModelConfig.from_dict(model)  # the settings' bounds (explorer/settings.py): sizes at most MAX_SIZE
    for name, hi in (("src_vocab", MAX_VOCAB), ("tgt_vocab", MAX_VOCAB)):
        if getattr(cfg, name) > hi:
            _fail(f"{name} must be at most {hi:,}, got {getattr(cfg, name):,}")
    return cfg


def _check_task(task: Any, cfg: ModelConfig, src: Vocab, tgt: Vocab) -> TaskSpec | None:
    if task is None:
        return None
    if not isinstance(task, dict):
        _fail(f"task must be an object, got {type(task).__name__}")
    unknown = sorted(set(task) - {"name", "min_len", "max_len", "alphabet"})
    if unknown or "name" not in task:
        _fail(f"task has unknown fields {unknown[:3]}" if unknown else "task has no name")
    if isinstance(task.get("alphabet"), str) and len(task["alphabet"]) > MAX_ALPHABET:
        _fail(f"the task's alphabet has {len(task['alphabet']):,} symbols (limit {MAX_ALPHABET})")
    if not isinstance(task["name"], str):
        _fail(f"the task's name must be text, got {str(task['name'])[:40]!r}")
    for key in ("min_len", "max_len"):
        value = task.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LENGTH:
            _fail(f"the task's {key} must be a whole number from 1 to {MAX_LENGTH}, got {str(value)[:40]}")
    if not isinstance(task.get("alphabet", ""), str):
        _fail("the task's alphabet must be text")
    spec = TaskSpec(**task)
    made = make_task(spec)  # the task's own checks: known name, whole lengths, a usable alphabet
    longest, output = made.max_source_len, made.max_target_len
    if longest > cfg.max_src_len or output + 1 > cfg.max_tgt_len:
        _fail(f"the task's inputs (up to {longest}) or outputs (up to {output} and <eos>) do not fit the model "
              f"(max_src_len {cfg.max_src_len}, max_tgt_len {cfg.max_tgt_len})")
    if Vocab.build(made.source_symbols()).tokens != src.tokens or Vocab.build(made.target_symbols()).tokens != tgt.tokens:
        _fail(f"the vocabularies are not the {spec.name} task's symbols")
    return spec


def _check_languages(languages: Any) -> tuple[str, str] | None:
    if languages is None:
        return None
    if (not isinstance(languages, list) or len(languages) != 2
            or not all(isinstance(x, str) and LANGUAGE.fullmatch(x) for x in languages)):
        _fail(f"languages must be two language codes such as [\"en\", \"fr\"], got {str(languages)[:80]}")
    return languages[0], languages[1]


def _check_tokenizers(tokenizers: Any) -> dict[str, str] | None:
    if tokenizers is None:
        return None
    if not isinstance(tokenizers, dict) or set(tokenizers) != {"source", "target"}:
        _fail("tokenizers must be an object with exactly \"source\" and \"target\"")
    for side, text in tokenizers.items():
        if not isinstance(text, str) or not text:
            _fail(f"tokenizers.{side} must be a tokenizer's JSON text")
        if len(text) > MAX_TOKENIZER_CHARS:
            _fail(f"tokenizers.{side} has {len(text):,} characters (limit {MAX_TOKENIZER_CHARS:,})")
    return dict(tokenizers)


def _check_examples(examples: Any) -> tuple[tuple[str, str], ...]:
    if examples is None:
        return ()
    if not isinstance(examples, list) or len(examples) > MAX_EXAMPLES:
        _fail(f"examples must be a list of at most {MAX_EXAMPLES} [source, target] pairs")
    for i, pair in enumerate(examples):
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(x, str) and 0 < len(x) <= MAX_TEXT_CHARS for x in pair)):
            _fail(f"examples[{i}] must be a [source, target] pair of non-empty texts of at most "
                  f"{MAX_TEXT_CHARS} characters")
    return tuple((s, t) for s, t in examples)


def check_info(info: dict[str, Any]) -> Info:
    """Every field of a readable config checked; ExplorerError naming the first problem."""
    valid_strings(info, "the config")  # a JSON "\ud800" escape is a lone surrogate no text function takes
    for key in ("name", "saved_at"):
        if info.get(key) is not None:
            check_text_field(info[key], key)
    value = info.get("parameters")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        _fail(f"parameters must be a whole number, got {str(value)[:40]!r}")
    if "model" not in info:
        _fail("the model's architecture is missing")
    cfg = _check_config(info["model"])
    src = _check_vocab(info.get("source_vocab"), "source_vocab")
    tgt = _check_vocab(info.get("target_vocab"), "target_vocab")
    if len(src) != cfg.src_vocab or len(tgt) != cfg.tgt_vocab:
        _fail(f"vocabularies ({len(src)}, {len(tgt)} tokens) do not match the model ({cfg.src_vocab}, {cfg.tgt_vocab})")
    task = _check_task(info.get("task"), cfg, src, tgt)
    languages = _check_languages(info.get("languages"))
    if (task is None) == (languages is None):
        _fail("a model is either for a toy task or for translation: give a task or languages, not both")
    return Info(cfg, src, tgt, task, languages, _check_training(info.get("training")),
                _check_metrics(info.get("metrics")), _check_tokenizers(info.get("tokenizers")),
                _check_examples(info.get("examples")))


def check_tensors(expected: dict[str, "torch.Tensor"], tensors: dict[str, "torch.Tensor"], source: str) -> None:
    """ExplorerError unless the file holds exactly the expected tensors, with their shapes, as finite
    float32 or float16 numbers."""
    import torch
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {extra[:3]}"
        _fail(f"{source} does not match its architecture: {detail}")
    for key, value in expected.items():
        tensor = tensors[key]
        if tensor.shape != value.shape:
            _fail(f"{source} does not match its architecture: {key} has shape "
                  f"{tuple(tensor.shape)}, expected {tuple(value.shape)}")
        if not tensor.is_floating_point():
            _fail(f"{source}: {key} is not a floating-point tensor")
        if str(tensor.dtype).removeprefix("torch.") not in FLOAT_DTYPES:
            _fail(f"{source}: {key} is stored as {str(tensor.dtype).removeprefix('torch.')}; checkpoints hold "
                  "float32 or float16")
        if not bool(torch.isfinite(tensor).all()):
            _fail(f"{source}: {key} holds NaN or infinite weights")
