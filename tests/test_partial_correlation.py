import numpy as np
import pytest
from scipy import stats

from flatbook.errors import FlatbookInputError
from flatbook.partial_correlation import MIN_POINTS, partial_correlations, partial_spearman
from flatbook.stats import mean_interval


def by_residuals(x, y, z):
    """Pearson's correlation of the ranks of x and y after each is regressed (with an intercept) on the ranks of z:
    the definition, computed by least squares."""
    rx, ry, rz = (stats.rankdata(v) for v in (x, y, z))
    design = np.column_stack([np.ones_like(rz), rz])
    residual = [r - design @ np.linalg.lstsq(design, r, rcond=None)[0] for r in (rx, ry)]
    return float(np.corrcoef(*residual)[0, 1])


def by_precision(x, y, z):
    """The same from the inverse of the rank correlation matrix: −P_xy / √(P_xx P_yy)."""
    precision = np.linalg.inv(np.corrcoef([stats.rankdata(v) for v in (x, y, z)]))
    return float(-precision[0, 1] / np.sqrt(precision[0, 0] * precision[1, 1]))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("size", [MIN_POINTS, 20, 200])
def test_the_closed_form_is_the_regression_and_the_precision_matrix(seed, size):
    gen = np.random.default_rng(seed)
    z = gen.standard_normal(size)
    x = z + gen.standard_normal(size)
    y = np.round(-z + 0.5 * x + gen.standard_normal(size), 1)  # rounding makes ties
    value = partial_spearman(x, y, z)
    assert value == pytest.approx(by_residuals(x, y, z), abs=1e-12)
    assert value == pytest.approx(by_precision(x, y, z), abs=1e-10)


def test_only_the_ranks_enter():
    gen = np.random.default_rng(7)
    x, y, z = gen.standard_normal((3, 30))
    value = partial_spearman(x, y, z)
    assert partial_spearman(np.exp(x), y**3, 5 * z - 2) == pytest.approx(value, abs=1e-12)
    assert partial_spearman(y, x, z) == pytest.approx(value, abs=1e-12)
    assert partial_spearman(-x, y, z) == pytest.approx(-value, abs=1e-12)


def test_a_common_cause_held_fixed_leaves_no_association_and_a_masked_one_appears():
    # x and y depend on z and on independent noise only: plain Spearman near 0.5, partial near 0 (its standard
    # error at 4000 points is about 1/√4000 ≈ 0.016, so 0.08 is five of them; a rank adjustment is not the
    # conditional law, so its population value is small but not exactly 0). Then y = x − 3z: the plain
    # correlation is negative (−1/√10 for the values), but given z, y rises with x.
    gen = np.random.default_rng(0)
    z, e, f = gen.standard_normal((3, 4000))
    x, y = z + e, z + f
    assert stats.spearmanr(x, y).statistic > 0.4
    assert abs(partial_spearman(x, y, z)) < 0.08
    y = x - 3 * z
    assert stats.spearmanr(x, y).statistic < -0.2
    assert partial_spearman(x, y, z) > 0.5


def test_partial_spearman_rejects_bad_input():
    line = np.arange(1.0, MIN_POINTS + 1)
    shuffled = np.random.default_rng(3).permutation(line)
    with pytest.raises(FlatbookInputError, match=f"at least {MIN_POINTS} points"):
        partial_spearman(line[:-1], line[:-1], line[:-1])
    with pytest.raises(FlatbookInputError, match="equally long"):
        partial_spearman(line, line, np.arange(MIN_POINTS + 1.0))
    with pytest.raises(FlatbookInputError, match="constant"):
        partial_spearman(line, np.full(MIN_POINTS, 2.0), shuffled)
    with pytest.raises(FlatbookInputError, match="finite"):
        partial_spearman(line, np.where(line == 3, np.nan, line), shuffled)
    with pytest.raises(FlatbookInputError, match="orders x or y completely"):
        partial_spearman(shuffled, line, 10 * line)


def test_ties_in_the_variable_adjusted_for():
    gen = np.random.default_rng(11)
    z = np.repeat(np.arange(6.0), 5)  # six levels, five points each
    x, y = z + gen.standard_normal(30), z + gen.standard_normal(30)
    assert partial_spearman(x, y, z) == pytest.approx(by_residuals(x, y, z), abs=1e-12)


def rows_of(settings, seeds, size, seed=0):
    gen = np.random.default_rng(seed)
    rows = []
    for setting in settings:
        for s in range(seeds):
            z = gen.standard_normal(size)
            for a, b, c in zip(z + gen.standard_normal(size), -z + gen.standard_normal(size), z, strict=True):
                rows.append({"setting": setting, "seed": s, "a": float(a), "b": float(b), "c": float(c)})
    return rows


def test_partial_correlations_are_the_per_seed_values_averaged_with_bonferroni_intervals():
    rows = rows_of(["one", "two", "three"], seeds=6, size=12)
    rows += [{"setting": "one", "seed": 99, "a": 1.0, "b": 2.0, "c": 3.0}]  # a seed of one row: no correlation
    out = partial_correlations(rows, "a", "b", "c", key="setting")
    assert [r["setting"] for r in out] == ["one", "two", "three"]
    for r in out:
        mine = [row for row in rows if row["setting"] == r["setting"] and row["seed"] != 99]
        per_seed = [[row for row in mine if row["seed"] == s] for s in range(6)]
        partial = [by_residuals(*([row[f] for row in seed_rows] for f in "abc")) for seed_rows in per_seed]
        plain = [stats.spearmanr([row["a"] for row in q], [row["b"] for row in q]).statistic for q in per_seed]
        assert r["seeds_used"] == 6 and r["level"] == pytest.approx(1 - 0.05 / 3)
        for name, values in (("partial", partial), ("spearman", plain)):
            mean, low, high = mean_interval(values, 1 - 0.05 / 3)
            assert r[name] == pytest.approx(mean, abs=1e-12)
            assert r[f"{name}_low"] == pytest.approx(max(low, -1.0), abs=1e-12)
            assert r[f"{name}_high"] == pytest.approx(min(high, 1.0), abs=1e-12)


def test_partial_correlations_reject_bad_input():
    rows = rows_of(["one"], seeds=3, size=10)
    with pytest.raises(FlatbookInputError, match=r"fields \['d'\]"):
        partial_correlations(rows, "a", "d", "c", key="setting")
    few = [row for row in rows if row["seed"] == 0] + [row for row in rows if row["seed"] == 1][: MIN_POINTS - 1]
    with pytest.raises(FlatbookInputError, match="has 1 seed"):
        partial_correlations(few, "a", "b", "c", key="setting")
    rows[3]["b"] = float("nan")  # a NaN is an error, not a seed silently left out
    with pytest.raises(FlatbookInputError, match="finite in every row"):
        partial_correlations(rows, "a", "b", "c", key="setting")


def test_a_seed_where_the_partial_correlation_is_undefined_is_left_out_and_counted():
    rows = rows_of(["one"], seeds=4, size=10)
    for row in rows:
        if row["seed"] == 2:
            row["c"] = row["a"]  # c orders a completely on this seed
    (out,) = partial_correlations(rows, "a", "b", "c", key="setting")
    kept = partial_correlations([row for row in rows if row["seed"] != 2], "a", "b", "c", key="setting")[0]
    assert out["seeds_used"] == 3 and out["seeds_left_out"] == 1 and out["points_min"] == 10
    assert out["partial"] == kept["partial"] and out["spearman"] == kept["spearman"]
