"""A model with everything needed to use it: vocabularies, the task or languages, training record.

The bundle turns user text into ids (with clear errors for bad input) and ids back into text;
a checkpoint stores exactly one bundle.
"""

from __future__ import annotations

import copy
import threading
import unicodedata
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Sequence

from explorer.errors import ExplorerError
from explorer.engine.config import ModelConfig
from explorer.data.robust import ends_sentences, read_input
from explorer.data.subwords import SubwordTokenizer, is_chinese, prepare_text, word_groups
from explorer.data.tasks import Example, Task, TaskSpec, make_task
from explorer.data.vocab import EOS, PAD, SOS, Vocab

if TYPE_CHECKING:
    from explorer.engine.model import Seq2Seq

MAX_INPUT_CHARS = 1000  # anything longer is refused before it is tokenised


@dataclass(frozen=True)
class Prepared:
    """A user input ready for the model: its tokens, ids and the tokens the vocabulary lacks."""

    text: str
    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    unknown: tuple[str, ...]  # translation only: shown as <unk>, not an error


def describe_symbol(token: str) -> str:
    """A printable name for a token, so control characters and invisible marks show in messages."""
    if len(token) == 1 and (unicodedata.category(token)[0] in "CZ" and token != " "):
        return f"U+{ord(token):04X} ({unicodedata.name(token, 'control character')})"
    return repr(token)


@dataclass(frozen=True)
class TrainingSample:
    """Pairs of the user's own file a model trained on in this app, kept in memory (never saved in a checkpoint):
    what its nearest-examples index searches."""

    pairs: tuple[tuple[str, str], ...]  # (source, target) as text, the first of the training split
    total: int  # training pairs the file gave
    file_name: str


@dataclass
class ModelBundle:
    """A trained (or training) model, its vocabularies and what it was trained on."""

    name: str
    model: Seq2Seq
    src_vocab: Vocab
    tgt_vocab: Vocab
    task: TaskSpec | None = None
    languages: tuple[str, str] | None = None  # (source, target) for translation models
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    subwords: tuple[SubwordTokenizer, SubwordTokenizer] | None = None
    examples: tuple[tuple[str, str], ...] = ()  # held-out (source, target) pairs of its own data, for Explore
    saved_at: str | None = None  # when its checkpoint file was written (UTC, ISO 8601); None if never saved
    trained_on: TrainingSample | None = None  # translation trained in this app: its own training pairs

    def __post_init__(self) -> None:
        if (self.task is None) == (self.languages is None):
            raise ExplorerError("a model is either for a toy task or for translation")
        if (self.subwords is None) != (self.languages is None):
            raise ExplorerError("a translation model has subword tokenizers, a toy-task model none")

    @property
    def kind(self) -> str:
        return "task" if self.task is not None else "translation"

    @property
    def cfg(self) -> ModelConfig:
        """The model's architecture (a deferred bundle knows it without building the model)."""
        return self.model.cfg

    @property
    def title(self) -> str:
        """A one-line description for menus."""
        cfg = self.cfg
        what = self.task.name if self.task else f"{self.languages[0]}→{self.languages[1]}"
        return f"{self.name} ({what}, {cfg.cell} {cfg.hidden}, attention {cfg.attention})"

    @property
    def parameter_count(self) -> int:
        from explorer.engine.parameters import count_parameters
        return count_parameters(self.model)

    @cached_property
    def task_obj(self) -> Task | None:
        return make_task(self.task) if self.task else None

    @property
    def uses_pieces(self) -> bool:
        """Whether the model reads and writes subword pieces (word starts marked "▁")."""
        return self.subwords is not None

    @cached_property
    def _ends_sentences(self) -> bool:
        return ends_sentences([s for s, _ in self.examples])

    def read_text(self, text: str) -> str:
        """Typed text as a subword translation model reads it (robust.read_input): the final mark a sentence
        lacks only for a model whose example sentences end in one."""
        return read_input(text, self.languages[0], self._ends_sentences)

    def tokenize_source(self, text: str) -> tuple[str, ...]:
        """Source tokens for user text, the way training saw them."""
        if self.task_obj is not None:
            return tuple(self.task_obj.tokenize(text))
        return tuple(self.subwords[0].tokenize(prepare_text(self.read_text(text), self.languages[0])))

    def tokenize_target(self, text: str) -> tuple[str, ...]:
        if self.task_obj is not None:
            return tuple(self.task_obj.tokenize(text)) if self.task.name != "dates" else tuple(text.strip())
        return tuple(self.subwords[1].tokenize(prepare_text(text, self.languages[1])))

    def detokenize_target(self, tokens: Sequence[str]) -> str:
        """Display text for output tokens (specials dropped)."""
        words = [t for t in tokens if t not in (PAD, SOS, EOS)]
        if self.task_obj is not None:
            return self.task_obj.detokenize(words)
        return self.subwords[1].detokenize(words)

    def reference_text(self, text: str) -> str:
        """A reference translation as the model's output is written (cleaned; simplified script for
        Chinese), so that scores compare like with like; a toy task's is re-tokenised."""
        if self.subwords is not None:
            return prepare_text(text, self.languages[1])
        return self.detokenize_target(self.tokenize_target(text))

    def source_words(self, tokens: Sequence[str]) -> list[list[int]]:
        """Positions of each source word's tokens (one token per word for toy tasks)."""
        if self.subwords is None:
            return [[i] for i in range(len(tokens))]
        return word_groups(tokens, is_chinese(self.languages[0]))

    def target_words(self, tokens: Sequence[str]) -> list[list[int]]:
        """Positions of each output word's tokens (see source_words)."""
        if self.subwords is None:
            return [[i] for i in range(len(tokens))]
        return word_groups(tokens, is_chinese(self.languages[1]))

    def _check_text(self, text: str, what: str) -> str:
        return check_text(text, what)

    def _check_tokens(self, tokens: Sequence[str], vocab: Vocab, limit: int, what: str) -> tuple[str, ...]:
        if not tokens:
            raise ExplorerError(f"the {what} has no tokens this model reads")
        if len(tokens) > limit:
            raise ExplorerError(f"the {what} has {len(tokens)} tokens; this model supports at most {limit}")
        unknown = tuple(vocab.unknown(tokens))
        if unknown and self.task is not None:
            shown = ", ".join(describe_symbol(t) for t in unknown[:8])
            allowed = "".join(t for t in vocab.tokens[4:] if len(t) == 1)
            raise ExplorerError(f"unknown symbol{'s' if len(unknown) > 1 else ''} {shown}: "
                                f"this {self.task.name} model knows {allowed!r}")
        return unknown

    def prepare(self, text: str) -> Prepared:
        """Tokens and ids for a source text; ExplorerError for empty, too long or (toy tasks) unknown symbols."""
        text = self._check_text(text, "input")
        tokens = self.tokenize_source(text)
        unknown = self._check_tokens(tokens, self.src_vocab, self.cfg.max_src_len, "input")
        return Prepared(text, tokens, tuple(self.src_vocab.encode(tokens)), unknown)

    def prepare_target(self, text: str) -> Prepared:
        """Tokens and ids (ending in <eos>) of a target to teacher-force."""
        text = self._check_text(text, "target")
        tokens = self.tokenize_target(text)
        unknown = self._check_tokens(tokens, self.tgt_vocab, self.cfg.max_tgt_len - 1, "target")
        return Prepared(text, tokens, tuple(self.tgt_vocab.encode(tokens)) + (self.tgt_vocab.id(EOS),), unknown)

    def ground_truth(self, source_tokens: Sequence[str]) -> Example | None:
        """The task's true output and alignment for this input (None for translation)."""
        return self.task_obj.solve(tuple(source_tokens)) if self.task_obj is not None else None


