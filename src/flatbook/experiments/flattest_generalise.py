"""Chapter 4: the flattest interpolators generalise, when approximation error and noise are low.

A sum-of-single-index teacher; for each n on a geometric grid and each seed,
the flattest interpolator found (minimum Υ over a dictionary of random
directions plus the teacher directions, and a direct search from random
directions; :mod:`flatbook.search`).  The noise variance follows
τ²(n) = τ₀² (n / n₀)^{−ε₂}, our reading of the theorem's noise exponent, with n₀
the smallest n.  Conditions:

- ``vanishing noise`` (ε₂ = 1) and ``slowly vanishing noise`` (ε₂ = 1/4): the
  theorem predicts F − F* ≲ n^{−min(1/2, ε₂)};
- ``fixed noise`` (ε₂ = 0): the noise is not low;
- ``multi-index``: vanishing noise but a link that is not a sum of ridge
  functions, so the approximation error is not low.

Tables: ``runs`` (one row per condition, n, seed and method) and ``rates``
(log-log slope of the excess loss of the flattest found against n, per
condition, mean and 95 % interval across seeds), and ``balancedness`` (the
largest effective weight of the flattest found against the width m).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import get_activation
from ..data import multi_index_product, sum_of_single_index
from ..interpolators import random_directions
from ..search import dictionary_search, direct_search, interpolator_report
from ..tables import slope_across_seeds, where
from .runner import map_points

__all__ = ["CHAPTER", "VERSION", "Config", "CONFIGS", "predicted_rate", "teacher_for", "run", "floored_excess"]

#: the chapter that shows this experiment's figures
CHAPTER = "book/04-flattest-generalise.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 1


@dataclass(frozen=True)
class Config:
    activation: str = "relu"
    d: int = 10
    k: int = 2
    n_grid: tuple = (50, 100, 200, 400)
    seeds: int = 3
    width_factor: int = 2
    noise_std0: float = 0.3
    search_steps: int = 6
    n_test: int = 50_000
    seed: int = 0


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(d=6, n_grid=(20, 40), seeds=2, search_steps=2, n_test=5_000),
    "book": Config(),
    "paper": Config(d=20, n_grid=(100, 200, 400, 800, 1600, 3200), seeds=5, search_steps=20, n_test=500_000),
}

#: condition → (noise exponent ε₂, teacher kind)
CONDITIONS = {
    "vanishing noise": (1.0, "ridges"),
    "slowly vanishing noise": (0.25, "ridges"),
    "fixed noise": (0.0, "ridges"),
    "multi-index": (1.0, "product"),
}


def predicted_rate(condition: str) -> float:
    """The theorem's exponent −min(1/2, ε₂) where its conditions hold, else 0 (no decay promised)."""
    eps2, kind = CONDITIONS[condition]
    return -min(0.5, eps2) if kind == "ridges" else 0.0


def teacher_for(condition: str, config: Config, n: int, seed: int):
    """The teacher of a condition at sample size n (the noise level depends on n)."""
    eps2, kind = CONDITIONS[condition]
    noise = config.noise_std0 * (n / config.n_grid[0]) ** (-eps2 / 2)
    if kind == "product":
        return multi_index_product(config.d, k=config.k + 1, noise_std=noise, seed=seed)
    return sum_of_single_index(config.d, config.k, link=config.activation, noise_std=noise, seed=seed)


def _point(config, condition, n, seed):
    activation = get_activation(config.activation)
    teacher = teacher_for(condition, config, n, seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    m = config.width_factor * n
    searches = [
        dictionary_search(X, y, activation, m - teacher.k, seed=seed + 1, extra_directions=teacher.theta_star),
        direct_search(X, y, activation, random_directions(m, config.d, seed=seed + 1), steps=config.search_steps),
    ]
    rows = [
        {
            "method": s.method,
            **interpolator_report(s.solution, X, y, teacher, n_test=config.n_test),
            "max_effective_weight": float(s.solution.effective_a.abs().max()),
            "l1_effective_weight": float(s.solution.effective_a.abs().sum()),
        }
        for s in searches
    ]
    best = min(r["upsilon"] for r in rows)
    return [
        {
            "condition": condition,
            "n": n,
            "m": m,
            "seed": seed,
            "noise_variance": teacher.bayes_risk,
            "flattest": r["upsilon"] == best,
            **r,
        }
        for r in rows
    ]


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """Every condition, n and seed; then the rates of the excess loss of the flattest found."""
    points = [
        {"condition": condition, "n": n, "seed": config.seed + 100 * s}
        for condition in CONDITIONS
        for n in config.n_grid
        for s in range(config.seeds)
    ]
    results = map_points(
        _point, config, points, experiment="flattest_generalise", version=VERSION, jobs=jobs, backend=backend
    )
    runs = [row for rows in results for row in rows]
    rates = []
    for condition in CONDITIONS:
        sel = where(runs, condition=condition, flattest=True)
        mean, low, high = slope_across_seeds(sel, "n", floored_excess)
        rates.append(
            {"condition": condition, "rate": mean, "low": low, "high": high, "theory": predicted_rate(condition)}
        )
    balance = where(runs, condition="vanishing noise", flattest=True)
    mean, low, high = slope_across_seeds(balance, "m", "max_effective_weight")
    return {"runs": runs, "rates": rates, "balancedness": [{"slope": mean, "low": low, "high": high, "theory": -1.0}]}


def floored_excess(row: dict) -> float:
    """The excess loss F − F* of a row, floored at 1e-12 so that its logarithm exists (a Monte Carlo
    estimate of it can come out at or below zero)."""
    return max(row["excess_loss"], 1e-12)
