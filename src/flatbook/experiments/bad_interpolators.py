"""Chapter 3: misaligned interpolators stay sharper than the flattest, by a factor growing with n.

For each activation, sample size n on a geometric grid and seed: a
single-index teacher with that link, then

- the best flatness found for the data, Υ_best: the minimum over a dictionary
  of random directions plus the teacher direction, a direct search started
  from random directions (:mod:`flatbook.search`), and the bad interpolators
  below (so Υ_bad / Υ_best ≥ 1 by construction);
- the flattest *bad* interpolator found: flattest outer weights (then the
  optimal rescaling) for m directions all with alignment exactly ρ to the
  teacher, for each ρ in ``bad_alignments`` (ρ = 0: orthogonal to the
  teacher), improved by a direct search that keeps every direction at
  alignment ρ; the smaller Υ of the two counts.

Every method runs at every n, so the slopes compare like with like.

Tables: ``runs`` (one row per activation, n, seed and method, with Υ and the
population loss), ``slopes`` (the log-log slope of Υ_bad/Υ_best against n per
activation and ρ, mean and 95 % interval across seeds, beside c/(c+1)).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import get_activation
from ..data import single_index
from ..interpolators import (
    alignment_projector,
    directions_with_alignment,
    random_directions,
)
from ..search import dictionary_search, direct_search, interpolator_report
from ..tables import slope_across_seeds, where
from .runner import map_points

__all__ = ["CHAPTER", "VERSION", "Config", "CONFIGS", "run", "slopes", "gap"]

#: the chapter that shows this experiment's figures
CHAPTER = "book/03-bad-interpolators.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 1


@dataclass(frozen=True)
class Config:
    activations: tuple = ("relu", "leaky_relu", "quadratic")
    d: int = 40
    n_grid: tuple = (40, 80, 160, 320)
    seeds: int = 3
    width_factor: int = 2
    noise_std: float = 0.0
    bad_alignments: tuple = (0.0, 0.5)
    search_steps: int = 6
    n_test: int = 20_000
    seed: int = 0
    #: the quadratic again at a smaller d, to compare regimes n / (d(d-1)/2)
    regime_d: int = 20
    regime_n_grid: tuple = (20, 40, 80, 160)
    #: the ReLU again with label noise
    noise_sweep_std: float = 0.1


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(
        activations=("relu", "quadratic"),
        d=12,
        n_grid=(20, 40),
        seeds=2,
        search_steps=2,
        n_test=2_000,
        regime_d=10,
        regime_n_grid=(10, 20),
    ),
    "book": Config(),
    "paper": Config(
        d=100,
        n_grid=(100, 200, 400, 800, 1600, 3200),
        seeds=5,
        search_steps=20,
        n_test=200_000,
        regime_d=50,
        regime_n_grid=(100, 200, 400, 800),
    ),
}


def _point(config, name, n, seed):
    """All interpolators for one (activation, n, seed)."""
    activation = get_activation(name)
    teacher = single_index(config.d, link=name, noise_std=config.noise_std, seed=seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    m = config.width_factor * n
    start = random_directions(m, config.d, seed=seed + 1)
    searches = [
        dictionary_search(X, y, activation, m - 1, seed=seed + 1, extra_directions=teacher.theta_star),
        direct_search(X, y, activation, start, steps=config.search_steps),
    ]
    rows = [
        {
            "method": search.method,
            "rho": float("nan"),
            **interpolator_report(search.solution, X, y, teacher, n_test=config.n_test),
        }
        for search in searches
    ]
    for rho in config.bad_alignments:
        bad_start = directions_with_alignment(teacher.theta_star, m, rho, seed=seed + 2)
        bad = direct_search(
            X,
            y,
            activation,
            bad_start,
            steps=config.search_steps,
            constraint=alignment_projector(teacher.theta_star, rho),
        )
        rows.append(
            {
                "method": "bad",
                "rho": rho,
                "bad_dictionary_upsilon": bad.history[0],
                **interpolator_report(bad.solution, X, y, teacher, n_test=config.n_test),
            }
        )
    best = min(r["upsilon"] for r in rows)  # the flattest interpolator found, whatever its alignment
    bad_dimension = (config.d - 1) * config.d // 2  # quadratic forms on the complement of θ*
    return [
        {
            "activation": name,
            "c": activation.degree,
            "d": config.d,
            "n": n,
            "m": m,
            "seed": seed,
            "noise_std": config.noise_std,
            "best_upsilon": best,
            "bad_dimension": bad_dimension,
            **row,
        }
        for row in rows
    ]


def _sweep(config: Config, jobs, backend, label) -> list[dict]:
    points = [
        {"name": name, "n": n, "seed": config.seed + 100 * s}
        for name in config.activations
        for n in config.n_grid
        for s in range(config.seeds)
    ]
    results = map_points(
        _point, config, points, experiment="bad_interpolators", version=VERSION, jobs=jobs, backend=backend, desc=label
    )
    return [row for rows in results for row in rows]


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """The main sweep and its slopes; the quadratic at a second d; the ReLU with label noise."""
    runs = _sweep(config, jobs, backend, "bad interpolators")
    regime_config = replace(
        config, activations=("quadratic",), d=config.regime_d, n_grid=config.regime_n_grid, bad_alignments=(0.0,)
    )
    noise_config = replace(config, activations=("relu",), noise_std=config.noise_sweep_std, bad_alignments=(0.0,))
    noise_runs = _sweep(noise_config, jobs, backend, "with label noise")
    return {
        "runs": runs,
        "slopes": slopes(runs, config),
        "regime": _sweep(regime_config, jobs, backend, "quadratic regime"),
        "noise": noise_runs,
        "noise_slopes": slopes(noise_runs, noise_config),
    }


def slopes(runs: list[dict], config: Config) -> list[dict]:
    """Per activation and ρ: slope of log(Υ_bad/Υ_best) on log n for each seed, then mean ± interval."""
    rows = []
    for name in config.activations:
        c = get_activation(name).degree
        for rho in config.bad_alignments:
            sel = where(runs, activation=name, method="bad", rho=rho)
            mean, low, high = slope_across_seeds(sel, "n", gap)
            rows.append(
                {"activation": name, "rho": rho, "slope": mean, "low": low, "high": high, "theory": c / (c + 1)}
            )
    return rows


def gap(row: dict) -> float:
    """Υ / Υ_best of a row of ``runs``: how much sharper than the flattest found (≥ 1)."""
    return row["upsilon"] / row["best_upsilon"]
