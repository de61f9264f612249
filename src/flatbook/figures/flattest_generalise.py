"""Chapter 4's figures, drawn from :func:`flatbook.experiments.flattest_generalise.run`'s tables."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..experiments import flattest_generalise
from ..tables import column, group, where
from .registry import figure
from .style import PALETTE, PANELS_PER_ROW, ROLE, book_style, legend_below, new_figure, new_panels, no_minor_labels

__all__ = ["plot_argument", "plot_excess_loss", "plot_near_range", "plot_overfitting", "plot_balancedness"]

CONDITION_STYLE = {
    "noiseless": (ROLE["good"], "o"),
    "fixed noise": (PALETTE["orange"], "s"),
    "noise, τ² ∝ 1/n": (PALETTE["sky"], "s"),
    "noise, τ² ∝ n^-1/4": (PALETTE["sky"], "v"),
    "fixed residual": (ROLE["bad"], "D"),
    "residual, η² ∝ 1/n": (PALETTE["green"], "D"),
    "residual, η² ∝ n^-1/4": (PALETTE["green"], "v"),
}


def _slack_shades(count: int) -> list[str]:
    """Grey levels for the near-flattest range's slacks, light to dark as the slack grows."""
    return [f"{level:.2f}" for level in np.linspace(0.7, 0.05, count)]


def _median_by_n(rows, value):
    by_n = group(rows, "n", sort=True)
    return list(by_n), [float(np.median([value(r) for r in members])) for members in by_n.values()]


def _relative(row: dict, field: str) -> float:
    """An excess of a near-flattest row over the noise variance (the excess itself without noise)."""
    return flattest_generalise.resolved_excess(row, field) / (row["noise_variance"] or 1.0)


#: the most sizes labelled on a panel's axis; a longer grid labels every other size (or every third, …)
MAX_SIZE_LABELS = 5


def _log_axes(ax, ns):
    ax.set(xscale="log", yscale="log", xlabel="samples $n$")
    labelled = ns[:: math.ceil(len(ns) / MAX_SIZE_LABELS)]
    ax.set_xticks(labelled, [f"{n:g}" for n in labelled])
    low, high = ax.get_ylim()
    if high / low >= 10:  # a decade or more has labelled powers of ten; within one the minor ticks carry the labels
        no_minor_labels(ax)
    else:
        ax.xaxis.set_minor_formatter(NullFormatter())


@figure("ch4-argument", flattest_generalise, "The steps of the path-norm argument, measured")
def plot_argument(tables: dict) -> Figure:
    """(a) κ_inf (exact) and the largest κ over random directions (medians) against 2√d; (b) V* = Υ* against n
    per condition, with the teacher's Υ and the noise's dual lower bound; (c) √n times the Rademacher complexity
    of the unit Υ-ball, computed exactly, against its bound."""
    fig, axes = new_figure(ncols=3, height=3.0)
    runs = where(tables["runs"], method="flattest")
    ns = sorted(set(column(runs, "n")))
    with book_style():
        ax = axes[0]
        first = where(runs, condition=runs[0]["condition"])
        extremes = (
            ("kappa_inf", "v", r"$\kappa_{\inf}$ (exact)"),
            ("kappa_max", "^", r"max over sampled $u$"),
        )
        for field, marker, label in extremes:
            x, med = _median_by_n(first, lambda r, f=field: r[f])
            ax.plot(column(first, "n"), column(first, field), marker, color="0.5", alpha=0.35, ms=3)
            ax.plot(x, med, "-", marker=marker, color=ROLE["relu"], label=label)
        limit = 2 * math.sqrt(first[0]["d"])
        ax.axhline(limit, color=ROLE["bound"], ls="--", lw=1, label=r"$2\sqrt{d}$ ($n \to \infty$)")
        _log_axes(ax, ns)
        ax.set_yscale("linear")
        ax.set_title(r"(a) $\kappa$: its infimum, its sampled maximum", fontsize=9)
        ax.legend(fontsize=7)
        ax = axes[1]
        for condition in dict.fromkeys(column(runs, "condition")):
            colour, marker = CONDITION_STYLE[condition]
            sel = where(runs, condition=condition)
            x, med = _median_by_n(sel, lambda r: r["measure_upper"])
            ax.plot(x, med, "-", marker=marker, color=colour, label=f"$V^\\star$, {condition}")
            if sel[0]["noise_variance"] > 0 and all(r.get("noise_dual_bound") for r in sel):
                x, med = _median_by_n(sel, lambda r: r["noise_dual_bound"])
                ax.plot(x, med, ":", marker=marker, mfc="none", color=colour, label=f"dual bound, {condition}")
        x, med = _median_by_n(where(runs, condition="noiseless") or runs, lambda r: r["teacher_upsilon"])
        ax.plot(x, med, "--", color="0.3", label=r"$\Upsilon$ of the teacher")
        _log_axes(ax, ns)
        ax.set_title(r"(b) $V^\star = \Upsilon^\star$ (median)", fontsize=9)
        handles, labels = ax.get_legend_handles_labels()  # one entry per condition: under the panels
        fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=7)
        ax = axes[2]
        rows = tables["rademacher"]
        rn = np.array(column(rows, "n"), dtype=float)
        ax.errorbar(
            rn,
            np.sqrt(rn) * np.array(column(rows, "complexity")),
            yerr=2 * np.sqrt(rn) * np.array(column(rows, "complexity_se")),
            fmt="o-",
            color=ROLE["relu"],
            capsize=3,
            label=r"$\sqrt{n}\,\hat{R}_S$ (exact sup)",
        )
        ax.plot(rn, np.sqrt(rn) * np.array(column(rows, "bound")), "--", color=ROLE["bound"], label="its bound")
        _log_axes(ax, ns)
        ax.set_yscale("linear")
        ax.set_ylim(bottom=0)
        ax.set_title(r"(c) unit $\Upsilon$-ball", fontsize=9)
        ax.legend(fontsize=7)
    return fig


