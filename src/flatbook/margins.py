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
from typing import NamedTuple

import numpy as np
import scipy.optimize
import torch

from .backend import check_binary_labels, check_data
from .errors import FlatbookInputError
from .mirror import Potential, get_potential, neuron_cost_exponent
from .network import forward

__all__ = [
    "network_degree",
    "parameters",
    "smallest_margin",
    "normalised_margin",
    "q_margin",
    "neuron_cost_margin",
    "KKTResidual",
    "kkt_residual",
    "rebalanced",
]


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


def _same_horizon(
    outer: Potential | str, inner: Potential | str | None, what: str, advice: str = ""
) -> tuple[Potential, Potential]:
    """The two layers' potentials (inner defaults to outer), which must share the horizon degree α."""
    outer = get_potential(outer)
    inner = outer if inner is None else get_potential(inner)
    if outer.horizon_degree != inner.horizon_degree:
        raise FlatbookInputError(
            f"{what} needs one horizon degree for both layers, got α = {outer.horizon_degree} (outer) "
            f"and {inner.horizon_degree} (inner){advice}."
        )
    return outer, inner


def q_margin(net, X, y, outer: Potential | str, inner: Potential | str | None = None) -> float:
    """min_i y_i h(w, x_i) / (α Q(∇R(w)))^{L/α}, the margin in the potential's own geometry (eq. ``eq-q-margin``).

    Both layers' potentials must share the horizon degree α.
    """
    outer, inner = _same_horizon(outer, inner, "the Q-margin", "; use normalised_margin with a fixed norm instead")
    alpha = outer.horizon_degree
    dual = float(outer.dual_potential(net.a) + inner.dual_potential(net.theta))
    if dual <= 0:
        raise FlatbookInputError("Q(∇R(w)) = 0: the network is at the potential's minimum, margin undefined.")
    return smallest_margin(net, X, y) / (alpha * dual) ** (network_degree(net) / alpha)


def neuron_cost_margin(net, X, y, outer: Potential | str, inner: Potential | str | None = None) -> float:
    """min_i y_i h(x_i) / (Σ_j |ã_j|^q)^{1/q}, |ã_j| = |a_j| ‖θ_j‖_{α_θ}^c, q = α_a α_θ / (α_θ + c α_a).

    The margin in the geometry the potentials' max-margin problem charges per neuron (q from
    :func:`flatbook.mirror.neuron_cost_exponent`, book eq. ``eq-neuron-cost``), for layer-wise potentials of
    any horizon degrees: invariant under rescaling a neuron and under scaling the whole network, so it
    compares the *functions* that runs reach.
    """
    outer = get_potential(outer)
    inner = outer if inner is None else get_potential(inner)
    q = neuron_cost_exponent(outer, inner, net.activation.degree)
    norms = torch.linalg.vector_norm(net.theta, ord=inner.horizon_degree, dim=1)
    cost = float(((net.a.abs() * norms**net.activation.degree) ** q).sum())
    if cost == 0:
        raise FlatbookInputError("every neuron has ã_j = 0: the network is zero and its margin undefined.")
    return smallest_margin(net, X, y) / cost ** (1 / q)


class KKTResidual(NamedTuple):
    """How far a direction is from a KKT point of the max-margin problem (result of :func:`kkt_residual`)."""

    relative: float  #: the least residual of eq. ``eq-kkt`` over μ ≥ 0, relative to ‖∇φ^α‖ off the zero coordinates
    multipliers: torch.Tensor  #: the minimising μ_i ≥ 0, one per active sample
    active: torch.Tensor  #: indices i of the samples with margin ≤ 1 + active_tol (after scaling)
    zero: torch.Tensor  #: per parameter (a, then θ row by row), True where the ℓ₁ horizon counts it as zero


