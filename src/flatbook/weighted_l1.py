"""The weighted-ℓ1 interpolation program with columns added and removed: the restricted master.

For columns φ_j ∈ R^n with positive weights w_j (book, chapter 2, eq. ``eq-measure-program``
restricted to finitely many directions)::

    min_μ  Σ_j w_j |μ_j|   subject to  Σ_j μ_j φ_j = y,

a linear program with dual  max_λ λᵀy  subject to |φ_jᵀλ| ≤ w_j.  Column generation adds
directions one batch at a time and drops unused ones; :class:`WeightedL1Master` keeps one
HiGHS model alive across these changes, so each re-solve starts from the previous basis
(adding columns keeps the old basis primal feasible: the primal simplex continues from it).
Columns enter the model at the next solve: a column generation whose interior-point master never
falls back to the simplex never pays for them.

Unlike :func:`~flatbook.flattest.flattest_outer_weights`, which fixes κ and p from the activation and
needs at least n columns of full rank, the master takes any positive weights and any number
of columns; while the columns cannot interpolate, it says so.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import numpy as np

from .errors import FlatbookInputError, InfeasibleInterpolationError, SolverError


@dataclass
class MasterSolution:
    """An optimal solution of the restricted master (``exact``), or an interior point's approximate one.

    An exact one is basic (a vertex: its non-zero μ_j have independent columns, so at most n of them) unless
    ``basic`` says otherwise (an interior point's support refitted, optimal but possibly on a face).
    For an approximate one (``exact=False``, an interior point stopped at a loose gap) the equalities below
    hold only to that gap, ``mu`` keeps only the iterate's n heaviest entries (its approximate support, which
    need not interpolate), and ``value`` is the full iterate's objective: neither an upper nor a lower bound
    on the master's optimum.
    """

    mu: np.ndarray  #: μ_j, one per current column
    dual: np.ndarray  #: λ (n,), |φ_jᵀλ| ≤ w_j with equality where μ_j ≠ 0
    value: float  #: Σ_j w_j |μ_j| = λᵀy
    exact: bool = True  #: an optimal solution (True) or an approximate one (False)
    basic: bool = True  #: a vertex of the feasible set (False for approximate ones and face points)
    gap: float = 0.0  #: the relative gap an approximate one was solved to (0 for an optimal one)


@contextlib.contextmanager
def _quiet_stdout():
    """HiGHS prints its banner from C++ on construction; send fd 1 to /dev/null meanwhile."""
    try:
        fd = os.dup(1)
    except OSError:  # no real stdout (some notebook kernels): nothing to silence
        yield
        return
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            os.dup2(fd, 1)
            os.close(fd)


class WeightedL1Master:
    """min Σ_j w_j |μ_j| s.t. Φ μ = y over a changing set of columns, warm-started (HiGHS simplex).

    Each column j enters the LP as the pair μ_j = μ_j⁺ − μ_j⁻, μ_j± ≥ 0, cost w_j each.
    """

    def __init__(self, y: np.ndarray, time_limit: float = 600.0):
        import highspy

        y = np.asarray(y, dtype=np.float64)
        if y.ndim != 1 or not np.isfinite(y).all():
            raise FlatbookInputError("y must be a finite vector.")
        self.n = y.shape[0]
        self.y = y
        with _quiet_stdout():
            self._highs = highspy.Highs()
        self._highs.setOptionValue("output_flag", False)
        self.time_limit = float(time_limit)
        self._inf = highspy.kHighsInf
        self._status_optimal = highspy.HighsModelStatus.kOptimal
        self._status_time_limit = highspy.HighsModelStatus.kTimeLimit
        self._highs.addRows(self.n, y, y, 0, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))
        self.weights = np.zeros(0)
        self._order = np.zeros(0, dtype=np.int64)  # LP column → our column
        self._sign = np.zeros(0)  # LP column → +1 (μ⁺) or −1 (μ⁻)
        self._pending: list[np.ndarray] = []  # blocks of the last columns, not yet in the HiGHS model

    @property
    def size(self) -> int:
        """Number of columns (directions) in the master."""
        return self.weights.shape[0]

    def add(self, columns: np.ndarray, weights: np.ndarray) -> None:
        """Add columns (n, k) with weights (k,) > 0; the basis of the last solve is kept."""
        columns = np.asarray(columns, dtype=np.float64).reshape(self.n, -1)
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if columns.shape[1] != weights.shape[0] or (weights <= 0).any() or not np.isfinite(columns).all():
            raise FlatbookInputError("need one positive weight per finite column.")
        self._pending.append(columns)
        self.weights = np.concatenate([self.weights, weights])

    @property
    def _pending_count(self) -> int:
        """Number of pending columns: the ones not in the HiGHS model, which holds two LP columns per column."""
        return self.size - self._order.shape[0] // 2

    def _flush(self) -> None:
        """Put the pending columns (always the last ones) into the HiGHS model, as pairs μ⁺, μ⁻ at its end."""
        k = self._pending_count
        if k == 0:
            return
        pending = np.hstack(self._pending)
        weights = self.weights[self.size - k :]
        both = np.hstack([pending, -pending])  # μ⁺ columns, then μ⁻ columns
        starts = np.arange(2 * k, dtype=np.int32) * self.n
        index = np.tile(np.arange(self.n, dtype=np.int32), 2 * k)
        self._highs.addCols(
            2 * k,
            np.concatenate([weights, weights]),
            np.zeros(2 * k),
            np.full(2 * k, self._inf),
            2 * k * self.n,
            starts,
            index,
            both.T.ravel(),
        )
        first = self.size - k  # keep our bookkeeping in LP order
        self._order = np.concatenate([self._order, first + np.arange(k), first + np.arange(k)])
        self._sign = np.concatenate([self._sign, np.ones(k), -np.ones(k)])
        self._pending = []

    def remove(self, keep: np.ndarray) -> None:
        """Keep only the columns where the boolean mask ``keep`` is True."""
        keep = np.asarray(keep, dtype=bool)
        first = self.size - self._pending_count  # the pending columns are the last ones: block by block
        blocks = []
        for block in self._pending:
            blocks.append(block[:, keep[first : first + block.shape[1]]])
            first += block.shape[1]
        self._pending = [block for block in blocks if block.shape[1] > 0]
        drop_lp = np.nonzero(~keep[self._order])[0].astype(np.int32)
        if drop_lp.size > 0:
            self._highs.deleteCols(drop_lp.size, drop_lp)
        renumber = np.cumsum(keep) - 1
        lp_keep = keep[self._order]
        self._order = renumber[self._order[lp_keep]]
        self._sign = self._sign[lp_keep]
        self.weights = self.weights[keep]

    def _run(self) -> None:
        """One HiGHS run limited to ``time_limit`` seconds of its own.  HiGHS compares its time limit with the
        run time accumulated over all runs of the object (ERGO-Code/HiGHS#1331, #1477), which a column
        generation of many rounds exceeds; so the limit is moved on by the time already spent."""
        self._highs.setOptionValue("time_limit", self._highs.getRunTime() + self.time_limit)
        self._highs.run()

    def solve(self) -> MasterSolution:
        """Re-optimise from the current basis; raise if the columns cannot interpolate y, or with
        :class:`~flatbook.errors.SolverError` at once when HiGHS reaches ``time_limit`` (a retry from scratch
        would too)."""
        if self.size == 0:
            raise InfeasibleInterpolationError("the master has no columns; add directions first.")
        self._flush()
        self._run()
        status = self._highs.getModelStatus()
        for retry in ("simplex", "ipm"):  # numerical trouble: from scratch, then by interior point
            if status in (self._status_optimal, self._status_time_limit):
                break
            self._highs.clearSolver()
            self._highs.setOptionValue("solver", retry)
            self._run()
            self._highs.setOptionValue("solver", "choose")
            status = self._highs.getModelStatus()
        if status == self._status_time_limit:
            raise SolverError(
                f"HiGHS reached its time limit of {self.time_limit:g} s on the restricted master ({self.size} "
                f"directions, {self.n} labels)."
            )
        if status != self._status_optimal:
            text = self._highs.modelStatusToString(status)
            if "nfeasible" in text:
                raise InfeasibleInterpolationError(
                    f"the {self.size} directions in the master cannot interpolate the {self.n} labels "
                    "(their feature matrix has rank < n); start from more or other directions."
                )
            raise SolverError(f"HiGHS stopped with status {text!r} on the restricted master.")
        solution = self._highs.getSolution()
        x = np.asarray(solution.col_value)
        mu = np.zeros(self.size)
        np.add.at(mu, self._order, self._sign * x)
        dual = np.asarray(solution.row_dual, dtype=np.float64)
        value = float(self.weights @ np.abs(mu))
        return MasterSolution(mu=mu, dual=dual, value=value)


__all__ = ["MasterSolution", "WeightedL1Master"]
