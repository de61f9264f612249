"""Chapter 5: the paper's experiments (flatness against population loss at controlled alignment), extended.

For each *setting* (teacher, link, activation) and seed: n samples, and for
every target alignment ρ* on a grid, m inner directions with alignment exactly
ρ* to the teacher span, their flattest outer weights (book eq. ``eq-primal``),
Υ and the population loss.  These are *fixed-direction* optima, as in the paper: Υ of each is an
upper bound on the flattest interpolator's Υ*(m), never Υ* itself.  For the settings in
``reference_settings``, the flattest interpolator over all directions
(:func:`flatbook.global_flattest.flattest_interpolator`) of the same data and width is the reference,
with its proven lower bound.  Per setting and seed, the Spearman rank
correlation between Υ and the population loss across the grid; then its mean
and 95 % interval across seeds.  Beyond the paper: the same correlation as the
label noise grows, and as the width ratio m/n grows.

Tables: ``points`` (one row per setting, seed and ρ*), ``correlations`` (per
setting), ``noise`` and ``width`` (correlations along the two sweeps), ``references`` (the flattest
interpolator per reference setting and seed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from scipy.stats import spearmanr

from .. import flattest_outer_weights, get_activation
from ..data import multi_index_product, population_loss, single_index, sum_of_single_index
from ..errors import FlatbookInputError, InfeasibleInterpolationError
from ..global_flattest import flattest_interpolator
from ..interpolators import directions_with_alignment
from ..network import TwoLayerNet
from ..search import flattest_interpolator_report, interpolator_report
from ..stats import mean_interval
from ..tables import column, geomean, group, where
from .runner import map_points

__all__ = [
    "CHAPTER",
    "VERSION",
    "Config",
    "CONFIGS",
    "teacher_for",
    "correlations",
    "correlation_differences",
    "per_seed_correlations",
    "run",
]

#: the chapter that shows this experiment's figures
CHAPTER = "book/05-experiments.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 2

#: setting name → (teacher kind, link, network activation)
SETTINGS = {
    "single-index, ReLU": ("single", "relu", "relu"),
    "single-index, LeakyReLU": ("single", "relu", "leaky_relu"),
    "single-index, quadratic": ("single", "quadratic", "quadratic"),
    "sum of single-index, ReLU": ("sum", "relu", "relu"),
    "sum of single-index, LeakyReLU": ("sum", "relu", "leaky_relu"),
    "sum of single-index, quadratic": ("sum", "quadratic", "quadratic"),
    "mismatched: quadratic link, ReLU net": ("sum", "quadratic", "relu"),
    "multi-index product, ReLU net": ("product", None, "relu"),
}


@dataclass(frozen=True)
class Config:
    settings: tuple = tuple(SETTINGS)
    d: int = 20
    k: int = 2
    n: int = 100
    width_ratio: float = 2.0
    noise_std: float = 0.1
    #: ρ* = 1 is left out: with k = 1 every direction would be ±θ*, and Φ would have rank 2.
    rhos: tuple = tuple(float(rho) for rho in np.round(np.linspace(0.0, 0.95, 16), 4))
    seeds: int = 5
    n_test: int = 10_000
    noise_sweep: tuple = (0.0, 0.3, 1.0)
    width_sweep: tuple = (1.5, 4.0, 8.0)
    sweep_setting: str = "sum of single-index, ReLU"
    reference_settings: tuple = ("sum of single-index, ReLU", "multi-index product, ReLU net")
    flattest_tol: float = 1e-2
    flattest_rounds: int = 40
    seed: int = 0


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(
        settings=("single-index, ReLU", "sum of single-index, quadratic"),
        d=8,
        n=20,
        rhos=(0.0, 0.3, 0.6, 0.9),
        seeds=2,
        n_test=2_000,
        noise_sweep=(0.0, 1.0),
        width_sweep=(4.0,),
        reference_settings=("sum of single-index, quadratic",),
        flattest_rounds=8,
    ),
    "book": Config(),
    "paper": Config(
        d=50,
        n=1000,
        rhos=tuple(float(rho) for rho in np.round(np.linspace(0, 0.95, 20), 3)),
        seeds=10,
        n_test=200_000,
        noise_sweep=(0.0, 0.1, 0.3, 0.5, 1.0),
        width_sweep=(1.5, 2.0, 4.0, 8.0, 16.0),
    ),
}


def teacher_for(setting: str, config: Config, seed: int):
    kind, link, _ = SETTINGS[setting]
    if kind == "single":
        return single_index(config.d, link=link, noise_std=config.noise_std, seed=seed)
    if kind == "sum":
        return sum_of_single_index(config.d, config.k, link=link, noise_std=config.noise_std, seed=seed)
    return multi_index_product(config.d, k=config.k + 1, noise_std=config.noise_std, seed=seed)


def _reference(config: Config, setting: str, seed: int) -> list[dict]:
    """The flattest interpolator of the setting's data over all directions, width m, with its bounds."""
    activation = get_activation(SETTINGS[setting][2])
    teacher = teacher_for(setting, config, seed)
    X, y = teacher.sample(config.n, seed=seed + 1000)
    m = int(round(config.width_ratio * config.n))
    row = {"setting": setting, "seed": seed}
    try:
        result = flattest_interpolator(
            X, y, activation, width=m, tol=config.flattest_tol, rounds=config.flattest_rounds, seed=seed + 3
        )
    except InfeasibleInterpolationError:  # no width-m network of this activation interpolates (quadratic, n > D)
        nan = float("nan")
        return [{**row, "interpolable": False, "upsilon": nan, "lower": nan, "population_loss": nan}]
    zero = TwoLayerNet(torch.zeros(1, dtype=X.dtype, device=X.device), teacher.theta_star[:1], activation)
    return [
        {
            **row,
            "interpolable": True,
            **flattest_interpolator_report(result, X, y, teacher, n_test=config.n_test, seed=seed + 2),
            "zero_loss": population_loss(zero, teacher, n_test=config.n_test, seed=seed + 2).value,
        }
    ]


