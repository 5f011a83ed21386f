"""The toy tasks: ground truth, alignment, sampling, date parsing and scoring helpers."""

from __future__ import annotations

import datetime
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.errors import ExplorerError
from explorer.data.tasks import (
    DATE_FORMATS,
    TASK_NAMES,
    Example,
    Task,
    TaskSpec,
    alignment_hits,
    alignment_matrix,
    make_task,
    render_date,
)

E = frozenset()  # "aligns to no source position"


def task(name: str, **kw) -> Task:
    return make_task(TaskSpec(name, **kw))


def solve_text(name: str, text: str, **kw) -> Example | None:
    t = task(name, **kw)
    return t.solve(t.tokenize(text))


# --- ground truth on hand-picked cases -----------------------------------------------------

def test_copy_is_the_diagonal():
    ex = solve_text("copy", "3141")
    assert ex == Example(tuple("3141"), tuple("3141"),
                         (frozenset({0}), frozenset({1}), frozenset({2}), frozenset({3})))


def test_reverse_is_the_anti_diagonal():
    ex = solve_text("reverse", "31415926535")
    assert "".join(ex.target) == "53562951413"
    assert ex.alignment == tuple(frozenset({10 - t}) for t in range(11))


def test_sort_aligns_ties_to_every_copy():
    ex = solve_text("sort", "31413")
    assert "".join(ex.target) == "11334"
    assert ex.alignment == (frozenset({1, 3}), frozenset({1, 3}), frozenset({0, 4}),
                            frozenset({0, 4}), frozenset({2}))


def test_sort_follows_alphabet_order_not_character_order():
    ex = solve_text("sort", "abcab", alphabet="cba")
    assert "".join(ex.target) == "cbbaa"


def test_sequence_tasks_have_no_truth_for_unknown_symbols_or_empty_input():
    for name in ("copy", "reverse", "sort"):
        assert solve_text(name, "12x") is None
        assert task(name).solve(()) is None


# --- sampling ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_sample_respects_lengths_and_alphabet(name):
    t = task(name, min_len=3, max_len=6, alphabet="abcd")
    examples = t.sample(random.Random(0), 200)
    assert {len(ex.source) for ex in examples} == {3, 4, 5, 6}
    assert all(set(ex.source) <= set("abcd") for ex in examples)
    assert all(len(ex.alignment) == len(ex.target) == len(ex.source) for ex in examples)


@pytest.mark.parametrize("name", TASK_NAMES)
def test_sample_is_reproducible_with_the_same_seed(name):
    t = task(name)
    assert t.sample(random.Random(7), 20) == t.sample(random.Random(7), 20)
    assert t.sample(random.Random(7), 20) != t.sample(random.Random(8), 20)


@pytest.mark.parametrize("name", TASK_NAMES)
def test_solve_reproduces_every_sample(name):
    t = task(name)
    for ex in t.sample(random.Random(1), 500):
        assert t.solve(ex.source) == ex


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(TASK_NAMES))
def test_solve_round_trips_samples_for_any_seed(seed, name):
    t = task(name)
    for ex in t.sample(random.Random(seed), 10):
        assert t.solve(t.tokenize(t.detokenize(ex.source))) == ex


@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_a_lower_max_len_caps_sampled_lengths_and_the_full_one_draws_as_without(name):
    t = task(name, min_len=3, max_len=9)
    assert {len(ex.source) for ex in t.sample(random.Random(0), 200, max_len=5)} == {3, 4, 5}
    assert {len(ex.source) for ex in t.sample(random.Random(0), 50, max_len=1)} == {3}  # never under min_len
    assert t.sample(random.Random(4), 30, max_len=9) == t.sample(random.Random(4), 30)
    assert t.sample(random.Random(4), 30, max_len=99) == t.sample(random.Random(4), 30)


def test_sample_length_gives_exact_lengths_even_outside_the_range():
    t = task("reverse", min_len=5, max_len=8)
    for length in (1, 5, 20):
        examples = t.sample_length(random.Random(0), 10, length)
        assert len(examples) == 10 and all(len(ex.source) == length for ex in examples)


def test_sample_length_is_refused_for_dates_and_bad_lengths():
    with pytest.raises(ExplorerError):
        task("dates").sample_length(random.Random(0), 3, 10)
    with pytest.raises(ExplorerError):
        task("copy").sample_length(random.Random(0), 3, 0)
    with pytest.raises(ExplorerError):
        task("copy").sample(random.Random(0), -1)


# --- dates ---------------------------------------------------------------------------------

WEDNESDAY = datetime.date(2021, 3, 3)


@pytest.mark.parametrize("fmt", DATE_FORMATS)
def test_each_date_format_parses_back_to_the_iso_date(fmt):
    t = task("dates")
    for date in (WEDNESDAY, datetime.date(1970, 1, 1), datetime.date(2069, 12, 31),
                 datetime.date(1999, 11, 22), datetime.date(2000, 2, 29)):
        text = render_date(fmt, date)
        ex = t.solve(t.tokenize(text))
        assert ex is not None, text
        assert "".join(ex.target) == date.isoformat(), text


def test_at_least_ten_formats_and_sources_stay_short():
    assert len(DATE_FORMATS) >= 10
    longest = datetime.date(2021, 9, 29)  # a Wednesday in September: the longest names
    assert max(len(render_date(f, longest)) for f in DATE_FORMATS) <= 32
    t = task("dates")
    assert max(len(ex.source) for ex in t.sample(random.Random(2), 500)) <= 32


