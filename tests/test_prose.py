"""Bounds printed on their own side: at_most never below the value, at_least never above, one unit at most."""

import math
import random

import pytest

from flatbook.errors import FlatbookInputError
from flatbook.prose import _unit, at_least, at_most, bracket, counted, grouped, interval


def _printed(text: str) -> float:
    return float(text[:-1]) / 100 if text.endswith("%") else float(text)


@pytest.mark.parametrize("spec", [".0f", ".1f", ".2f", ".3f", ".0e", ".1e", ".2e", ".1g", ".2g", ".3g", ".0%", ".1%"])
def test_printed_bounds_are_on_their_side_and_within_one_unit(spec):
    rng = random.Random(spec)
    values = [rng.uniform(-50, 50) for _ in range(300)] + [10 ** rng.uniform(-8, 6) for _ in range(300)]
    values += [1.15, 2.5, 9.995, 0.0, 1e-4, 34.898, 1.1448, 6.158e-4, 0.0996, 0.99996]
    for value in values:
        upper, lower = at_most(value, spec), at_least(value, spec)
        assert _printed(upper) >= value and _printed(lower) <= value, (value, spec, upper, lower)
        # never further than one unit in the last printed place (twice that where the decade changes)
        slack = 2 * _unit(value, int(spec[1:-1]), spec[-1]) + 1e-12 * abs(value)
        assert _printed(upper) - value <= slack and value - _printed(lower) <= slack, (value, spec, upper, lower)


def test_the_cases_that_rounding_to_nearest_gets_wrong():
    assert (at_most(1.1448, ".2f"), at_least(34.898, ".0f"), at_least(6.158e-4, ".1e")) == ("1.15", "34", "6.1e-04")
    # values that print exactly keep their nearest rounding
    assert (at_most(1.5, ".1f"), at_least(1.5, ".1f"), at_most(2.0, ".0e")) == ("1.5", "1.5", "2e+00")
    assert (at_most(0.2345, ".0%"), at_least(0.2399, ".0%"), at_most(0.0123, ".1g")) == ("24%", "23%", "0.02")


def test_no_negative_zero_and_a_sign_on_request():
    assert (at_most(-0.004, ".2f"), at_most(-1e-5, ".0%"), at_least(-0.0, ".1e")) == ("0.00", "0%", "0.0e+00")
    assert (at_least(3.3e-4, "+.4f"), at_most(-0.0969, "+.3f")) == ("+0.0003", "-0.096")


@pytest.mark.parametrize("value", [None, "1.5", True, [1.0]])
def test_a_bound_that_is_not_a_number_is_refused(value):
    with pytest.raises(FlatbookInputError, match="finite number"):
        at_most(value, ".2f")


@pytest.mark.parametrize("spec", ["g", ".2", "2f", ".2d", "%", "", "-.2f"])
def test_a_spec_other_than_fixed_scientific_general_or_percent_is_refused(spec):
    with pytest.raises(FlatbookInputError, match="fixed, scientific, general or percent"):
        at_most(1.0, spec)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_bound_that_is_not_finite_is_refused(value):
    with pytest.raises(FlatbookInputError, match="finite"):
        at_least(value, ".2f")


def test_an_interval_rounds_its_ends_outward_and_its_centre_to_nearest():
    assert interval(1.143, 1.1412, 1.1448) == "1.14 [1.14, 1.15]"
    assert interval(1.1448, 1.1448, 1.1448, ".1f") == "1.1 [1.1, 1.2]"
    assert interval(0.2345, 0.2301, 0.2399, ".0%") == "23% [23%, 24%]"
    assert interval(-0.0969, -0.0969, 3.3e-4, "+.3f") == "-0.097 [-0.097, +0.001]"
    assert interval(0.0123, 0.0123, 0.0123, ".1g") == "0.01 [0.01, 0.02]"


def test_an_interval_holds_the_computed_one():
    rng = random.Random(7)
    for spec in (".1f", ".2f", ".0%", "+.2f", ".2g", ".3f"):
        for _ in range(200):
            low, high = sorted(rng.uniform(-5, 5) for _ in range(2))
            text = interval((low + high) / 2, low, high, spec)
            printed_low, printed_high = text[text.index("[") + 1 : -1].split(", ")
            assert _printed(printed_low) <= low and _printed(printed_high) >= high, (low, high, spec, text)


def test_an_interval_open_or_undefined_at_an_end_is_printed_as_it_is():
    assert interval(0.5, -math.inf, math.inf) == "0.50 [-inf, inf]"
    assert interval(0.5, 0.25, math.inf, "+.1f") == "+0.5 [+0.2, +inf]"


def test_an_interval_clear_of_zero_never_prints_an_end_as_zero():
    """A non-zero end that the spec would print as 0 gets more digits: '[-0.011, 0.000]' would read as touching 0."""
    assert interval(-0.005, -0.0102, -0.0004, ".3f") == "-0.005 [-0.011, -0.0004]"
    assert interval(0.001, 2e-5, 0.002, ".1%") == "0.1% [0.002%, 0.2%]"
    assert interval(0.0, -1e-9, 1e-9, ".2f") == "0.00 [-0.01, 0.01]"  # rounded outward, away from 0 already
    assert interval(1.0, 1e-9, 2.0, ".2f") == "1.00 [1.0e-09, 2.00]"  # four more digits are not enough
    assert interval(0.0, 0.0, 0.5) == "0.00 [0.00, 0.50]"  # an end that is zero prints as zero


@pytest.mark.parametrize(
    ("centre", "low", "high"), [(math.nan, 0.0, 1.0), (0.5, math.nan, 1.0), (0.5, 1.0, 0.0), (True, 0.0, 1.0)]
)
def test_an_interval_of_nan_non_numbers_or_crossed_ends_is_refused(centre, low, high):
    with pytest.raises(FlatbookInputError, match="interval"):
        interval(centre, low, high)


@pytest.mark.parametrize("spec", ["g", ".2", ".2d", "", "-.2f"])
def test_an_interval_with_a_spec_other_than_fixed_scientific_general_or_percent_is_refused(spec):
    with pytest.raises(FlatbookInputError, match="fixed, scientific, general or percent"):
        interval(1.0, 0.5, math.inf, spec)


def test_grouped_spaces_the_digits_of_an_integer_in_threes():
    assert [grouped(n) for n in (0, 999, 1000, 30_000, 1_234_567)] == ["0", "999", "1 000", "30 000", "1 234 567"]
    with pytest.raises(FlatbookInputError, match="integer"):
        grouped(3.0)


def test_counted_puts_the_noun_in_the_plural_unless_the_count_is_one():
    assert [counted(n, "point") for n in (0, 1, 2, 30_000)] == ["0 points", "1 point", "2 points", "30 000 points"]
    with pytest.raises(FlatbookInputError, match="integer"):
        counted(1.0, "point")
    with pytest.raises(FlatbookInputError, match="not negative"):
        counted(-1, "point")
    with pytest.raises(FlatbookInputError, match="noun"):
        counted(2, "")


def test_a_bracket_rounds_its_ends_outward_and_refuses_crossed_ends():
    assert bracket(1.1412, 1.1448) == "[1.14, 1.15]" and bracket(0.2301, 0.2399, ".0%") == "[23%, 24%]"
    assert bracket(-0.0102, -0.0004, ".3f") == "[-0.011, -0.0004]"
    with pytest.raises(FlatbookInputError, match="low end"):
        bracket(2.0, 1.0)
