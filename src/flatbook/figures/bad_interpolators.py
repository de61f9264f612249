"""Chapter 3's figures, drawn from :func:`flatbook.experiments.bad_interpolators.run`'s tables."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..experiments import bad_interpolators
from ..experiments.bad_interpolators import gap
from ..tables import column, distinct, geomean, group, one, where
from .registry import figure
from .style import DISPLAY_NAME, ROLE, book_style, finish_panels, new_figure, no_minor_labels

__all__ = ["plot_gap", "plot_regime", "plot_losses"]


@figure("ch3-gap", bad_interpolators, "Flatness gap of misaligned interpolators against n")
def plot_gap(tables: dict) -> Figure:
    """Υ_bad / Υ_best against n (log-log) per activation, with the n^{c/(c+1)} rate of the theory."""
    runs = tables["runs"]
    names = distinct(runs, "activation")
    rhos = distinct(where(runs, method="bad"), "rho", sort=True)
    fig, axes = new_figure(ncols=len(names), height=3.2, sharey=True)
    with book_style():
        for ax, name in zip(axes, names, strict=True):
            c = where(runs, activation=name)[0]["c"]
            notes = []
            for rho, marker in zip(rhos, "os^", strict=False):
                by_n = group(where(runs, activation=name, method="bad", rho=rho), "n", sort=True)
                slope = one(tables["slopes"], activation=name, rho=rho)
                ax.plot(
                    [n for n, rows in by_n.items() for _ in rows],
                    [gap(r) for rows in by_n.values() for r in rows],
                    marker,
                    color=ROLE["bad"],
                    alpha=0.35 + 0.5 * (rho == 0),
                    mfc="none",
                )
                ax.plot(
                    list(by_n),
                    [geomean(column(rows, gap)) for rows in by_n.values()],
                    "-",
                    marker=marker,
                    color=ROLE["bad"],
                    alpha=0.35 + 0.5 * (rho == 0),
                    label=f"bad, $\\rho = {rho:g}$",
                )
                notes.append(f"$\\rho = {rho:g}$: slope {slope['slope']:.2f}")
            ns = np.array(distinct(runs, "n", sort=True), dtype=float)
            first = geomean(column(where(runs, activation=name, method="bad", rho=0, n=ns[0]), gap))
            ax.plot(ns, first * (ns / ns[0]) ** (c / (c + 1)), "--", color=ROLE["bound"], label=r"theory $n^{c/(c+1)}$")
            notes.append(f"theory: {c / (c + 1):.2f}")
            ax.text(0.97, 0.04, "\n".join(notes), transform=ax.transAxes, ha="right", va="bottom", fontsize=8)
            ax.set(xscale="log", yscale="log", xlabel="samples $n$", title=DISPLAY_NAME[name])
        finish_panels(fig, axes, r"$\Upsilon_{\rm bad} / \Upsilon_{\rm best}$", legend_ncol=3)
    return fig


@figure("ch3-regime", bad_interpolators, "Quadratic: the gap against n / (d(d-1)/2)")
def plot_regime(tables: dict) -> Figure:
    """Quadratic: Υ_bad / Υ_best against n / (d(d−1)/2), the share of the quadratic forms on Θ*⊥ used."""
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        for rows, marker in ((tables["runs"], "o"), (tables["regime"], "s")):
            sel = where(rows, activation="quadratic", method="bad", rho=0)
            if not sel:
                continue
            by_n = group(sel, "n", sort=True)
            dim = sel[0]["bad_dimension"]
            ax.plot(
                [n / dim for n in by_n],
                [geomean(column(members, gap)) for members in by_n.values()],
                "-",
                marker=marker,
                color=ROLE["quadratic"],
                alpha=1.0 if marker == "o" else 0.55,
                label=f"$d = {sel[0]['d']}$, $d(d-1)/2 = {dim}$",
            )
        ax.set(
            xscale="log",
            xlabel=r"$n \,/\, (d(d-1)/2)$",
            ylim=(0, None),
            ylabel=r"$\Upsilon_{\rm bad} / \Upsilon_{\rm best}$ (quadratic, $\rho = 0$)",
        )
        ax.axhline(1.0, color=ROLE["bound"], lw=0.8, ls=":")
        ax.legend()
        no_minor_labels(ax)
    return fig


@figure("ch3-losses", bad_interpolators, "Population loss of flattest and misaligned interpolators")
def plot_losses(tables: dict) -> Figure:
    """Population loss of the bad and the flattest-found interpolators against n."""
    runs = tables["runs"]
    names = distinct(runs, "activation")
    fig, axes = new_figure(ncols=len(names), height=3.0)
    with book_style():
        for ax, name in zip(axes, names, strict=True):
            for label, sel, colour in (
                (
                    "flattest found",
                    where(runs, lambda r: r["upsilon"] == r["best_upsilon"], activation=name),
                    ROLE["good"],
                ),
                (r"bad, $\rho = 0$", where(runs, activation=name, method="bad", rho=0), ROLE["bad"]),
            ):
                by_n = group(sel, "n", sort=True)
                ax.plot(
                    list(by_n),
                    [np.mean(column(rows, "population_loss")) for rows in by_n.values()],
                    "o-",
                    color=colour,
                    label=label,
                )
            ax.set(xscale="log", xlabel="samples $n$", title=DISPLAY_NAME[name], ylim=(0, None))
        finish_panels(fig, axes, "population loss $F(w)$", legend_ncol=2)
    return fig
