"""The near-flattest set: every interpolator within a factor 1 + ε of the flattest, and its best and worst.

A theorem about "the flattest interpolators" covers every interpolator with Υ ≤ (1 + ε) Υ*, not one of
them (book, chapter 4, "The whole near-flattest set").  Over a fixed dictionary of unit directions u_j the
measures μ that interpolate, Σ_j μ_j σ(⟨u_j, x_i⟩) = y_i, with V(μ) = Σ_j w_j |μ_j| ≤ B (w_j = κ(u_j)^{1/p})
form a polytope P_B; split into ``width`` copies (eq. ``eq-splitting``) each is a width-m network with
Υ ≤ m^{1−p} V^p up to the rounding of the split.  With B = ((1 + ε) Υ_best m^{p−1})^{1/p}, Υ_best the
flattest interpolator's Υ, P_B holds the near-flattest interpolators over the dictionary (the global
solver's last columns and atoms).

The exact population loss is a convex quadratic in μ (:func:`~flatbook.data.population_quadratic`):

- its **minimum** over P_B is a convex program (cvxpy); its minimiser is in general not sparse (not a
  network of width m), so :func:`best_near_flattest` reports that minimum as a lower end and returns the
  best vertex that descent by successive linear programs reaches from it (at most n + 1 atoms);
- its **maximum** over P_B is attained at a vertex and is hard in general; :func:`worst_near_flattest`
  climbs by successive linear programs (μ_{t+1} = argmax over P_B of ∇F(μ_t)ᵀμ, which never lowers F since
  F is convex) from several starts (the flattest measure and vertices maximising random directions), so
  what it returns is a *lower estimate* of the worst excess over the set.

- a **proven floor** of the excess over P_B: :func:`frank_wolfe_floor` (Frank–Wolfe, whose linear programs
  bound the minimum of a convex function from below at every iterate), cheaper than the QP at many sizes.

The **path norm** P = Σ_j |ã_j| = ‖μ‖₁ (book, ``prop-ch4-path-norm``) is convex too, and its maximum over P_B
is found by branch and bound on the atoms' signs, whose relaxations are the vertex programs below:
:meth:`NearFlattestSet.largest_path_norm` returns the member found and a proven bound.

:func:`near_flattest_set` builds P_B once per dataset (the dictionary and the loss's kernel); its
:meth:`~NearFlattestSet.worst` and :func:`frank_wolfe_floor` then take the slack.  Every bound here is over the
dictionary: a near-flattest network on other directions is a member of the set that none of them sees.

Either way the network returned is checked: it interpolates and its Υ is at most (1 + ε) Υ_best (for p > 1
the budget is shrunk and the measure re-solved while the split's rounding pushes Υ above that).
"""

from __future__ import annotations

import heapq
import math
import warnings
from dataclasses import dataclass, field

import highspy
import numpy as np
import scipy.sparse
import torch

from .activations import get_activation
from .backend import check_data
from .data import MultiIndexModel, PopulationQuadratic, population_quadratic
from .errors import FlatbookInputError, SolverError
from .flatness import min_flatness, unit_flatness_weights
from .global_flattest import Atoms, FlattestInterpolator, flattest_interpolator, split_into_copies
from .network import TwoLayerNet

__all__ = [
    "NearFlattest",
    "NearFlattestSet",
    "LargestPathNorm",
    "ExcessFloor",
    "near_flattest_set",
    "worst_near_flattest",
    "best_near_flattest",
    "frank_wolfe_floor",
]


@dataclass
class NearFlattest:
    """An interpolator of the near-flattest set and its exact excess population loss, beside the flattest's."""

    net: TwoLayerNet  #: ``width`` neurons, interpolating, Υ ≤ (1 + slack) Υ of the flattest
    upsilon: float  #: Υ(net)
    excess: float  #: F(net) − F*, exact
    flattest_upsilon: float  #: Υ of the flattest interpolator found (the solver's network)
    flattest_excess: float  #: its excess
    slack: float  #: ε
    measure_value: float  #: V of the measure behind ``net``
    budget: float  #: B, the bound on V that defines the set (eq. ``eq-splitting``)
    #: "worst" (a lower estimate of the largest excess), "best" (an upper estimate of the smallest) or "path norm"
    #: (:meth:`NearFlattestSet.largest_path_norm`)
    kind: str
    climbs: list[float] = field(default_factory=list)  #: the excess each start's climb or descent ended at
    #: "best" only: the minimum over every measure of P_B on the dictionary (any number of atoms), below ``excess``
    excess_floor: float | None = None


@dataclass
class LargestPathNorm:
    """The near-flattest networks of largest path norm P = Σ_j |ã_j| found on the dictionary
    (:meth:`NearFlattestSet.largest_path_norm`), in two senses.

    Over **measures** (one signed weight per direction): ``member``, ``path_norm`` and the search's ``bound``.  Over
    **networks** (p = 1 only): a network may carry two neurons of opposite sign on one direction, a cancelling
    pair that adds to P and leaves the function alone; ``network`` and ``network_path_norm`` are the largest then,
    a linear program's optimum."""

    member: NearFlattest  #: the measure's network (one neuron per atom, split), Υ and exact excess ("path norm")
    path_norm: float  #: P(member.net): a lower end of the largest ‖μ‖₁ over the measures of P_B(ε)
    #: the branch and bound's upper bound on max ‖μ‖₁ over P_B(ε) (valid up to the vertex programs' tolerances)
    bound: float
    optimal: bool  #: ``path_norm`` is proven within the relative gap PATH_NORM_GAP of ``bound``
    nodes: int  #: the relaxations (linear programs) the search at B(ε) solved, the root's included
    #: p = 1: the width-≤ m network on the dictionary with Υ ≤ (1 + ε)Υ_best of largest P (None for p ≠ 1,
    #: where a two-signed measure would have to be split into copies)
    network: TwoLayerNet | None = None
    network_path_norm: float | None = None  #: its P, the linear program's optimum (to its tolerance)


