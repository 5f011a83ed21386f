"""Decoding stops at a length a user expects (explorer/engine/lengths.py): toy tasks at what the task allows,
translation in proportion to the source; one cap for the trace, greedy (alone and batched) and beam search,
and the cut said out loud in the CLI. The issue's case: a masked `reverse` input ran to 17-22 tokens."""

from __future__ import annotations

import math

import pytest
import torch

from explorer.__main__ import main
from explorer.engine.decoding import batch_sources, beam_search, decode, greedy_batch, strip_output
from explorer.training.evaluation import translate_one
from explorer.engine.lengths import TRANSLATION_EXTRA, TRANSLATION_RATIO, cut_note, output_cap, output_caps
from explorer.engine.trace import Intervention, trace
from explorer.data.vocab import EOS, EOS_ID

from conftest import load_shipped


@pytest.mark.parametrize("name, text, steps", [
    ("copy", "31415", 6), ("reverse", "31415926", 9), ("sort", "27182818284", 12),
    ("dates", "3 March 2021", 11), ("dates", "Wednesday, 3 March 2021", 11),
])
def test_a_toy_task_decodes_what_the_task_allows_and_eos(name, text, steps):
    bundle = load_shipped(name)
    assert output_cap(bundle, len(bundle.prepare(text).ids)).steps == steps


def test_a_translation_gets_room_in_proportion_to_its_source_within_the_models_cap():
    bundle = load_shipped("eng-fra")
    for n in (1, 5, 13, 30):
        assert output_cap(bundle, n).steps == min(math.ceil(TRANSLATION_RATIO * n) + TRANSLATION_EXTRA,
                                                  bundle.model.cfg.max_tgt_len)
    assert output_cap(bundle, 80).steps == bundle.model.cfg.max_tgt_len == 88


def test_a_masked_reverse_input_stops_at_the_input_length_and_says_it_was_cut():
    """Before: masking x3 of 31415926 decoded 17 tokens ("6 2 9 5 1 2 9 5 1 2 9 5 1 4 1 3 <eos>")."""
    bundle = load_shipped("reverse")
    tr = trace(bundle, "31415926", Intervention(masked=(2,)))
    assert tr.steps == 9 and tr.output_tokens[-1] != EOS
    note = cut_note(bundle, 8, tr.output_tokens)
    assert note and "cut at 9 steps" in note and "8 symbols" in note
    assert cut_note(bundle, 8, trace(bundle, "31415926").output_tokens) is None  # it ends by itself


def test_per_row_caps_in_a_batch_equal_each_input_alone(random_bundle):
    """A padded batch with a cap per row gives each row exactly its lone decoding under its own cap."""
    bundle = random_bundle
    sources = [bundle.prepare(t).ids for t in ("12", "98765", "5", "1234567")]
    caps = output_caps(bundle, sources)
    batch = greedy_batch(bundle.model, sources, max_len=caps)
    for b, src in enumerate(sources):
        alone = greedy_batch(bundle.model, [src], max_len=caps[b])
        n = int(batch.lengths[b])
        assert n == int(alone.lengths[0]) <= caps[b]
        assert batch.ids[b, :n].tolist() == alone.ids[0, :n].tolist()
        assert batch.ids[b, :n].tolist()[-1] == EOS_ID or n == caps[b]


def test_trace_greedy_and_beam_share_the_cap_where_it_bites(make_random_bundle):
    """Untrained models rarely write <eos>: the cap bites, and the trace is still plain greedy decoding."""
    bit = 0
    for seed in range(6):
        bundle = make_random_bundle("gru", "dot", 1, True, seed=seed)
        for text in ("3141", "27182818"):
            ids = bundle.prepare(text).ids
            cap = output_cap(bundle, len(ids)).steps
            tr = trace(bundle, text)
            greedy = greedy_batch(bundle.model, [ids], max_len=cap)
            beam = beam_search(bundle.model, ids, 1, max_len=cap)[0]
            assert tr.output_ids.tolist() == greedy.ids[0, : int(greedy.lengths[0])].tolist() == list(beam.ids)
            assert tr.steps <= cap
            bit += tr.steps == cap and tr.output_tokens[-1] != EOS
    assert bit, "some random model should have run to the cap"


def test_a_teacher_forced_decode_is_not_capped(random_bundle):
    bundle = random_bundle
    src, lengths = batch_sources([bundle.prepare("12").ids])
    memory = bundle.model.encode(src, lengths)
    target = torch.tensor([[4, 5, 6, 7, 8, 9, EOS_ID]])
    with torch.inference_mode():
        out = decode(bundle.model, memory, 3, target=target)
    assert out.ids.shape[1] == 7 and strip_output(out.ids[0].tolist()) == [4, 5, 6, 7, 8, 9]


def test_the_cli_says_when_the_output_was_cut(capsys):
    rc = main(["trace", "--checkpoint", "reverse", "--input", "31415926", "--mask", "3"])  # the third symbol: from 1
    out, err = capsys.readouterr()
    assert rc == 0 and out.splitlines()[1] == "output: 6 2 9 5 1 2 9 5 1"
    assert err.strip() == ("note: The output was cut at 9 steps without <eos> "
                           "(a reversal of 8 symbols has 8, then <eos>).")
    rc = main(["trace", "--checkpoint", "reverse", "--input", "31415926"])
    assert rc == 0 and capsys.readouterr().err == ""


def test_translate_keeps_a_cut_outputs_last_token_and_notes_it(random_bundle):
    """Beam search's capped best candidate has no <eos> to drop: its last token stays (it was dropped)."""
    bundle = random_bundle
    for width in (1, 3):
        done = translate_one(bundle, "1234", beam=width)
        ids = bundle.prepare("1234").ids
        cap = output_cap(bundle, len(ids)).steps
        best = beam_search(bundle.model, ids, width, cap)[0] if width > 1 else None
        if done.cut is not None:
            assert f"cut at {cap} steps" in done.cut
        if best is not None:
            assert done.text == bundle.detokenize_target(bundle.tgt_vocab.decode(strip_output(best.ids)))
