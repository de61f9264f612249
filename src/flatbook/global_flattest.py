"""The flattest interpolator over all networks of a width, with certified bounds.

Υ*(m) is the minimum of Υ (eq. ``eq-upsilon``) over *every* width-m network that
interpolates the data, every direction allowed.  Book, chapter 2, section
"The flattest interpolator over all directions":

- **Splitting lemma** (eq. ``eq-splitting``).  Group a network's neurons by direction u, with
  A_u the total effective weight on u and m_u the number of neurons.  Jensen within a group
  and Hölder across groups give, for p = 2c/(c+1) ≥ 1,
  Υ(w) ≥ Σ_u κ(u)|A_u|^p m_u^{1−p} ≥ m^{1−p} (Σ_u κ(u)^{1/p} |A_u|)^p,
  with equality when u carries m_u ∝ κ(u)^{1/p}|A_u| equal copies.  Hence
  Υ*(m) ≥ m^{1−p} V*^p, with equality up to integer rounding, where
- **the measure program** (eq. ``eq-measure-program``)
  V* = min over finite signed measures μ on the sphere of ∫ κ(u)^{1/p} d|μ|(u)
  subject to ∫ σ(⟨u, x_i⟩) dμ(u) = y_i, a convex, semi-infinite weighted-ℓ1 program
  with a minimiser of at most n atoms, and
- **its dual** (eq. ``eq-measure-dual``): max λᵀy s.t. sup_u G_λ(u) ≤ 1, with the dual ratio
  G_λ of :mod:`flatbook.pricing`.  Any λ gives V* ≥ λᵀy / sup_u G_λ(u).

:func:`flattest_interpolator` solves the measure program by column generation: a weighted-ℓ1 master
over the directions found so far (``_solve_master``: an interior point, during the rounds only
to a tenth of the column generation's gap, the inexact master of primal-dual column generation;
HiGHS's :class:`~flatbook.weighted_l1.WeightedL1Master` where it fails; each inexact master
optionally warm-started from an early iterate of the previous one, Gondzio 1998), pricing by multi-start
ascent of G_λ started at the master's support atoms (which slides them) and at fresh directions, at
the master's central (interior-point) dual; with exact pricing every face's best direction is known,
and up to 2n of the most violated join the master in one round (the master holding up to 80n + 500
columns; with heuristic pricing 64 and 20n + 500); pruning of columns that stay far from tight.
The lower bound is *proven* only with a proven supremum: exact pricing (ReLU family, admissible directions in a subspace
of dimension ≤ 3) or the Cauchy-Schwarz bound of :func:`~flatbook.pricing.dual_ratio_bound`; the
bound from the largest ratio that the ascent found is reported separately as an estimate.  Then
the atoms are split into integer copies (greedy, which is optimal for the separable convex
allocation), giving a network of exactly the requested width.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from .activations import HomogeneousActivation, LeakyReLU, get_activation
from .backend import as_tensor, check_data, is_count, lstsq_driver
from .errors import FlatbookInputError, InfeasibleInterpolationError, SolverError
from .flatness import min_flatness, unit_flatness_weights
from .flattest import flattest_outer_weights
from .interpolators import complement_basis
from .lp import InteriorPointIterate, interior_point, vertex_from_dual
from .network import TwoLayerNet
from .pricing import (
    ExactPricer,
    dual_ratio_bound,
    exact_pricing_available,
    maximize_dual_ratio,
    nudge_inactive,
    quadratic_dual_ratio_bound,
)
from .progress import progress_bar
from .weighted_l1 import MasterSolution, WeightedL1Master

#: the loosest relative gap an inexact master is solved to (``inexact_master``; a tenth of the column
#: generation's own gap when that is smaller)
INEXACT_MASTER_MAX_GAP = 1e-1
#: with ``warm_masters``, an inexact master's interior point starts from the previous one's first iterate
#: within this factor of its tolerance (gap and residuals), an early iterate: restarting from its last one
#: cost more factorisations than cold starts (bench/README.md, sessions 14 and 17)
MASTER_RESTART_FACTOR = 10.0


class Atoms(NamedTuple):
    """The distinct directions of a flattest interpolator and the total effective weight on each."""

    directions: torch.Tensor  #: (K, d) unit rows
    weights: torch.Tensor  #: (K,) A_u = Σ of ã_j over the neurons with direction u


@dataclass
class FlattestInterpolator:
    """The result of :func:`flattest_interpolator`: a network, its Υ and bounds on Υ*(width)."""

    net: TwoLayerNet | None  #: exactly ``width`` neurons, interpolating; None below the atom count
    upper: float  #: Υ(net) = min_flatness(net, X, y), an upper bound on Υ*(width) (inf if no net)
    lower: float  #: a proven lower bound on Υ of every admissible width-``width`` interpolator
    lower_estimate: float  #: the bound implied by the largest pricing ratio found (an estimate if heuristic)
    certified: bool  #: (upper − lower) / upper ≤ tol
    gap: float  #: (upper − lower) / upper
    atoms: Atoms  #: distinct directions and their total weights (the measure's atoms)
    status: str  #: what happened, in words
    width: int  #: m
    p: float  #: 2c/(c+1)
    measure_value: float  #: V of the atoms returned: Σ κ(u)^{1/p}|A_u| (≥ V*)
    measure_lower: float  #: proven lower bound on V*
    measure_lower_estimate: float  #: the lower bound on V* implied by the largest pricing ratio found
    pricing: str  #: how sup G_λ is bounded: "exact" (on the admissible set), "superset" (exact on
    #: the whole sphere, d ≤ 3), "bound" (eq. ``eq-pricing-bound`` or ``eq-quadratic-bound``)
    rounds: int  #: column-generation rounds run
    #: per round: master value (approximate where ``master_exact`` is False), bounds, columns
    history: list[dict] = field(default_factory=list)
    activation: HomogeneousActivation | None = None
    tol: float = 1e-3

    def at_width(self, X, y, width: int) -> FlattestInterpolator:
        """The same measure split for another width: no new solve, the bounds rescale as m^{1−p}."""
        X, y = check_data(X, y)
        if not is_count(width, 1):
            raise FlatbookInputError(f"width must be a positive int, got {width!r}.")
        width = int(width)
        status = self.status.split("; width")[0]
        return _assemble(
            self.atoms,
            X,
            y,
            self.activation,
            width,
            self.measure_lower,
            self.measure_lower_estimate,
            self.tol,
            status,
            self.pricing,
            self.rounds,
            self.history,
        )

    @property
    def upper_measure_bound(self) -> float:
        """m^{1−p} V^p: Υ of the atoms split in ideal (real-valued) proportions."""
        return self.width ** (1.0 - self.p) * self.measure_value**self.p


def _admissible_set(d: int, teacher, max_alignment, device):
    """(projector or None, orthonormal basis of the smallest subspace containing the set, note)."""
    if teacher is None and max_alignment is None:
        return None, torch.eye(d, dtype=torch.float64, device=device), "all directions"
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
    basis_in = theta_star.T  # (d, k)
    complement = complement_basis(theta_star)

    def project(U):
        inside = (U @ basis_in) @ basis_in.T
        outside = U - inside
        norm_in = torch.linalg.vector_norm(inside, dim=1, keepdim=True)
        norm_out = torch.linalg.vector_norm(outside, dim=1, keepdim=True).clamp_min(1e-300)
        norm = torch.linalg.vector_norm(U, dim=1, keepdim=True)
        too_aligned = (norm_in > rho0 * norm)[:, 0]
        clipped = rho0 * inside / norm_in.clamp_min(1e-300) + math.sqrt(1 - rho0**2) * outside / norm_out
        return torch.where(too_aligned[:, None], clipped, U / norm)

    if rho0 == 0.0:
        return project, complement, "directions orthogonal to the teacher (ρ = 0)"
    return project, torch.eye(d, dtype=theta_star.dtype, device=device), f"directions with ρ ≤ {rho0:g}"


def _proper_subspace(basis):
    """``basis`` (d × r) where it spans a proper subspace (r < d), None where it spans all of R^d: the
    ``basis`` argument of :mod:`flatbook.pricing`, which treats None as the whole sphere."""
    return basis if basis.shape[1] < basis.shape[0] else None


def _pricing_mode(activation, project, basis, d: int, exact_pricing: bool = True) -> str:
    """How sup G_λ over the admissible set is bounded: "exact", "superset" or "bound" (see ``pricing``)."""
    r = basis.shape[1]
    on_subspace = project is None or r < d  # the admissible set is a whole (sub)sphere
    if exact_pricing and on_subspace and exact_pricing_available(activation, r):
        return "exact"
    # In d <= 3 the exact supremum over the whole sphere bounds the one over any subset.
    return "superset" if exact_pricing and exact_pricing_available(activation, d) else "bound"


def _exact_pricer(X, activation, basis, pricing: str) -> ExactPricer | None:
    """The arrangement enumeration that ``pricing`` uses, built once for every λ: over the admissible
    subspace ("exact"), over the whole sphere ("superset"), or None ("bound")."""
    if pricing == "exact":
        return ExactPricer(X, activation, _proper_subspace(basis))
    if pricing == "superset":
        return ExactPricer(X, activation)
    return None


def _proven_dual_ratio_sup(lam, X, activation, basis, pricer: ExactPricer | None) -> float:
    """A proven upper bound on sup G_λ over the admissible set: the arrangement enumeration ``pricer`` (from
    :func:`_exact_pricer`) where there is one, else the provable bounds of :mod:`flatbook.pricing`."""
    if pricer is not None:
        return pricer.sup(lam)[0]
    if activation.name == "quadratic":
        return quadratic_dual_ratio_bound(lam, X, _proper_subspace(basis))
    return dual_ratio_bound(lam, X, activation)


class DualBound(NamedTuple):
    """A proven lower bound on V* from one dual point (the result of :func:`measure_dual_bound`)."""

    value: float  #: λᵀy / sup G_λ ≤ V* (0 if λᵀy ≤ 0)
    dual_value: float  #: λᵀy
    sup: float  #: the proven upper bound on sup_u G_λ(u) over the admissible directions
    pricing: str  #: how ``sup`` was bounded: "exact", "superset" or "bound"


def measure_dual_bound(X, y, activation, lam, *, teacher=None, max_alignment=None) -> DualBound:
    """V* ≥ λᵀy / sup_u G_λ(u) for one dual point λ, over every direction or over ρ(u) ≤ ρ0 (eq. ``eq-measure-dual``).

    Weak duality of the measure program: any λ with λᵀy > 0 bounds V* from below once the
    supremum of the dual ratio over the admissible directions is bounded from above, exactly
    where the ReLU family's arrangement enumeration applies, else by the provable bounds of
    :mod:`flatbook.pricing`.  With the splitting lemma every admissible width-m interpolator
    then has Υ ≥ m^{1−p} value^p (eq. ``eq-splitting``).  Chapter 3 uses the centred labels
    λ = y − ȳ on the misaligned directions (eq. ``eq-centred-certificate``).
    """
    activation = get_activation(activation)
    X, y = check_data(X, y)
    lam = as_tensor(lam, "lam", ndim=1, device=X.device)
    if lam.shape[0] != X.shape[0]:
        raise FlatbookInputError(f"lam has {lam.shape[0]} entries but there are n = {X.shape[0]} samples.")
    project, basis, _ = _admissible_set(X.shape[1], teacher, max_alignment, X.device)
    pricing = _pricing_mode(activation, project, basis, X.shape[1])
    dual_value = float(lam @ y)
    sup = _proven_dual_ratio_sup(lam, X, activation, basis, _exact_pricer(X, activation, basis, pricing))
    value = dual_value / sup if dual_value > 0 and sup > 0 else 0.0
    return DualBound(value=value, dual_value=dual_value, sup=sup, pricing=pricing)


def _random_admissible(count, basis, project, gen, device):
    U = torch.randn(count, basis.shape[0], generator=gen, dtype=torch.float64).to(device)
    if basis.shape[1] < basis.shape[0]:
        U = U @ basis @ basis.T
    U = U / torch.linalg.vector_norm(U, dim=1, keepdim=True)
    return project(U) if project is not None else U


def split_into_copies(weights: torch.Tensor, kappa: torch.Tensor, p: float, width: int) -> list[int]:
    """Integer copies m_k ≥ 1, Σ m_k = width, minimising Σ_k κ_k |A_k|^p m_k^{1−p} (eq. ``eq-splitting``).

    Greedy: each further copy goes to the atom whose term drops most; optimal because each term
    is convex and decreasing in m_k.  For p = 1 every allocation has the same value.
    """
    K = weights.shape[0]
    if width < K:
        raise FlatbookInputError(f"width {width} is below the {K} atoms of the flattest measure.")
    cost = (kappa * weights.abs() ** p).tolist()
    counts = [1] * K
    if p == 1.0:
        for extra in range(width - K):  # any split is optimal: spread evenly
            counts[extra % K] += 1
        return counts
    heap = [(-(b * (1.0 - 2.0 ** (1.0 - p))), k) for k, b in enumerate(cost)]
    heapq.heapify(heap)
    for _ in range(width - K):
        _, k = heapq.heappop(heap)
        counts[k] += 1
        c = counts[k]
        heapq.heappush(heap, (-(cost[k] * (c ** (1.0 - p) - (c + 1) ** (1.0 - p))), k))
    return counts


def rounding_excess_bound(atoms: int, width: int, p: float) -> float:
    """(m/(m − K))^{p−1} − 1: how far the integer split can exceed m^{1−p} V^p, relatively."""
    return (width / (width - atoms)) ** (p - 1.0) - 1.0 if width > atoms else math.inf


def _columns(U, X, activation):
    """(directions, Φ, w): the unit directions U that are active on some sample, their feature columns
    σ(⟨u, x_i⟩) (n, K) and weights κ(u)^{1/p} (K,).  A direction silent on every sample has κ = 0: no column
    (its zero weight would make the master's dual ratio |φᵀλ| / w undefined)."""
    w = unit_flatness_weights(U, X, activation) ** (1.0 / activation.p)
    live = w > 0
    return U[live], activation(X @ U[live].T), w[live]


def _build_net(atom_dirs, atom_weights, counts, activation):
    theta = torch.repeat_interleave(atom_dirs, torch.tensor(counts, device=atom_dirs.device), dim=0)
    share = atom_weights / torch.tensor(counts, dtype=atom_weights.dtype, device=atom_weights.device)
    a = torch.repeat_interleave(share, torch.tensor(counts, device=atom_dirs.device))
    return TwoLayerNet(a, theta, activation)


def flattest_interpolator(
    X,
    y,
    activation="relu",
    width: int | None = None,
    *,
    teacher=None,
    max_alignment=None,
    start_directions=None,
    n_start: int | None = None,
    rounds: int = 40,
    tol: float = 1e-3,
    pricing_starts: int = 64,
    pricing_steps: int = 60,
    slide_steps: int = 20,
    exact_pricing: bool = True,
    inexact_master: bool = True,
    warm_masters: bool = False,
    stall_rounds: int | None = 5,
    seed: int = 0,
    progress: bool = False,
) -> FlattestInterpolator:
    """The flattest width-``width`` interpolator of (X, y), every direction allowed, with proven bounds.

    ``teacher`` (k, d, orthonormal rows) with ``max_alignment`` = ρ0 ∈ [0, 1) restricts every
    direction to ρ(u) = ‖Θ* u‖ ≤ ρ0: the flattest ρ0-bad interpolator.  ``start_directions``
    warm-start the master (they are projected into the admissible set); if there are exactly
    ``width`` of them, the result is never worse than :func:`~flatbook.flattest.flattest_outer_weights` on them.
    ``n_start`` random admissible directions (default max(2n, 2d)) join them in the first master (with
    ``n_start=0`` the start directions must interpolate on their own).
    Column generation runs at most ``rounds`` rounds and stops when the master's value is within
    ``tol`` (relative) of the best lower bound (proven where pricing is exact, estimated else), or, where
    pricing is heuristic and ``stall_rounds`` is not None, when in the last ``stall_rounds`` rounds neither
    the best master value so far fell nor that bound rose by more than ``tol`` (tailing-off, ``_stalled``).
    Each round also polishes the master's atoms into at most 4 (``_fewer_atoms``) and adds them to the
    master as columns when they interpolate and are at least as flat as it (the ReLU family only where its
    admissible directions span more than 3 dimensions: below, its optima sit at the kinks of σ).  For the
    quadratic and the ReLU family with single-index teachers the polish finds the teacher's direction
    in a few rounds, which pricing approached over dozens or, for the ReLU family in d = 100, did not
    reach in 60 (bench/README.md, sessions 19 and 20).
    ``exact_pricing=False`` switches the arrangement enumeration off (for tests of the
    heuristic path); the lower bound then comes from the provable bounds of :mod:`flatbook.pricing`.
    ``inexact_master`` solves the restricted master during the rounds only to a tenth of the column
    generation's gap (at most ``INEXACT_MASTER_MAX_GAP``), exactly before declaring convergence, before
    pruning and when pricing finds nothing (``_solve_master``), in the last round and after a stop on an
    inexact one; ``False`` solves it exactly every round.
    ``warm_masters`` starts each inexact master that follows an inexact one from
    an early iterate of it, extended to the new columns (Gondzio 1998; ``MASTER_RESTART_FACTOR``),
    instead of Mehrotra's cold start: about half the interior-point iterations at n ≥ 800, d = 100, but
    a different column generation path (bench/README.md, session 17); off by default until the book's
    chapters are re-based on it.
    ``slide_steps`` is the number of descent steps of the master's n basic directions on V per round
    (``_slide``, the local step of sliding Frank-Wolfe), whose results join the master; each step costs
    an n × n solve and the master grows by n columns a round.  Per round it makes the result flatter,
    per second it does not at large n with heuristic pricing (n ≥ 800, d = 100; ``bench/README.md``).  It
    is skipped in rounds where the polish reached at most 4 atoms that interpolate at least as flat as the
    master (whether or not they are new columns): those atoms already are the sparse measure that
    sliding the master's n basic directions moves towards.
    ``progress`` shows a tqdm bar over the rounds.

    The result's ``lower`` is a proven lower bound on Υ of every admissible interpolator of this
    width (eq. ``eq-splitting`` with eq. ``eq-measure-dual``), ``upper`` is Υ of ``net``, and
    ``certified`` says whether they agree to ``tol``.  Below the atom count no net is built
    (``net`` is None, ``upper`` inf) but ``lower`` still holds.
    """
    activation = get_activation(activation)
    X, y = check_data(X, y)
    n, d = X.shape
    if not is_count(width, 1):
        raise FlatbookInputError(f"width must be a positive int (the number of neurons m), got {width!r}.")
    if float(y.abs().max()) == 0.0:
        raise FlatbookInputError("y is identically zero; the flattest interpolator is the zero network.")
    if not (rounds >= 1 and tol > 0 and pricing_starts >= 1 and pricing_steps >= 0):
        raise FlatbookInputError("need rounds >= 1, tol > 0, pricing_starts >= 1 and pricing_steps >= 0.")
    if not is_count(slide_steps, 0):
        raise FlatbookInputError(f"slide_steps must be a non-negative int (0: no slide), got {slide_steps!r}.")
    if stall_rounds is not None and not is_count(stall_rounds, 1):
        raise FlatbookInputError(
            f"stall_rounds must be a positive int or None (no tailing-off stop), got {stall_rounds!r}."
        )
    if n_start is not None and not is_count(n_start, 0):
        raise FlatbookInputError(f"n_start must be a non-negative int (random directions), got {n_start!r}.")
    width, slide_steps = int(width), int(slide_steps)
    stall_rounds = None if stall_rounds is None else int(stall_rounds)
    n_start = None if n_start is None else int(n_start)
    device = X.device
    project, basis, admissible = _admissible_set(d, teacher, max_alignment, device)
    r = basis.shape[1]
    pricing = _pricing_mode(activation, project, basis, d, exact_pricing)
    exact = pricing == "exact"
    # Exact pricing knows the best direction of every face: up to 2n cuts per round, and a master
    # that holds enough of them (pruning them by tightness at one dual point makes the bound cycle).
    max_new, cap_factor = (2 * n, 80) if exact else (64, 20)
    cap = cap_factor * n + 500
    gen = torch.Generator().manual_seed(seed)

    dictionary = torch.zeros(0, d, dtype=X.dtype, device=device)
    if start_directions is not None:
        dictionary = as_tensor(start_directions, "start_directions", ndim=2, device=device)
        if dictionary.shape[1] != d:
            raise FlatbookInputError(f"start_directions has {dictionary.shape[1]} columns but X has d = {d}.")
        dictionary = dictionary / torch.linalg.vector_norm(dictionary, dim=1, keepdim=True)
        if project is not None:
            dictionary = project(dictionary)
    warm = [_nuclear_norm_directions(X, y, basis)] if activation.name == "quadratic" else []
    U0 = torch.cat(
        [
            dictionary,
            *warm,
            _spectral_starts(y - y.mean(), X, basis, project),
            _random_admissible(max(2 * n, 2 * d) if n_start is None else n_start, basis, project, gen, device),
        ]
    )
    batch, Phi_batch, w_batch = _columns(U0, X, activation)
    master = WeightedL1Master(y.cpu().numpy())
    directions, Phi, w = batch[:0], Phi_batch[:, :0], w_batch[:0]
    for attempt in range(5):  # a random dictionary too small to interpolate: double it, a few times
        master.add(Phi_batch.cpu().numpy(), w_batch.cpu().numpy())
        directions = torch.cat([directions, batch])
        Phi, w = torch.cat([Phi, Phi_batch], 1), torch.cat([w, w_batch])
        try:
            solution, central, restart = _solve_master(master, Phi, y, w)
            break
        except InfeasibleInterpolationError as exc:
            if attempt == 4 or activation.name == "quadratic":
                hint = ""
                if activation.name == "quadratic":
                    D = r * (r + 1) // 2
                    hint = (
                        f" Quadratic features of directions in a {r}-dimensional space span at most "
                        f"{D} dimensions, so they interpolate at most {D} generic samples (n = {n})."
                    )
                raise InfeasibleInterpolationError(f"{exc}{hint}") from None
            batch, Phi_batch, w_batch = _columns(
                _random_admissible(directions.shape[0], basis, project, gen, device), X, activation
            )

    pricer = _exact_pricer(X, activation, basis, pricing)
    # The ReLU family (ReLU is a LeakyReLU) is polished only where its arrangement could not be enumerated
    # (admissible directions spanning more than 3 dimensions), whatever the pricing chosen: in low dimension
    # its optima sit at the kinks of σ (cell boundaries), where Gauss-Newton's steps are no guide.  Its atoms
    # are nudged off the boundaries at the end.
    relu_family = isinstance(activation, LeakyReLU)
    polishable = not (relu_family and exact_pricing_available(activation, r))
    best = {"estimate": -math.inf, "proven": -math.inf}
    history = []
    status = f"round limit ({rounds}) reached"

    def price(lam):
        """Directions of high dual ratio, the largest ratio found, and a proven bound on the supremum."""
        # The heaviest atoms of the master (at most pricing_starts of them): their ascent slides them.
        heaviest = np.argsort(-np.abs(solution.mu))[:pricing_starts]
        heaviest = heaviest[np.abs(solution.mu[heaviest]) > 0]
        starts = torch.cat(
            [
                directions[torch.as_tensor(heaviest, device=device)],
                _random_admissible(pricing_starts, basis, project, gen, device),
                _spectral_starts(lam, X, basis, project),
            ]
        )
        found, values = maximize_dual_ratio(lam, X, activation, starts, project, steps=pricing_steps)
        sup_estimate = max(float(values.max()), float(((Phi.T @ lam).abs() / w).max()))
        if exact:
            sup_proven, u_exact, v_exact = pricer.sup(lam, top=max_new)
            found, values = torch.cat([found, u_exact]), torch.cat([values, v_exact])
            sup_estimate = max(sup_estimate, sup_proven)
        else:
            sup_proven = _proven_dual_ratio_sup(lam, X, activation, basis, pricer)
        if sup_proven < (1.0 - 1e-9) * sup_estimate:  # a proven bound below a value actually reached: a bug
            raise SolverError(
                f"the proven bound {sup_proven:.6g} on the dual ratio is below a value the ascent "
                f"reached, {sup_estimate:.6g}: please report this ({pricing} pricing)."
            )
        return found, values, sup_estimate, max(sup_proven, sup_estimate)

    bar = progress_bar(rounds, desc="flattest interpolator", leave=False, show=progress)
    rounds_run = 0
    for round_ in range(rounds):
        rounds_run = round_ + 1
        bar.update(1)
        # Price at the interior-point (central) dual of the master: a vertex dual sits at a corner of a
        # degenerate optimal face and makes the dual ratio needlessly large elsewhere.
        lam, lam_exact = central, solution.exact
        found, values, sup_estimate, sup_proven = price(lam)
        value = float(lam @ y)
        if value > 0:
            best["estimate"] = max(best["estimate"], value / sup_estimate)
            best["proven"] = max(best["proven"], value / sup_proven)
        target = best["proven"] if exact else best["estimate"]
        polished = None
        if polishable:
            # The master's atoms polished into at most 4 (``_fewer_atoms``) join it as columns when flatter
            # than its value: its dual then prices at (nearly) the polished measure, and column generation
            # need not rediscover those directions one cut at a time.
            polished = _fewer_atoms(*_support(solution, directions), X, y, activation, project, ceiling=solution.value)
            if polished is not None:
                found = torch.cat([polished[0], found])
                values = torch.cat([values.new_full((polished[0].shape[0],), math.inf), values])
        new = _new_columns(found, values, directions, activation, X, max_new)
        if slide_steps > 0 and polished is None:
            basic = _basic_directions(directions, Phi, w, solution, n)
            if basic is not None:
                new = torch.cat([new, _slide(basic, X, y, activation, project, steps=slide_steps)[0]])
        # An inexact master's value may lie on either side of the exact one, its dual's weak-duality bound
        # never above it: when either is near the target, solve exactly and test the exact value (so that
        # convergence is only ever declared on an exact master, or after the loop on polished atoms).
        near = (1.0 + tol) * target
        if not solution.exact and min(solution.value, _weak_duality_bound(central, Phi, y, w)) <= near:
            solution, central, restart = _solve_master(master, Phi, y, w)
        history.append(
            {
                "round": round_,
                "master": solution.value,
                "lower_estimate": best["estimate"],
                "lower_proven": best["proven"],
                "target": target,
                "columns": master.size,
                "added": new.shape[0],
                "master_exact": solution.exact,
                "master_gap": solution.gap,
            }
        )
        bar.set_postfix(V=f"{solution.value:.6g}", lower=f"{target:.6g}")
        if solution.value <= (1.0 + tol) * target:
            status = "converged" + ("" if exact else " (heuristic pricing)")
            break
        if stall_rounds is not None and not exact and _stalled(history, stall_rounds, tol):
            status = f"stalled (neither the master nor the lower bound moved by tol in {stall_rounds} rounds)"
            break
        if new.shape[0] == 0:
            if not lam_exact:  # an inexact λ can satisfy every cut while the master is not yet optimal
                if not solution.exact:
                    solution, central, restart = _solve_master(master, Phi, y, w)
                continue
            status = "no improving direction found" + ("" if exact else " by the heuristic pricing")
            break
        new, Phi_new, w_new = _columns(new, X, activation)  # (a polished relu_power atom can be silent)
        master.add(Phi_new.cpu().numpy(), w_new.cpu().numpy())
        directions, Phi, w = torch.cat([directions, new]), torch.cat([Phi, Phi_new], 1), torch.cat([w, w_new])
        # Inexact masters while the column generation is far from converged: a tenth of its gap, at most
        # INEXACT_MASTER_MAX_GAP (Gondzio & Sarkissian's rule).  Exact ones once that is below the master's own
        # 1e-9, and before pruning (which keeps the support of an exact solution: the heaviest entries of an
        # interior iterate may not interpolate); after the last round only if the polish does not beat it.
        gap_tol = min(INEXACT_MASTER_MAX_GAP, (solution.value / target - 1.0) / 10.0) if target > 0 else 0.0
        # With warm_masters, an inexact master that follows an inexact one starts from its restart point,
        # extended to the new columns (exact masters, and inexact ones after them, start cold).
        exact_now = not inexact_master or gap_tol <= 1e-9 or master.size > cap or round_ == rounds - 1
        start = None if exact_now or restart is None else restart.with_columns(Phi_new, w_new)
        solution, central, restart = _solve_master(
            master, Phi, y, w, None if exact_now else gap_tol, start, MASTER_RESTART_FACTOR if warm_masters else None
        )
        keep = _prune(master, solution, central, Phi, w, cap)
        if keep is not None:  # the support stays, so the vertex stays optimal and the central dual feasible
            # (only after an exact master, which leaves no restart point: master.size > cap makes it exact)
            master.remove(keep)
            directions, Phi, w = directions[keep], Phi[:, keep], w[keep]
            solution = dataclasses.replace(solution, mu=solution.mu[keep])
    bar.close()
    # The last central dual is the master's over these columns (or over a superset, before pruning, which
    # kept the support): the optimal vertex is read off it without solving again, unless it was inexact.
    if not solution.exact:
        solution, central, _ = _solve_master(master, Phi, y, w)
    if not solution.basic:
        solution = _master_vertex(master, Phi, y, w, central)
    atom_dirs, atom_weights = _support(solution, directions)
    value, polished = solution.value, None
    if polishable:
        polished = _fewer_atoms(atom_dirs, atom_weights, X, y, activation, project)
    if polished is not None:
        atom_dirs, atom_weights, value = polished
    if relu_family:
        atom_dirs, atom_weights = _nudged_atoms(atom_dirs, atom_weights, X, y, activation, basis, project)
    if not status.startswith("converged") and value <= (1.0 + tol) * target:  # the last columns, or the polish
        status = "converged" + ("" if exact else " (heuristic pricing)")
    # V* ≤ value (the atoms interpolate): an estimate above it, possible when heuristic pricing missed the
    # maximiser and the final polish went below, is lowered to it.
    estimate = min(max(best["estimate"], 0.0), value)
    result = _assemble(
        Atoms(atom_dirs, atom_weights),
        X,
        y,
        activation,
        width,
        max(best["proven"], 0.0),
        estimate,
        tol,
        f"{status} over {admissible}",
        pricing,
        rounds_run,
        history,
    )
    if dictionary.shape[0] == width and width >= n:
        warm = flattest_outer_weights(dictionary, X, y, activation)
        if warm.flatness < result.upper:
            gap = (warm.flatness - result.lower) / warm.flatness
            result = dataclasses.replace(
                result,
                net=warm.net,
                upper=warm.flatness,
                gap=gap,
                certified=gap <= tol,
                status=result.status + "; the warm-start dictionary's flattest weights were flatter "
                "than the split atoms",
            )
    return result


def _assemble(
    atoms, X, y, activation, width, measure_lower, measure_lower_estimate, tol, status, pricing, rounds, history
) -> FlattestInterpolator:
    """The width-``width`` network from the atoms (eq. ``eq-splitting``) and the bounds at that width."""
    p = activation.p
    kappa = unit_flatness_weights(atoms.directions, X, activation)
    measure_value = float((kappa ** (1.0 / p) * atoms.weights.abs()).sum())
    lower = width ** (1.0 - p) * measure_lower**p
    net, upper = None, math.inf
    K = atoms.directions.shape[0]
    if width >= K:
        net = _build_net(atoms.directions, atoms.weights, split_into_copies(atoms.weights, kappa, p, width), activation)
        upper = min_flatness(net, X, y)
    else:
        status += f"; width {width} is below the {K} atoms, so no network is built (the lower bound holds)"
    gap = (upper - lower) / upper if math.isfinite(upper) else math.inf
    return FlattestInterpolator(
        net=net,
        upper=upper,
        lower=lower,
        lower_estimate=width ** (1.0 - p) * measure_lower_estimate**p,
        certified=gap <= tol,
        gap=gap,
        atoms=atoms,
        status=status,
        width=width,
        p=p,
        measure_value=measure_value,
        measure_lower=measure_lower,
        measure_lower_estimate=measure_lower_estimate,
        pricing=pricing,
        rounds=rounds,
        history=history,
        activation=activation,
        tol=tol,
    )


def _stalled(history, stall_rounds: int, tol: float) -> bool:
    """Tailing-off: in the last ``stall_rounds`` rounds of the history neither the best master value so far
    fell nor the lower bound the rounds test against rose by more than ``tol`` (relative).  An inexact
    master's value, solved to a relative gap g, scatters about the exact one, so it counts as value·(1 + g):
    an early value below the exact optimum must not make later progress look like none."""
    if len(history) <= stall_rounds:
        return False
    values = [row["master"] * (1.0 + row["master_gap"]) for row in history]
    best_then, best_now = min(values[:-stall_rounds]), min(values)
    bound_then, bound_now = history[-stall_rounds - 1]["target"], history[-1]["target"]
    return best_now >= (1.0 - tol) * best_then and 0 < bound_then and bound_now <= (1.0 + tol) * bound_then


def _new_columns(found, values, directions, activation, X, max_new: int):
    """The best distinct directions with dual ratio above 1 that the master does not already hold.

    For the quadratic σ(−z) = σ(z), so u and −u give the same column and count as one.
    """
    even = activation.name == "quadratic"
    order = torch.argsort(values, descending=True)
    candidates = found[order[values[order] > 1.0 + 1e-9]]
    picked = []
    for block in torch.split(candidates, 256):  # (a block × the master's columns at a time)
        cosines = block @ directions.T  # against the master's columns (never empty)
        held = (cosines.abs() if even else cosines).amax(dim=1)
        for u, nearest in zip(block, held.tolist(), strict=True):
            if len(picked) >= max_new:
                break
            if picked:  # and against the candidates picked before it
                cosine = torch.stack(picked) @ u
                nearest = max(nearest, float((cosine.abs() if even else cosine).max()))
            if nearest <= 1.0 - 1e-10:
                picked.append(u)
        if len(picked) >= max_new:
            break
    return torch.stack(picked) if picked else found[:0]


def _spectral_starts(lam, X, basis, project, count: int = 8):
    """The extreme eigenvectors of M = Σ_i λ_i x_i x_iᵀ inside the admissible subspace, both signs.

    For the quadratic, Σ_i λ_i σ(⟨u, x_i⟩) = uᵀMu and κ(u) varies little, so they start the
    ascent of G_λ near its best maxima.  With λ = y − ȳ they are the classical spectral
    estimate of the label-relevant directions (for a single-index teacher and Gaussian inputs,
    E[(y − Ey) x xᵀ] is a multiple of θ*θ*ᵀ for the ReLU and quadratic links): a data-only
    warm start, no teacher involved.
    """
    Xb = X @ basis
    vals, vecs = torch.linalg.eigh((Xb * lam[:, None]).T @ Xb)
    order = torch.argsort(vals.abs(), descending=True)[:count]
    U = vecs[:, order].T @ basis.T
    U = torch.cat([U, -U])
    return project(U) if project is not None else U


def _support(solution, directions):
    """(directions, weights) of the master solution's atoms: its entries above 1e-12 of the largest."""
    mu = torch.as_tensor(solution.mu, dtype=directions.dtype, device=directions.device)
    on = mu.abs() > 1e-12 * float(mu.abs().max())
    return directions[on], mu[on]


def _fewer_atoms(
    atom_dirs,
    atom_weights,
    X,
    y,
    activation,
    project,
    ceiling: float | None = None,
    max_atoms: int = 4,
    steps: int = 30,
):
    """Try to interpolate with only the k ≤ ``max_atoms`` heaviest atoms, their directions polished.

    Column generation ends with the heavy atoms slightly off their optimum, some of them split into
    near-copies of one direction, and many atoms of weight ~1e-6 that correct for it; each costs a
    neuron when the atoms are split into copies.  For k = 1, 2, …: Gauss-Newton on k directions, the
    weights by least squares (variable projection), until the residual is below 1e-11 max|y|, started
    at the k heaviest atoms and at the k heaviest groups of near-copies merged (:func:`_merged_directions`).
    Returns (directions, weights, V) of the flatter of the two k-atom interpolators at the first k where
    one has a V no larger than ``ceiling`` (default: the atoms' own V) to 1e-9, else None.
    """
    p = activation.p
    kappa = unit_flatness_weights(atom_dirs, X, activation)
    contribution = kappa ** (1.0 / p) * atom_weights.abs()
    value = float(contribution.sum()) if ceiling is None else ceiling
    merged = _merged_directions(atom_dirs, contribution, even=activation.name == "quadratic")
    heaviest = atom_dirs[torch.argsort(contribution, descending=True)]
    scale = float(y.abs().max())

    def polished(U):
        """(directions, weights, V) of the interpolator Gauss-Newton reaches from U, or None."""
        U = project(U) if project is not None else U.clone()
        for _ in range(steps):
            residual, _, J = _projected_residual(U, X, y, activation, jacobian=True)
            if float(residual.abs().max()) <= 1e-11 * scale:
                break
            step = torch.linalg.lstsq(J, -residual[:, None], driver=lstsq_driver(J)).solution[:, 0].reshape(U.shape)
            U = U + step
            U = U / torch.linalg.vector_norm(U, dim=1, keepdim=True)
            if project is not None:
                U = project(U)
        residual, mu, _ = _projected_residual(U, X, y, activation)
        if float(residual.abs().max()) > 1e-11 * scale:
            return None
        return U, mu, float((unit_flatness_weights(U, X, activation) ** (1.0 / p) * mu.abs()).sum())

    for k in range(1, min(max_atoms, atom_dirs.shape[0] - 1) + 1):
        starts = [heaviest[:k]]
        if merged.shape[0] >= k and not torch.allclose(merged[:k], heaviest[:k], rtol=0, atol=1e-12):
            starts.append(merged[:k])
        found = [f for f in map(polished, starts) if f is not None and f[2] <= value * (1.0 + 1e-9)]
        if found:
            return min(found, key=lambda f: f[2])
    return None


def _projected_residual(U, X, y, activation, jacobian: bool = False):
    """Variable projection: r(U) = F μ − y with F_ij = σ(⟨x_i, û_j⟩), û_j = U_j / ‖U_j‖, and μ = F⁺y; with
    ``jacobian`` also ∂r/∂U (n, k·d), in closed form (Golub & Pereyra 1973) for F of full column rank:
    dr = (I − F F⁺) dF μ − F⁺ᵀ dFᵀ r, where ∂F_ij/∂U_j = σ'(⟨x_i, û_j⟩) (x_i − ⟨x_i, û_j⟩ û_j) / ‖U_j‖.
    O(n k d) memory: reverse-mode autograd of the least squares needed an n × n block per sample
    (32 GB at n = 1600).  Returns (r, μ, ∂r/∂U or None)."""
    norms = torch.linalg.vector_norm(U, dim=1, keepdim=True)
    unit = U / norms
    Z = X @ unit.T
    F = activation(Z)
    mu = torch.linalg.lstsq(F, y[:, None], driver=lstsq_driver(F)).solution[:, 0]
    residual = F @ mu - y
    if not jacobian:
        return residual, mu, None
    n, k = F.shape
    dF = activation.derivative(Z)[:, :, None] * (X[:, None, :] - Z[:, :, None] * unit) / norms  # (n, k, d)
    pinv = torch.linalg.pinv(F)  # (k, n)
    moved = (dF * mu[:, None]).reshape(n, -1)  # dF μ
    moved = moved - F @ (pinv @ moved)
    # the second term: column block j is −(F⁺ᵀ)_{:, j} (dF_{:, j}ᵀ r)ᵀ
    through_mu = pinv.T[:, :, None] * torch.einsum("i,ijd->jd", residual, dF)[None]
    return residual, mu, moved - through_mu.reshape(n, -1)


def _merged_directions(atom_dirs, contribution, even: bool, cosine: float = 0.99):
    """The atoms' directions merged into groups of near-copies (cosine above ``cosine``; for an even σ, where
    u and −u give one column, |cosine|), each the contribution-weighted mean of its members, unit norm,
    heaviest group (by total contribution) first.  Atoms join, heaviest first, the first group formed whose
    running sum they are near; one product against every group's sum per atom (O(K²d) flops, K torch calls)."""
    count = atom_dirs.shape[0]
    sums = atom_dirs.new_zeros(atom_dirs.shape)
    norms, totals = contribution.new_zeros(count), contribution.new_zeros(count)
    groups = 0
    for i in torch.argsort(contribution, descending=True).tolist():
        u, weight = atom_dirs[i], contribution[i]
        cosines = (sums[:groups] @ u) / norms[:groups]
        near = torch.nonzero((cosines.abs() if even else cosines) > cosine)
        g = int(near[0]) if near.shape[0] else groups
        sign = torch.sign(cosines[g]) if g < groups else 1.0
        sums[g] += sign * weight * u
        totals[g] += weight
        norms[g] = torch.linalg.vector_norm(sums[g])
        groups += g == groups
    merged = sums[:groups][torch.argsort(totals[:groups], descending=True)]
    return merged / torch.linalg.vector_norm(merged, dim=1, keepdim=True)


def _nuclear_norm_directions(X, y, basis, max_dim: int = 60):
    """Eigenvectors of the minimum-nuclear-norm symmetric Q with x_iᵀQx_i = y_i (inside the subspace).

    For the quadratic, a measure μ interpolates iff Q = ∫ uuᵀ dμ(u) does, and ∫ d|μ| ≥ ‖Q‖_*;
    with κ(u) nearly constant, V* ≈ κ̄^{3/4} min ‖Q‖_*, an SDP (PhaseLift's relaxation): its
    eigenvectors are near-optimal atoms, a data-only warm start (no teacher involved).  Skipped
    (returns no directions) above ``max_dim`` dimensions or if the SDP fails.
    """
    import cvxpy as cp

    r = basis.shape[1]
    if r > max_dim:
        return X.new_zeros(0, X.shape[1])
    Xb = (X @ basis).cpu().numpy()
    P, N = cp.Variable((r, r), PSD=True), cp.Variable((r, r), PSD=True)
    problem = cp.Problem(
        cp.Minimize(cp.trace(P) + cp.trace(N)), [cp.sum(cp.multiply(Xb @ (P - N), Xb), axis=1) == y.cpu().numpy()]
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "inaccurate": only a warm start
            problem.solve(solver="CLARABEL")
    except cp.error.SolverError:
        return X.new_zeros(0, X.shape[1])
    if P.value is None:
        return X.new_zeros(0, X.shape[1])
    vals, vecs = np.linalg.eigh(P.value - N.value)
    keep = np.abs(vals) > 1e-6 * np.abs(vals).max()
    return torch.as_tensor(vecs[:, keep].T, dtype=X.dtype, device=X.device) @ basis.T


def _slide(U, X, y, activation, project, steps: int = 20, angle: float = 0.1):
    """Move n directions with an invertible feature matrix to lower V(U) = Σ_k w(u_k)|μ_k|, μ = Φ(U)⁻¹y.

    The continuous local step of sliding Frank-Wolfe: the master's basic directions (n of them,
    so every iterate still interpolates exactly) descend along the tangent gradient of V, with
    backtracking on the step angle.  Returns the moved directions and V there (inf if Φ(U) is
    singular at the start).
    """

    def value(V):
        F = activation(X @ V.T)
        mu = torch.linalg.solve(F, y)
        return (unit_flatness_weights(V, X, activation) ** (1.0 / activation.p) * mu.abs()).sum()

    # Every point is evaluated on the autograd tape: the gradient at an accepted trial is then one
    # backward pass, not another O(n³) solve.
    U = U.detach().clone().requires_grad_(True)
    try:
        objective = value(U)
    except RuntimeError:  # singular: nothing to slide
        return U.detach(), math.inf
    current = float(objective.detach())
    for _ in range(steps):
        (grad,) = torch.autograd.grad(objective, U)
        U = U.detach()
        grad = grad - (grad * U).sum(1, keepdim=True) * U
        largest = float(torch.linalg.vector_norm(grad, dim=1).max())
        if not largest > 0 or not math.isfinite(largest):
            break
        while angle > 1e-6:
            trial = U - (angle / largest) * grad
            trial = trial / torch.linalg.vector_norm(trial, dim=1, keepdim=True)
            if project is not None:
                trial = project(trial)
            trial = trial.detach().requires_grad_(True)
            try:
                trial_objective = value(trial)
                trial_value = float(trial_objective.detach())
            except RuntimeError:
                trial_value = math.inf
            if trial_value < current:
                U, objective, current, angle = trial, trial_objective, trial_value, angle * 1.5
                break
            trial_objective = None  # a rejected trial's tape goes before the next one is built
            angle *= 0.5
        else:
            break
    return U.detach(), current


def _solve_master(
    master,
    Phi,
    y,
    w,
    gap_tol: float | None = None,
    start: InteriorPointIterate | None = None,
    restart_factor: float | None = None,
):
    """The restricted master (eq. ``eq-measure-program`` on the current columns): (MasterSolution, λ_c, restart).

    Mehrotra's interior point on the n × n normal equations gives the central dual λ_c, which pricing
    uses, and a primal iterate near the centre of the optimal face.  That iterate's support, refitted
    to interpolate exactly, is the solution when its value is certified optimal by λ_c
    (:func:`_support_refit`); otherwise the optimal vertex is read off λ_c (:func:`_master_vertex`).
    Dense O(n² · columns) steps instead of simplex pivots on a dense n × columns matrix (bench/README.md).

    With ``gap_tol`` the interior point stops at that relative gap and its iterates are returned as they
    are (``exact=False``; μ keeps its n heaviest entries, the approximate support): the inexact master of
    primal-dual column generation (Gondzio & Sarkissian 1996).  Pricing needs no more, since any λ gives a
    proven bound λᵀy / sup_u ratio_λ(u), and a well-centred λ short of the optimal face prices better.
    With ``restart_factor`` it also returns ``restart``, the interior point's first iterate within that
    factor of ``gap_tol``: the ``start`` of the next inexact master once extended to its new columns.
    """
    if gap_tol is not None:
        central, mu, _, restart = interior_point(Phi, y, w, tol=gap_tol, start=start, restart_factor=restart_factor)
        value, dual_value = float(w @ mu.abs()), float(central @ y)
        # A quality check, in the interior point's own measures (relative to 1 + ‖y‖ and 1 + value): an
        # iterate it ended on after a failed factorisation or its iteration limit can be far off; the exact
        # path below, which has fallbacks, then solves the master.
        if float((Phi @ mu - y).norm()) <= 2.0 * gap_tol * (1.0 + float(y.norm())) and abs(
            value - dual_value
        ) <= 2.0 * gap_tol * (1.0 + abs(value)):
            support = torch.zeros_like(mu)
            heaviest = torch.argsort(mu.abs(), descending=True)[: Phi.shape[0]]
            support[heaviest] = mu[heaviest]
            return (
                MasterSolution(
                    mu=support.cpu().numpy(),
                    dual=central.cpu().numpy(),
                    value=value,
                    exact=False,
                    basic=False,
                    gap=gap_tol,
                ),
                central,
                restart,
            )
    central, mu, _, _ = interior_point(Phi, y, w)
    if not (bool(torch.isfinite(central).all()) and bool(torch.isfinite(mu).all())):
        highs = master.solve()  # diagnoses columns that cannot interpolate
        return highs, torch.as_tensor(highs.dual, dtype=Phi.dtype, device=Phi.device), None
    refit = _support_refit(mu, Phi, y, w, _weak_duality_bound(central, Phi, y, w))
    if refit is None:
        return _master_vertex(master, Phi, y, w, central, primal=mu), central, None
    return (
        MasterSolution(mu=refit.cpu().numpy(), dual=central.cpu().numpy(), value=float(w @ refit.abs()), basic=False),
        central,
        None,
    )


def _weak_duality_bound(lam, Phi, y, w) -> float:
    """λᵀy / max(1, max_j |φ_jᵀλ| / w_j): any λ, scaled into the master's dual feasible set, bounds the
    master's optimum from below (weak duality)."""
    return float(lam @ y) / max(1.0, float(((Phi.T @ lam).abs() / w).max()))


def _master_vertex(master, Phi, y, w, central, primal=None) -> MasterSolution:
    """The master's optimal vertex read off a dual point λ_c of the same or a larger column set
    (complementary slackness, :func:`~flatbook.lp.vertex_from_dual`, which also tries the bases of the
    interior point's ``primal`` iterate when given, then simplex pivots from one of them); HiGHS's simplex
    from scratch when none is identified (it also diagnoses columns that cannot interpolate).  On a dense
    master of thousands of columns those pivots take a second where HiGHS takes minutes (bench/README.md)."""
    vertex = vertex_from_dual(central, Phi, y, w, primal=primal, crossover=True)
    if vertex is None:
        return master.solve()
    mu, dual = vertex
    return MasterSolution(mu=mu.cpu().numpy(), dual=dual.cpu().numpy(), value=float(w @ mu.abs()))


def _support_refit(mu, Phi, y, w, lower, thresholds=(1e-6, 1e-8, 1e-10), rtol: float = 1e-7):
    """μ on its support S = {|μ_j| ≥ t·max|μ|}, refitted to Φ_S μ_S = y (least norm), for the first
    threshold t whose refit interpolates with Σ w_j|μ_j| ≤ (1 + rtol)·``lower`` (a proven lower bound on
    the optimum), so that it is optimal to rtol; None if none is.  (At 1e-6, S can miss a weight or two
    that the interior point has not yet separated from the zeros; on an ill-conditioned S the least-norm
    refit can interpolate with a far larger value: the certificate rejects it.)"""
    size = mu.abs() / float(mu.abs().max())
    for threshold in thresholds:
        S = size >= threshold
        fit = torch.linalg.lstsq(Phi[:, S], y[:, None], driver=lstsq_driver(Phi))
        refit = torch.zeros_like(mu)
        refit[S] = fit.solution[:, 0]
        if (
            float((Phi @ refit - y).abs().max()) <= 1e-10 * float(y.abs().max())
            and float(w @ refit.abs()) <= (1.0 + rtol) * lower
        ):
            return refit
    return None


def _basic_directions(directions, Phi, w, solution, n):
    """The support of the master's solution completed to n directions by the next-tightest columns."""
    lam = torch.as_tensor(solution.dual, dtype=Phi.dtype, device=Phi.device)
    ratio = (Phi.T @ lam).abs() / w
    ratio[torch.as_tensor(np.abs(solution.mu) > 0, device=Phi.device)] = math.inf
    if directions.shape[0] < n:
        return None
    return directions[torch.argsort(ratio, descending=True)[:n]]


def _prune(master, solution, central, Phi, w, cap: int):
    """Keep mask once the master exceeds ``cap`` columns: the support, then the half of
    the cap that is tightest at the central dual the pricing used.  Those are the cuts that shrink the
    restricted dual's optimal face towards a dual point feasible for every direction; dropping them
    (e.g. by the simplex dual's ratios) lets the central point wander back and the bound stall."""
    if master.size <= cap:
        return None
    ratio = ((Phi.T @ central).abs() / w).cpu().numpy()
    ratio[np.abs(solution.mu) > 0] = np.inf  # the support always stays
    keep = np.zeros(master.size, dtype=bool)
    keep[np.argsort(-ratio)[: cap // 2]] = True
    return keep


def _nudged_atoms(atom_dirs, atom_weights, X, y, activation, basis, project):
    """Atoms moved off the hyperplanes they sit on (see :func:`flatbook.pricing.nudge_inactive`), inside
    the admissible set, weights refitted by least squares; the original atoms if that breaks interpolation."""
    moved = nudge_inactive(atom_dirs, X, basis=_proper_subspace(basis))
    moved = moved / torch.linalg.vector_norm(moved, dim=1, keepdim=True)
    if project is not None:
        moved = project(moved)
    F = activation(X @ moved.T)
    refit = torch.linalg.lstsq(F, y[:, None], driver=lstsq_driver(F)).solution[:, 0]
    if float((F @ refit - y).abs().max()) <= 1e-9 * float(y.abs().max()):
        return moved, refit
    return atom_dirs, atom_weights


__all__ = [
    "Atoms",
    "FlattestInterpolator",
    "flattest_interpolator",
    "split_into_copies",
    "rounding_excess_bound",
    "DualBound",
    "measure_dual_bound",
]
