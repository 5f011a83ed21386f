"""What the Explore page shows, computed without Streamlit: requests, examples, tables and exports.

A `Request` names everything that determines one decoding (model, input, mode, target, beam choice,
intervention); `request_trace` turns it into a Trace. The tables are pandas DataFrames read off a
Trace (the "database lookup" of one step, the top-k, the tidy CSV export), so the page only lays
them out and tests can check them against the trace.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from explorer.engine.bundle import ModelBundle, Prepared
from explorer.errors import ExplorerError
from explorer.engine.lengths import output_cap
from explorer.limits import MAX_BEAM_WIDTH, MAX_TEMPERATURE, MIN_TEMPERATURE, url_number
from explorer.record import BeamRecord, Candidate, Intervention, Trace, trace_csv, trace_frame
from explorer.data.vocab import EOS, EOS_ID, UNK

if TYPE_CHECKING:
    import pandas as pd

MODES: dict[str, str] = {"greedy": "Greedy", "beam": "Beam search", "teacher": "Teacher-forced"}

# Short, common sentences for translation models (kept when the model knows every word). The first
# is the default input: French puts the adjective after the noun, which the heatmap shows.
TRANSLATION_EXAMPLES: tuple[str, ...] = (
    "How can we use variable input lengths?",  # the article's own example of what attention is for
    "I have a red car.", "He bought a big house.", "I am cold.", "She is my sister.", "We are friends.",
    "Where is the station?", "I love you.", "He is reading a book.", "Tom is a teacher.", "It is raining.",
    "I do not know.", "Come here.", "This is my house.", "They are happy.", "I want to go home.",
    "The cat is black.",
)
ARTICLE_SENTENCE = TRANSLATION_EXAMPLES[0]


@dataclass(frozen=True)
class Demo:
    """A one-click what-if on a shipped model, chosen because it visibly changes the output (measured on the
    shipped checkpoints: on `reverse` no temperature changes anything, its scores differ by tens)."""

    model: str
    text: str
    temperature: float
    look_at: str


# eng-fra (GRU 512, attention size 512): at τ = 10 each row of α is spread nearly evenly over
# the sentence, the decoder reads a blur of all its words and "J'ai une voiture rouge." becomes "J'ai une voiture de
# rouge.". "He bought a big house." keeps its translation up to τ = 20 on this model.
TEMPERATURE_DEMO = Demo("eng-fra", "I have a red car.", 10.0,
                        "Each row of the changed α is spread almost evenly over the words: the decoder reads a "
                        "blur of the whole sentence instead of the word it needs, and the translation changes "
                        "from the step outlined in red.")


@dataclass(frozen=True)
class Request:
    """Everything that determines one trace on the Explore page (hashable: it is a cache key)."""

    model: str
    text: str
    mode: str = "greedy"  # greedy | beam | teacher
    target: str = ""  # teacher-forced mode: the output to force
    beam_width: int = 3
    candidate: int = 0  # beam mode: which candidate (best first) to step through
    intervention: Intervention = Intervention()
    node: int | None = None  # beam mode: a node of the beam tree (0-based) whose prefix to step through instead

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ExplorerError(f"unknown decoding mode {self.mode!r}; choose one of {', '.join(MODES)}")

    @property
    def original(self) -> "Request":
        """The same request without any intervention (the left side of a what-if comparison)."""
        return replace(self, intervention=Intervention())


# --- interventions in the URL --------------------------------------------------------------------

def intervention_query(iv: Intervention) -> dict[str, str]:
    """The query-string form of a what-if (1-based steps and positions, as the page labels them):
    ``temp=0.5``, ``mask=2,5``, ``pin=3:1,4:2`` (step:position), ``force=3:le 5:chat`` (step:token; tokens
    never hold whitespace). The identity intervention is the empty dict."""
    out: dict[str, str] = {}
    if iv.temperature != 1.0:
        out["temp"] = f"{iv.temperature:g}"
    if iv.masked:
        out["mask"] = ",".join(str(i + 1) for i in iv.masked)
    if iv.pins:
        out["pin"] = ",".join(f"{t + 1}:{i + 1}" for t, i in iv.pins)
    if iv.forced:
        out["force"] = " ".join(f"{t + 1}:{token}" for t, token in iv.forced)
    return out


def _url_number(text: str, what: str, kind: type = int) -> int | float:
    return url_number(text, what, 1 if kind is int else None, None, kind)


def _url_pairs(text: str, what: str, separator: str | None) -> list[tuple[int, str]]:
    pairs = []
    for item in text.split(separator):
        step, colon, rest = item.strip().partition(":")
        if not colon or not rest:
            raise ExplorerError(f"the link's {what} {item!r} is not step:value")
        pairs.append((int(_url_number(step, what + " step")) - 1, rest))
    return pairs


def intervention_from_query(params: dict[str, str | None]) -> Intervention:
    """Parse what `intervention_query` wrote; a malformed value is an ExplorerError naming it. Ranges
    (a position past the input, a step past the output) are checked where the trace is made."""
    temperature = 1.0
    if params.get("temp"):
        temperature = float(url_number(params["temp"], "temperature", MIN_TEMPERATURE, MAX_TEMPERATURE, float))
    masked = ()
    if params.get("mask"):
        masked = tuple(sorted({int(_url_number(x.strip(), "masked position")) - 1
                               for x in params["mask"].split(",")}))
    pins = ()
    if params.get("pin"):
        pins = tuple(sorted(dict((t, int(_url_number(i, "pinned position")) - 1)
                                 for t, i in _url_pairs(params["pin"], "pin", ",")).items()))
    forced = ()
    if params.get("force"):
        forced = tuple(sorted(dict(_url_pairs(params["force"], "forced token", None)).items()))
    return Intervention(temperature=temperature, masked=masked, pins=pins, forced=forced)


def check_intervention(bundle: ModelBundle, request: "Request") -> None:
    """The what-if's positions and steps against this input, in the page's and the URL's counting (x1.., step
    1..); ExplorerError naming the first that does not fit. `trace` checks the same ranges again (0-based, as
    the CLI and the Intervention count)."""
    iv = request.intervention
    if iv.is_identity:
        return
    prepared = bundle.prepare(request.text)
    S = len(prepared.ids)
    if request.mode == "teacher" and request.target.strip():
        steps = len(bundle.prepare_target(request.target).ids)
    else:
        steps = output_cap(bundle, S).steps
    for i in iv.masked:
        if not 0 <= i < S:
            raise ExplorerError(f"the what-if masks x{i + 1}, but the input has x1–x{S}")
    for t, i in iv.pins:
        if not 0 <= i < S:
            raise ExplorerError(f"the what-if pins attention to x{i + 1}, but the input has x1–x{S}")
        if not 0 <= t < steps:
            raise ExplorerError(f"the what-if pins step {t + 1}, but decoding has steps 1–{steps}")
        if i in iv.masked:
            raise ExplorerError(f"the what-if pins step {t + 1} to x{i + 1}, but x{i + 1} is masked (hidden from "
                                "attention): unmask it or pin another input")
    for t, _ in iv.forced:
        if not 0 <= t < steps:
            raise ExplorerError(f"the what-if forces a token at step {t + 1}, but decoding has steps 1–{steps}")


# --- inputs --------------------------------------------------------------------------------------

EXAMPLES_SHOWN = 8  # of a model's own held-out pairs, offered as examples (Random draws from all of them)


def own_examples(bundle: ModelBundle) -> list[str]:
    """The sources of the held-out pairs the model's checkpoint keeps (its own data), those it can read."""
    out = []
    for source, _target in bundle.examples:
        try:
            bundle.prepare(source)
        except ExplorerError:
            continue
        out.append(source)
    return out


