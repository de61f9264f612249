"""The near-flattest set against an exact reference: on a small dictionary every vertex of the polytope is
enumerated (its basic feasible solutions), and the convex population loss is maximised and minimised there."""

import dataclasses
import itertools
import math

import highspy
import numpy as np
import pytest
import scipy.optimize
import torch

from flatbook import flattest_interpolator, get_activation, near_flattest
from flatbook.data import population_loss, population_quadratic, single_index
from flatbook.errors import FlatbookInputError, SolverError
from flatbook.flatness import min_flatness, unit_flatness_weights
from flatbook.near_flattest import (
    PATH_NORM_GAP,
    PATH_NORM_MARGIN,
    VERTEX_PROGRAM_OPTIONS,
    _largest_l1,
    _VertexProgram,
    best_near_flattest,
    frank_wolfe_floor,
    near_flattest_set,
    worst_near_flattest,
)
from flatbook.network import TwoLayerNet
from flatbook.relu_cells import INSIDE_KAPPA_TOL, kappa_infimum


def coarse_grid():
    """Ten directions of the circle: a dictionary small enough to enumerate its polytope's vertices."""
    angles = torch.linspace(0, 2 * math.pi, 11, dtype=torch.float64)[:-1] + 0.1
    return torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)


def small_instance(name="relu", slack=0.05):
    teacher = single_index(2, link=name, noise_std=0.3, seed=4)
    X, y = teacher.sample(3, seed=5)
    flattest = flattest_interpolator(X, y, name, 40)
    return teacher, X, y, dataclasses.replace(flattest, columns=coarse_grid())


def vertices(Phi, w, y, budget, split=False):
    """Every basic feasible solution μ of {Φμ = y, Σ w|μ| ≤ budget} (μ = z⁺ − z⁻, a slack on the budget); with
    ``split`` the pairs (z⁺, z⁻) themselves."""
    n, k = Phi.shape
    A = np.vstack([np.hstack([Phi, -Phi, np.zeros((n, 1))]), np.concatenate([w, w, [1.0]])[None, :]])
    b = np.concatenate([y, [budget]])
    found = []
    for basis in itertools.combinations(range(2 * k + 1), n + 1):
        B = A[:, basis]
        if np.linalg.cond(B) > 1e10:  # singular: not a basis
            continue
        z_basis = np.linalg.solve(B, b)
        if (z_basis < -1e-10).any():
            continue
        z = np.zeros(2 * k + 1)
        z[list(basis)] = z_basis
        found.append((z[:k], z[k : 2 * k]) if split else z[:k] - z[k : 2 * k])
    return found


@pytest.mark.parametrize("name", ["relu", "quadratic"])
def test_worst_and_best_match_the_enumerated_vertices(name):
    teacher, X, y, flattest = small_instance(name)
    worst = worst_near_flattest(X, y, name, 40, teacher, slack=0.05, flattest=flattest)
    best = best_near_flattest(X, y, name, 40, teacher, slack=0.05, flattest=flattest)
    U = torch.cat([flattest.atoms.directions, flattest.columns])
    U = U / torch.linalg.vector_norm(U, dim=1, keepdim=True)
    w = unit_flatness_weights(U, X, flattest.activation) ** (1 / flattest.activation.p)
    Phi = flattest.activation(X @ U.T)
    loss = population_quadratic(name, U, teacher)
    for found in (worst, best):
        excesses = [
            loss(torch.as_tensor(mu)) - teacher.bayes_risk
            for mu in vertices(Phi.numpy(), w.numpy(), y.numpy(), found.budget)
        ]
        assert excesses
        if found.kind == "worst":
            assert found.excess <= max(excesses) + 1e-9
            assert found.excess == pytest.approx(max(excesses), rel=1e-7)  # 8 starts reach it on this instance
        else:
            assert found.excess_floor <= min(excesses) + 1e-9 and found.excess >= min(excesses) - 1e-9
        # the network is an exact interpolator of the set, its excess exact
        assert found.upsilon <= (1 + found.slack) * flattest.upper * (1 + 1e-9)
        torch.testing.assert_close(found.net(X), y, rtol=0, atol=1e-8)
        assert population_loss(found.net, teacher).excess == pytest.approx(found.excess, rel=1e-9, abs=1e-12)
    assert best.excess_floor <= best.excess <= worst.excess
    assert best.excess <= worst.flattest_excess + 1e-12 <= worst.excess + 2e-12


