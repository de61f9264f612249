"""Chapter 3's figures, drawn from :func:`flatbook.experiments.bad_interpolators.run`'s tables."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..experiments import bad_interpolators
from ..tables import column, geomean, group, where
from .registry import figure
from .style import DISPLAY_NAME, PALETTE, ROLE, book_style, finish_panels, new_figure, no_minor_labels

__all__ = ["plot_gap", "plot_heuristic", "plot_regime", "plot_losses"]

#: how each ratio of ``ratios`` is drawn: colour and legend label
RATIO_STYLE = {
    "proven": (ROLE["bad"], r"lower(bad) / upper(best), proven (for $p \ne 1$ up to the fit)"),
    "estimate": (PALETTE["sky"], r"upper(bad) / upper(best), the networks found"),
    "certificate": (PALETTE["green"], r"centred-label certificate / teacher, proven"),
}


def _by_x(rows, field):
    """(x values, geometric means of ``field``) over the groups of equal n, sorted by n."""
    groups = group(rows, "n", sort=True)
    return (
        [members[0]["n_over_d"] for members in groups.values()],
        [geomean(column(members, field)) for members in groups.values()],
    )


def _bracket(ax, rows, scale=lambda r: r["n_over_d"]):
    """The bracket [lower(bad)/upper(best), upper(bad)/lower(best)] (lower end proven, upper end networks found)
    as a band (geometric means over seeds), the networks' ratio and the certificate as lines, every seed as a faint
    marker; x = scale(row)."""
    groups = group(rows, "n", sort=True)
    xs = [scale(members[0]) for members in groups.values()]
    low = [geomean(column(members, "proven")) for members in groups.values()]
    high = [geomean(column(members, "outer")) for members in groups.values()]
    ax.fill_between(
        xs,
        low,
        high,
        color=ROLE["bad"],
        alpha=0.18,
        lw=0,
        label="bracket on $\\Upsilon_{\\rm bad}/\\Upsilon^\\star$ (lower end proven)",
    )
    for name, (colour, label) in RATIO_STYLE.items():
        ax.plot(
            xs, [geomean(column(members, name)) for members in groups.values()], "o-", color=colour, ms=3.5, label=label
        )
        ax.plot([scale(r) for r in rows], column(rows, name), ".", color=colour, alpha=0.3, ms=3)
    ax.axhline(1.0, color=ROLE["bound"], lw=0.8, ls=":")


@figure("ch3-gap", bad_interpolators, "Proven flatness gap of misaligned ReLU interpolators against n/d")
def plot_gap(tables: dict) -> Figure:
    """ReLU: the proven ratio lower(bad)/upper(best) at ρ0 = 0 in d = 3 (both certified) and d = 4 (bad set priced
    exactly), at ρ0 = 0.5 in d = 3 (the band priced by cap branch-and-bound) and at ρ0 = 0 with label noise, and
    the centred-label certificate over the teacher's Υ, against n/d, with the rate (n/d)^{1/2}; and their local
    slopes."""
    series = [  # (sweep, ρ0, ratio, colour, marker, label)
        ("certified", 0.0, "proven", ROLE["bad"], "o", "lower(bad)/upper(best), $d = {d}$ (certified)"),
        ("exact_bad", 0.0, "proven", PALETTE["purple"], "s", "lower(bad)/upper(best), $d = {d}$"),
        ("certified", 0.5, "proven", PALETTE["orange"], "D", "lower(bad)/upper(best), $d = {d}$, $\\rho_0 = 0.5$"),
        ("noisy", 0.0, "proven", PALETTE["sky"], "v", "lower(bad)/upper(best), $d = {d}$, noisy labels"),
        ("certificate", 0.0, "certificate", PALETTE["green"], "^", "centred certificate / teacher, $d = {d}$"),
    ]
    fig, axes = new_figure(ncols=2, height=3.6)
    with book_style():
        ax = axes[0]
        for sweep, rho, name, colour, marker, label in series:
            rows = where(tables["ratios"], sweep=sweep, rho=rho)
            if not rows:
                continue
            ax.plot(column(rows, "n_over_d"), column(rows, name), ".", color=colour, alpha=0.35, ms=4)
            xs, means = _by_x(rows, name)
            ax.plot(xs, means, "-", marker=marker, color=colour, ms=4, label=label.format(d=rows[0]["d"]))
        long = where(tables["ratios"], sweep="certificate")
        xs, means = _by_x(long, "certificate")
        xs, first = np.array(xs), means[0]
        ax.plot(xs, first * (xs / xs[0]) ** 0.5, "--", color=ROLE["bound"], label=r"rate $(n/d)^{1/2}$ of the theory")
        ax.axhline(1.0, color=ROLE["bound"], lw=0.8, ls=":")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="$n/d$",
            ylabel=r"$\Upsilon_{\rm bad}/\Upsilon^\star$ (proven lower bounds)",
            title="ReLU",
        )
        ax = axes[1]
        for sweep, rho, name, colour, marker, _ in series:
            local = where(tables["local_slopes"], sweep=sweep, rho=rho, ratio=name)
            if not local:
                continue
            x = np.array(column(local, "n_over_d"))
            mean = np.array(column(local, "slope"))
            err = np.array([mean - column(local, "low"), np.array(column(local, "high")) - mean])
            ax.errorbar(x, mean, yerr=err, fmt="-", marker=marker, color=colour, ms=4, capsize=2)
        ax.axhline(0.5, color=ROLE["bound"], ls="--", lw=1)
        ax.set(xscale="log", xlabel="$n/d$ (midpoint)", ylabel="local slope (95 % interval)", title="local slopes")
        finish_panels(fig, [axes[0]], axes[0].get_ylabel(), legend_ncol=2)
        no_minor_labels(axes[1])
    return fig


@figure("ch3-heuristic", bad_interpolators, "Brackets on the gap in higher dimension: ReLU and quadratic")
def plot_heuristic(tables: dict) -> Figure:
    """ReLU in a higher d and the quadratic at n/D fixed (ρ0 = 0): the bracket on Υ_bad/Υ*, the ratio of
    the networks found and the certificate, against n/d."""
    fig, axes = new_figure(ncols=2, height=3.3)
    with book_style():
        for ax, sweep in zip(axes, ("relu_high_d", "quadratic"), strict=True):
            rows = where(tables["ratios"], sweep=sweep, rho=0.0)
            _bracket(ax, rows)
            first = rows[0]
            title = (
                f"ReLU, $d = {first['d']}$"
                if sweep == "relu_high_d"
                else f"quadratic, $n/D \\approx {np.mean([r['n'] / r['bad_dimension'] for r in rows]):.1f}$"
            )
            ax.set(xscale="log", yscale="log", xlabel="$n/d$", title=title)
            ticks = sorted({round(r["n_over_d"], 2) for r in rows})
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        finish_panels(fig, axes, r"$\Upsilon_{\rm bad}/\Upsilon^\star$", legend_ncol=2)
    return fig


@figure("ch3-regime", bad_interpolators, "Quadratic at fixed d: the gap as n approaches D = d(d-1)/2")
def plot_regime(tables: dict) -> Figure:
    """Quadratic, fixed d, ρ0 = 0: the bracket on Υ_bad/Υ* and the networks' ratio against n/D; beyond
    n = D no misaligned interpolator exists."""
    rows = where(tables["ratios"], sweep="quadratic_regime", rho=0.0)
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        _bracket(ax, rows, scale=lambda r: r["n"] / r["bad_dimension"])
        ax.axvline(1.0, color=ROLE["quadratic"], lw=1, ls="--", label="$n = D$: no bad interpolator beyond")
        ax.set(
            yscale="log",
            xlim=(0, 1.05),
            xlabel="$n / D$, $D = d(d-1)/2$",
            ylabel=r"$\Upsilon_{\rm bad}/\Upsilon^\star$",
            title=f"quadratic, $d = {rows[0]['d']}$, $\\rho_0 = 0$",
        )
        ax.legend(fontsize=7, loc="upper left")
    return fig


@figure("ch3-losses", bad_interpolators, "Population loss of the flattest and the flattest misaligned interpolators")
def plot_losses(tables: dict) -> Figure:
    """ReLU, d = 3: exact population loss of the flattest interpolator and of the flattest ρ0-bad ones, against n."""
    rows = tables["certified"]
    fig, axes = new_figure(height=3.0)
    ax = axes[0]
    with book_style():
        series = [("flattest interpolator", where(rows, method="best"), ROLE["good"], "o")]
        series += [
            (f"flattest bad, $\\rho_0 = {rho:g}$", where(rows, method="bad", rho=rho), ROLE["bad"], marker)
            for rho, marker in zip(sorted({r["rho"] for r in where(rows, method="bad")}), "s^", strict=False)
        ]
        for label, sel, colour, marker in series:
            by_n = group(sel, "n", sort=True)
            ax.plot(column(sel, "n"), column(sel, "population_loss"), marker, color=colour, alpha=0.3, ms=3, mfc="none")
            ax.plot(
                list(by_n),
                [np.mean(column(m, "population_loss")) for m in by_n.values()],
                "-",
                marker=marker,
                color=colour,
                label=label,
                ms=4,
            )
        ax.axhline(
            0.5 - 1 / (2 * np.pi),
            color=ROLE["bound"],
            ls=":",
            lw=1,
            label=r"$\operatorname{Var}\,\sigma(g)$: floor for $\rho_0 = 0$",
        )
        ax.set_yscale("symlog", linthresh=1e-3)  # the flattest interpolator's loss can be 0
        ax.set_ylim(bottom=0)
        ax.set(
            xscale="log",
            xlabel="samples $n$",
            ylabel="population loss $F(w)$",
            title=f"{DISPLAY_NAME['relu']}, $d = {rows[0]['d']}$",
        )
        ax.legend(fontsize=7)
        no_minor_labels(ax)
    return fig
