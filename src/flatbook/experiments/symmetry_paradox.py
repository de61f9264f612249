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
from .runner import map_points

__all__ = ["CHAPTER", "VERSION", "Config", "CONFIGS", "run"]

#: the chapter that shows this experiment's figures
CHAPTER = "book/01-symmetry-paradox.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 1


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


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(d=8, n=20, m=60, n_test=5_000, n_fresh=200, n_alpha=9),
    "book": Config(),
    "paper": Config(d=50, n=1000, m=3000, n_test=1_000_000, n_alpha=81),
}


def _interpolator_row(kind, activation, net, X, y, teacher, config, rng_seed):
    alpha = optimal_rescaling(net, X, y)
    flattest = net.rescale(alpha)

    def seeded():  # a fresh generator per draw: both draws start from rng_seed
        return torch.Generator().manual_seed(rng_seed)

    fresh = torch.randn(config.n_fresh, config.d, generator=seeded(), dtype=X.dtype).to(X.device)
    shuffled = net.rescale(torch.exp(3 * torch.randn(net.width, generator=seeded(), dtype=X.dtype)).to(X.device))
    loss = population_loss(net, teacher, n_test=config.n_test, seed=rng_seed + 1)
    return {
        "activation": activation.name,
        "interpolator": kind,
        "population_loss": loss.value,
        "population_loss_stderr": loss.stderr,
        "bayes_risk": teacher.bayes_risk,
        "train_residual": float((net(X) - y).abs().max()),
        "label_scale": float(y.abs().max()),  # max_i |y_i|: the solver interpolates to its residual_tol times this
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
        formula_one = float((A + B).sum() - A[j] - B[j] + A[j] * alpha ** (2 * c) + B[j] * alpha**-2.0)
        formula_all = float((A * alpha ** (2 * c) + B * alpha**-2.0).sum())
        rows.append(
            {
                "activation": activation.name,
                "curve": "one neuron",
                "alpha": float(alpha),
                "trace": hessian_trace(net.rescale(one), X, y),
                "formula": formula_one,
            }
        )
        rows.append(
            {
                "activation": activation.name,
                "curve": "all neurons",
                "alpha": float(alpha),
                "trace": hessian_trace(net.rescale(alpha), X, y),
                "formula": formula_all,
            }
        )
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
    results = map_points(
        _activation_point, config, points, experiment="symmetry_paradox", version=VERSION, jobs=jobs, backend=backend
    )
    return {key: [row for result in results for row in result[key]] for key in ("interpolators", "curves")}
