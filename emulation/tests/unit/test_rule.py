"""The one rule that judges every claim (results/rule.py), on known figures."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccemu.results import rule
from ccemu.results.rule import Figure, Interval, Paper, Tighter, judge


def verdict(paper: Paper, figure: Figure, tighter: Tighter | None = None) -> str:
    return judge(paper, figure, tighter).verdict


def test_a_ratio_of_1_26_or_0_79_is_not_reproduced_and_1_25_or_0_8_is():
    paper = Paper(value=2.0)
    assert verdict(paper, Figure.of(2.0 * 1.26)) == rule.NOT_REPRODUCED
    assert verdict(paper, Figure.of(2.0 * 0.79)) == rule.NOT_REPRODUCED
    assert verdict(paper, Figure.of(2.0 * 1.25)) == rule.REPRODUCED
    assert verdict(paper, Figure.of(2.0 * 0.8)) == rule.REPRODUCED
    assert judge(paper, Figure.of(2.5)).ratio == "1.25"


def test_a_figure_exactly_at_either_edge_is_reproduced_where_floating_point_would_put_it_outside():
    # In floating point 0.8 * 3 is 2.4000000000000004, 0.8 * 8.4 is 6.720000000000001 and 1.25 * 0.34
    # is 0.42500000000000004: each edge below would read as outside.
    assert 0.8 * 3 > 2.4 and 0.8 * 8.4 > 6.72 and 1.25 * 0.34 > 0.425
    assert verdict(Paper(value=3), Figure.of(2.4)) == rule.REPRODUCED
    assert verdict(Paper(value=8.4), Figure.of(6.72)) == rule.REPRODUCED
    assert verdict(Paper(value=0.34), Figure.of(0.425)) == rule.REPRODUCED
    assert judge(Paper(value=3), Figure.of(2.4)).ratio == "0.8"


def test_a_figure_one_step_past_either_edge_is_not_reproduced():
    assert verdict(Paper(value=3), Figure.of(math.nextafter(2.4, 0))) == rule.NOT_REPRODUCED
    assert verdict(Paper(value=3), Figure.of(math.nextafter(3.75, math.inf))) == rule.NOT_REPRODUCED
    assert verdict(Paper(value=3), Figure.of(3.75)) == rule.REPRODUCED


def test_the_papers_range_and_a_pivot_are_compared_exactly_at_their_ends():
    assert verdict(Paper(low=0.1, high=0.3), Figure.of(0.1 + 0.2)) == rule.NOT_REPRODUCED  # 0.30000000000000004
    assert verdict(Paper(low=0.6, high=0.9), Figure.of(0.6)) == rule.REPRODUCED
    assert verdict(Paper(low=0.3, high=0.9), Figure.of(0.3)) == rule.REPRODUCED  # not 0.1 * 3
    assert verdict(Paper(side="above", pivot=0.3), Figure.of(0.3)) == rule.DIRECTION_FAILS  # on it: not above
    assert verdict(Paper(side="above", pivot=0.3), Figure.of(math.nextafter(0.3, 1))) == rule.DIRECTION_HOLDS


@given(st.floats(0.001, 1e6), st.floats(0.01, 100))
def test_a_numeric_claim_is_reproduced_exactly_when_ccemu_over_the_paper_lies_in_0_8_to_1_25(value, ratio):
    got = verdict(Paper(value=value), Figure.of(value * ratio))
    if 0.8 * (1 + 1e-9) <= ratio <= 1.25 * (1 - 1e-9):
        assert got == rule.REPRODUCED
    elif ratio < 0.8 * (1 - 1e-9) or ratio > 1.25 * (1 + 1e-9):
        assert got == rule.NOT_REPRODUCED


def test_a_figure_inside_the_papers_own_range_is_reproduced_however_far_from_its_ends():
    paper = Paper(low=1.3, high=5.14)
    assert verdict(paper, Figure.of(1.3)) == rule.REPRODUCED
    assert verdict(paper, Figure.of(5.0)) == rule.REPRODUCED
    outside = judge(paper, Figure.of(1.2))
    assert outside.verdict == rule.NOT_REPRODUCED and "the paper's range 1.3 to 5.14" in outside.why
    assert outside.ratio == "0.923 of the low end"
    assert verdict(Paper(low=200, high=None), Figure.of(1e4)) == rule.REPRODUCED  # "more than 200 ms"


def test_a_miss_on_the_papers_side_of_the_pivot_is_same_direction_and_across_it_not_reproduced():
    paper = Paper(value=1.51, pivot=1)  # DCTCP / ExpressPass: ExpressPass better
    assert verdict(paper, Figure.of(22.0)) == rule.SAME_DIRECTION
    assert verdict(paper, Figure.of(1.05)) == rule.SAME_DIRECTION
    assert verdict(paper, Figure.of(0.9)) == rule.NOT_REPRODUCED
    assert verdict(paper, Figure.of(1.0)) == rule.NOT_REPRODUCED  # on the pivot: no side
    assert verdict(Paper(value=1.51), Figure.of(22.0)) == rule.NOT_REPRODUCED  # no pivot: no direction


def test_a_paper_value_of_zero_is_reproduced_only_by_zero():
    paper = Paper(value=0)
    assert verdict(paper, Figure.of(0.0)) == rule.REPRODUCED
    missed = judge(paper, Figure.of(0.003))
    assert missed.verdict == rule.NOT_REPRODUCED and missed.ratio == "-"


def test_a_direction_only_claim_holds_or_not_and_is_never_reproduced():
    paper = Paper(side="below", pivot=1)
    assert paper.kind == rule.DIRECTION_ONLY
    assert verdict(paper, Figure.of(0.7)) == rule.DIRECTION_HOLDS
    assert verdict(paper, Figure.of(1.3)) == rule.DIRECTION_FAILS
    assert verdict(paper, Figure.of(1.0)) == rule.DIRECTION_FAILS
    assert verdict(paper, Figure(0.5, 1.5)) == rule.NOT_COMPARABLE
    assert verdict(paper, Figure(0.5, 1.0)) == rule.NOT_COMPARABLE  # below 1 or at it: undecided
    assert verdict(paper, Figure(1.0, 3.0)) == rule.DIRECTION_FAILS


def test_a_tighter_criterion_only_narrows_what_the_rule_accepts():
    paper = Paper(value=10.0, pivot=0)
    tighter = Tighter(Interval(high=11.0), "why")
    assert verdict(paper, Figure.of(10.5), tighter) == rule.REPRODUCED
    inside_rule = judge(paper, Figure.of(12.0), tighter)
    assert inside_rule.verdict == rule.SAME_DIRECTION and "tighter: why" in inside_rule.why
    # A criterion that would accept what the rule does not changes nothing.
    assert verdict(paper, Figure.of(20.0), Tighter(Interval(high=100.0), "looser")) == rule.SAME_DIRECTION


@pytest.mark.parametrize("figure", [Figure.of(math.nan), Figure.of(math.inf), Figure(math.nan, 3.0)])
def test_nan_and_infinite_figures_are_not_comparable(figure):
    assert verdict(Paper(value=3.0), figure) == rule.NOT_COMPARABLE
    assert verdict(Paper(side="above", pivot=0), figure) == rule.NOT_COMPARABLE


def test_a_bounded_figure_is_judged_only_where_every_value_of_it_agrees():
    paper = Paper(value=3.0)
    assert verdict(paper, Figure.at_least(10.0)) == rule.NOT_REPRODUCED  # never reached in 10 RTTs: > 3.75
    undecided = judge(paper, Figure.at_least(2.0))
    assert undecided.verdict == rule.NOT_COMPARABLE and "a longer run or a finer grid" in undecided.why
    assert verdict(Paper(value=35), Figure(33, 40)) == rule.REPRODUCED  # collapse between N = 32 and 40
    assert verdict(Paper(value=35), Figure(21, 40)) == rule.NOT_COMPARABLE  # between 20 and 40: the grid
    assert verdict(Paper(value=260, pivot=1), Figure.at_least(600)) == rule.SAME_DIRECTION


def test_a_paper_figure_is_one_of_a_value_a_range_or_a_side():
    for bad in ({}, {"value": 1.0, "low": 0.5}, {"side": "above"}, {"side": "up", "pivot": 1}, {"value": -1.0},
                {"low": 2.0, "high": 1.0}):
        with pytest.raises(ValueError):
            Paper(**bad)
