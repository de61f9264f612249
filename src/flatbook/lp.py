"""Linear programs of weighted-ℓ1 interpolation: min Σ_j κ_j |ã_j| subject to Φ ã = y.

The kernels that the flattest outer weights for p = 1 (:mod:`flatbook.flattest`, eq. ``eq-primal``) and
the restricted master of column generation (:mod:`flatbook.column_generation`, eq. ``eq-measure-program``)
share.  With v = Φᵀλ the dual is max λᵀy subject to |v_j| ≤ κ_j (eq. ``eq-dual``), so

- any λ scaled into the feasible set bounds the optimum from below (:func:`into_dual_feasible`,
  :func:`weak_duality_bound`);
- :func:`interior_point` (Mehrotra's predictor-corrector on the n × n normal equations) gives a central
  dual λ and a primal iterate near the centre of the optimal face;
- :func:`vertex_from_dual` reads the optimal vertex off such a λ (complementary slackness), certified by
  :func:`basis_vertex`, with :func:`simplex_crossover` as the last resort;
- :func:`purify` moves any feasible ã to a basic one (independent columns) of no larger cost.

Every vertex returned is certified: it interpolates to 1e-10 max|y| and a feasible λ leaves a relative
duality gap of at most 1e-9.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import scipy.optimize
import torch

from .backend import lstsq_driver

__all__ = [
    "BLOCKED_GRAM_MIN_ENTRIES",
    "InteriorPointIterate",
    "InteriorPointResult",
    "basis_vertex",
    "interior_point",
    "into_dual_feasible",
    "purify",
    "simplex_crossover",
    "vertex_from_dual",
    "weak_duality_bound",
    "weighted_gram",
]


def into_dual_feasible(lam, Phi, kappa):
    """λ / max(1, max_j |φ_jᵀλ| / κ_j): λ scaled into the p = 1 dual feasible set {|Φᵀλ| ≤ κ}."""
    return lam / max(1.0, float(((Phi.T @ lam).abs() / kappa).max()))


def weak_duality_bound(lam, Phi, y, kappa) -> float:
    """λᵀy / max(1, max_j |φ_jᵀλ| / κ_j): the value of λ scaled into the dual feasible set, a lower bound on
    the program's optimum for any λ (weak duality)."""
    return float(into_dual_feasible(lam, Phi, kappa) @ y)


#: below this many entries of Φ, :func:`weighted_gram` is one GEMM: the blocked product loses there
#: (1.4-4× its time at n·m ≤ 1.25·10⁵, 0.7-0.94× from 3.2·10⁵ up)
BLOCKED_GRAM_MIN_ENTRIES = 300_000


def weighted_gram(Phi, weights=None, blocks: int = 4, min_entries: int = BLOCKED_GRAM_MIN_ENTRIES):
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