def example_inputs(bundle: ModelBundle, article: bool = False) -> list[str]:
    """A few inputs that suit the model: from its own held-out data when its checkpoint keeps some, else the
    task's examples, or sentences whose words it knows. `article` (the shipped translation models): the
    article's own sentence leads, where the model translates from English and reads it without an unknown
    piece."""
    own = own_examples(bundle)
    if own:
        lead = [ARTICLE_SENTENCE] if article and _from_english(bundle) and _reads(bundle, ARTICLE_SENTENCE) else []
        return (lead + [s for s in own if s != ARTICLE_SENTENCE])[:EXAMPLES_SHOWN]
    if bundle.task_obj is not None:
        limit = bundle.cfg.max_src_len
        return [e for e in bundle.task_obj.examples() if len(bundle.tokenize_source(e)) <= limit]
    known = [text for text in TRANSLATION_EXAMPLES if _reads(bundle, text)]
    return known or list(TRANSLATION_EXAMPLES[:5])


def read_note(bundle: ModelBundle, text: str) -> str | None:
    """What a translation model read when it is not the text as typed (data/robust.read_input), else None."""
    from explorer.data.robust import read_as
    from explorer.data.subwords import clean_text
    if not bundle.uses_pieces or not isinstance(text, str):
        return None
    read = bundle.read_text(text)
    if clean_text(read) == clean_text(text):
        return None
    why = []
    if clean_text(read_as(text)) != clean_text(text):
        why.append("text in capitals is read in sentence case and emoji are left out, as in training")
    if read != read_as(text):
        why.append(f"a sentence without its final mark gets one (“{read[-1]}”), as the model reads best")
    return f"The model reads this as “{read}”: {'; '.join(why)}. The pieces below are the ones it read."