#: a solve starts by cutting the vertex program's working set back to its basic atoms when it holds more than this
#: many times n + 1 atoms: a basic solution has at most n + 1, and a few times that leaves room for the atoms a
#: climb or Frank-Wolfe visits next (bench/bench_near_flattest.py times it against the whole dictionary)
WORKING_ATOMS_FACTOR = 4
#: the reduced cost above which an atom outside the working set joins it: HiGHS's dual feasibility tolerance in
#: the vertex program, so that the restricted optimum is optimal over the dictionary to the same tolerance
PRICING_TOLERANCE = 1e-10
#: HiGHS's primal feasibility tolerance in the vertex program: its default 1e-7 leaves Φμ − y at ~1e-8 max|y| on some
#: vertices; a least-squares polish on the support is no cure (the support's Φ can be nearly singular, and the step
#: then leaves the budget)
FEASIBILITY_TOLERANCE = 1e-10
#: HiGHS's options in the vertex program
VERTEX_PROGRAM_OPTIONS: dict[str, bool | float | int | str] = {
    "output_flag": False,
    "primal_feasibility_tolerance": FEASIBILITY_TOLERANCE,
    "dual_feasibility_tolerance": PRICING_TOLERANCE,
    # most successive solves change only the objective (a climb's, Frank-Wolfe's), so the previous optimal basis
    # stays primal feasible and primal simplex starts from it; a change of budget makes HiGHS repair feasibility
    # first (bench/bench_near_flattest.py times it against the default dual simplex)
    "simplex_strategy": 4,
    "presolve": "choose",
}
#: a solve of the vertex program that may be restarted stops after this many simplex iterations per row and column
#: of its model, and is then a solve without a verdict (see :meth:`_VertexProgram._run`): on a thin P_B (slack 0.1 %
#: at n = 192) HiGHS's simplex, started from the kept instance's basis, can cycle through nearly singular bases
#: without end, where a new instance solves the same program from scratch in fewer iterations than the model has
#: columns.  The last restart has no limit (``RESTART_OPTIONS``)
ITERATION_LIMIT_FACTOR = 4
#: the options besides the vertex program's with which a new HiGHS instance solves it from scratch, in turn, when
#: the kept instance ends a solve without a verdict: the program's own, dual simplex without presolve, then primal
#: simplex with no iteration limit, since no attempt follows it.  Dual simplex can stop at once with an error
#: (status kNotset) on a program that primal simplex solves, and a degenerate program can need far more iterations
#: than any limit set for the earlier attempts: both seen on chapter 4's paper-scale datasets (n = 136, noiseless;
#: at seed 300 a Frank-Wolfe program took 300 173 iterations of primal simplex from scratch, 77 per row and column,
#: and as many after the interior-point method's 31, in its crossover)
RESTART_OPTIONS: tuple[dict[str, int | str], ...] = (
    {},
    {"simplex_strategy": 1, "presolve": "off"},
    {"simplex_strategy": 4, "simplex_iteration_limit": highspy.kHighsIInf},
)