@pytest.mark.parametrize("name", ["relu", "quadratic"])
def test_the_largest_path_norm_is_the_enumerated_vertices_largest(name):
    """Over measures, max ‖μ‖₁ over P_B(ε) is attained at a vertex: the search's bound lies between the largest ‖μ‖₁
    over every enumerated vertex (up to its feasibility tolerance) and that times 1 + its gap, and for p = 1 so does the
    member found; for p = 4/3 the member may come from a budget shrunk for the split's rounding, so it lies at most
    at the bound.  Over networks (p = 1) the largest Σ(z⁺ + z⁻) over every enumerated basic solution of the split
    program is the network's path norm: two neurons of opposite sign on one direction are members too."""
    teacher, X, y, flattest = small_instance(name)
    near = near_flattest_set(X, y, name, 40, teacher, flattest=flattest)
    Phi, w = near.Phi.numpy(), near.w.numpy()
    nodes = []
    for slack in (0.0, 0.05, 0.5, 2.0):
        found = near.largest_path_norm(slack)
        nodes.append(found.nodes)
        budget = near.budget_at(slack)
        largest = max(float(np.abs(mu).sum()) for mu in vertices(Phi, w, y.numpy(), budget))
        assert largest * (1 - PATH_NORM_MARGIN) <= found.bound <= largest * (1 + PATH_NORM_GAP)
        assert found.path_norm <= found.bound * (1 + PATH_NORM_MARGIN)
        member = found.member
        assert member.kind == "path norm" and member.upsilon <= (1 + slack) * flattest.upper * (1 + 1e-9)
        torch.testing.assert_close(member.net(X), y, rtol=0, atol=1e-8)
        assert float(member.net.effective_outer_weights().abs().sum()) == pytest.approx(found.path_norm, rel=1e-12)
        assert population_loss(member.net, teacher).excess == pytest.approx(member.excess, rel=1e-9, abs=1e-12)
        if name != "relu":
            assert found.network is None and found.network_path_norm is None
            continue
        assert found.optimal and found.path_norm == pytest.approx(largest, rel=1e-9)
        networks = max(float(plus.sum() + minus.sum()) for plus, minus in vertices(Phi, w, y.numpy(), budget, True))
        assert found.network_path_norm == pytest.approx(networks, rel=1e-9)
        assert found.network_path_norm >= found.path_norm * (1 - PATH_NORM_MARGIN)
        net = found.network
        assert net.width <= 40 and min_flatness(net, X, y) <= (1 + slack) * flattest.upper * (1 + 1e-9)
        torch.testing.assert_close(net(X), y, rtol=0, atol=1e-8)
        assert float(net.effective_outer_weights().abs().sum()) == pytest.approx(found.network_path_norm, rel=1e-12)
    assert max(nodes) > 1, "no slack needed a branch: the search was never more than its root here"


def test_with_the_least_kappa_direction_the_networks_beat_the_closed_form_member_and_stay_under_the_bound():
    """With the direction where κ is least (κ_inf, exact: :func:`flatbook.relu_cells.kappa_infimum`) in the
    dictionary, the networks' largest path norm is at least that of a member built by hand: the solver's network
    plus a cancelling pair on that direction that spends the rest of the budget, P(found) + (B − Υ(found))/κ_inf.
    And no network with Υ ≤ B, on any direction, has P above B/κ_inf (Υ = Σ κ(u_j)|ã_j| ≥ κ_inf P)."""
    teacher = single_index(2, link="relu", noise_std=0.3, seed=4)
    X, y = teacher.sample(6, seed=5)
    flattest = dataclasses.replace(flattest_interpolator(X, y, "relu", 40), columns=coarse_grid())
    infimum = kappa_infimum(X, "relu")
    assert infimum.value > 0, "the samples must not lie in a half-plane (κ_inf = 0): choose an instance that does not"
    near = near_flattest_set(X, y, "relu", 40, teacher, flattest=flattest, extra_directions=infimum.inside[None])
    # κ at the nudged direction: κ_inf up to the nudge's first-order change (1e-9 below: round-off)
    assert infimum.value * (1 - 1e-9) <= float(near.w.min()) <= infimum.value * (1 + INSIDE_KAPPA_TOL)
    without = near_flattest_set(X, y, "relu", 40, teacher, flattest=flattest)
    for slack in (0.05, 0.5):
        budget = near.budget_at(slack)
        t = (budget - flattest.upper) / (2 * infimum.value)  # each neuron of the pair carries |ã| = t
        u = infimum.inside[None]
        by_hand = TwoLayerNet(
            torch.cat([flattest.net.a, torch.tensor([t, -t], dtype=torch.float64)]),
            torch.cat([flattest.net.theta, u, u]),
            "relu",
        )
        torch.testing.assert_close(by_hand(X), y, rtol=0, atol=1e-8)
        assert min_flatness(by_hand, X, y) == pytest.approx(budget, rel=INSIDE_KAPPA_TOL)
        found = near.largest_path_norm(slack)
        hand_path_norm = float(by_hand.effective_outer_weights().abs().sum())
        assert found.network_path_norm >= hand_path_norm * (1 - INSIDE_KAPPA_TOL) * (1 - PATH_NORM_MARGIN)
        assert found.network_path_norm <= budget / infimum.value * (1 + PATH_NORM_MARGIN)
    # what the test can see: at slack 0.5 the dictionary without that direction falls short of the hand-built member
    assert without.largest_path_norm(0.5).network_path_norm < hand_path_norm * (1 - PATH_NORM_MARGIN)


