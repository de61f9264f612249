"""Chapter 6's figures, drawn from :func:`flatbook.experiments.mirror_flow.run`'s tables."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from ..experiments import mirror_flow
from ..stats import mean_interval
from ..tables import column, distinct, group, where
from .registry import figure
from .style import PALETTE, book_style, finish_panels, new_figure, no_minor_labels

__all__ = ["plot_balance", "plot_margins", "plot_neurons", "plot_alignment", "plot_slow", "plot_digits"]

#: the potentials of the main comparison, in their order
LABELS = [label for label, _, _ in mirror_flow.MAIN_POTENTIALS]
COLOUR = {
    "gradient descent": PALETTE["blue"],
    "hyperbolic entropy": PALETTE["vermillion"],
    "p = 3": PALETTE["green"],
    "|w|³/3": PALETTE["green"],
    "((w²+β²)^{3/2} − β³)/3": PALETTE["orange"],
    "|w|³/3 + βw²/2": PALETTE["purple"],
}


def _mean_band(values) -> tuple[float, float, float]:
    """Mean and 95 % interval over seeds; a single seed (the smoke scale) draws its value without a band."""
    return mean_interval(values) if len(values) > 1 else (values[0], values[0], values[0])


@figure("ch6-balance", mirror_flow, "Drift of the balance equation against the step size")
def plot_balance(tables: dict) -> Figure:
    """Largest drift of the balance quantity against the step size (log-log): one line per potential and seed
    (data and start), slope-1 guide."""
    fig, axes = new_figure(height=3.2)
    ax = axes[0]
    with book_style():
        for label in LABELS:
            for seed, rows in group(where(tables["balance"], potential=label), "seed", sort=True).items():
                sel = sorted(rows, key=lambda r: r["step"])
                ax.plot(
                    column(sel, "step"), column(sel, "drift"), "o-", color=COLOUR[label], alpha=0.6, ms=3,
                    label=label if seed == 0 else None,
                )  # fmt: skip
        steps = np.array(distinct(tables["balance"], "step", sort=True))
        ref = max(column(tables["balance"], "drift")) / steps.max()
        ax.plot(steps, ref * steps * 1.5, "--", color=PALETTE["black"], lw=1, label=r"$\propto \eta$")
        ax.set(xscale="log", yscale="log", xlabel=r"step size $\eta$")
        ax.set_xticks(steps, [f"{s:g}" for s in steps])
        finish_panels(fig, axes, r"$\max_{j,t} |B_j(t) - B_j(0)|$", legend_ncol=4)
    return fig


@figure("ch6-margins", mirror_flow, "Normalised margins along training for three mirror potentials")
def plot_margins(tables: dict) -> Figure:
    """ℓ2, ℓ1 and ℓ3 normalised margins along training (seed 0), one line per potential."""
    rows = where(tables["trajectories"], seed=0)
    fig, axes = new_figure(ncols=3, height=3.0)
    with book_style():
        for ax, key, title in zip(
            axes,
            ("l2_margin", "l1_margin", "l3_margin"),
            (r"$\ell_2$ margin", r"$\ell_1$ margin", r"$\ell_3$ margin"),
            strict=True,
        ):
            for label in LABELS:
                sel = where(rows, lambda r: r["time"] > 0, potential=label)
                ax.plot(column(sel, "time"), [max(v, 0.0) for v in column(sel, key)], color=COLOUR[label], label=label)
            top = max(column(rows, key))
            ax.set(
                xscale="log",
                xlabel="flow time $t$",
                title=title,
                ylim=(0, 1.1 * top),
                xlim=(0.1, max(column(rows, "time"))),
            )
        finish_panels(fig, axes, "normalised margin", legend_ncol=3)
    return fig


@figure("ch6-neurons", mirror_flow, "Sorted per-neuron weights: sparse (hyperbolic entropy) and dense (GD, p = 3)")
def plot_neurons(tables: dict) -> Figure:
    """Sorted per-neuron weights |a_j| ‖θ_j‖ / max at the end of training (every seed)."""
    fig, axes = new_figure(height=3.2)
    ax = axes[0]
    with book_style():
        for label in LABELS:
            for r in where(tables["solutions"], potential=label):
                w = np.asarray(r["neuron_weights"])
                ax.plot(
                    np.arange(1, len(w) + 1),
                    w / w[0],
                    color=COLOUR[label],
                    marker=".",
                    ms=4,
                    lw=1,
                    label=f"{label} ({r['active']} active)" if r["seed"] == 0 else None,
                )
        ax.set(yscale="log", xlabel="neuron (sorted by weight)", ylim=(1e-8, 2))
        finish_panels(fig, axes, r"$|a_j|\,\|\theta_j\|$ / largest", legend_ncol=3)
    return fig


@figure("ch6-alignment", mirror_flow, "Hyperbolic entropy: time to align with the l1 horizon against scale and width")
def plot_alignment(tables: dict) -> Figure:
    """log T (T: first time Q(∇R(w)) / ‖w‖₁ ≥ the level) against β and against the width, every seed, log-log, with
    the lemma's form c √x (the largest c below every point) and the heuristic log T ∝ m β² (slope 2 in β, 1 in m)."""
    rows = where(tables["alignment"], lambda r: not r["aligned_at_start"] and math.isfinite(r["time"]))
    widths = column(tables["alignment"], "width")
    base_width = max(set(widths), key=widths.count)  # the β sweep's width; the width sweep has one β
    width_beta = next(r["beta"] for r in tables["alignment"] if r["width"] != base_width)
    fig, axes = new_figure(ncols=2, height=3.2)
    colour = COLOUR["hyperbolic entropy"]
    with book_style():
        for ax, sel, x, heuristic, xlabel in (
            (axes[0], where(rows, width=base_width), "beta", 2.0, r"scale $\beta$" + f" (width {base_width})"),
            (axes[1], where(rows, beta=width_beta), "width", 1.0, f"width $m$ ($\\beta$ = {width_beta:g})"),
        ):
            xs, log_t = np.array(column(sel, x), dtype=float), np.log(column(sel, "time"))
            ax.plot(xs, log_t, "o", ms=4, color=colour, label="every seed")
            grid = np.array(sorted(set(xs)))
            top = np.exp(np.mean(np.log(log_t[xs == grid[-1]])))
            below = np.min(log_t / np.sqrt(xs))  # the largest c √x under every point: the lemma's shape, a lower bound
            ax.plot(grid, below * np.sqrt(grid), ":", color=PALETTE["black"], lw=1, label="c √x (the lemma's form)")
            ax.plot(
                grid,
                top * (grid / grid[-1]) ** heuristic,
                "--",
                color=PALETTE["black"],
                lw=1,
                label=f"slope {heuristic:g} (heuristic)",
            )
            ax.set(xscale="log", yscale="log", xlabel=xlabel)
            ax.legend(loc="upper left")
        axes[0].set_ylabel(r"$\log T$")
        no_minor_labels(*axes)
    return fig


