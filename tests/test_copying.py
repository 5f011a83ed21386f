"""Copying through attention (explorer/engine/copying.py): numbers and unknown names put where attention read
them, the model's own tokens and α untouched."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.engine.copying import Copy, Copyable, attention_of, copied_tokens, copyable, copied_outputs, trace_copies
from explorer.engine.copying import output_text
from explorer.engine.trace import trace
from explorer.record import Intervention



@pytest.fixture(scope="module")
def fra():
    from explorer.checkpoints import checkpoint
    return checkpoint.load("eng-fra")


@pytest.fixture(scope="module")
def cmn():
    from explorer.checkpoints import checkpoint
    return checkpoint.load("eng-cmn")


def test_copied_tokens_replace_a_run_by_the_input_word_keeping_the_word_start():
    word = Copyable((2, 3), "37", "number")
    tokens = ["▁J", "'", "ai", "▁3", "▁livres", ".", "<eos>"]
    assert copied_tokens(tokens, [Copy(word, (3,), "3")]) == ["▁J", "'", "ai", "▁37", "▁livres", ".", "<eos>"]
    name = Copyable((0, 1, 2), "Sarah", "name")
    assert copied_tokens(["▁Sar", "a", "▁est", "<eos>"], [Copy(name, (0, 1), "Sara")]) == ["▁Sarah", "▁est", "<eos>"]
    assert copied_tokens(["S", "ary", "累", "了"], [Copy(name, (0, 1), "Sary")]) == ["Sarah", "累", "了"]


def test_numbers_and_names_the_model_has_no_piece_for_are_copyable_and_known_words_are_not(fra):
    tokens = fra.prepare("Gwendolyn and Tom saw 37 cats in Paris").tokens
    found = {c.text: c.kind for c in copyable(fra, tokens)}
    assert found == {"Gwendolyn": "name", "37": "number"}
    possessive = copyable(fra, fra.prepare("Gwendolyn's cat is here").tokens)
    assert [c.text for c in possessive] == ["Gwendolyn"]
    for known in ("That's a plan", "Listen closely", "Let's sit down", "Happy holidays"):  # read with a full stop
        assert copyable(fra, fra.prepare(known).tokens) == [], known


@pytest.mark.parametrize("text, kept", [("I have 37 books.", "37"), ("It costs 1500 dollars.", "1500"),
                                        ("Thaddeus is slow.", "Thaddeus")])
def test_a_number_or_an_unknown_name_reaches_the_french_output(fra, text, kept):
    tr = trace(fra, text)
    plain = fra.detokenize_target([t for t in tr.output_tokens if t != "<eos>"])
    assert kept not in plain, "the model alone does not write it (else this test shows nothing)"
    shown = output_text(fra, tr)
    assert kept in shown
    done = trace_copies(fra, tr)
    peaks = tr.weights.argmax(axis=1)
    for c in done:  # every copied step is one whose attention peaked on the word copied
        assert all(int(peaks[t]) in c.source.positions for t in c.steps[:1])


def test_copying_keeps_the_words_around_the_number(fra):
    assert output_text(fra, trace(fra, "It costs 1500 dollars.")).endswith("1500 dollars.")
    assert output_text(fra, trace(fra, "Thaddeus is slow.")).startswith("Thaddeus est")


def test_chinese_output_copies_digits_over_numerals(cmn):
    tr = trace(cmn, "I have 37 books.")
    assert "37" in output_text(cmn, tr) and "三" not in output_text(cmn, tr)


def test_the_trace_stays_the_models_and_the_alignment_pass_is_its_attention(fra):
    tr = trace(fra, "I have 37 books.")
    assert "▁37" not in tr.output_tokens  # the tokens are what the model chose
    prepared = fra.prepare("I have 37 books.")
    ids = [int(i) for i in tr.output_ids[:-1]]
    (weights,) = attention_of(fra, [prepared.ids], [ids])
    np.testing.assert_allclose(weights, tr.weights[: len(ids)], atol=1e-5)


def test_translate_eval_and_explore_show_the_same_copied_text(fra):
    from explorer.training.evaluation import translate_one
    text = "Thaddeus has 37 books."
    prepared = fra.prepare(text)
    tr = trace(fra, text)
    ids = [int(i) for i in tr.output_ids if int(i) != fra.tgt_vocab.id("<eos>")]
    batch = copied_outputs(fra, [prepared.tokens], [prepared.ids], [ids])[0]
    assert batch == output_text(fra, tr) == translate_one(fra, text).text


def test_a_teacher_forced_trace_copies_nothing(fra):
    tr = trace(fra, "I have 37 books.", target="J'ai 3 livres.")
    assert trace_copies(fra, tr) == [] and output_text(fra, tr) == "J'ai 3 livres."


def test_toy_models_copy_nothing():
    from explorer.checkpoints import checkpoint
    bundle = checkpoint.load("reverse")
    assert copyable(bundle, bundle.prepare("31415926").tokens) == []
    tr = trace(bundle, "31415926", Intervention())
    assert output_text(bundle, tr) == "62951413"


def test_a_number_with_a_suffix_is_copied_as_its_digits(fra):
    assert output_text(fra, trace(fra, "Let's take a 10-minute break.")) == "Faisons une pause de 10 minutes."
    found = copyable(fra, fra.prepare("It was popular in the 1970s, on March 17th.").tokens)
    assert [(c.text, c.kind) for c in found] == [("1970", "number"), ("17", "number")]



def test_times_decimals_and_hyphenated_numbers_are_copyable_by_their_digit_pieces(fra):
    tokens = fra.prepare("At 8:30 a 10-minute walk costs 3.50 dollars for 1,000 men, $5 or 50% on 12/25 at 555-0199").tokens
    found = copyable(fra, tokens)
    assert [c.text for c in found] == ["8:30", "10", "3.50", "1,000", "5", "50", "12/25", "555-0199"]
    for c in found:
        assert all(any(ch.isdigit() for ch in tokens[i]) for i in c.positions)


def test_an_inserted_copy_is_a_word_of_its_own_after_its_steps():
    word = Copyable((3,), "123", "number")
    tokens = ["▁Le", "▁vol", "▁a", "-", "t", "<eos>"]
    assert copied_tokens(tokens, [Copy(word, (1,), "vol", "after")]) == ["▁Le", "▁vol", "▁123", "▁a", "-", "t", "<eos>"]
    assert copied_tokens(["我们", "在", "小", "时"], [Copy(word, (2,), "小", "after")]) == ["我们", "在", "小", "123", "时"]


@pytest.mark.parametrize("model, text, number", [("fra", "Has Flight 123 been delayed?", "123"),
                                                 ("fra", "Armenia joined the World Trade Organization in 2003.", "2003"),
                                                 ("cmn", "Let's begin on page 30.", "30")])
def test_a_number_no_step_peaked_on_still_reaches_the_output_where_attention_on_it_is_greatest(request, model, text,
                                                                                            number):
    fra = request.getfixturevalue(model)
    tr = trace(fra, text)
    plain = fra.detokenize_target([t for t in tr.output_tokens if t != "<eos>"])
    assert number not in plain, "the model alone leaves the number out (else this test shows nothing)"
    assert number in output_text(fra, tr)
    done = [c for c in trace_copies(fra, tr) if c.source.text == number]
    assert len(done) == 1 and done[0].where in ("most", "after")
    on_number = tr.weights[:, list(done[0].source.positions)].sum(axis=1)
    assert int(on_number[: len(tr.output_tokens) - 1].argmax()) in done[0].steps


def test_an_ordinal_the_model_wrote_in_words_takes_the_digits(fra):
    tr = trace(fra, "Room 404 is on the 4th floor")
    assert "quatrième" in fra.detokenize_target(tr.output_tokens)
    assert output_text(fra, tr).endswith("le 4 étage.")


def test_a_number_the_model_wrote_in_its_own_digits_is_left_as_written(fra):
    tr = trace(fra, "Tom went home at 6:30.")
    plain = fra.detokenize_target([t for t in tr.output_tokens if t != "<eos>"])
    assert "6" in plain and "30" in plain and "6:30" not in plain
    assert output_text(fra, tr) == plain and trace_copies(fra, tr) == []
