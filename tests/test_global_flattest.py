"""The flattest interpolator over all directions: splitting lemma, bounds, and exact references."""

import dataclasses
import functools
import itertools
import math

import cvxpy as cp
import numpy as np
import pytest
import torch

import flatbook.column_generation as column_generation
from flatbook import (
    TwoLayerNet,
    flattest_interpolator,
    flattest_outer_weights,
    get_activation,
    min_flatness,
)
from flatbook.atom_polish import merge_near_copies, polish_atoms, projected_residual, slide
from flatbook.column_generation import (
    MASTER_RESTART_FACTOR,
    RestrictedMaster,
    StopReason,
    stalled,
    support_refit,
)
from flatbook.data import single_index, sum_of_single_index
from flatbook.errors import FlatbookInputError, InfeasibleInterpolationError, SolverError
from flatbook.experiments.bad_interpolators import teacher_upsilon
from flatbook.flatness import unit_flatness_weights
from flatbook.global_flattest import rounding_excess_bound, split_into_copies
from flatbook.interpolators import random_directions
from flatbook.pricing import dual_ratio
from flatbook.relu_cells import activation_patterns, all_activation_patterns, flattest_relu_over_patterns
from flatbook.weighted_l1 import WeightedL1Master


def data(d, n, link, noise=0.3, seed=0):
    teacher = single_index(d=d, link=link, noise_std=noise, seed=seed)
    X, y = teacher.sample(n, seed=seed + 1)
    return teacher, X, y


@functools.cache
def exact_relu_optimum(d, n, seed=0):
    """The flattest ReLU interpolator of ``data(d, n, "relu", seed=seed)`` by the convex program over all its
    activation patterns: the exact reference, solved once for the tests that share an instance."""
    _, X, y = data(d, n, "relu", seed=seed)
    return flattest_relu_over_patterns(X, y, all_activation_patterns(X)).value


def cvxpy_weighted_l1(columns, y, weights):
    mu = cp.Variable(columns.shape[1])
    problem = cp.Problem(cp.Minimize(weights @ cp.abs(mu)), [columns @ mu == y])
    problem.solve(solver="CLARABEL")
    assert problem.status == "optimal"
    return problem.value


# --- the restricted master ---------------------------------------------------------------------


def test_master_matches_cvxpy_through_additions_and_removals():
    rng = np.random.default_rng(1)
    columns, weights, y = rng.standard_normal((20, 60)), rng.uniform(0.5, 2.0, 60), rng.standard_normal(20)
    master = WeightedL1Master(y)
    master.add(columns[:, :30], weights[:30])
    first = master.solve()
    assert first.value == pytest.approx(cvxpy_weighted_l1(columns[:, :30], y, weights[:30]), rel=1e-7)
    master.add(columns[:, 30:], weights[30:])
    second = master.solve()
    assert second.value == pytest.approx(cvxpy_weighted_l1(columns, y, weights), rel=1e-7)
    np.testing.assert_allclose(columns @ second.mu, y, atol=1e-10)
    assert np.abs(columns.T @ second.dual / weights).max() <= 1 + 1e-9  # dual feasible
    assert second.dual @ y == pytest.approx(second.value, rel=1e-9)  # zero gap
    keep = np.ones(60, dtype=bool)
    keep[::3] = False
    keep[np.abs(second.mu) > 0] = True
    master.remove(keep)
    assert master.size == keep.sum()
    assert master.solve().value == pytest.approx(cvxpy_weighted_l1(columns[:, keep], y, weights[keep]), rel=1e-7)


def test_master_builds_its_model_lazily_through_removals():
    """Columns wait outside the HiGHS model until a solve; removals before it may hit columns on both sides."""
    rng = np.random.default_rng(3)
    columns, weights, y = rng.standard_normal((15, 80)), rng.uniform(0.5, 2.0, 80), rng.standard_normal(15)
    master = WeightedL1Master(y)
    master.add(columns[:, :40], weights[:40])
    master.add(columns[:, 40:50], weights[40:50])
    keep = np.ones(50, dtype=bool)
    keep[1::4] = False  # pending columns only: nothing is in the model yet
    master.remove(keep)
    assert master._highs.getNumCol() == 0  # nothing built before a solve
    first = master.solve()
    assert master._highs.getNumCol() == 2 * master.size  # the pairs μ⁺, μ⁻
    assert first.value == pytest.approx(cvxpy_weighted_l1(columns[:, :50][:, keep], y, weights[:50][keep]), rel=1e-7)
    master.add(columns[:, 50:], weights[50:])
    kept = np.concatenate([np.nonzero(keep)[0], np.arange(50, 80)])
    keep_again = np.ones(kept.size, dtype=bool)
    keep_again[::5] = False  # in the model and pending alike
    master.remove(keep_again)
    kept = kept[keep_again]
    solution = master.solve()
    assert master.size == kept.size
    assert solution.value == pytest.approx(cvxpy_weighted_l1(columns[:, kept], y, weights[kept]), rel=1e-7)
    np.testing.assert_allclose(columns[:, kept] @ solution.mu, y, atol=1e-10)
    # Two pending blocks, the first removed whole: the other's columns stay in place.
    master.add(2.0 * columns[:, :5], weights[:5])
    master.add(columns[:, 5:8], weights[5:8])
    keep_last = np.r_[np.ones(kept.size, dtype=bool), np.zeros(5, dtype=bool), np.ones(3, dtype=bool)]
    master.remove(keep_last)
    kept = np.r_[kept, 5, 6, 7]
    assert master.size == kept.size and master._pending_count == 3
    assert master.solve().value == pytest.approx(cvxpy_weighted_l1(columns[:, kept], y, weights[kept]), rel=1e-7)
    assert master._highs.getNumCol() == 2 * master.size


def test_master_says_when_its_columns_cannot_interpolate():
    master = WeightedL1Master(np.arange(5.0))
    with pytest.raises(InfeasibleInterpolationError, match="no columns"):
        master.solve()
    master.add(np.ones((5, 2)) * np.arange(1, 3), np.ones(2))  # span{1, e_1} does not hold y
    master.add(np.eye(5)[:, :1], np.ones(1))
    with pytest.raises(InfeasibleInterpolationError, match="cannot interpolate"):
        master.solve()
    with pytest.raises(FlatbookInputError, match="positive weight"):
        master.add(np.ones((5, 1)), np.zeros(1))


@pytest.mark.parametrize("duplicates", [False, True])
def test_interior_point_master_matches_cvxpy_and_is_certified(duplicates):
    # What column generation solves each round: the interior point's certified support refit, or the vertex
    # read off its central dual; duplicated and sign-flipped columns make the optimal face non-unique.
    rng = np.random.default_rng(2)
    columns, weights, y = rng.standard_normal((25, 120)), rng.uniform(0.5, 2.0, 120), rng.standard_normal(25)
    if duplicates:
        columns = np.hstack([columns, columns[:, :40], -columns[:, 40:60]])
        weights = np.concatenate([weights, weights[:40], weights[40:60]])
    exact = cvxpy_weighted_l1(columns, y, weights)
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    master = RestrictedMaster.of_columns(Phi, w, yt)
    solution, central, _ = master.solve()
    assert float((Phi.T @ central).abs().div(w).max()) <= 1 + 1e-6  # the central dual is (nearly) feasible
    assert float(central @ yt) == pytest.approx(exact, rel=1e-6)
    vertex = master.vertex_at(central)
    assert (np.abs(vertex.mu) > 0).sum() <= 25  # a vertex: at most n columns
    for found in (solution, vertex):
        assert found.value == pytest.approx(exact, rel=1e-6)
        np.testing.assert_allclose(columns @ found.mu, y, atol=1e-9)
        if found.basic:  # what the final vertex of column generation is not recomputed for: independent columns
            support = np.abs(found.mu) > 0
            assert np.linalg.matrix_rank(columns[:, support]) == support.sum()


def test_an_interior_point_stopped_by_a_failed_factorisation_leaves_the_vertex_dual_to_price_at(monkeypatch):
    """A failed Cholesky factorisation at the interior point's first iterate ends it with λ = 0, which bounds
    nothing: the master then prices at its optimal vertex's dual (λᵀy = the optimum, feasible), not at λ = 0, at
    which every dual ratio vanishes (the rounds then divided by a zero largest ratio)."""
    rng = np.random.default_rng(5)
    columns, weights, y = rng.standard_normal((20, 90)), rng.uniform(0.5, 2.0, 90), rng.standard_normal(20)
    exact = cvxpy_weighted_l1(columns, y, weights)
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    master = RestrictedMaster.of_columns(Phi, w, yt)
    failed = torch.linalg.cholesky_ex(torch.zeros(20, 20, dtype=torch.float64))
    monkeypatch.setattr(torch.linalg, "cholesky_ex", lambda *args, **kwargs: (failed[0], torch.tensor(1)))
    solution, central, _ = master.solve()
    assert solution.value == pytest.approx(exact, rel=1e-6)
    assert float(central @ yt) == pytest.approx(exact, rel=1e-6)
    assert float((Phi.T @ central).abs().div(w).max()) <= 1 + 1e-9


def test_a_master_highs_cannot_finish_in_time_stops_at_once_and_falls_back_on_the_interior_point(monkeypatch):
    """At the paper's scale a dense master can outlast HiGHS's time limit: it raises at once (no retry from
    scratch, which would take as long again), and the vertex step then returns the interior point's primal
    corrected to interpolate and purified to independent columns (basic, optimal to its tolerance) instead of
    stopping column generation."""
    rng = np.random.default_rng(3)
    columns, weights, y = rng.standard_normal((25, 400)), rng.uniform(0.5, 2.0, 400), rng.standard_normal(25)
    exact = cvxpy_weighted_l1(columns, y, weights)
    slow = WeightedL1Master(y, time_limit=0.0)
    slow.add(columns, weights)
    runs = []
    monkeypatch.setattr(slow, "_run", lambda run=slow._run: runs.append(1) or run())
    with pytest.raises(SolverError, match="time limit of 0 s"):
        slow.solve()
    assert len(runs) == 1
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    master = RestrictedMaster.of_columns(Phi, w, yt)
    master.highs.time_limit = 0.0
    _, central, _ = master.solve(gap_tol=1e-9)
    primal = torch.as_tensor(master.solve().solution.mu)
    monkeypatch.setattr(column_generation, "vertex_from_dual", lambda *args, **kwargs: None)  # no vertex read off
    refit = master.vertex_at(central, primal=primal)
    assert refit.basic and int(np.count_nonzero(refit.mu)) <= 25 and refit.value == pytest.approx(exact, rel=1e-6)
    np.testing.assert_allclose(columns @ refit.mu, y, atol=1e-9)
    with pytest.raises(SolverError, match="time limit"):
        master.vertex_at(central)  # no primal to refit: the error stands


