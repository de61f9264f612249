"""Chapter 1's figures, drawn from :func:`flatbook.experiments.symmetry_paradox.run`'s tables."""

from __future__ import annotations

from matplotlib.figure import Figure

from ..experiments import symmetry_paradox
from ..tables import column, distinct, where
from .registry import figure
from .style import DISPLAY_NAME, ROLE, book_style, finish_panels, new_figure

__all__ = ["plot_orbit_curves", "plot_paradox"]


@figure("ch1-orbit-curves", symmetry_paradox, "Hessian trace along a symmetry orbit, closed form and exact")
def plot_orbit_curves(tables: dict) -> Figure:
    """Trace against α (log-log) for one neuron and for all neurons, minimum Υ marked."""
    curves = tables["curves"]
    names = distinct(curves, "activation")
    fig, axes = new_figure(ncols=len(names), height=3.6)
    with book_style():
        for ax, name in zip(axes, names, strict=True):
            for curve, colour, marker in (("one neuron", ROLE["good"], "o"), ("all neurons", ROLE["bad"], "s")):
                rows = where(curves, activation=name, curve=curve)
                alpha = column(rows, "alpha")
                ax.plot(
                    alpha, column(rows, "formula"), color=colour, label=f"{curve}: $A\\alpha^{{2c}}+B\\alpha^{{-2}}$"
                )
                ax.plot(
                    alpha[::4],
                    column(rows, "trace")[::4],
                    marker,
                    color=colour,
                    mfc="none",
                    ms=5,
                    label=f"{curve}: exact trace",
                )
            upsilon = min(column(where(curves, activation=name), "formula"))
            ax.plot([1.0], [upsilon], "*", color=ROLE["bound"], ms=11, label=r"$\Upsilon$ (closed form)")
            ax.set(xscale="log", yscale="log", xlabel=r"rescaling $\alpha$", title=DISPLAY_NAME[name])
        finish_panels(fig, axes, r"$\mathrm{Tr}\,\nabla^2 F_S$", legend_ncol=3)
    return fig


@figure("ch1-paradox", symmetry_paradox, "Population loss against the traces each orbit reaches")
def plot_paradox(tables: dict) -> Figure:
    """Population loss against flatness: every orbit covers [Υ, ∞); only Υ tells good from bad."""
    rows = tables["interpolators"]
    names = distinct(rows, "activation")
    fig, axes = new_figure(ncols=len(names), height=3.4)
    with book_style():
        for ax, name in zip(axes, names, strict=True):
            sel = where(rows, activation=name)
            right = 30 * max(column(sel, "trace_sharpened"))
            for r in sel:
                colour = ROLE[r["interpolator"]]
                ax.annotate(
                    "",
                    xy=(right, r["population_loss"]),
                    xytext=(r["upsilon"], r["population_loss"]),
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.4},
                )
                ax.plot(
                    [r["upsilon"]],
                    [r["population_loss"]],
                    "|",
                    color=colour,
                    ms=14,
                    mew=2.5,
                    label=f"{r['interpolator']}: orbit, $\\Upsilon$ at the left end",
                )
                ax.plot(
                    [r["trace_sharpened"]],
                    [r["population_loss"]],
                    "o",
                    color=colour,
                    mfc="none",
                    label=f"{r['interpolator']}: sharpened",
                )
            ax.set(
                xscale="log",
                yscale="log",
                xlabel=r"$\mathrm{Tr}\,\nabla^2F_S$ over the symmetry orbit",
                title=DISPLAY_NAME[name],
                xlim=(0.3 * min(column(sel, "upsilon")), right * 1.5),
            )
        finish_panels(fig, axes, "population loss $F(w)$", legend_ncol=2)
    return fig