def _optimistic_order(row: dict) -> float:
    """P² d log³n / n, the optimistic rate's order with the network's own path norm P (constants unknown)."""
    return row["path_norm"] ** 2 * row["d"] * math.log(row["n"]) ** 3 / row["n"]


@figure("ch4-excess-loss", flattest_generalise, "Excess loss of the flattest interpolator and of the control against n")
def plot_excess_loss(tables: dict) -> Figure:
    """Excess F − F* against n, one panel per condition: every dataset (markers) and the median (line) for the
    flattest interpolator found and for the minimum-ℓ2 control; the noiseless panel adds the shape of the optimistic
    order P² d log³n / n (median path norm, put through the first median: its constant is unknown)."""
    conditions = list(dict.fromkeys(column(tables["runs"], "condition")))
    fig, axes = new_panels(len(conditions), row_height=3.2)
    ns = sorted(set(column(tables["runs"], "n")))
    with book_style():
        for ax, condition in zip(axes, conditions, strict=True):
            colour, marker = CONDITION_STYLE[condition]
            for method, style, fill in (("flattest", "-", colour), ("control", "--", "none")):
                sel = where(tables["runs"], condition=condition, method=method)
                excess = [flattest_generalise.resolved_excess(r) for r in sel]
                ax.plot(column(sel, "n"), excess, marker, mfc=fill, color=colour, alpha=0.35, ms=4)
                x, med = _median_by_n(sel, flattest_generalise.resolved_excess)
                label = "flattest found (median)" if method == "flattest" else r"control: min-$\ell_2$, $m = 16n$"
                ax.plot(x, med, style, color=colour, mfc=fill, marker=marker, label=label)
            if condition == "noiseless":
                flattest = where(tables["runs"], condition=condition, method="flattest")
                x, med = _median_by_n(flattest, lambda r: r["excess"])
                # the optimistic order's shape, its constant unknown: put through the first median
                _, order = _median_by_n(flattest, _optimistic_order)
                guide = med[0] * np.asarray(order) / order[0]
                ax.plot(x, guide, ":", color="0.45", lw=2, zorder=0, label=r"$\propto P^2 d\log^3 n/n$ (shape)")
            _log_axes(ax, ns)
            ax.set_title(condition, fontsize=9)
        axes[0].legend(fontsize=7)  # line styles and fills mean the same in every panel; colours name the condition
        for ax in axes[::PANELS_PER_ROW]:
            ax.set_ylabel(r"excess loss $F(w) - F^\star$")
    return fig