@figure("ch6-slow", mirror_flow, "Hyperbolic entropy: time to the sparse solution against the scale")
def plot_slow(tables: dict) -> Figure:
    """Hyperbolic entropy, every seed: time to a sparse solution, final cosine with GD and active neurons against β."""
    rows = sorted(where(tables["sparsification"], lambda r: r["beta"] is not None), key=lambda r: r["beta"])
    betas = distinct(rows, "beta", sort=True)
    fig, axes = new_figure(ncols=2, height=3.2)
    colour = COLOUR["hyperbolic entropy"]
    with book_style():
        ax = axes[0]
        reached = where(rows, lambda r: math.isfinite(r["time_to_sparse"]))
        censored = where(rows, lambda r: not math.isfinite(r["time_to_sparse"]))
        ax.plot(column(reached, "beta"), column(reached, "time_to_sparse"), "o", ms=4, color=colour, label="reached")
        ax.plot(
            column(censored, "beta"),
            column(censored, "final_time"),
            "^",
            mfc="none",
            color=colour,
            label="not reached by the end (time shown)",
        )
        ax.set(xscale="log", yscale="log", xlabel=r"scale $\beta$", title="time to the sparse level (every seed)")
        ax.set_ylabel("flow time $t$")
        ax.legend(loc="upper left")
        ax = axes[1]
        for key, marker, label, target in (
            ("cosine_with_gd", "s-", "cosine with GD's direction", ax),
            ("final_active", "o--", "active neurons (right axis)", ax.twinx()),
        ):
            mean, low, high = zip(*(_mean_band(column(where(rows, beta=b), key)) for b in betas), strict=True)
            line_colour = COLOUR["gradient descent"] if key == "cosine_with_gd" else colour
            target.plot(betas, mean, marker, color=line_colour, label=label)
            target.fill_between(betas, low, high, color=line_colour, alpha=0.2, lw=0)
        twin = fig.axes[-1]
        twin.set_ylim(0, 1.1 * max(column(tables["sparsification"], "final_active")))
        twin.grid(False)
        ax.set(xscale="log", xlabel=r"scale $\beta$", ylim=(0, 1.05), title="final direction (mean, 95 % interval)")
        handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        ax.legend(handles=handles, loc="lower right")
        no_minor_labels(*axes)
    return fig


@figure("ch6-digits", mirror_flow, "Handwritten digits: test accuracy against magnitude pruning")
def plot_digits(tables: dict) -> Figure:
    """Digits (even vs odd): test accuracy against the fraction of neurons / weights pruned by magnitude, mean over
    seeds with a 95 % interval."""
    fig, axes = new_figure(ncols=2, height=3.2)
    with book_style():
        for ax, what in zip(axes, ("neurons", "weights"), strict=True):
            for label in LABELS:
                by_fraction = group(where(tables["digits"], potential=label, pruned=what), "fraction", sort=True)
                mean, low, high = zip(
                    *(_mean_band(column(r, "test_accuracy")) for r in by_fraction.values()), strict=True
                )
                ax.plot(list(by_fraction), mean, "o-", ms=4, color=COLOUR[label], label=label)
                ax.fill_between(list(by_fraction), low, high, color=COLOUR[label], alpha=0.2, lw=0)
            ax.axhline(0.5, color=PALETTE["black"], lw=0.8, ls=":")
            ax.set(xlabel=f"fraction of {what} pruned", title=f"pruning {what}", ylim=(0.4, 1.0))
        finish_panels(fig, axes, "test accuracy", legend_ncol=3)
    return fig
