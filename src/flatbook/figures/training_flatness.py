"""Chapter 7's figures, drawn from :func:`flatbook.experiments.training_flatness.run`'s tables."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from ..experiments import training_flatness
from ..experiments.training_flatness import METHODS
from ..tables import column, distinct, group, where
from .registry import figure
from .style import PALETTE, ROLE, book_style, finish_panels, new_figure, no_minor_labels

__all__ = ["plot_loss_vs_flatness", "plot_upsilon_along_training", "plot_init_scale", "plot_mirror_solver"]

COLOUR = dict(
    zip(
        METHODS,
        (
            PALETTE["blue"],
            PALETTE["sky"],
            PALETTE["green"],
            PALETTE["orange"],
            PALETTE["vermillion"],
            PALETTE["purple"],
        ),
        strict=True,
    )
)


def _after_start(row: dict) -> bool:
    """Rows logged after step 0 (the start has no place on a log axis of steps)."""
    return row["step"] > 0


@figure(
    "ch7-loss-vs-flatness",
    training_flatness,
    "Trained networks on the population-loss-vs-flatness plane, beside the flattest interpolators",
)
def plot_loss_vs_flatness(tables: dict) -> Figure:
    """Population loss against Υ / Υ(flattest) for every trained network, with the flattest interpolator (and its
    proven lower bound) and the flattest misaligned one."""
    fig, axes = new_figure(height=3.6)
    ax = axes[0]
    with book_style():
        for label in METHODS:
            sel = where(tables["finals"], method=label)
            ax.plot(
                column(sel, "ratio"),
                column(sel, "population_loss"),
                "o",
                color=COLOUR[label],
                label=label,
                ms=6,
                alpha=0.85,
            )
        lower = [r["flattest_lower"] / r["flattest_upsilon"] for r in tables["references"] if r["method"] == "flattest"]
        ax.axvspan(
            min(lower), 1.0, color=ROLE["bound"], alpha=0.08, label=r"proven range of $\Upsilon^\star$ (all seeds)"
        )
        for name, marker, colour in (
            ("flattest", "s", ROLE["bound"]),
            ("flattest misaligned", "X", ROLE["bad"]),
        ):
            sel = where(tables["references"], method=name)
            ax.plot(
                column(sel, "ratio"), column(sel, "population_loss"), marker, mfc="none", color=colour, label=name, ms=7
            )
        bayes = tables["finals"][0]["bayes_risk"]
        ax.axhline(bayes, color=PALETTE["black"], lw=0.8, ls=":", label=r"Bayes risk $\tau^2$")
        ax.set(xscale="log", yscale="log", xlabel=r"$\Upsilon \,/\, \Upsilon(\mathrm{flattest\ interpolator})$")
        finish_panels(fig, axes, "population loss $F(w)$", legend_ncol=3)
    return fig


@figure(
    "ch7-upsilon-training", training_flatness, "Orbit-minimal flatness of the function along training, per optimiser"
)
def plot_upsilon_along_training(tables: dict) -> Figure:
    """Υ of the function along training (seed 0), one line per method, against the flattest interpolator."""
    seed = min(column(tables["finals"], "seed"))
    fig, axes = new_figure(ncols=2, height=3.2)
    with book_style():
        for label in METHODS:
            rows = where(tables["trajectories"], _after_start, method=label, seed=seed)
            axes[0].plot(column(rows, "step"), column(rows, "upsilon"), color=COLOUR[label], label=label)
            axes[1].plot(column(rows, "step"), column(rows, "loss"), color=COLOUR[label], label=label)
        reference = where(tables["finals"], seed=seed)[0]
        axes[0].axhline(
            reference["flattest_upsilon"], color=PALETTE["black"], ls="--", lw=1, label="flattest interpolator"
        )
        axes[0].axhline(
            reference["flattest_lower"], color=PALETTE["black"], ls=":", lw=1, label=r"proven bound on $\Upsilon^\star$"
        )
        axes[0].set(xscale="log", yscale="log", xlabel="step", title=r"$\Upsilon$ of the function")
        axes[1].set(xscale="log", yscale="log", xlabel="step", title=r"training loss $F_S$")
        axes[0].set_ylabel(r"$\Upsilon$")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=3)
        no_minor_labels(*axes)
    return fig


@figure(
    "ch7-init-scale",
    training_flatness,
    "Gradient descent: distance from the flattest and population loss against the initialisation scale",
)
def plot_init_scale(tables: dict) -> Figure:
    """Gradient descent from initialisations of growing scale: Υ / Υ(flattest) and population loss, one line
    per seed."""
    by_seed = group(tables["init_scale"], "seed", sort=True)
    fig, axes = new_figure(ncols=2, height=3.0)
    with book_style():
        for rows in by_seed.values():
            rows = sorted(rows, key=lambda r: r["init_scale"])
            scales = column(rows, "init_scale")
            axes[0].plot(scales, column(rows, "ratio"), "o-", color=COLOUR["GD, small init"], alpha=0.6)
            axes[1].plot(scales, column(rows, "population_loss"), "o-", color=COLOUR["GD, large init"], alpha=0.6)
        axes[0].set(
            xscale="log",
            yscale="log",
            xlabel="initialisation scale $s$",
            title=r"$\Upsilon / \Upsilon(\mathrm{flattest})$",
        )
        axes[1].set(xscale="log", yscale="log", xlabel="initialisation scale $s$", title="population loss")
        no_minor_labels(*axes)
    return fig


@figure(
    "ch7-mirror-solver",
    training_flatness,
    "Mirror descent on the outer weights converging to the flattest outer weights",
)
def plot_mirror_solver(tables: dict) -> Figure:
    """Mirror descent on the outer weights: distance to the optimum (p = 4/3), and flatness against the
    optimum's (p = 1)."""
    fig, axes = new_figure(ncols=2, height=3.2)
    with book_style():
        quad = where(tables["solver"], _after_start, activation="quadratic")
        axes[0].plot(
            column(quad, "step"), column(quad, "distance"), color=ROLE["quadratic"], label=r"$p = 4/3$ potential"
        )
        axes[0].set(xscale="log", yscale="log", xlabel="step", title=r"quadratic ($\ell_{4/3}$)")
        relu = where(tables["solver"], activation="relu")
        betas = sorted(distinct(relu, "beta"), reverse=True)
        for beta, colour in zip(
            betas, (PALETTE["sky"], PALETTE["blue"], PALETTE["black"], PALETTE["green"]), strict=False
        ):
            rows = where(relu, _after_start, beta=beta)
            axes[1].plot(
                column(rows, "step"),
                column(rows, "flatness_ratio"),
                color=colour,
                label=f"$\\beta = 10^{{{round(math.log10(beta))}}}$",
            )
        axes[1].axhline(1.0, color=PALETTE["black"], ls=":", lw=0.8)
        axes[1].set(
            xscale="log",
            xlabel="step",
            ylim=(0.5, 1.5),
            title=r"ReLU ($\ell_1$ via hyperbolic entropy)",
            ylabel=r"$\Upsilon(a_k) / \Upsilon^\star$",
        )
        axes[1].legend()
        axes[0].legend()
        axes[0].set_ylabel(r"$\|a_k - a^\star\| / \|a^\star\|$")
        no_minor_labels(*axes)
    return fig
