import pytest

from flatbook.errors import FlatbookInputError
from flatbook.stats import loglog_slope, mean_interval, slope_across_seeds


def test_loglog_slope_recovers_a_power_law():
    assert loglog_slope([1, 2, 4, 8], [3 * n**-0.5 for n in (1, 2, 4, 8)]) == pytest.approx(-0.5)
    with pytest.raises(FlatbookInputError):
        loglog_slope([1, 2], [1, -1])


def test_slope_across_seeds():
    rows = [{"seed": s, "n": n, "v": (1 + s) * n ** (0.5 + 0.1 * s)} for s in range(3) for n in (10, 20, 40)]
    mean, low, high = slope_across_seeds(rows, "n", lambda r: r["v"])
    assert mean == pytest.approx(0.6)
    assert (mean, low, high) == pytest.approx(mean_interval([0.5, 0.6, 0.7]))
    assert low < mean < high
