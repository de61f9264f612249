"""Chapter 5's figures, drawn from :func:`flatbook.experiments.paper_experiments.run`'s tables."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..experiments import paper_experiments
from ..tables import column, where
from .registry import figure
from .style import PALETTE, book_style, legend_below, new_figure

__all__ = ["plot_loss_vs_flatness", "plot_correlations", "plot_beyond"]


@figure(
    "ch5-loss-vs-flatness", paper_experiments, "Population loss against flatness at controlled alignment, per setting"
)
def plot_loss_vs_flatness(tables: dict) -> Figure:
    """Population loss against Υ, one panel per setting, colour = alignment ρ*."""
    settings = column(tables["correlations"], "setting")
    ncols = min(4, len(settings))
    nrows = -(-len(settings) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, height=2.3 * nrows + 0.6)
    with book_style():
        for ax, corr in zip(axes, tables["correlations"], strict=False):  # the last row may have empty panels
            sel = where(tables["points"], setting=corr["setting"], interpolable=True)
            scatter = ax.scatter(
                column(sel, "upsilon"),
                column(sel, "population_loss"),
                c=column(sel, "rho"),
                cmap="viridis",
                vmin=0,
                vmax=1,
                s=14,
            )
            ax.set(xscale="log", yscale="log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # minor x labels collide at this panel width
            ax.set_title(corr["setting"].replace(", ", "\n", 1) + f"\nSpearman {corr['spearman']:.2f}", fontsize=7)
            ax.tick_params(labelsize=7)
        for ax in axes[len(settings) :]:
            ax.set_visible(False)
        fig.supxlabel(r"$\Upsilon$ of the flattest outer weights", fontsize=9)
        fig.supylabel("population loss $F(w)$", fontsize=9)
        fig.colorbar(scatter, ax=list(axes[: len(settings)]), label=r"alignment $\rho^\star$", shrink=0.8)
    return fig


@figure("ch5-correlations", paper_experiments, "Rank correlation of flatness and population loss per setting")
def plot_correlations(tables: dict) -> Figure:
    """Spearman correlation of Υ and population loss per setting, with intervals across seeds that hold together
    at 95 % (Bonferroni over the settings)."""
    corr = tables["correlations"]
    fig, axes = new_figure(height=0.32 * len(corr) + 1.0)
    ax = axes[0]
    with book_style():
        ys = np.arange(len(corr))[::-1]
        for y_pos, c in zip(ys, corr, strict=True):
            ax.errorbar(
                c["spearman"],
                y_pos,
                xerr=[[c["spearman"] - c["low"]], [c["high"] - c["spearman"]]],
                fmt="o",
                color=PALETTE["blue"],
                capsize=3,
            )
        ax.set_yticks(ys, column(corr, "setting"), fontsize=8)
        ax.axvline(0, color="0.5", lw=0.8)
        ax.set(xlabel=r"Spearman correlation of $\Upsilon$ and $F(w)$ across $\rho^\star$", xlim=(-1.05, 1.05))
    return fig


@figure("ch5-beyond", paper_experiments, "Rank correlation against label noise and against the width ratio")
def plot_beyond(tables: dict) -> Figure:
    """The correlation as the label noise grows, and as the width ratio m/n grows."""
    fig, axes = new_figure(ncols=2, height=2.8, sharey=True)
    with book_style():
        for ax, key, field, label in (
            (axes[0], "noise", "noise_std", r"label noise $\tau$"),
            (axes[1], "width", "width_ratio", r"width ratio $m/n$"),
        ):
            rows = tables[key]
            ax.errorbar(
                column(rows, field),
                column(rows, "spearman"),
                yerr=[
                    column(rows, lambda r: r["spearman"] - r["low"]),
                    column(rows, lambda r: r["high"] - r["spearman"]),
                ],
                fmt="o-",
                color=PALETTE["blue"],
                capsize=3,
                label="Spearman, simultaneous 95 % intervals",
            )
            ax.set(xlabel=label, ylim=(-1.05, 1.05))
            ax.axhline(0, color="0.5", lw=0.8)
        axes[0].set_ylabel(r"Spearman($\Upsilon$, $F$)")
        legend_below(fig, axes, ncol=1)
    return fig
