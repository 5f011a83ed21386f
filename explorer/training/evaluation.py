"""Scoring models: `evaluate` (greedy decoding against the targets; training's validation too), toy-task accuracy
(also by input length), translation BLEU, and translating text."""

from __future__ import annotations

import random
from dataclasses import asdict, astuple, dataclass, replace
from typing import Any, Callable, Sequence

from explorer.engine.bundle import ModelBundle
from explorer.engine.copying import copied_outputs
from explorer.engine.decoding import beam_search, greedy_batch, strip_output
from explorer.errors import ExplorerError
from explorer.engine.lengths import cut_note, output_cap, output_caps
from explorer.limits import check_beam, check_lengths, check_samples
from explorer.data.tasks import argmax_hits, make_task
from explorer.data.vocab import EOS_ID, PAD_ID
from explorer.engine.model import Seq2Seq
from explorer.training.data import Pair
from explorer.training.distributed import World


@dataclass
class Metrics:
    """Exact match (whole output right), token accuracy (position-wise, <eos> included), alignment accuracy."""

    n: int
    exact_match: float
    token_accuracy: float
    alignment_accuracy: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Tally:
    """The counts behind Metrics. Counts of parts of a validation set add up to the whole set's, so two
    processes can each score part of it (distributed.py)."""

    n: int = 0
    exact: int = 0
    tokens_right: int = 0
    tokens_total: int = 0
    alignment_hits: int = 0
    alignment_counted: int = 0

    def __add__(self, other: "Tally") -> "Tally":
        return Tally(*(a + b for a, b in zip(astuple(self), astuple(other))))

    def summed(self, world: World | None) -> "Tally":
        """The counts of every rank's part added up (one all_reduce; itself without a world)."""
        return self if world is None or world.size == 1 else Tally(*(int(v) for v in world.sum(list(astuple(self)))))

    def metrics(self) -> Metrics:
        return Metrics(self.n, self.exact / self.n if self.n else 0.0,
                       self.tokens_right / self.tokens_total if self.tokens_total else 0.0,
                       self.alignment_hits / self.alignment_counted if self.alignment_counted else None)


def evaluate(model: Seq2Seq, pairs: Sequence[Pair], chunk: int = 512) -> Metrics:
    """Greedy-decode every pair (batched) and score it against its target."""
    return tally(model, pairs, chunk).metrics()


def tally(model: Seq2Seq, pairs: Sequence[Pair], chunk: int = 512) -> Tally:
    """evaluate()'s counts: greedy-decode every pair (batched) and count what is right."""
    was_training = model.training
    model.eval()
    exact = tokens_right = tokens_total = hits = counted = 0
    try:
        for start in range(0, len(pairs), chunk):
            part = pairs[start: start + chunk]
            # Scoring reads at most len(target) + 1 tokens (the target and its <eos>), so decoding stops
            # there: the same metrics, without running a failing model on to its length cap.
            longest = min(model.cfg.max_tgt_len, max(len(p.tgt) for p in part) + 1)
            out = greedy_batch(model, [p.src for p in part], max_len=longest)
            ids = out.ids.tolist()
            # each step's attention argmax, for the whole chunk at once (one copy off a GPU), only where some
            # pair has a true alignment (translation pairs have none); padding has weight 0 and a row's real
            # positions sum to 1, so the argmax of a full row is that of its real part
            aligned = out.weights is not None and any(p.alignment is not None for p in part)
            top = out.weights.argmax(-1).tolist() if aligned else None
            for b, p in enumerate(part):
                pred = strip_output(ids[b])
                exact += pred == list(p.tgt) and EOS_ID in ids[b][: len(p.tgt) + 1]
                truth = list(p.tgt) + [EOS_ID]
                row = ids[b] + [PAD_ID] * max(0, len(truth) - len(ids[b]))
                tokens_right += sum(int(row[t] == truth[t]) for t in range(len(truth)))
                tokens_total += len(truth)
                if p.alignment is not None and top is not None:
                    h, c = argmax_hits(top[b], p.alignment)
                    hits, counted = hits + h, counted + c
    finally:
        model.train(was_training)
    return Tally(len(pairs), int(exact), tokens_right, tokens_total, hits, counted)


