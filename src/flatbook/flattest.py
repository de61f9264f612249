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

import itertools
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.optimize
import torch

from .activations import get_activation
from .backend import as_tensor, check_data, lstsq_driver
from .errors import FlatbookInputError, InfeasibleInterpolationError, SolverError, SolverFallbackWarning
from .flatness import flatness_weights, orbit_flatness
from .network import TwoLayerNet

__all__ = [
    "FlattestResult",
    "feature_matrix",
    "dual_objective",
    "NEWTON_MIN_SIZE",
    "certify",
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


def _into_dual_feasible(lam, Phi, kappa):
    """λ / max(1, max_j |φ_jᵀλ| / κ_j): λ scaled into the p = 1 dual feasible set {|Φᵀλ| ≤ κ}."""
    return lam / max(1.0, float(((Phi.T @ lam).abs() / kappa).max()))


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


#: below this many entries of Φ, :func:`_weighted_gram` is one GEMM: the blocked product loses there
#: (1.4-4× its time at n·m ≤ 1.25·10⁵, 0.7-0.94× from 3.2·10⁵ up; ``python bench/bench_gram.py``)
BLOCKED_GRAM_MIN_ENTRIES = 300_000


def _weighted_gram(Phi, weights=None, blocks: int = 4, min_entries: int = BLOCKED_GRAM_MIN_ENTRIES):
    """Φ diag(weights) Φᵀ (Φ Φᵀ without weights): the normal, Newton and starting Gram matrices.

    From ``min_entries`` entries of Φ up, from its lower block triangle, mirrored: row blocks times the
    rows up to theirs, (blocks + 1) / (2 · blocks) of the full product's flops.
    """
    n = Phi.shape[0]
    if Phi.numel() < min_entries:
        return (Phi if weights is None else Phi * weights) @ Phi.T
    gram = Phi.new_empty(n, n)
    edges = [i * n // blocks for i in range(blocks + 1)]
    for start, stop in itertools.pairwise(edges):
        rows = Phi[start:stop] if weights is None else Phi[start:stop] * weights
        block = rows @ Phi[:stop].T
        gram[start:stop, :stop] = block
        gram[:start, start:stop] = block[:, :start].T
    return gram


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
        hess = _weighted_gram(Phi, curvature)
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


class InteriorPointIterate(NamedTuple):
    """A primal-dual point of :func:`_lp_interior_point`: x = (x⁺, x⁻) > 0 and s = (s⁺, s⁻) > 0 (2m
    entries each, the columns' positive and negative parts) and λ (n entries)."""

    x: torch.Tensor
    s: torch.Tensor
    lam: torch.Tensor

    def with_columns(self, Phi_new, kappa_new) -> InteriorPointIterate:
        """The point extended to new columns φ_j with weights κ_j > 0 (Gondzio 1998): their slacks
        s_j± = κ_j ∓ φ_jᵀλ, floored at κ_j / 10 (a column that violates the dual constraint |φ_jᵀλ| ≤ κ_j at
        this λ has one of them negative), and x_j± = μ / s_j± at the point's mean complementarity
        μ = xᵀs / 2m, so each new pair starts with the mean complementarity."""
        m = self.x.shape[0] // 2
        mu = float(self.x @ self.s) / (2 * m)
        v = Phi_new.T @ self.lam
        s_plus, s_minus = (kappa_new - v).clamp_min(0.1 * kappa_new), (kappa_new + v).clamp_min(0.1 * kappa_new)
        x = torch.cat([self.x[:m], mu / s_plus, self.x[m:], mu / s_minus])
        return InteriorPointIterate(x, torch.cat([self.s[:m], s_plus, self.s[m:], s_minus]), self.lam)


def _lp_interior_point(Phi, y, kappa, tol=1e-9, max_iter=80, vertex=None, start=None, restart_factor=None):
    """Mehrotra's predictor-corrector method for the p = 1 program, on its normal equations.

    With ã = x⁺ − x⁻, x± ≥ 0, the program is the standard-form LP
    min κᵀ(x⁺ + x⁻) s.t. Φ(x⁺ − x⁻) = y, whose normal-equation matrix is
    Φ diag(x⁺/s⁺ + x⁻/s⁻) Φᵀ: n × n, formed in O(n² m) and factored by Cholesky.
    Returns the dual iterate λ (to be turned into an exact vertex) and the primal iterate
    ã = x⁺ − x⁻ (near the centre of the optimal face, every entry non-zero).  Stops when all
    three residuals are below ``tol``, or when the gap and the dual residual are and
    the primal residual has risen above its best: near the optimum the normal
    equations grow ill-conditioned and further steps only degrade it, while λ,
    all the vertex needs, has converged.  With ``vertex`` (a function of λ returning
    an exactly certified vertex or None), it is tried at every iterate whose relative
    gap is below 1e-4, and the first vertex found ends the iteration (the optimal basis
    is usually identified well before the gap closes).

    ``start`` (an :class:`InteriorPointIterate`) replaces Mehrotra's starting point, and then at least
    one step is taken.  With ``restart_factor`` the method also returns a point to warm-start a related
    program from: the first iterate after the start whose relative gap and residuals are all below
    ``restart_factor`` · ``tol`` (the last one if none is), an early iterate rather than the last,
    which sits near the boundary (Gondzio 1998).  Returns (λ, ã, that vertex or None, that restart
    point or None).
    """
    n, m = Phi.shape
    c = torch.cat([kappa, kappa])

    def A(v):  # [Φ, −Φ] v
        return Phi @ (v[:m] - v[m:])

    def At(lam):  # [Φ, −Φ]ᵀ λ
        u = Phi.T @ lam
        return torch.cat([u, -u])

    if start is not None:
        if start.x.shape != (2 * m,) or start.s.shape != (2 * m,) or start.lam.shape != (n,):
            raise ValueError(
                f"the start point is for {start.x.shape[0] // 2} columns and "
                f"{start.lam.shape[0]} samples, the program has {m} and {n}"
            )
        x, s, lam = start
    else:  # Mehrotra's starting point: least-norm x, λ = 0 (A c = 0 here), shifted to the interior.
        gram = _weighted_gram(Phi)
        gram.diagonal().add_(1e-12 * float(gram.diagonal().max()))  # a ridge: Φ may be (nearly) rank deficient
        x_plus = Phi.T @ torch.linalg.solve(2.0 * gram, y)
        x = torch.cat([x_plus, -x_plus])
        lam = torch.zeros(n, dtype=Phi.dtype, device=Phi.device)
        s = c.clone()
        x = x + max(-1.5 * float(x.min()), 0.0)
        s = s + max(-1.5 * float(s.min()), 0.0)
        xs = float(x @ s)
        x, s = x + 0.5 * xs / float(s.sum()), s + 0.5 * xs / float(x.sum())
    scale_b, scale_c = 1.0 + float(y.norm()), 1.0 + float(c.norm())

    def max_step(v, dv):
        negative = dv < 0
        return min(1.0, float((-v[negative] / dv[negative]).min())) if bool(negative.any()) else 1.0

    best_primal = float("inf")
    restart = None
    for iteration in range(max_iter):
        r_primal = y - A(x)
        r_dual = c - At(lam) - s
        mu = float(x @ s) / (2 * m)
        primal, dual = float(r_primal.norm()) / scale_b, float(r_dual.norm()) / scale_c
        gap = float(x @ s) / (1.0 + abs(float(c @ x)))
        if (
            restart_factor is not None
            and restart is None
            and iteration > 0
            and max(primal, dual, gap) < restart_factor * tol
        ):
            restart = InteriorPointIterate(x, s, lam)
        if (start is None or iteration > 0) and dual < tol and gap < tol and (primal < tol or primal > best_primal):
            break
        best_primal = min(best_primal, primal)
        if vertex is not None and gap < 1e-4:
            found = vertex(lam)
            if found is not None:
                return lam, x[:m] - x[m:], found, None
        D = x / s
        normal = _weighted_gram(Phi, D[:m] + D[m:])
        normal.diagonal().add_(1e-14 * float(normal.diagonal().max()))
        factor, info = torch.linalg.cholesky_ex(normal)
        if int(info) != 0:
            break

        def direction(r_comp, r_primal=r_primal, r_dual=r_dual, s=s, D=D, factor=factor):
            rhs = r_primal - A(r_comp / s) + A(D * r_dual)
            dlam = torch.cholesky_solve(rhs[:, None], factor)[:, 0]
            ds = r_dual - At(dlam)
            dx = r_comp / s - D * ds
            return dx, dlam, ds

        dx, dlam, ds = direction(-x * s)  # predictor (affine scaling)
        a_p, a_d = max_step(x, dx), max_step(s, ds)
        mu_aff = float((x + a_p * dx) @ (s + a_d * ds)) / (2 * m)
        sigma = (mu_aff / mu) ** 3
        dx, dlam, ds = direction(sigma * mu - x * s - dx * ds)  # corrector
        a_p, a_d = 0.99 * max_step(x, dx), 0.99 * max_step(s, ds)
        x, lam, s = x + a_p * dx, lam + a_d * dlam, s + a_d * ds
    if restart_factor is not None and restart is None:
        restart = InteriorPointIterate(x, s, lam)
    return lam, x[:m] - x[m:], None, restart


def _solve_newton(Phi, y, kappa, p, residual_tol):
    """The fast solver: dual Newton for p > 1; an interior-point method and an exact vertex for p = 1.

    Returns (ã, λ, status) with status "optimal" or the reason it failed.
    """
    if p > 1.0:
        lam, residual = _dual_newton(_dual_start(Phi, y, kappa, p), Phi, y, kappa, p, 1e-3 * residual_tol)
        status = "optimal" if residual <= residual_tol else f"dual Newton stalled at residual {residual:.1e}"
        return _primal_from_dual(lam, Phi, kappa, p), lam, status
    lam, primal, vertex, _ = _lp_interior_point(
        Phi, y, kappa, vertex=lambda lam: _exact_vertex(lam, Phi, y, kappa, tight_tols=())
    )
    if vertex is None:
        vertex = _exact_vertex(lam, Phi, y, kappa, primal=primal, crossover=True)
    if vertex is None:
        return (
            torch.zeros(Phi.shape[1], dtype=Phi.dtype, device=Phi.device),
            lam,
            "the interior-point dual did not identify an optimal vertex",
        )
    return vertex[0], vertex[1], "optimal"


def _basis_vertex(S, signs, Phi, y, kappa):
    """The vertex of basis S (n columns) with dual signs ``signs``, certified, or None: Φ_S ã_S = y and
    Φ_Sᵀ λ = κ_S signs; the signs of ã_S must agree, and λ, scaled into the feasible set (it may violate a
    constraint by round-off on an ill-conditioned Φ_S), must leave a relative gap of at most 1e-9."""
    try:
        a_S = torch.linalg.solve(Phi[:, S], y)
        lam_S = torch.linalg.solve(Phi[:, S].T, kappa[S] * signs)
    except RuntimeError:  # singular Φ_S: a degenerate vertex
        return None
    lam_S = _into_dual_feasible(lam_S, Phi, kappa)
    primal, dual = float((kappa[S] * a_S.abs()).sum()), float(lam_S @ y)
    if not (bool((a_S * signs >= 0).all()) and abs(primal - dual) <= 1e-9 * primal):
        return None
    a = torch.zeros(Phi.shape[1], dtype=Phi.dtype, device=Phi.device)
    a[S] = a_S
    return a, lam_S


def _l1_simplex(S, signs, Phi, y, kappa, max_pivots: int):
    """Primal simplex pivots for min Σ κ_j|ã_j| s.t. Φ ã = y from the basis S, to a certified vertex, or None.

    Every basis S (n columns, Φ_S invertible) gives an interpolator ã_S = Φ_S⁻¹y and, with σ = sign(ã_S)
    (``signs`` where ã_S vanishes), the dual λ = Φ_S⁻ᵀ(κ_S σ).  If some column has |φ_jᵀλ| > κ_j, letting
    ã_j = tθ (t = sign φ_jᵀλ) while ã_S = Φ_S⁻¹(y − tθ φ_j) lowers the objective at rate |φ_jᵀλ| − κ_j; the
    objective is convex and piecewise linear in θ, its slope rising by 2κ_k|d_k| where ã_k crosses zero
    (d = tΦ_S⁻¹φ_j), and the column at the first crossing that makes the slope non-negative leaves
    (Barrodale & Roberts 1973, whose pivots may pass through several crossings).  After a degenerate pivot
    (θ = 0) the next one follows Bland's rule instead: the first violated column enters, and at a crossing
    with θ = 0 the first tied column leaves, without passing on.  Stops at a basis whose ã interpolates to
    1e-10 and whose λ, scaled into the dual feasible set, certifies ã to a relative gap of 1e-9 (as
    :func:`_basis_vertex`), or after ``max_pivots`` pivots (None; there is no other guard against cycling
    in floating point).  The crossover from an interior-point basis with a wrong sign or two.
    """
    S, signs = S.clone(), signs.clone()
    degenerate = False
    for _ in range(max_pivots + 1):
        try:
            lu = torch.linalg.lu_factor(Phi[:, S])
        except RuntimeError:  # singular basis
            return None
        a_S = torch.linalg.lu_solve(*lu, y[:, None])[:, 0]
        if not bool(torch.isfinite(a_S).all()):
            return None
        zero = a_S.abs() <= 1e-12 * float(a_S.abs().max())  # round-off of a degenerate vertex: keep its sign
        a_S = torch.where(zero, 0.0, a_S)
        signs = torch.where(zero, signs, torch.sign(a_S))
        lam = torch.linalg.lu_solve(*lu, (kappa[S] * signs)[:, None], adjoint=True)[:, 0]
        v = Phi.T @ lam
        ratio = v.abs() / kappa
        scaled = lam / max(1.0, float(ratio.max()))  # the basic columns' ratios are 1 up to round-off
        primal, dual = float((kappa[S] * a_S.abs()).sum()), float(scaled @ y)
        if abs(primal - dual) <= 1e-9 * primal and float((Phi[:, S] @ a_S - y).abs().max()) <= 1e-10 * float(
            y.abs().max()
        ):
            a = torch.zeros(Phi.shape[1], dtype=Phi.dtype, device=Phi.device)
            a[S] = a_S
            return a, scaled
        ratio[S] = 0.0
        # The most violated column enters; after a degenerate pivot the first violated one (Bland's rule).
        violated = torch.nonzero(ratio > 1.0 + 1e-12).squeeze(1)
        if violated.numel() == 0:
            return None  # dual feasible to round-off yet not certified: an ill-conditioned basis
        j = int(violated[0]) if degenerate else int(torch.argmax(ratio))
        t = torch.sign(v[j])
        d = t * torch.linalg.lu_solve(*lu, Phi[:, j : j + 1])[:, 0]
        # The entries that move towards zero; a pivot on a |d_k| at round-off level would make the basis singular.
        crossing = torch.nonzero((signs * d > 0) & (d.abs() > 1e-9 * float(d.abs().max()))).squeeze(1)
        if crossing.numel() == 0:
            return None  # unbounded descent cannot happen for a feasible, bounded-below program: round-off
        crossing = crossing[torch.argsort(S[crossing])]  # ties in column order (Bland)
        theta = (a_S[crossing] / d[crossing]).clamp(min=0.0)
        order = torch.argsort(theta, stable=True)
        slope = float(kappa[j] - v[j].abs()) + torch.cumsum(
            2.0 * kappa[S][crossing[order]] * d[crossing[order]].abs(), 0
        )
        first = int(torch.nonzero(slope >= 0)[0, 0]) if bool((slope >= 0).any()) else -1
        if degenerate and float(theta[order[0]]) == 0.0:
            first = 0  # Bland: the first tied column leaves
        leaving = int(crossing[order[first]])
        degenerate = float(theta[order[first]]) == 0.0
        S[leaving], signs[leaving] = j, t
    return None


def _exact_vertex(lam, Phi, y, kappa, tight_tols=(1e-6, 1e-4), primal=None, swaps: int = 4, crossover: bool = False):
    """The optimal vertex of the p = 1 program identified from an approximate dual λ, or None.

    Complementary slackness: ã_j ≠ 0 only where the dual constraint is tight,
    |v_j| = κ_j with v = Φᵀλ.  A non-degenerate optimum is a vertex with n
    tight constraints, so take S = the n largest |v_j|/κ_j and certify it
    (:func:`_basis_vertex`).  With an approximate primal iterate ``primal`` (the
    interior point's ã), the bases of its n largest |ã_j|, and of its n − 1 largest
    with each of the next ``swaps`` in turn, are tried too: at a nearly degenerate
    optimum (a weight ~1e-8) the dual ratios can rank a wrong column n-th.  A
    degenerate optimum (fewer than n non-zero weights, e.g. noiseless labels
    that a few neurons fit), or a
    non-unique one, is read off the tight set T = {|v_j| ≥ (1 − tight_tol) κ_j}:
    a sign-consistent ã_T with Φ_T ã_T = y (non-negative least squares) is
    optimal, and λ, scaled into the feasible set, certifies it up to the
    accuracy of λ.  Each of ``tight_tols`` is tried in turn: an interior-point
    λ is accurate to ~1e-9, a conic solver's to ~1e-7..1e-5, and a degenerate
    face may need the wider set.  If none of these certifies and ``crossover`` is set,
    simplex pivots (:func:`_l1_simplex`, at most min(n, 100)) start from the primal's n
    heaviest columns when given, else from the dual's n tightest: at a nearly degenerate
    optimum its λ and ã can both be a pivot or two away from the optimal vertex.
    """
    n = Phi.shape[0]
    v = Phi.T @ lam
    ratio = v.abs() / kappa
    a = torch.zeros(Phi.shape[1], dtype=Phi.dtype, device=Phi.device)
    tightest = torch.topk(ratio, n).indices
    found = _basis_vertex(tightest, torch.sign(v[tightest]), Phi, y, kappa)
    heaviest = None
    if found is None and primal is not None:
        heaviest = torch.argsort(primal.abs(), descending=True)
        candidates = [heaviest[:n]] + [
            torch.cat([heaviest[: n - 1], heaviest[k : k + 1]]) for k in range(n, n + swaps) if k < heaviest.shape[0]
        ]
        for S in candidates:
            found = _basis_vertex(S, torch.sign(primal[S]), Phi, y, kappa)
            if found is not None:
                break
    if found is not None:
        return found
    # Degenerate optimum: any interpolator on the tight set T = {|v_j| ≥ (1 − tight_tol) max|v|/κ} whose
    # signs agree with v is optimal (complementary slackness): a non-negative least-squares problem in
    # b = sign(v_T) ã_T.  It covers fewer than n tight columns (a sparse optimum) and more than n (a
    # non-unique one, e.g. columns that coincide on the samples).
    for tight_tol in tight_tols:
        T = ratio >= (1.0 - tight_tol) * float(ratio.max())
        signs = torch.sign(v[T])
        try:
            b, _ = scipy.optimize.nnls((Phi[:, T] * signs).cpu().numpy(), y.cpu().numpy())
        except RuntimeError:  # scipy's iteration limit (3 × columns) on a large, ill-conditioned tight set
            continue
        a_T = signs * torch.as_tensor(b, dtype=Phi.dtype, device=Phi.device)
        if float((Phi[:, T] @ a_T - y).abs().max()) <= 1e-10 * float(y.abs().max()):
            a[T] = a_T
            # Sharpen λ: the least-norm correction that makes the support's constraints exactly tight,
            # |φ_jᵀλ| = κ_j where ã_j ≠ 0 (complementary slackness), then scale it into the feasible set.
            P = torch.nonzero(T).squeeze(1)[b > 0]
            target = kappa[P] * signs[b > 0]
            lam = (
                lam
                + torch.linalg.lstsq(
                    Phi[:, P].T, (target - Phi[:, P].T @ lam)[:, None], driver=lstsq_driver(Phi)
                ).solution[:, 0]
            )
            return a, _into_dual_feasible(lam, Phi, kappa)
    if crossover:  # from the first basis tried above: the primal's heaviest columns, else the dual's tightest
        start, hint = (heaviest[:n], primal) if heaviest is not None else (tightest, v)
        return _l1_simplex(start, torch.sign(hint[start]), Phi, y, kappa, max_pivots=min(n, 100))
    return None


def _polish_l1(a, lam, Phi, y, kappa):
    """Exact vertex from an interior-point solution, else project ã onto Φ ã = y and scale λ feasible."""
    vertex = _exact_vertex(lam, Phi, y, kappa)
    if vertex is not None:
        return vertex
    a = a + Phi.T @ torch.linalg.solve(Phi @ Phi.T, y - Phi @ a)
    return a, _into_dual_feasible(lam, Phi, kappa)


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
#: overhead wins on tiny problems) when n·m is at least this (measured by bench/bench_flattest.py).
NEWTON_MIN_SIZE = 5_000


def _check_rank(Phi, activation, d):
    """Raise if Φ (n × m) has numerical rank below n; return its condition number σ_max / σ_min.

    Uses the eigenvalues of Φ Φᵀ (n × n): a singular value below 1e-7 σ_max
    counts as zero, which also rejects systems too ill-conditioned to
    interpolate to the requested accuracy.
    """
    n, m = Phi.shape
    eig = torch.linalg.eigvalsh(Phi @ Phi.T).clamp_min(0.0)
    rank = int((eig > 1e-14 * float(eig[-1])).sum())
    if rank < n:
        hint = ""
        if activation.name == "quadratic":
            hint = (
                f" Quadratic features σ(⟨u, x⟩) = uᵀ x xᵀ u span at most d(d+1)/2 = "
                f"{d * (d + 1) // 2} dimensions, so they cannot interpolate more samples than that."
            )
        raise InfeasibleInterpolationError(
            f"the feature matrix Φ (n={n}, m={m}) has rank {rank} < n (singular values below "
            f"1e-7 σ_max count as zero), so generic labels cannot be interpolated.{hint} "
            "Use fewer samples, a larger input dimension or other directions."
        )
    return float(torch.sqrt(eig[-1] / eig[0]))


def certify(a_eff, lam, Phi, y, kappa, p, residual_tol: float, gap_tol: float, condition: float = float("nan")):
    """The certification gate: (Υ, dual bound, residual, relative gap) of a primal-dual pair, or SolverError.

    Υ = Σ_j κ_j |ã_j|^p, the bound g(λ) of eq. ``eq-dual`` (λ must be dual feasible for p = 1),
    the interpolation residual max_i |Φã − y|_i; raises unless the residual is at most
    ``residual_tol``·max|y| and the relative gap (Υ − g(λ))/Υ at most ``gap_tol`` in absolute value.
    """
    active = kappa > 0
    flatness = float(orbit_flatness(a_eff, kappa, p))
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
    status, fallback = None, ""
    if solver == "newton":
        a_act, lam, newton_status = _solve_newton(Phi_u, y_u, kappa_u, p, residual_tol)
        if newton_status == "optimal":
            status = "optimal"
        else:
            solver, fallback = "CLARABEL", f" (Clarabel after Newton: {newton_status})"
            warnings.warn(
                f"the fast solver did not certify ({newton_status}); solving with Clarabel instead, "
                "which is slower (result.status records this)",
                SolverFallbackWarning,
                stacklevel=2,
            )
    if status is None:
        a_act, lam, cvx_status = _solve_cvxpy(Phi_u, y_u, kappa_u, p, solver, solver_options or {})
        if p == 1.0:
            a_act, lam = _polish_l1(a_act, lam, Phi_u, y_u, kappa_u)
        else:
            lam, _ = _dual_newton(lam, Phi_u, y_u, kappa_u, p, 1e-3 * residual_tol, max_iter=30)
            a_act = _primal_from_dual(lam, Phi_u, kappa_u, p)
        status = ("optimal" if cvx_status == "optimal" else f"optimal (polished from {cvx_status})") + fallback
    a_eff = torch.zeros(m, dtype=Phi.dtype, device=Phi.device)
    a_eff[active] = a_act * (s_y / s_phi)
    lam = lam * units
    if p == 1.0:  # feasible in the scaled units; back in these, round-off can exceed κ_j by ~1e-11 (relative)
        lam = _into_dual_feasible(lam, Phi[:, active], kappa[active])
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
