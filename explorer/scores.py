"""Translation scores of a model on held-out pairs, as the app shows them: BLEU and chrF beside exact match.

sacrebleu with its default settings (cased; BLEU tokenized '13a', or 'zh' for a Chinese target), on the
model's greedy output detokenised against the references as written in the file.
"""

from __future__ import annotations

from typing import Sequence

import sacrebleu

from .bundle import ModelBundle
from .errors import ExplorerError
from .evaluation import translate_ids
from .train import Pair, evaluate

MAX_PAIRS = 1000  # scored pairs at most (greedy decoding of 1,000 short sentences: seconds on one core)


def bleu_tokenizer(language: str | None) -> str:
    return "zh" if (language or "").lower().split("-")[0] in ("zh", "cmn") else "13a"


def translation_scores(bundle: ModelBundle, pairs: Sequence[tuple[str, str]],
                       limit: int = MAX_PAIRS) -> dict[str, float | int | str]:
    """n, exact_match (0-1), bleu and chrf (0-100) of `bundle` on the first `limit` usable (source, target)
    pairs: those whose source it can read within its length limits. ExplorerError if none is usable."""
    if bundle.languages is None:
        raise ExplorerError(f"{bundle.name} is not a translation model: BLEU and chrF score translations")
    usable: list[tuple[str, str]] = []
    ids: list[Pair] = []
    for source, target in pairs:
        try:
            prepared = bundle.prepare(source)
            tgt = bundle.tokenize_target(target)
        except ExplorerError:
            continue
        if not tgt or len(tgt) >= bundle.model.cfg.max_tgt_len:
            continue
        usable.append((source, target))
        ids.append(Pair(prepared.ids, tuple(bundle.tgt_vocab.encode(tgt))))
        if len(usable) >= limit:
            break
    if not usable:
        raise ExplorerError("no held-out pair this model can read")
    outputs: list[list[int]] = []
    for start in range(0, len(ids), 256):
        outputs += translate_ids(bundle, [p.src for p in ids[start: start + 256]])
    hypotheses = [bundle.detokenize_target(bundle.tgt_vocab.decode(o)) for o in outputs]
    references = [t for _, t in usable]
    tokenize = bleu_tokenizer(bundle.languages[1])
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize)
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {"n": len(usable), "exact_match": evaluate(bundle.model, ids).exact_match,
            "bleu": float(bleu.score), "chrf": float(chrf.score), "tokenize": tokenize}
