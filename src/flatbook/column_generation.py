"""Column generation for the measure program: the restricted master, the pricer, the rounds and their stops.

The measure program V* = min ∫ κ(u)^{1/p} d|μ|(u) subject to ∫ σ(⟨u, x_i⟩) dμ(u) = y_i (book, chapter 2,
eq. ``eq-measure-program``) has finitely many constraints and a continuum of directions.  Column generation
solves it over the directions found so far (:class:`RestrictedMaster`, a weighted-ℓ1 linear program) and
asks, at the master's dual λ, for directions whose dual ratio G_λ(u) exceeds 1 (:class:`Pricer`): those
are the columns that can lower V.  Every λ also gives a lower bound, V* ≥ λᵀy / sup_u G_λ(u)
(eq. ``eq-measure-dual``), proven when the supremum is bounded from above with a proof.

:class:`ColumnGeneration` runs the rounds.  Each round prices at the master's central dual, polishes the
master's atoms (:mod:`flatbook.atom_polish`), adds the new columns and re-solves.  It stops for one of the
reasons of :class:`StopReason`, all decided in :meth:`ColumnGeneration.run`:

- ``CONVERGED``: the master's value is within ``tol`` of a *proven* lower bound (the only proof of optimality);
- ``NO_IMPROVING_DIRECTION`` and ``STALLED``: heuristic stops (pricing found nothing that improves the master,
  or neither the master nor the bound moved by ``tol`` in ``stall_rounds`` rounds), taken only after the
  pricer has escalated to its most thorough level (:meth:`Pricer.escalate`) and that too found nothing;
- ``ROUND_LIMIT`` and ``TIME_LIMIT``: the rounds or the time ran out.  Once half the time limit has passed,
  the pricer is escalated to its most thorough level, so that the time left goes to a proof.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import time
import warnings
from typing import NamedTuple

import numpy as np
import torch

from .activations import HomogeneousActivation
from .admissible import AdmissibleSet
from .atom_polish import polish_atoms, slide
from .backend import lstsq_driver
from .certified_pricing import CapBranchAndBound, cap_branch_and_bound_available
from .errors import FlatbookInputError, InfeasibleInterpolationError, SolverError
from .flatness import unit_flatness_weights
from .lp import InteriorPointIterate, interior_point, purify, vertex_from_dual, weak_duality_bound
from .pricing import (
    ExactPricer,
    ascend_cells,
    dual_ratio_bound,
    exact_pricing_available,
    maximize_dual_ratio,
    quadratic_dual_ratio_bound,
)
from .progress import progress_bar
from .weighted_l1 import MasterSolution, WeightedL1Master

__all__ = [
    "INEXACT_MASTER_MAX_GAP",
    "MASTER_RESTART_FACTOR",
    "CERTIFY_UP_TO",
    "CELL_ASCENT_STARTS",
    "CELL_ASCENT_STEPS",
    "MAX_CAPS",
    "ColumnGeneration",
    "ColumnGenerationResult",
    "MasterState",
    "Pricer",
    "Pricing",
    "RestrictedMaster",
    "StopReason",
    "corrected_support",
    "corrected_vertex",
    "new_columns",
    "pricing_mode",
    "stalled",
]

#: the supports the vertex step's last resort corrects μ on: its entries above these fractions of max|μ|
#: (an interior point's μ has every entry nonzero; the smaller fractions bring in better-conditioned columns)
CORRECTION_THRESHOLDS = (1e-6, 1e-8, 1e-10, 1e-12, 1e-14)
#: the loosest relative gap an inexact master is solved to (a tenth of the column generation's own gap when
#: that is smaller: Gondzio & Sarkissian's rule)
INEXACT_MASTER_MAX_GAP = 1e-1
#: with ``warm_masters``, an inexact master's interior point starts from the previous one's first iterate
#: within this factor of its tolerance (gap and residuals): an early iterate, as Gondzio (1998) advises
MASTER_RESTART_FACTOR = 10.0
#: by default pricing is certified (the arrangement, or cap branch-and-bound) up to this admissible dimension:
#: the caps needed to close a gap grow steeply with it (bench/README.md, "Against a proof": in d = 4 the
#: branch-and-bound certifies within 0.1 % at 1.1 to 4.6 times the heuristic's time, ``certify_up_to=4``; in d = 5
#: it took minutes)
CERTIFY_UP_TO = 3
#: moves of the pricing's cell-by-cell ascent from each start (:func:`~flatbook.pricing.ascend_cells`), and how
#: many of the gradient ascent's best endpoints, and of its random starts, it starts from, per effort level of the
#: pricer: level 0, then level 1 and above (the rounds after a heuristic stop was about to fire; bench/README.md,
#: "Why the solver's defaults")
CELL_ASCENT_STEPS = (2, 16)
CELL_ASCENT_STARTS = (16, 64)
#: the default number of caps the cap branch-and-bound may bound in one pricing round
MAX_CAPS = 500_000
#: a master with at least this many feature entries (n × columns) whose vertex the dual does not identify is
#: corrected and purified before HiGHS is asked: HiGHS's simplex from scratch took seconds on the book's masters
#: (up to about 5·10⁶ entries) but passed its 600 s limit on a 1000 × 21212 quadratic master
PURIFY_FIRST_ENTRIES = 10**7


class StopReason(enum.Enum):
    """Why column generation stopped.  Only ``CONVERGED`` proves anything (``proven``)."""

    CONVERGED = "converged"
    NO_IMPROVING_DIRECTION = "no improving direction found"
    STALLED = "stalled"
    ROUND_LIMIT = "round limit"
    TIME_LIMIT = "time limit"

    @property
    def proven(self) -> bool:
        """Whether the stop is a proof of optimality (to ``tol``): the master's value met a proven bound."""
        return self is StopReason.CONVERGED

    def describe(self, pricing: str, stall_rounds: int | None, rounds: int) -> str:
        """The stop in words, saying whether it proves anything."""
        if self is StopReason.CONVERGED:
            return "converged: the master's value is within tol of a proven lower bound"
        if self is StopReason.ROUND_LIMIT:
            return f"round limit ({rounds}) reached; nothing proven beyond the bounds"
        if self is StopReason.TIME_LIMIT:
            return f"time limit reached after {rounds} rounds; nothing proven beyond the bounds"
        what = (
            "no improving direction found"
            if self is StopReason.NO_IMPROVING_DIRECTION
            else f"stalled (neither the master nor the lower bound moved by tol in {stall_rounds} rounds)"
        )
        return f"{what} by the most thorough pricing ({pricing}); a heuristic stop, nothing proven"