@figure("ch4-near-range", flattest_generalise, "The range of the excess over the near-flattest set against n")
def plot_near_range(tables: dict) -> Figure:
    """Per condition: the median over datasets of the floor over the dictionary (dashed) and the worst found
    (solid) of the excess over {Υ ≤ (1 + ε)Υ_found} for each slack ε, beside the solver's interpolator (thick)."""
    near = tables["near"]
    conditions = list(dict.fromkeys(column(near, "condition")))
    slacks = sorted(set(column(near, "slack")))
    fig, axes = new_panels(len(conditions), row_height=3.2)
    ns = sorted(set(column(near, "n")))
    with book_style():
        for ax, condition in zip(axes, conditions, strict=True):
            colour, marker = CONDITION_STYLE[condition]
            sel = where(near, condition=condition)
            for slack, shade in zip(slacks, _slack_shades(len(slacks)), strict=True):
                rows = where(sel, slack=slack)
                x, worst = _median_by_n(rows, lambda r: _relative(r, "worst"))
                ax.plot(x, worst, "-", marker="^", ms=4, color=shade, label=f"worst found, ε = {100 * slack:g} %")
                x, floor = _median_by_n(rows, lambda r: _relative(r, "floor"))
                positive = [(n, f) for n, f in zip(x, floor, strict=True) if f > 0]  # a floor of 0 has no log
                if positive:
                    label = f"floor, ε = {100 * slack:g} %"
                    ax.plot(*zip(*positive, strict=True), "--", marker="v", ms=4, color=shade, label=label)
            x, found = _median_by_n(where(sel, slack=slacks[0]), lambda r: _relative(r, "flattest"))
            ax.plot(x, found, "-", lw=2.4, color=colour, marker=marker, label="the solver's")
            _log_axes(ax, ns)
            ax.set_title(condition, fontsize=9)
            ax.set_ylabel(r"$(F - F^\star)/\tau^2$" if sel[0]["noise_variance"] > 0 else r"$F - F^\star$")
        legend_below(fig, axes, ncol=4)
    return fig


@figure("ch4-overfitting", flattest_generalise, "Excess loss over the noise variance: benign, tempered or catastrophic")
def plot_overfitting(tables: dict) -> Figure:
    """(F − F*)/τ² against n, one panel per noisy condition: median with its order-statistic interval and every
    dataset (the tails), for the flattest found, the worst near-flattest found at the largest slack, the control."""
    levels = tables["levels"]
    conditions = list(dict.fromkeys(column(levels, "condition")))
    slacks = sorted({float(m.split()[1]) for m in column(levels, "method") if m.startswith("worst")})
    methods = [("flattest", "flattest found", "-", "o")]
    if slacks:
        methods.append((f"worst {slacks[-1]:g}", f"worst near-flattest found, ε = {100 * slacks[-1]:g} %", "-.", "^"))
    methods.append(("control", r"control: min-$\ell_2$, $m = 16n$", "--", "s"))
    fig, axes = new_panels(len(conditions), row_height=3.2, sharey=True)
    with book_style():
        for ax, condition in zip(axes, conditions, strict=True):
            colour, _ = CONDITION_STYLE[condition]
            for offset, (method, label, style, marker) in enumerate(methods):
                rows = sorted(where(levels, condition=condition, method=method), key=lambda r: r["n"])
                if not rows:
                    continue
                shift = 1.0 + 0.035 * (offset - 1)
                ns = np.array(column(rows, "n"), dtype=float) * shift
                med = np.array(column(rows, "median"))
                shade = colour if method == "flattest" else ("0.2" if method.startswith("worst") else "0.55")
                ax.errorbar(
                    ns,
                    med,
                    yerr=[med - np.array(column(rows, "low")), np.array(column(rows, "high")) - med],
                    fmt=marker,
                    ls=style,
                    color=shade,
                    mfc="none" if method == "control" else shade,
                    capsize=3,
                    label=label,
                )
                for n, row in zip(ns, rows, strict=True):
                    ax.plot([n] * len(row["ratios"]), row["ratios"], marker, color=shade, alpha=0.3, ms=3, mfc="none")
            ax.axhline(1.0, color=ROLE["bound"], lw=0.8)
            _log_axes(ax, sorted(set(column(levels, "n"))))
            ax.set_title(condition, fontsize=9)
        for ax in axes[::PANELS_PER_ROW]:
            ax.set_ylabel(r"$(F - F^\star)/\tau^2$")
        legend_below(fig, axes, ncol=3)
    return fig


@figure("ch4-balancedness", flattest_generalise, "How evenly the solver's network spreads its weight")
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
