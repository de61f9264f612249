import math

import numpy as np
import pytest

from flatbook.errors import FlatbookInputError
from flatbook.stats import loglog_slope, spearman_interval


def test_loglog_slope_recovers_a_power_law():
    assert loglog_slope([1, 2, 4, 8], [3 * n**-0.5 for n in (1, 2, 4, 8)]) == pytest.approx(-0.5)
    with pytest.raises(FlatbookInputError):
        loglog_slope([1, 2], [1, -1])


def test_spearman_interval_covers_the_population_correlation():
    # Bivariate normal with correlation r: Spearman's population rho is (6/π) arcsin(r/2); the 95 % interval
    # from 60 pairs covers it in about 95 % of 400 replicates (binomial: at least 90 % with overwhelming probability).
    r = 0.6
    target = 6 / math.pi * math.asin(r / 2)
    gen = np.random.default_rng(0)
    covered = 0
    for _ in range(400):
        z = gen.multivariate_normal([0, 0], [[1, r], [r, 1]], size=60)
        rho, low, high = spearman_interval(z[:, 0], z[:, 1])
        assert low <= rho <= high
        covered += low <= target <= high
    assert covered >= 360, covered


def test_spearman_interval_rejects_bad_input():
    with pytest.raises(FlatbookInputError, match="at least 4 pairs"):
        spearman_interval([1, 2, 3], [1, 2, 3])
    with pytest.raises(FlatbookInputError, match="constant"):
        spearman_interval([1, 1, 1, 1], [1, 2, 3, 4])
    assert spearman_interval([1, 2, 3, 4], [2, 4, 6, 8]) == (1.0, 1.0, 1.0)
