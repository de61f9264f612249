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

import torch

from .backend import DTYPE, as_tensor, default_device
from .errors import FlatbookInputError

__all__ = [
    "directions_with_alignment",
    "orthogonal_directions",
    "teacher_and_random_directions",
    "random_directions",
    "alignment_projector",
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
        raise FlatbookInputError(
            f"the teacher spans all of R^{d}, so no direction has alignment {rho} < 1; use k < d."
        )
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
    """m directions uniform on the unit sphere of R^d (no relation to any teacher)."""
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
