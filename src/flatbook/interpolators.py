"""Inner weights with controlled alignment to the teacher: good, bad and in between.

A direction with alignment exactly ρ ∈ [0, 1] to span(Θ*) is
``u = ρ v∥ + sqrt(1 − ρ²) v⊥`` with v∥ a random unit vector in span(Θ*) and v⊥
a random unit vector in its orthogonal complement (book, notation chapter:
ρ(θ) = ‖P_{Θ*} θ‖ / ‖θ‖).  ρ = 0 gives the *bad* directions of chapter 3 (inner
weights orthogonal to the teacher); ρ = 1 gives directions inside the teacher
span.  Combined with :func:`~flatbook.flattest.flattest_outer_weights` these give the
interpolators that the chapters compare.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .activations import get_activation
from .backend import DTYPE, as_tensor, check_data, default_device
from .errors import FlatbookInputError
from .network import TwoLayerNet

__all__ = [
    "directions_with_alignment",
    "orthogonal_directions",
    "teacher_and_random_directions",
    "random_directions",
    "alignment_projector",
    "complement_basis",
    "memorising_network",
    "minimum_l2_interpolator",
]


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True)


def directions_with_alignment(theta_star, m: int, rho: float, seed: int = 0) -> torch.Tensor:
    """m random unit directions in R^d, each with alignment exactly ``rho`` to span(Θ*)."""
    theta_star = as_tensor(theta_star, "theta_star", ndim=2)
    k, d = theta_star.shape
    if not (0.0 <= rho <= 1.0 and math.isfinite(rho)):
        raise FlatbookInputError(f"rho must lie in [0, 1], got {rho!r}.")
    if rho < 1.0 and k >= d:
        raise FlatbookInputError(f"the teacher spans all of R^{d}, so no direction has alignment {rho} < 1; use k < d.")
    if not (isinstance(m, int) and m >= 1):
        raise FlatbookInputError(f"m must be a positive int, got {m!r}.")
    gen = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(theta_star.T.cpu()).Q  # (d, k), orthonormal basis of span Θ*
    inside = _unit_rows(torch.randn(m, k, generator=gen, dtype=DTYPE) @ basis.T)
    g = torch.randn(m, d, generator=gen, dtype=DTYPE)
    outside = _unit_rows(g - (g @ basis) @ basis.T)
    return (rho * inside + math.sqrt(1.0 - rho**2) * outside).to(theta_star.device)


def orthogonal_directions(theta_star, m: int, seed: int = 0) -> torch.Tensor:
    """m random unit directions orthogonal to span(Θ*): the misaligned, *bad* directions."""
    return directions_with_alignment(theta_star, m, 0.0, seed)


def teacher_and_random_directions(theta_star, m: int, seed: int = 0) -> torch.Tensor:
    """The k teacher directions followed by m − k random unit directions: a dictionary that
    contains the teacher, from which the flattest outer weights give a *good* interpolator."""
    theta_star = as_tensor(theta_star, "theta_star", ndim=2)
    k, d = theta_star.shape
    if m <= k:
        raise FlatbookInputError(f"need m > k = {k} neurons to add random directions, got m = {m}.")
    gen = torch.Generator().manual_seed(seed)
    random = _unit_rows(torch.randn(m - k, d, generator=gen, dtype=DTYPE)).to(theta_star.device)
    return torch.cat([theta_star, random])


def random_directions(m: int, d: int, seed: int = 0) -> torch.Tensor:
    """m directions uniform on the unit sphere of R^d (no relation to any teacher).

    Examples
    --------
    >>> import torch
    >>> from flatbook.interpolators import random_directions
    >>> u = random_directions(5, 3, seed=0)
    >>> u.shape, u.dtype
    (torch.Size([5, 3]), torch.float64)
    >>> torch.allclose(torch.linalg.vector_norm(u, dim=1), torch.ones(5, dtype=torch.float64))
    True
    """
    if not (isinstance(m, int) and m >= 1 and isinstance(d, int) and d >= 1):
        raise FlatbookInputError(f"m and d must be positive ints, got m={m!r}, d={d!r}.")
    gen = torch.Generator().manual_seed(seed)
    return _unit_rows(torch.randn(m, d, generator=gen, dtype=DTYPE)).to(default_device())


def alignment_projector(theta_star, rho: float):
    """The map that sends each direction u to the nearest-in-spirit direction with alignment exactly ρ:
    u ↦ ρ P u/‖P u‖ + sqrt(1 − ρ²) P⊥u/‖P⊥u‖, P the projection onto span(Θ*).

    Used to keep a search inside the class of misaligned (*bad*) interpolators.
    """
    theta_star = as_tensor(theta_star, "theta_star", ndim=2)
    if not (0.0 <= rho <= 1.0):
        raise FlatbookInputError(f"rho must lie in [0, 1], got {rho!r}.")
    basis = torch.linalg.qr(theta_star.T).Q

    def project(directions: torch.Tensor) -> torch.Tensor:
        inside = (directions @ basis) @ basis.T
        outside = directions - inside
        parts = math.sqrt(1.0 - rho**2) * _unit_rows(outside)
        if rho > 0:
            parts = parts + rho * _unit_rows(inside)
        return parts

    return project


def complement_basis(theta_star) -> torch.Tensor:
    """An orthonormal basis (d, d − k) of the orthogonal complement of span(Θ*): the directions with ρ = 0."""
    theta_star = as_tensor(theta_star, "theta_star", ndim=2)
    k, d = theta_star.shape
    if k >= d:
        raise FlatbookInputError(f"the teacher spans R^{d}: its orthogonal complement is {{0}}.")
    projector = torch.eye(d, dtype=theta_star.dtype, device=theta_star.device) - theta_star.T @ theta_star
    return torch.linalg.svd(projector).U[:, : d - k]


def memorising_network(X, y, within=None):
    """The ReLU network that memorises (eq. ``eq-memorising``), or None if some sample cannot be isolated.

    One neuron per sample with y_i ≠ 0, with a direction θ_i (in span(``within``), a (d, r) orthonormal
    basis, if given) such that ⟨θ_i, x_i⟩ ≥ 1 and ⟨θ_i, x_j⟩ ≤ −1 for j ≠ i, found by a feasibility
    linear program, and outer weight a_i = y_i / ⟨θ_i, x_i⟩.  Each neuron fires on its own sample only,
    so the network interpolates and its Υ is :func:`~flatbook.flatness.relu_memorising_flatness`.
    None when a linear program is infeasible: that sample lies in the cone of the others (projected).
    """
    from scipy.optimize import linprog

    X, y = check_data(X, y)
    n, d = X.shape
    W = torch.eye(d, dtype=X.dtype, device=X.device) if within is None else as_tensor(within, "within", ndim=2)
    if W.shape[0] != d:
        raise FlatbookInputError(f"within has {W.shape[0]} rows but X has d = {d} columns.")
    Xw = (X @ W).cpu().numpy()
    thetas, weights = [], []
    for i in torch.nonzero(y != 0).flatten().tolist():
        sign = np.ones(n)
        sign[i] = -1.0  # sign_j ⟨θ, x_j⟩ ≤ −1: ⟨θ, x_i⟩ ≥ 1 and ⟨θ, x_j⟩ ≤ −1 for the others
        result = linprog(
            c=np.zeros(W.shape[1]), A_ub=sign[:, None] * Xw, b_ub=-np.ones(n), bounds=(None, None), method="highs"
        )
        if result.status != 0:
            return None
        theta = W @ torch.as_tensor(result.x, dtype=X.dtype, device=X.device)
        thetas.append(theta)
        weights.append(y[i] / (theta @ X[i]))
    return TwoLayerNet(torch.stack(weights), torch.stack(thetas), get_activation("relu"))


def minimum_l2_interpolator(X, y, activation, directions) -> TwoLayerNet:
    """Outer weights a = Φ⁺y of least ℓ2 norm on fixed inner weights (Φ_ij = σ(⟨θ_j, x_i⟩)): the
    random-features interpolator, chapter 4's negative control.  Raises if it does not interpolate."""
    activation = get_activation(activation)
    X, y = check_data(X, y)
    directions = as_tensor(directions, "directions", ndim=2, device=X.device)
    if directions.shape[1] != X.shape[1]:
        raise FlatbookInputError(f"directions have d = {directions.shape[1]} columns but X has {X.shape[1]}.")
    Phi = activation(X @ directions.T)
    net = TwoLayerNet(torch.linalg.pinv(Phi) @ y, directions, activation)
    residual = float((net(X) - y).abs().max())
    if residual > 1e-6 * max(1.0, float(y.abs().max())):
        raise FlatbookInputError(
            f"the minimum-ℓ2 outer weights leave a training residual {residual:.2e}: the {directions.shape[0]} "
            f"features do not span the {X.shape[0]} labels; use more directions (m ≥ n, rank n)."
        )
    return net