def test_a_path_norm_program_stopped_by_its_node_limit_still_brackets_the_largest():
    """On a dictionary too large to enumerate (d = 3, n = 16, 191 atoms) a search stopped by its node limit, at the
    root relaxation or after branching with nodes left open, reports a member and a bound that still bracket the
    optimum the full search proves, within the limit; the successive-LP climb from the flattest measure alone is
    never above that optimum."""
    teacher = single_index(3, link="relu", seed=5)
    X, y = teacher.sample(16, seed=1005)
    near = near_flattest_set(X, y, "relu", 32, teacher, rounds=10)
    full = near.largest_path_norm(0.3)
    stopped = near.largest_path_norm(0.3, node_limit=1)
    assert full.optimal and full.nodes > 9, "this instance must need more than 9 relaxations: choose one that does"
    assert not stopped.optimal and stopped.nodes == 1
    margin = 1 + PATH_NORM_MARGIN
    assert stopped.path_norm <= full.bound * margin and stopped.bound * margin >= full.path_norm
    # stopped after branching, with nodes left open: within the limit, the bound still above the proven optimum
    for limit, solved in ((2, 1), (3, 3), (9, 9)):
        search = _largest_l1(near._search_program(), near.budget_at(0.3), limit)
        assert search.nodes == solved and not search.optimal
        assert search.bound * margin >= full.path_norm and float(np.abs(search.member).sum()) <= full.bound * margin
    climbed = near._ascend(near.start, near.budget_at(0.3), 50, lambda m: float(m.abs().sum()), torch.sign)
    assert float(climbed.abs().sum()) <= full.path_norm * (1 + 1e-9)
    assert float(near.start.abs().sum()) <= float(climbed.abs().sum()) * (1 + 1e-12)
    with pytest.raises(FlatbookInputError, match="node_limit"):
        near.largest_path_norm(0.3, node_limit=0)
    with pytest.raises(FlatbookInputError, match="slack"):
        near.largest_path_norm(-1.0)


def test_successive_vertices_of_one_model_match_cold_solves_and_the_enumeration():
    """The vertex program keeps its basis between solves; objectives and budgets changed in any order
    (an empty budget between two feasible ones included) give the enumeration's optimum each time."""
    teacher, X, y, flattest = small_instance("relu")
    near = near_flattest_set(X, y, "relu", 40, teacher, flattest=flattest)
    Phi, w = near.Phi.numpy(), near.w.numpy()
    generator = torch.Generator().manual_seed(0)
    flattest_value = float(near.w @ near.start.abs())  # V of the flattest measure
    solved = []
    for budget in (1.2 * flattest_value, 0.5 * flattest_value, 1.05 * flattest_value, 3.0 * flattest_value):
        objective = torch.randn(near.U.shape[0], generator=generator, dtype=torch.float64)
        found = near.vertex(objective, budget)
        corners = vertices(Phi, w, y.numpy(), budget)
        solved.append(bool(corners))
        if not corners:
            assert found is None
            continue
        assert found is not None
        assert float(objective @ found) == pytest.approx(max(float(objective.numpy() @ mu) for mu in corners), rel=1e-9)
        assert float(near.w @ found.abs()) <= budget * (1 + 1e-9)
        torch.testing.assert_close(near.Phi @ found, y, rtol=0, atol=1e-9)
    assert solved == [True, False, True, True]  # half the flattest V is below every interpolating measure