def test_a_primal_missing_part_of_its_support_is_corrected_to_interpolate_on_the_tightest_columns():
    """The vertex step's last resort: an interior point's μ can leave a column of the optimal support at round-off
    (its support then has rank < n, so no refit on it interpolates); the correction on its support and the n
    columns tightest at the dual interpolates, at a value no lower than the optimum (an interpolator's)."""
    rng = np.random.default_rng(4)
    columns, weights, y = rng.standard_normal((20, 300)), rng.uniform(0.5, 2.0, 300), rng.standard_normal(20)
    exact = cvxpy_weighted_l1(columns, y, weights)
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    master = RestrictedMaster.of_columns(Phi, w, yt)
    solution, central, _ = master.solve()
    mu = torch.as_tensor(master.vertex_at(central).mu)
    mu[torch.argmin(torch.where(mu != 0, mu.abs(), torch.inf))] = 0.0  # the smallest atom lost
    assert support_refit(mu, Phi, yt, w, math.inf) is None
    lower = master.weak_duality_bound(central)
    corrected = column_generation.corrected_support(mu, Phi, yt, w, central, lower)
    np.testing.assert_allclose(columns @ corrected.numpy(), y, atol=1e-10 * np.abs(y).max())
    assert float(w @ corrected.abs()) >= exact * (1 - 1e-6)  # cvxpy's optimum is accurate to about 1e-8
    whole = column_generation.corrected_support(torch.as_tensor(solution.mu), Phi, yt, w, central, lower)
    assert float(w @ whole.abs()) == pytest.approx(exact, rel=1e-6)  # an optimal μ stays optimal
    # a correction whose value is not within rtol of the proven lower bound is refused
    assert column_generation.corrected_support(mu, Phi, yt, w, central, 0.5 * lower) is None


def test_purification_gives_independent_columns_at_no_larger_cost_and_the_same_fit():
    """lp.purify against the linear program's optimum (cvxpy): from a dense interpolator and from an optimal one
    spread over copies of its columns (optimal, not basic), it returns at most n independent columns, the same
    Φã to round-off, a cost no larger than the start's, and from the optimal spread the optimum itself."""
    from flatbook.lp import purify

    rng = np.random.default_rng(5)
    columns, weights, y = rng.standard_normal((15, 200)), rng.uniform(0.5, 2.0, 200), rng.standard_normal(15)
    exact = cvxpy_weighted_l1(columns, y, weights)
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    dense = torch.linalg.lstsq(Phi, yt[:, None]).solution[:, 0]  # every entry non-zero
    vertex = torch.as_tensor(RestrictedMaster.of_columns(Phi, w, yt).solve().solution.mu)
    on = torch.nonzero(vertex).flatten()
    copies = torch.cat([Phi, Phi[:, on].repeat(1, 3)], dim=1)
    copy_weights = torch.cat([w, w[on].repeat(3)])
    spread = torch.cat([vertex / 4, (vertex[on] / 4).repeat(3)])  # each optimal atom split over four copies
    for start, matrix, cost in ((dense, Phi, w), (spread, copies, copy_weights)):
        purified = purify(start, matrix, cost)
        support = purified != 0
        assert int(support.sum()) <= 15 and int(torch.linalg.matrix_rank(matrix[:, support])) == int(support.sum())
        assert float((matrix @ (purified - start)).abs().max()) <= 1e-10 * float(yt.abs().max())
        assert float(cost @ purified.abs()) <= float(cost @ start.abs()) * (1 + 1e-12)
        assert float(cost @ purified.abs()) >= exact * (1 - 1e-6)  # cvxpy's optimum is accurate to about 1e-8
    assert float(copy_weights @ purify(spread, copies, copy_weights).abs()) == pytest.approx(exact, rel=1e-6)


def test_a_large_master_whose_vertex_the_dual_misses_is_purified_without_highs(monkeypatch):
    """Above PURIFY_FIRST_ENTRIES the vertex step corrects and purifies the interior point's primal before HiGHS
    (whose simplex from scratch passed its time limit on a 1000 × 21212 master): here every master counts as
    large and HiGHS refuses, and the run still ends basic, verified, at the value of the default run."""
    from flatbook.global_flattest import verify_certificate
    from flatbook.weighted_l1 import WeightedL1Master

    _, X, y = data(4, 16, "relu", noise=0.3)
    reference = flattest_interpolator(X, y, "relu", 32, rounds=6)

    def refuses(self):
        raise AssertionError("HiGHS was asked")

    monkeypatch.setattr(column_generation, "PURIFY_FIRST_ENTRIES", 0)
    monkeypatch.setattr(column_generation, "vertex_from_dual", lambda *args, **kwargs: None)
    monkeypatch.setattr(WeightedL1Master, "solve", refuses)
    result = flattest_interpolator(X, y, "relu", 32, rounds=6)
    assert verify_certificate(result, X, y).ok
    assert result.atoms.directions.shape[0] <= 16
    assert result.upper == pytest.approx(reference.upper, rel=1e-3)


def test_purification_comes_before_highs_from_exactly_purify_first_entries(monkeypatch):
    """The threshold at its boundary: a master of exactly PURIFY_FIRST_ENTRIES feature entries is purified without
    asking HiGHS; one entry fewer asks HiGHS first."""
    from flatbook.weighted_l1 import WeightedL1Master

    rng = np.random.default_rng(6)
    columns, weights, y = rng.standard_normal((6, 50)), rng.uniform(0.5, 2.0, 50), rng.standard_normal(6)
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    master = RestrictedMaster.of_columns(Phi, w, yt)
    _, central, _ = master.solve(gap_tol=1e-9)
    primal = torch.as_tensor(master.solve().solution.mu)  # an optimal primal, as the interior point's would be
    asked = []

    def highs(self):
        asked.append(1)
        raise SolverError("refused")

    monkeypatch.setattr(column_generation, "vertex_from_dual", lambda *args, **kwargs: None)
    monkeypatch.setattr(WeightedL1Master, "solve", highs)
    for threshold, asks in ((Phi.numel(), 0), (Phi.numel() + 1, 1)):
        asked.clear()
        monkeypatch.setattr(column_generation, "PURIFY_FIRST_ENTRIES", threshold)
        solution = master.vertex_at(central, primal=primal)
        assert len(asked) == asks and solution.basic and int(np.count_nonzero(solution.mu)) <= 6


def test_inexact_master_stops_short_with_a_centred_dual():
    """The inexact master (primal-dual column generation): an interior point stopped at a loose gap.  Its dual
    is no certificate of the master's optimum, but scaled into the dual feasible set it still bounds it from
    below (weak duality), close to the optimum; μ keeps at most n entries (its approximate support)."""
    rng = np.random.default_rng(2)
    columns, weights, y = rng.standard_normal((25, 300)), rng.uniform(0.5, 2.0, 300), rng.standard_normal(25)
    exact = cvxpy_weighted_l1(columns, y, weights)
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    master = RestrictedMaster.of_columns(Phi, w, yt)
    solution, central, _ = master.solve(gap_tol=0.1)
    assert not solution.exact and not solution.basic and (np.abs(solution.mu) > 0).sum() <= 25
    lower = float(central @ yt) / max(1.0, float((Phi.T @ central).abs().div(w).max()))
    assert lower <= exact * (1 + 1e-9)
    assert lower >= 0.5 * exact  # a tenth of the gap, not a random point: loose, but well short of nothing
    assert solution.value == pytest.approx(exact, rel=0.2)
    assert abs(solution.value / exact - 1) > 1e-6  # it did stop short of the optimum
    assert master.solve().solution.exact


@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e4])
def test_inexact_master_is_accepted_at_every_scale_of_the_labels(scale):
    """The quality check of an inexact iterate uses the interior point's own measures, so labels of any scale
    get an inexact master (it fell back to an exact solve every time for labels scaled by 1e-2 or less)."""
    rng = np.random.default_rng(2)
    columns, weights, y = rng.standard_normal((25, 300)), rng.uniform(0.5, 2.0, 300), scale * rng.standard_normal(25)
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    master = RestrictedMaster.of_columns(Phi, w, yt)
    assert not master.solve(gap_tol=0.1).solution.exact


def test_restart_point_is_an_early_iterate_and_a_valid_start_for_the_enlarged_master():
    """The restart point of an inexact master is its first iterate within MASTER_RESTART_FACTOR of the gap
    tolerance, not its start.  Extended to the columns that pricing adds (dual ratio above 1 at its λ, so one
    slack of each is floored), it starts the next master: inexactly, the iterate passes the same quality
    check as a cold start's; exactly, it reaches the cvxpy optimum of the enlarged master."""
    from flatbook.lp import interior_point

    rng = np.random.default_rng(4)
    n, m, k = 25, 300, 40
    columns, weights, y = rng.standard_normal((n, m + k)), rng.uniform(0.5, 2.0, m + k), rng.standard_normal(n)
    Phi, w, yt = (torch.from_numpy(a) for a in (columns, weights, y))
    old, new = slice(0, m), slice(m, m + k)
    master = RestrictedMaster.of_columns(Phi[:, old].clone(), w[old], yt)
    solution, central, restart = master.solve(gap_tol=0.1, restart_factor=MASTER_RESTART_FACTOR)
    assert not solution.exact and restart is not None
    assert not torch.equal(restart.lam, central)  # an earlier iterate than the last (which restarts worse)
    x, s, lam = restart
    c = torch.cat([w[old], w[old]])
    assert float(x @ s) / (1 + abs(float(c @ x))) < MASTER_RESTART_FACTOR * 0.1
    assert float((yt - Phi[:, old] @ (x[:m] - x[m:])).norm()) / (1 + float(yt.norm())) < MASTER_RESTART_FACTOR * 0.1
    # Columns with a dual ratio above 1 at the restart point's λ: what pricing adds.
    Phi[:, new] *= 3.0 * (w[new] / (Phi[:, new].T @ lam).abs().clamp_min(1e-3))  # (columns too: shared memory)
    assert float(((Phi[:, new].T @ lam).abs() / w[new]).min()) > 1.0
    start = restart.with_columns(Phi[:, new], w[new])
    x, s, _ = start
    assert bool((x > 0).all()) and bool((s > 0).all())
    torch.testing.assert_close(x[:m], restart.x[:m], rtol=0, atol=0)  # the old columns keep their values
    torch.testing.assert_close(x[m + k : 2 * m + k], restart.x[m:], rtol=0, atol=0)
    mu = float(restart.x @ restart.s) / (2 * m)
    new_pairs = torch.cat([torch.arange(m, m + k), torch.arange(2 * m + k, 2 * m + 2 * k)])
    torch.testing.assert_close(x[new_pairs] * s[new_pairs], torch.full((2 * k,), mu, dtype=torch.float64))
    master.add_columns(Phi[:, new], w[new])
    warm, _, _ = master.solve(gap_tol=0.1, start=start, restart_factor=MASTER_RESTART_FACTOR)
    assert not warm.exact  # the inexact iterate passed the quality check
    exact = cvxpy_weighted_l1(Phi.numpy(), y, weights)
    assert warm.value == pytest.approx(exact, rel=0.2)
    lam_exact, primal, _, _ = interior_point(Phi, yt, w, start=start)
    assert float(lam_exact @ yt) == pytest.approx(exact, rel=1e-7)
    assert float(w @ primal.abs()) == pytest.approx(exact, rel=1e-7)
    with pytest.raises(ValueError, match="start point is for"):
        interior_point(Phi, yt, w, start=restart)