def _point(config: Config, setting: str, seed: int, kind: str = "grid") -> list[dict]:
    """Every ρ* of the grid for one setting and seed (``kind="reference"``: the flattest interpolator)."""
    if kind == "reference":
        return _reference(config, setting, seed)
    activation = get_activation(SETTINGS[setting][2])
    teacher = teacher_for(setting, config, seed)
    X, y = teacher.sample(config.n, seed=seed + 1000)
    m = int(round(config.width_ratio * config.n))
    rows = []
    for i, rho in enumerate(config.rhos):
        directions = directions_with_alignment(teacher.theta_star, m, float(rho), seed=seed + i + 1)
        row = {
            "setting": setting,
            "seed": seed,
            "rho": float(rho),
            "noise_std": config.noise_std,
            "width_ratio": config.width_ratio,
            "condition_number": float("nan"),
        }
        try:
            solution = flattest_outer_weights(directions, X, y, activation)
        except InfeasibleInterpolationError:  # Φ numerically rank deficient: no interpolator to compare
            # its condition number stays NaN: above 1/RANK_TOL, where the solver refuses Φ, a computed σ_max/σ_min
            # has digits only well below 1/ε (near it, thread counts disagree on it), and none is used
            row.update(interpolable=False, upsilon=float("nan"), population_loss=float("nan"))
        else:  # the solver's rank check has the condition number (from the eigenvalues of Φ Φᵀ)
            row["condition_number"] = solution.condition_number
            row.update(interpolable=True, **interpolator_report(solution, X, y, teacher, n_test=config.n_test))
        rows.append(row)
    return rows


def _sweep(config: Config, jobs, backend, label) -> list[dict]:
    points = [{"setting": s, "seed": config.seed + 100 * i} for s in config.settings for i in range(config.seeds)]
    results = map_points(
        _point, config, points, experiment="paper_experiments", version=VERSION, jobs=jobs, backend=backend, desc=label
    )
    return [row for rows in results for row in rows]