def task_pairs(bundle: ModelBundle, samples: int, seed: int, min_len: int | None = None,
               max_len: int | None = None) -> list[Pair]:
    """Fresh examples of the bundle's task (optionally over another length range) as id pairs."""
    if bundle.task is None:
        raise ExplorerError(f"{bundle.name} is a translation model: give --data FILE.tsv")
    check_samples(samples)
    spec = bundle.task
    if min_len is not None or max_len is not None:
        lo = min_len if min_len is not None else spec.min_len
        hi = max_len if max_len is not None else max(spec.max_len, lo)
        cfg = bundle.cfg
        longest = min(cfg.max_src_len, cfg.max_tgt_len - 1)
        if spec.name != "dates":
            check_lengths(lo, hi, longest)
        spec = replace(spec, min_len=lo, max_len=hi)
    task = make_task(spec)
    examples = task.sample(random.Random(seed), samples)
    return [Pair(tuple(bundle.src_vocab.encode(e.source)), tuple(bundle.tgt_vocab.encode(e.target)), e.alignment)
            for e in examples]


def accuracy_by_length(bundle: ModelBundle, lengths: Sequence[int], samples: int = 200,
                       seed: int = 12345) -> list[dict[str, Any]]:
    """Exact match and token accuracy at each input length (the bottleneck curve)."""
    rows = []
    for length in lengths:
        pairs = task_pairs(bundle, samples, seed + length, length, length)
        m = evaluate(bundle.model, pairs)
        rows.append({"length": length, **m.to_dict()})
    return rows


def decoded_ids(bundle: ModelBundle, sources: Sequence[Sequence[int]], beam: int = 1) -> list[list[int]]:
    """Output ids for many inputs, <eos> kept where the model wrote it: batched greedy, or beam search one by
    one; both stop at each input's cap (explorer/engine/lengths.py)."""
    check_beam(beam)
    if beam <= 1:
        out = greedy_batch(bundle.model, sources, max_len=output_caps(bundle, sources))
        return [row[:n] for row, n in zip(out.ids.tolist(), out.lengths.tolist())]
    return [list(beam_search(bundle.model, s, beam, output_cap(bundle, len(s)).steps)[0].ids) if s else []
            for s in sources]


def translate_ids(bundle: ModelBundle, sources: Sequence[Sequence[int]], beam: int = 1) -> list[list[int]]:
    """Output ids (without <eos>) for many inputs (see decoded_ids)."""
    return [strip_output(ids) for ids in decoded_ids(bundle, sources, beam)]


@dataclass(frozen=True)
class Translation:
    """One input's output text, the input words the vocabulary lacks (shown as <unk>), and a note when
    decoding stopped at its length cap without <eos> (else None)."""

    text: str
    unknown: tuple[str, ...]
    cut: str | None


def translate_one(bundle: ModelBundle, text: str, beam: int = 1) -> Translation:
    """Decode one input (any model: toy task or translation) as the CLI's `translate` prints it."""
    prepared = bundle.prepare(text)
    ids = decoded_ids(bundle, [prepared.ids], beam)[0]
    cut = cut_note(bundle, len(prepared.ids), bundle.tgt_vocab.decode(ids))
    text = copied_outputs(bundle, [prepared.tokens], [prepared.ids], [strip_output(ids)])[0]
    return Translation(text, prepared.unknown, cut)