def linprog_optimum(costs, Phi, w, y, budget, closed=None):
    """max costsᵀz over {[Φ, −Φ] z = y, [w, w]ᵀz ≤ budget, z ≥ 0, z = 0 where ``closed``}, one cold scipy solve:
    its value, or None."""
    bounds = [(0, 0 if closed is not None and closed[i] else None) for i in range(costs.size)]
    found = scipy.optimize.linprog(
        -costs, A_ub=np.concatenate([w, w])[None, :], b_ub=[budget], A_eq=np.hstack([Phi, -Phi]), b_eq=y,
        bounds=bounds, method="highs",
    )  # fmt: skip
    return None if found.status != 0 else -found.fun


def least_budget(Phi, w, y):
    """min Σ_j w_j|μ_j| over the measures with Φμ = y, one cold scipy solve: the smallest budget of a non-empty P_B."""
    return scipy.optimize.linprog(
        np.concatenate([w, w]), A_eq=np.hstack([Phi, -Phi]), b_eq=y, bounds=(0, None), method="highs"
    ).fun


def relu_dictionary(generator):
    """A ReLU dictionary of 400 random atoms on 10 points in R³: (Φ, w, y)."""
    X = torch.randn(10, 3, generator=generator, dtype=torch.float64)
    y = torch.randn(10, generator=generator, dtype=torch.float64)
    U = torch.randn(400, 3, generator=generator, dtype=torch.float64)
    return torch.relu(X @ U.T).numpy(), unit_flatness_weights(U, X, get_activation("relu")).numpy(), y


def test_the_restricted_vertex_program_is_optimal_over_the_whole_dictionary():
    """Column generation over a working set of atoms (seeded with one atom, which cannot interpolate; cut back to
    its basis above 2(n + 1) atoms) gives the optimum of the whole program at every objective and budget, an
    empty budget included, and never holds the whole dictionary once it has been cut."""
    generator = torch.Generator().manual_seed(3)
    Phi, w, y = relu_dictionary(generator)
    n, k = Phi.shape
    program = _VertexProgram(Phi, w, y.numpy(), seed=np.array([0]), working_atoms=2 * (n + 1))
    feasible = linprog_optimum(np.zeros(2 * k), Phi, w, y.numpy(), 1e6)
    assert feasible == 0.0  # P_B is non-empty at a large budget
    # the smallest budget of an interpolating measure, so that the budgets below bracket it
    least = least_budget(Phi, w, y.numpy())
    sizes, empty = [], 0
    for budget in (1.5 * least, 1.1 * least, 0.9 * least, 3.0 * least, 1.2 * least):
        for _ in range(3):
            c = torch.randn(k, generator=generator, dtype=torch.float64).numpy()
            expected = linprog_optimum(np.concatenate([c, -c]), Phi, w, y.numpy(), budget)
            found = program.argmax(c, budget)
            sizes.append(program.atoms.size)
            if expected is None:
                assert found is None
                empty += 1
                continue
            assert c @ found == pytest.approx(expected, rel=1e-8)
            assert np.abs(Phi @ found - y.numpy()).max() <= 1e-8
            assert w @ np.abs(found) <= budget * (1 + 1e-9)
        total = program.largest_total(budget)
        expected = linprog_optimum(np.ones(2 * k), Phi, w, y.numpy(), budget)
        assert (total is None) == (expected is None)
        if total is not None:
            assert float(total[0].sum() + total[1].sum()) == pytest.approx(expected, rel=1e-8)
    assert empty == 3  # the budget below the least one, three times
    cut = sizes.index(k) if k in sizes else None  # the infeasible seed took the whole dictionary first
    assert cut is not None and min(sizes[cut + 1 :]) < k


@pytest.mark.parametrize("working_atoms", [2 * (10 + 1), None])
def test_closed_columns_stay_at_zero_and_the_optimum_is_the_cold_solves(working_atoms):
    """The branches of the path-norm search: closing columns (z⁺_j or z⁻_j fixed at 0), reopening them and closing
    others, in one kept model with and without a working set, gives each time the optimum of a cold solve with
    those columns' bounds at zero, and the closed columns are zero in the solution."""
    generator = torch.Generator().manual_seed(8)
    Phi, w, y = relu_dictionary(generator)
    n, k = Phi.shape
    least = least_budget(Phi, w, y.numpy())
    budget = 1.3 * least
    program = _VertexProgram(Phi, w, y.numpy(), seed=np.arange(n + 1), working_atoms=working_atoms)
    open_total = program.largest_total(budget)
    assert open_total is not None
    plus, minus = open_total
    values = []
    for trial in range(4):
        closed = np.zeros(2 * k, dtype=bool)
        # the columns the last optimum uses (a branch closes one of them) and random others
        closed[np.flatnonzero(np.concatenate([plus, minus]) > 0)[trial::4]] = True
        closed[torch.randint(2 * k, (40,), generator=generator).numpy()] = True
        expected = linprog_optimum(np.ones(2 * k), Phi, w, y.numpy(), budget, closed)
        found = program.largest_total(budget, closed)
        assert (found is None) == (expected is None)
        if found is None:
            continue
        z = np.concatenate(found)
        assert (z[closed] == 0).all()
        assert z.sum() == pytest.approx(expected, rel=1e-8)
        assert np.abs(Phi @ (found[0] - found[1]) - y.numpy()).max() <= 1e-8
        values.append(z.sum())
    # feasible branches were compared, and closing columns the optimum used cost something
    assert len(values) >= 2 and min(values) < float(plus.sum() + minus.sum()) * (1 - 1e-6)
    reopened = program.largest_total(budget)
    assert reopened is not None
    assert float(reopened[0].sum() + reopened[1].sum()) == pytest.approx(float(plus.sum() + minus.sum()), rel=1e-9)