def test_date_alignment_is_per_field():
    ex = solve_text("dates", "3 March 2021")
    day, month, year = frozenset({0}), frozenset(range(2, 7)), frozenset(range(8, 12))
    assert "".join(ex.target) == "2021-03-03"
    assert ex.alignment == (year,) * 4 + (E,) + (month,) * 2 + (E,) + (day,) * 2


def test_date_alignment_of_an_ordinal_day_covers_only_its_digits():
    ex = solve_text("dates", "21st of June 1990")
    assert "".join(ex.target) == "1990-06-21"
    assert ex.alignment[8] == frozenset({0, 1})
    assert ex.alignment[5] == frozenset(range(8, 12))  # "June"


def test_slashed_dates_are_day_month_year():
    assert "".join(solve_text("dates", "04/05/21").target) == "2021-05-04"
    assert "".join(solve_text("dates", "4/5/2021").target) == "2021-05-04"
    assert solve_text("dates", "05/31/21") is None  # no month 31: not read as month/day


@pytest.mark.parametrize("text, iso", [("01/01/00", "2000-01-01"), ("01/01/69", "2069-01-01"),
                                       ("01/01/70", "1970-01-01"), ("31/12/99", "1999-12-31")])
def test_two_digit_years_pivot_at_70(text, iso):
    assert "".join(solve_text("dates", text).target) == iso


def test_weekdays_in_samples_are_true_and_wrong_ones_are_rejected():
    assert render_date("{weekday}, {d} {month} {yyyy}", WEDNESDAY) == "Wednesday, 3 March 2021"
    assert render_date("{wkd} {d} {mon} {yy}", WEDNESDAY) == "Wed 3 Mar 21"
    assert solve_text("dates", "Tuesday, 3 March 2021") is None
    t = task("dates")
    names = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    for ex in t.sample(random.Random(3), 300):
        text = t.detokenize(ex.source)
        stated = [i for i, n in enumerate(names) if text.startswith(n[:3])]
        if stated:
            assert datetime.date.fromisoformat("".join(ex.target)).weekday() == stated[0]


@pytest.mark.parametrize("text", ["31 April 2021", "29/02/21", "30 Febtember 2021", "hello",
                                  "2021.13.01", "", "3 March", "0 March 2021"])
def test_invalid_dates_have_no_truth(text):
    assert solve_text("dates", text) is None


def test_user_typed_dates_are_read_leniently():
    assert "".join(solve_text("dates", "  3   march  2021 ").target) == "2021-03-03"
    assert "".join(solve_text("dates", "WEDNESDAY, 3 MAR 2021").target) == "2021-03-03"


def test_dates_symbols_cover_samples():
    t = task("dates")
    src, tgt = set(t.source_symbols()), set(t.target_symbols())
    assert tgt == set("0123456789-")
    for ex in t.sample(random.Random(4), 300):
        assert set(ex.source) <= src and set(ex.target) <= tgt


# --- tokenisation and UI examples ----------------------------------------------------------

def test_tokenize_sequences_drops_all_whitespace():
    t = task("copy")
    assert t.tokenize(" 3 1  4\t") == ("3", "1", "4")
    assert t.detokenize(("3", "1", "4")) == "314"


def test_tokenize_dates_collapses_whitespace_to_one_space_token():
    t = task("dates")
    assert t.tokenize("  3   Mar\t2021 ") == tuple("3 Mar 2021")


@pytest.mark.parametrize("name", TASK_NAMES)
def test_examples_are_solvable_inputs(name):
    t = task(name)
    examples = t.examples()
    assert 4 <= len(examples) <= 6
    assert all(t.solve(t.tokenize(text)) is not None for text in examples)


def test_examples_follow_a_custom_alphabet_and_range():
    t = task("sort", min_len=2, max_len=4, alphabet="abc")
    examples = t.examples()
    assert 4 <= len(examples) <= 6
    assert all(2 <= len(x) <= 4 and set(x) <= set("abc") for x in examples)


def test_reverse_offers_pi():
    assert "31415926535" in task("reverse").examples()


# --- specs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [
    TaskSpec("translate"), TaskSpec("copy", min_len=0), TaskSpec("copy", min_len=5, max_len=4),
    TaskSpec("copy", alphabet=""), TaskSpec("copy", alphabet="aba"),
    TaskSpec("copy", alphabet="a b"),
])
def test_bad_specs_raise_explorer_error(spec):
    with pytest.raises(ExplorerError):
        make_task(spec)


def test_dates_ignores_length_and_alphabet():
    assert make_task(TaskSpec("dates", min_len=0, alphabet="")).spec.name == "dates"


# --- alignment helpers ---------------------------------------------------------------------

def test_alignment_matrix_marks_true_positions():
    m = alignment_matrix((frozenset({2}), E, frozenset({0, 1})), 3)
    assert m.dtype == bool
    np.testing.assert_array_equal(m, [[0, 0, 1], [0, 0, 0], [1, 1, 0]])


def test_alignment_hits_counts_non_empty_rows_and_ignores_extra_rows():
    alignment = (frozenset({0}), E, frozenset({1, 2}), frozenset({0}))
    weights = np.array([[0.8, 0.1, 0.1],   # hit
                        [0.1, 0.8, 0.1],   # not counted: no true position
                        [0.1, 0.1, 0.8],   # hit (ties are all true)
                        [0.1, 0.8, 0.1],   # miss
                        [0.9, 0.0, 0.1]])  # <eos> step: ignored
    assert alignment_hits(weights, alignment) == (2, 3)
    assert alignment_hits(weights[:2], alignment) == (1, 1)  # rows missing: not counted
