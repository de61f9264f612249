"""The tables helper: selections, groups, unique keys, geometric means and the seed-wise slope."""

import math

import numpy as np
import pytest

from flatbook.errors import FlatbookInputError
from flatbook.stats import mean_interval
from flatbook.tables import column, distinct, geomean, group, index, local_slopes, one, slope_across_seeds, where

RUNS = [
    {"activation": "relu", "method": "bad", "rho": 0.0, "n": 40, "seed": 0, "upsilon": 4.0},
    {"activation": "relu", "method": "bad", "rho": 0.5, "n": 40, "seed": 0, "upsilon": 3.0},
    {"activation": "relu", "method": "search", "rho": math.nan, "n": 40, "seed": 0, "upsilon": 1.0},
    {"activation": "quadratic", "method": "bad", "rho": 0.0, "n": 20, "seed": 1, "upsilon": 2.0},
    {"activation": "relu", "method": "bad", "rho": 0.0, "n": 20, "seed": 1, "upsilon": 8.0, "extra": 1},
]


def test_where_selects_by_fields_and_predicate():
    assert where(RUNS, activation="relu", method="bad", rho=0) == [RUNS[0], RUNS[4]]
    assert where(RUNS, lambda r: r["upsilon"] > 2.5, activation="relu") == [RUNS[0], RUNS[1], RUNS[4]]
    assert where(RUNS, rho=math.nan) == []  # NaN equals nothing
    assert where(RUNS, extra=1) == [RUNS[4]]  # rows without the field do not match
    assert where([], activation="relu") == []
    with pytest.raises(FlatbookInputError, match="no row has the field 'activaton'"):
        where(RUNS, activaton="relu")


def test_one_and_index_insist_on_unique_rows():
    assert one(RUNS, activation="quadratic") is RUNS[3]
    with pytest.raises(FlatbookInputError, match="expected one row .* found 4"):
        one(RUNS, activation="relu")
    with pytest.raises(FlatbookInputError, match="found 0"):
        one(RUNS, activation="tanh")
    keyed = index(RUNS[:2], "activation", "rho")
    assert list(keyed) == [("relu", 0.0), ("relu", 0.5)] and keyed[("relu", 0.5)] is RUNS[1]
    assert index(RUNS[2:4], "method") == {"search": RUNS[2], "bad": RUNS[3]}
    with pytest.raises(FlatbookInputError, match="do not identify a row"):
        index(RUNS, "activation")


def test_group_column_distinct():
    groups = group(RUNS, "n")
    assert list(groups) == [40, 20] and groups[20] == [RUNS[3], RUNS[4]]
    assert list(group(RUNS, "n", sort=True)) == [20, 40]
    assert list(group(RUNS, "activation", "seed")) == [("relu", 0), ("quadratic", 1), ("relu", 1)]
    assert column(RUNS[:2], "upsilon") == [4.0, 3.0]
    assert column(RUNS[:2], lambda r: r["upsilon"] / 2) == [2.0, 1.5]
    assert distinct(RUNS, "activation") == ["relu", "quadratic"]
    assert distinct(RUNS, "n", sort=True) == [20, 40]
    with pytest.raises(FlatbookInputError):
        group(RUNS)


def test_geomean():
    assert geomean([1.0, 4.0, 16.0]) == pytest.approx(4.0)
    values = [0.3, 2.0, 7.5]
    assert geomean(values) == float(np.exp(np.mean(np.log(values))))
    for bad in ([], [1.0, 0.0], [-1.0]):
        with pytest.raises(FlatbookInputError, match="positive"):
            geomean(bad)


def test_slope_across_seeds():
    rows = [{"seed": s, "n": n, "v": (1 + s) * n ** (0.5 + 0.1 * s)} for s in range(3) for n in (10, 20, 40)]
    mean, low, high = slope_across_seeds(rows, "n", "v")
    assert mean == pytest.approx(0.6)
    assert (mean, low, high) == pytest.approx(mean_interval([0.5, 0.6, 0.7]))
    assert low < mean < high
    assert slope_across_seeds(rows, "n", lambda r: 2 * r["v"]) == pytest.approx((mean, low, high))


def test_local_slopes_between_consecutive_sizes():
    # y = c_seed · n² up to n = 4, then c_seed · 16 · (n/4): local slopes 2, 2, then 1, whatever the seed.
    rows = [{"seed": s, "n": n, "y": (s + 1) * (n**2 if n <= 4 else 4 * n)} for s in range(3) for n in (1, 2, 4, 8)]
    steps = local_slopes(rows, "n", "y")
    assert [(r["x_from"], r["x_to"]) for r in steps] == [(1, 2), (2, 4), (4, 8)]
    assert [r["slope"] for r in steps] == pytest.approx([2.0, 2.0, 1.0])
    assert all(r["low"] == pytest.approx(r["slope"]) == pytest.approx(r["high"]) for r in steps)
    assert steps[0]["x_mid"] == pytest.approx(2**0.5)