def test_warm_masters_restart_inexact_masters_and_save_factorisations(monkeypatch):
    """With warm_masters, every inexact master that follows an inexact one starts from its restart point, and
    no other master does (heuristic pricing, d = 20); without it none does.  (Whether that saves
    factorisations depends on the path the rounds take: bench/README.md measures it.)"""
    _, X, y = data(20, 60, "relu", noise=0.0)
    runs = {}
    for warm in (False, True):
        solves = []
        interior_point = column_generation.interior_point

        def spy(Phi, y, kappa, tol=1e-9, interior_point=interior_point, solves=solves, **options):
            solves.append((tol > 1e-9, options.get("start") is not None))
            return interior_point(Phi, y, kappa, tol=tol, **options)

        monkeypatch.setattr(column_generation, "interior_point", spy)
        flattest_interpolator(X, y, "relu", 120, rounds=16, slide_steps=0, warm_masters=warm)
        monkeypatch.undo()
        runs[warm] = solves
    cold_solves, warm_solves = runs[False], runs[True]
    assert not any(started for _, started in cold_solves)
    assert sum(inexact for inexact, _ in warm_solves) >= 3
    for (previous_inexact, _), (inexact, started) in itertools.pairwise(warm_solves):
        assert started == (inexact and previous_inexact)


@pytest.mark.parametrize("inexact_master", [False, True])
@pytest.mark.parametrize(
    "n,seed,slide_steps",
    [(20, 0, 20), pytest.param(40, 2, 0, marks=pytest.mark.slow)],  # n = 40: the pattern program takes ~30 s
)
def test_inexact_and_exact_masters_certify_the_same_optimum(inexact_master, n, seed, slide_steps):
    """Exact pricing (ReLU, d = 3) against the activation-pattern program, with either master; convergence
    is declared only on an exact master.  Without sliding, pricing at an inexact dual once found no violated
    direction while the master was not optimal (n = 40, seed 2), and the solver stopped there, uncertified."""
    _, X, y = data(3, n, "relu", seed=seed)
    reference = exact_relu_optimum(3, n, seed)
    result = flattest_interpolator(X, y, "relu", 2 * n, inexact_master=inexact_master, slide_steps=slide_steps)
    assert result.certified and result.stop is StopReason.CONVERGED, result.status
    assert result.history[-1]["master_exact"]
    assert result.lower <= reference * (1 + 1e-6)
    assert result.upper == pytest.approx(reference, rel=2e-3)


@pytest.mark.parametrize("activation", ["quadratic", "relu", "leaky_relu"])
def test_projected_residual_jacobian_matches_autograd(activation):
    """The closed-form variable-projection Jacobian of polish_atoms' Gauss-Newton against reverse-mode
    autograd through the least squares (what it replaced: that needed an n × n block per sample, 32 GB at
    n = 1600, d = 100), on directions of several norms; and at n = 3000 it costs O(n k d) memory."""
    act = get_activation(activation)
    gen = torch.Generator().manual_seed(5)
    X, y = torch.randn(30, 5, generator=gen, dtype=torch.float64), torch.randn(30, generator=gen, dtype=torch.float64)
    U = torch.randn(3, 5, generator=gen, dtype=torch.float64) * torch.tensor([[0.5], [1.0], [3.0]], dtype=torch.float64)

    def fit(V):
        F = act(X @ (V / torch.linalg.vector_norm(V, dim=1, keepdim=True)).T)
        return F @ torch.linalg.lstsq(F, y[:, None], driver="gelsd").solution[:, 0] - y

    residual, mu, J = projected_residual(U, X, y, act, jacobian=True)
    torch.testing.assert_close(residual, fit(U), rtol=0, atol=1e-13)
    reference = torch.func.jacrev(fit)(U).reshape(30, -1)
    torch.testing.assert_close(J, reference, rtol=1e-10, atol=1e-12 * float(reference.abs().max()))
    X, y = torch.randn(3000, 100, dtype=torch.float64), torch.randn(3000, dtype=torch.float64)
    U = torch.randn(4, 100, dtype=torch.float64)
    assert projected_residual(U, X, y, act, jacobian=True)[2].shape == (3000, 400)


@pytest.mark.parametrize("even", [False, True])
def test_merged_directions_group_near_copies_by_weight(even):
    """Near-copies (cosine > 0.99) merge into their contribution-weighted mean, heaviest group first; for an
    even σ a sign-flipped copy is a copy, otherwise it is a direction of its own."""
    e = torch.eye(3, dtype=torch.float64)
    tilted = torch.nn.functional.normalize(e[0] + 0.05 * e[1], dim=0)
    atoms = torch.stack([e[0], tilted, -e[0], e[2]])
    contribution = torch.tensor([1.0, 1.0, 3.0, 4.0], dtype=torch.float64)
    merged = merge_near_copies(atoms, contribution, even=even)
    if even:  # {e0, tilted, −e0} weigh 5 against e2's 4; −e0 is the heaviest member, so the group points to −e0
        expected_group = torch.nn.functional.normalize(-3 * e[0] - 1 * e[0] - 1 * tilted, dim=0)
        assert merged.shape == (2, 3)
        torch.testing.assert_close(merged[0], expected_group, rtol=0, atol=1e-14)
        torch.testing.assert_close(merged[1], e[2], rtol=0, atol=0)
    else:  # −e0 stays apart: e2 (4), −e0 (3), then {e0, tilted} (2)
        assert merged.shape == (3, 3)
        torch.testing.assert_close(merged[0], e[2], rtol=0, atol=0)
        torch.testing.assert_close(merged[1], -e[0], rtol=0, atol=0)
        torch.testing.assert_close(merged[2], torch.nn.functional.normalize(e[0] + tilted, dim=0), rtol=0, atol=1e-14)


def _recording_masters(monkeypatch):
    """Wrap RestrictedMaster.solve to record (Φ, w, gap_tol, λ_c) of every master solved."""
    masters = []
    solve = RestrictedMaster.solve

    def recorded(self, gap_tol=None, *args, **kwargs):
        state = solve(self, gap_tol, *args, **kwargs)
        masters.append((self.Phi, self.w, gap_tol, state.central))
        return state

    monkeypatch.setattr(RestrictedMaster, "solve", recorded)
    return masters


def test_the_result_is_at_most_the_exact_optimum_over_the_final_columns(monkeypatch):
    """Quadratic teacher (d = 30, n = 60), 3 rounds: the last master is solved exactly and the returned
    atoms (its vertex, polished) have V at most its optimum over the final columns (cvxpy)."""
    _, X, y = data(30, 60, "quadratic", noise=0.0)
    masters = _recording_masters(monkeypatch)
    result = flattest_interpolator(X, y, "quadratic", 120, rounds=3, slide_steps=0)
    assert masters[-1][2] is None and result.history[-1]["round"] == 2
    Phi, w, _, _ = masters[-1]
    exact_optimum = cvxpy_weighted_l1(Phi.numpy(), y.numpy(), w.numpy())
    act = get_activation("quadratic")
    value = float(
        (unit_flatness_weights(result.atoms.directions, X, act) ** (1 / act.p) * result.atoms.weights.abs()).sum()
    )
    assert value == pytest.approx(result.measure_value, rel=1e-12)
    assert value <= exact_optimum * (1 + 1e-7), (value, exact_optimum)
    torch.testing.assert_close(result.net(X), y, rtol=0, atol=1e-9)
    assert result.upper == pytest.approx(min_flatness(result.net, X, y), rel=1e-12)


def test_polished_atoms_join_the_master_and_the_rounds_stop_when_nothing_moves(monkeypatch):
    """Quadratic teacher (d = 30, n = 60, noiseless, heuristic pricing): the first master's atoms polished
    into at most 4 (``polish_atoms``) are columns of the second master, so its optimum over its columns
    (cvxpy) is at most their V; the rounds then stall (the last 5 rounds moved neither the best master value,
    inexact ones counted at value·(1 + gap), nor the bound by tol) before the round limit, at the teacher's
    Υ or flatter (the teacher split into m copies interpolates).  Without the tailing-off stop the same
    rounds run on."""
    teacher, X, y = data(30, 60, "quadratic", noise=0.0)
    masters = _recording_masters(monkeypatch)
    polished = []

    def recorded(*args, **kwargs):
        polished.append(polish_atoms(*args, **kwargs))
        return polished[-1]

    monkeypatch.setattr(column_generation, "polish_atoms", recorded)
    result = flattest_interpolator(X, y, "quadratic", 120, slide_steps=0)
    assert polished[0] is not None
    Phi, w = masters[1][:2]
    _, injected, _ = RestrictedMaster(X, y, get_activation("quadratic")).columns(polished[0][0])
    cosines = torch.nn.functional.normalize(injected.T, dim=1) @ torch.nn.functional.normalize(Phi.T, dim=1).T
    assert bool((cosines.amax(dim=1) > 1 - 1e-12).all())
    assert cvxpy_weighted_l1(Phi.numpy(), y.numpy(), w.numpy()) <= polished[0][2] * (1 + 1e-7)
    assert result.pricing == "bound" and result.stop is StopReason.STALLED and result.rounds < 40, result.status
    values = [row["master"] * (1 + row["master_gap"]) for row in result.history]
    assert min(values[-5:]) >= (1 - result.tol) * min(values[:-5])
    assert result.history[-1]["target"] <= (1 + result.tol) * result.history[-6]["target"]
    assert result.upper <= teacher_upsilon(teacher, X, "quadratic", 120) * (1 + 1e-9)
    torch.testing.assert_close(result.net(X), y, rtol=0, atol=1e-9)
    monkeypatch.undo()
    unstopped = flattest_interpolator(
        X, y, "quadratic", 120, slide_steps=0, rounds=result.rounds + 3, stall_rounds=None
    )
    assert unstopped.rounds == result.rounds + 3 or unstopped.stop is StopReason.CONVERGED, unstopped.status


