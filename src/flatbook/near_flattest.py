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

Either way the network returned is checked: it interpolates and its Υ is at most (1 + ε) Υ_best (for p > 1
the budget is shrunk and the measure re-solved while the split's rounding pushes Υ above that).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize
import torch

from .activations import get_activation
from .backend import check_data
from .data import MultiIndexModel, PopulationQuadratic, population_quadratic
from .errors import FlatbookInputError, SolverError
from .flatness import min_flatness, unit_flatness_weights
from .global_flattest import Atoms, FlattestInterpolator, flattest_interpolator, split_into_copies
from .network import TwoLayerNet

__all__ = ["NearFlattest", "best_near_flattest", "worst_near_flattest"]


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
    kind: str  #: "worst" (a lower estimate of the largest excess) or "best" (an upper estimate of the smallest)
    climbs: list[float] = field(default_factory=list)  #: the excess each start's climb or descent ended at
    #: "best" only: the minimum over every measure of P_B on the dictionary (any number of atoms), below ``excess``
    excess_floor: float | None = None


class _NearFlattestSet:
    """P_B over a dictionary, with the population loss on it (see the module)."""

    def __init__(self, X, y, activation, width, model, slack, flattest: FlattestInterpolator):
        self.X, self.y, self.activation, self.width = X, y, activation, width
        self.flattest, self.slack = flattest, slack
        U = torch.cat([flattest.atoms.directions, flattest.columns])
        U = U / torch.linalg.vector_norm(U, dim=1, keepdim=True)
        w = unit_flatness_weights(U, X, activation) ** (1.0 / activation.p)
        live = w > 0
        self.U, self.w = U[live], w[live]
        self.Phi = activation(X @ self.U.T)
        self.loss: PopulationQuadratic = population_quadratic(activation, self.U, model)
        p = activation.p
        self.budget = ((1.0 + slack) * flattest.upper * width ** (p - 1.0)) ** (1.0 / p)
        # the flattest measure on the dictionary: its atoms are the first columns
        K = flattest.atoms.directions.shape[0]
        self.start = torch.zeros(self.U.shape[0], dtype=X.dtype, device=X.device)
        self.start[:K] = flattest.atoms.weights[live[:K]]

    def vertex(self, objective: torch.Tensor, budget: float) -> torch.Tensor | None:
        """argmax objectiveᵀμ over P_budget (HiGHS), or None if it is empty at this budget."""
        k = self.U.shape[0]
        c = objective.cpu().numpy()
        Phi = self.Phi.cpu().numpy()
        w = self.w.cpu().numpy()
        result = scipy.optimize.linprog(
            np.concatenate([-c, c]),
            A_ub=np.concatenate([w, w])[None, :],
            b_ub=[budget],
            A_eq=np.hstack([Phi, -Phi]),
            b_eq=self.y.cpu().numpy(),
            bounds=(0, None),
            method="highs",
        )
        if result.status != 0:
            return None
        z = torch.as_tensor(result.x, dtype=self.X.dtype, device=self.X.device)
        return z[:k] - z[k:]

    def climb(self, mu: torch.Tensor, budget: float, max_steps: int, sign: float = 1.0) -> torch.Tensor:
        """Successive LPs from μ: each step goes to the vertex of P_budget that maximises (``sign`` = 1) or
        minimises (−1) the gradient's linear form, while that raises (lowers) F."""
        value = sign * self.loss(mu)
        for _ in range(max_steps):
            gradient = 2.0 * (self.loss.K @ mu - self.loss.b)
            moved = self.vertex(sign * gradient, budget)
            if moved is None:
                break
            moved_value = sign * self.loss(moved)
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

    def result(self, choose, kind: str, climbs: list[float], floor: float | None = None) -> NearFlattest:
        """Solve with ``choose(budget) -> μ``, shrinking the budget while the split's Υ exceeds (1 + ε)Υ_best."""
        ceiling = (1.0 + self.slack) * self.flattest.upper
        budget = self.budget
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
        flattest_excess = self.loss(self.start) - self.loss.bayes_risk
        return NearFlattest(
            net=net,
            upsilon=upsilon,
            excess=self.loss(mu) - self.loss.bayes_risk,
            flattest_upsilon=self.flattest.upper,
            flattest_excess=flattest_excess,
            slack=self.slack,
            measure_value=float(self.w @ mu.abs()),
            budget=budget,
            kind=kind,
            climbs=climbs,
            excess_floor=floor,
        )


def _near_flattest_set(X, y, activation, width, model, slack, flattest, solver_options) -> _NearFlattestSet:
    activation = get_activation(activation)
    X, y = check_data(X, y)
    if not isinstance(model, MultiIndexModel):
        raise FlatbookInputError(f"model must be a flatbook.data.MultiIndexModel (the teacher), got {model!r}.")
    if not (isinstance(slack, (int, float)) and 0 <= slack < 10):
        raise FlatbookInputError(f"slack must be a number in [0, 10) (a relative excess over Υ*), got {slack!r}.")
    if flattest is None:
        flattest = flattest_interpolator(X, y, activation, width, **solver_options)
    elif flattest.width != width or flattest.activation != activation:
        raise FlatbookInputError("flattest must be flattest_interpolator's result for this width and activation.")
    return _NearFlattestSet(X, y, activation, width, model, float(slack), flattest)


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
    :func:`~flatbook.flattest_interpolator` (else it is computed with ``solver_options``); the climb starts
    from its measure and from ``starts`` − 1 vertices that maximise random linear forms (``seed``)."""
    near = _near_flattest_set(X, y, activation, width, model, slack, flattest, solver_options)
    if not (isinstance(starts, int) and starts >= 1 and isinstance(max_steps, int) and max_steps >= 1):
        raise FlatbookInputError("starts and max_steps must be positive ints.")
    generator = torch.Generator().manual_seed(seed)
    directions = [None] + [
        torch.randn(near.U.shape[0], generator=generator, dtype=torch.float64).to(near.X.device)
        for _ in range(starts - 1)
    ]
    climbs: list[float] = []

    def choose(budget):
        best, best_value = None, -np.inf
        climbs.clear()
        for direction in directions:
            mu0 = near.start if direction is None else near.vertex(direction, budget)
            if mu0 is None:
                continue
            mu = near.climb(mu0, budget, max_steps)
            value = near.loss(mu)
            climbs.append(value - near.loss.bayes_risk)
            if value > best_value:
                best, best_value = mu, value
        if best is None:
            raise SolverError("no start reached the near-flattest set; report this.")
        return best

    return near.result(choose, "worst", climbs)


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

    near = _near_flattest_set(X, y, activation, width, model, slack, flattest, solver_options)
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
            problem.solve(solver="CLARABEL")
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

    found = near.result(choose, "best", climbs)
    found.excess_floor = min(floors[-1], found.excess)
    return found
