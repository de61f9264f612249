"""Chapter 2's figures, drawn from :func:`flatbook.experiments.convex_dual.run`'s tables."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..experiments import convex_dual
from ..tables import column, distinct, where
from .registry import figure
from .style import DISPLAY_NAME, ROLE, book_style, finish_panels, legend_below, new_figure, no_minor_labels

__all__ = ["plot_dual_bound", "plot_sorted_weights", "plot_balancedness"]


@figure("ch2-dual-bound", convex_dual, "Interpolators with fixed directions above the dual certificate")
def plot_dual_bound(tables: dict) -> Figure:
    """Υ of random interpolators with fixed directions, above the dual bound and the optimum."""
    fig, axes = new_figure(ncols=len(tables["solutions"]), height=3.2)
    with book_style():
        for ax, sol in zip(axes, tables["solutions"], strict=True):
            values = np.array(column(where(tables["others"], activation=sol["activation"]), "upsilon"))
            bins = np.geomspace(0.9 * sol["lower_bound"], values.max() * 1.05, 40)
            ax.hist(
                values,
                bins=bins,
                color=ROLE[sol["activation"]],
                alpha=0.7,
                label="random interpolators, same directions",
            )
            ax.axvline(sol["upsilon"], color=ROLE["good"], lw=2.5, label=r"optimum $\Upsilon^\star$ (primal)")
            ax.axvline(sol["lower_bound"], color=ROLE["bound"], ls="--", lw=1.5, label=r"dual bound $g(\lambda)$")
            ax.set(
                xscale="log",
                xlabel=r"$\Upsilon = \sum_j \kappa_j |\tilde a_j|^p$",
                title=f"{DISPLAY_NAME[sol['activation']]} ($p = {sol['p']:.3g}$)",
            )
        finish_panels(fig, axes, "count", legend_ncol=3)
    return fig


@figure("ch2-sorted-weights", convex_dual, "Sorted effective outer weights: sparse (ReLU) and spread (quadratic)")
def plot_sorted_weights(tables: dict) -> Figure:
    """|ã_j| of the flattest interpolator, sorted: sparse for p = 1, spread for p = 4/3."""
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        for sol in tables["solutions"]:
            rows = where(tables["weights"], activation=sol["activation"])
            ax.plot(
                column(rows, "rank"),
                [max(w, 1e-18) for w in column(rows, "abs_effective_weight")],
                color=ROLE[sol["activation"]],
                label=f"{DISPLAY_NAME[sol['activation']]} ($p = {sol['p']:.3g}$), {sol['support']} non-zero",
            )
        n = tables["solutions"][0]["n"]
        ax.axvline(n, color=ROLE["bound"], ls=":", label=f"$n = {n}$ samples")
        ax.set(
            yscale="log",
            ylim=(1e-6 * max(column(tables["weights"], "abs_effective_weight")), None),
            xlabel="neuron, sorted by $|\\tilde a_j|$",
            ylabel=r"$|\tilde a_j|$",
        )
        ax.legend(loc="lower left")
        no_minor_labels(*axes)
    return fig


@figure(
    "ch2-balancedness",
    convex_dual,
    "Flatness and largest weight against the width: dictionary optimum vs the best found over all directions",
)
def plot_balancedness(tables: dict) -> Figure:
    """Υ against the width: the flattest over m random directions against the best interpolator found over all
    directions (an upper bound on Υ*(m), with its proven lower bound), scaled by m^{p−1}; and max_j |ã_j| of the
    best found with the 1/m line."""
    fig, axes = new_figure(ncols=2, height=3.2)
    with book_style():
        rows = tables["balancedness"]
        ms = np.array(distinct(rows, "m", sort=True), dtype=float)
        for name in distinct(rows, "activation"):
            sel = where(rows, activation=name)
            m = np.array(column(sel, "m"), dtype=float)
            scale = m ** (sel[0]["p"] - 1)
            colour = ROLE[name]
            axes[0].plot(
                m,
                scale * column(sel, "upsilon"),
                "s--",
                color=colour,
                mfc="none",
                label=f"{DISPLAY_NAME[name]}: over $m$ random directions",
            )
            axes[0].plot(
                m,
                scale * column(sel, "global_upper"),
                "o-",
                color=colour,
                label=f"{DISPLAY_NAME[name]}: best found, all directions",
            )
            axes[0].plot(
                m,
                scale * column(sel, "global_lower"),
                ":",
                color=colour,
                label=f"{DISPLAY_NAME[name]}: proven lower bound",
            )
            axes[1].plot(m, column(sel, "global_max_effective_weight"), "o-", color=colour, label=DISPLAY_NAME[name])
        first = where(rows, activation=rows[-1]["activation"])[0]
        axes[1].plot(
            ms, first["global_max_effective_weight"] * ms[0] / ms, color=ROLE["bound"], ls="--", label=r"$\propto 1/m$"
        )
        axes[0].set(
            xscale="log",
            yscale="log",
            xlabel="width $m$",
            ylabel=r"$m^{p-1}\,\Upsilon$",
            title=r"flatness, scaled by $m^{p-1}$",
        )
        axes[1].set(
            xscale="log",
            yscale="log",
            xlabel="width $m$",
            ylabel=r"$\max_j |\tilde a_j|$",
            title="largest effective weight (best found)",
        )
        for ax in axes:
            ax.set_xticks(ms, [f"{m:g}" for m in ms])
            ax.xaxis.set_minor_formatter(NullFormatter())
        axes[1].legend(fontsize="small")
        legend_below(fig, axes, ncol=3)
    return fig
