"""Chapter 4's figures, drawn from :func:`flatbook.experiments.flattest_generalise.run`'s tables."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..experiments import flattest_generalise
from ..tables import column, geomean, group, where
from .registry import figure
from .style import PALETTE, ROLE, book_style, legend_below, new_figure, no_minor_labels

__all__ = ["plot_excess_loss", "plot_overfitting", "plot_balancedness"]

CONDITION_STYLE = {
    "statistical": (ROLE["good"], "o"),
    "noise, ε₂ = 1": (PALETTE["sky"], "s"),
    "noise, ε₂ = 1/4": (PALETTE["sky"], "v"),
    "fixed noise": (PALETTE["orange"], "s"),
    "residual, ε₁ = 1": (PALETTE["green"], "D"),
    "residual, ε₁ = 1/4": (PALETTE["green"], "v"),
    "fixed residual": (ROLE["bad"], "D"),
}
METHOD_TITLE = {
    "flattest": "flattest interpolator (certified)",
    "control": r"control: min-$\ell_2$ on random directions",
}


@figure("ch4-excess-loss", flattest_generalise, "Excess loss of the flattest interpolator and of the control against n")
def plot_excess_loss(tables: dict) -> Figure:
    """Excess population loss F − F* against n per condition: the flattest interpolator and the control."""
    fig, axes = new_figure(ncols=2, height=3.4, sharey=True)
    with book_style():
        for ax, method in zip(axes, ("flattest", "control"), strict=True):
            for rate in where(tables["rates"], method=method):
                condition = rate["condition"]
                colour, marker = CONDITION_STYLE[condition]
                sel = where(tables["runs"], condition=condition, method=method)
                by_n = group(sel, "n", sort=True)
                ax.plot(column(sel, "n"), column(sel, "excess"), marker, mfc="none", alpha=0.35, ms=4, color=colour)
                ax.plot(
                    list(by_n),
                    [geomean(column(rows, "excess")) for rows in by_n.values()],
                    "-",
                    color=colour,
                    label=f"{condition}",
                )
            ns = np.array(sorted(group(tables["runs"], "n")), dtype=float)
            ax.plot(ns, 0.3 * (ns / ns[0]) ** -0.5, ":", color="0.45", lw=2.2, zorder=0, label=r"$\propto n^{-1/2}$")
            ax.set(xscale="log", yscale="log", xlabel="samples $n$", title=METHOD_TITLE[method])
            ax.set_xticks(ns, [f"{n:g}" for n in ns])
            no_minor_labels(ax)
        axes[0].set_ylabel(r"excess loss $F(w) - F^\star$")
        legend_below(fig, axes, ncol=3)
    return fig


@figure("ch4-overfitting", flattest_generalise, "Excess loss over the noise variance: tempered or catastrophic")
def plot_overfitting(tables: dict) -> Figure:
    """(F − F*)/τ² against n (geometric mean, 95 % interval on the log scale), noisy conditions, both methods."""
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        for (condition, method), rows in group(tables["overfitting"], "condition", "method", sort=True).items():
            colour, marker = CONDITION_STYLE[condition]
            rows = sorted(rows, key=lambda r: r["n"])
            ns = np.array(column(rows, "n"), dtype=float) * (1.04 if method == "control" else 1.0)
            mean = np.array(column(rows, "ratio"))
            low = np.array(column(rows, "low"))
            ax.errorbar(
                ns,
                mean,
                yerr=[mean - low, np.array(column(rows, "high")) - mean],
                fmt=marker,
                mfc="none" if method == "control" else colour,
                color=colour,
                capsize=3,
                ls="--" if method == "control" else "-",
                label=f"{condition}, {method}",
            )
        ax.axhline(1.0, color=ROLE["bound"], lw=0.8)
        ax.set(xscale="log", yscale="log", xlabel="samples $n$", ylabel=r"$(F - F^\star)/\tau^2$")
        ax.legend(fontsize=7, ncol=2)
        no_minor_labels(ax)
    return fig


@figure("ch4-balancedness", flattest_generalise, "How evenly the flattest interpolator spreads its weight")
def plot_balancedness(tables: dict) -> Figure:
    """m · max_j κ_j^{1/p}|ã_j| / V against the width m: → 1 for the quadratic (p > 1), flat for ReLU (p = 1)."""
    fig, axes = new_figure(height=2.8)
    ax = axes[0]
    with book_style():
        for name, rows in group(tables["balancedness"], "activation", sort=True).items():
            ax.plot(
                column(rows, "m"),
                column(rows, "spread"),
                "o-",
                color=ROLE[name],
                label=f"{name} (p = {rows[0]['p']:.3g})",
            )
        ax.axhline(1.0, color=ROLE["bound"], ls="--", lw=0.8, label="perfect balance")
        ax.set(xscale="log", xlabel="width $m$", ylabel=r"$m \max_j \kappa_j^{1/p}|\tilde a_j| / V$")
        ax.legend(fontsize=8)
        no_minor_labels(ax)
    return fig
