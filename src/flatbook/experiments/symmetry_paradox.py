"""Chapter 1: the rescaling symmetry makes any interpolator as sharp as we like; Υ does not move.

For each activation, a single-index teacher with that activation as link, a
*good* interpolator (flattest outer weights on a dictionary that contains the
teacher direction) and a *bad* one (flattest outer weights on directions
orthogonal to the teacher).  Tables:

- ``interpolators``: per interpolator its population loss, the trace as built,
  Υ, the trace after sharpening (every α_j multiplied by ``sharpening``), and
  how much rescaling changed the outputs on fresh inputs;
- ``curves``: Tr ∇²F_S of the good interpolator, started at its optimal
  rescaling, as one neuron's α (the one with the largest |ã_j|) or all α move
  together, computed exactly and from A_j α^{2c} + B_j α^{-2} (book eq. ``eq-trace-alpha``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from .. import (
    flattest_outer_weights,
    get_activation,
    hessian_trace,
    min_flatness,
    optimal_rescaling,
)
from ..data import population_loss, single_index
from ..flatness import trace_coefficients
from ..interpolators import orthogonal_directions, teacher_and_random_directions
from ..style import (
    DISPLAY_NAME,
    ROLE,
    book_style,
    finish_panels,
    new_figure,
)
from .runner import map_points


@dataclass(frozen=True)
class Config:
    d: int = 20
    n: int = 100
    m: int = 300
    noise_std: float = 0.1
    n_test: int = 200_000
    n_fresh: int = 2_000
    alpha_min: float = 1e-2
    alpha_max: float = 1e2
    n_alpha: int = 41
    sharpening: float = 10.0
    activations: tuple = ("relu", "quadratic")
    seed: int = 0


CONFIGS = {
    "smoke": Config(d=8, n=20, m=60, n_test=5_000, n_fresh=200, n_alpha=9),
    "book": Config(),
    "paper": Config(d=50, n=1000, m=3000, n_test=1_000_000, n_alpha=81),
}


def _interpolator_row(kind, activation, net, X, y, teacher, config, rng_seed):
    alpha = optimal_rescaling(net, X, y)
    flattest = net.rescale(alpha)
    fresh = torch.randn(config.n_fresh, config.d, generator=torch.Generator().manual_seed(rng_seed),
                        dtype=X.dtype).to(X.device)
    shuffled = net.rescale(torch.exp(3 * torch.randn(net.width, generator=torch.Generator().manual_seed(rng_seed),
                                                     dtype=X.dtype)).to(X.device))
    loss = population_loss(net, teacher, n_test=config.n_test, seed=rng_seed + 1)
    return {
        "activation": activation.name,
        "interpolator": kind,
        "population_loss": loss.value,
        "population_loss_stderr": loss.stderr,
        "bayes_risk": teacher.bayes_risk,
        "train_residual": float((net(X) - y).abs().max()),
        "trace_as_built": hessian_trace(net, X, y),
        "upsilon": min_flatness(net, X, y),
        "trace_at_optimum": hessian_trace(flattest, X, y),
        "trace_sharpened": hessian_trace(flattest.rescale(config.sharpening), X, y),
        "fresh_output_change": float((shuffled(fresh) - net(fresh)).abs().max() / net(fresh).abs().max()),
        "alignment_of_weighted_neurons": net.weighted_alignment(teacher.theta_star),
    }, flattest


def _curve_rows(activation, net, X, y, alphas):
    """Trace along one neuron's orbit and along the common orbit, exactly and by the closed form."""
    A, B = trace_coefficients(net, X, y)
    c = activation.degree
    j = int(torch.argmax(net.effective_outer_weights().abs()))
    rows = []
    for alpha in alphas:
        one = torch.ones(net.width, dtype=X.dtype, device=X.device)
        one[j] = alpha
        formula_one = float((A + B).sum() - A[j] - B[j] + A[j] * alpha ** (2 * c) + B[j] * alpha ** -2.0)
        formula_all = float((A * alpha ** (2 * c) + B * alpha ** -2.0).sum())
        rows.append({"activation": activation.name, "curve": "one neuron", "alpha": float(alpha),
                     "trace": hessian_trace(net.rescale(one), X, y), "formula": formula_one})
        rows.append({"activation": activation.name, "curve": "all neurons", "alpha": float(alpha),
                     "trace": hessian_trace(net.rescale(alpha), X, y), "formula": formula_all})
    return rows


