"""Normalised margins of the two-layer network on ±1 labels, the quantities max-margin theory is about.

The network is homogeneous of degree L = 1 + c in all its parameters
w = (a, θ), so ``min_i y_i h(w, x_i) / N(w)^L`` is scale-invariant for any norm
N.  Gradient descent maximises it for N = ‖·‖₂ (Lyu & Li, 2020); mirror descent
maximises it for its horizon function φ_α (book, chapter 6, eq. ``eq-horizon``),
whose finite-time stand-in is the *Q-margin* (eq. ``eq-q-margin``), with N(w) =
(α Q(∇R(w)))^{1/α}.
"""

from __future__ import annotations

import math

import torch

from .backend import check_binary_labels, check_data
from .errors import FlatbookInputError
from .mirror import Potential, get_potential

__all__ = ["network_degree", "parameters", "smallest_margin", "normalised_margin", "q_margin"]


def network_degree(net) -> float:
    """L = 1 + c: h(λw, x) = λ^L h(w, x) for λ > 0."""
    return 1.0 + net.activation.degree


def parameters(net) -> torch.Tensor:
    """All parameters (a, θ) as one vector."""
    return torch.cat([net.a, net.theta.reshape(-1)])


def smallest_margin(net, X, y) -> float:
    """min_i y_i h(w, x_i) (positive iff the network classifies every point correctly)."""
    X, y = check_data(X, y, net.input_dim)
    check_binary_labels(y, "a margin")
    return float((y * net(X)).min())


def normalised_margin(net, X, y, norm: float = 2.0) -> float:
    """min_i y_i h(w, x_i) / ‖w‖_norm^L over all parameters w = (a, θ), L = 1 + c."""
    if not (norm >= 1 or norm == math.inf):
        raise FlatbookInputError(f"norm must be >= 1 (a norm of the parameters), got {norm!r}.")
    size = torch.linalg.vector_norm(parameters(net), ord=norm)
    if float(size) == 0:
        raise FlatbookInputError("the network has all parameters zero: its normalised margin is undefined.")
    return smallest_margin(net, X, y) / float(size) ** network_degree(net)


def q_margin(net, X, y, outer: Potential | str, inner: Potential | str | None = None) -> float:
    """min_i y_i h(w, x_i) / (α Q(∇R(w)))^{L/α}, the margin in the potential's own geometry (eq. ``eq-q-margin``).

    Both layers' potentials must share the horizon degree α.
    """
    outer = get_potential(outer)
    inner = outer if inner is None else get_potential(inner)
    if outer.horizon_degree != inner.horizon_degree:
        raise FlatbookInputError(
            f"the Q-margin needs one horizon degree for both layers, got α = {outer.horizon_degree} (outer) "
            f"and {inner.horizon_degree} (inner); use normalised_margin with a fixed norm instead.")
    alpha = outer.horizon_degree
    dual = float(outer.dual_potential(net.a) + inner.dual_potential(net.theta))
    if dual <= 0:
        raise FlatbookInputError("Q(∇R(w)) = 0: the network is at the potential's minimum, margin undefined.")
    return smallest_margin(net, X, y) / (alpha * dual) ** (network_degree(net) / alpha)