class MasterState(NamedTuple):
    """A solve of the restricted master: its solution, the interior point's central dual, a restart point."""

    solution: MasterSolution
    central: torch.Tensor  #: λ_c, near the centre of the optimal dual face (exact: to 1e-9)
    restart: InteriorPointIterate | None


class RestrictedMaster:
    """min Σ_j w_j |μ_j| s.t. Σ_j μ_j σ(⟨u_j, x_i⟩) = y_i over the directions u_j found so far.

    ``w_j = κ(u_j)^{1/p}``.  Solved by the interior point of :mod:`flatbook.lp` (the central dual prices
    better than a vertex's), its optimal vertex read off that dual; HiGHS's simplex
    (:class:`~flatbook.weighted_l1.WeightedL1Master`, kept in step) where that fails.
    """

    def __init__(self, X: torch.Tensor, y: torch.Tensor, activation: HomogeneousActivation | None):
        self.X, self.y, self.activation = X, y, activation
        n, d = X.shape
        self.highs = WeightedL1Master(y.cpu().numpy())
        self.directions = X.new_zeros(0, d)
        self.Phi = X.new_zeros(n, 0)
        self.w = X.new_zeros(0)

    @classmethod
    def of_columns(cls, Phi: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> RestrictedMaster:
        """A master over given columns Φ (n, k) with weights w > 0 and no directions behind them (the linear
        program alone: :meth:`solve`, :meth:`vertex`, :meth:`prune`, :meth:`weak_duality_bound`)."""
        master = cls(Phi.new_zeros(Phi.shape[0], 0), y, None)
        master.add_columns(Phi, w)
        return master

    @property
    def size(self) -> int:
        """The number of columns."""
        return self.directions.shape[0]

    def columns(self, U: torch.Tensor):
        """(directions, Φ, w) of the unit directions U active on some sample.  A direction silent on every
        sample has κ = 0 and no column (its ratio |φᵀλ| / w would be undefined)."""
        if self.activation is None:
            raise FlatbookInputError("a master made from columns (of_columns) takes columns, not directions.")
        w = unit_flatness_weights(U, self.X, self.activation) ** (1.0 / self.activation.p)
        live = w > 0
        return U[live], self.activation(self.X @ U[live].T), w[live]

    def add(self, U: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the directions U (unit rows); returns the new columns' (Φ, w)."""
        U, Phi, w = self.columns(U)
        self.add_columns(Phi, w, U)
        return Phi, w

    def add_columns(self, Phi: torch.Tensor, w: torch.Tensor, directions: torch.Tensor | None = None) -> None:
        """Add columns Φ (n, k) with weights w > 0, and the directions behind them (none for a master
        made by :meth:`of_columns`)."""
        self.highs.add(Phi.cpu().numpy(), w.cpu().numpy())
        if directions is None:
            directions = self.directions.new_zeros(Phi.shape[1], self.directions.shape[1])
        self.directions = torch.cat([self.directions, directions])
        self.Phi, self.w = torch.cat([self.Phi, Phi], 1), torch.cat([self.w, w])

    def weak_duality_bound(self, lam: torch.Tensor) -> float:
        """λ scaled into the master's dual feasible set, λᵀy / max(1, max_j |φ_jᵀλ| / w_j): ≤ its optimum."""
        return weak_duality_bound(lam, self.Phi, self.y, self.w)

    def largest_ratio(self, lam: torch.Tensor) -> float:
        """max_j |φ_jᵀλ| / w_j over the master's columns (G_λ at its directions)."""
        return float(((self.Phi.T @ lam).abs() / self.w).max())

    def solve(
        self,
        gap_tol: float | None = None,
        start: InteriorPointIterate | None = None,
        restart_factor: float | None = None,
    ) -> MasterState:
        """Optimal (``gap_tol`` None) or to the relative gap ``gap_tol`` (the inexact master of primal-dual
        column generation, Gondzio & Sarkissian 1996: any λ prices, and a well-centred one prices better).

        Exactly: the interior point's support, refitted to interpolate, where λ_c certifies it
        (a refit of the support), else the optimal vertex read off λ_c (:meth:`vertex`).  Inexactly: μ keeps
        the iterate's n heaviest entries (``exact=False``); with ``restart_factor`` the state also holds the
        interior point's first iterate within that factor of ``gap_tol``, to start the next master from.
        An inexact solve that misses its own tolerance (a failed factorisation, the iteration limit) is
        replaced by an exact one.
        """
        Phi, y, w = self.Phi, self.y, self.w
        if gap_tol is not None:
            central, mu, _, restart = interior_point(Phi, y, w, tol=gap_tol, start=start, restart_factor=restart_factor)
            value, dual_value = float(w @ mu.abs()), float(central @ y)
            if float((Phi @ mu - y).norm()) <= 2.0 * gap_tol * (1.0 + float(y.norm())) and abs(
                value - dual_value
            ) <= 2.0 * gap_tol * (1.0 + abs(value)):
                support = torch.zeros_like(mu)
                heaviest = torch.argsort(mu.abs(), descending=True)[: Phi.shape[0]]
                support[heaviest] = mu[heaviest]
                solution = MasterSolution(
                    mu=support.cpu().numpy(),
                    dual=central.cpu().numpy(),
                    value=value,
                    exact=False,
                    basic=False,
                    gap=gap_tol,
                )
                return MasterState(solution, central, restart)
        central, mu, _, _ = interior_point(Phi, y, w)
        if not (bool(torch.isfinite(central).all()) and bool(torch.isfinite(mu).all())):
            highs = self.highs.solve()  # diagnoses columns that cannot interpolate
            return MasterState(highs, torch.as_tensor(highs.dual, dtype=Phi.dtype, device=Phi.device), None)
        refit = support_refit(mu, Phi, y, w, self.weak_duality_bound(central))
        if refit is None:
            vertex = self.vertex_at(central, primal=mu)
            if not float(central @ y) > 0:
                # The interior point stopped before its dual bounded anything (a failed factorisation leaves
                # λ = 0): price at the vertex's dual instead, which is optimal.
                central = torch.as_tensor(vertex.dual, dtype=Phi.dtype, device=Phi.device)
            return MasterState(vertex, central, None)
        solution = MasterSolution(
            mu=refit.cpu().numpy(), dual=central.cpu().numpy(), value=float(w @ refit.abs()), basic=False
        )
        return MasterState(solution, central, None)

    def vertex_at(self, central: torch.Tensor, primal: torch.Tensor | None = None) -> MasterSolution:
        """The optimal vertex read off a dual point of the same or a larger column set (complementary
        slackness, :func:`~flatbook.lp.vertex_from_dual`, with simplex pivots from the primal's basis as its
        last resort); HiGHS's simplex from scratch when none is identified; the primal corrected to interpolate
        (:func:`corrected_support`) when HiGHS fails too."""
        vertex = vertex_from_dual(central, self.Phi, self.y, self.w, primal=primal, crossover=True)
        if vertex is not None:
            mu, dual = vertex
            return MasterSolution(mu=mu.cpu().numpy(), dual=dual.cpu().numpy(), value=float(self.w @ mu.abs()))
        if primal is not None and self.Phi.numel() >= PURIFY_FIRST_ENTRIES:
            corrected = self._corrected(central, primal)
            if corrected is not None:
                return corrected
        try:
            return self.highs.solve()
        except (InfeasibleInterpolationError, SolverError):
            # HiGHS can call a degenerate master infeasible by round-off although the interior point interpolates
            # with its columns, or reach its time limit on a large dense master: then that iterate, corrected to
            # interpolate on a support and purified, is the solution (within rtol of the proven bound; the proven
            # lower bound comes from the dual whatever the primal is).
            corrected = None if primal is None else self._corrected(central, primal)
            if corrected is None:
                raise
            return corrected

    def _corrected(self, central: torch.Tensor, primal: torch.Tensor) -> MasterSolution | None:
        """The interior point's primal corrected to interpolate (:func:`corrected_vertex`), or None."""
        found = corrected_vertex(primal, self.Phi, self.y, self.w, central, self.weak_duality_bound(central))
        if found is None:
            return None
        mu, basic = found
        return MasterSolution(
            mu=mu.cpu().numpy(), dual=central.cpu().numpy(), value=float(self.w @ mu.abs()), basic=basic
        )

    def vertex(self, state: MasterState) -> MasterState:
        """The state with its solution replaced by an optimal vertex (at most n atoms), if it is not one."""
        if state.solution.basic:
            return state
        primal = torch.as_tensor(state.solution.mu, dtype=self.Phi.dtype, device=self.Phi.device)
        return state._replace(solution=self.vertex_at(state.central, primal=primal))

    def atoms(self, solution: MasterSolution) -> tuple[torch.Tensor, torch.Tensor]:
        """(directions, weights) of a solution's atoms: its entries above 1e-12 of the largest."""
        mu = torch.as_tensor(solution.mu, dtype=self.X.dtype, device=self.X.device)
        on = mu.abs() > 1e-12 * float(mu.abs().max())
        return self.directions[on], mu[on]

    def basic_directions(self, solution: MasterSolution) -> torch.Tensor | None:
        """The support of the solution completed to n directions by the next-tightest columns (None if the
        master holds fewer than n)."""
        n = self.X.shape[0]
        if self.size < n:
            return None
        lam = torch.as_tensor(solution.dual, dtype=self.X.dtype, device=self.X.device)
        ratio = (self.Phi.T @ lam).abs() / self.w
        ratio[torch.as_tensor(np.abs(solution.mu) > 0, device=self.X.device)] = math.inf
        return self.directions[torch.argsort(ratio, descending=True)[:n]]

    def prune(self, state: MasterState, cap: int) -> MasterState:
        """Above ``cap`` columns, keep the whole support and fill up to half the cap with the columns tightest
        at the central dual (an exact state: its solution stays optimal and its dual feasible).  Those cuts
        shrink the restricted dual's optimal face towards a point feasible for every direction; dropping them
        lets the central point wander back and the bound stall.  A refitted interior point's support can
        exceed half the cap (it is not a vertex): it is kept whole, since dropping part of it can leave
        columns that cannot interpolate."""
        if self.size <= cap:
            return state
        ratio = ((self.Phi.T @ state.central).abs() / self.w).cpu().numpy()
        support = np.abs(state.solution.mu) > 0
        ratio[support] = np.inf  # the support always stays
        keep = np.zeros(self.size, dtype=bool)
        keep[np.argsort(-ratio)[: max(cap // 2, int(support.sum()))]] = True
        self.highs.remove(keep)
        self.directions, self.Phi, self.w = self.directions[keep], self.Phi[:, keep], self.w[keep]
        return state._replace(solution=dataclasses.replace(state.solution, mu=state.solution.mu[keep]))


def support_refit(mu, Phi, y, w, lower, thresholds=(1e-6, 1e-8, 1e-10), rtol: float = 1e-7):
    """μ on its support S = {|μ_j| ≥ t·max|μ|}, refitted to Φ_S μ_S = y (least norm), for the first
    threshold t whose refit interpolates to 1e-10 max|y| with Σ w_j|μ_j| ≤ (1 + rtol)·``lower`` (a proven lower
    bound on the optimum), so that it is optimal to rtol; None if none is.  (At 1e-6, S can miss a weight or
    two that the interior point has not yet separated from the zeros; on an ill-conditioned S the least-norm
    refit can interpolate with a far larger value: the certificate rejects it.)"""
    size = mu.abs() / float(mu.abs().max())
    for threshold in thresholds:
        S = size >= threshold
        refit = torch.zeros_like(mu)
        refit[S] = torch.linalg.lstsq(Phi[:, S], y[:, None], driver=lstsq_driver(Phi)).solution[:, 0]
        if _optimal_interpolator(refit, Phi, y, w, (1.0 + rtol) * lower):
            return refit
    return None


def _optimal_interpolator(mu, Phi, y, w, limit: float) -> bool:
    """Whether μ interpolates to 1e-10 max|y| with Σ w_j|μ_j| ≤ ``limit``."""
    return float((Phi @ mu - y).abs().max()) <= 1e-10 * float(y.abs().max()) and float(w @ mu.abs()) <= limit


def corrected_support(mu, Phi, y, w, dual, lower: float, rtol: float = 1e-4, thresholds=CORRECTION_THRESHOLDS):
    """μ made to interpolate by the least-norm correction δ of its residual, Φ_S(μ_S + δ) = y, on a support S:
    for each ``threshold`` t, first S = {|μ_j| ≥ t·max|μ|}, then S with the n columns tightest at ``dual`` (largest
    |φ_jᵀλ|/w_j, where an optimal support lies) added, which gives rank n where μ left part of the optimal support
    at round-off; the first that interpolates to 1e-10 max|y| with Σ w_j|μ_j| ≤ (1 + ``rtol``)·``lower`` (a proven
    lower bound on the optimum), else None.  On a nearly collinear S the correction is large and the value check
    rejects it; a smaller t brings in better-conditioned columns.  Not a vertex: optimal to ``rtol``, not certified."""
    size = mu.abs() / float(mu.abs().max())
    tight = torch.argsort((Phi.T @ dual).abs() / w, descending=True)[: Phi.shape[0]]
    for threshold in thresholds:
        support = size >= threshold
        with_tight = support.clone()
        with_tight[tight] = True
        for keep in (support, with_tight):
            fix = torch.linalg.lstsq(Phi[:, keep], (y - Phi[:, keep] @ mu[keep])[:, None], driver=lstsq_driver(Phi))
            corrected = torch.zeros_like(mu)
            corrected[keep] = mu[keep] + fix.solution[:, 0]
            if _optimal_interpolator(corrected, Phi, y, w, (1.0 + rtol) * lower):
                return corrected
    return None


def corrected_vertex(mu, Phi, y, w, dual, lower: float, rtol: float = 1e-4) -> tuple[torch.Tensor, bool] | None:
    """:func:`corrected_support`, then purified to independent columns (:func:`~flatbook.lp.purify`, which never
    raises Σ w_j|μ_j|) and re-fitted on that support: (μ, True) when that interpolates within the same value limit,
    else the corrected μ with False (optimal to ``rtol``, not basic); None when no correction interpolates."""
    corrected = corrected_support(mu, Phi, y, w, dual, lower, rtol)
    if corrected is None:
        return None
    purified = purify(corrected, Phi, w)
    support = purified != 0
    refit = torch.zeros_like(purified)
    refit[support] = torch.linalg.lstsq(Phi[:, support], y[:, None], driver=lstsq_driver(Phi)).solution[:, 0]
    independent = int(torch.linalg.matrix_rank(Phi[:, support])) == int(support.sum())
    if independent and _optimal_interpolator(refit, Phi, y, w, (1.0 + rtol) * lower):
        return refit, True
    return corrected, False


class Pricing(NamedTuple):
    """What :meth:`Pricer.price` found at one λ."""

    directions: torch.Tensor  #: (k, d) candidate directions (local maxima of G_λ, exact maximisers, cap centres)
    values: torch.Tensor  #: (k,) G_λ at them
    estimate: float  #: the largest G_λ found (at least the master's largest ratio): a lower bound on the sup
    proven: float  #: a proven upper bound on sup G_λ over the admissible set (≥ ``estimate``)
    caps: int = 0  #: caps the branch-and-bound bounded (0 where it did not run)
    dual: torch.Tensor | None = None  #: the λ that ``proven`` bounds sup G_λ for (None: the λ priced at)


def pricing_mode(
    activation: HomogeneousActivation, admissible: AdmissibleSet, certify_up_to: int = CERTIFY_UP_TO
) -> str:
    """How :class:`Pricer` bounds sup G_λ over ``admissible`` (of dimension r): "exact" (the ReLU family on a
    whole subsphere, r ≤ min(3, ``certify_up_to``)), "branch-and-bound" (the ReLU family or the quadratic,
    r ≤ ``certify_up_to``), else "bound" (closed forms: everywhere with ``certify_up_to=0``)."""
    r = admissible.r
    if r <= certify_up_to and admissible.whole_subsphere and exact_pricing_available(activation, r):
        return "exact"
    if r <= certify_up_to and cap_branch_and_bound_available(activation):
        return "branch-and-bound"
    return "bound"


class Pricer:
    """Directions of large dual ratio G_λ over the admissible set, and a proven bound on its supremum.

    Three ways to bound the supremum (``mode``): ``"exact"`` (the ReLU family on a whole subsphere of
    dimension ≤ 3: the arrangement enumeration of :class:`~flatbook.pricing.ExactPricer`, every round),
    ``"branch-and-bound"`` (the ReLU family or the quadratic up to dimension ``certify_up_to``:
    :class:`~flatbook.certified_pricing.CapBranchAndBound`, run when the pricer is escalated to it, since it
    costs seconds) and ``"bound"`` (the closed forms of :mod:`flatbook.pricing`, loose); see
    :func:`pricing_mode`.  Candidates come from projected gradient ascent of G_λ
    (:func:`~flatbook.pricing.maximize_dual_ratio`) started at the master's heaviest atoms, at random
    admissible directions and at spectral directions (the extreme eigenvectors of Σ_i λ_i x_i x_iᵀ in the
    admissible subspace).

    With ``cell_ascent`` (the default), for the ReLU family without exact pricing, over a whole subsphere, the
    ``CELL_ASCENT_STARTS`` best endpoints of the ascent and as many of its random starts are then moved on cell by
    cell of the data's hyperplane arrangement (:func:`~flatbook.pricing.ascend_cells`), ``CELL_ASCENT_STEPS`` moves
    each (both per level): gradient ascent stalls at the cells' boundaries, where G_λ's maxima sit.

    Effort ``level`` 0 uses ``starts`` random starts and at most ``starts`` atoms; :meth:`escalate` raises it:
    level 1 uses four times the random starts, every atom of the master and the larger cell ascent; level 2 (only in the
    branch-and-bound mode) adds the cap branch-and-bound, which bounds the supremum to ``rel_tol`` and
    offers its best cap centres as candidates.
    """

    def __init__(
        self,
        X: torch.Tensor,
        activation: HomogeneousActivation,
        admissible: AdmissibleSet,
        generator: torch.Generator,
        *,
        certify_up_to: int = CERTIFY_UP_TO,
        cell_ascent: bool = True,
        starts: int = 64,
        steps: int = 60,
        heuristic_new: int = 64,
        rel_tol: float = 1e-3,
        max_caps: int = MAX_CAPS,
    ):
        self.X, self.activation, self.admissible, self.generator = X, activation, admissible, generator
        self.starts, self.steps, self.heuristic_new = starts, steps, heuristic_new
        self.rel_tol, self.max_caps = rel_tol, max_caps
        self.mode = pricing_mode(activation, admissible, certify_up_to)
        self.exact: ExactPricer | None = None
        self.branch_and_bound: CapBranchAndBound | None = None
        if self.mode == "exact":
            self.exact = ExactPricer(X, activation, admissible.subspace)
        elif self.mode == "branch-and-bound":
            self.branch_and_bound = CapBranchAndBound(X, activation, admissible)
        self.level = 0
        #: with ``cell_ascent``, the ReLU family where the arrangement is not enumerated, over a whole subsphere (a
        #: band's boundary is no cell wall): the best ascent endpoints are moved on cell by cell
        #: (:func:`~flatbook.pricing.ascend_cells`)
        self.ascends_cells = (
            cell_ascent and activation.piecewise_linear and self.exact is None and admissible.whole_subsphere
        )

    @property
    def certifying(self) -> bool:
        """Whether the current level proves its bound on the supremum to ``rel_tol`` (exact pricing, or the
        branch-and-bound level): then only that proof, not the largest ratio found, may end the rounds."""
        return self.mode == "exact" or (self.branch_and_bound is not None and self.level >= 2)

    @property
    def max_new(self) -> int:
        """How many new columns a round may add: 2n where the pricing is certified (it knows the best direction
        of every region where G_λ > 1, and cuts that are left out make the bound cycle), else
        ``heuristic_new``."""
        return 2 * self.X.shape[0] if self.certifying else self.heuristic_new

    @property
    def top_level(self) -> int:
        """The most thorough effort level: 2 with the branch-and-bound, else 1."""
        return 2 if self.branch_and_bound is not None else 1

    def escalate(self) -> bool:
        """Raise the effort one level; False if it is already at the top."""
        if self.level >= self.top_level:
            return False
        self.level += 1
        return True

    def closed_form_bound(self, lam: torch.Tensor) -> float:
        """The closed-form bound on sup G_λ of :mod:`flatbook.pricing` (eq. ``eq-pricing-bound`` or
        ``eq-quadratic-bound``); holds over any subset of the sphere."""
        if self.activation.even and self.activation.degree == 2.0:
            return quadratic_dual_ratio_bound(lam, self.X, self.admissible.subspace)
        return dual_ratio_bound(lam, self.X, self.activation)

    def proven_sup(self, lam: torch.Tensor) -> float:
        """The most thorough proven bound on sup G_λ this pricer has: the arrangement's exact supremum, the
        cap branch-and-bound's upper end (to ``rel_tol`` within ``max_caps`` caps), or the closed form."""
        if self.exact is not None:
            return self.exact.sup(lam)[0]
        if self.branch_and_bound is not None:
            searched = self.branch_and_bound.sup(lam, rel_tol=self.rel_tol, max_caps=self.max_caps)
            return min(searched.upper, self.closed_form_bound(lam))
        return self.closed_form_bound(lam)

    def price(
        self,
        lam: torch.Tensor,
        master: RestrictedMaster,
        solution: MasterSolution,
        inner: torch.Tensor | None = None,
        gap: float = math.inf,
    ) -> Pricing:
        """Candidates, the largest ratio found and a proven bound on sup G_λ, at the current effort level.

        ``inner``: a dual point feasible for every direction (sup G ≤ 1), e.g. the best proven one scaled.  The
        branch-and-bound level then separates at the midpoint of ``inner`` and λ (in-out separation, Ben-Ameur
        & Neto 2007): a direction with G > 1 there has G > 1 at λ too (G is convex along the segment and at
        most 1 at ``inner``), so it is a cut for the master, and where there is none the midpoint's bound is
        better than both ends' bounds; the bound the result carries is then the midpoint's (``dual``).
        ``gap``: the column generation's relative gap so far; the branch-and-bound closes its own to a quarter of
        it (at most 5 %, at least ``rel_tol``), since a tighter supremum would not change the round.
        """
        admissible, device = self.admissible, self.X.device
        random_starts = self.starts * (4 if self.level >= 1 else 1)
        heaviest = np.argsort(-np.abs(solution.mu))
        heaviest = heaviest[np.abs(solution.mu[heaviest]) > 0]
        if self.level == 0:
            heaviest = heaviest[: self.starts]
        atoms = master.directions[torch.as_tensor(heaviest, device=device, dtype=torch.long)]
        # With exact pricing the best direction of every face is known: the ascent only slides the atoms.
        raw = admissible.random(random_starts, self.generator) if self.exact is None else atoms[:0]
        starts = atoms if self.exact is not None else torch.cat([atoms, raw, spectral_starts(lam, self.X, admissible)])
        found, values = maximize_dual_ratio(lam, self.X, self.activation, starts, admissible.project, self.steps)
        if self.ascends_cells:
            # From the best endpoints, and from random starts themselves: the ascent funnels its starts into the
            # large cells' boundaries, and G_λ's supremum can sit inside a small cell that only a start there finds.
            tier = min(self.level, len(CELL_ASCENT_STARTS) - 1)
            count = CELL_ASCENT_STARTS[tier]
            best = torch.argsort(values, descending=True)[:count]
            cell_starts = torch.cat([found[best], raw[:count]])
            moved, moved_values = ascend_cells(
                lam, self.X, self.activation, cell_starts, admissible.subspace, max_steps=CELL_ASCENT_STEPS[tier]
            )
            found, values = torch.cat([found, moved]), torch.cat([values, moved_values])
        estimate = max(float(values.max()), master.largest_ratio(lam))
        caps, point, reached = 0, lam, estimate
        if self.exact is not None:
            proven, u_exact, v_exact = self.exact.sup(lam, top=self.max_new)
            found, values = torch.cat([found, u_exact]), torch.cat([values, v_exact])
            estimate = reached = max(estimate, float(v_exact.max()))
        elif self.branch_and_bound is not None and self.level >= 2:
            point = lam if inner is None else 0.5 * (inner + lam)
            order = torch.argsort(values, descending=True)[: self.max_new]
            certified = self.branch_and_bound.sup(
                point,
                starts=found[order],
                rel_tol=min(0.05, max(self.rel_tol, gap / 4.0)),
                max_caps=self.max_caps,
                top=self.max_new,
            )
            proven, caps, reached = min(certified.upper, self.closed_form_bound(point)), certified.caps, certified.best
            # The best cap centres, moved up by ascent at λ: the directions the local searches missed.
            polished, polished_values = maximize_dual_ratio(
                lam, self.X, self.activation, certified.directions, admissible.project, self.steps
            )
            found = torch.cat([found, certified.directions, polished])
            values = torch.cat([values, certified.values, polished_values])
            estimate = max(estimate, float(polished_values.max()))
            if inner is None:
                estimate = max(estimate, certified.best)
        else:
            proven = self.closed_form_bound(lam)
        if proven < (1.0 - 1e-9) * reached:  # a proven bound below a value actually reached: a bug
            raise SolverError(
                f"the proven bound {proven:.6g} on the dual ratio is below a value found, {reached:.6g}: "
                f"please report this ({self.mode} pricing)."
            )
        return Pricing(found, values, estimate, max(proven, reached), caps, point)


def spectral_starts(lam: torch.Tensor, X: torch.Tensor, admissible: AdmissibleSet, count: int = 8) -> torch.Tensor:
    """The extreme eigenvectors of M = Σ_i λ_i x_i x_iᵀ inside the admissible subspace, both signs.

    For the quadratic, Σ_i λ_i σ(⟨u, x_i⟩) = uᵀMu and κ(u) varies little, so they start the ascent of G_λ
    near its best maxima.  With λ = y − ȳ they are the classical spectral estimate of the label-relevant
    directions (for a single-index teacher and Gaussian inputs, E[(y − Ey) x xᵀ] is a multiple of θ*θ*ᵀ
    for the ReLU and quadratic links): a data-only warm start, no teacher involved.
    """
    basis = admissible.basis
    Xb = X @ basis
    vals, vecs = torch.linalg.eigh((Xb * lam[:, None]).T @ Xb)
    order = torch.argsort(vals.abs(), descending=True)[:count]
    U = vecs[:, order].T @ basis.T
    return admissible.project(torch.cat([U, -U]))


def nuclear_norm_directions(X: torch.Tensor, y: torch.Tensor, basis: torch.Tensor, max_dim: int = 60):
    """Eigenvectors of the minimum-nuclear-norm symmetric Q with x_iᵀQx_i = y_i (inside the subspace).

    For the quadratic, a measure μ interpolates iff Q = ∫ uuᵀ dμ(u) does, and ∫ d|μ| ≥ ‖Q‖_*; with κ(u)
    nearly constant, V* ≈ κ̄^{3/4} min ‖Q‖_*, an SDP (PhaseLift's relaxation): its eigenvectors are
    near-optimal atoms, a data-only warm start (no teacher involved).  Skipped (no directions) above
    ``max_dim`` dimensions or if the SDP fails.
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


def new_columns(
    found: torch.Tensor, values: torch.Tensor, held: torch.Tensor, activation: HomogeneousActivation, max_new: int
) -> torch.Tensor:
    """The best distinct directions with dual ratio above 1 + 1e-9 that are not among ``held`` (cosine above
    1 − 1e-10), at most ``max_new``.  For an even σ, u and −u give one column and count as one."""
    even = activation.even
    order = torch.argsort(values, descending=True)
    candidates = found[order[values[order] > 1.0 + 1e-9]]
    picked: list[torch.Tensor] = []
    for block in torch.split(candidates, 256):  # (a block × the master's columns at a time)
        cosines = block @ held.T
        nearest_held = (cosines.abs() if even else cosines).amax(dim=1)
        for u, nearest in zip(block, nearest_held.tolist(), strict=True):
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


def stalled(history: list[dict], stall_rounds: int, tol: float) -> bool:
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


@dataclasses.dataclass
class ColumnGenerationResult:
    """The measure column generation ends with, its bounds, and why it stopped."""

    directions: torch.Tensor  #: (K, d) the atoms' unit directions
    weights: torch.Tensor  #: (K,) the atoms' weights μ_k (interpolating: Σ_k μ_k σ(⟨u_k, x_i⟩) = y_i)
    value: float  #: V of the atoms, Σ_k w(u_k)|μ_k| ≥ V*
    proven: float  #: the best proven lower bound on V* found (0 if none)
    estimate: float  #: the best lower bound on V* that the largest ratio found implies (an estimate)
    dual: torch.Tensor  #: the λ that gave ``proven`` (zeros if none)
    dual_sup: float  #: the proven upper bound on sup G_λ used with it (``proven`` = λᵀy / dual_sup)
    stop: StopReason
    rounds: int
    mode: str  #: the pricer's mode ("exact", "branch-and-bound" or "bound")
    columns: torch.Tensor  #: (M, d) the master's directions at the end (the near-flattest set's dictionary)
    history: list[dict]


class ColumnGeneration:
    """The rounds of column generation for the measure program over ``admissible`` (see the module)."""

    def __init__(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        activation: HomogeneousActivation,
        admissible: AdmissibleSet,
        *,
        start_directions: torch.Tensor,
        n_start: int | None,
        rounds: int,
        tol: float,
        pricing_starts: int,
        pricing_steps: int,
        slide_steps: int,
        certify_up_to: int,
        inexact_master: bool,
        cell_ascent: bool,
        max_caps: int,
        warm_masters: bool,
        stall_rounds: int | None,
        seed: int,
        progress: bool = False,
        time_limit: float | None = None,
    ):
        self.X, self.y, self.activation, self.admissible = X, y, activation, admissible
        self.rounds, self.tol, self.slide_steps, self.stall_rounds = rounds, tol, slide_steps, stall_rounds
        self.inexact_master, self.warm_masters, self.progress = inexact_master, warm_masters, progress
        self.time_limit = time_limit
        self.generator = torch.Generator().manual_seed(seed)
        self.start_directions, self.n_start = start_directions, n_start
        n = X.shape[0]
        r = admissible.r
        # Certified pricing adds up to 2n cuts a round (Pricer.max_new), and the master holds enough of them:
        # pruning them by tightness at one dual point makes the bound cycle.
        certified = pricing_mode(activation, admissible, certify_up_to) != "bound"
        self.cap = (80 if certified else 20) * n + 500
        self.pricer = Pricer(
            X,
            activation,
            admissible,
            self.generator,
            certify_up_to=certify_up_to,
            cell_ascent=cell_ascent,
            starts=pricing_starts,
            steps=pricing_steps,
            rel_tol=tol / 2.0,
            max_caps=max_caps,
        )
        # The ReLU family is polished only where its arrangement could not be enumerated (directions spanning
        # more than 3 dimensions): in low dimension its optima sit at the kinks of σ (cell boundaries), where
        # Gauss-Newton's steps are no guide.
        self.polishable = not (activation.piecewise_linear and exact_pricing_available(activation, r))
        self.master = RestrictedMaster(X, y, activation)
        self.history: list[dict] = []
        self.level_since = 0  #: the first round (index into history) priced at the pricer's current level
        self.best = {"estimate": -math.inf, "proven": -math.inf}
        self.best_dual = (X.new_zeros(n), math.inf)

    # -- the pieces of a round -------------------------------------------------------------------------------

    def _first_master(self) -> MasterState:
        """The master over the start directions, the data's spectral and (quadratic) nuclear-norm directions
        and ``n_start`` random ones (default max(2n, 2d)); a random dictionary too small to interpolate is
        doubled, at most four times."""
        n, d = self.X.shape
        admissible, activation = self.admissible, self.activation
        warm = (
            [nuclear_norm_directions(self.X, self.y, admissible.basis)]
            if activation.feature_dimension(admissible.r) is not None
            else []
        )
        count = max(2 * n, 2 * d) if self.n_start is None else self.n_start
        batch = torch.cat(
            [
                self.start_directions,
                *warm,
                spectral_starts(self.y - self.y.mean(), self.X, admissible),
                admissible.random(count, self.generator),
            ]
        )
        for attempt in range(5):
            self.master.add(batch)
            try:
                return self.master.solve()
            except InfeasibleInterpolationError as exc:
                capacity = activation.feature_dimension(admissible.r)
                if attempt == 4 or capacity is not None:
                    hint = ""
                    if capacity is not None:
                        hint = (
                            f" Features of directions in a {admissible.r}-dimensional space span at most "
                            f"{capacity} dimensions, so they interpolate at most {capacity} generic samples "
                            f"(n = {n})."
                        )
                    raise InfeasibleInterpolationError(f"{exc}{hint}") from None
                batch = admissible.random(self.master.size, self.generator)
        raise AssertionError("unreachable")  # pragma: no cover

    def _bounds(self, lam: torch.Tensor, pricing: Pricing) -> None:
        """Record the lower bounds on V*: estimated from λ and the largest ratio found, proven from the dual point
        that the proven sup is for (λ, or the in-out separation point)."""
        value = float(lam @ self.y)
        if value > 0:
            self.best["estimate"] = max(self.best["estimate"], value / pricing.estimate)
        dual = lam if pricing.dual is None else pricing.dual
        proven_value = float(dual @ self.y)
        if proven_value > 0 and proven_value / pricing.proven > self.best["proven"]:
            self.best["proven"] = proven_value / pricing.proven
            self.best_dual = (dual.clone(), pricing.proven)

    @property
    def inner(self) -> torch.Tensor | None:
        """The best proven dual point scaled into the dual feasible set (sup G ≤ 1), if there is one."""
        lam, sup = self.best_dual
        return lam / sup if self.best["proven"] > 0 else None

    @property
    def target(self) -> float:
        """The lower bound the rounds test the master against: the proven one while the pricer certifies its
        supremum (exact pricing, or the branch-and-bound level), else the estimate.  At a certifying level the
        estimate can sit above V* (an earlier heuristic round missed the maximiser) and stay there, so tailing-off
        judged on it would stop a run whose proven bound is still rising."""
        return self.best["proven"] if self.pricer.certifying else self.best["estimate"]

    def _candidates(self, state: MasterState, pricing: Pricing) -> torch.Tensor:
        """The round's new columns: polished atoms, priced directions, and (where the polish did not reach at
        most 4 atoms at least as flat as the master) slid basic directions."""
        found, values = pricing.directions, pricing.values
        polished = None
        if self.polishable:
            # Polished atoms join the master as columns when at least as flat as its value: its dual then prices
            # at (nearly) the polished measure, and column generation need not rediscover them one cut at a time.
            polished = polish_atoms(
                *self.master.atoms(state.solution),
                self.X,
                self.y,
                self.activation,
                self.admissible.project,
                ceiling=state.solution.value,
            )
            if polished is not None:
                found = torch.cat([polished[0], found])
                values = torch.cat([values.new_full((polished[0].shape[0],), math.inf), values])
        new = new_columns(found, values, self.master.directions, self.activation, self.pricer.max_new)
        # The slide moves n basic directions towards the sparse measure that a successful polish already is.
        if self.slide_steps > 0 and polished is None:
            basic = self.master.basic_directions(state.solution)
            if basic is not None:
                moved = slide(basic, self.X, self.y, self.activation, self.admissible.project, steps=self.slide_steps)
                new = torch.cat([new, moved[0]])
        return new

    def _converged(self, state: MasterState) -> bool:
        """Whether an exact master's value is within tol of the best proven bound."""
        return state.solution.exact and state.solution.value <= (1.0 + self.tol) * self.best["proven"]

    def _would_stop(self, state: MasterState, new: torch.Tensor, pricing: Pricing) -> StopReason | None:
        """A heuristic reason to stop at this round, if any: tailing-off (``stalled``, over the rounds at the
        current pricing level, inexact masters counted at value·(1 + gap); not at a certifying level when a time
        limit was given, which then bounds the proof instead); and on an exact master, no new
        column, or the largest ratio found within ``tol`` of 1 (the master within tol of the bound it implies),
        except at a certified level, where only a proof ends the rounds."""
        proof_has_the_time = self.time_limit is not None and self.pricer.certifying
        if self.stall_rounds is not None and self.pricer.mode != "exact" and not proof_has_the_time:
            # Only the rounds at the current pricing level count: an escalation gets stall_rounds rounds of its own.
            if stalled(self.history[self.level_since :], self.stall_rounds, self.tol):
                return StopReason.STALLED
        if not state.solution.exact:
            return None
        if new.shape[0] == 0:
            return StopReason.NO_IMPROVING_DIRECTION
        implied = float(state.central @ self.y) / pricing.estimate
        if not self.pricer.certifying and state.solution.value <= (1.0 + self.tol) * implied:
            return StopReason.NO_IMPROVING_DIRECTION
        return None

    def _price(self, state: MasterState) -> Pricing:
        """Price at the master's central dual (a vertex dual sits at a corner of a degenerate optimal face and
        makes the dual ratio needlessly large elsewhere) and record the bounds it gives."""
        proven = self.best["proven"]
        gap = state.solution.value / proven - 1.0 if proven > 0 else math.inf
        pricing = self.pricer.price(state.central, self.master, state.solution, self.inner, gap)
        self._bounds(state.central, pricing)
        return pricing

    # -- the rounds ------------------------------------------------------------------------------------------

    def run(self) -> ColumnGenerationResult:
        """Column generation until one of the stops of :class:`StopReason` (see the module)."""
        self.started = time.perf_counter()
        state = self._first_master()
        stop = StopReason.ROUND_LIMIT
        bar = progress_bar(self.rounds, desc="flattest interpolator", leave=False, show=self.progress)
        rounds_run = 0
        for round_ in range(self.rounds):
            rounds_run = round_ + 1
            bar.update(1)
            if self.time_limit is not None and time.perf_counter() - self.started > self.time_limit / 2:
                self._escalate_fully()
            pricing = self._price(state)
            # An inexact master's value may lie on either side of the exact one, its dual's weak-duality bound
            # never above it: near the target, solve exactly and price again, so that every stop is judged on
            # an exact master and the pricing at its dual.
            near = (1.0 + self.tol) * max(self.target, self.best["proven"])
            if (
                not state.solution.exact
                and min(state.solution.value, self.master.weak_duality_bound(state.central)) <= near
            ):
                state = self.master.solve()
                pricing = self._price(state)
            new = self._candidates(state, pricing)
            self._record(round_, state, new, pricing)
            bar.set_postfix(V=f"{state.solution.value:.6g}", lower=f"{self.target:.6g}")
            reason = StopReason.CONVERGED if self._converged(state) else self._would_stop(state, new, pricing)
            while reason not in (None, StopReason.CONVERGED) and self.pricer.escalate():
                # Before any heuristic stop, price again at this λ, more thoroughly.
                self.level_since = len(self.history)
                pricing = self._price(state)
                new = self._candidates(state, pricing)
                reason = StopReason.CONVERGED if self._converged(state) else self._would_stop(state, new, pricing)
            if reason is not None:
                stop = reason
                break
            if self.time_limit is not None and time.perf_counter() - self.started > self.time_limit:
                stop = StopReason.TIME_LIMIT
                break
            if new.shape[0] == 0:  # an inexact λ can satisfy every cut while the master is not yet optimal
                state = self.master.solve()
                continue
            state = self._add_and_solve(new, state, round_)
        bar.close()
        return self._finish(state, stop, rounds_run)

    def _escalate_fully(self) -> None:
        """Raise the pricer to its most thorough level (a no-op once there)."""
        while self.pricer.escalate():
            self.level_since = len(self.history)

    def _record(self, round_: int, state: MasterState, new: torch.Tensor, pricing: Pricing) -> None:
        self.history.append(
            {
                "round": round_,
                "master": state.solution.value,
                "lower_estimate": self.best["estimate"],
                "lower_proven": self.best["proven"],
                "target": self.target,
                "columns": self.master.size,
                "added": new.shape[0],
                "master_exact": state.solution.exact,
                "master_gap": state.solution.gap,
                "pricing_level": self.pricer.level,
                "caps": pricing.caps,
                "seconds": time.perf_counter() - self.started,
            }
        )

    def _add_and_solve(self, new: torch.Tensor, state: MasterState, round_: int) -> MasterState:
        """Add the new columns and solve the master: inexactly while the column generation is far from
        converged (a tenth of its gap, at most ``INEXACT_MASTER_MAX_GAP``), exactly once that is below 1e-9,
        above the column cap (pruning keeps an exact solution's support) and in the last round."""
        Phi_new, w_new = self.master.add(new)
        target = self.target
        gap_tol = min(INEXACT_MASTER_MAX_GAP, (state.solution.value / target - 1.0) / 10.0) if target > 0 else 0.0
        exact_now = (
            not self.inexact_master or gap_tol <= 1e-9 or self.master.size > self.cap or round_ == self.rounds - 1
        )
        # With warm_masters, an inexact master that follows an inexact one starts from its restart point,
        # extended to the new columns (exact masters, and inexact ones after them, start cold).
        start = None if exact_now or state.restart is None else state.restart.with_columns(Phi_new, w_new)
        state = self.master.solve(
            None if exact_now else gap_tol, start, MASTER_RESTART_FACTOR if self.warm_masters else None
        )
        return self.master.prune(state, self.cap)

    def _finish(self, state: MasterState, stop: StopReason, rounds_run: int) -> ColumnGenerationResult:
        """The optimal vertex of the last master (solved exactly if it was not), its atoms polished into at
        most 4 where that keeps them as flat, and the stop re-judged on the atoms' value."""
        if not state.solution.exact:
            state = self.master.solve()
        state = self.master.vertex(state)
        directions, weights = self.master.atoms(state.solution)
        value = state.solution.value
        if self.polishable:
            polished = polish_atoms(directions, weights, self.X, self.y, self.activation, self.admissible.project)
            if polished is not None:
                directions, weights, value = polished
        if value <= (1.0 + self.tol) * max(self.best["proven"], 0.0):
            stop = StopReason.CONVERGED
        # V* ≤ value (the atoms interpolate): an estimate above it, possible when heuristic pricing missed the
        # maximiser and the final polish went below, is lowered to it.
        lam, sup = self.best_dual
        return ColumnGenerationResult(
            directions=directions,
            weights=weights,
            value=value,
            proven=max(self.best["proven"], 0.0),
            estimate=min(max(self.best["estimate"], 0.0), value),
            dual=lam,
            dual_sup=sup,
            stop=stop,
            rounds=rounds_run,
            mode=self.pricer.mode,
            columns=self.master.directions,
            history=self.history,
        )