def _reads(bundle: ModelBundle, text: str) -> bool:
    """Whether the model reads `text` with no unknown symbol (and within its limits)."""
    try:
        return not bundle.prepare(text).unknown
    except ExplorerError:
        return False


def keeps_input(previous: ModelBundle | None, new: ModelBundle, text: str) -> bool:
    """Whether a model switch keeps the input: the new model reads it without an unknown symbol and it is
    the same kind of input (a toy task's symbols, or sentences of the same language); digits a copy model
    read are no sentence for eng-fra."""
    if not _reads(new, text):
        return False
    return previous is None or _input_kind(previous) == _input_kind(new)


def _input_kind(bundle: ModelBundle) -> tuple[str, str | None]:
    return ("task", None) if bundle.languages is None else ("language", bundle.languages[0])


def _from_english(bundle: ModelBundle) -> bool:
    """Whether the model translates English into another language (the article's example is such a case)."""
    return bundle.languages is not None and bundle.languages[0] == "en" and bundle.languages[1] != "en"


def random_input(bundle: ModelBundle, rng: random.Random) -> str:
    """A fresh input: a random sample of the task (lengths it was trained on), or a random example sentence."""
    task = bundle.task_obj
    own = own_examples(bundle)
    if own and task is None:
        return rng.choice(own)
    if task is None:
        return rng.choice(example_inputs(bundle))
    limit = bundle.cfg.max_src_len
    for _ in range(20):
        source = task.sample(rng, 1)[0].source
        if len(source) <= limit:
            return "".join(source)
    return rng.choice(example_inputs(bundle))


# --- decoding ------------------------------------------------------------------------------------

def beam_tree(bundle: ModelBundle, text: str, width: int) -> BeamRecord:
    """The beam search's own record for an input: every hypothesis kept at every step and the candidates
    (ExplorerError for bad input or width). The candidate table and the beam tree both read it."""
    if not 1 <= width <= MAX_BEAM_WIDTH:
        raise ExplorerError(f"beam width must be 1–{MAX_BEAM_WIDTH}")
    ids = bundle.prepare(text).ids
    from explorer.engine.decoding import beam_record
    return beam_record(bundle.model, ids, width, output_cap(bundle, len(ids)).steps)


def candidates(bundle: ModelBundle, text: str, width: int) -> list[Candidate]:
    """Beam-search candidates for an input, best first (ExplorerError for bad input or width)."""
    return list(beam_tree(bundle, text, width).candidates)


def prefix_target(bundle: ModelBundle, record: BeamRecord, node: int) -> Prepared:
    """A beam-tree node's prefix as a teacher-forcing target, so the steps that led to it can be traced."""
    if not 0 <= node < len(record.nodes):
        raise ExplorerError(f"the beam tree has nodes 1–{len(record.nodes)}, not {node + 1}")
    ids = record.prefix(node)
    tokens = tuple(bundle.tgt_vocab.decode(ids))
    return Prepared(bundle.detokenize_target(tokens), tuple(t for t in tokens if t != EOS), ids, ())


def candidate_target(bundle: ModelBundle, candidate: Candidate) -> Prepared:
    """A beam candidate as a teacher-forcing target, so its steps can be traced."""
    tokens = tuple(bundle.tgt_vocab.decode(candidate.ids))
    shown = bundle.detokenize_target(tokens)
    return Prepared(shown, tuple(t for t in tokens if t != EOS), tuple(candidate.ids), ())


def request_trace(bundle: ModelBundle, request: Request, beam: Sequence[Candidate] | None = None,
                  record: BeamRecord | None = None) -> Trace:
    """The trace a request asks for: greedy, teacher-forced on the typed target, or a beam candidate's.

    Beam mode traces the chosen candidate (or the chosen node's prefix) teacher-forced on its own tokens
    (beam search keeps no trace); pass `beam` or `record` when the search has already run."""
    from explorer.engine.trace import trace
    if request.mode == "greedy":
        return trace(bundle, request.text, request.intervention)
    if request.mode == "teacher":
        if not request.target.strip():
            raise ExplorerError("teacher-forced mode needs a target: type the output to force")
        return trace(bundle, request.text, request.intervention, target=request.target)
    if request.node is not None:
        record = record if record is not None else beam_tree(bundle, request.text, request.beam_width)
        return trace(bundle, request.text, request.intervention, target=prefix_target(bundle, record, request.node))
    found = list(beam) if beam is not None else list(record.candidates) if record is not None \
        else candidates(bundle, request.text, request.beam_width)
    index = min(max(request.candidate, 0), len(found) - 1)
    return trace(bundle, request.text, request.intervention, target=candidate_target(bundle, found[index]))


def output_text(bundle: ModelBundle, tr: Trace, own: bool | None = None) -> str:
    """The output as display text (specials dropped), with what it copies through attention (`own`: the output
    is the model's own decoding, a beam candidate's included)."""
    from explorer.engine.copying import output_text as text_of
    return text_of(bundle, tr, own)