class InteriorPointIterate(NamedTuple):
    """A primal-dual point of :func:`interior_point`: x = (x⁺, x⁻) > 0 and s = (s⁺, s⁻) > 0 (2m
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


class InteriorPointResult(NamedTuple):
    """What :func:`interior_point` returns."""

    lam: torch.Tensor  #: the last dual iterate λ (n,), central: near the middle of the optimal dual face
    primal: torch.Tensor  #: the last primal iterate ã = x⁺ − x⁻ (m,), every entry non-zero
    vertex: tuple[torch.Tensor, torch.Tensor] | None  #: the certified vertex (ã, λ) that ended it, if any
    restart: InteriorPointIterate | None  #: the warm-start point asked for with ``restart_factor``


def interior_point(
    Phi, y, kappa, tol=1e-9, max_iter=80, vertex=None, start=None, restart_factor=None
) -> InteriorPointResult:
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
    which sits near the boundary (Gondzio 1998).
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
        gram = weighted_gram(Phi)
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
                return InteriorPointResult(lam, x[:m] - x[m:], found, None)
        D = x / s
        normal = weighted_gram(Phi, D[:m] + D[m:])
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
    return InteriorPointResult(lam, x[:m] - x[m:], None, restart)


def basis_vertex(S, signs, Phi, y, kappa):
    """The vertex of basis S (n columns) with dual signs ``signs``, certified, or None: Φ_S ã_S = y and
    Φ_Sᵀ λ = κ_S signs; the signs of ã_S must agree, and λ, scaled into the feasible set (it may violate a
    constraint by round-off on an ill-conditioned Φ_S), must leave a relative gap of at most 1e-9."""
    try:
        a_S = torch.linalg.solve(Phi[:, S], y)
        lam_S = torch.linalg.solve(Phi[:, S].T, kappa[S] * signs)
    except RuntimeError:  # singular Φ_S: a degenerate vertex
        return None
    lam_S = into_dual_feasible(lam_S, Phi, kappa)
    primal, dual = float((kappa[S] * a_S.abs()).sum()), float(lam_S @ y)
    if not (bool((a_S * signs >= 0).all()) and abs(primal - dual) <= 1e-9 * primal):
        return None
    a = torch.zeros(Phi.shape[1], dtype=Phi.dtype, device=Phi.device)
    a[S] = a_S
    return a, lam_S


def simplex_crossover(S, signs, Phi, y, kappa, max_pivots: int):
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
    :func:`basis_vertex`), or after ``max_pivots`` pivots (None; there is no other guard against cycling
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


def purify(a, Phi, kappa, rank_rtol: float = 1e-12) -> torch.Tensor:
    """A basic solution of no larger cost Σ_j κ_j|ã_j| with the same Φã: ã moved along null directions z of its
    support's columns (Φ_S z = 0), each step against the cost (Σ_j κ_j sign(ã_j) z_j ≤ 0, linear while no entry
    changes sign) until an entry reaches zero, until the support's columns are independent (the classical
    purification of a linear program's solution).  Blockwise: up to 2n support columns at a time, whose null space
    (one SVD: singular values below ``rank_rtol``·σ_max) has dimension at least the block's size minus n; each
    step zeroes one entry and eliminates that coordinate from the remaining null vectors (a rank-one update
    pivoted on the largest entry).  Φã changes by round-off and the null space's tolerance only: callers
    re-fit the residual on the returned support."""
    a = a.clone()
    n = Phi.shape[0]
    while True:
        support = torch.nonzero(a).flatten()
        size = min(support.numel(), 2 * n)
        if size == 0:
            return a
        block = support[:size]
        _, singular, vh = torch.linalg.svd(Phi[:, block], full_matrices=True)
        rank = int((singular > rank_rtol * singular[0]).sum())
        null = vh[rank:].T.clone()  # (size, size − rank): Φ_block z ≈ 0
        if null.shape[1] == 0:
            return a  # the block is the whole support (size < 2n only then) and its columns are independent
        part = a[block].clone()
        cost = kappa[block]
        while null.shape[1] > 0:
            z = null[:, 0]
            signs = torch.sign(part)
            if float((cost * signs) @ z) > 0:
                z = -z
            shrinking = part * z < 0
            if not bool(shrinking.any()):  # cost-neutral and only growing: the other way shrinks
                z = -z
                shrinking = part * z < 0
            if not bool(shrinking.any()):  # zero on the remaining support (round-off): nothing to move
                null = null[:, 1:]
                continue
            steps = torch.where(shrinking, -part / torch.where(shrinking, z, torch.ones_like(z)), torch.inf)
            j = int(torch.argmin(steps))
            part = part + steps[j] * z
            part[j] = 0.0
            pivot = int(torch.argmax(null[j].abs()))
            if float(null[j, pivot].abs()) == 0.0:  # every null vector is zero at j already: drop the used one
                null = null[:, 1:]
                continue
            null = null - torch.outer(null[:, pivot] / null[j, pivot], null[j])
            null = torch.cat([null[:, :pivot], null[:, pivot + 1 :]], dim=1)
        a[block] = part
        if int(torch.count_nonzero(a)) == support.numel():
            return a  # no entry reached zero: the null directions left were round-off


def vertex_from_dual(lam, Phi, y, kappa, tight_tols=(1e-6, 1e-4), primal=None, swaps: int = 4, crossover: bool = False):
    """The optimal vertex of the p = 1 program identified from an approximate dual λ, or None.

    Complementary slackness: ã_j ≠ 0 only where the dual constraint is tight,
    |v_j| = κ_j with v = Φᵀλ.  A non-degenerate optimum is a vertex with n
    tight constraints, so take S = the n largest |v_j|/κ_j and certify it
    (:func:`basis_vertex`).  With an approximate primal iterate ``primal`` (the
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
    simplex pivots (:func:`simplex_crossover`, at most min(n, 100)) start from the primal's n
    heaviest columns when given, else from the dual's n tightest: at a nearly degenerate
    optimum its λ and ã can both be a pivot or two away from the optimal vertex.
    """
    n = Phi.shape[0]
    v = Phi.T @ lam
    ratio = v.abs() / kappa
    a = torch.zeros(Phi.shape[1], dtype=Phi.dtype, device=Phi.device)
    tightest = torch.topk(ratio, n).indices
    found = basis_vertex(tightest, torch.sign(v[tightest]), Phi, y, kappa)
    heaviest = None
    if found is None and primal is not None:
        heaviest = torch.argsort(primal.abs(), descending=True)
        candidates = [heaviest[:n]] + [
            torch.cat([heaviest[: n - 1], heaviest[k : k + 1]]) for k in range(n, n + swaps) if k < heaviest.shape[0]
        ]
        for S in candidates:
            found = basis_vertex(S, torch.sign(primal[S]), Phi, y, kappa)
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
            return a, into_dual_feasible(lam, Phi, kappa)
    if crossover:  # from the first basis tried above: the primal's heaviest columns, else the dual's tightest
        start, hint = (heaviest[:n], primal) if heaviest is not None else (tightest, v)
        return simplex_crossover(start, torch.sign(hint[start]), Phi, y, kappa, max_pivots=min(n, 100))
    return None