def correlations(rows: list[dict], key: str = "setting", level: float = 0.95) -> list[dict]:
    """Spearman correlation of Υ and population loss across ρ*, per seed; mean and interval per ``key``.

    The intervals (Student t over the seeds) hold together at ``level``: each is drawn at 1 − (1 − level)/k for
    the k values of ``key`` (Bonferroni), so that comparisons between any of a table's rows ("intervals apart")
    need no further adjustment.  Points where the solver finds no interpolator (a numerically rank-deficient
    feature matrix) are left out and counted; the condition number is the geometric mean over the points kept.
    A seed with fewer than four points kept gives no correlation; with fewer than two such seeds the row's
    values are NaN.
    """
    out = []
    nan = float("nan")
    groups = group(rows, key)
    each = 1.0 - (1.0 - level) / max(len(groups), 1)
    for value, members in groups.items():
        per_seed = list(per_seed_correlations(members).values())
        mean, low, high = mean_interval(per_seed, each) if len(per_seed) >= 2 else (nan, nan, nan)
        low, high = max(low, -1.0), min(high, 1.0)  # a correlation lies in [-1, 1]
        kept = where(members, interpolable=True)
        out.append(
            {
                key: value,
                "spearman": mean,
                "low": low,
                "high": high,
                "seeds_used": len(per_seed),
                "level": each,
                "condition_number": geomean(column(kept, "condition_number")) if kept else nan,
                "not_interpolable": len(members) - len(kept),
            }
        )
    return out


def per_seed_correlations(rows: list[dict]) -> dict:
    """Spearman's correlation of Υ and population loss across ρ*, by seed, for the seeds with at least four points
    kept (where the solver found an interpolator)."""
    per_seed = {}
    for seed, seed_rows in group(rows, "seed").items():
        kept = where(seed_rows, interpolable=True)
        if len(kept) >= 4:
            per_seed[seed] = float(spearmanr(column(kept, "upsilon"), column(kept, "population_loss"))[0])
    return per_seed


def correlation_differences(rows: list[dict], pairs: list[tuple[str, str]], level: float = 0.95) -> list[dict]:
    """For each (setting, other) in ``pairs``, the mean over seeds of the per-seed correlation of ``setting`` minus
    that of ``other``, with a paired Student-t interval over the seeds both keep (settings of one seed share their
    inputs and noise draws, so their correlations are not independent; the paired interval holds whatever that
    dependence).  The intervals hold together at ``level``: each is drawn at 1 − (1 − level)/k for the k pairs
    (Bonferroni)."""
    each = 1.0 - (1.0 - level) / max(len(pairs), 1)
    by_setting = group(rows, "setting")
    out = []
    for setting, other in pairs:
        first, second = per_seed_correlations(by_setting[setting]), per_seed_correlations(by_setting[other])
        seeds = sorted(first.keys() & second.keys())
        if len(seeds) < 2:
            raise FlatbookInputError(f"{setting!r} and {other!r} share fewer than two seeds with a correlation.")
        difference, low, high = mean_interval([first[seed] - second[seed] for seed in seeds], each)
        out.append(
            {
                "setting": setting,
                "other": other,
                "difference": difference,
                "low": low,
                "high": high,
                "seeds": len(seeds),
                "level": each,
            }
        )
    return out


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """The paper's settings, then the noise and width sweeps on ``config.sweep_setting``."""
    outside = [s for s in config.reference_settings if s not in config.settings]
    if outside:
        raise FlatbookInputError(f"reference_settings {outside} are not among the settings run; add them to settings.")
    points = _sweep(config, jobs, backend, "settings")
    # A sweep value equal to the config's own (the paper's τ = 0.1 and m/n = 2) would run the sweep setting
    # again: its rows are the settings run's, when that run has the sweep setting.
    own = where(points, setting=config.sweep_setting) if config.sweep_setting in config.settings else None

    def along(field: str, values, label: str) -> list[dict]:
        """The sweep setting's rows for each value of the config field ``field``."""
        return [
            row
            for value in values
            for row in (
                own
                if own is not None and value == getattr(config, field)
                else _sweep(
                    replace(config, settings=(config.sweep_setting,), **{field: value}),
                    jobs,
                    backend,
                    f"{label} {value:g}",
                )
            )
        ]

    noise_rows = along("noise_std", config.noise_sweep, "noise")
    width_rows = along("width_ratio", config.width_sweep, "m/n")
    references = map_points(
        _point,
        config,
        [
            {"setting": s, "seed": config.seed + 100 * i, "kind": "reference"}
            for s in config.reference_settings
            for i in range(config.seeds)
        ],
        experiment="paper_experiments",
        version=VERSION,
        jobs=jobs,
        backend=backend,
        desc="flattest interpolators",
    )
    return {
        "references": [row for rows in references for row in rows],
        "points": points,
        "correlations": correlations(points),
        "noise": correlations(noise_rows, "noise_std"),
        "width": correlations(width_rows, "width_ratio"),
    }