def _light(size: torch.Tensor, zero_tol: float, zero_mass: float) -> torch.Tensor:
    """Entries of the non-negative ``size`` at most ``zero_tol`` × the largest, and the smallest ones that together
    carry at most ``zero_mass`` of the sum (a mask; every entry when all are zero)."""
    light = size <= zero_tol * size.max()
    if zero_mass > 0:
        order = torch.argsort(size)
        light[order[torch.cumsum(size[order], 0) <= zero_mass * size.sum()]] = True
    return light


def _zero_coordinates(net, inner: Potential, zero_tol: float, zero_mass: float) -> torch.Tensor:
    """The ℓ₁ horizon's zero coordinates, by a rule that rescaling a neuron, (s^{−c} a_j, s θ_j), or the whole
    network leaves unchanged: a neuron whose effective weight |ã_j| = |a_j| ‖θ_j‖^c (the inner horizon) is light
    among all neurons' (:func:`_light`) counts as zero in every coordinate; in the other neurons, a coordinate
    θ_jk light among |θ_j1|, …, |θ_jd| does."""
    theta = net.theta.detach()
    norms = torch.stack([inner.horizon(theta_j) for theta_j in theta])
    dead = _light(net.a.detach().abs() * norms**net.activation.degree, zero_tol, zero_mass)
    within = torch.stack([_light(theta_j.abs(), zero_tol, zero_mass) for theta_j in theta])
    return torch.cat([dead, (within | dead[:, None]).reshape(-1)])


def _least_residual(jacobian, gradient, zero) -> tuple:
    """min over μ ≥ 0 of ½‖g_s − J_sᵀμ‖² + ½‖(|J_zᵀμ| − 1)₊‖² (s the smooth coordinates, z the zero ones, whose
    subgradient may be anything in [−1, 1]): convex and continuously differentiable, so L-BFGS-B with bounds, from
    the non-negative least-squares fit on the smooth coordinates. Returns (μ, the residual vector)."""
    J, g = jacobian.cpu().numpy(), gradient.detach().cpu().numpy()
    smooth, zero = (~zero).cpu().numpy(), zero.cpu().numpy()
    start, _ = scipy.optimize.nnls(J[:, smooth].T, g[smooth])

    def residual(mu):
        combination = J.T @ mu
        return g[smooth] - combination[smooth], combination[zero]

    if zero.any():

        def objective(mu):
            fit, free = residual(mu)
            excess = np.sign(free) * np.clip(np.abs(free) - 1, 0, None)
            gradient_mu = -J[:, smooth] @ fit + J[:, zero] @ excess
            return 0.5 * (fit @ fit + excess @ excess), gradient_mu

        found = scipy.optimize.minimize(
            objective,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0, None)] * len(start),
            options={"ftol": 1e-15, "gtol": 1e-13, "maxiter": 10_000},
        )
        mu = found.x if found.fun <= objective(start)[0] else start
    else:
        mu = start
    fit, free = residual(mu)
    return mu, np.concatenate([fit, np.clip(np.abs(free) - 1, 0, None)])