class _VertexProgram:
    """max cᵀμ over P_B = {μ : Φμ = y, Σ_j w_j|μ_j| ≤ B} (μ = z⁺ − z⁻, z ≥ 0), by column generation over the
    dictionary's atoms.

    HiGHS solves the program restricted to a working set of atoms (both columns of each); with λ and t the
    restricted optimum's duals of the interpolation and budget rows, an atom outside joins when one of its reduced
    costs c⁺_j − Φ_jᵀλ − w_j t, c⁻_j + Φ_jᵀλ − w_j t exceeds ``PRICING_TOLERANCE`` (the n + 1 largest join per
    round).  When none does, (λ, t) is dual feasible for every column, so the restricted optimum is optimal over
    the whole dictionary (LP duality).  The model keeps its basis between solves: the successive programs of a climb
    or of Frank-Wolfe differ only in their objective, so primal simplex starts from the last optimal basis.  The
    working set starts at ``seed`` atoms (a feasible point's support, e.g. the flattest measure's), is cut back to
    its basic atoms when it exceeds ``working_atoms`` (None: never), and takes the whole dictionary when HiGHS
    finds the restricted program infeasible or cannot decide it (P_B may be non-empty all the same).  HiGHS runs
    with ``VERTEX_PROGRAM_OPTIONS`` updated by ``options``."""

    def __init__(
        self,
        Phi: np.ndarray,
        w: np.ndarray,
        y: np.ndarray,
        seed: np.ndarray,
        working_atoms: int | None,
        options: dict[str, bool | float | int | str] | None = None,
    ):
        self.n, self.k = Phi.shape
        self.Phi, self.w, self.y = np.ascontiguousarray(Phi), w, y
        self.working_atoms = working_atoms
        self.options = {**VERTEX_PROGRAM_OPTIONS, **(options or {})}
        #: the working set: model columns 2i and 2i + 1 are z⁺ and z⁻ of atom ``atoms[i]``
        self.atoms = np.zeros(0, dtype=np.int64)
        self.in_model = np.zeros(self.k, dtype=bool)
        self.cost_plus, self.cost_minus = np.zeros(self.k), np.zeros(self.k)
        #: the columns fixed at zero (z⁺ of every atom, then z⁻): a branch of :func:`_largest_l1`
        self.closed = np.zeros(2 * self.k, dtype=bool)
        self.all_open = np.zeros(2 * self.k, dtype=bool)  # ``closed`` when no column is
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = 0, self.n + 1
        lp.row_lower_ = np.concatenate([y, [-highspy.kHighsInf]])
        lp.row_upper_ = np.concatenate([y, [highspy.kHighsInf]])  # the budget row's bound is set by each solve
        lp.sense_ = highspy.ObjSense.kMaximize
        self.highs = self._new_solver(**self.options)
        self.highs.passModel(lp)
        self._add(np.asarray(seed, dtype=np.int64))

    @staticmethod
    def _new_solver(**options) -> highspy.Highs:
        """A HiGHS instance with ``VERTEX_PROGRAM_OPTIONS``, updated by ``options``."""
        highs = highspy.Highs()
        for name, value in {**VERTEX_PROGRAM_OPTIONS, **options}.items():
            highs.setOptionValue(name, value)
        return highs

    def _add(self, atoms: np.ndarray) -> None:
        """Both columns of each atom not yet in the model, with the current costs."""
        atoms = atoms[~self.in_model[atoms]]
        if atoms.size == 0:
            return
        columns = np.empty((self.n + 1, 2 * atoms.size))
        columns[: self.n, 0::2], columns[: self.n, 1::2] = self.Phi[:, atoms], -self.Phi[:, atoms]
        columns[self.n, 0::2] = columns[self.n, 1::2] = self.w[atoms]
        A = scipy.sparse.csc_matrix(columns)
        count = 2 * atoms.size
        self.highs.addCols(
            count, self._costs(atoms), np.zeros(count), self._uppers(atoms),
            A.nnz, A.indptr[:-1].astype(np.int32), A.indices.astype(np.int32), A.data,
        )  # fmt: skip
        self.atoms = np.concatenate([self.atoms, atoms])
        self.in_model[atoms] = True

    def _model_columns(self, plus: np.ndarray, minus: np.ndarray, atoms: np.ndarray) -> np.ndarray:
        """Per-atom values of the z⁺ and z⁻ columns laid out as the model's columns of ``atoms``: (plus_j, minus_j)
        in turn."""
        values = np.empty(2 * atoms.size, dtype=plus.dtype)
        values[0::2], values[1::2] = plus[atoms], minus[atoms]
        return values

    def _costs(self, atoms: np.ndarray) -> np.ndarray:
        """The current costs of the model columns of ``atoms``."""
        return self._model_columns(self.cost_plus, self.cost_minus, atoms)

    def _uppers(self, atoms: np.ndarray) -> np.ndarray:
        """The upper bounds of the model columns of ``atoms``: 0 where the column is closed, else none."""
        closed = self._model_columns(self.closed[: self.k], self.closed[self.k :], atoms)
        return np.where(closed, 0.0, highspy.kHighsInf)

    def _close(self, closed: np.ndarray) -> None:
        """Fix the columns marked in ``closed`` (z⁺ then z⁻, 2k flags) at zero and free the others."""
        if np.array_equal(closed, self.closed):
            return
        self.closed = closed.copy()
        count = 2 * self.atoms.size
        self.highs.changeColsBounds(count, np.arange(count, dtype=np.int32), np.zeros(count), self._uppers(self.atoms))

    def _cut_to_basis(self) -> None:
        """Drop the atoms neither of whose columns is basic (both at zero); the basis stays valid.  Nothing is
        dropped before the first solve (no basis yet)."""
        basis = self.highs.getBasis()
        if not basis.valid:
            return
        status = np.array([int(s) for s in basis.col_status]).reshape(-1, 2)
        basic = (status == int(highspy.HighsBasisStatus.kBasic)).any(axis=1)
        dropped = np.flatnonzero(~basic)
        columns = np.sort(np.concatenate([2 * dropped, 2 * dropped + 1])).astype(np.int32)
        self.highs.deleteCols(columns.size, columns)
        self.in_model[self.atoms[dropped]] = False
        self.atoms = self.atoms[basic]

    def _solve(
        self, cost_plus: np.ndarray, cost_minus: np.ndarray, budget: float, closed: np.ndarray | None = None
    ) -> np.ndarray | None:
        """max Σ_j (cost⁺_j z⁺_j + cost⁻_j z⁻_j) over the whole program, with the columns marked in ``closed``
        (z⁺ then z⁻; None: none) fixed at zero: (z⁺, z⁻) stacked, or None when empty."""
        if self.working_atoms is not None and self.atoms.size > self.working_atoms:
            self._cut_to_basis()
        self.cost_plus, self.cost_minus = cost_plus, cost_minus
        costs = self._costs(self.atoms)
        self.highs.changeColsCost(costs.size, np.arange(costs.size, dtype=np.int32), costs)
        self.highs.changeRowBounds(self.n, -highspy.kHighsInf, budget)
        self._close(self.all_open if closed is None else closed)
        batch = self.n + 1
        while True:
            whole = self.atoms.size == self.k
            if self._run(restart=whole) != highspy.HighsModelStatus.kOptimal:
                if whole:
                    return None
                # the restricted program is empty, or HiGHS could not decide it (a working set that can barely
                # interpolate, such as the flattest measure's support alone): the whole dictionary decides
                self._add(np.arange(self.k))
                continue
            solution = self.highs.getSolution()
            duals = np.asarray(solution.row_dual)
            projected, budget_cost = self.Phi.T @ duals[: self.n], self.w * duals[-1]
            reduced = np.vstack([cost_plus - projected - budget_cost, cost_minus + projected - budget_cost])
            reduced[self.closed.reshape(2, self.k)] = -np.inf
            reduced = reduced.max(axis=0)
            reduced[self.in_model] = -np.inf
            joining = np.flatnonzero(reduced > PRICING_TOLERANCE)
            if joining.size == 0:
                z = np.zeros(2 * self.k)
                value = np.asarray(solution.col_value)
                z[self.atoms], z[self.k + self.atoms] = value[0::2], value[1::2]
                return z
            if joining.size > batch:
                joining = joining[np.argpartition(-reduced[joining], batch)[:batch]]
            self._add(joining)

    def _run(self, restart: bool) -> highspy.HighsModelStatus:
        """Solve the program as it stands: kOptimal, an empty-program status (the budget row makes it bounded), or,
        without ``restart``, whatever status HiGHS ended with.

        HiGHS can end a solve on the model it keeps between solves without a verdict (kUnknown), with an error
        (kNotset) or at the iteration limit (``ITERATION_LIMIT_FACTOR``), seen on chapter 4's paper-scale datasets
        after many added and deleted columns, where the same program passed to a new instance and solved from scratch
        is solved.  With ``restart`` the program is then
        handed to a new instance and solved from scratch with each of ``RESTART_OPTIONS`` in turn; failing all, it
        raises, naming each status, rather than passing for empty."""
        empty = (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible)
        statuses = []
        for options in (None, *RESTART_OPTIONS):
            if options is not None:
                model = self.highs.getLp()
                self.highs = self._new_solver(**{**self.options, **options})
                self.highs.passModel(model)
            iterations = ITERATION_LIMIT_FACTOR * (self.highs.getNumRow() + self.highs.getNumCol())
            self.highs.setOptionValue(
                "simplex_iteration_limit", (options or {}).get("simplex_iteration_limit", iterations)
            )
            self.highs.run()
            status = self.highs.getModelStatus()
            if status == highspy.HighsModelStatus.kOptimal or status in empty or not restart:
                # later solves start from this basis with the program's own options (and a limit set anew)
                for name in (options or {}).keys() & self.options.keys():
                    self.highs.setOptionValue(name, self.options[name])
                return status
            statuses.append(self.highs.modelStatusToString(status))
        raise SolverError(
            f"HiGHS ended the vertex program over the whole dictionary with status {statuses[0]}, and again when "
            f"solved from scratch by a new instance ({', '.join(statuses[1:])}); report this."
        )

    def largest_total(self, budget: float, closed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """(z⁺, z⁻) maximising Σ_j (z⁺_j + z⁻_j) over the program's constraints with the ``closed`` columns at zero
        (see :meth:`_solve`), or None when they are empty."""
        z = self._solve(np.ones(self.k), np.ones(self.k), budget, closed)
        return None if z is None else (z[: self.k], z[self.k :])

    def argmax(self, c: np.ndarray, budget: float) -> np.ndarray | None:
        """The maximising vertex μ, or None when P_budget is empty."""
        z = self._solve(c, -c, budget)
        return None if z is None else z[: self.k] - z[self.k :]


#: the relaxations :func:`_largest_l1` may solve for :meth:`NearFlattestSet.largest_path_norm`; a search stopped there
#: reports its best member and its proven bound (a node limit, unlike a time limit, gives the same answer on any
#: machine)
PATH_NORM_NODES = 20_000
#: HiGHS's options in the search's relaxations besides the vertex program's: dual simplex, since the relaxations
#: differ in columns' bounds, never in costs (a child's from its parent's basis, which stays dual feasible, in one
#: closure; best-first order may reopen columns too); bench/bench_path_norm.py times the search against HiGHS's
#: mixed-integer solver
SEARCH_OPTIONS: dict[str, bool | float | int | str] = {"simplex_strategy": 1}
#: the relative gap at which the largest-path-norm search calls its member the largest
PATH_NORM_GAP = 1e-4
#: the relative margin within which a member found may exceed the search's bound before the bound is called false: a
#: rule of thumb, ten thousand times the vertex programs' feasibility tolerance (the bound's relaxations and the
#: members' programs each meet their constraints only to it)
PATH_NORM_MARGIN = 1e4 * FEASIBILITY_TOLERANCE


@dataclass
class _PathNormSearch:
    """What :func:`_largest_l1` found and proved."""

    member: np.ndarray  #: the measure of largest ‖μ‖₁ found, a point of P_B (to the vertex programs' tolerance)
    bound: float  #: an upper bound on max ‖μ‖₁ over P_B: the largest relaxation of a node not branched on
    optimal: bool  #: the member's ‖μ‖₁ is within ``PATH_NORM_GAP`` of ``bound``
    nodes: int  #: relaxations solved, the root's included
    #: the root relaxation's optimum (z⁺, z⁻): with both signs on an atom allowed, the largest Σ_j (z⁺_j + z⁻_j)
    root: tuple[np.ndarray, np.ndarray]


def _largest_l1(program: _VertexProgram, budget: float, node_limit: int) -> _PathNormSearch | None:
    """max ‖μ‖₁ over P_B = {Φμ = y, Σ_j w_j|μ_j| ≤ B} (``program``'s rows) by branch and bound on the atoms' signs.

    A node's relaxation drops the one-sign rule: max Σ_j (z⁺_j + z⁻_j) over the program's rows with the node's closed
    columns at zero (z⁻_j = 0 or z⁺_j = 0 on each atom it has branched on), a vertex program.  Its value bounds
    ‖μ‖₁ over the node's measures (a measure's z⁺ = max(μ, 0), z⁻ = max(−μ, 0) is feasible there), and cancelling
    its pairs, μ = z⁺ − z⁻, gives a measure of P_B (the same Φμ, no more budget): a member.  A node whose value
    exceeds the best member's ‖μ‖₁ by more than the relative ``PATH_NORM_GAP`` branches on its atom of largest pair
    min(z⁺_j, z⁻_j): one child closes z⁻_j, the other z⁺_j, and each of the node's measures lies in one of them.
    Best first, until no open node exceeds the best member by the gap, or before the relaxations solved would
    exceed ``node_limit``; the bound is the largest value of a node not branched on (a node without a pair is
    settled: its value is its member's, up to round-off).  None when P_B is empty."""
    k = program.k

    def relax(closed: tuple[int, ...]):
        mask = np.zeros(2 * k, dtype=bool)
        mask[list(closed)] = True
        found = program.largest_total(budget, mask)
        if found is None:
            return None
        plus, minus = found
        return float(plus.sum() + minus.sum()), plus, minus

    root = relax(())
    if root is None:
        return None
    member, largest, settled = np.zeros(k), -math.inf, -math.inf
    queue: list[tuple[float, int, tuple[int, ...], int]] = []  # (−value, order, closed columns, atom to branch on)
    nodes = 0

    def admit(found, closed: tuple[int, ...]):
        nonlocal member, largest, settled, nodes
        nodes += 1
        if found is None:  # an empty branch
            return
        value, plus, minus = found
        cancelled = plus - minus
        size = float(np.abs(cancelled).sum())
        if size > largest:
            member, largest = cancelled, size
        pairs = np.minimum(plus, minus)
        if pairs.max() > 0:
            heapq.heappush(queue, (-value, nodes, closed, int(np.argmax(pairs))))
        else:
            settled = max(settled, value)

    admit(root, ())
    while queue and -queue[0][0] > largest * (1.0 + PATH_NORM_GAP) and nodes + 2 <= node_limit:
        _, _, closed, atom = heapq.heappop(queue)
        for column in (k + atom, atom):  # μ_j ≥ 0, then μ_j ≤ 0
            admit(relax((*closed, column)), (*closed, column))
    bound = max(largest, settled, -queue[0][0] if queue else -math.inf)
    return _PathNormSearch(member, bound, bound <= largest * (1.0 + PATH_NORM_GAP), nodes, root[1:])


class NearFlattestSet:
    """The polytope P_B of the near-flattest measures over a dictionary, with the exact population loss on it.

    Built by :func:`near_flattest_set`.  The dictionary ``U`` is the global solver's atoms (first), its
    last columns and any ``extra_directions``, unit rows with κ(u) > 0; ``w`` = κ(U)^{1/p}, ``Phi`` = σ(X Uᵀ),
    ``loss`` the population loss as a convex quadratic F(μ) = μᵀKμ − 2bᵀμ + c in the measure μ, ``start`` the
    flattest measure.  A slack ε sets the budget B(ε) = ((1 + ε) Υ_best m^{p−1})^{1/p} (:meth:`budget_at`)."""

    def __init__(self, X, y, activation, width, model, flattest: FlattestInterpolator, extra_directions=None):
        self.X, self.y, self.activation, self.width = X, y, activation, width
        self.flattest = flattest
        extra = X.new_zeros(0, X.shape[1]) if extra_directions is None else extra_directions
        U = torch.cat([flattest.atoms.directions, flattest.columns, extra])
        U = U / torch.linalg.vector_norm(U, dim=1, keepdim=True)
        w = unit_flatness_weights(U, X, activation) ** (1.0 / activation.p)
        live = w > 0
        self.U, self.w = U[live], w[live]
        self.Phi = activation(X @ self.U.T)
        self.loss: PopulationQuadratic = population_quadratic(activation, self.U, model)
        # the flattest measure on the dictionary: its atoms are the first columns
        K = flattest.atoms.directions.shape[0]
        self.start = torch.zeros(self.U.shape[0], dtype=X.dtype, device=X.device)
        self.start[: int(live[:K].sum())] = flattest.atoms.weights[live[:K]]
        self._vertex_lp: _VertexProgram | None = None  # built at the first vertex asked for
        self._search_lp: _VertexProgram | None = None  # built at the first path-norm search

    def budget_at(self, slack: float) -> float:
        """B(ε): the largest V of a measure whose even split has Υ ≤ (1 + ε) Υ_best (eq. ``eq-splitting``)."""
        p = self.activation.p
        return ((1.0 + slack) * self.flattest.upper * self.width ** (p - 1.0)) ** (1.0 / p)

    def excess(self, mu: torch.Tensor) -> float:
        """F(μ) − F*, exact."""
        return self.loss(mu) - self.loss.bayes_risk

    def _program(self) -> _VertexProgram:
        """The HiGHS model of P_B, built at the first use."""
        if self._vertex_lp is None:
            self._vertex_lp = _VertexProgram(
                self.Phi.cpu().numpy(),
                self.w.cpu().numpy(),
                self.y.cpu().numpy(),
                seed=np.flatnonzero(self.start.cpu().numpy()),  # the flattest measure's atoms: feasible at B(ε)
                working_atoms=WORKING_ATOMS_FACTOR * (self.X.shape[0] + 1),
            )
        return self._vertex_lp

    def _search_program(self) -> _VertexProgram:
        """The HiGHS model of P_B in which :func:`_largest_l1` solves its relaxations, built at the first search: the
        whole dictionary (a branch that closes a basic column would leave a working set empty, and the whole
        dictionary would join), with ``SEARCH_OPTIONS``."""
        if self._search_lp is None:
            self._search_lp = _VertexProgram(
                self.Phi.cpu().numpy(),
                self.w.cpu().numpy(),
                self.y.cpu().numpy(),
                seed=np.arange(self.U.shape[0]),
                working_atoms=None,
                options=SEARCH_OPTIONS,
            )
        return self._search_lp

    def vertex(self, objective: torch.Tensor, budget: float) -> torch.Tensor | None:
        """argmax objectiveᵀμ over P_budget (HiGHS), or None if it is empty at this budget."""
        return self._vertex_in(self._program(), objective, budget)

    def _vertex_in(self, program: _VertexProgram, objective: torch.Tensor, budget: float) -> torch.Tensor | None:
        """:meth:`vertex` solved in ``program``: the set's working-set model or the search's."""
        mu = program.argmax(objective.cpu().numpy(), budget)
        return None if mu is None else torch.as_tensor(mu, dtype=self.X.dtype, device=self.X.device)

    def climb(self, mu: torch.Tensor, budget: float, max_steps: int, sign: float = 1.0) -> torch.Tensor:
        """Successive LPs from μ: each step goes to the vertex of P_budget that maximises (``sign`` = 1) or
        minimises (−1) the gradient's linear form, while that raises (lowers) F."""
        return self._ascend(
            mu,
            budget,
            max_steps,
            lambda m: sign * self.loss(m),
            lambda m: sign * 2.0 * (self.loss.K @ m - self.loss.b),
        )

    def _ascend(self, mu, budget: float, max_steps: int, value_of, gradient_of, program=None) -> torch.Tensor:
        """Successive LPs for a convex f: μ ← argmax over P_budget of ∇f(μ)ᵀμ (a subgradient will do), while f
        rises (by convexity the vertex never lowers f; round-off ends it); the vertices in ``program`` (None: the
        set's working-set model)."""
        value = value_of(mu)
        for _ in range(max_steps):
            moved = self._vertex_in(program or self._program(), gradient_of(mu), budget)
            if moved is None:
                break
            moved_value = value_of(moved)
            if moved_value <= value + 1e-12 * abs(value) + 1e-15:
                break
            mu, value = moved, moved_value
        return mu

    def network(self, mu: torch.Tensor) -> TwoLayerNet:
        """The measure's atoms split into ``width`` copies (eq. ``eq-splitting``)."""
        on = mu.abs() > 1e-12 * float(mu.abs().max())
        atoms = Atoms(self.U[on], mu[on])
        if atoms.directions.shape[0] > self.width:
            raise FlatbookInputError(
                f"a near-flattest measure has {atoms.directions.shape[0]} atoms, more than width = {self.width}; "
                "ask for a larger width."
            )
        kappa = unit_flatness_weights(atoms.directions, self.X, self.activation)
        counts = torch.tensor(split_into_copies(atoms.weights, kappa, self.activation.p, self.width))
        theta = torch.repeat_interleave(atoms.directions, counts.to(atoms.directions.device), dim=0)
        a = torch.repeat_interleave(atoms.weights / counts.to(atoms.weights), counts.to(atoms.weights.device))
        return TwoLayerNet(a, theta, self.activation)

    def result(self, choose, kind: str, climbs: list[float], slack: float, floor: float | None = None):
        """Solve with ``choose(budget) -> μ``, shrinking the budget while the split's Υ exceeds (1 + ε)Υ_best."""
        ceiling = (1.0 + slack) * self.flattest.upper
        budget = self.budget_at(slack)
        for _ in range(8):
            mu = choose(budget)
            net = self.network(mu)
            upsilon = min_flatness(net, self.X, self.y)
            if upsilon <= ceiling * (1.0 + 1e-9):
                break
            budget *= (ceiling / upsilon) ** (1.0 / self.activation.p)
        else:
            raise SolverError("could not keep the split's Υ within the near-flattest ceiling; report this.")
        residual = float((net(self.X) - self.y).abs().max()) / float(self.y.abs().max())
        if residual > 1e-8:
            raise SolverError(f"the near-flattest network does not interpolate (residual {residual:.1e} max|y|).")
        return NearFlattest(
            net=net,
            upsilon=upsilon,
            excess=self.excess(mu),
            flattest_upsilon=self.flattest.upper,
            flattest_excess=self.excess(self.start),
            slack=slack,
            measure_value=float(self.w @ mu.abs()),
            budget=budget,
            kind=kind,
            climbs=climbs,
            excess_floor=floor,
        )

    def worst(self, slack: float, *, starts: int = 8, max_steps: int = 50, seed: int = 0) -> NearFlattest:
        """:func:`worst_near_flattest` on this set."""
        slack = _check_slack(slack)
        if not (isinstance(starts, int) and starts >= 1 and isinstance(max_steps, int) and max_steps >= 1):
            raise FlatbookInputError("starts and max_steps must be positive ints.")
        generator = torch.Generator().manual_seed(seed)
        directions = [None] + [
            torch.randn(self.U.shape[0], generator=generator, dtype=torch.float64).to(self.X.device)
            for _ in range(starts - 1)
        ]
        climbs: list[float] = []

        def choose(budget):
            best, best_value = None, -np.inf
            climbs.clear()
            for direction in directions:
                mu0 = self.start if direction is None else self.vertex(direction, budget)
                if mu0 is None:
                    continue
                mu = self.climb(mu0, budget, max_steps)
                value = self.loss(mu)
                climbs.append(value - self.loss.bayes_risk)
                if value > best_value:
                    best, best_value = mu, value
            if best is None:
                raise SolverError("no start reached the near-flattest set; report this.")
            return best

        return self.result(choose, "worst", climbs, slack)

    def largest_path_norm(self, slack: float, *, node_limit: int = PATH_NORM_NODES) -> LargestPathNorm:
        """The near-flattest networks of largest path norm P on the dictionary (book, chapter 4,
        ``prop-ch4-path-norm`` bounds P for every member), over measures and over networks (see
        :class:`LargestPathNorm`).

        Over measures P = ‖μ‖₁ is convex, so its maximum over P_B is at a vertex; :func:`_largest_l1` finds it by
        branch and bound on the atoms' signs, whose relaxations are vertex programs.  Its member is replaced by the
        vertex that maximises the member's signs (at least its ‖μ‖₁) and climbed by successive linear programs
        μ ← argmax_{P_B} sign(μ)ᵀμ.  The bound is the search's at B(ε) itself (for p > 1 the member may come from a
        budget shrunk for the split's rounding, a subset); with ``optimal`` False (``node_limit`` reached) the
        largest lies between ``path_norm`` and ``bound``.  Over networks (p = 1) the search's root relaxation is the
        answer: z⁺_j and z⁻_j both positive are two neurons of opposite sign on u_j, whose Υ is w_j(z⁺_j + z⁻_j) and
        P the same sum over w_j."""
        slack = _check_slack(slack)
        if not (isinstance(node_limit, int) and node_limit >= 1):
            raise FlatbookInputError(f"node_limit must be a positive int, got {node_limit!r}.")
        steps = 50
        searches: list[_PathNormSearch] = []

        def path_norm(mu):
            return float(mu.abs().sum())

        def choose(budget):
            search = _largest_l1(self._search_program(), budget, node_limit)
            if search is None:  # a budget shrunk below every interpolating measure's V: the solver's own remains
                if not searches:
                    raise SolverError("the near-flattest set is empty on its own dictionary; report this.")
                return self.start
            if not searches:  # the search at B(ε); a shrunk budget's set lies inside it
                searches.append(search)
            member = torch.as_tensor(search.member, dtype=self.X.dtype, device=self.X.device)
            # the search's model, whose basis is the search's last, solves the climb's programs
            program = self._search_program()
            vertex = self._vertex_in(program, torch.sign(member), budget)
            if vertex is None:
                return member
            return max((member, self._ascend(vertex, budget, steps, path_norm, torch.sign, program)), key=path_norm)

        member = self.result(choose, "path norm", [], slack)
        found = float(member.net.effective_outer_weights().abs().sum())
        search = searches[0]  # at B(ε); for p > 1 the member may come from a shrunk budget, its P below the search's
        # a member found above the search's bound (beyond the programs' feasibility tolerances) would make it false
        if found > search.bound * (1.0 + PATH_NORM_MARGIN):
            raise SolverError(f"the bound {search.bound:.9g} on the largest path norm is below a member's {found:.9g}.")
        network = self._largest_network(search.root, slack) if self.activation.p == 1 else None
        return LargestPathNorm(
            member=member,
            path_norm=found,
            bound=search.bound,
            optimal=search.optimal and search.bound <= found * (1.0 + PATH_NORM_GAP),
            nodes=search.nodes,
            network=network,
            network_path_norm=None if network is None else float(network.effective_outer_weights().abs().sum()),
        )

    def _largest_network(self, root: tuple[np.ndarray, np.ndarray], slack: float) -> TwoLayerNet:
        """p = 1: the network of largest P with Υ ≤ (1 + ε)Υ_best on the dictionary, from the root relaxation
        (z⁺, z⁻) of :func:`_largest_l1` at B(ε) (a basic solution: at most n + 1 neurons), checked."""
        plus, minus = (torch.as_tensor(z, dtype=self.X.dtype, device=self.X.device) for z in root)
        floor = 1e-12 * float(torch.cat([plus, minus]).max())
        a = torch.cat([plus[plus > floor], -minus[minus > floor]])
        theta = torch.cat([self.U[plus > floor], self.U[minus > floor]])
        if a.shape[0] > self.width:
            raise FlatbookInputError(
                f"the network of largest path norm has {a.shape[0]} neurons, more than width = {self.width}; "
                "ask for a larger width."
            )
        net = TwoLayerNet(a, theta, self.activation)
        residual = float((net(self.X) - self.y).abs().max()) / float(self.y.abs().max())
        ceiling = (1.0 + slack) * self.flattest.upper
        if residual > 1e-8 or min_flatness(net, self.X, self.y) > ceiling * (1.0 + 1e-9):
            raise SolverError("the network of largest path norm left the near-flattest set; report this.")
        return net


@dataclass
class ExcessFloor:
    """What :func:`frank_wolfe_floor` proved and found on P_B."""

    floor: float  #: a proven lower bound on min over P_B of F − F* (up to the LP solver's tolerance)
    found: float  #: the smallest F − F* at a feasible measure of P_B the iterations reached (≥ the minimum)
    steps: int  #: linear programs solved


def frank_wolfe_floor(near: NearFlattestSet, slack: float, *, steps: int = 30, rel_gap: float = 0.02) -> ExcessFloor:
    """A proven lower bound on the smallest excess over the near-flattest polytope P_B(ε) on ``near``'s
    dictionary, and the smallest excess found there.

    Frank–Wolfe with exact line search from the flattest measure.  At every feasible μ convexity of F gives
    min_{P_B} F ≥ F(μ) + min_{v ∈ P_B} ∇F(μ)ᵀ(v − μ), one linear program, so the largest such value over the
    iterations is a floor (up to HiGHS's tolerance); the iterates are feasible (convex combinations of points of
    P_B), so their excess is attained.  Stops after ``steps`` linear programs or once found − floor is at most
    ``rel_gap``·found.  The floor holds over the dictionary: a near-flattest network on other directions is not
    covered by it."""
    slack = _check_slack(slack)
    if not (isinstance(steps, int) and steps >= 1):
        raise FlatbookInputError(f"steps must be a positive int, got {steps!r}.")
    budget = near.budget_at(slack)
    loss = near.loss
    mu = near.start.clone()
    value = loss(mu)
    floor = -np.inf
    done = 0
    while done < steps:
        done += 1
        gradient = 2.0 * (loss.K @ mu - loss.b)
        vertex = near.vertex(-gradient, budget)
        if vertex is None:  # the LP failed: keep the floor proven so far
            break
        step = vertex - mu
        # μ itself is in P_B, so the LP's minimum is at most ∇F(μ)ᵀμ: a positive slope is the LP's round-off
        slope = min(float(gradient @ step), 0.0)
        floor = max(floor, value + slope)
        curvature = float(step @ (loss.K @ step))
        gamma = 1.0 if curvature <= 0 else min(1.0, max(0.0, -slope / (2.0 * curvature)))
        moved = mu + gamma * step
        moved_value = loss(moved)
        if moved_value < value:  # exact line search never rises; round-off aside, keep value = F(mu)
            mu, value = moved, moved_value
        if value - floor <= rel_gap * abs(value - loss.bayes_risk):
            break
    return ExcessFloor(floor=floor - loss.bayes_risk, found=value - loss.bayes_risk, steps=done)


def _check_slack(slack) -> float:
    if not (isinstance(slack, (int, float)) and 0 <= slack < 10):
        raise FlatbookInputError(f"slack must be a number in [0, 10) (a relative excess over Υ*), got {slack!r}.")
    return float(slack)


def near_flattest_set(
    X,
    y,
    activation,
    width: int,
    model: MultiIndexModel,
    *,
    flattest: FlattestInterpolator | None = None,
    extra_directions=None,
    **solver_options,
) -> NearFlattestSet:
    """The near-flattest polytope over the global solver's dictionary, with the exact population loss of
    ``model`` on it (see the module).  ``flattest`` reuses a result of
    :func:`~flatbook.global_flattest.flattest_interpolator` for this width and activation (else it is computed
    with ``solver_options``).  ``extra_directions`` (k, d), e.g. random ones, widen the dictionary (normalised;
    those that activate no sample are dropped)."""
    activation = get_activation(activation)
    X, y = check_data(X, y)
    if extra_directions is not None:
        extra_directions = torch.as_tensor(extra_directions, dtype=X.dtype, device=X.device)
        if extra_directions.ndim != 2 or extra_directions.shape[1] != X.shape[1]:
            raise FlatbookInputError(
                f"extra_directions must be a (k, {X.shape[1]}) array of directions, got shape "
                f"{tuple(extra_directions.shape)}."
            )
        if not bool((torch.linalg.vector_norm(extra_directions, dim=1) > 0).all()):
            raise FlatbookInputError("extra_directions has a zero row: a direction must be non-zero.")
    if not isinstance(model, MultiIndexModel):
        raise FlatbookInputError(f"model must be a flatbook.data.MultiIndexModel (the teacher), got {model!r}.")
    if flattest is None:
        flattest = flattest_interpolator(X, y, activation, width, **solver_options)
    elif flattest.width != width or flattest.activation != activation:
        raise FlatbookInputError("flattest must be flattest_interpolator's result for this width and activation.")
    return NearFlattestSet(X, y, activation, width, model, flattest, extra_directions)


def worst_near_flattest(
    X,
    y,
    activation,
    width: int,
    model: MultiIndexModel,
    *,
    slack: float = 0.01,
    flattest: FlattestInterpolator | None = None,
    starts: int = 8,
    max_steps: int = 50,
    seed: int = 0,
    **solver_options,
) -> NearFlattest:
    """A width-``width`` interpolator with Υ ≤ (1 + ``slack``)·Υ of the flattest one found whose exact excess
    population loss under ``model`` is as large as the successive-LP climb can make it (see the module): a
    lower estimate of the worst over the near-flattest set.  ``flattest`` reuses a result of
    :func:`~flatbook.global_flattest.flattest_interpolator` (else it is computed with ``solver_options``); the
    climb starts from its measure and from ``starts`` − 1 vertices that maximise random linear forms
    (``seed``).  To climb at several slacks on one dataset, build the set once with :func:`near_flattest_set`
    and call its :meth:`~NearFlattestSet.worst`."""
    _check_slack(slack)
    near = near_flattest_set(X, y, activation, width, model, flattest=flattest, **solver_options)
    return near.worst(slack, starts=starts, max_steps=max_steps, seed=seed)


def best_near_flattest(
    X,
    y,
    activation,
    width: int,
    model: MultiIndexModel,
    *,
    slack: float = 0.01,
    flattest: FlattestInterpolator | None = None,
    max_steps: int = 50,
    **solver_options,
) -> NearFlattest:
    """The twin of :func:`worst_near_flattest` for the smallest excess: ``excess_floor`` is the minimum of the
    exact excess over every measure of the near-flattest polytope on the dictionary (a convex quadratic
    program, cvxpy/Clarabel; its minimiser need not be a width-``width`` network), and ``net`` the best vertex
    (at most n + 1 atoms) that descent by successive linear programs reaches from that minimiser and from the
    flattest measure: an upper estimate of the smallest excess of a near-flattest network."""
    import cvxpy as cp

    slack = _check_slack(slack)
    near = near_flattest_set(X, y, activation, width, model, flattest=flattest, **solver_options)
    K = near.loss.K.cpu().numpy()
    # a square root of K (positive semidefinite up to round-off) keeps the objective in DCP form
    values, vectors = np.linalg.eigh((K + K.T) / 2.0)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    b = near.loss.b.cpu().numpy()
    Phi, w, y_np = near.Phi.cpu().numpy(), near.w.cpu().numpy(), near.y.cpu().numpy()
    floors: list[float] = []
    climbs: list[float] = []

    def choose(budget):
        mu = cp.Variable(K.shape[0])
        problem = cp.Problem(
            cp.Minimize(cp.sum_squares(root.T @ mu) - 2.0 * b @ mu), [Phi @ mu == y_np, w @ cp.abs(mu) <= budget]
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "inaccurate": the status says so
            try:
                problem.solve(solver="CLARABEL")
            except cp.error.SolverError as error:
                raise SolverError(f"cvxpy/Clarabel failed on the best near-flattest program: {error}") from error
        if mu.value is None or problem.status not in ("optimal", "optimal_inaccurate"):
            raise SolverError(f"cvxpy/Clarabel returned {problem.status!r} on the best near-flattest program.")
        floors.append(float(problem.value) + near.loss.c - near.loss.bayes_risk)
        minimiser = torch.as_tensor(mu.value, dtype=near.X.dtype, device=near.X.device)
        gradient = 2.0 * (near.loss.K @ minimiser - near.loss.b)
        climbs.clear()
        best, best_value = None, np.inf
        for start in (near.vertex(-gradient, budget), near.start):
            if start is None:
                continue
            vertex = near.climb(start, budget, max_steps, sign=-1.0)
            value = near.loss(vertex)
            climbs.append(value - near.loss.bayes_risk)
            if value < best_value:
                best, best_value = vertex, value
        return best

    found = near.result(choose, "best", climbs, slack)
    found.excess_floor = min(floors[-1], found.excess)
    return found