class WrappedHighs:
    """A HiGHS instance behind a wrapper: every method not overridden is the instance's own."""

    def __init__(self, highs):
        self.highs = highs

    def __getattr__(self, name):
        return getattr(self.highs, name)


class StopsWithoutVerdict(WrappedHighs):
    """HiGHS, except that every solve reports kUnknown (no verdict) whatever it found."""

    def getModelStatus(self):
        return highspy.HighsModelStatus.kUnknown


class UndecidedWhileRestricted(WrappedHighs):
    """HiGHS, except that it cannot decide (kUnknown) a program on fewer than ``columns`` columns."""

    def __init__(self, highs, columns):
        super().__init__(highs)
        self.columns = columns

    def getModelStatus(self):
        if self.highs.getLp().num_col_ < self.columns:
            return highspy.HighsModelStatus.kUnknown
        return self.highs.getModelStatus()


def test_a_restricted_program_that_highs_cannot_decide_gives_way_to_the_whole_dictionary(monkeypatch):
    """A working set that HiGHS cannot decide (here: every instance reports kUnknown on it) is enlarged to the
    whole dictionary, whose optimum is the program's, rather than raising or passing for empty."""
    Phi, w, y = relu_dictionary(torch.Generator().manual_seed(6))
    n, k = Phi.shape
    least = least_budget(Phi, w, y.numpy())
    solver = _VertexProgram._new_solver
    monkeypatch.setattr(
        _VertexProgram, "_new_solver", staticmethod(lambda **o: UndecidedWhileRestricted(solver(**o), 2 * k))
    )
    program = _VertexProgram(Phi, w, y.numpy(), seed=np.arange(n + 1), working_atoms=None)
    c = np.random.default_rng(1).standard_normal(k)
    found = program.argmax(c, 1.5 * least)
    assert program.atoms.size == k
    expected = linprog_optimum(np.concatenate([c, -c]), Phi, w, y.numpy(), 1.5 * least)
    assert found is not None and c @ found == pytest.approx(expected, rel=1e-8)


def test_a_vertex_program_stopped_without_a_verdict_is_solved_again_not_called_empty(monkeypatch):
    """A solve that ends without a verdict is solved from scratch by a new HiGHS instance and gives the whole
    program's optimum; one that every instance fails raises, naming HiGHS's statuses, instead of passing for an
    empty set."""
    Phi, w, y = relu_dictionary(torch.Generator().manual_seed(5))
    n, k = Phi.shape
    least = least_budget(Phi, w, y.numpy())
    c = np.random.default_rng(0).standard_normal(k)
    expected = linprog_optimum(np.concatenate([c, -c]), Phi, w, y.numpy(), 1.5 * least)
    program = _VertexProgram(Phi, w, y.numpy(), seed=np.arange(k), working_atoms=None)
    program.highs = StopsWithoutVerdict(program.highs)
    found = program.argmax(c, 1.5 * least)
    assert not isinstance(program.highs, StopsWithoutVerdict)  # a new instance solved it
    assert found is not None and c @ found == pytest.approx(expected, rel=1e-8)
    # the next solve starts from the new instance's basis, with the program's own options
    assert program.highs.getOptionValue("simplex_strategy")[1] == VERTEX_PROGRAM_OPTIONS["simplex_strategy"]
    assert c @ program.argmax(c, 2.0 * least) == pytest.approx(
        linprog_optimum(np.concatenate([c, -c]), Phi, w, y.numpy(), 2.0 * least), rel=1e-8
    )
    # closed columns survive the new instance: the optimum of a cold solve with their bounds at zero, and zero there
    closed = np.zeros(2 * k, dtype=bool)
    closed[::3] = True
    program.highs = StopsWithoutVerdict(program.highs)
    total = program.largest_total(1.5 * least, closed)
    assert not isinstance(program.highs, StopsWithoutVerdict) and total is not None
    z = np.concatenate(total)
    assert (z[closed] == 0).all()
    assert z.sum() == pytest.approx(linprog_optimum(np.ones(2 * k), Phi, w, y.numpy(), 1.5 * least, closed), rel=1e-8)
    # no iteration allowed: every limited attempt stops at the limit, and the last restart, which has none, solves it
    monkeypatch.setattr(near_flattest, "ITERATION_LIMIT_FACTOR", 0)
    options = {"presolve": "off"}
    degenerate = _VertexProgram(Phi, w, y.numpy(), seed=np.arange(k), working_atoms=None, options=options)
    assert c @ degenerate.argmax(c, 1.5 * least) == pytest.approx(expected, rel=1e-8)
    assert degenerate.highs.getOptionValue("simplex_strategy")[1] == VERTEX_PROGRAM_OPTIONS["simplex_strategy"]
    monkeypatch.setattr(near_flattest, "RESTART_OPTIONS", near_flattest.RESTART_OPTIONS[:2])
    failing = _VertexProgram(Phi, w, y.numpy(), seed=np.arange(k), working_atoms=None, options=options)
    with pytest.raises(SolverError, match="whole dictionary with status Iteration limit reached, and again"):
        failing.argmax(c, 1.5 * least)