def kkt_residual(
    net,
    X,
    y,
    outer: Potential | str,
    inner: Potential | str | None = None,
    *,
    active_tol: float = 1e-2,
    zero_tol: float = 1e-6,
    zero_mass: float = 0.0,
) -> KKTResidual:
    """Stationarity residual of the direction of ``net`` for min φ_α(w)^α s.t. y_i h(w, x_i) ≥ 1 (eq. ``eq-kkt``).

    The network is scaled (along its direction) so that its smallest margin is 1; the active set is
    the samples with margin ≤ 1 + ``active_tol``; the residual is the least, over μ ≥ 0, of the distance of
    Σ_{i active} μ_i ∇_w y_i h(w, x_i) from the subdifferential of φ^α = φ_α(a)^α + φ_α(θ)^α (the horizon of
    the layer potentials), relative to ‖∇φ^α‖ on the coordinates not counted as zero.  For α = 1 (the ℓ₁
    horizon) a zero coordinate's subgradient may be anything in [−1, 1], so it adds only
    max(0, |(Σ μ_i ∇ y_i h)_k| − 1); the zero coordinates are chosen by a rule invariant under rescaling
    (:func:`_zero_coordinates`): neurons whose |ã_j| is at most ``zero_tol`` × the largest, or among the lightest
    carrying ``zero_mass`` of Σ|ã_j|, and within the other neurons the entries of θ_j so light among θ_j's (a
    finite run shrinks what the ℓ₁ limit sets to zero only slowly).  0 at a KKT point; the minimiser of φ needs
    it, so a clearly positive value says the direction is not (yet) one.
    """
    X, y = check_data(X, y, net.input_dim)
    check_binary_labels(y, "a KKT residual")
    outer, inner = _same_horizon(outer, inner, "the max-margin problem")
    for name, value in (("active_tol", active_tol), ("zero_tol", zero_tol)):
        if not (math.isfinite(value) and value >= 0):
            raise FlatbookInputError(f"{name} must be a finite number >= 0, got {value!r}.")
    if not 0 <= zero_mass < 1:
        raise FlatbookInputError(f"zero_mass must lie in [0, 1) (a fraction of Σ|ã_j|), got {zero_mass!r}.")
    margin = smallest_margin(net, X, y)
    if margin <= 0:
        raise FlatbookInputError(
            f"the network misclassifies a sample (smallest margin {margin:.3g}): the max-margin problem's "
            "constraints are infeasible along this direction; train until every margin is positive."
        )
    alpha, m = outer.horizon_degree, net.width
    w = (parameters(net) / margin ** (1 / network_degree(net))).detach().requires_grad_(True)

    def margins(v):
        return y * forward(v[:m], v[m:].reshape(net.theta.shape), X, net.activation)

    active = torch.nonzero(margins(w.detach()) <= 1 + active_tol).flatten()
    jacobian = torch.autograd.functional.jacobian(margins, w.detach())[active]  # (|A|, P)
    objective = outer.horizon(w[:m]) ** alpha + inner.horizon(w[m:]) ** alpha
    (gradient,) = torch.autograd.grad(objective, w)
    if alpha == 1:
        zero = _zero_coordinates(net, inner, zero_tol, zero_mass)
    else:
        zero = torch.zeros(w.numel(), dtype=torch.bool, device=w.device)
    scale = float(gradient[~zero].norm())
    if scale == 0:
        raise FlatbookInputError(
            "every coordinate counts as zero, so the residual has nothing to be relative to; lower zero_mass or "
            "zero_tol."
        )
    mu, residual = _least_residual(jacobian, gradient, zero)
    mu_t = torch.as_tensor(mu, dtype=w.dtype, device=w.device)
    return KKTResidual(float(np.linalg.norm(residual)) / scale, mu_t, active, zero)


def rebalanced(net, outer: Potential | str, inner: Potential | str | None = None):
    """The network on the rescaling orbit of ``net`` (the same function) where the max-margin problem's objective
    φ_α(a)^α + φ_α(θ)^α of eq. ``eq-kkt`` is least.

    The horizons are norms whose α-th power adds over coordinates (the ℓ_α horizons), so the objective is a sum
    over neurons; along (s^{−c} a_j, s θ_j) neuron j contributes A s^{−cα} + T s^{α} with A = φ(a_j)^α and
    T = φ(θ_j)^α, least at s^{α(1+c)} = cA/T.  A KKT point is stationary along every such rescaling, which keeps
    every margin, so it is balanced in this sense; comparing another direction with it in this problem's KKT
    conditions is fair only after this re-balance.  A neuron with a_j = 0 or θ_j = 0 is left as it is."""
    outer, inner = _same_horizon(outer, inner, "the re-balance")
    alpha, c = outer.horizon_degree, net.activation.degree
    A = torch.stack([outer.horizon(a_j.reshape(1)) for a_j in net.a]) ** alpha
    T = torch.stack([inner.horizon(theta_j) for theta_j in net.theta]) ** alpha
    live = (A > 0) & (T > 0)
    scale = torch.ones_like(A)
    scale[live] = (c * A[live] / T[live]) ** (1.0 / (alpha * (1.0 + c)))
    return net.rescale(scale)