def copy_note(bundle: ModelBundle, tr: Trace, own: bool | None = None) -> str | None:
    """In words, what the output copies from the input through attention (None when nothing)."""
    from explorer.engine.copying import trace_copies
    done = trace_copies(bundle, tr, own)
    if not done:
        return None
    parts = []
    for c in done:
        steps = f"step {c.steps[0] + 1}" if len(c.steps) == 1 else f"steps {c.steps[0] + 1}–{c.steps[-1] + 1}"
        if c.where == "after":
            parts.append(f"“{c.source.text}” after {steps} (“{c.wrote}”), the step that attended to it most: the "
                         "model left it out")
        else:
            how = "where attention peaked on it" if c.where == "peak" else "the step that attended to it most"
            parts.append(f"“{c.source.text}” at {steps}, {how} (the model wrote “{c.wrote}”)")
    return ("Copied from the input through attention: " + "; ".join(parts) + ". A number, or a name the model "
            "has no piece for, is copied where attention read it, and no number of the input is left out; the "
            "steps below show what the model wrote.")


def truth_text(bundle: ModelBundle, tr: Trace) -> str | None:
    """The task's correct output for this input (None for translation or inputs without a truth)."""
    example = bundle.ground_truth(tr.source_tokens)
    return None if example is None else bundle.detokenize_target(example.target)


def candidates_frame(bundle: ModelBundle, text: str, found: Sequence[Candidate]) -> pd.DataFrame:
    """Beam candidates as a table: rank, text (with what each copies through attention, as `translate --beam`
    shows it), total and per-token log-probability, finished."""
    from explorer.engine.copying import copied_outputs
    source = bundle.prepare(text)
    shown = copied_outputs(bundle, [source.tokens] * len(found), [source.ids] * len(found),
                           [[i for i in cand.ids if i != EOS_ID] for cand in found])
    rows = []
    for rank, (cand, output) in enumerate(zip(found, shown), start=1):
        rows.append({"rank": rank, "output": output, "tokens": len(cand.ids),
                     "log P": cand.log_prob, "log P / token": cand.normalized, "P": float(np.exp(cand.log_prob)),
                     "finished": cand.finished})
    import pandas as pd  # here: a first view draws no table of these (pandas: 0.3 s of a cold start)

    return pd.DataFrame(rows, columns=["rank", "output", "tokens", "log P", "log P / token", "P", "finished"])


# --- tables read off a trace ---------------------------------------------------------------------

def shown_token(tr: Trace, token: str) -> str:
    """A source token as the model saw it: words outside the vocabulary become <unk> (word)."""
    return f"{UNK} ({token})" if token in tr.unknown_tokens else token


def lookup_table(tr: Trace, t: int) -> dict[str, Any]:
    """Step t's "database lookup", by column: one row per input position i with x_i, k_i, e_ti, α_ti, v_i (a
    position a what-if hid from attention says "(masked)" and is flagged in "masked") and, where the task knows
    it, the true alignment.

    Indices are 1-based like the article's x_1..x_m; keys and values are (positions, size) arrays."""
    _check_step(tr, t)
    if not tr.has_attention:
        raise ExplorerError("this model has no attention: there is no lookup table")
    masked = set(tr.intervention.masked)
    table: dict[str, Any] = {
        "i": list(range(1, len(tr.source_tokens) + 1)),
        "token": [shown_token(tr, x) + (" (masked)" if i in masked else "") for i, x in enumerate(tr.source_tokens)],
        "key k_i": tr.keys.astype(float),
        "score e_ti": tr.scores[t].astype(float),
        "weight α_ti": tr.weights[t].astype(float),
        "value v_i": tr.values.astype(float),
        "masked": [i in masked for i in range(len(tr.source_tokens))],
    }
    if tr.alignment is not None and t < len(tr.alignment):
        table["true"] = tr.alignment[t].astype(bool)
    return table


def step_summary(tr: Trace, t: int) -> dict[str, object]:
    """Plain facts about step t for captions: tokens, chosen probability, the most attended position."""
    _check_step(tr, t)
    chosen = tr.output_tokens[t]
    out: dict[str, object] = {"t": t + 1, "previous": tr.previous_tokens[t], "chosen": chosen,
                              "p": float(tr.probs[t, tr.output_ids[t]])}
    if tr.has_attention:
        i = int(np.argmax(tr.weights[t]))
        out.update(argmax=i, argmax_token=tr.source_tokens[i], argmax_weight=float(tr.weights[t, i]),
                   argmax_score=float(tr.scores[t, i]))
    return out


def _check_step(tr: Trace, t: int) -> None:
    if not 0 <= t < tr.steps:
        raise ExplorerError(f"step {t + 1} does not exist: decoding has steps 1–{tr.steps}")
