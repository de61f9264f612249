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

Two solvers, both checked here against the same certificate:

- ``solver="newton"`` (the default, except for tiny p = 1 problems): Newton's method on
  the dual, which has only n variables.  For p > 1 the dual is smooth and
  concave with Hessian −Φ D Φᵀ (D diagonal, n × n), so each step is one
  O(n² m) product and an n × n Cholesky solve, a few large dense operations
  that run at matrix-multiply speed on a CPU or GPU; the generic conic solvers
  instead factor a KKT system of size n + 2m with the dense n × m block Φ.
  The primal is read off the dual, ã_j = (p κ_j)^{1−q} sign(v_j) |v_j|^{q−1},
  and interpolates to round-off at the dual optimum.  p = 1 is a linear
  program: it is solved by continuation in p → 1 (each stage warm-started,
  the smoothed dual acting like a barrier for |v_j| ≤ κ_j), then the optimal
  vertex is identified from the n largest |v_j| / κ_j and solved exactly.
- any cvxpy solver name (``"CLARABEL"``, ``"SCS"``, ...): the primal with cvxpy, then
  polished with the same dual Newton steps (p > 1) or vertex solve (p = 1).

The exact vertex pair for p = 1 (primal ã with Φ ã = y, dual λ with |Φᵀλ| ≤ κ
and equal objectives) is a certificate of optimality.  Every result reports the
interpolation residual and the duality gap; :class:`~flatbook.errors.SolverError`
is raised if either misses its tolerance, after the Newton solver has fallen
back to Clarabel.
"""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .activations import get_activation
from .backend import as_tensor, check_data
from .errors import FlatbookInputError, InfeasibleInterpolationError, SolverError, SolverFallbackWarning
from .flatness import flatness_weights, orbit_flatness
from .lp import interior_point, into_dual_feasible, vertex_from_dual, weak_duality_bound, weighted_gram
from .network import TwoLayerNet

__all__ = [
    "FlattestResult",
    "feature_matrix",
    "dual_objective",
    "NEWTON_MIN_SIZE",
    "certify",
    "check_solver",
    "solve_newton",
    "flattest_outer_weights",
    "other_interpolators",
]


@dataclass
class FlattestResult:
    """Solution of the flattest-interpolator program for fixed inner weights ``theta``."""

    a: torch.Tensor  #: outer weights for the given ``theta`` (a_j = ã_j / ‖θ_j‖^c)
    net: TwoLayerNet  #: TwoLayerNet(a, theta, activation)
    flatness: float  #: Υ(net) = Σ_j κ_j |ã_j|^p
    dual: torch.Tensor  #: dual variable λ (n,)
    lower_bound: float  #: dual objective g(λ) ≤ Υ of every interpolator with these directions
    status: str  #: solver status ("optimal" after certification)
    effective_a: torch.Tensor  #: ã_j = a_j ‖θ_j‖^c
    kappa: torch.Tensor  #: flatness weights κ_j
    p: float  #: exponent 2c/(c+1)
    residual: float  #: max_i |h(x_i) − y_i|
    duality_gap: float  #: (flatness − lower_bound) / flatness
    condition_number: float  #: σ_max(Φ) / σ_min(Φ) of the n×m feature matrix
    solver: str  #: "newton" or the cvxpy solver that produced the solution

    @property
    def support_size(self) -> int:
        """Number of neurons with ã_j ≠ 0."""
        return int((self.effective_a != 0).sum())


def feature_matrix(theta, X, activation) -> torch.Tensor:
    """Φ_ij = σ(⟨u_j, x_i⟩) with u_j = θ_j / ‖θ_j‖ (n × m); ``activation`` an activation or its name."""
    norms = torch.linalg.vector_norm(theta, dim=1)
    return get_activation(activation)(X @ (theta / norms[:, None]).T)


def dual_objective(lam, Phi, y, kappa, p) -> float:
    """g(λ) of eq. ``eq-dual``; for p = 1, λ must be dual feasible (|Φᵀλ| ≤ κ)."""
    v = Phi.T @ lam
    if p == 1.0:
        if (v.abs() > kappa * (1 + 1e-12)).any():
            raise FlatbookInputError("λ is not dual feasible (|Φᵀλ|_j > κ_j for some j).")
        return float(lam @ y)
    q = p / (p - 1.0)
    w = v.abs() / (p * kappa)  # (p κ_j)^{1−q} |v_j|^q = p κ_j w_j^q
    return float(lam @ y - (p * kappa * w**q).sum() / q)


def _primal_from_dual(lam, Phi, kappa, p):
    """ã_j = (p κ_j)^{1−q} sign(v_j) |v_j|^{q−1} = sign(v_j) w_j^{q−1}, w_j = |v_j| / (p κ_j)."""
    q = p / (p - 1.0)
    v = Phi.T @ lam
    return torch.sign(v) * (v.abs() / (p * kappa)) ** (q - 1.0)


def _dual_newton(lam, Phi, y, kappa, p, tol, max_iter=100):
    """Maximise the smooth concave dual (p > 1) by Newton steps with backtracking, from ``lam``.

    Aims at an interpolation residual ‖y − Φ ã(λ)‖_∞ = ‖∇g(λ)‖_∞ of at most
    ``tol`` · ‖y‖_∞ and stops there, or when round-off stalls the line search.
    Returns λ and the relative residual reached.
    """
    q = p / (p - 1.0)
    scale = float(y.abs().max())
    g = dual_objective(lam, Phi, y, kappa, p)
    for _ in range(max_iter):
        v = Phi.T @ lam
        w = v.abs() / (p * kappa)
        grad = y - Phi @ (torch.sign(v) * w ** (q - 1.0))
        residual = float(grad.abs().max()) / scale
        if residual <= tol:
            break
        curvature = (q - 1.0) / (p * kappa) * w ** (q - 2.0)
        hess = weighted_gram(Phi, curvature)
        hess.diagonal().add_(1e-13 * float(hess.diagonal().max()))
        factor, info = torch.linalg.cholesky_ex(hess)
        if int(info) != 0:
            break
        step = torch.cholesky_solve(grad[:, None], factor)[:, 0]
        slope = float(grad @ step)
        # Near the optimum the gain of a step (~ slope) falls below the float64 resolution of g
        # itself; there a step is judged by the quantity it is meant to drive to zero, the residual.
        roundoff = 64 * torch.finfo(Phi.dtype).eps * (abs(g) + abs(float(lam @ y)))
        t = 1.0
        while t > 1e-10:
            trial = lam + t * step
            g_trial = dual_objective(trial, Phi, y, kappa, p)
            if g_trial >= g + 1e-4 * t * slope or (g_trial >= g and t < 1e-6):
                lam, g = trial, g_trial
                break
            if abs(g_trial - g) <= roundoff and _dual_residual(trial, Phi, y, kappa, p) < residual * scale:
                lam, g = trial, g_trial
                break
            t *= 0.5
        else:
            break  # no ascent left: round-off
    v = Phi.T @ lam
    grad = y - Phi @ (torch.sign(v) * (v.abs() / (p * kappa)) ** (q - 1.0))
    return lam, float(grad.abs().max()) / scale


def _dual_residual(lam, Phi, y, kappa, p) -> float:
    """‖y − Φ ã(λ)‖_∞ = ‖∇g(λ)‖_∞: how far the primal read off λ is from interpolating."""
    return float((y - Phi @ _primal_from_dual(lam, Phi, kappa, p)).abs().max())


def _dual_start(Phi, y, kappa, p):
    """λ = t y with the best t: g(t y) = t ‖y‖² − t^q C / q is maximised at t^{q−1} = ‖y‖² / C."""
    q = p / (p - 1.0)
    w = (Phi.T @ y).abs() / (p * kappa)
    # C = Σ p κ_j w_j^q, computed in logs to stay finite for large q.
    log_c = torch.logsumexp(torch.log(p * kappa) + q * torch.log(w.clamp_min(1e-300)), dim=0)
    log_t = (torch.log(y @ y) - log_c) / (q - 1.0)
    return torch.exp(log_t) * y


def solve_newton(Phi, y, kappa, p, residual_tol):
    """The fast solver of min Σ κ_j|ã_j|^p s.t. Φã = y (eq. ``eq-primal``), on a given Φ and κ: dual Newton for
    p > 1; an interior-point method and an exact vertex for p = 1 (:mod:`flatbook.lp`).

    Returns (ã, λ, status) with status "optimal" or the reason it failed.
    """
    if p > 1.0:
        lam, residual = _dual_newton(_dual_start(Phi, y, kappa, p), Phi, y, kappa, p, 1e-3 * residual_tol)
        status = "optimal" if residual <= residual_tol else f"dual Newton stalled at residual {residual:.1e}"
        return _primal_from_dual(lam, Phi, kappa, p), lam, status
    lam, primal, vertex, _ = interior_point(
        Phi, y, kappa, vertex=lambda lam: vertex_from_dual(lam, Phi, y, kappa, tight_tols=())
    )
    if vertex is None:
        vertex = vertex_from_dual(lam, Phi, y, kappa, primal=primal, crossover=True)
    if vertex is None:
        return (
            torch.zeros(Phi.shape[1], dtype=Phi.dtype, device=Phi.device),
            lam,
            "the interior-point dual did not identify an optimal vertex",
        )
    return vertex[0], vertex[1], "optimal"


def _polish_l1(a, lam, Phi, y, kappa):
    """Exact vertex from an interior-point solution (its dual, its primal's heaviest columns, then simplex pivots
    from them: a conic solver's pair can sit a pivot or two from the optimal vertex where columns nearly coincide),
    else project ã onto Φ ã = y and scale λ feasible."""
    vertex = vertex_from_dual(lam, Phi, y, kappa, primal=a, crossover=True)
    if vertex is not None:
        return vertex
    a = a + Phi.T @ torch.linalg.solve(Phi @ Phi.T, y - Phi @ a)
    return a, into_dual_feasible(lam, Phi, kappa)


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


#: ``solver="auto"`` uses the fast solver for p > 1 always, and for p = 1 (where Clarabel's lower
#: overhead wins on tiny problems) when n·m is at least this (measured).
NEWTON_MIN_SIZE = 5_000


#: a singular value of Φ below this times σ_max counts as zero in the rank check of
#: :func:`flattest_outer_weights`
RANK_TOL = 1e-7


def _check_rank(Phi, activation, d):
    """Raise if Φ (n × m) has numerical rank below n; return its condition number σ_max / σ_min.

    Uses the eigenvalues of Φ Φᵀ (n × n): a singular value below :data:`RANK_TOL` σ_max
    counts as zero, which also rejects systems too ill-conditioned to
    interpolate to the requested accuracy.
    """
    n, m = Phi.shape
    eig = torch.linalg.eigvalsh(Phi @ Phi.T).clamp_min(0.0)
    rank = int((eig > RANK_TOL**2 * float(eig[-1])).sum())
    if rank < n:
        capacity = activation.feature_dimension(d)
        hint = (
            ""
            if capacity is None
            else f" Its features σ(⟨u, x⟩) span at most {capacity} dimensions in d = {d}, so they cannot "
            "interpolate more samples than that."
        )
        raise InfeasibleInterpolationError(
            f"the feature matrix Φ (n={n}, m={m}) has rank {rank} < n (singular values below "
            f"{RANK_TOL:.0e} σ_max count as zero), so generic labels cannot be interpolated.{hint} "
            "Use fewer samples, a larger input dimension or other directions."
        )
    return float(torch.sqrt(eig[-1] / eig[0]))


def certify(a_eff, lam, Phi, y, kappa, p, residual_tol: float, gap_tol: float, condition: float = float("nan")):
    """The certification gate: (Υ, dual bound, residual, relative gap) of a primal-dual pair, or SolverError.

    Υ = Σ_j κ_j |ã_j|^p, the bound g(λ) of eq. ``eq-dual`` (for p = 1 of λ scaled into the feasible set,
    :func:`~flatbook.lp.weak_duality_bound`, from the same product Φᵀλ that decides the scaling: a λ made
    feasible in other units can exceed κ_j by round-off once Φᵀλ is recomputed), the interpolation residual
    max_i |Φã − y|_i; raises unless the residual is at most ``residual_tol``·max|y| and the relative gap
    (Υ − g(λ))/Υ at most ``gap_tol`` in absolute value.
    """
    active = kappa > 0
    flatness = float(orbit_flatness(a_eff, kappa, p))
    if p == 1.0:
        lower_bound = weak_duality_bound(lam, Phi[:, active], y, kappa[active])
    else:
        lower_bound = dual_objective(lam, Phi[:, active], y, kappa[active], p)
    residual = float((Phi @ a_eff - y).abs().max())
    gap = (flatness - lower_bound) / flatness
    if residual > residual_tol * float(y.abs().max()) or abs(gap) > gap_tol:
        raise SolverError(
            f"could not certify the flattest interpolator: residual {residual:.2e} "
            f"(tolerance {residual_tol:.0e}·max|y|), relative duality gap {gap:.2e} "
            f"(tolerance {gap_tol:.0e}); Φ has condition number {condition:.2e}. "
            "Try another solver, fewer samples or better-conditioned directions."
        )
    return flatness, lower_bound, residual, gap


def _solve(solver, Phi, y, kappa, p, residual_tol, solver_options):
    """(ã, λ, status, the solver that produced them) in the units of Φ, y, κ: the fast solver, falling back to
    Clarabel (with a :class:`~flatbook.errors.SolverFallbackWarning`) when it cannot certify, or a cvxpy solver
    whose solution is polished by the same dual Newton steps (p > 1) or vertex identification (p = 1)."""
    fallback = ""
    if solver == "newton":
        a, lam, newton_status = solve_newton(Phi, y, kappa, p, residual_tol)
        if newton_status == "optimal":
            return a, lam, "optimal", solver
        solver, fallback = "CLARABEL", f" (Clarabel after Newton: {newton_status})"
        warnings.warn(
            f"the fast solver did not certify ({newton_status}); solving with Clarabel instead, "
            "which is slower (result.status records this)",
            SolverFallbackWarning,
            stacklevel=3,
        )
    a, lam, cvx_status = _solve_cvxpy(Phi, y, kappa, p, solver, solver_options)
    if p == 1.0:
        a, lam = _polish_l1(a, lam, Phi, y, kappa)
    else:
        lam, _ = _dual_newton(lam, Phi, y, kappa, p, 1e-3 * residual_tol, max_iter=30)
        a = _primal_from_dual(lam, Phi, kappa, p)
    status = "optimal" if cvx_status == "optimal" else f"optimal (polished from {cvx_status})"
    return a, lam, status + fallback, solver


def check_solver(solver: str) -> str:
    """``solver`` if :func:`flattest_outer_weights` can use it: ``"auto"``, ``"newton"`` or a cvxpy solver
    installed here (names as cvxpy spells them); otherwise a :class:`~flatbook.errors.FlatbookInputError`
    naming the closest valid ones."""
    import cvxpy as cp

    valid = ["auto", "newton", *cp.installed_solvers()]
    if solver in valid:
        return solver
    by_case = {name.lower(): name for name in valid}
    close = difflib.get_close_matches(str(solver).lower(), list(by_case), n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(by_case[c]) for c in close)}?" if close else ""
    raise FlatbookInputError(f"unknown solver {solver!r}.{hint} Valid here: {', '.join(valid)}.")


def flattest_outer_weights(
    theta,
    X,
    y,
    activation="relu",
    *,
    solver: str = "auto",
    solver_options: dict | None = None,
    residual_tol: float = 1e-8,
    gap_tol: float = 1e-6,
) -> FlattestResult:
    """The outer weights minimising Υ among all interpolators with the inner directions of ``theta``.

    ``theta`` (m, d) may have rows of any (non-zero) norm; by the symmetry only
    directions matter.  Needs m ≥ n and a feature matrix Φ of rank n.
    ``solver`` is ``"auto"`` (the fast solver, except Clarabel for p = 1 below :data:`NEWTON_MIN_SIZE`),
    ``"newton"``, or a cvxpy solver name, with ``solver_options`` passed to
    ``cvxpy.Problem.solve``.  Raises :class:`~flatbook.errors.InfeasibleInterpolationError` if no
    interpolator exists and :class:`~flatbook.errors.SolverError` if the solution cannot be
    certified to ``residual_tol`` (relative to max|y|) and ``gap_tol``
    (relative duality gap); the Newton solver first falls back to Clarabel.

    Examples
    --------
    >>> import torch
    >>> from flatbook import flattest_outer_weights
    >>> from flatbook.data import single_index
    >>> X, y = single_index(d=2, link="relu", seed=0).sample(5, seed=2)
    >>> theta = torch.randn(10, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> result = flattest_outer_weights(theta, X, y)
    >>> result.status, result.p, result.support_size
    ('optimal', 1.0, 5)
    >>> round(result.flatness, 4), round(result.lower_bound, 4)  # Υ and its dual certificate
    (12.4262, 12.4262)
    >>> float((result.net(X) - y).abs().max()) < 1e-8
    True
    """
    activation = get_activation(activation)
    solver = check_solver(solver)
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
    condition = _check_rank(Phi, activation, X.shape[1])
    p = activation.p
    active = kappa > 0  # κ_j = 0 exactly when neuron j is silent on every sample
    Phi_a, kappa_a = Phi[:, active], kappa[active]
    if solver == "auto":
        solver = "newton" if p > 1.0 or n * m >= NEWTON_MIN_SIZE else "CLARABEL"
    # Solve in units where max|Φ|, max|y| and max κ are 1: every solver tolerance is then relative.
    # With ã = ã'·s_y/s_Φ the objective is C·Σκ'|ã'|^p, C = s_κ (s_y/s_Φ)^p, and λ = λ'·C/s_y.
    s_phi, s_y, s_kappa = float(Phi_a.abs().max()), float(y.abs().max()), float(kappa_a.max())
    units = s_kappa * (s_y / s_phi) ** p / s_y
    Phi_u, y_u, kappa_u = Phi_a / s_phi, y / s_y, kappa_a / s_kappa
    a_act, lam, status, solver = _solve(solver, Phi_u, y_u, kappa_u, p, residual_tol, solver_options or {})
    a_eff = torch.zeros(m, dtype=Phi.dtype, device=Phi.device)
    a_eff[active] = a_act * (s_y / s_phi)
    lam = lam * units
    if p == 1.0:  # feasible in the scaled units; back in these, round-off can exceed κ_j by ~1e-11 (relative)
        lam = into_dual_feasible(lam, Phi[:, active], kappa[active])
    flatness, lower_bound, residual, gap = certify(a_eff, lam, Phi, y, kappa, p, residual_tol, gap_tol, condition)
    a = a_eff / torch.linalg.vector_norm(theta, dim=1) ** activation.degree
    return FlattestResult(
        a=a,
        net=TwoLayerNet(a, theta, activation),
        flatness=flatness,
        dual=lam,
        lower_bound=lower_bound,
        status=status,
        solver=solver,
        effective_a=a_eff,
        kappa=kappa,
        p=p,
        residual=residual,
        duality_gap=gap,
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
