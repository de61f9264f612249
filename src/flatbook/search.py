"""Searching for the flattest interpolator over all inner directions (book, chapters 3 and 4).

For fixed directions the flattest interpolator is a convex program
(:func:`~flatbook.flattest.flattest_outer_weights`); over directions it is not.  Two
searches, both returning certified interpolators:

- :func:`dictionary_search`: many candidate directions (random, plus any the
  reader adds, e.g. the teacher's), one convex program over their outer
  weights: the program picks the useful directions itself.
- :func:`direct_search`: moves the directions too.  With V(U) = Υ*(U) the
  optimal value of the convex program for directions U, Danskin's theorem gives
  ∇V(U) = ∂_U L(ã*, λ*; U) for the Lagrangian
  L = Σ_j κ_j(U) |ã_j|^p + λᵀ(y − Φ(U) ã) at the primal-dual solution (ã*, λ*).
  Each step moves the directions along −∇V on the unit sphere and re-solves
  the program, so every iterate is an exact interpolator; a step that does not
  lower Υ is halved (backtracking).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .activations import get_activation
from .backend import as_tensor, check_data
from .data import MultiIndexModel, population_loss
from .errors import FlatbookInputError
from .flatness import unit_flatness_weights
from .flattest import FlattestResult, flattest_outer_weights
from .global_flattest import fit_residual_allowance
from .interpolators import random_directions

__all__ = ["SearchResult", "interpolator_report", "flattest_interpolator_report", "dictionary_search", "direct_search"]


@dataclass
class SearchResult:
    """A flattest-interpolator search: the best solution and how it was found."""

    method: str
    solution: FlattestResult
    history: list[float] = field(default_factory=list)  #: Υ after each accepted step (direct search)

    @property
    def upsilon(self) -> float:
        return self.solution.flatness


def interpolator_report(
    solution: FlattestResult, X, y, teacher: MultiIndexModel | None = None, n_test: int = 100_000, seed: int = 12345
) -> dict:
    """Υ, interpolation residual, alignment of the neurons carrying the weight and population loss.

    The weighted alignment is Σ_j |ã_j| ρ_j / Σ_j |ã_j| (:meth:`~flatbook.network.TwoLayerNet.weighted_alignment`).
    """
    X, y = check_data(X, y)
    report = {
        "upsilon": solution.flatness,
        "residual": solution.residual,
        "max_abs_y": float(y.abs().max()),
        "support": solution.support_size,
    }
    if teacher is not None:
        loss = population_loss(solution.net, teacher, n_test=n_test, seed=seed)
        report.update(
            weighted_alignment=solution.net.weighted_alignment(teacher.theta_star),
            population_loss=loss.value,
            population_loss_stderr=loss.stderr,
            excess_loss=loss.excess,
        )
    return report


def flattest_interpolator_report(
    result, X, y, teacher: MultiIndexModel, n_test: int = 100_000, seed: int = 12345
) -> dict:
    """The row every chapter keeps of a :func:`~flatbook.global_flattest.flattest_interpolator` result: Υ of
    its network (``upsilon``, ≥ Υ*), the proven ``lower`` bound and the pricing ``lower_estimate``, how the
    supremum was bounded, why the column generation stopped and whether that stop proves the bracket
    (``stop``, ``certified``), the population loss (exact where a closed form exists), the weighted alignment,
    the interpolation residual beside max |y| and, for p = 1, the ``residual_allowance``: a bound on V*(y − h(X))
    (:func:`~flatbook.global_flattest.fit_residual_allowance`), so that Υ*(m) ≤ ``upsilon`` + it for the labels
    themselves (chapter 4, ``prop-ch4-repair``); NaN for other p."""
    X, y = check_data(X, y)
    loss = population_loss(result.net, teacher, n_test=n_test, seed=seed)
    residual = y - result.net(X).detach()
    return {
        "upsilon": result.upper,
        "lower": result.lower,
        "lower_estimate": result.lower_estimate,
        "pricing": result.pricing,
        "stop": result.stop.value,
        "certified": result.certified,
        "population_loss": loss.value,
        "population_loss_stderr": loss.stderr,
        "excess_loss": loss.excess,
        "weighted_alignment": result.net.weighted_alignment(teacher.theta_star),
        "train_residual": float(residual.abs().max()),
        "max_abs_y": float(y.abs().max()),
        "residual_allowance": fit_residual_allowance(result.net, X, y),
    }


def dictionary_search(X, y, activation, n_random: int, seed: int = 0, extra_directions=None) -> SearchResult:
    """Flattest interpolator over ``n_random`` random directions plus ``extra_directions``."""
    X, y = check_data(X, y)
    directions = random_directions(n_random, X.shape[1], seed=seed).to(X.device)
    if extra_directions is not None:
        extra = as_tensor(extra_directions, "extra_directions", ndim=2, device=X.device)
        directions = torch.cat([extra / extra.norm(dim=1, keepdim=True), directions])
    method = "dictionary" if extra_directions is None else "dictionary + extra directions"
    return SearchResult(method, flattest_outer_weights(directions, X, y, activation))


def _lagrangian_gradient(directions, solution, X, y, activation):
    """∂_U of Σ κ_j(U)|ã_j|^p − λᵀΦ(U)ã at fixed (ã, λ), projected on the spheres' tangent spaces."""
    U = directions.detach().clone().requires_grad_(True)
    u = U / U.norm(dim=1, keepdim=True)
    a, lam = solution.effective_a, solution.dual
    flatness = (unit_flatness_weights(u, X, activation) * a.abs() ** activation.p).sum()
    lagrangian = flatness - lam @ (activation(X @ u.T) @ a)
    (grad,) = torch.autograd.grad(lagrangian, U)
    return grad - (grad * directions).sum(1, keepdim=True) * directions


def direct_search(
    X, y, activation, start_directions, steps: int = 30, angle: float = 0.2, min_angle: float = 1e-4, constraint=None
) -> SearchResult:
    """Lower Υ over inner directions and outer weights together, every iterate an exact interpolator.

    Starts from ``start_directions`` (m, d); each step rotates every direction
    by at most ``angle`` radians along the negative envelope gradient, re-solves
    the convex program, and accepts the step only if Υ went down (else halves
    ``angle``, stopping below ``min_angle``).  ``constraint``, if given, maps
    directions back into a class after each step (e.g.
    :func:`flatbook.interpolators.alignment_projector` keeps them misaligned).
    """
    activation = get_activation(activation)
    X, y = check_data(X, y)
    directions = as_tensor(start_directions, "start_directions", ndim=2, device=X.device)
    directions = directions / directions.norm(dim=1, keepdim=True)
    if constraint is not None:
        directions = constraint(directions)
    if steps < 0 or not (0 < min_angle <= angle):
        raise FlatbookInputError("need steps >= 0 and 0 < min_angle <= angle.")
    solution = flattest_outer_weights(directions, X, y, activation)
    history = [solution.flatness]
    for _ in range(steps):
        grad = _lagrangian_gradient(directions, solution, X, y, activation)
        largest = float(grad.norm(dim=1).max())
        if largest == 0.0:
            break
        while angle >= min_angle:
            moved = directions - (angle / largest) * grad
            moved = moved / moved.norm(dim=1, keepdim=True)
            if constraint is not None:
                moved = constraint(moved)
            trial = flattest_outer_weights(moved, X, y, activation)
            if trial.flatness < solution.flatness:
                directions, solution = moved, trial
                history.append(solution.flatness)
                angle *= 1.5
                break
            angle /= 2.0
        else:
            break
    return SearchResult("direct search" if constraint is None else "constrained direct search", solution, history)
