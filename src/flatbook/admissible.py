"""The directions an interpolator may use: every direction, or those with alignment ρ(u) ≤ ρ0.

Chapter 3's ρ0-bad interpolators use only directions with ρ(u) = ‖Θ* u‖ ≤ ρ0 (u a unit vector, Θ* the
teacher's orthonormal rows).  For ρ0 = 0 that is the unit sphere of the orthogonal complement of the
teacher's span; for 0 < ρ0 < 1 a band around it, which spans all of R^d.  :class:`AdmissibleSet` holds the
set, the smallest subspace containing it (where pricing and sampling run), and the projection that moves
any direction into it.
"""

from __future__ import annotations

import math

import torch

from .backend import as_tensor
from .errors import FlatbookInputError
from .interpolators import complement_basis

__all__ = ["AdmissibleSet"]


class AdmissibleSet:
    """Every direction (``teacher`` and ``max_alignment`` None), or the unit u with ‖Θ* u‖ ≤ ρ0.

    Attributes: ``basis`` (d, r) orthonormal columns spanning the smallest subspace that contains the set;
    ``teacher`` (k, d) and ``max_alignment`` ρ0 (None for every direction); ``description`` in words.
    """

    def __init__(self, d: int, teacher=None, max_alignment=None, device=None):
        self.d = d
        self.teacher: torch.Tensor | None = None
        self.max_alignment: float | None = None
        if teacher is None and max_alignment is None:
            self.basis = torch.eye(d, dtype=torch.float64, device=device)
            self.description = "all directions"
            return
        if teacher is None or max_alignment is None:
            raise FlatbookInputError(
                "teacher and max_alignment go together: pass both (the flattest ρ0-bad "
                "interpolator) or neither (the flattest interpolator)."
            )
        theta_star = as_tensor(teacher, "teacher", ndim=2, device=device)
        if theta_star.shape[1] != d:
            raise FlatbookInputError(f"teacher has {theta_star.shape[1]} columns but X has d = {d}.")
        k = theta_star.shape[0]
        if float((theta_star @ theta_star.T - torch.eye(k, dtype=theta_star.dtype, device=device)).abs().max()) > 1e-8:
            raise FlatbookInputError(
                "the teacher's rows must be orthonormal (Θ* Θ*ᵀ = I); orthonormalise them "
                "first, e.g. with torch.linalg.qr(theta.T).Q.T."
            )
        rho0 = float(max_alignment)
        if not (0.0 <= rho0 < 1.0 and math.isfinite(rho0)):
            raise FlatbookInputError(
                f"max_alignment must lie in [0, 1), got {max_alignment!r}; "
                "ρ0 = 1 admits every direction (omit teacher and max_alignment)."
            )
        if k >= d:
            raise FlatbookInputError(f"the teacher spans R^{d}: no direction has alignment below 1.")
        self.teacher, self.max_alignment = theta_star, rho0
        if rho0 == 0.0:
            self.basis = complement_basis(theta_star)
            self.description = "directions orthogonal to the teacher (ρ = 0)"
        else:
            self.basis = torch.eye(d, dtype=theta_star.dtype, device=device)
            self.description = f"directions with ρ ≤ {rho0:g}"

    @property
    def r(self) -> int:
        """The dimension of the smallest subspace containing the set."""
        return self.basis.shape[1]

    @property
    def whole_subsphere(self) -> bool:
        """Whether the set is the whole unit sphere of span(``basis``) (no band to stay inside)."""
        return self.max_alignment is None or self.max_alignment == 0.0

    @property
    def subspace(self) -> torch.Tensor | None:
        """``basis`` where it spans a proper subspace, None where it spans R^d (the convention of
        :mod:`flatbook.pricing`, which treats None as the whole sphere)."""
        return self.basis if self.r < self.d else None

    def alignment(self, U: torch.Tensor) -> torch.Tensor:
        """ρ(u) = ‖Θ* u‖ / ‖u‖ for each row (zeros for every direction)."""
        if self.teacher is None:
            return U.new_zeros(U.shape[0])
        return torch.linalg.vector_norm(U @ self.teacher.T, dim=1) / torch.linalg.vector_norm(U, dim=1)

    def project(self, U: torch.Tensor) -> torch.Tensor:
        """Unit rows in the set: normalised, and for ρ0 > 0 moved along the great circle away from the
        teacher's span until ρ = ρ0 where it was larger (for ρ0 = 0, onto the complement)."""
        U = U / torch.linalg.vector_norm(U, dim=1, keepdim=True)
        if self.teacher is None or self.max_alignment is None:
            return U
        rho0 = self.max_alignment
        inside = (U @ self.teacher.T) @ self.teacher
        outside = U - inside
        norm_in = torch.linalg.vector_norm(inside, dim=1, keepdim=True)
        norm_out = torch.linalg.vector_norm(outside, dim=1, keepdim=True).clamp_min(1e-300)
        clipped = rho0 * inside / norm_in.clamp_min(1e-300) + math.sqrt(1 - rho0**2) * outside / norm_out
        return torch.where((norm_in > rho0)[:, 0, None], clipped, U)

    def random(self, count: int, generator: torch.Generator) -> torch.Tensor:
        """``count`` random directions in the set: Gaussian in span(``basis``), projected."""
        U = torch.randn(count, self.d, generator=generator, dtype=torch.float64).to(self.basis.device)
        if self.r < self.d:
            U = U @ self.basis @ self.basis.T
        return self.project(U)