def test_a_polish_whose_directions_leave_the_admissible_set_reaches_nothing_and_does_not_crash():
    """The admissible projection for ρ0 = 0 maps a direction inside the teacher's span to a zero row (there is no
    nearest orthogonal direction); Gauss-Newton from there must report no polished interpolator (None), not pass
    NaN features to LAPACK."""
    from flatbook.admissible import AdmissibleSet

    generator = torch.Generator().manual_seed(0)
    X = torch.randn(12, 4, generator=generator, dtype=torch.float64)
    teacher = torch.eye(4, dtype=torch.float64)[:1]
    admissible = AdmissibleSet(4, teacher=teacher, max_alignment=0.0)
    U = torch.cat([teacher, admissible.random(5, generator)])  # the heaviest atom lies in the excluded span
    weights = torch.tensor([5.0, 1, 1, 1, 1, 1], dtype=torch.float64)
    y = torch.relu(X @ U.T) @ weights
    assert not torch.linalg.vector_norm(admissible.project(U[:1])).item()  # the zero row the polish must survive
    assert polish_atoms(U, weights, X, y, get_activation("relu"), admissible.project) is None
    # admissible atoms of a two-atom function, with a light third: the polish reaches the two (the guard rejects only
    # unusable starts)
    relu = get_activation("relu")
    two = torch.relu(X @ U[1:3].T) @ weights[:2]
    polished = polish_atoms(
        U[1:4], torch.tensor([5.0, 1.0, 1e-3], dtype=torch.float64), X, two, relu, admissible.project
    )
    assert polished is not None and polished[0].shape[0] == 2 and float(admissible.alignment(polished[0]).max()) < 1e-12


@pytest.mark.parametrize("name", ["relu", "leaky_relu"])
def test_the_relu_family_is_polished_above_three_dimensions(name, monkeypatch):
    """Noiseless single-index ReLU-family teacher in d = 6 (pricing by bounds): the first polish reaches the
    teacher's direction (one atom at cosine 1 to θ*), so the result is at most the teacher split into m
    copies, m^{1−p} κ(θ*) (not necessarily equal: escalated pricing may find flatter interpolators); the
    slide runs exactly in the rounds where the polish did not reach an interpolator at least as flat as the
    master.  In d = 3 the ReLU family is not polished, with exact pricing or without, and the slide runs."""
    teacher, X, y = data(6, 30, name, noise=0.0)
    polished, slides = [], []

    def recorded(*args, **kwargs):
        found = polish_atoms(*args, **kwargs)
        if "ceiling" in kwargs:  # the rounds' polish (the final one has no ceiling)
            polished.append(found)
        return found

    monkeypatch.setattr(column_generation, "polish_atoms", recorded)
    monkeypatch.setattr(column_generation, "slide", lambda *args, **kwargs: slides.append(1) or slide(*args, **kwargs))
    result = flattest_interpolator(X, y, name, 60)
    assert result.pricing == "bound"
    first = polished[0]
    assert first is not None and first[0].shape[0] == 1
    assert abs(float(first[0][0] @ teacher.theta_star[0])) == pytest.approx(1.0, abs=1e-9)
    assert len(slides) == sum(found is None for found in polished)
    assert result.upper <= teacher_upsilon(teacher, X, name, 60) * (1 + 1e-9)
    # the estimate is capped at V of the column generation's atoms; the network is built from those atoms moved off
    # their hyperplanes (by 1e-9 relative) and refitted by least squares, which moves the weights, so Υ, by at most
    # about that times the features' condition number (to first order; twice that allowed)
    condition = float(torch.linalg.cond(result.activation(X @ result.atoms.directions.T)))
    assert result.lower <= result.lower_estimate <= result.upper * (1 + 2e-9 * condition)
    torch.testing.assert_close(result.net(X), y, rtol=0, atol=1e-9)
    monkeypatch.setattr(column_generation, "polish_atoms", lambda *args, **kwargs: polished.append("called") or None)
    polished.clear()
    slides.clear()
    _, X3, y3 = data(3, 12, name, noise=0.0)
    for certified in (True, False):
        low = flattest_interpolator(X3, y3, name, 24, rounds=3, certify_up_to=3 if certified else 0)
        assert low.pricing == ("exact" if certified else "bound")
    assert not polished and slides


def test_tailing_off_needs_both_the_master_and_the_bound_to_stand_still():
    """``_stalled`` over the last stall_rounds rows: the best master value so far (inexact ones at
    value·(1 + gap)) fell by at most tol and the bound rose by at most tol; a short history, a move of
    either beyond tol, or no positive bound at the window's start is not a stall; a value scattering above
    the best is no move, and an early inexact value below the exact optimum does not hide later progress."""

    def rows(masters, bounds, gaps=None):
        gaps = gaps or [0.0] * len(masters)
        return [{"master": m, "target": b, "master_gap": g} for m, b, g in zip(masters, bounds, gaps, strict=True)]

    assert stalled(rows([10.0, 10.005, 9.995], [5.0, 5.0, 5.004]), 2, 1e-3)
    assert stalled(rows([12.0, 10.0, 10.3, 10.2], [4.0, 5.0, 5.0, 5.0]), 2, 1e-3)  # scatter above the best
    assert not stalled(rows([10.0, 10.0, 9.98, 10.01], [5.0, 5.0, 5.0, 5.0]), 2, 1e-3)  # fell, then scattered
    assert not stalled(rows([10.0, 10.005], [5.0, 5.0]), 2, 1e-3)  # too short
    assert not stalled(rows([10.0, 10.0, 9.985], [5.0, 5.0, 5.0]), 2, 1e-3)  # the master fell
    assert not stalled(rows([10.0, 10.0, 10.0], [5.0, 5.0, 5.006]), 2, 1e-3)  # the bound rose
    assert not stalled(rows([10.0, 10.0, 10.0], [-math.inf, 5.0, 5.0]), 2, 1e-3)  # no bound at first
    assert not stalled(rows([10.0, 10.0, 10.0], [0.0, 5.0, 5.0]), 2, 1e-3)
    # an inexact 9.5 (gap 0.1) below an exact optimum near 10 that later masters approach from above
    assert not stalled(rows([9.5, 10.2, 10.1], [5.0, 5.0, 5.0], [0.1, 0.0, 0.0]), 2, 1e-3)
    assert stalled(rows([9.5, 10.2, 10.1], [5.0, 5.0, 5.0]), 2, 1e-3)  # the same values, all exact


def _merged_by_loop(atom_dirs, contribution, even, cosine=0.99):
    """The grouping rule of _merged_directions, one Python comparison per atom and group (the reference)."""
    sums, totals = [], []
    for i in sorted(range(len(contribution)), key=lambda i: -float(contribution[i])):
        u, weight = atom_dirs[i], float(contribution[i])
        for g, total in enumerate(sums):
            cosine_g = float(u @ total) / float(torch.linalg.vector_norm(total))
            if (abs(cosine_g) if even else cosine_g) > cosine:
                sums[g], totals[g] = total + math.copysign(weight, cosine_g) * u, totals[g] + weight
                break
        else:
            sums.append(weight * u)
            totals.append(weight)
    merged = torch.stack([sums[g] for g in sorted(range(len(sums)), key=lambda g: -totals[g])])
    return merged / torch.linalg.vector_norm(merged, dim=1, keepdim=True)