class DualSimplexErrs(WrappedHighs):
    """HiGHS, except that dual simplex (simplex_strategy 1) ends every solve at once with an error (kNotset), as
    HiGHS did on a path-norm relaxation of chapter 4's paper scale that primal simplex solves."""

    def _dual(self):
        return self.highs.getOptionValue("simplex_strategy")[1] == 1

    def run(self):
        return highspy.HighsStatus.kError if self._dual() else self.highs.run()

    def getModelStatus(self):
        return highspy.HighsModelStatus.kNotset if self._dual() else self.highs.getModelStatus()


def test_a_program_that_dual_simplex_cannot_start_is_solved_by_primal_simplex(monkeypatch):
    """A program whose own options are dual simplex, on instances where dual simplex errs at once: the kept
    instance and the two dual-simplex restarts fail, the primal-simplex restart gives the program's optimum, and
    the next solve runs with the program's own options again."""
    Phi, w, y = relu_dictionary(torch.Generator().manual_seed(5))
    n, k = Phi.shape
    least = least_budget(Phi, w, y.numpy())
    solver = _VertexProgram._new_solver
    monkeypatch.setattr(_VertexProgram, "_new_solver", staticmethod(lambda **o: DualSimplexErrs(solver(**o))))
    program = _VertexProgram(Phi, w, y.numpy(), seed=np.arange(k), working_atoms=None, options={"simplex_strategy": 1})
    c = np.random.default_rng(3).standard_normal(k)
    found = program.argmax(c, 1.5 * least)
    assert found is not None and c @ found == pytest.approx(
        linprog_optimum(np.concatenate([c, -c]), Phi, w, y.numpy(), 1.5 * least), rel=1e-8
    )
    assert program.highs.getOptionValue("simplex_strategy")[1] == 1
    # with primal simplex failing too, it raises and names every attempt's status
    monkeypatch.setattr(near_flattest, "RESTART_OPTIONS", near_flattest.RESTART_OPTIONS[:2])
    failing = _VertexProgram(Phi, w, y.numpy(), seed=np.arange(k), working_atoms=None, options={"simplex_strategy": 1})
    with pytest.raises(SolverError, match=r"status Not Set, and again .* \(Not Set, Not Set\)"):
        failing.argmax(c, 1.5 * least)


class Recorded(WrappedHighs):
    """HiGHS, recording every option set and solve in ``log`` (shared by the instances of one program), and
    reporting kUnknown on the first ``failing`` solves of the program (by any instance)."""

    def __init__(self, highs, log, failing):
        super().__init__(highs)
        self.log, self.failing = log, failing

    def setOptionValue(self, name, value):
        self.log.append(("set", name, value))
        return self.highs.setOptionValue(name, value)

    def run(self):
        self.log.append(("run",))
        return self.highs.run()

    def getModelStatus(self):
        solves = sum(entry == ("run",) for entry in self.log)
        return highspy.HighsModelStatus.kUnknown if solves <= self.failing else self.highs.getModelStatus()