class DeferredBundle(ModelBundle):
    """A bundle whose model is built on first use, from a header already checked: a shipped model's first view
    (names, vocabularies, examples, the stored first trace) needs no torch, whose import takes ~1-2 s."""

    def __init__(self, cfg: ModelConfig, build: Callable[[], Seq2Seq], digest: str, **kwargs: Any) -> None:
        self._cfg, self._build, self._built, self._lock = cfg, build, None, threading.Lock()
        self.digest = digest  # the checkpoint file's SHA-256: what a stored first trace names (app/first_trace.py)
        super().__init__(model=None, **kwargs)

    @property  # type: ignore[override]
    def model(self) -> Seq2Seq:
        with self._lock:  # sessions run in threads: one build
            if self._built is None:
                self._built, self._build = self._build(), None  # the file's bytes go with the builder
            return self._built

    @model.setter
    def model(self, value: Seq2Seq | None) -> None:
        if value is not None:
            self._built = value

    @property
    def built(self) -> bool:
        """Whether the model exists yet."""
        return self._built is not None

    @property
    def cfg(self) -> ModelConfig:
        return self._cfg

    def __deepcopy__(self, memo: dict) -> ModelBundle:
        """A plain bundle with a copy of the built model (training and private copies change it)."""
        return ModelBundle(**{f.name: copy.deepcopy(getattr(self, f.name), memo) for f in fields(ModelBundle)})


def check_text(text: str, what: str = "input") -> str:
    """`text` when it is some text within MAX_INPUT_CHARS, else ExplorerError (no model needed: a job checks its
    probe before its process builds the model)."""
    if not isinstance(text, str) or not text.strip():
        raise ExplorerError(f"the {what} is empty: type some symbols")
    if len(text) > MAX_INPUT_CHARS:
        raise ExplorerError(f"the {what} has {len(text):,} characters; the limit is {MAX_INPUT_CHARS:,}")
    return text
