"""Partial rank correlation: how two quantities move together beyond what a third explains.

Spearman's partial correlation of x and y given z is Pearson's correlation of the ranks of x and y after each
has been regressed linearly on the ranks of z; from the three pairwise rank correlations,

    ρ_{xy·z} = (ρ_xy − ρ_xz ρ_yz) / √((1 − ρ_xz²)(1 − ρ_yz²))                 (eq-partial-spearman)

(ties take their average rank, and ρ is Pearson's correlation of those ranks, as ``scipy.stats.spearmanr``
computes it).  It measures an association, not a cause, and it adjusts by a straight line in z's ranks only: it
is not a test of conditional independence (with x and y independent given z its population value is near 0,
not 0), and where z nearly determines x or y the denominator is small and the value unstable.  Only the ranks
enter, so any increasing transformation of x, y or z leaves it unchanged.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .errors import FlatbookInputError
from .stats import mean_interval
from .tables import column, group

__all__ = ["MIN_POINTS", "partial_correlations", "partial_spearman"]

MIN_POINTS = 8
"""The fewest points a partial correlation is taken over.  Once the mean and a line in z are removed the residuals
of n points span n − 2 dimensions (three points force ±1); eight leave six, a convention, so that one seed's value
is not mostly the noise of a handful of points."""

DEGENERATE = 1e-12
"""1 − ρ² at or below which z is taken to order x or y completely (the partial correlation is undefined)."""


def _partial(x, y, z) -> float | None:
    """eq-partial-spearman from the Pearson correlations of the average ranks, or None where it is undefined (z
    orders x or y completely); the samples must vary."""
    ranks = np.corrcoef([stats.rankdata(v) for v in (x, y, z)])
    r_xy, r_xz, r_yz = ranks[0, 1], ranks[0, 2], ranks[1, 2]
    left = (1.0 - r_xz**2) * (1.0 - r_yz**2)
    if left <= DEGENERATE:
        return None
    return float(np.clip((r_xy - r_xz * r_yz) / math.sqrt(left), -1.0, 1.0))


def _varies(*samples) -> bool:
    return min(np.ptp(v) for v in samples) > 0


def partial_spearman(x, y, z) -> float:
    """Spearman's partial correlation of ``x`` and ``y`` given ``z`` (eq-partial-spearman), over at least
    :data:`MIN_POINTS` points."""
    x, y, z = (np.asarray(v, dtype=float) for v in (x, y, z))
    if not (x.ndim == 1 and x.shape == y.shape == z.shape) or x.size < MIN_POINTS:
        raise FlatbookInputError(
            f"partial_spearman needs three equally long 1-d samples of at least {MIN_POINTS} points; "
            f"got shapes {x.shape}, {y.shape} and {z.shape}."
        )
    if not all(np.isfinite(v).all() for v in (x, y, z)):
        raise FlatbookInputError("partial_spearman needs finite values; leave out the points that have none.")
    if not _varies(x, y, z):
        raise FlatbookInputError("a partial rank correlation needs all three samples to vary (one is constant).")
    value = _partial(x, y, z)
    if value is None:
        raise FlatbookInputError(
            "z orders x or y completely (a rank correlation of ±1): once z is adjusted for, nothing of it is left "
            "to correlate."
        )
    return value


def partial_correlations(rows: list[dict], x: str, y: str, given: str, key: str, level: float = 0.95) -> list[dict]:
    """Per value of ``key``: the mean over seeds of the per-seed partial Spearman correlation of fields ``x`` and
    ``y`` given ``given`` (eq-partial-spearman, over that seed's rows), beside the mean plain Spearman correlation
    over the same seeds, each with a Student-t interval over the seeds, clipped to [−1, 1].  The estimand is the
    mean per-seed correlation on the rows given (not a pooled one).

    The intervals hold together at ``level`` within each quantity: each is drawn at 1 − (1 − level)/k for the k
    values of ``key`` (Bonferroni).  A seed with fewer than :data:`MIN_POINTS` rows, or on which the partial
    correlation is undefined (a constant field, or ``given`` ordering ``x`` or ``y`` completely), is left out and
    counted (``seeds_left_out``); ``points_min`` is the fewest rows of a seed kept.  A value of ``key`` with fewer
    than two seeds kept raises.  ``rows`` are the points to correlate (leave out those without values first)."""
    missing = sorted({field for row in rows for field in (x, y, given, key, "seed") if field not in row})
    if missing:
        raise FlatbookInputError(f"every row needs the fields {missing}; leave out the rows that lack them.")
    if not all(math.isfinite(float(row[field])) for row in rows for field in (x, y, given)):
        raise FlatbookInputError(f"{x}, {y} and {given} must be finite in every row; leave out the rows that are not.")
    groups = group(rows, key)
    each = 1.0 - (1.0 - level) / max(len(groups), 1)
    out = []
    for value, members in groups.items():
        partial, plain, sizes = [], [], []
        seeds = group(members, "seed")
        for seed_rows in seeds.values():
            xs, ys, zs = (np.asarray(column(seed_rows, field), dtype=float) for field in (x, y, given))
            seed_partial = _partial(xs, ys, zs) if len(seed_rows) >= MIN_POINTS and _varies(xs, ys, zs) else None
            if seed_partial is not None:
                partial.append(seed_partial)
                plain.append(float(stats.spearmanr(xs, ys).statistic))
                sizes.append(len(seed_rows))
        if len(partial) < 2:
            raise FlatbookInputError(
                f"{key} = {value!r} has {len(partial)} seed(s) with at least {MIN_POINTS} rows and a defined partial "
                "correlation; an interval over seeds needs two."
            )
        row: dict = {
            key: value,
            "seeds_used": len(partial),
            "seeds_left_out": len(seeds) - len(partial),
            "points_min": min(sizes),
            "level": each,
        }
        for name, values in (("partial", partial), ("spearman", plain)):
            mean, low, high = mean_interval(values, each)
            row |= {name: mean, f"{name}_low": max(low, -1.0), f"{name}_high": min(high, 1.0)}
        out.append(row)
    return out
