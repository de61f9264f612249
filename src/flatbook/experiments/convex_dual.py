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
- ``balancedness``: for each width m, ‖ã‖_∞, ‖ã‖_1, the support and max |a_j| at
  the optimal rescaling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from .. import flattest_outer_weights, get_activation, optimal_rescaling
from ..data import single_index
from ..flatness import orbit_flatness, population_flatness_weight
from ..flattest import other_interpolators
from ..interpolators import random_directions
from ..style import (
    DISPLAY_NAME,
    ROLE,
    book_style,
    finish_panels,
    new_figure,
    no_minor_labels,
)
from .runner import map_points


@dataclass(frozen=True)
class Config:
    d: int = 20
    n: int = 100
    m: int = 400
    noise_std: float = 0.1
    n_other: int = 2_000
    spread_min: float = 1e-3
    spread_max: float = 1.0
    widths: tuple = (200, 400, 800, 1600)
    activations: tuple = ("relu", "quadratic")
    seed: int = 0


CONFIGS = {
    "smoke": Config(d=8, n=20, m=60, n_other=200, widths=(40, 80, 160)),
    "book": Config(),
    "paper": Config(d=50, n=1000, m=4000, n_other=10_000, widths=(2000, 4000, 8000, 16000)),
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
    solution = {
        "activation": name, "p": result.p, "n": config.n, "m": config.m, "d": config.d,
        "upsilon": result.flatness, "lower_bound": result.lower_bound,
        "duality_gap": result.duality_gap, "residual": result.residual,
        "support": result.support_size, "condition_number": result.condition_number,
        "kappa_min": float(result.kappa.min()), "kappa_max": float(result.kappa.max()),
        "kappa_mean": float(result.kappa.mean()),
        "kappa_population": population_flatness_weight(activation, config.d),
        "lp_norm_p": lp_norm, "upsilon_over_lp": result.flatness / lp_norm,
    }
    spreads = np.geomspace(config.spread_min, config.spread_max, config.n_other)
    sampled = other_interpolators(result, X, config.n_other, spread=spreads, seed=seed + 3)
    upsilons = orbit_flatness(sampled, result.kappa, result.p)
    ordered = result.effective_a.abs().sort(descending=True).values
    balancedness = []
    for m in config.widths:
        wide = _solve(activation, teacher, X, y, m, seed + 5)
        rescaled = wide.net.rescale(optimal_rescaling(wide.net, X, y))
        balancedness.append({
            "activation": name, "m": m, "upsilon": wide.flatness,
            "max_effective_weight": float(wide.effective_a.abs().max()),
            "l1_effective_weight": float(wide.effective_a.abs().sum()),
            "support": wide.support_size,
            "max_outer_weight_at_optimum": float(rescaled.a.abs().max()),
        })
    return {"solutions": [solution],
            "others": [{"activation": name, "upsilon": float(u)} for u in upsilons],
            "weights": [{"activation": name, "rank": r + 1, "abs_effective_weight": float(w)}
                        for r, w in enumerate(ordered)],
            "balancedness": balancedness}


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """Solve the primal and dual, sample other interpolators, sweep the width, per activation."""
    points = [{"name": name, "index": i} for i, name in enumerate(config.activations)]
    results = map_points(_activation_point, config, points, experiment="convex_dual", jobs=jobs, backend=backend)
    return {key: [row for result in results for row in result[key]]
            for key in ("solutions", "others", "weights", "balancedness")}


def plot_dual_bound(tables: dict) -> Figure:
    """Υ of random interpolators with fixed directions, above the dual bound and the optimum."""
    names = [row["activation"] for row in tables["solutions"]]
    fig, axes = new_figure(ncols=len(names), height=3.2)
    with book_style():
        for ax, sol in zip(axes, tables["solutions"]):
            values = np.array([r["upsilon"] for r in tables["others"] if r["activation"] == sol["activation"]])
            bins = np.geomspace(0.9 * sol["lower_bound"], values.max() * 1.05, 40)
            ax.hist(values, bins=bins, color=ROLE[sol["activation"]], alpha=0.7,
                    label="random interpolators, same directions")
            ax.axvline(sol["upsilon"], color=ROLE["good"], lw=2.5, label=r"optimum $\Upsilon^\star$ (primal)")
            ax.axvline(sol["lower_bound"], color=ROLE["bound"], ls="--", lw=1.5,
                       label=r"dual bound $g(\lambda)$")
            ax.set(xscale="log", xlabel=r"$\Upsilon = \sum_j \kappa_j |\tilde a_j|^p$",
                   title=f"{DISPLAY_NAME[sol['activation']]} ($p = {sol['p']:.3g}$)")
        finish_panels(fig, axes, "count", legend_ncol=3)
    return fig


def plot_sorted_weights(tables: dict) -> Figure:
    """|ã_j| of the flattest interpolator, sorted: sparse for p = 1, spread for p = 4/3."""
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        for sol in tables["solutions"]:
            rows = [r for r in tables["weights"] if r["activation"] == sol["activation"]]
            ax.plot([r["rank"] for r in rows], [max(r["abs_effective_weight"], 1e-18) for r in rows],
                    color=ROLE[sol["activation"]],
                    label=f"{DISPLAY_NAME[sol['activation']]} ($p = {sol['p']:.3g}$), "
                          f"{sol['support']} non-zero")
        n = tables["solutions"][0]["n"]
        ax.axvline(n, color=ROLE["bound"], ls=":", label=f"$n = {n}$ samples")
        ax.set(yscale="log", ylim=(1e-6 * max(r["abs_effective_weight"] for r in tables["weights"]), None),
               xlabel="neuron, sorted by $|\\tilde a_j|$", ylabel=r"$|\tilde a_j|$")
        ax.legend(loc="lower left")
        no_minor_labels(*axes)
    return fig


def plot_balancedness(tables: dict) -> Figure:
    """max_j |ã_j| of the flattest interpolator against the width m, with the 1/m reference."""
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        rows = tables["balancedness"]
        for name in dict.fromkeys(r["activation"] for r in rows):
            sel = [r for r in rows if r["activation"] == name]
            ax.plot([r["m"] for r in sel], [r["max_effective_weight"] for r in sel], "o-", color=ROLE[name],
                    label=DISPLAY_NAME[name])
        ms = np.array(sorted({r["m"] for r in rows}), dtype=float)
        first = rows[0]
        ax.plot(ms, first["max_effective_weight"] * ms[0] / ms, color=ROLE["bound"], ls="--",
                label=r"$\propto 1/m$ (balancedness)")
        ax.set(xscale="log", yscale="log", xlabel="width $m$", ylabel=r"$\max_j |\tilde a_j|$")
        ax.set_xticks(ms, [f"{m:g}" for m in ms])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend()
    return fig
