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

import numpy as np
from matplotlib.figure import Figure

from .. import get_activation
from ..data import multi_index_product, sum_of_single_index
from ..interpolators import random_directions
from ..search import dictionary_search, direct_search, interpolator_report
from ..stats import slope_across_seeds
from ..style import PALETTE, ROLE, book_style, legend_below, new_figure, no_minor_labels
from .runner import map_points


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
    searches = [dictionary_search(X, y, activation, m - teacher.k, seed=seed + 1,
                                  extra_directions=teacher.theta_star),
                direct_search(X, y, activation, random_directions(m, config.d, seed=seed + 1),
                              steps=config.search_steps)]
    rows = [{"method": s.method, **interpolator_report(s.solution, X, y, teacher, n_test=config.n_test),
             "max_effective_weight": float(s.solution.effective_a.abs().max()),
             "l1_effective_weight": float(s.solution.effective_a.abs().sum())} for s in searches]
    best = min(r["upsilon"] for r in rows)
    return [{"condition": condition, "n": n, "m": m, "seed": seed, "noise_variance": teacher.bayes_risk,
             "flattest": r["upsilon"] == best, **r} for r in rows]


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """Every condition, n and seed; then the rates of the excess loss of the flattest found."""
    points = [{"condition": condition, "n": n, "seed": config.seed + 100 * s}
              for condition in CONDITIONS for n in config.n_grid for s in range(config.seeds)]
    results = map_points(_point, config, points, experiment="flattest_generalise", jobs=jobs, backend=backend)
    runs = [row for rows in results for row in rows]
    rates = []
    for condition in CONDITIONS:
        sel = [r for r in runs if r["condition"] == condition and r["flattest"]]
        mean, low, high = slope_across_seeds(sel, "n", lambda r: max(r["excess_loss"], 1e-12))
        rates.append({"condition": condition, "rate": mean, "low": low, "high": high,
                      "theory": predicted_rate(condition)})
    balance = [r for r in runs if r["condition"] == "vanishing noise" and r["flattest"]]
    mean, low, high = slope_across_seeds(balance, "m", lambda r: r["max_effective_weight"])
    return {"runs": runs, "rates": rates,
            "balancedness": [{"slope": mean, "low": low, "high": high, "theory": -1.0}]}


CONDITION_COLOUR = {"vanishing noise": ROLE["good"], "slowly vanishing noise": PALETTE["sky"],
                    "fixed noise": PALETTE["orange"], "multi-index": ROLE["bad"]}


def plot_excess_loss(tables: dict) -> Figure:
    """Excess population loss F − F* of the flattest interpolator found against n, per condition."""
    fig, axes = new_figure(height=3.2)
    ax = axes[0]
    with book_style():
        for rate in tables["rates"]:
            condition = rate["condition"]
            sel = [r for r in tables["runs"] if r["condition"] == condition and r["flattest"]]
            ns = sorted({r["n"] for r in sel})
            ax.plot([r["n"] for r in sel], [r["excess_loss"] for r in sel], "o", mfc="none", alpha=0.5,
                    color=CONDITION_COLOUR[condition])
            means = [np.exp(np.mean(np.log([max(r["excess_loss"], 1e-12) for r in sel if r["n"] == n]))) for n in ns]
            ax.plot(ns, means, "-", color=CONDITION_COLOUR[condition],
                    label=f"{condition}: slope {rate['rate']:.2f}")
        low = [r for r in tables["runs"] if r["condition"] == "vanishing noise" and r["flattest"]]
        ns = np.array(sorted({r["n"] for r in low}), dtype=float)
        start = np.exp(np.mean(np.log([r["excess_loss"] for r in low if r["n"] == ns[0]])))
        ax.plot(ns, start * (ns / ns[0]) ** -0.5, ":", color="0.45", lw=2.2, zorder=0,
                label=r"rate $n^{-1/2}$ (theory, vanishing noise)")
        ax.set(xscale="log", yscale="log", xlabel="samples $n$", ylabel=r"excess loss $F(w) - F^\star$")
        legend_below(fig, axes, ncol=2)
        no_minor_labels(ax)
    return fig


def plot_balancedness(tables: dict) -> Figure:
    """Largest effective outer weight of the flattest interpolator found against the width m."""
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        sel = [r for r in tables["runs"] if r["condition"] == "vanishing noise" and r["flattest"]]
        ms = np.array(sorted({r["m"] for r in sel}), dtype=float)
        ax.plot([r["m"] for r in sel], [r["max_effective_weight"] for r in sel], "o", color=ROLE["good"],
                mfc="none", label=r"$\max_j |\tilde a_j|$, flattest found (seeds)")
        ax.plot([r["m"] for r in sel], [r["l1_effective_weight"] / r["m"] for r in sel], "s", color=PALETTE["sky"],
                mfc="none", label=r"$\|\tilde a\|_1 / m$")
        top = np.mean([r["max_effective_weight"] for r in sel if r["m"] == ms[0]])
        ax.plot(ms, top * ms[0] / ms, "--", color=ROLE["bound"], label=r"$\propto 1/m$")
        ax.set(xscale="log", yscale="log", xlabel="width $m$", ylabel="effective outer weight")
        ax.set_xticks(ms, [f"{m:g}" for m in ms])
        ax.legend(fontsize=8)
        no_minor_labels(ax)
    return fig
