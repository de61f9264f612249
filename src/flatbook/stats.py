"""Small statistics for the experiments: log-log slopes and intervals across replicates.

The slope fitted per seed over a table's rows is :func:`flatbook.tables.slope_across_seeds`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .errors import FlatbookInputError

__all__ = ["loglog_slope", "mean_interval", "spearman_interval"]


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.size < 2 or (x <= 0).any() or (y <= 0).any():
        raise FlatbookInputError("loglog_slope needs at least two positive (x, y) pairs of equal length.")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def mean_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval (mean, low, high) of independent replicates."""
    values = np.asarray(values, dtype=float)
    if values.size < 2:
        raise FlatbookInputError("an interval needs at least two replicates (seeds).")
    mean = float(values.mean())
    half = float(stats.t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return mean, mean - half, mean + half


def spearman_interval(x, y, level: float = 0.95) -> tuple[float, float, float]:
    """Spearman's rank correlation with a Fisher-z interval (rho, low, high).

    z = artanh(rho) is taken as normal with standard error √(1.06/(n − 3)) (Fieller, Hartley and
    Pearson 1957), the usual large-sample interval for Spearman's rho; it needs n ≥ 4 pairs.  A rho of
    ±1 gives the degenerate interval (rho, rho).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 4:
        raise FlatbookInputError("spearman_interval needs two equally long 1-d samples of at least 4 pairs.")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        raise FlatbookInputError("a rank correlation needs both samples to vary (one of them is constant).")
    rho = float(stats.spearmanr(x, y).statistic)
    if abs(rho) == 1.0:
        return rho, rho, rho
    half = float(stats.norm.ppf(0.5 + level / 2)) * math.sqrt(1.06 / (x.size - 3))
    z = math.atanh(rho)
    return rho, math.tanh(z - half), math.tanh(z + half)
