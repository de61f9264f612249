"""Chapter 2: the flattest outer weights for fixed directions, the dual certificate, and what it implies.

For each activation: a single-index teacher with that link, m random unit
directions, and the solution of the convex program (book eq. ``eq-primal``).
Tables:

- ``solutions``: Υ*, the dual bound g(λ), gap, residual, support size, κ
  statistics against the population value (eq. ``eq-kappa-population``), and
  Υ / ‖ã‖_p^p (the ℓ_p lower bound of section ``sec-lp-bound``);
- ``others``: Υ of ``n_other`` random interpolators with the same directions,
  at distances from the optimum spread log-uniformly over three decades;
- ``weights``: |ã_j| of the solution, sorted;
- ``balancedness``: for each width m, the flattest interpolator over m random directions
  (an upper bound on Υ*(m)) beside the best interpolator of that width found over all directions
  (:func:`~flatbook.global_flattest.flattest_interpolator`, one measure split for every width), with
  their Υ, the proven lower bound, max_j |ã_j| and the number of distinct directions;
- ``splitting``: the quadratic teacher direction repeated k times in a dictionary, and Υ
  of the flattest interpolator over it (eq. ``eq-splitting`` predicts a fall by k^{p−1}).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import flattest_interpolator, flattest_outer_weights, get_activation
from ..data import single_index
from ..flatness import flatness_weights, orbit_flatness, population_flatness_weight
from ..flattest import other_interpolators
from ..interpolators import random_directions
from .runner import map_points

__all__ = ["CHAPTER", "VERSION", "Config", "CONFIGS", "run"]

#: the chapter that shows this experiment's figures
CHAPTER = "book/02-convex-dual-bound.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 1


@dataclass(frozen=True)
class Config:
    d: int = 20
    n: int = 100
    m: int = 400
    noise_std: float = 0.1
    n_other: int = 2_000
    spread_min: float = 1e-3
    spread_max: float = 1.0
    widths: tuple = (200, 400, 800, 1600, 3200, 6400)
    activations: tuple = ("relu", "quadratic")
    global_rounds: int = 40
    split_d: int = 15
    split_n: int = 60
    split_random: int = 119
    split_copies: tuple = (1, 4, 16, 64)
    seed: int = 0


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(
        d=8,
        n=20,
        m=60,
        n_other=200,
        widths=(40, 80, 160),
        global_rounds=5,
        split_d=6,
        split_n=12,
        split_random=20,
        split_copies=(1, 4),
    ),
    "book": Config(),
    "paper": Config(
        d=50,
        n=1000,
        m=4000,
        n_other=10_000,
        widths=(2000, 4000, 8000, 16000, 32000, 64000),
        global_rounds=60,
        split_d=30,
        split_n=240,
        split_random=479,
        split_copies=(1, 4, 16, 64, 256),
    ),
}


def _solve(activation, teacher, X, y, m, seed):
    return flattest_outer_weights(random_directions(m, teacher.d, seed=seed), X, y, activation)


def _activation_point(config: Config, name: str, index: int) -> dict:
    """Primal, dual, other interpolators and the width sweep for one activation."""
    activation = get_activation(name)
    seed = config.seed + 10 * index
    teacher = single_index(config.d, link=name, noise_std=config.noise_std, seed=seed)
    X, y = teacher.sample(config.n, seed=seed + 1)
    result = _solve(activation, teacher, X, y, config.m, seed + 2)
    lp_norm = float((result.effective_a.abs() ** result.p).sum())
    shares = torch.sort(result.kappa * result.effective_a.abs() ** result.p, descending=True).values
    # the fewest neurons that carry 90 % of Υ: a count of the neurons that matter, free of a zero threshold
    carriers = int(torch.searchsorted(torch.cumsum(shares, 0), 0.9 * float(shares.sum()))) + 1
    solution = {
        "activation": name,
        "p": result.p,
        "n": config.n,
        "m": config.m,
        "d": config.d,
        "upsilon": result.flatness,
        "lower_bound": result.lower_bound,
        "duality_gap": result.duality_gap,
        "residual": result.residual,
        "support": result.support_size,
        "carriers_90": carriers,
        "condition_number": result.condition_number,
        "kappa_min": float(result.kappa.min()),
        "kappa_max": float(result.kappa.max()),
        "kappa_mean": float(result.kappa.mean()),
        "kappa_population": population_flatness_weight(activation, config.d),
        "lp_norm_p": lp_norm,
        "upsilon_over_lp": result.flatness / lp_norm,
    }
    spreads = np.geomspace(config.spread_min, config.spread_max, config.n_other)
    sampled = other_interpolators(result, X, config.n_other, spread=spreads, seed=seed + 3)
    upsilons = orbit_flatness(sampled, result.kappa, result.p)
    ordered = result.effective_a.abs().sort(descending=True).values
    flattest = flattest_interpolator(X, y, activation, max(config.widths), rounds=config.global_rounds, seed=seed + 4)
    balancedness = []
    for m in config.widths:
        wide = _solve(activation, teacher, X, y, m, seed + 5)
        best = flattest.at_width(X, y, m)
        balancedness.append(
            {
                "activation": name,
                "m": m,
                "p": result.p,
                "upsilon": wide.flatness,
                "lower_bound": wide.lower_bound,  # proven: below Υ of every interpolator over the m directions
                "max_effective_weight": float(wide.effective_a.abs().max()),
                "support": wide.support_size,
                "global_upper": best.upper,
                "global_lower": best.lower,
                "global_lower_estimate": best.lower_estimate,
                "global_certified": best.certified,
                "global_pricing": best.pricing,
                "global_stop": flattest.stop.value,  # why the one column generation behind every width stopped
                "global_max_effective_weight": float(best.net.effective_outer_weights().abs().max()),
                # max_j κ_j^{1/p}|ã_j|: the split's per-copy share of V, within [V/m, (3/2)V/(m − K)]
                "global_max_weighted_effective_weight": float(
                    (
                        flatness_weights(best.net.theta, X, activation) ** (1.0 / activation.p)
                        * best.net.effective_outer_weights().abs()
                    ).max()
                ),
                "global_atoms": best.atoms.directions.shape[0],
                "global_measure_value": best.measure_value,
                "global_vertex_upsilon": flattest.at_width(X, y, best.atoms.directions.shape[0]).upper,
            }
        )
    return {
        "solutions": [solution],
        "others": [{"activation": name, "upsilon": float(u)} for u in upsilons],
        "weights": [
            {"activation": name, "rank": r + 1, "abs_effective_weight": float(w)} for r, w in enumerate(ordered)
        ],
        "balancedness": balancedness,
    }


def _splitting_point(config: Config, copies: int) -> dict:
    """Quadratic, y = (θ*·x)²: θ* repeated ``copies`` times plus random directions, flattest weights."""
    seed = config.seed + 100
    teacher = single_index(config.split_d, link="quadratic", seed=seed)
    X, y = teacher.sample(config.split_n, seed=seed + 1)
    dictionary = torch.cat(
        [teacher.theta_star.expand(copies, -1), random_directions(config.split_random, config.split_d, seed=seed + 2)]
    )
    result = flattest_outer_weights(dictionary, X, y, "quadratic")
    return {
        "splitting": [
            {
                "copies": copies,
                "upsilon": result.flatness,
                "p": result.p,
                "teacher_weight": float(result.effective_a[:copies].sum()),
            }
        ]
    }


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """Solve the primal and dual, sample other interpolators, sweep the width, per activation."""
    points = [{"name": name, "index": i} for i, name in enumerate(config.activations)]
    results = map_points(
        _activation_point, config, points, experiment="convex_dual", version=VERSION, jobs=jobs, backend=backend
    )
    tables = {
        key: [row for result in results for row in result[key]]
        for key in ("solutions", "others", "weights", "balancedness")
    }
    splits = map_points(
        _splitting_point,
        config,
        [{"copies": k} for k in config.split_copies],
        experiment="convex_dual",
        version=VERSION,
        jobs=jobs,
        backend=backend,
    )
    tables["splitting"] = [row for result in splits for row in result["splitting"]]
    return tables