@pytest.mark.parametrize("failing", [0, 1, 2])
def test_a_program_that_an_earlier_attempt_solves_never_reaches_the_last_restart(monkeypatch, failing):
    """The ground on which points of code without the last restart are resumed as this code's: a program that the
    kept instance or one of the earlier restarts solves makes the same HiGHS calls and gives the same vertex
    whether or not the last restart exists."""
    Phi, w, y = relu_dictionary(torch.Generator().manual_seed(5))
    n, k = Phi.shape
    least = least_budget(Phi, w, y.numpy())
    c = np.random.default_rng(4).standard_normal(k)
    solver = _VertexProgram._new_solver

    def solve(restarts):
        log = []
        monkeypatch.setattr(near_flattest, "RESTART_OPTIONS", restarts)
        monkeypatch.setattr(
            _VertexProgram, "_new_solver", staticmethod(lambda **o: Recorded(solver(**o), log, failing))
        )
        program = _VertexProgram(Phi, w, y.numpy(), seed=np.arange(k), working_atoms=None)
        return program.argmax(c, 1.5 * least), log

    full = near_flattest.RESTART_OPTIONS
    with_last, log_with_last = solve(full)
    without_last, log_without_last = solve(full[:-1])
    assert log_with_last == log_without_last and sum(entry == ("run",) for entry in log_with_last) == failing + 1
    assert with_last is not None and np.array_equal(with_last, without_last)


class Cycles(WrappedHighs):
    """HiGHS, except that its simplex stops after one iteration whatever limit it is set: a solve that would cycle
    without end on the kept instance.  ``statuses`` records how each of its solves ended."""

    def __init__(self, highs):
        super().__init__(highs)
        self.statuses: list[highspy.HighsModelStatus] = []

    def setOptionValue(self, name, value):
        return self.highs.setOptionValue(name, 1 if name == "simplex_iteration_limit" else value)

    def run(self):
        status = self.highs.run()
        self.statuses.append(self.highs.getModelStatus())
        return status


@pytest.mark.parametrize("working_atoms", [None, 1])
def test_a_solve_that_cycles_on_the_kept_instance_stops_at_the_iteration_limit_and_is_solved_anew(working_atoms):
    """A solve on the kept instance is limited to ITERATION_LIMIT_FACTOR simplex iterations per row and column;
    one that reaches the limit (here: an instance that stops after one iteration) is handed to a new instance,
    whose optimum is the program's, over the whole dictionary or a working set (which the whole dictionary joins
    first)."""
    Phi, w, y = relu_dictionary(torch.Generator().manual_seed(5))
    n, k = Phi.shape
    least = least_budget(Phi, w, y.numpy())
    rng = np.random.default_rng(2)
    seed = np.arange(k) if working_atoms is None else np.arange(n + 1)
    program = _VertexProgram(Phi, w, y.numpy(), seed=seed, working_atoms=working_atoms)
    program.argmax(rng.standard_normal(k), 1.5 * least)
    rows_and_columns = program.highs.getNumRow() + program.highs.getNumCol()
    limit = program.highs.getOptionValue("simplex_iteration_limit")[1]
    assert limit == near_flattest.ITERATION_LIMIT_FACTOR * rows_and_columns
    cycling = Cycles(program.highs)
    program.highs = cycling
    c = rng.standard_normal(k)
    found = program.argmax(c, 1.5 * least)
    assert highspy.HighsModelStatus.kIterationLimit in cycling.statuses
    assert program.highs is not cycling  # a new instance solved it
    expected = linprog_optimum(np.concatenate([c, -c]), Phi, w, y.numpy(), 1.5 * least)
    assert found is not None and c @ found == pytest.approx(expected, rel=1e-8)


def test_the_range_widens_with_the_slack():
    teacher, X, y, flattest = small_instance()
    ranges = []
    for slack in (0.0, 0.01, 0.1):
        worst = worst_near_flattest(X, y, "relu", 40, teacher, slack=slack, flattest=flattest)
        best = best_near_flattest(X, y, "relu", 40, teacher, slack=slack, flattest=flattest)
        ranges.append((best.excess_floor, worst.excess))
    for (low, high), (lower, higher) in itertools.pairwise(ranges):
        assert lower <= low + 1e-9 and higher >= high - 1e-9


