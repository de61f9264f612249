"""Pricing for the flattest interpolator over all directions: the dual ratio and its supremum.

For a dual vector λ ∈ R^n the *dual ratio* of a direction u on the unit sphere is
(book, chapter 2, eq. ``eq-measure-dual``)::

    G_λ(u) = |Σ_i λ_i σ(⟨u, x_i⟩)| / κ(u)^{1/p},

with κ(u) the flatness weight of eq. ``eq-kappa`` and p = 2c/(c+1); G_λ is
0-homogeneous in u.  The dual of the measure program V* is max λᵀy subject to
sup_u G_λ(u) ≤ 1, so *any* λ with λᵀy > 0 gives the lower bound
V* ≥ λᵀy / sup_u G_λ(u) — but only if the supremum is known, or bounded from above.
This module gives the three ways to get at sup_u G_λ:

- :func:`maximize_dual_ratio`: batched multi-start projected gradient ascent.  Fast, finds
  the new columns of column generation, but a *heuristic*: the maximum it finds may miss the
  supremum, so a bound built from it is only an estimate.
- :func:`ascend_cells` (ReLU and leaky ReLU): from a direction, the maximum of G_λ over its cell of the
  data's hyperplane arrangement (a quadratic program, solved to round-off as a least-distance program,
  :func:`least_distance`), then over the cell of that maximiser, while
  G_λ rises: the local search where gradient ascent stalls at the cells' boundaries.  Also a heuristic.
- :class:`ExactPricer` and :func:`exact_dual_ratio_sup` (ReLU and leaky ReLU, admissible directions in
  a subspace of dimension ≤ 3): enumerates the faces of the data's hyperplane arrangement (once per
  data set; then each λ costs a few passes over the faces).  On a face with
  sign pattern fixed, σ(Xu) is linear in u and κ(u)^{1/p} = 2 √(S T) with T constant, so the
  ratio is |λᵀ G u| / ‖G u‖ up to a constant, maximised at u = G⁺λ; the supremum is the
  largest value at these stationary points and at the arrangement's rays (eq. ``eq-relu-cells``).
- :func:`dual_ratio_bound`: a cheap provable bound for every activation and dimension,
  from Euler's identity z σ'(z) = c σ(z) and Cauchy-Schwarz (eq. ``eq-pricing-bound``)::

      sup_u G_λ(u) ≤ max_i (|λ_i| / ‖x_i‖) · n^{(c−1)/(2c)} (n/2)^{(c+1)/(2c)} / (c γ^{1/c} η_c),

  with η_c = ((c+1) c^{−c/(c+1)})^{(c+1)/(2c)} and γ = min |σ(±1)| over the sides where σ'
  is non-zero.  Loose, but always a bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg
import scipy.optimize
import torch

from .activations import HomogeneousActivation, LeakyReLU, get_activation
from .backend import lstsq_driver
from .errors import FlatbookInputError, SolverError
from .flatness import orbit_minimum

_QUADRATIC = get_activation("quadratic")


def dual_ratio(
    U: torch.Tensor, lam: torch.Tensor, X: torch.Tensor, activation: HomogeneousActivation, chunk: int = 4096
) -> torch.Tensor:
    """G_λ(u) for each row of ``U`` (any non-zero norm); 0 where σ vanishes on every sample.

    One pass over z = X uᵀ gives the numerator, S and T of eq. ``eq-kappa`` together.
    Differentiable in ``U`` (used by :func:`maximize_dual_ratio`).
    """
    n, c = X.shape[0], activation.degree
    sq_norms = (X * X).sum(1)
    out = []
    for start in range(0, U.shape[0], chunk):
        u = U[start : start + chunk]
        z = X @ (u / torch.linalg.vector_norm(u, dim=1, keepdim=True)).T  # (n, B)
        sigma = activation(z)
        numerator = (lam @ sigma).abs()
        S = 2.0 / n * (sigma * sigma).sum(0)
        T = 2.0 / n * (sq_norms @ activation.derivative(z) ** 2)
        kappa = orbit_minimum(S, T, c)
        positive = kappa > 0
        safe = torch.where(positive, kappa, torch.ones_like(kappa))
        out.append(torch.where(positive, numerator / safe ** (1.0 / activation.p), torch.zeros_like(kappa)))
    return torch.cat(out) if out else U.new_zeros(0)


def maximize_dual_ratio(
    lam, X, activation, starts: torch.Tensor, project: Callable | None = None, steps: int = 60, angle: float = 0.3
) -> tuple[torch.Tensor, torch.Tensor]:
    """Local maxima of G_λ near each row of ``starts``: projected gradient ascent on the sphere.

    Every row moves along the tangent gradient of log G_λ by at most ``angle`` radians; a row
    whose step does not increase G_λ keeps its point and halves its angle, one that does grows
    it by 1.5.  ``project`` maps directions back into the admissible set after each step.
    Returns (directions, values), both for every start.  A heuristic: it proves nothing
    about the supremum.
    """
    U = starts / torch.linalg.vector_norm(starts, dim=1, keepdim=True)
    if project is not None:
        U = project(U)
    values = dual_ratio(U, lam, X, activation)
    angles = torch.full_like(values, angle)
    for _ in range(steps):
        V = U.detach().clone().requires_grad_(True)
        g = dual_ratio(V, lam, X, activation)
        (grad,) = torch.autograd.grad(torch.log(g.clamp_min(1e-300)).sum(), V)
        grad = grad - (grad * U).sum(1, keepdim=True) * U
        size = torch.linalg.vector_norm(grad, dim=1, keepdim=True)
        moving = size[:, 0] > 0
        if not bool(moving.any()):
            break
        direction = grad / torch.where(size > 0, size, torch.ones_like(size))
        trial = torch.cos(angles)[:, None] * U + torch.sin(angles)[:, None] * direction
        if project is not None:
            trial = project(trial)
        trial_values = dual_ratio(trial, lam, X, activation)
        better = (trial_values > values) & moving
        U = torch.where(better[:, None], trial, U)
        values = torch.where(better, trial_values, values)
        angles = torch.where(better, (angles * 1.5).clamp_max(1.0), angles * 0.5)
        if float(angles.max()) < 1e-7:
            break
    return U.detach(), values.detach()


#: relative distance to a hyperplane below which the cell maximiser counts as lying on it and is moved to its
#: negative side (by this much: the near-copies it makes of one direction stay close)
CELL_WALL_TOL = 1e-9
#: the cell's quadratic form counts as singular where its factor R has σ_min ≤ this σ_max: the ReLU on a cell whose
#: positive samples do not span the space, σ_min then at round-off, or a feature on a scale 10¹² times smaller
CELL_SINGULAR = 1e-12
#: the ridge δ σ_max added to a singular factor R: conditioned to 1/δ, it prices the directions the form does not see
#: (free on the cell: G_λ does not depend on them) at δ² of the others, so the solution keeps them small
CELL_RIDGE = 1e-5
#: the cell maximiser's program starts from this many walls per dimension, those nearest the start, and adds the
#: walls its solution violates until it violates none (most of the n walls are far and never bind)
CELL_WORKING_WALLS = 4


def _cell_sides(Xr: np.ndarray, ur: np.ndarray) -> np.ndarray:
    """Which samples are on the positive side of u (to ``CELL_WALL_TOL`` relative, as :func:`nudge_inactive`
    tells a hyperplane; on one counts as negative)."""
    return Xr @ ur > CELL_WALL_TOL * np.linalg.norm(Xr, axis=1) * np.linalg.norm(ur)


def least_distance(G, h) -> tuple[np.ndarray, np.ndarray] | None:
    """(w, active): the least-norm point of {w : Gw ≥ h} and which of its constraints hold with equality there;
    None where that set is empty, or numerically so (its least-norm point over 10^6 times as far as that of its
    farthest half-space).  Raises :class:`~flatbook.errors.SolverError` where the active-set iterations run out
    (3 per row of G): then nothing is known about the set.

    Lawson & Hanson (1995, ch. 23): with u ≥ 0 the non-negative least-squares solution of
    [Gᵀ; hᵀ] u ≈ e_{r+1} and ρ its residual, the set is empty iff ρ = 0, and otherwise
    w = −ρ_{1:r} / ρ_{r+1}, with u ∝ the multipliers of the constraints (positive on active ones only).
    An active-set method: finite, exact up to round-off.  Scale-free: the rows are normalised and h scaled so
    that the farthest half-space is at distance 1 (a zero row holds where h_i ≤ 0 and empties the set where
    h_i > 0); a set that holds w = 0 gives w = 0.
    """
    G, h = np.asarray(G, dtype=float), np.asarray(h, dtype=float)
    if G.ndim != 2 or h.shape != (G.shape[0],):
        raise FlatbookInputError(f"least_distance needs G (m × r) and h (m,), got shapes {G.shape} and {h.shape}.")
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(h))):
        raise FlatbookInputError("least_distance needs finite G and h; some entries are NaN or infinite.")
    r = G.shape[1]
    norms = np.linalg.norm(G, axis=1)
    rows = norms > 0
    if np.any(h[~rows] > 0):
        return None
    reach = h[rows] / norms[rows]
    farthest = float(reach.max(initial=0.0))
    if farthest <= 0:
        return np.zeros(r), h == 0
    E = np.vstack([(G[rows] / norms[rows, None]).T, reach[None, :] / farthest])
    target = np.zeros(r + 1)
    target[-1] = 1.0
    try:
        u, _ = scipy.optimize.nnls(E, target)
    except RuntimeError as exc:  # "Maximum number of iterations reached"
        raise SolverError(
            f"the least-distance program ({G.shape[0]} half-spaces in {r} dimensions) ran out of active-set "
            f"iterations ({exc}); whether its set is empty is unknown."
        ) from exc
    residual = E @ u - target
    if not -residual[-1] > 1e-12:
        return None
    active = np.zeros(G.shape[0], dtype=bool)
    active[np.flatnonzero(rows)] = u > 0
    return -farthest * residual[:-1] / residual[-1], active


def cell_maximizer(lam, X, activation: LeakyReLU, u, basis=None):
    """(direction, G_λ there): a maximiser of G_λ over the cell of the data's hyperplane arrangement that contains
    ``u`` (the ReLU family), moved onto the better side of the walls it reaches; None where neither sign's
    program is feasible, or where σ vanishes on the cell (the ReLU, every sample on its negative side: G_λ = 0).

    The cell is C = {v : s_i⟨v, x_i⟩ > 0} with s_i the side of ⟨u, x_i⟩ (a sample on its hyperplane, to
    ``CELL_WALL_TOL`` relative, counts as negative, where σ' is smaller).  On C, σ(⟨v, x_i⟩) = a_i⟨v, x_i⟩ with
    a_i the slope of sample i's side, so (eq. ``eq-kappa``, c = p = 1) G_λ(v) = |gᵀv| / (2 (vᵀQv)^{1/2} T^{1/2}) with
    g = Σ_i a_i λ_i x_i, Q = (2/n) Σ_i a_i² x_i x_iᵀ and T = (2/n) Σ_i a_i² ‖x_i‖² constant on C.  The
    supremum of this expression over C's closure is that of a linear form over an ellipsoid's cone, taken for
    each sign of gᵀv (the plane gᵀv = 0 can cut C): min vᵀQv s.t. ±gᵀv ≥ 1, s_i⟨v, x_i⟩ ≥ 0, plus a ridge
    (δσ_max)²‖v‖² where Q is singular (``CELL_SINGULAR``, ``CELL_RIDGE``: in v's own coordinates, where the
    direction is normalised).  With the form written RᵀR and w = Rv it is a least-distance program
    (:func:`least_distance`), solved over a working set of walls (``CELL_WORKING_WALLS`` per dimension, nearest
    ``u`` first) that grows by the walls its solution violates (by more than ``CELL_WALL_TOL``): a relaxation
    whose solution meets every wall is the program's.  Its solutions, projected onto the walls the program holds
    them on (round-off, times R's condition, leaves them near those), then moved off them (to ``CELL_WALL_TOL``)
    to their negative side, where T is smaller and G_λ at least as large (:func:`nudge_inactive`), are valued by
    :func:`dual_ratio`; the better is returned (a unit vector; in span(``basis``), d × r orthonormal, if given).
    A sign's program gives nothing where it is infeasible (gᵀv keeps the other sign on C), numerically empty or out
    of active-set iterations (:func:`least_distance` returns None, or raises); a zero sample has no wall.
    """
    n = X.shape[0]
    Xr = (X if basis is None else X @ basis).cpu().numpy()
    ur = (u if basis is None else basis.T @ u).cpu().numpy()
    positive = _cell_sides(Xr, ur)
    slopes = np.where(positive, 1.0, activation.negative_slope)
    g = Xr.T @ (lam.cpu().numpy() * slopes)
    r = Xr.shape[1]
    B = np.sqrt(2.0 / n) * slopes[:, None] * Xr  # vᵀQv = ‖Bv‖²
    R = np.linalg.qr(B, mode="r")  # ‖Bv‖ = ‖Rv‖, and R's columns have B's norms
    singular_values = np.linalg.svd(R, compute_uv=False)
    if not singular_values[0] > 0:
        return None
    if not singular_values[-1] > CELL_SINGULAR * singular_values[0]:
        # The ridge in v's own coordinates, where the direction is normalised: it keeps Q's null directions small.
        R = np.linalg.qr(np.vstack([R, CELL_RIDGE * singular_values[0] * np.eye(r)]), mode="r")
    sample_norms = np.linalg.norm(Xr, axis=1)
    walls = np.where(positive, 1.0, -1.0)[:, None] * Xr  # s_i x_i: ⟨s_i x_i, v⟩ ≥ 0 on the cell
    # the rows act on v = R⁻¹ w: G_w = G_v R⁻¹, i.e. G_wᵀ = R⁻ᵀ G_vᵀ
    walls_w = scipy.linalg.solve_triangular(R, walls.T, trans="T").T
    g_w = scipy.linalg.solve_triangular(R, g, trans="T")
    distance = np.abs(walls @ ur) / np.where(sample_norms > 0, sample_norms, 1.0)
    nearest = np.argsort(np.where(sample_norms > 0, distance, np.inf))[: CELL_WORKING_WALLS * r]
    best = None
    for sign in (1.0, -1.0):
        working = np.zeros(n, dtype=bool)
        working[nearest] = True
        while True:
            held = np.flatnonzero(working)
            try:
                solved = least_distance(np.vstack([sign * g_w[None, :], walls_w[held]]), np.eye(1, 1 + held.size)[0])
            except SolverError:  # out of iterations: this sign gives no candidate (a heuristic move, not a bound)
                solved = None
            if solved is None:
                break
            found = scipy.linalg.solve_triangular(R, solved[0])
            violated = (walls @ found < -CELL_WALL_TOL * sample_norms * np.linalg.norm(found)) & ~working
            if not violated.any():
                break
            working |= violated
        if solved is None:
            continue
        on = Xr[held[solved[1][1:]]]
        if on.shape[0]:
            found = found - np.linalg.lstsq(on, on @ found, rcond=None)[0]
        if not np.linalg.norm(found) > 0:
            continue
        v = torch.as_tensor(found / np.linalg.norm(found), dtype=X.dtype, device=X.device)
        v = nudge_inactive((v if basis is None else basis @ v)[None], X, CELL_WALL_TOL, basis)[0]
        v = v / torch.linalg.vector_norm(v)
        value = float(dual_ratio(v[None], lam, X, activation)[0])
        if best is None or value > best[1]:
            best = (v, value)
    return best


def ascend_cells(
    lam, X, activation: HomogeneousActivation, starts: torch.Tensor, basis=None, max_steps: int = 20
) -> tuple[torch.Tensor, torch.Tensor]:
    """Local maxima of G_λ for the ReLU family, reached one cell of the arrangement at a time.

    From each start (in span(``basis``) if given): move to its cell's maximiser (:func:`cell_maximizer`), keep
    the move if G_λ rose, and repeat from there (the maximiser's walls are crossed to the side where G_λ is
    larger, so the next cell is another one); stop when it does not rise, after at most ``max_steps`` moves.
    Gradient ascent stalls at the cells' boundaries, where G_λ jumps and its maxima sit; each move here is
    exact on a whole cell.  A cell's maximiser is computed once for all the starts that reach it.  Returns
    (directions, values), one per start, each value at least the start's.  A heuristic: it proves nothing
    about the supremum.
    """
    if not isinstance(activation, LeakyReLU):
        raise FlatbookInputError(
            f"the cell ascent is for the ReLU family (σ linear on each side of 0), not {activation.name}; "
            "use maximize_dual_ratio."
        )
    U = starts / torch.linalg.vector_norm(starts, dim=1, keepdim=True)
    values = dual_ratio(U, lam, X, activation)
    Xr = (X if basis is None else X @ basis).cpu().numpy()
    maximizers: dict[bytes, tuple[torch.Tensor, float] | None] = {}

    def maximizer_of_cell(u: torch.Tensor) -> tuple[torch.Tensor, float] | None:
        cell = _cell_sides(Xr, (u if basis is None else basis.T @ u).cpu().numpy()).tobytes()
        if cell not in maximizers:
            maximizers[cell] = cell_maximizer(lam, X, activation, u, basis)
        return maximizers[cell]

    out_u, out_v = [], []
    for u, value in zip(U, values.tolist(), strict=True):
        for _ in range(max_steps):
            moved = maximizer_of_cell(u)
            if moved is None or moved[1] <= value * (1.0 + 1e-12):
                break
            u, value = moved
        out_u.append(u)
        out_v.append(value)
    return torch.stack(out_u), torch.tensor(out_v, dtype=X.dtype, device=X.device)


def dual_ratio_bound(lam, X, activation: HomogeneousActivation) -> float:
    """A provable upper bound on sup_u G_λ(u) over the whole sphere (eq. ``eq-pricing-bound``).

    Derivation: Σ_i λ_i σ(z_i) = (1/c) Σ_i λ_i z_i σ'(z_i) (Euler), so by Cauchy-Schwarz
    |Σ_i λ_i σ(z_i)| ≤ (1/c) max_i(|λ_i|/‖x_i‖) (Σ_{A} z_i²)^{1/2} (Σ_i σ'(z_i)²‖x_i‖²)^{1/2},
    A the samples with σ'(z_i) ≠ 0; and |σ(z)| ≥ γ|z|^c on A with the power-mean inequality
    gives (Σ_A z_i²)^{1/2} ≤ n^{(c−1)/(2c)} γ^{−1/c} (Σ_i σ(z_i)²)^{1/(2c)}.
    """
    n = X.shape[0]
    c = activation.degree
    norms = torch.linalg.vector_norm(X, dim=1)
    if bool((norms == 0).any()):
        keep = norms > 0  # a zero sample has σ = 0 for every u and drops out of the numerator
        lam, norms = lam[keep], norms[keep]
    ones = torch.tensor([1.0, -1.0], dtype=X.dtype, device=X.device)
    live = activation.derivative(ones) != 0
    gamma = float(activation(ones)[live].abs().min())
    eta_c = ((c + 1.0) * c ** (-c / (c + 1.0))) ** ((c + 1.0) / (2.0 * c))
    largest = float((lam.abs() / norms).max()) if lam.numel() else 0.0
    growth = n ** ((c - 1.0) / (2.0 * c)) * (n / 2.0) ** ((c + 1.0) / (2.0 * c))
    return largest * growth / (c * gamma ** (1.0 / c) * eta_c)


def quadratic_dual_ratio_bound(lam, X, basis: torch.Tensor | None = None) -> float:
    """A provable upper bound on sup G_λ for σ(z) = z², over the sphere of span(``basis``) (eq. ``eq-quadratic-bound``).

    Numerator: |Σ_i λ_i ⟨u, x_i⟩²| = |uᵀMu|, M = Σ_i λ_i x_i x_iᵀ.  Denominator: κ^{3/4} =
    η_2 S^{1/4} T^{1/2} with T = uᵀBu, B = (8/n) Σ_i ‖x_i‖² x_i x_iᵀ, and by the power mean
    S = (2/n) Σ_i z_i⁴ ≥ (2/n²) (uᵀCu)², C = Σ_i x_i x_iᵀ.  With the matrix geometric mean,
    uᵀ(C # B)u ≤ (uᵀCu · uᵀBu)^{1/2}, so G_λ(u) ≤ |uᵀMu| / (η_2 (2/n²)^{1/4} uᵀ(C # B)u), whose
    maximum is the largest |generalised eigenvalue| of (M, C # B).  Typically within a factor
    1.5 of the supremum, against a factor ~√n for :func:`dual_ratio_bound`.
    """
    n = X.shape[0]
    Xb = X if basis is None else X @ basis
    sq_norms = (X * X).sum(1)
    M = (Xb * lam[:, None]).T @ Xb
    C = Xb.T @ Xb
    B = 8.0 / n * (Xb * sq_norms[:, None]).T @ Xb
    # C # B = C^{1/2} (C^{-1/2} B C^{-1/2})^{1/2} C^{1/2}
    c_vals, c_vecs = torch.linalg.eigh(C)
    if float(c_vals.min()) <= 1e-12 * float(c_vals.max()):
        return dual_ratio_bound(lam, X, _QUADRATIC)
    c_half = c_vecs @ torch.diag(c_vals.sqrt()) @ c_vecs.T
    c_inv_half = c_vecs @ torch.diag(c_vals.rsqrt()) @ c_vecs.T
    inner_vals, inner_vecs = torch.linalg.eigh(c_inv_half @ B @ c_inv_half)
    mean = c_half @ inner_vecs @ torch.diag(inner_vals.clamp_min(0).sqrt()) @ inner_vecs.T @ c_half
    m_vals, m_vecs = torch.linalg.eigh(mean)
    m_inv_half = m_vecs @ torch.diag(m_vals.clamp_min(1e-300).rsqrt()) @ m_vecs.T
    largest = float(torch.linalg.eigvalsh(m_inv_half @ M @ m_inv_half).abs().max())
    eta_2 = (3.0 * 2.0 ** (-2.0 / 3.0)) ** 0.75
    return largest / (eta_2 * (2.0 / n**2) ** 0.25)


def exact_pricing_available(activation: HomogeneousActivation, subspace_dim: int) -> bool:
    """Whether :func:`exact_dual_ratio_sup` applies: a piecewise-linear σ and admissible dimension ≤ 3."""
    return activation.piecewise_linear and 1 <= subspace_dim <= 3


def arrangement_faces(Xr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The faces of the central arrangement {u : ⟨u, x_i⟩ = 0} in R^r, r ∈ {1, 2, 3}.

    Returns (rays, ray_patterns, spans, patterns): the arrangement's rays (R, r) with their sign
    patterns (R, n); and for every face that
    touches a ray, an orthonormal basis of its linear span (F, r, r, zero-padded) and its sign
    pattern (F, n) in {−1, 0, +1}.  For data in general position every face touches a ray, so
    every face is listed (some more than once).
    """
    n, r = Xr.shape
    dtype, device = Xr.dtype, Xr.device
    eye = torch.eye(r, dtype=dtype, device=device)
    if r == 1:
        rays = torch.tensor([[1.0], [-1.0]], dtype=dtype, device=device)
        patterns = torch.sign(Xr @ rays.T).T
        return rays, patterns, eye.expand(2, 1, 1).clone(), patterns
    # Rays: r = 2, the normals' perpendiculars (none for a zero sample); r = 3, the cross products of pairs
    # of normals, unless the two are parallel to 1e-12 relative to their own norms (whatever the data's scale).
    norms = torch.linalg.vector_norm(Xr, dim=1)
    if r == 2:
        base = torch.stack([-Xr[:, 1], Xr[:, 0]], dim=1)
        pairs = torch.arange(n, device=device)[:, None]
        parallel = torch.zeros_like(norms)
    else:
        i, j = torch.triu_indices(n, n, offset=1, device=device)
        base = torch.linalg.cross(Xr[i], Xr[j])
        pairs = torch.stack([i, j], dim=1)
        parallel = 1e-12 * norms[i] * norms[j]
    keep = torch.linalg.vector_norm(base, dim=1) > parallel
    base, pairs = base[keep], pairs[keep]
    base = base / torch.linalg.vector_norm(base, dim=1, keepdim=True)
    rays = torch.cat([base, -base])
    pairs = torch.cat([pairs, pairs])
    z = rays @ Xr.T
    tol = 1e-10 * Xr.norm(dim=1)[None, :]
    ray_patterns = torch.where(z.abs() <= tol, torch.zeros_like(z), torch.sign(z))
    ray_patterns.scatter_(1, pairs, 0.0)
    spans: list[torch.Tensor] = []
    face_patterns: list[torch.Tensor] = []
    R = rays.shape[0]
    rows = torch.arange(R, device=device)
    k = pairs.shape[1]
    # Full-dimensional cells around each ray: every sign choice on the hyperplanes through it.
    for signs in torch.cartesian_prod(*([torch.tensor([-1.0, 1.0], dtype=dtype, device=device)] * k)).reshape(-1, k):
        pat = ray_patterns.clone()
        pat[rows[:, None], pairs] = signs
        face_patterns.append(pat)
        spans.append(eye.expand(R, r, r))
    if r == 3:
        # Two-dimensional faces: inside the plane of one normal, either side of the other.
        for inside, across in ((0, 1), (1, 0)):
            normal = Xr[pairs[:, inside]]
            e1 = rays
            e2 = torch.linalg.cross(normal, rays)
            e2 = e2 / torch.linalg.vector_norm(e2, dim=1, keepdim=True)
            span = torch.stack([e1, e2, torch.zeros_like(e1)], dim=2)  # columns: basis of the plane
            for sign in (-1.0, 1.0):
                pat = ray_patterns.clone()
                pat[rows, pairs[:, across]] = sign
                face_patterns.append(pat)
                spans.append(span)
    return rays, ray_patterns, torch.cat(spans), torch.cat(face_patterns)


def face_values(lam, Xr, sq_norms, U, patterns, slope, both_signs: bool = False):
    """G_λ at directions U (F, r) taken on the face with the given sign patterns (F, n).

    Uses the face's slopes s_i = σ'(pattern_i) (σ'(0) = the negative slope) rather than the
    signs of ⟨u, x_i⟩, so a stationary point that lies on a face up to round-off gets the face's
    value, never a smaller one.  Returns −1 where U lies clearly outside its face.  With
    ``both_signs``, returns the values of U and of −U on the same faces: G_λ there depends on
    the face's slopes and on |⟨λ, s z⟩|, the same for both, so only the inside tests differ.
    """
    values = _face_ratios(lam, *face_geometry(Xr, sq_norms, U, patterns, slope))
    return values if both_signs else values[0]


def face_geometry(Xr, sq_norms, U, patterns, slope):
    """The λ-free part of :func:`face_values`: s ∘ z (F, n), κ^{1/p} = 2√(S T) (F,), and whether U and
    −U lie in their faces (up to a margin of 10⁻⁹ ‖u‖ ‖x_i‖)."""
    n = Xr.shape[0]
    z = (U @ Xr.T) * (patterns != 0)
    s = torch.where(patterns > 0, torch.ones_like(z), torch.full_like(z, slope))
    T = 2.0 / n * ((s * s) @ sq_norms)
    z_on_face = z * patterns
    sz = z.mul_(s)
    S = 2.0 / n * (sz * sz).sum(1)
    kappa = 2.0 * torch.sqrt(S * T)
    margin = 1e-9 * torch.sqrt(sq_norms)[None, :] * torch.linalg.vector_norm(U, dim=1, keepdim=True)
    return sz, kappa, (z_on_face >= -margin).all(dim=1), (z_on_face <= margin).all(dim=1)


def _face_ratios(lam, sz, kappa, plus_inside, minus_inside):
    """G_λ = |⟨λ, s z⟩| / κ^{1/p} (0 where κ = 0) for U and for −U, −1 where outside the face."""
    numerator = (sz @ lam).abs()
    value = torch.where(
        kappa > 0, numerator / torch.where(kappa > 0, kappa, torch.ones_like(kappa)), torch.zeros_like(kappa)
    )
    outside = torch.tensor(-1.0, dtype=value.dtype, device=value.device)
    return torch.where(plus_inside, value, outside), torch.where(minus_inside, value, outside)


class ExactPricer:
    """sup of G_λ over the unit sphere of span(``basis``) (all of R^d if None), exactly, for many λ.

    For the ReLU and leaky ReLU with an admissible subspace of dimension r ≤ 3 (d ≤ 3, or the
    misaligned directions ρ = 0 when d − k ≤ 3); ``basis`` (d, r) has orthonormal columns.
    O(n^{r−1}) faces, each O(n r²).

    Why it is exact (eq. ``eq-relu-cells``): on the relative interior of a face F of the
    arrangement the slopes s_i = σ'(z_i) are fixed, σ(z_i) = s_i z_i and T is constant, so
    G_λ = const · |λᵀGu| / ‖Gu‖ with G = diag(s) X restricted to span F; this quasi-concave
    ratio is maximal on span F at u = G⁺λ.  If that point lies in F it is F's maximum;
    otherwise F's supremum is approached at its relative boundary, a union of lower faces,
    where (σ'(0) being the one-sided value the package uses) G_λ is at least the limit from
    inside.  So the largest value over the stationary points that lie in their faces and over
    the rays is the supremum.

    Everything but λ is fixed across the rounds of column generation: the arrangement, each face's
    slopes s (float64), sign pattern (float32, exact) and span, and (GᵀG)⁺ are computed once, here,
    and so are the rays' terms.  They take 12 bytes per face and sample (0.7 GB for n = 192 in d = 3,
    growing as n³), about 20 while they are built.  Each ``sup`` is then a few passes over the F × n
    patterns: u = G⁺λ for every face (Gᵀλ = spanᵀ X_rᵀ(s λ) as one product s (λ ∘ X_r)), a float32
    sign test of ⟨u, x_i⟩ against the face's pattern (``PRESELECTION_MARGIN``), and the exact value
    (``face_values``, float64) on the faces whose u or −u passes it: of the 293 376 faces at n = 192,
    tens for column generation's duals and hundreds for random λ, since most stationary points lie
    outside their face.
    """

    #: the float32 sign test keeps a face if ⟨u, x_i⟩ · pattern_i ≥ −margin ‖u‖ ‖x_i‖ for every sample.
    #: ⟨u, x_i⟩ / ‖x_i‖ from float32 u and x_i (‖x_i^r‖ ≤ ‖x_i‖: orthonormal basis) is off by at most
    #: about (r + 2)·2⁻²⁴‖u‖ < 10⁻⁶‖u‖, so no face that ``face_values``'s float64 test (margin 10⁻⁹)
    #: keeps is left out.  (On a GPU that allows TF32 matrix products the test runs in float64.)
    PRESELECTION_MARGIN = 1e-5

    def __init__(
        self, X: torch.Tensor, activation: HomogeneousActivation, basis: torch.Tensor | None = None, chunk: int = 20_000
    ):
        d = X.shape[1]
        W = torch.eye(d, dtype=X.dtype, device=X.device) if basis is None else basis
        if not exact_pricing_available(activation, W.shape[1]):
            raise FlatbookInputError(
                "exact pricing needs a ReLU or leaky ReLU and admissible directions in a subspace of "
                f"dimension <= 3, got {activation!r} in dimension {W.shape[1]}; use dual_ratio_bound."
            )
        self.X, self.W, self.basis = X, W, basis
        self.Xr = Xr = X @ W
        self.sq_norms = (X * X).sum(1)
        assert isinstance(activation, LeakyReLU)  # exact_pricing_available: the ReLU family
        self.slope = activation.negative_slope
        # The pre-selection's sign test, on rows of unit norm (a zero sample: a zero row, which every u passes,
        # as in the float64 test).
        norms = torch.sqrt(self.sq_norms)[:, None]
        tf32 = Xr.is_cuda and torch.backends.cuda.matmul.allow_tf32
        self.test_dtype = torch.float64 if tf32 else torch.float32
        self.unit_rows = torch.where(norms > 0, Xr / torch.where(norms > 0, norms, 1.0), 0.0).to(self.test_dtype)
        self.rays, ray_patterns, spans, patterns = arrangement_faces(Xr)
        self.ray_geometry = face_geometry(Xr, self.sq_norms, self.rays, ray_patterns, self.slope)
        r = Xr.shape[1]
        outer = (Xr[:, :, None] * Xr[:, None, :]).reshape(-1, r * r)  # x_i x_iᵀ, one row per sample
        self.chunks = []
        for start in range(0, patterns.shape[0], chunk):
            pat = patterns[start : start + chunk]
            span = spans[start : start + chunk]
            s = torch.where(
                pat > 0,
                torch.ones_like(pat),
                torch.where(pat < 0, torch.full_like(pat, self.slope), torch.zeros_like(pat)),
            )  # σ'(face)
            # GᵀG = spanᵀ(Σ_i s_i² x_i x_iᵀ)span for G = diag(s) X_r span; pinv: 2-faces are rank 2.
            normal = span.transpose(1, 2) @ ((s * s) @ outer).reshape(-1, r, r) @ span
            self.chunks.append((s, pat.to(torch.float32), span, torch.linalg.pinv(normal, hermitian=True)))

    def sup(self, lam: torch.Tensor, top: int = 1):
        """(supremum, a maximising direction) of G_λ; with ``top`` = k > 1, (supremum, at most k best
        candidate directions (k, d), their values): the best rays and stationary points that lie in their
        faces, which column generation adds all at once.
        """
        Xr, slope = self.Xr, self.slope
        kept_values, kept_u = torch.empty(0, dtype=Xr.dtype, device=Xr.device), Xr[:0]

        def consider(U, values):
            nonlocal kept_values, kept_u
            values = torch.cat([kept_values, values])
            candidates = torch.cat([kept_u, U])
            order = torch.topk(values, min(top, values.shape[0])).indices
            kept_values, kept_u = values[order], candidates[order]

        consider(self.rays, _face_ratios(lam, *self.ray_geometry)[0])
        lam_rows = lam[:, None] * Xr
        for s, sign, span, normal_pinv in self.chunks:
            rhs = span.transpose(1, 2) @ (s @ lam_rows)[:, :, None]  # Gᵀλ
            u = torch.einsum("frk,fk->fr", span, (normal_pinv @ rhs)[:, :, 0])  # G⁺λ
            signed = (u.to(self.test_dtype) @ self.unit_rows.T).mul_(sign)
            tolerance = self.PRESELECTION_MARGIN * torch.linalg.vector_norm(u, dim=1)
            inside = torch.nonzero((signed.amin(1) >= -tolerance) | (signed.amax(1) <= tolerance))[:, 0]
            if inside.shape[0] == 0:
                continue
            u = u[inside]
            plus, minus = face_values(lam, Xr, self.sq_norms, u, sign[inside].to(Xr.dtype), slope, both_signs=True)
            U, values = torch.cat([u, -u]), torch.cat([plus, minus])
            valid = (values >= 0) & (torch.linalg.vector_norm(U, dim=1) > 0)  # in its face; u = 0 is no direction
            consider(U[valid], values[valid])
        U = nudge_inactive(kept_u @ self.W.T, self.X, basis=self.basis)
        U = U / torch.linalg.vector_norm(U, dim=1, keepdim=True)
        if top == 1:
            return float(kept_values[0]), U[0]
        return float(kept_values[0]), U, kept_values


def exact_dual_ratio_sup(
    lam, X, activation: HomogeneousActivation, basis: torch.Tensor | None = None, chunk: int = 20_000, top: int = 1
):
    """sup of G_λ over the unit sphere of span(``basis``) (all of R^d if None), exactly: one
    :meth:`ExactPricer.sup` (build an :class:`ExactPricer` to price many λ on the same data).

    Returns (supremum, a maximising direction); with ``top`` = k > 1, (supremum, at most k best
    candidate directions (k, d), their values (k,)).
    """
    return ExactPricer(X, activation, basis, chunk).sup(lam, top)


def nudge_inactive(
    U: torch.Tensor, X: torch.Tensor, rel_tol: float = 1e-9, basis: torch.Tensor | None = None
) -> torch.Tensor:
    """Move each direction off the hyperplanes ⟨u, x_i⟩ = 0 it lies on (up to ``rel_tol``), to their
    negative side.

    Optima of the ReLU programs sit on cell boundaries, where the convention σ'(0) = σ'(0⁻)
    decides the flatness weight; a pre-activation of ±1e-17 would otherwise decide it by the
    sign of round-off.  The step δ is the least-norm solution of ⟨δ, x_i⟩ = −rel_tol ‖u‖ ‖x_i‖
    on those samples, so every other sample keeps its sign (its |⟨u, x_i⟩| is larger).  With
    ``basis`` (d, r orthonormal) the step stays in span(basis), so directions stay in that subspace.
    """
    norms = torch.linalg.vector_norm(X, dim=1)
    out = U.clone()
    for j in range(U.shape[0]):
        size = float(torch.linalg.vector_norm(U[j]))
        on = ((X @ U[j]).abs() <= rel_tol * size * norms).nonzero()[:, 0]
        if on.numel() == 0:
            continue
        target = -rel_tol * size * norms[on] - X[on] @ U[j]
        A = X[on] if basis is None else X[on] @ basis
        step = torch.linalg.lstsq(A, target[:, None], driver=lstsq_driver(A)).solution[:, 0]
        out[j] = U[j] + (step if basis is None else basis @ step)
    return out


__all__ = [
    "dual_ratio",
    "maximize_dual_ratio",
    "cell_maximizer",
    "least_distance",
    "ascend_cells",
    "dual_ratio_bound",
    "quadratic_dual_ratio_bound",
    "exact_pricing_available",
    "ExactPricer",
    "exact_dual_ratio_sup",
    "nudge_inactive",
    "arrangement_faces",
    "face_values",
    "face_geometry",
]
