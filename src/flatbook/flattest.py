"""The flattest outer weights for fixed inner directions: a convex program and its dual.

For inner directions u_j and features Φ_ij = σ(⟨u_j, x_i⟩), every interpolator
with those directions has Υ = Σ_j κ_j |ã_j|^p with Φ ã = y (book, chapter 2,
eq. ``eq-primal``), so the flattest of them solves::

    min_ã  Σ_j κ_j |ã_j|^p   subject to  Φ ã = y,         p = 2c/(c+1).

Its Lagrange dual (eq. ``eq-dual``) is, with v = Φᵀλ and q = p/(p−1),::

    p > 1:  max_λ  λᵀy − (1/q) Σ_j (p κ_j)^{1−q} |v_j|^q
    p = 1:  max_λ  λᵀy   subject to  |v_j| ≤ κ_j  for all j,

and by weak duality any λ (any *feasible* λ when p = 1) gives a lower bound
``λᵀy − ...`` on Υ of every interpolator with these directions.

The primal is solved with cvxpy + Clarabel, then polished and certified here:
for p > 1 by a few Newton steps on the smooth dual (the primal point is
ã_j = (p κ_j)^{1−q} sign(v_j) |v_j|^{q−1}, so interpolation holds to round-off at
the dual optimum); for p = 1 by re-solving Φ_S ã_S = y on the support S and
scaling λ into the dual-feasible set.  The result reports the interpolation
residual and the duality gap, and a :class:`~flatbook.errors.SolverError` is
raised if either misses its tolerance.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .activations import get_activation
from .backend import as_tensor, check_data
from .errors import FlatbookInputError, InfeasibleInterpolationError, SolverError
from .flatness import flatness_weights, orbit_flatness
from .network import TwoLayerNet


@dataclass
class FlattestResult:
    """Solution of the flattest-interpolator program for fixed inner weights ``theta``."""

    a: torch.Tensor            #: outer weights for the given ``theta`` (a_j = ã_j / ‖θ_j‖^c)
    net: TwoLayerNet           #: TwoLayerNet(a, theta, activation)
    flatness: float            #: Υ(net) = Σ_j κ_j |ã_j|^p
    dual: torch.Tensor         #: dual variable λ (n,)
    lower_bound: float         #: dual objective g(λ) ≤ Υ of every interpolator with these directions
    status: str                #: solver status ("optimal" after certification)
    effective_a: torch.Tensor  #: ã_j = a_j ‖θ_j‖^c
    kappa: torch.Tensor        #: flatness weights κ_j
    p: float                   #: exponent 2c/(c+1)
    residual: float            #: max_i |h(x_i) − y_i|
    duality_gap: float         #: (flatness − lower_bound) / flatness
    condition_number: float    #: σ_max(Φ) / σ_min(Φ) of the n×m feature matrix

    @property
    def support_size(self) -> int:
        """Number of neurons with ã_j ≠ 0."""
        return int((self.effective_a != 0).sum())


def feature_matrix(theta, X, activation) -> torch.Tensor:
    """Φ_ij = σ(⟨u_j, x_i⟩) with u_j = θ_j / ‖θ_j‖ (n × m)."""
    norms = torch.linalg.vector_norm(theta, dim=1)
    return activation(X @ (theta / norms[:, None]).T)


def dual_objective(lam, Phi, y, kappa, p) -> float:
    """g(λ) of eq. ``eq-dual``; for p = 1, λ must be dual feasible (|Φᵀλ| ≤ κ)."""
    v = Phi.T @ lam
    if p == 1.0:
        if (v.abs() > kappa * (1 + 1e-12)).any():
            raise FlatbookInputError("λ is not dual feasible (|Φᵀλ|_j > κ_j for some j).")
        return float(lam @ y)
    q = p / (p - 1.0)
    return float(lam @ y - ((p * kappa) ** (1.0 - q) * v.abs() ** q).sum() / q)


def _primal_from_dual(lam, Phi, kappa, p):
    q = p / (p - 1.0)
    v = Phi.T @ lam
    return (p * kappa) ** (1.0 - q) * torch.sign(v) * v.abs() ** (q - 1.0)


def _newton_polish(lam, Phi, y, kappa, p, iters=30):
    """Maximise the smooth concave dual (p > 1) by damped Newton steps from ``lam``."""
    q = p / (p - 1.0)
    beta = (p * kappa) ** (1.0 - q)
    g = dual_objective(lam, Phi, y, kappa, p)
    for _ in range(iters):
        v = Phi.T @ lam
        grad = y - Phi @ _primal_from_dual(lam, Phi, kappa, p)
        if float(grad.abs().max()) <= 1e-14 * float(y.abs().max()):
            break
        curvature = beta * (q - 1.0) * v.abs() ** (q - 2.0)
        hess = (Phi * curvature) @ Phi.T
        step = torch.linalg.lstsq(hess, grad[:, None]).solution[:, 0]
        t = 1.0
        while t > 1e-8:
            trial = lam + t * step
            g_trial = dual_objective(trial, Phi, y, kappa, p)
            if g_trial >= g - 1e-15 * abs(g):
                lam, g = trial, g_trial
                break
            t *= 0.5
        else:
            break
    return lam


def _polish_l1(a, lam, Phi, y, kappa):
    """Exact vertex and certificate for p = 1 from an interior-point solution.

    Complementary slackness: ã_j ≠ 0 only where the dual constraint is tight,
    |v_j| = κ_j with v = Φᵀλ.  A non-degenerate optimum is a vertex with n
    tight constraints, so take S = the n largest |v_j|/κ_j, solve Φ_S ã_S = y
    and Φ_Sᵀ λ = κ_S sign(v_S).  If the signs agree and λ is feasible, (ã, λ)
    is an exact primal-dual pair (zero gap).  Otherwise keep the solver's ã,
    project it onto Φ ã = y, and scale λ into the dual-feasible set.
    """
    n = Phi.shape[0]
    v = Phi.T @ lam
    S = torch.topk(v.abs() / kappa, n).indices
    a_S = torch.linalg.solve(Phi[:, S], y)
    lam_S = torch.linalg.solve(Phi[:, S].T, kappa[S] * torch.sign(v[S]))
    signs_agree = bool((a_S * v[S] >= 0).all())
    if signs_agree and bool(((Phi.T @ lam_S).abs() <= kappa * (1 + 1e-12)).all()):
        a = torch.zeros_like(a)
        a[S] = a_S
        return a, lam_S
    a = a + Phi.T @ torch.linalg.solve(Phi @ Phi.T, y - Phi @ a)
    violation = float(((Phi.T @ lam).abs() / kappa).max())
    return a, lam / max(1.0, violation)


def _solve_cvxpy(Phi, y, kappa, p, solver, solver_options):
    import cvxpy as cp

    Phi_np, y_np, kappa_np = (t.detach().cpu().numpy() for t in (Phi, y, kappa))
    scale = float(np.abs(y_np).max())
    a = cp.Variable(Phi_np.shape[1])
    constraint = Phi_np @ a == y_np / scale
    if p == 1.0:
        objective = kappa_np @ cp.abs(a)
    else:
        objective = cp.sum(cp.multiply(kappa_np, cp.power(cp.abs(a), p)))
    problem = cp.Problem(cp.Minimize(objective), [constraint])
    try:
        with warnings.catch_warnings():
            # "Solution may be inaccurate": the status says so, and we polish and certify below.
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver=solver, **solver_options)
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy/{solver} failed on the flattest-interpolator program: {exc}") from exc
    if problem.status not in ("optimal", "optimal_inaccurate") or a.value is None:
        raise SolverError(
            f"cvxpy/{solver} returned status {problem.status!r}; the program should be feasible "
            "(Φ has full row rank), so try another solver (solver='SCS') or rescale the data."
        )
    # cvxpy's multiplier ν enters as +νᵀ(Φa − y); our λ = −ν.  Undo the scaling of y:
    # a scales with s, λ with s^{p−1}.
    a_val = torch.as_tensor(a.value * scale, dtype=Phi.dtype, device=Phi.device)
    lam = -torch.as_tensor(constraint.dual_value, dtype=Phi.dtype, device=Phi.device) * scale ** (p - 1.0)
    return a_val, lam, problem.status


def flattest_outer_weights(theta, X, y, activation="relu", *, solver: str = "CLARABEL",
                           solver_options: dict | None = None, residual_tol: float = 1e-8,
                           gap_tol: float = 1e-6) -> FlattestResult:
    """The outer weights minimising Υ among all interpolators with the inner directions of ``theta``.

    ``theta`` (m, d) may have rows of any (non-zero) norm; by the symmetry only
    directions matter.  Needs m ≥ n and a feature matrix Φ of rank n.
    Raises :class:`InfeasibleInterpolationError` if no interpolator exists and
    :class:`SolverError` if the solution cannot be certified to
    ``residual_tol`` (relative to max|y|) and ``gap_tol`` (relative duality gap).
    ``solver`` and ``solver_options`` are passed to ``cvxpy.Problem.solve``.
    """
    activation = get_activation(activation)
    theta = as_tensor(theta, "theta", ndim=2)
    X, y = check_data(X, y, theta.shape[1])
    X, y = X.to(theta.device), y.to(theta.device)
    n, m = X.shape[0], theta.shape[0]
    if m < n:
        raise InfeasibleInterpolationError(
            f"only m = {m} neurons for n = {n} samples: generic labels need m >= n to be "
            "interpolated. Add neurons or use fewer samples."
        )
    if float(y.abs().max()) == 0.0:
        raise FlatbookInputError("y is identically zero; the flattest interpolator is a = 0.")
    kappa = flatness_weights(theta, X, activation)
    Phi = feature_matrix(theta, X, activation)
    singular_values = torch.linalg.svdvals(Phi)
    rank_tol = max(n, m) * torch.finfo(Phi.dtype).eps * float(singular_values[0])
    rank = int((singular_values > rank_tol).sum())
    if rank < n:
        hint = ""
        if activation.degree == 2.0 and activation.name == "quadratic":
            d = X.shape[1]
            hint = (f" Quadratic features σ(⟨u, x⟩) = uᵀ x xᵀ u span at most d(d+1)/2 = "
                    f"{d * (d + 1) // 2} dimensions, so they cannot interpolate more samples than that.")
        raise InfeasibleInterpolationError(
            f"the feature matrix Φ (n={n}, m={m}) has rank {rank} < n, so generic labels cannot be "
            f"interpolated.{hint} Use fewer samples, a larger input dimension or other directions."
        )
    condition = float(singular_values[0] / singular_values[n - 1])
    p = activation.p
    active = kappa > 0  # κ_j = 0 exactly when neuron j is silent on every sample
    a_eff = torch.zeros(m, dtype=Phi.dtype, device=Phi.device)
    a_act, lam, status = _solve_cvxpy(Phi[:, active], y, kappa[active], p, solver,
                                         solver_options or {})
    Phi_a, kappa_a = Phi[:, active], kappa[active]
    if p == 1.0:
        a_act, lam = _polish_l1(a_act, lam, Phi_a, y, kappa_a)
    else:
        lam = _newton_polish(lam, Phi_a, y, kappa_a, p)
        a_act = _primal_from_dual(lam, Phi_a, kappa_a, p)
    a_eff[active] = a_act
    flatness = float(orbit_flatness(a_eff, kappa, p))
    lower_bound = dual_objective(lam, Phi_a, y, kappa_a, p)
    residual = float((Phi @ a_eff - y).abs().max())
    gap = (flatness - lower_bound) / flatness
    if residual > residual_tol * float(y.abs().max()) or abs(gap) > gap_tol:
        raise SolverError(
            f"could not certify the flattest interpolator: residual {residual:.2e} "
            f"(tolerance {residual_tol:.0e}·max|y|), relative duality gap {gap:.2e} "
            f"(tolerance {gap_tol:.0e}); Φ has condition number {condition:.2e}. "
            "Try another solver, fewer samples or better-conditioned directions."
        )
    a = a_eff / torch.linalg.vector_norm(theta, dim=1) ** activation.degree
    return FlattestResult(
        a=a, net=TwoLayerNet(a, theta, activation), flatness=flatness, dual=lam,
        lower_bound=lower_bound, status="optimal" if status == "optimal" else f"optimal (polished from {status})",
        effective_a=a_eff, kappa=kappa, p=p, residual=residual, duality_gap=gap,
        condition_number=condition,
    )


def other_interpolators(result: FlattestResult, X, count: int, spread=1.0, seed: int = 0) -> torch.Tensor:
    """Effective outer weights of ``count`` random interpolators with the same directions.

    Row i is ã* + s_i max|ã*| N z_i, with N an orthonormal basis of the null
    space of Φ, z_i ~ N(0, I) and s_i = ``spread`` (a float, or one value per
    row): every row interpolates the same data, and by weak duality every row
    has Σ κ_j |ã_j|^p ≥ ``result.lower_bound``.  Returns a (count, m) tensor.
    """
    theta = result.net.theta
    X = as_tensor(X, "X", ndim=2, device=theta.device)
    Phi = feature_matrix(theta, X, result.net.activation)
    n = Phi.shape[0]
    null_basis = torch.linalg.svd(Phi, full_matrices=True).Vh[n:].T  # (m, m − n)
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(count, null_basis.shape[1], generator=gen, dtype=Phi.dtype).to(Phi.device)
    spread = as_tensor(spread, "spread", device=Phi.device).reshape(-1, 1)
    if spread.shape[0] not in (1, count) or (spread < 0).any():
        raise FlatbookInputError(f"spread must be a number >= 0 or {count} of them.")
    return result.effective_a + spread * float(result.effective_a.abs().max()) * (z @ null_basis.T)
