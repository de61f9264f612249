"""Small statistics for the experiments: log-log slopes and intervals across replicates.

The slope fitted per seed over a table's rows is :func:`flatbook.tables.slope_across_seeds`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .errors import FlatbookInputError

__all__ = ["loglog_slope", "mean_interval"]


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
