"""The flattest ReLU interpolator as a convex group-norm program over activation patterns.

On a cell of the data's hyperplane arrangement the activation pattern D = {i : ⟨u, x_i⟩ > 0}
is fixed and the ReLU network is linear: ã σ(⟨u, x_i⟩) = ±⟨v, x_i⟩ 1{i ∈ D} with v = |ã| u
in the closed cone C_D = {v : ⟨v, x_i⟩ ≥ 0 for i ∈ D, ≤ 0 otherwise}.  Its flatness weight is
κ(u) = 2 (S T)^{1/2} with S = (2/n) ‖X_D u‖² and T = (2/n) Σ_{i∈D} ‖x_i‖², so (book, chapter 2,
eq. ``eq-relu-cells``)::

    κ(u) |ã| = (4/n) ‖X_D v‖ (Σ_{i∈D} ‖x_i‖²)^{1/2},

and the measure program V* (= Υ* for the ReLU, p = 1) becomes the second-order cone program

    min Σ_D c_D (‖X_D v_D⁺‖ + ‖X_D v_D⁻‖)   s.t.   Σ_D X_D (v_D⁺ − v_D⁻) = y,   v_D± ∈ C_D,

with c_D = (4/n)(Σ_{i∈D}‖x_i‖²)^{1/2}: one closed-cone variable per pattern and sign, in the
spirit of the convex reformulations of Pilanci & Ergen (2020).  It is exact when every pattern
is listed (:func:`all_activation_patterns`, d ≤ 3) and an upper bound on V* with sampled
patterns.  On a cell's boundary the true κ is smaller (σ'(0) = 0), but that boundary is a
cell of a smaller pattern, so the minimum over all patterns is unchanged.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .activations import HomogeneousActivation, get_activation
from .backend import check_data
from .errors import FlatbookInputError, SolverError
from .flatness import unit_flatness_weights
from .pricing import arrangement_faces, face_geometry, nudge_inactive


@dataclass
class PatternProgramResult:
    """Optimum of the group-norm program over the given activation patterns."""

    value: float  #: Σ_D c_D (‖X_D v_D⁺‖ + ‖X_D v_D⁻‖) at the optimum (V over these cells)
    directions: torch.Tensor  #: (K, d) unit directions of the cells that carry weight
    weights: torch.Tensor  #: (K,) their effective outer weights ã (signed)
    patterns: torch.Tensor  #: (P, n) the patterns used (boolean)


def activation_patterns(X, directions) -> torch.Tensor:
    """The distinct activation patterns 1{⟨u_j, x_i⟩ > 0} of the given directions: (P, n) booleans."""
    X = torch.as_tensor(X, dtype=torch.float64)
    U = torch.as_tensor(directions, dtype=torch.float64, device=X.device)
    patterns = torch.unique((U @ X.T) > 0, dim=0)
    return patterns[patterns.any(dim=1)]


def all_activation_patterns(X) -> torch.Tensor:
    """Every non-empty activation pattern of the full-dimensional cells, for d ≤ 3 (exact)."""
    X, _ = check_data(X, torch.zeros(X.shape[0], dtype=torch.float64))
    if X.shape[1] > 3:
        raise FlatbookInputError(
            f"enumerating every cell needs d <= 3 (got d = {X.shape[1]}); "
            "sample patterns with activation_patterns(X, directions) instead."
        )
    _, _, spans, patterns = arrangement_faces(X)
    full = spans[:, :, -1].abs().sum(1) > 0  # full-dimensional cells have a full basis
    cells = torch.unique(patterns[full] > 0, dim=0)
    return cells[cells.any(dim=1)]


def flattest_relu_over_patterns(X, y, patterns, solver: str = "CLARABEL") -> PatternProgramResult:
    """Solve the group-norm SOCP of eq. ``eq-relu-cells`` over ``patterns`` with cvxpy (the reference).

    Raises :class:`~flatbook.errors.SolverError` if the solver fails or the patterns cannot interpolate y.
    """
    import cvxpy as cp

    X, y = check_data(X, y)
    patterns = torch.as_tensor(patterns, dtype=torch.bool, device=X.device)
    Xn, yn = X.cpu().numpy(), y.cpu().numpy()
    n, d = Xn.shape
    sq = (Xn**2).sum(1)
    total = 0
    objective, constraints, variables = [], [], []
    for pattern in patterns.cpu().numpy():
        XD = Xn * pattern[:, None]
        cost = 4.0 / n * np.sqrt(sq[pattern].sum())
        signs = np.where(pattern, 1.0, -1.0)
        pair = []
        for _ in range(2):
            v = cp.Variable(d)
            constraints.append(cp.multiply(signs, Xn @ v) >= 0)
            objective.append(cost * cp.norm(XD @ v))
            pair.append(v)
        variables.append((pattern, pair))
        total = total + XD @ (pair[0] - pair[1])
    constraints.append(total == yn)
    try:
        with warnings.catch_warnings():
            # One norm per pattern and sign cannot be vectorised; cvxpy's hint about compile time is moot.
            warnings.filterwarnings("ignore", message="Objective contains too many subexpressions")
            problem = cp.Problem(cp.Minimize(cp.sum(cp.hstack(objective))), constraints)
            problem.solve(solver=solver)
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy/{solver} failed on the ReLU pattern program: {exc}") from exc
    if problem.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(
            f"cvxpy/{solver} returned {problem.status!r} on the ReLU pattern program "
            "(too few patterns to interpolate?)."
        )
    dirs, weights = [], []
    for _, (plus, minus) in variables:
        for v, sign in ((plus, 1.0), (minus, -1.0)):
            value = np.asarray(v.value)  # set: the problem was solved
            size = float(np.linalg.norm(value))
            if size > 1e-9:
                dirs.append(value / size)
                weights.append(sign * size)
    return PatternProgramResult(
        value=float(problem.value),
        directions=torch.as_tensor(np.array(dirs).reshape(-1, d), dtype=X.dtype),
        weights=torch.as_tensor(np.array(weights), dtype=X.dtype),
        patterns=patterns,
    )


@dataclass
class KappaInfimum:
    """κ_inf = min over the unit sphere of the flatness weight κ(u), and a direction where it is attained."""

    value: float  #: κ_inf (0 when some direction activates no sample of the ReLU)
    #: (d,) a unit u where κ attains κ_inf: at a ray of the arrangement or on a hyperplane, the samples it is
    #: orthogonal to count as inactive (σ'(0) is the negative slope), which round-off's sign of ⟨u, x_i⟩ may not
    direction: torch.Tensor
    #: (d,) ``direction`` moved off those hyperplanes into the face where they are inactive, to ⟨u, x̂_i⟩ =
    #: −``FACE_NUDGE`` for each of them (the least move that does it): κ evaluated there
    #: (:func:`~flatbook.flatness.unit_flatness_weights`) is at most κ_inf (1 + ``INSIDE_KAPPA_TOL``), checked
    inside: torch.Tensor


#: faces of the arrangement handled at once (memory: faces × d × n floats)
FACE_CHUNK = 8192
#: how far :attr:`KappaInfimum.inside` moves off the hyperplanes its direction lies on (far above round-off, so
#: the samples' signs there are certain; κ changes by a comparable relative amount)
FACE_NUDGE = 1e-9
#: the relative amount by which κ at :attr:`KappaInfimum.inside` may exceed κ_inf: the nudge's first-order change,
#: with room for its coefficient; :func:`kappa_infimum` checks it on every call
INSIDE_KAPPA_TOL = 1e-6


def kappa_infimum(X, activation: HomogeneousActivation | str = "relu") -> KappaInfimum:
    """κ_inf = inf_{‖u‖=1} κ(u) exactly, for the ReLU family in d ≤ 3 (book, chapter 4, eq. ``eq-path-norm``).

    On a face of the data's arrangement with sign pattern P the slopes s_i = σ'(P_i) are fixed (σ'(0) the
    negative slope), so κ(u)² = 4 S T with T = (2/n) Σ_i s_i² ‖x_i‖² constant and S = (2/n) uᵀ M_P u,
    M_P = Σ_i s_i² x_i x_iᵀ.  On the closed face the minimum of this quadratic form is at a critical point in
    the face's relative interior (an eigenvector of M_P compressed to the face's span) or on a smaller face,
    where κ is at most the larger face's limit (z_i = 0 there, and a slope only falls from 1 to the negative
    slope).  So κ_inf is the smallest κ over the arrangement's rays and the eigenvectors inside their faces.
    Needs data in general position (every face touches a ray, :func:`~flatbook.pricing.arrangement_faces`); a
    :class:`~flatbook.errors.SolverError` where κ at the returned ``inside`` exceeds κ_inf (1 + ``INSIDE_KAPPA_TOL``).
    """
    X, _ = check_data(X, torch.zeros(X.shape[0], dtype=torch.float64))
    activation = get_activation(activation)
    n, d = X.shape
    if not activation.piecewise_linear or d > 3:
        raise FlatbookInputError(
            f"κ_inf is computed exactly for the ReLU family in d <= 3 (got {activation.name!r}, d = {d}); "
            "elsewhere bound it from above by κ at sampled directions (flatbook.flatness.unit_flatness_weights)."
        )
    rays, ray_patterns, spans, patterns = arrangement_faces(X)
    if rays.shape[0] == 0:
        raise FlatbookInputError(
            "the samples are all parallel (their arrangement has no ray): κ_inf needs at least two "
            "non-parallel samples; in that case a direction orthogonal to them activates none."
        )
    slope = float(getattr(activation, "negative_slope", 0.0))
    sq_norms = (X * X).sum(1)
    # at a ray, the samples it is orthogonal to are taken on their hyperplanes (σ'(0)), not by round-off's sign
    kappa = face_geometry(X, sq_norms, rays, ray_patterns, slope)[1]
    best = int(torch.argmin(kappa))
    value, direction = float(kappa[best]), rays[best]
    for start in range(0, patterns.shape[0], FACE_CHUNK):
        pattern, span = patterns[start : start + FACE_CHUNK], spans[start : start + FACE_CHUNK]
        s2 = torch.where(pattern > 0, torch.ones_like(pattern), torch.full_like(pattern, slope)) ** 2
        M = torch.einsum("fi,ij,ik->fjk", s2, X, X)
        _, vectors = torch.linalg.eigh(span.transpose(1, 2) @ M @ span)
        U = (span @ vectors).transpose(1, 2).reshape(-1, d)  # each face's critical directions, zero-padded
        face_patterns = pattern.repeat_interleave(d, dim=0)
        real = torch.linalg.vector_norm(U, dim=1) > 0.5
        U, face_patterns = U[real], face_patterns[real]
        _, face_kappa, plus_inside, minus_inside = face_geometry(X, sq_norms, U, face_patterns, slope)
        for sign, inside in ((1.0, plus_inside), (-1.0, minus_inside)):
            if inside.any():
                candidates = torch.where(inside, face_kappa, torch.full_like(face_kappa, math.inf))
                at = int(torch.argmin(candidates))
                if float(candidates[at]) < value:
                    value, direction = float(candidates[at]), sign * U[at]
    direction = direction / torch.linalg.vector_norm(direction)
    # off the hyperplanes the direction lies on, to each sample's inactive side (the least move to ⟨u, x̂_i⟩ =
    # −FACE_NUDGE for each of them)
    inside = nudge_inactive(direction[None], X, FACE_NUDGE)[0]
    inside = inside / torch.linalg.vector_norm(inside)
    # the move may activate a sample within the nudge of its hyperplane (data far from general position): then κ
    # jumps, and no point of the face near ``direction`` is returned
    reached = float(unit_flatness_weights(inside[None], X, activation)[0])
    if not reached <= value * (1.0 + INSIDE_KAPPA_TOL):
        raise SolverError(
            f"κ at κ_inf's direction moved off its hyperplanes is {reached:.9g}, above κ_inf = {value:.9g}: the "
            "samples are too close to general position's degeneracies (several on one hyperplane through the "
            "direction); perturb them slightly."
        )
    return KappaInfimum(value=value, direction=direction, inside=inside)


__all__ = [
    "KappaInfimum",
    "PatternProgramResult",
    "activation_patterns",
    "all_activation_patterns",
    "flattest_relu_over_patterns",
    "kappa_infimum",
    "FACE_NUDGE",
    "INSIDE_KAPPA_TOL",
]