def test_clear_errors():
    teacher, X, y, flattest = small_instance()
    with pytest.raises(FlatbookInputError, match="slack"):
        worst_near_flattest(X, y, "relu", 40, teacher, slack=-0.1, flattest=flattest)
    with pytest.raises(FlatbookInputError, match="MultiIndexModel"):
        worst_near_flattest(X, y, "relu", 6, "teacher", flattest=flattest)
    with pytest.raises(FlatbookInputError, match="this width"):
        worst_near_flattest(X, y, "relu", 41, teacher, flattest=flattest)
    with pytest.raises(FlatbookInputError, match="starts"):
        worst_near_flattest(X, y, "relu", 40, teacher, flattest=flattest, starts=0)
    with pytest.raises(FlatbookInputError, match=r"\(k, 2\)"):
        near_flattest_set(X, y, "relu", 40, teacher, flattest=flattest, extra_directions=torch.ones(3))
    with pytest.raises(FlatbookInputError, match="zero row"):
        near_flattest_set(X, y, "relu", 40, teacher, flattest=flattest, extra_directions=torch.zeros(1, 2))


def test_extra_directions_widen_the_dictionary_and_the_worst_found_cannot_fall():
    """The same climb on a dictionary that holds the solver's plus extra directions: every earlier measure is
    still in the polytope, so the worst vertex enumerated can only rise (checked on the exact enumeration)."""
    teacher, X, y, flattest = small_instance()
    near = near_flattest_set(X, y, "relu", 40, teacher, flattest=flattest)
    extra = torch.tensor([[3.0, 4.0], [-1.0, 0.2]], dtype=torch.float64)
    widened = near_flattest_set(X, y, "relu", 40, teacher, flattest=flattest, extra_directions=extra)
    assert torch.allclose(widened.U[-2:], extra / extra.norm(dim=1, keepdim=True))
    assert torch.equal(widened.U[:-2], near.U)
    budget = near.budget_at(0.05)
    worst = max(
        near.excess(torch.as_tensor(mu)) for mu in vertices(near.Phi.numpy(), near.w.numpy(), y.numpy(), budget)
    )
    wider = max(
        widened.excess(torch.as_tensor(mu))
        for mu in vertices(widened.Phi.numpy(), widened.w.numpy(), y.numpy(), budget)
    )
    assert wider >= worst - 1e-12


@pytest.mark.parametrize("name", ["relu", "quadratic"])
def test_frank_wolfe_floor_brackets_the_quadratic_programs_minimum(name):
    """The floor is a lower bound on the minimum excess over P_B (cvxpy's QP, best_near_flattest's
    excess_floor, an independent solver) and the excess found is attained, so at least that minimum."""
    teacher, X, y, flattest = small_instance(name)
    near = near_flattest_set(X, y, name, 40, teacher, flattest=flattest)
    for slack in (0.0, 0.05) if name == "relu" else (0.05,):
        qp = best_near_flattest(X, y, name, 40, teacher, slack=slack, flattest=flattest).excess_floor
        bound = frank_wolfe_floor(near, slack, steps=100, rel_gap=1e-4)
        assert bound.floor <= qp + 1e-7 * max(1.0, abs(qp))  # HiGHS's tolerance on the LP's vertex
        assert bound.found >= qp - 1e-7 * max(1.0, abs(qp))  # Clarabel's tolerance on the QP's minimum
        assert bound.found <= near.excess(near.start) + 1e-12 and 1 <= bound.steps <= 100
    with pytest.raises(FlatbookInputError, match="steps"):
        frank_wolfe_floor(near, 0.01, steps=0)


def test_the_set_climbs_as_the_function_does():
    """near_flattest_set(...).worst(slack) is worst_near_flattest at that slack (one dictionary, several slacks)."""
    teacher, X, y, flattest = small_instance()
    near = near_flattest_set(X, y, "relu", 40, teacher, flattest=flattest)
    for slack in (0.01, 0.05):
        direct = worst_near_flattest(X, y, "relu", 40, teacher, slack=slack, flattest=flattest, starts=3, seed=2)
        assert near.worst(slack, starts=3, seed=2).excess == pytest.approx(direct.excess, rel=1e-12)
    assert near.budget_at(0.05) == pytest.approx(1.05 * near.budget_at(0.0))  # p = 1: B is linear in 1 + ε


def test_a_failed_quadratic_program_is_a_solver_error(monkeypatch):
    import cvxpy as cp

    teacher, X, y, flattest = small_instance()

    def fail(*args, **kwargs):
        raise cp.error.SolverError("Solver 'CLARABEL' failed.")

    monkeypatch.setattr(cp.Problem, "solve", fail)
    with pytest.raises(SolverError, match="Clarabel failed on the best near-flattest program"):
        best_near_flattest(X, y, "relu", 40, teacher, slack=0.05, flattest=flattest)
