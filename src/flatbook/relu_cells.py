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

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .backend import check_data
from .errors import FlatbookInputError, SolverError
from .pricing import arrangement_faces


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


__all__ = ["PatternProgramResult", "activation_patterns", "all_activation_patterns", "flattest_relu_over_patterns"]