@pytest.mark.parametrize("even", [False, True])
def test_merged_directions_match_the_rule_atom_by_atom(even):
    """300 atoms in 40 clusters of near-copies with random signs (so the even case merges across them) and
    distinct random contributions: the batched grouping equals the rule applied atom by atom, group by group."""
    gen = torch.Generator().manual_seed(3)
    centres = torch.nn.functional.normalize(torch.randn(40, 12, generator=gen, dtype=torch.float64), dim=1)
    members = centres[torch.randint(40, (300,), generator=gen)] + 0.05 * torch.randn(
        300, 12, generator=gen, dtype=torch.float64
    )
    signs = torch.where(torch.rand(300, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
    atoms = torch.nn.functional.normalize(signs[:, None] * members, dim=1)
    contribution = torch.rand(300, generator=gen, dtype=torch.float64) + 0.01
    merged = merge_near_copies(atoms, contribution, even=even)
    reference = _merged_by_loop(atoms, contribution, even=even)
    assert 40 <= merged.shape[0] < 300
    torch.testing.assert_close(merged, reference, rtol=0, atol=1e-12)


def test_support_refit_is_rejected_unless_certified():
    rng = np.random.default_rng(3)
    Phi, w, y = (
        torch.from_numpy(a) for a in (rng.standard_normal((10, 30)), rng.uniform(1, 2, 30), rng.standard_normal(10))
    )
    mu = torch.ones(30, dtype=torch.float64)  # full support: the least-norm refit interpolates
    refit = support_refit(mu, Phi, y, w, lower=float("inf"))
    assert refit is not None and float((Phi @ refit - y).abs().max()) <= 1e-10 * float(y.abs().max())
    assert support_refit(mu, Phi, y, w, lower=0.5 * float(w @ refit.abs())) is None  # value above the bound
    assert support_refit(torch.eye(30, dtype=torch.float64)[0], Phi, y, w, lower=float("inf")) is None


def test_master_time_limit_is_per_solve_not_cumulative():
    """HiGHS compares its time limit with all runs of the object together; a long column generation (chapter 5's
    paper scale in d = 50) once stopped with 'Time limit reached' after its solves had added up past the limit."""
    rng = np.random.default_rng(0)
    master = WeightedL1Master(rng.standard_normal(30), time_limit=0.05)
    master.add(rng.standard_normal((30, 60)), np.ones(60))
    while master._highs.getRunTime() < 0.2:  # four times the limit, in many short solves
        master.solve()
        master.add(rng.standard_normal((30, 1)), np.ones(1))


# --- the splitting lemma ------------------------------------------------------------------------


@pytest.mark.parametrize("name,params", [("quadratic", {}), ("relu_power", {"c": 3.0}), ("relu", {})])
def test_splitting_lemma_step_by_step(name, params):
    """Jensen within a direction (equality for equal copies), then Hölder across directions."""
    activation = get_activation(name, **params)
    p = activation.p
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(30, 5, generator=gen, dtype=torch.float64)
    U = random_directions(4, 5, seed=3)
    A = torch.randn(4, generator=gen, dtype=torch.float64)
    kappa = unit_flatness_weights(U, X, activation)
    b = kappa ** (1 / p) * A.abs()
    for trial in range(5):
        counts = torch.randint(1, 6, (4,), generator=gen)
        groups = torch.repeat_interleave(torch.arange(4), counts)
        jensen = float((kappa * A.abs() ** p * counts.double() ** (1 - p)).sum())
        holder = int(counts.sum()) ** (1 - p) * float(b.sum()) ** p
        # Equal copies, any norms (the symmetry): Υ equals the Jensen expression.
        scale = 1.0 + trial  # θ scaled, a scaled back: the same effective weights
        equal = TwoLayerNet(A[groups] / counts[groups] / scale**activation.degree, U[groups] * scale, activation)
        assert min_flatness(equal, X, equal(X)) == pytest.approx(jensen, rel=1e-10)
        # Unequal shares of the same totals: never flatter.
        shares = torch.rand(int(counts.sum()), generator=gen, dtype=torch.float64) + 0.1
        shares = shares / torch.zeros(4, dtype=torch.float64).index_add(0, groups, shares)[groups]
        unequal = TwoLayerNet(A[groups] * shares, U[groups], activation)
        assert min_flatness(unequal, X, unequal(X)) >= jensen * (1 - 1e-12)
        assert jensen >= holder * (1 - 1e-12)
    # Hölder's equality case, with real-valued m_u ∝ b_u.
    m = 50.0
    proportional = m * b / b.sum()
    assert float((kappa * A.abs() ** p * proportional ** (1 - p)).sum()) == pytest.approx(
        m ** (1 - p) * float(b.sum()) ** p, rel=1e-12
    )


@pytest.mark.parametrize("p", [1.0, 4 / 3, 1.5])
def test_greedy_split_is_the_best_integer_allocation(p):
    gen = torch.Generator().manual_seed(1)
    weights = torch.randn(3, generator=gen, dtype=torch.float64)
    kappa = torch.rand(3, generator=gen, dtype=torch.float64) + 0.5
    cost = kappa * weights.abs() ** p
    for width in (3, 4, 7, 12):
        counts = split_into_copies(weights, kappa, p, width)
        assert sum(counts) == width and min(counts) >= 1
        value = float((cost * torch.tensor(counts, dtype=torch.float64) ** (1 - p)).sum())
        brute = min(
            float((cost * torch.tensor(c, dtype=torch.float64) ** (1 - p)).sum())
            for c in itertools.product(range(1, width + 1), repeat=3)
            if sum(c) == width
        )
        assert value == pytest.approx(brute, rel=1e-12)
        ideal = width ** (1 - p) * float((kappa ** (1 / p) * weights.abs()).sum()) ** p
        assert value >= ideal * (1 - 1e-12)
        if width > 3:
            assert value <= ideal * (1 + rounding_excess_bound(3, width, p)) * (1 + 1e-12)


@pytest.mark.parametrize("p", [1.2, 4 / 3, 1.5, 2.0])
def test_greedy_split_keeps_the_largest_share_in_the_balance_band(p):
    """eq-balance-band: with b_u = κ_u^{1/p}|A_u| spread over five orders of magnitude and V = Σ b_u, the
    largest share κ_j^{1/p}|ã_j| = b_u/m_u of the best integer split lies in [V/m, (3/2) V/(m − K)]; the
    even split (m_u ≈ m/K) breaks the upper end at these widths."""
    gen = torch.Generator().manual_seed(2)
    K = 40
    b = 10.0 ** (5 * torch.rand(K, generator=gen, dtype=torch.float64) - 5)
    kappa = torch.rand(K, generator=gen, dtype=torch.float64) + 0.2
    weights = b / kappa ** (1 / p)
    V = float(b.sum())
    for width in (60, 100, 400, 1600, 10_000, 100_000):
        counts = torch.tensor(split_into_copies(weights, kappa, p, width), dtype=torch.float64)
        assert V / width * (1 - 1e-12) <= float((b / counts).max()) <= 1.5 * V / (width - K) * (1 + 1e-12), width
        even = torch.full((K,), float(width // K), dtype=torch.float64)
        assert float((b / even).max()) > 1.5 * V / (width - K), width


def test_single_copy_factor_of_the_balance_band_stays_below_three_halves():
    """The single-copy factor ((p − 1)/(1 − 2^{1−p}))^{1/p} of eq-balance-band: 1.43 at p = 4/3, below 3/2 on a
    grid of 1 < p ≤ 2 (it rises to 1/ln 2 ≈ 1.4427 as p → 1 and is √2 at p = 2)."""
    p = np.linspace(1.0001, 2.0, 2000)
    factor = ((p - 1) / (1 - 2.0 ** (1 - p))) ** (1 / p)
    assert factor.max() < 1.5 and factor.max() <= 1 / math.log(2) + 1e-12
    assert ((1 / 3) / (1 - 2 ** (-1 / 3))) ** 0.75 == pytest.approx(1.434, abs=1e-3)


# --- exact references ---------------------------------------------------------------------------


@pytest.mark.parametrize("d,n", [(2, 15), pytest.param(3, 24, marks=pytest.mark.slow)])
def test_relu_column_generation_matches_the_exact_activation_pattern_program(d, n):
    _, X, y = data(d, n, "relu")
    reference = exact_relu_optimum(d, n)
    result = flattest_interpolator(X, y, "relu", 3 * n)
    assert result.pricing == "exact" and result.certified, result.status
    assert result.lower <= reference * (1 + 1e-6)  # a proven bound is below the exact optimum
    assert result.upper == pytest.approx(reference, rel=2e-3)  # and the optimum is found (tol 1e-3 + SOCP accuracy)
    assert result.upper == pytest.approx(min_flatness(result.net, X, y), rel=1e-10)
    assert result.net.width == 3 * n
    assert float((result.net(X) - y).abs().max()) <= 1e-8 * float(y.abs().max())


@pytest.mark.slow
def test_exact_pricing_certifies_a_three_dimensional_relu_point_in_few_rounds():
    """Chapter 4's paper-scale data (noiseless sum of two ReLU ridges, d = 3), n = 128, seed 200: with up to 2n
    cuts per round and a master that keeps them (80n + 500 columns) the bound does not stall, and certifies in
    a few rounds (with 64 cuts and 20n + 500 columns pruning discarded cuts the dual still needed)."""
    X, y = sum_of_single_index(3, 2, link="relu", seed=200).sample(128, seed=1200)
    result = flattest_interpolator(X, y, "relu", 256, tol=0.01, rounds=20, seed=200)
    assert result.pricing == "exact" and result.certified and result.rounds <= 10, (result.status, result.gap)


@pytest.mark.slow
def test_pattern_program_with_sampled_patterns_is_an_upper_bound():
    _, X, y = data(3, 20, "relu")
    exact = exact_relu_optimum(3, 20)
    sampled = flattest_relu_over_patterns(X, y, activation_patterns(X, random_directions(200, 3, seed=2))).value
    assert sampled >= exact * (1 - 1e-7)


def grid_measure_value(X, y, activation, directions):
    """V over a fixed grid of directions (an upper bound on V*), by cvxpy."""
    columns = activation(X @ directions.T).numpy()
    weights = (unit_flatness_weights(directions, X, activation) ** (1 / activation.p)).numpy()
    return cvxpy_weighted_l1(columns, y.numpy(), weights)


def fibonacci_sphere(count):
    i = np.arange(count) + 0.5
    phi, theta = np.arccos(1 - 2 * i / count), math.pi * (1 + 5**0.5) * i
    return torch.as_tensor(np.stack([np.cos(theta) * np.sin(phi), np.sin(theta) * np.sin(phi), np.cos(phi)], 1))


@pytest.mark.parametrize("name,d,n", [("relu", 2, 12), ("quadratic", 2, 3), ("quadratic", 3, 6)])
def test_agrees_with_a_fine_grid_of_directions(name, d, n):
    activation = get_activation(name)
    _, X, y = data(d, n, "relu" if name == "relu" else "quadratic")
    if d == 2:
        angles = torch.linspace(0, math.pi if name == "quadratic" else 2 * math.pi, 2001, dtype=torch.float64)[:-1]
        grid = torch.stack([angles.cos(), angles.sin()], 1)
    else:
        grid = fibonacci_sphere(4000)
        grid = grid[grid[:, 2] >= 0]  # σ even: a hemisphere is the whole
    v_grid = grid_measure_value(X, y, activation, grid)
    result = flattest_interpolator(X, y, activation, 10 * n)
    p = activation.p
    # The grid is an upper bound on V*: column generation is never much above it, and its proven lower
    # bound never above it.  Grid spacing ≤ 0.06 rad moves V by well under 5 %.
    assert result.measure_value <= v_grid * (1 + 1e-3)
    assert result.measure_value >= v_grid * (1 - 0.05)
    assert result.measure_lower <= v_grid * (1 + 1e-9)
    assert result.lower <= (10 * n) ** (1 - p) * v_grid**p * (1 + 1e-9)


def test_lower_bound_holds_when_the_heuristic_pricing_is_crippled():
    """One start and no ascent steps: the estimate may be anything, the proven bound must stay below V*."""
    _, X, y = data(3, 20, "relu")
    exact = exact_relu_optimum(3, 20)
    weak = flattest_interpolator(
        X, y, "relu", 40, certify_up_to=0, pricing_starts=1, pricing_steps=0, slide_steps=0, rounds=3
    )
    assert weak.pricing == "bound"
    assert weak.lower <= exact * (1 + 1e-9)
    assert weak.upper >= exact * (1 - 2e-3)  # any interpolator is above the optimum (SOCP accuracy)


@pytest.mark.parametrize("name", ["relu", "quadratic"])
def test_never_worse_than_the_dictionary_it_was_warm_started_from(name):
    _, X, y = data(6, 15, "relu" if name == "relu" else "quadratic")
    dictionary = random_directions(40, 6, seed=4)
    baseline = flattest_outer_weights(dictionary, X, y, name).flatness
    result = flattest_interpolator(X, y, name, 40, start_directions=dictionary, rounds=3)
    assert result.upper <= baseline * (1 + 1e-9)
    assert result.lower <= result.upper


# --- widths ------------------------------------------------------------------------------------


def test_widths_share_one_measure_and_the_rounding_stays_within_its_bound():
    _, X, y = data(3, 12, "quadratic", noise=0.0)
    quad = get_activation("quadratic")
    p = quad.p
    base = flattest_interpolator(X, y, quad, 40, seed=0)
    results = {m: base.at_width(X, y, m) for m in (1, 2, 5, 40, 160)}
    # A separate solve at another width (same seed) finds the same measure.
    again = flattest_interpolator(X, y, quad, 160, seed=0)
    assert again.upper == pytest.approx(results[160].upper, rel=1e-12)
    for m, result in results.items():
        assert m ** (p - 1) * result.lower == pytest.approx(40 ** (p - 1) * base.lower, rel=1e-8)
        K = result.atoms.directions.shape[0]
        ideal = result.upper_measure_bound
        assert ideal * (1 - 1e-9) <= result.upper <= ideal * (1 + rounding_excess_bound(K, m, p)) + 1e-12
        assert result.upper == pytest.approx(min_flatness(result.net, X, y), rel=1e-9)
    # The teacher is one atom here, so Υ* falls like m^{1−p} = m^{−1/3} exactly.
    assert results[160].upper / results[40].upper == pytest.approx(4 ** (1 - p), rel=1e-6)


def test_a_width_below_the_atoms_is_refused_with_the_bound_that_still_holds():
    """Noisy ReLU labels in d = 3 need several atoms: asking for fewer neurons is an error that says how many
    are needed and what is still proven, never a result without a network."""
    _, X, y = data(3, 12, "relu", noise=0.3)
    result = flattest_interpolator(X, y, "relu", 24)
    K = result.atoms.directions.shape[0]
    assert K >= 2
    with pytest.raises(FlatbookInputError, match=f"below the {K} atoms.*Υ >= .*at least {K}"):
        result.at_width(X, y, K - 1)
    with pytest.raises(FlatbookInputError, match=f"below the {K} atoms"):
        flattest_interpolator(X, y, "relu", K - 1)


# --- the bad set -------------------------------------------------------------------------------


def test_bad_interpolator_directions_respect_the_alignment_bound():
    teacher, X, y = data(4, 12, "relu")
    for rho0 in (0.0, 0.5):
        result = flattest_interpolator(X, y, "relu", 30, teacher=teacher.theta_star, max_alignment=rho0, rounds=5)
        alignment = result.net.alignment(teacher.theta_star)
        assert float(alignment.max()) <= rho0 + 1e-9
        best = flattest_interpolator(X, y, "relu", 30, rounds=5)
        assert result.lower <= result.upper and best.lower <= best.upper


def test_bad_set_at_rho0_zero_in_three_dimensions_is_priced_exactly():
    teacher, X, y = data(3, 20, "relu")
    result = flattest_interpolator(X, y, "relu", 40, teacher=teacher.theta_star, max_alignment=0.0)
    assert result.pricing == "exact" and result.certified, result.status
    assert float(result.net.alignment(teacher.theta_star).max()) <= 1e-9


# --- errors ------------------------------------------------------------------------------------


def test_counts_may_be_numpy_integers_but_not_bools_or_floats():
    _, X, y = data(3, 10, "relu")
    by_numpy = flattest_interpolator(
        X, y, "relu", np.int64(20), n_start=np.int32(20), slide_steps=np.int64(20), stall_rounds=np.int64(5), rounds=3
    )
    by_int = flattest_interpolator(X, y, "relu", 20, n_start=20, rounds=3)
    assert type(by_numpy.width) is int and by_numpy.upper == by_int.upper
    assert type(by_numpy.at_width(X, y, np.int64(40)).width) is int
    for bad in (True, 20.0):
        with pytest.raises(FlatbookInputError, match="width must be a positive int"):
            flattest_interpolator(X, y, "relu", bad)
        with pytest.raises(FlatbookInputError, match="width must be a positive int"):
            by_int.at_width(X, y, bad)


def test_clear_errors():
    teacher, X, y = data(3, 10, "relu")
    with pytest.raises(FlatbookInputError, match="width"):
        flattest_interpolator(X, y, "relu", 0)
    with pytest.raises(FlatbookInputError, match="go together"):
        flattest_interpolator(X, y, "relu", 10, teacher=teacher.theta_star)
    with pytest.raises(FlatbookInputError, match=r"\[0, 1\)"):
        flattest_interpolator(X, y, "relu", 10, teacher=teacher.theta_star, max_alignment=1.0)
    with pytest.raises(FlatbookInputError, match="orthonormal"):
        flattest_interpolator(X, y, "relu", 10, teacher=2 * teacher.theta_star, max_alignment=0.5)
    with pytest.raises(FlatbookInputError, match="identically zero"):
        flattest_interpolator(X, 0 * y, "relu", 10)
    with pytest.raises(FlatbookInputError, match="n_start must be a non-negative int"):
        flattest_interpolator(X, y, "relu", 10, n_start=-1)
    with pytest.raises(FlatbookInputError, match="stall_rounds must be a positive int or None"):
        flattest_interpolator(X, y, "relu", 10, stall_rounds=0)
    with pytest.raises(FlatbookInputError, match="slide_steps must be a non-negative int"):
        flattest_interpolator(X, y, "relu", 10, slide_steps=-1)
    with pytest.raises(FlatbookInputError, match="cell_ascent must be True or False"):
        flattest_interpolator(X, y, "relu", 10, cell_ascent="yes")
    with pytest.raises(InfeasibleInterpolationError, match="at most 6"):
        flattest_interpolator(*data(3, 10, "quadratic")[1:], "quadratic", 10)


def test_pattern_enumeration_counts_every_cell_of_the_arrangement():
    """n central planes in general position cut R^3 into n^2 - n + 2 cells (no cell is all-inactive for
    Gaussian data with n = 30: that would need every x_i in one open half-space); dense sampling finds no other."""
    _, X, _ = data(3, 30, "relu")
    cells = all_activation_patterns(X)
    assert cells.shape[0] == 30**2 - 30 + 2
    sampled = activation_patterns(
        X, torch.randn(200_000, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    )
    enumerated = {tuple(row.tolist()) for row in cells}
    assert {tuple(row.tolist()) for row in sampled} <= enumerated


def test_measure_dual_bound_is_a_proven_lower_bound_on_the_bad_set():
    """eq-centred-certificate: any λ bounds V over the admissible directions from below; in d = 3 at ρ0 = 0 the
    supremum is exact, and the bound never exceeds the measure value of the flattest 0-bad interpolator."""
    from flatbook.global_flattest import measure_dual_bound

    for activation, d, n in (("relu", 3, 24), ("quadratic", 5, 6)):
        teacher = single_index(d, link=activation, seed=1)
        X, y = teacher.sample(n, seed=2)
        bad = flattest_interpolator(X, y, activation, 2 * n, teacher=teacher.theta_star, max_alignment=0.0)
        bound = measure_dual_bound(X, y, activation, y - y.mean(), teacher=teacher.theta_star, max_alignment=0.0)
        # the quadratic's bad set in d = 5 is a 4-sphere: above CERTIFY_UP_TO, so the closed-form bound
        assert bound.pricing == ("exact" if activation == "relu" else "bound")
        assert 0 < bound.value <= bad.measure_value * (1 + 1e-9)
        assert bound.dual_value == pytest.approx(float(((y - y.mean()) ** 2).sum()))
    with pytest.raises(FlatbookInputError, match="lam has 3 entries"):
        measure_dual_bound(X, y, "quadratic", torch.ones(3, dtype=torch.float64))


def test_residual_measure_bound_is_above_the_exact_measure_value_and_repairs_an_approximate_fit():
    """residual_measure_bound(X, r) ≥ V*(r), with V*(r) = s·V*(r/s) from the exact convex program over every
    activation pattern at unit scale (d = 2, 3; residuals of three sizes s: the program's absolute tolerances make
    a direct solve at s = 1e-9 useless as a reference); the remainder term max κ √M ‖e‖₂ / σ_n(Φ) of the bound is
    above V*(e) for any e (the least-norm solve of e); and a network g shrunk below V*(y), so that it fits y only
    approximately, has V*(y) ≤ Υ(g) + the bound of y − g(X): the subadditivity the bound exists for."""
    from flatbook.flatness import flatness_weights
    from flatbook.global_flattest import fit_residual_allowance, residual_measure_bound

    activation = get_activation("relu")
    generator = torch.Generator().manual_seed(7)
    for d, n in ((2, 8), (3, 10)):
        _, X, y = data(d, n, "relu", seed=d)
        patterns = all_activation_patterns(X)
        for scale in (1e-9, 1e-3, 1.0):
            unit = torch.randn(n, generator=generator, dtype=torch.float64)
            exact = scale * flattest_relu_over_patterns(X, unit, patterns).value
            assert exact <= residual_measure_bound(X, scale * unit) < math.inf
        # the remainder term alone, for a residual e no solve has reduced (the directions the function draws)
        directions = random_directions(4 * n, d, seed=0)
        features = activation(X @ directions.T)
        smallest = float(torch.linalg.svdvals(features)[n - 1])
        kappa_max = float(unit_flatness_weights(directions, X, activation).max())
        for _ in range(3):
            e = torch.randn(n, generator=generator, dtype=torch.float64)
            remainder = kappa_max * math.sqrt(4 * n) * float(torch.linalg.vector_norm(e)) / smallest
            assert flattest_relu_over_patterns(X, e, patterns).value <= remainder
        optimum = flattest_relu_over_patterns(X, y, patterns).value
        net = flattest_interpolator(X, y, "relu", 2 * n, seed=0).net
        with torch.no_grad():
            net.a.mul_(0.99)  # now flatter than any exact interpolator: only the allowance can restore the bound
        upsilon = float(flatness_weights(net.theta, X, "relu") @ net.effective_outer_weights().abs())
        assert upsilon < optimum
        assert optimum <= upsilon + residual_measure_bound(X, y - net(X).detach())
        assert optimum <= upsilon + fit_residual_allowance(net, X, y)  # the same bound, read off the network
    with pytest.raises(FlatbookInputError, match="holds for p = 1"):
        residual_measure_bound(X, y, "quadratic")
    quadratic = flattest_interpolator(X[:5], y[:5], "quadratic", 10, seed=0).net  # d = 3: at most 6 samples
    assert math.isnan(fit_residual_allowance(quadratic, X[:5], y[:5]))  # not subadditive for p = 4/3: no allowance


@pytest.mark.parametrize("gap", [0.0, 1e-15])
def test_residual_measure_bound_is_infinite_where_the_features_lose_rank_to_round_off(gap):
    """Two samples equal (or equal up to round-off relative to the data): the feature matrix is rank deficient,
    or its n-th singular value is below what round-off on its largest can move; no finite bound is proven."""
    from flatbook.global_flattest import residual_measure_bound

    _, X, _ = data(3, 8, "relu", seed=1)
    X[1] = X[0] * (1 + gap)
    residual = torch.linspace(-1.0, 1.0, 8, dtype=torch.float64)
    assert residual_measure_bound(X, residual) == math.inf


def test_slide_on_the_tape_is_the_slide_with_fresh_gradients():
    """The slide evaluates every trial on the autograd tape and takes the gradient at an accepted trial from
    it; a reference loop that evaluates trials without the tape and recomputes each gradient by a fresh
    forward pass (the slide as it was) must end at the same directions and value, which is V there."""
    _, X, y = data(3, 12, "relu")
    activation = get_activation("relu")
    U = random_directions(12, 3, seed=4)

    def value(V):
        mu = torch.linalg.solve(activation(X @ V.T), y)
        return (unit_flatness_weights(V, X, activation) ** (1.0 / activation.p) * mu.abs()).sum()

    def fresh_gradient_slide(U, steps, angle=0.1):
        current = float(value(U))
        for _ in range(steps):
            V = U.clone().requires_grad_(True)
            (grad,) = torch.autograd.grad(value(V), V)
            grad = grad - (grad * U).sum(1, keepdim=True) * U
            largest = float(torch.linalg.vector_norm(grad, dim=1).max())
            while angle > 1e-6:
                trial = U - (angle / largest) * grad
                trial = trial / torch.linalg.vector_norm(trial, dim=1, keepdim=True)
                with torch.no_grad():
                    trial_value = float(value(trial))
                if trial_value < current:
                    U, current, angle = trial, trial_value, angle * 1.5
                    break
                angle *= 0.5
        return U, current

    moved, reported = slide(U, X, y, activation, None, steps=10)
    expected, expected_value = fresh_gradient_slide(U, steps=10)
    assert not moved.requires_grad
    torch.testing.assert_close(moved, expected, rtol=1e-12, atol=1e-12)
    assert reported == pytest.approx(expected_value, rel=1e-12)
    assert reported == pytest.approx(float(value(moved)), rel=1e-12) and reported < float(value(U))
    singular = torch.cat([U[:1]] * 12)
    assert slide(singular, X, y, activation, None)[1] == math.inf


# --- the certificate, recomputed -----------------------------------------------------------------


def certificate_cases():
    """(result, X, y, teacher, ρ0) across activations, pricing modes and widths: exact (ReLU, d = 2), cap
    branch-and-bound (quadratic, d = 2; ReLU on a ρ0 = 0.5 band, d = 2), closed-form bounds (leaky ReLU, d = 5)."""
    cases = []
    for name, d, n, width, bad in (
        ("relu", 2, 10, 20, None),
        ("quadratic", 2, 3, 12, None),
        ("relu", 3, 10, 20, 0.5),
        ("leaky_relu", 5, 12, 24, None),
    ):
        teacher, X, y = data(d, n, name, noise=0.0, seed=2)
        options = {} if bad is None else {"teacher": teacher.theta_star, "max_alignment": bad}
        result = flattest_interpolator(X, y, name, width, rounds=8, **options)
        cases.append((result, X, y, options))
    return cases


CASES = None


def cases():
    global CASES
    if CASES is None:
        CASES = certificate_cases()
    return CASES


def test_verify_certificate_recomputes_every_proven_bound():
    from flatbook.global_flattest import verify_certificate

    modes = set()
    for result, X, y, options in cases():
        check = verify_certificate(result, X, y, **options)
        modes.add(result.pricing)
        assert check.ok, check.problems
        assert check.sampled_sup <= result.dual_sup * (1 + 1e-9) and check.sampled_sup <= check.sup * (1 + 1e-12)
        assert result.measure_lower <= check.measure_lower * (1 + 2e-6) + 1e-300
        assert check.lower <= check.upsilon * (1 + 1e-9)
    assert modes == {"exact", "branch-and-bound", "bound"}


def doctored(result, **changes):
    import dataclasses

    return dataclasses.replace(result, **changes)


def test_verify_certificate_catches_what_a_wrong_certificate_looks_like():
    """Each class of bug a proof-critical line could have, planted in a correct result: a bound taken from a
    dual not scaled into the feasible set (the claimed sup understated), a lower bound above what its own λ
    gives, lower not m^{1−p}V^p, a network of another width or that does not interpolate, a direction outside
    the band by 1e-9, Υ misreported, and certified not following from the numbers."""
    from flatbook.global_flattest import verify_certificate

    (exact, X, y, _), _, (band, Xb, yb, band_options), _ = cases()
    bad_variants = [
        doctored(exact, dual_sup=exact.dual_sup * 0.9),  # the feasibility scaling dropped
        doctored(exact, measure_lower=exact.measure_lower * 1.01),
        doctored(exact, lower=exact.lower * 1.01),
        doctored(exact, upper=exact.upper * 1.001),
        doctored(exact, certified=not exact.certified),
        doctored(exact, width=exact.width + 1),
    ]
    for variant in bad_variants:
        check = verify_certificate(variant, X, y, raise_on_failure=False)
        assert not check.ok
    net = exact.net
    wrong_output = TwoLayerNet(net.a * (1 + 1e-6), net.theta, net.activation)
    assert not verify_certificate(doctored(exact, net=wrong_output), X, y, raise_on_failure=False).ok
    # One direction moved out of the band by 1e-9 in ρ.
    teacher = band_options["teacher"]
    theta = band.net.theta.clone()
    u = theta[0] / torch.linalg.vector_norm(theta[0])
    inside = (u @ teacher.T) @ teacher
    outside = u - inside
    rho = float(torch.linalg.vector_norm(inside))
    target = band_options["max_alignment"] + 1e-9
    moved = target * inside / rho + math.sqrt(1 - target**2) * outside / torch.linalg.vector_norm(outside)
    theta[0] = moved * torch.linalg.vector_norm(theta[0])
    outside_band = TwoLayerNet(band.net.a, theta, band.net.activation)
    check = verify_certificate(doctored(band, net=outside_band), Xb, yb, **band_options, raise_on_failure=False)
    assert any("ρ =" in problem for problem in check.problems)
    with pytest.raises(SolverError, match="does not check"):
        verify_certificate(bad_variants[0], X, y)


def test_verify_certificate_reports_an_unfinished_branch_and_bound_as_unconfirmed_not_wrong():
    """A correct certificate (d = 3 ReLU, exact pricing: its sup G_λ is attained at a kink, where caps close
    slowly) checked with too few caps: the recomputed bound falls short of the claim, which is then neither
    confirmed nor refuted, so ``ok`` holds, ``confirmed`` is False and ``unconfirmed`` says why; a claim the
    result's own λ does not support still fails."""
    from flatbook.global_flattest import verify_certificate

    X, y = single_index(d=3, link="relu", seed=0).sample(6, seed=1)
    result = flattest_interpolator(X, y, width=6)
    assert result.pricing == "exact" and result.stop.proven
    check = verify_certificate(result, X, y, max_caps=200, raise_on_failure=False)
    assert check.ok and not check.confirmed and "max_caps" in check.unconfirmed[0], check
    assert check.measure_lower < result.measure_lower <= check.measure_lower * 1.5
    inflated = doctored(result, measure_lower=result.measure_lower * 1.01)
    assert not verify_certificate(inflated, X, y, max_caps=200, raise_on_failure=False).ok


def test_heuristic_pricing_never_proves_more_than_the_exact_optimum():
    """With certified pricing off, the proven lower bound (closed forms) stays below the certified optimum of
    the same data, and above nothing it should not."""
    _, X, y = data(3, 16, "relu", noise=0.3)
    exact = flattest_interpolator(X, y, "relu", 32)
    heuristic = flattest_interpolator(X, y, "relu", 32, certify_up_to=0)
    assert exact.certified and heuristic.pricing == "bound"
    assert heuristic.lower <= exact.lower * (1 + 1e-9)
    assert heuristic.upper >= exact.lower * (1 - 1e-9)


@pytest.mark.parametrize("p", [4 / 3, 1.5, 2.0])
@pytest.mark.parametrize("K,m", [(2, 6), (5, 20), (10, 100)])
def test_the_rounding_allowance_holds_and_is_nearly_attained(p, K, m):
    """(m/(m − K))^{p−1} − 1 bounds the split's excess over m^{1−p}V^p, and it is nearly attained: one heavy atom
    and K − 1 light ones force the heavy atom down to m − K + 1 copies, an excess of b^q − 1 with
    b = m/(m − K + 1), q = p − 1.  With a = m/(m − K), concavity of t^q gives a^q − 1 ≤ q(a − 1) and
    b^q − 1 ≥ q(b − 1)/b, so the allowance is at most K m / ((K − 1)(m − K)) times the excess; an allowance with
    the exponent p instead (a^p − 1 ≥ p(a − 1)) would exceed that factor whenever m > 2K − 2."""
    weights = torch.cat([torch.ones(1), torch.full((K - 1,), 1e-9)]).to(torch.float64)
    kappa = torch.ones(K, dtype=torch.float64)
    counts = split_into_copies(weights, kappa, p, m)
    value = float((kappa * weights.abs() ** p * torch.tensor(counts, dtype=torch.float64) ** (1 - p)).sum())
    ideal = m ** (1 - p) * float((kappa ** (1 / p) * weights.abs()).sum()) ** p
    excess, allowance = value / ideal - 1, rounding_excess_bound(K, m, p)
    assert excess <= allowance
    assert excess >= (m / (m - K + 1)) ** (p - 1) - 1 - 1e-6
    assert allowance <= excess * K * m / ((K - 1) * (m - K)) * (1 + 1e-6)


def test_a_master_that_highs_calls_infeasible_by_round_off_still_ends_in_a_verified_result(monkeypatch):
    """When HiGHS, asked for a vertex that the dual did not identify, calls the master's columns unable to
    interpolate although the interior point interpolates with them, the interior point's support, corrected, is
    used instead, and the result still checks."""
    from flatbook.global_flattest import verify_certificate
    from flatbook.weighted_l1 import WeightedL1Master

    def refuses(self):
        raise InfeasibleInterpolationError("the master cannot interpolate (round-off)")

    monkeypatch.setattr(column_generation, "vertex_from_dual", lambda *args, **kwargs: None)
    monkeypatch.setattr(WeightedL1Master, "solve", refuses)
    _, X, y = data(4, 16, "relu", noise=0.3)
    result = flattest_interpolator(X, y, "relu", 32, rounds=6)
    assert verify_certificate(result, X, y).ok


def test_pruning_keeps_a_support_larger_than_half_the_cap_whole():
    """An exact solution need not be a vertex (a refitted interior point spreads its weight over copies of a
    column): pruning keeps all of its support, so the master still interpolates at the same optimum.  Found on
    d = 8, n = 64 (`single_index(8, "relu", seed=3)`, long options), where a support of 1157 columns above half
    the cap was cut and the next master could not interpolate."""
    generator = torch.Generator().manual_seed(0)
    n = 5
    Phi = torch.rand(n, 12, generator=generator, dtype=torch.float64)
    y = torch.rand(n, generator=generator, dtype=torch.float64)
    master = RestrictedMaster.of_columns(Phi, torch.ones(12, dtype=torch.float64), y)
    vertex = master.solve()
    optimum = vertex.solution.value
    on = np.flatnonzero(np.abs(vertex.solution.mu) > 0)
    copies = 10  # each support column 10 times, the weight split evenly: optimal, not basic
    master.add_columns(Phi[:, on].repeat(1, copies), torch.ones(len(on) * copies, dtype=torch.float64))
    mu = np.concatenate([np.zeros(12), np.tile(vertex.solution.mu[on] / copies, copies)])
    spread = vertex._replace(solution=dataclasses.replace(vertex.solution, mu=mu, basic=False))
    pruned = master.prune(spread, cap=len(on) * copies)  # half the cap is half the support
    assert master.size == len(on) * copies  # the support, whole
    assert np.abs(master.Phi.cpu().numpy() @ pruned.solution.mu - y.numpy()).max() < 1e-12
    assert master.solve().solution.value == pytest.approx(optimum, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("d, n, seed", [(6, 48, 1), (8, 64, 3)])
def test_long_runs_that_pruned_part_of_a_support_now_end_with_a_verified_result(d, n, seed):
    """The instances where a long run (80 rounds, no tailing-off, 256 pricing starts) cut part of a refitted
    support above half the column cap and raised "the … directions in the master cannot interpolate"."""
    from flatbook.global_flattest import verify_certificate

    X, y = single_index(d, link="relu", seed=seed).sample(n, seed=seed + 1000)
    result = flattest_interpolator(X, y, "relu", 2 * n, seed=seed, rounds=80, stall_rounds=None, pricing_starts=256)
    assert verify_certificate(result, X, y).ok


BASE_OPTIONS = {"rounds": 6, "seed": 0}


def fingerprint(result):
    return (
        result.stop,
        result.rounds,
        result.pricing,
        round(result.upper, 10),
        tuple(round(row["master"], 10) for row in result.history),
        tuple(row["master_exact"] for row in result.history),
    )


@pytest.mark.parametrize(
    "option",
    [
        {"rounds": 2},
        {"tol": 0.5},
        {"pricing_starts": 1},
        {"pricing_steps": 0},
        {"slide_steps": 0},
        {"certify_up_to": 5},
        {"inexact_master": False},
        {"seed": 1},
        {"n_start": 0},
        {"time_limit": 1e-9},
    ],
    ids=lambda option: next(iter(option)),
)
def test_every_option_of_the_solver_changes_what_it_should(option):
    """A parameter that is silently ignored fails here: each one, set away from its default, changes the run
    (its stop, rounds, pricing, value, or the masters' path) on a small leaky-ReLU instance in d = 5."""
    teacher, X, y = data(5, 10, "leaky_relu", noise=0.3)
    base = BASE_OPTIONS
    options = {**base, **option}
    if "n_start" in option:  # the start directions must then interpolate on their own
        options["start_directions"] = random_directions(30, 5, seed=9)
    default = flattest_interpolator(X, y, "leaky_relu", 20, **base)
    changed = flattest_interpolator(X, y, "leaky_relu", 20, **options)
    assert fingerprint(changed) != fingerprint(default)
    if "time_limit" in option:
        assert changed.stop is StopReason.TIME_LIMIT and changed.rounds == 1
    if "inexact_master" in option:
        assert all(row["master_exact"] for row in changed.history)


def test_time_limit_spends_its_second_half_on_a_proof():
    """Past half the time limit the pricer is raised to its most thorough level: on a d = 4 ReLU instance with
    certified pricing (cap branch-and-bound), a limit already half spent at the first round prices it by the
    branch-and-bound (level 2, caps bounded), where without a limit the first round is the cheap ascent."""
    _, X, y = data(4, 12, "relu", noise=0.0)
    options = {"certify_up_to": 4, "rounds": 1, "seed": 0}
    limited = flattest_interpolator(X, y, "relu", 24, time_limit=1e-9, **options)
    unlimited = flattest_interpolator(X, y, "relu", 24, **options)
    assert limited.history[0]["pricing_level"] == 2 and limited.history[0]["caps"] > 0
    assert unlimited.history[0]["pricing_level"] == 0 and unlimited.history[0]["caps"] == 0


def test_max_caps_bounds_the_branch_and_bound_of_a_round():
    """The first round of a d = 4 ReLU instance priced by cap branch-and-bound (the time limit already half
    spent): with a budget of 1000 caps the search stops early (at most one batch of 2 × 2048 beyond it) and
    proves a weaker bound than with the default budget at the same dual point."""
    _, X, y = data(4, 12, "relu", noise=0.0)
    options = {"certify_up_to": 4, "rounds": 1, "seed": 0, "time_limit": 1e-9}
    few = flattest_interpolator(X, y, "relu", 24, max_caps=1000, **options)
    default = flattest_interpolator(X, y, "relu", 24, **options)
    assert few.history[0]["caps"] <= 1000 + 2 * 2048 < default.history[0]["caps"]
    assert few.lower < default.lower


def test_stall_rounds_ends_a_tailing_off_run_and_none_runs_on():
    """A noiseless quadratic teacher in d = 8 (pricing by bounds), whose bound creeps up while the master stands
    still: a window of 2 rounds stops it (after escalating once), no window lets it run to the round limit."""
    _, X, y = data(8, 16, "quadratic", noise=0.0)
    stopped = flattest_interpolator(X, y, "quadratic", 32, seed=0, stall_rounds=2, rounds=20)
    unstopped = flattest_interpolator(X, y, "quadratic", 32, seed=0, stall_rounds=None, rounds=20)
    assert stopped.stop is StopReason.STALLED and stopped.rounds < 20
    assert unstopped.stop is StopReason.ROUND_LIMIT and unstopped.rounds == 20
    assert any(row["pricing_level"] == 1 for row in stopped.history)  # escalated before stopping


def test_at_the_branch_and_bound_level_tailing_off_is_judged_on_the_proven_bound():
    """A d = 4 ReLU instance (n = 16, width 32) certified by cap branch-and-bound: an early heuristic round
    estimates a lower bound above the optimum, which then never moves.  Judged on that estimate the run stopped
    as stalled at a proven gap just above tol while the proven bound was still rising; judged on the proven
    bound, the rising bound keeps it going until it is certified."""
    X, y = single_index(4, link="relu", noise_std=0.0, seed=2).sample(16, seed=1002)
    result = flattest_interpolator(X, y, "relu", 32, certify_up_to=4, tol=0.01, rounds=200)
    assert result.pricing == "branch-and-bound"
    assert result.stop is StopReason.CONVERGED and result.certified and result.gap <= 0.01


def test_progress_shows_a_bar_and_changes_nothing_else(capsys):
    _, X, y = data(5, 10, "leaky_relu", noise=0.3)
    quiet = flattest_interpolator(X, y, "leaky_relu", 20, **BASE_OPTIONS)
    shown = flattest_interpolator(X, y, "leaky_relu", 20, progress=True, **BASE_OPTIONS)
    assert "flattest interpolator" in capsys.readouterr().err
    assert fingerprint(shown) == fingerprint(quiet)


def test_the_cell_ascent_grows_with_the_pricing_level(monkeypatch):
    """At level 0 the cell ascent starts from CELL_ASCENT_STARTS[0] best endpoints and as many random starts,
    CELL_ASCENT_STEPS[0] moves each; once a heuristic stop was about to fire (level 1), from the larger
    CELL_ASCENT_STARTS[1] and CELL_ASCENT_STEPS[1]: a run that ends on a heuristic stop has priced at both."""
    _, X, y = data(5, 20, "relu", noise=0.0)
    seen = set()
    ascend_cells = column_generation.ascend_cells

    def recorded(lam, X_, activation, starts, basis=None, max_steps=20):
        seen.add((starts.shape[0], max_steps))
        return ascend_cells(lam, X_, activation, starts, basis, max_steps=max_steps)

    monkeypatch.setattr(column_generation, "ascend_cells", recorded)
    result = flattest_interpolator(X, y, "relu", 40, seed=1)
    assert not result.stop.proven  # d = 5: heuristic pricing, so the run escalated before it stopped
    levels = zip(column_generation.CELL_ASCENT_STARTS, column_generation.CELL_ASCENT_STEPS, strict=True)
    assert seen == {(2 * starts, steps) for starts, steps in levels}


@pytest.mark.parametrize(
    ("name", "d", "rho0", "ascends"),
    [
        ("relu", 4, None, True),
        ("leaky_relu", 5, None, True),
        ("relu", 5, 0.0, True),
        ("relu", 3, None, False),
        ("quadratic", 5, None, False),
        ("relu", 4, 0.5, False),
    ],
)
def test_the_cell_ascent_prices_the_relu_family_above_three_dimensions_over_whole_subspheres(
    name, d, rho0, ascends, monkeypatch
):
    """By default (never with ``cell_ascent=False``), the cell-by-cell ascent runs in every pricing round of a
    ReLU-family solve without exact pricing over a whole subsphere (the sphere, or ρ0 = 0), never with exact pricing (d
    ≤ 3), for other activations or on a band (ρ0 > 0); it never ends below a start, and with ρ0 = 0 its directions stay
    orthogonal to the teacher."""

    teacher, X, y = data(d, 3 * d, name, noise=0.0)
    calls = []
    ascend_cells = column_generation.ascend_cells

    def recorded(lam, X_, activation, starts, basis=None, **kwargs):
        U, values = ascend_cells(lam, X_, activation, starts, basis, **kwargs)
        calls.append((starts, U, values, lam, basis))
        return U, values

    monkeypatch.setattr(column_generation, "ascend_cells", recorded)
    options = {} if rho0 is None else {"teacher": teacher.theta_star, "max_alignment": rho0}
    flattest_interpolator(X, y, name, 6 * d, cell_ascent=False, **options)
    assert not calls
    result = flattest_interpolator(X, y, name, 6 * d, **options)
    assert (len(calls) > 0) == ascends
    if ascends:
        assert len(calls) >= result.rounds
        for starts, U, values, lam, basis in calls:
            assert bool((values >= dual_ratio(starts, lam, X, get_activation(name)) * (1 - 1e-12)).all())
            if basis is not None:  # ρ0 = 0: the directions orthogonal to the teacher
                assert float((U - U @ basis @ basis.T).abs().max()) < 1e-9