def evaluate_checkpoint(bundle: ModelBundle, samples: int | None = 1000, min_len: int | None = None,
                        max_len: int | None = None, seed: int = 12345, data: str | None = None,
                        beam: int = 1, split: str = "all", on_progress: Callable[[int, int], None] | None = None,
                        note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The CLI's `eval`: n, exact_match, token_accuracy, alignment_accuracy (toy tasks), bleu (with --data);
    `note` hears which lines of the file were skipped and why (as `train` says it)."""
    if data is None:
        m = evaluate(bundle.model, task_pairs(bundle, samples or 1000, seed, min_len, max_len))
        return m.to_dict()
    return evaluate_tsv(bundle, data, samples, beam, split, on_progress, note)


def held_out_pairs(bundle: ModelBundle, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The validation part of the file the model was trained on, split exactly as training split it."""
    from explorer.data.corpus import split_pairs
    record = bundle.training
    if "valid_fraction" not in record:
        raise ExplorerError(f"{bundle.name} records no validation split; use --split all")
    _, valid = split_pairs(list(enumerate(pairs)), float(record["valid_fraction"]), int(record.get("seed", 0)))
    return [p for _, p in valid]


def evaluate_tsv(bundle: ModelBundle, path: str, samples: int | None = None, beam: int = 1,
                 split: str = "all", on_progress: Callable[[int, int], None] | None = None,
                 note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Exact match, token accuracy, corpus BLEU and chrF on the pairs of a TSV file (or its held-out split);
    `note` hears the file's skipped lines (Corpus.skipped_note).

    A model is scored as a user reads it: its detokenised, cased output against the file's references
    (cleaned, and in simplified script for Chinese, as the model was trained), with sacrebleu's defaults."""
    from explorer.data.corpus import load_tsv
    corpus = load_tsv(path)
    if corpus.skipped and note is not None:
        note(corpus.skipped_note())
    pairs = list(corpus.pairs)
    if split == "valid":
        pairs = held_out_pairs(bundle, pairs)
    elif split != "all":
        raise ExplorerError(f"split must be 'all' or 'valid', got {split!r}")
    if samples:
        pairs = pairs[:samples]
    report = score_pairs(bundle, pairs, beam, on_progress=on_progress)
    if not report["n"]:
        raise ExplorerError(f"no usable pair in {path} for this model")
    report["skipped"] = len(pairs) - report["n"]
    report["beam"] = beam
    report["split"] = split
    return report


def score_pairs(bundle: ModelBundle, pairs: Sequence[tuple[str, str]], beam: int = 1,
                limit: int | None = None, on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Exact match, token accuracy, corpus BLEU and chrF (corpus.translation_scores) of `bundle` on the
    (source, target) pairs it can read (at most `limit` of them); n is how many were scored (0: none, and
    no scores). `on_progress(done, total)` follows the decoding, the long part. The CLI's eval and the
    app's Train and Compare pages all score through here."""
    from explorer.data.corpus import translation_scores
    max_src = bundle.cfg.max_src_len
    usable, id_pairs = [], []
    for src, tgt in pairs:
        if limit is not None and len(usable) >= limit:
            break
        tokens = bundle.tokenize_source(src)
        if not tokens or len(tokens) > max_src:
            continue
        usable.append((src, tgt))
        tgt_tokens = bundle.tokenize_target(tgt)[: bundle.cfg.max_tgt_len - 1]
        id_pairs.append(Pair(tuple(bundle.src_vocab.encode(tokens)), tuple(bundle.tgt_vocab.encode(tgt_tokens))))
    if not usable:
        return {"n": 0}
    report: dict[str, Any] = evaluate(bundle.model, id_pairs).to_dict()
    outputs = []
    if on_progress is not None:
        on_progress(0, len(id_pairs))
    size = 256 if on_progress is None else 64  # followed: smaller batches, so news comes every few seconds
    for start in range(0, len(id_pairs), size):
        chunk = id_pairs[start: start + size]
        outputs += translate_ids(bundle, [p.src for p in chunk], beam)
        if on_progress is not None:
            on_progress(len(outputs), len(id_pairs))
    hypotheses = copied_outputs(bundle, [bundle.tokenize_source(s) for s, _ in usable], [p.src for p in id_pairs],
                                outputs)
    language = bundle.languages[1] if bundle.languages else "en"
    references = [bundle.reference_text(t) for _, t in usable]
    report.update(translation_scores(hypotheses, references, language))
    report["n"] = len(usable)
    return report


def attention_focus(bundle: ModelBundle, texts: Sequence[str]) -> dict[str, float]:
    """How readable a model's attention maps are, from greedy traces of these inputs: the share of output
    steps (before <eos>) whose largest weight is on the input's last token, and the mean largest weight.
    A model that uses attention as one more read of a sentence summary puts nearly every step on the
    last token (the first eng-fra, with dot attention: see pretrained/README.md); an aligning one does not."""
    from explorer.engine.trace import trace
    on_last, peaks = 0, []
    for text in texts:
        tr = trace(bundle, text)
        if tr.weights.shape[1] == 0 or not len(tr.source_tokens):
            continue
        last = len(tr.source_tokens) - 1
        for row in tr.weights[: max(1, len(tr.output_tokens) - 1)]:
            on_last += int(row.argmax() == last)
            peaks.append(float(row.max()))
    if not peaks:
        raise ExplorerError(f"{bundle.name} has no attention to measure")
    return {"steps": len(peaks), "argmax_on_last": on_last / len(peaks), "mean_peak": sum(peaks) / len(peaks)}