def _activation_point(config: Config, name: str, index: int) -> dict:
    """Good and bad interpolators for one activation (one point of the sweep)."""
    activation = get_activation(name)
    alphas = np.geomspace(config.alpha_min, config.alpha_max, config.n_alpha)
    seed = config.seed + 10 * index
    teacher = single_index(config.d, link=name, noise_std=config.noise_std, seed=seed)
    X, y = teacher.sample(config.n, seed=seed + 1)
    good_dirs = teacher_and_random_directions(teacher.theta_star, config.m, seed=seed + 2)
    bad_dirs = orthogonal_directions(teacher.theta_star, config.m, seed=seed + 3)
    interpolators, curves = [], []
    for kind, dirs in (("good", good_dirs), ("bad", bad_dirs)):
        net = flattest_outer_weights(dirs, X, y, activation).net
        row, flattest = _interpolator_row(kind, activation, net, X, y, teacher, config, seed + 4)
        interpolators.append(row)
        if kind == "good":
            curves += _curve_rows(activation, flattest, X, y, alphas)
    return {"interpolators": interpolators, "curves": curves}


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """Build good and bad interpolators per activation; measure losses, traces and Υ."""
    points = [{"name": name, "index": i} for i, name in enumerate(config.activations)]
    results = map_points(_activation_point, config, points, experiment="symmetry_paradox", jobs=jobs,
                         backend=backend)
    return {key: [row for result in results for row in result[key]] for key in ("interpolators", "curves")}


def plot_orbit_curves(tables: dict) -> Figure:
    """Trace against α (log-log) for one neuron and for all neurons, minimum Υ marked."""
    curves = tables["curves"]
    names = list(dict.fromkeys(row["activation"] for row in curves))
    fig, axes = new_figure(ncols=len(names), height=3.6)
    with book_style():
        for ax, name in zip(axes, names):
            for curve, colour, marker in (("one neuron", ROLE["good"], "o"), ("all neurons", ROLE["bad"], "s")):
                rows = [r for r in curves if r["activation"] == name and r["curve"] == curve]
                alpha = [r["alpha"] for r in rows]
                ax.plot(alpha, [r["formula"] for r in rows], color=colour, label=f"{curve}: $A\\alpha^{{2c}}+B\\alpha^{{-2}}$")
                ax.plot(alpha[::4], [r["trace"] for r in rows][::4], marker, color=colour, mfc="none",
                        ms=5, label=f"{curve}: exact trace")
            upsilon = min(r["formula"] for r in curves if r["activation"] == name)
            ax.plot([1.0], [upsilon], "*", color=ROLE["bound"], ms=11, label=r"$\Upsilon$ (closed form)")
            ax.set(xscale="log", yscale="log", xlabel=r"rescaling $\alpha$", title=DISPLAY_NAME[name])
        finish_panels(fig, axes, r"$\mathrm{Tr}\,\nabla^2 F_S$", legend_ncol=3)
    return fig


def plot_paradox(tables: dict) -> Figure:
    """Population loss against flatness: every orbit covers [Υ, ∞); only Υ tells good from bad."""
    rows = tables["interpolators"]
    names = list(dict.fromkeys(row["activation"] for row in rows))
    fig, axes = new_figure(ncols=len(names), height=3.4)
    with book_style():
        for ax, name in zip(axes, names):
            sel = [r for r in rows if r["activation"] == name]
            right = 30 * max(r["trace_sharpened"] for r in sel)
            for r in sel:
                colour = ROLE[r["interpolator"]]
                ax.annotate("", xy=(right, r["population_loss"]), xytext=(r["upsilon"], r["population_loss"]),
                            arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.4})
                ax.plot([r["upsilon"]], [r["population_loss"]], "|", color=colour, ms=14, mew=2.5,
                        label=f"{r['interpolator']}: orbit, $\\Upsilon$ at the left end")
                ax.plot([r["trace_sharpened"]], [r["population_loss"]], "o", color=colour, mfc="none",
                        label=f"{r['interpolator']}: sharpened")
            ax.set(xscale="log", yscale="log", xlabel=r"$\mathrm{Tr}\,\nabla^2F_S$ over the symmetry orbit",
                   title=DISPLAY_NAME[name], xlim=(0.3 * min(r["upsilon"] for r in sel), right * 1.5))
        finish_panels(fig, axes, "population loss $F(w)$", legend_ncol=2)
    return fig
