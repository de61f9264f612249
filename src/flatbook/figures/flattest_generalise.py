"""Chapter 4's figures, drawn from :func:`flatbook.experiments.flattest_generalise.run`'s tables."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..experiments import flattest_generalise
from ..experiments.flattest_generalise import floored_excess
from ..tables import column, distinct, geomean, group, where
from .registry import figure
from .style import PALETTE, ROLE, book_style, legend_below, new_figure, no_minor_labels

__all__ = ["plot_excess_loss", "plot_balancedness"]

CONDITION_COLOUR = {
    "vanishing noise": ROLE["good"],
    "slowly vanishing noise": PALETTE["sky"],
    "fixed noise": PALETTE["orange"],
    "multi-index": ROLE["bad"],
}


@figure("ch4-excess-loss", flattest_generalise, "Excess loss of the flattest interpolators found against n")
def plot_excess_loss(tables: dict) -> Figure:
    """Excess population loss F − F* of the flattest interpolator found against n, per condition."""
    fig, axes = new_figure(height=3.2)
    ax = axes[0]
    with book_style():
        for rate in tables["rates"]:
            condition = rate["condition"]
            sel = where(tables["runs"], condition=condition, flattest=True)
            by_n = group(sel, "n", sort=True)
            ax.plot(
                column(sel, "n"),
                column(sel, "excess_loss"),
                "o",
                mfc="none",
                alpha=0.5,
                color=CONDITION_COLOUR[condition],
            )
            ax.plot(
                list(by_n),
                [geomean(column(rows, floored_excess)) for rows in by_n.values()],
                "-",
                color=CONDITION_COLOUR[condition],
                label=f"{condition}: slope {rate['rate']:.2f}",
            )
        low = where(tables["runs"], condition="vanishing noise", flattest=True)
        ns = np.array(distinct(low, "n", sort=True), dtype=float)
        start = geomean(column(where(low, n=ns[0]), "excess_loss"))
        ax.plot(
            ns,
            start * (ns / ns[0]) ** -0.5,
            ":",
            color="0.45",
            lw=2.2,
            zorder=0,
            label=r"rate $n^{-1/2}$ (theory, vanishing noise)",
        )
        ax.set(xscale="log", yscale="log", xlabel="samples $n$", ylabel=r"excess loss $F(w) - F^\star$")
        legend_below(fig, axes, ncol=2)
        no_minor_labels(ax)
    return fig


@figure(
    "ch4-balancedness", flattest_generalise, "Largest effective outer weight of the flattest found against the width"
)
def plot_balancedness(tables: dict) -> Figure:
    """Largest effective outer weight of the flattest interpolator found against the width m."""
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        sel = where(tables["runs"], condition="vanishing noise", flattest=True)
        ms = np.array(distinct(sel, "m", sort=True), dtype=float)
        ax.plot(
            column(sel, "m"),
            column(sel, "max_effective_weight"),
            "o",
            color=ROLE["good"],
            mfc="none",
            label=r"$\max_j |\tilde a_j|$, flattest found (seeds)",
        )
        ax.plot(
            column(sel, "m"),
            column(sel, lambda r: r["l1_effective_weight"] / r["m"]),
            "s",
            color=PALETTE["sky"],
            mfc="none",
            label=r"$\|\tilde a\|_1 / m$",
        )
        top = np.mean(column(where(sel, m=ms[0]), "max_effective_weight"))
        ax.plot(ms, top * ms[0] / ms, "--", color=ROLE["bound"], label=r"$\propto 1/m$")
        ax.set(xscale="log", yscale="log", xlabel="width $m$", ylabel="effective outer weight")
        ax.set_xticks(ms, [f"{m:g}" for m in ms])
        ax.legend(fontsize=8)
        no_minor_labels(ax)
    return fig
