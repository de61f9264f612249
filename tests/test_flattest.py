import cvxpy as cp
import numpy as np
import pytest
import scipy.linalg
import torch

from flatbook import TwoLayerNet, flattest_outer_weights, min_flatness
from flatbook.data import sum_of_single_index
from flatbook.errors import FlatbookInputError, InfeasibleInterpolationError, SolverError, SolverFallbackWarning
from flatbook.flattest import feature_matrix


def problem(n=15, m=40, d=6, seed=0):
    model = sum_of_single_index(d=d, k=2, link="relu", noise_std=0.1, seed=seed)
    X, y = model.sample(n, seed=seed + 1)
    # Directions with different norms: only directions may matter.
    gen = torch.Generator().manual_seed(seed + 2)
    theta = torch.randn(m, d, generator=gen, dtype=torch.float64) * torch.rand(m, 1, generator=gen, dtype=torch.float64)
    return theta, X, y


def independent_cvxpy_optimum(theta, X, y, activation):
    """The program written directly in the actual outer weights a, with κ computed here in numpy."""
    theta, X, y = theta.numpy(), X.numpy(), y.numpy()
    c, p, n = activation.degree, activation.p, X.shape[0]
    norms = np.linalg.norm(theta, axis=1)
    z = X @ (theta / norms[:, None]).T
    sigma = activation(torch.from_numpy(z)).numpy()
    dsigma = activation.derivative(torch.from_numpy(z)).numpy()
    S = 2 / n * (sigma**2).sum(0)
    T = 2 / n * ((dsigma**2) * (X**2).sum(1)[:, None]).sum(0)
    kappa = (c + 1) * c ** (-c / (c + 1)) * S ** (1 / (c + 1)) * T ** (c / (c + 1))
    weights = kappa * norms ** (c * p)  # |ã_j|^p = ||θ_j||^{cp} |a_j|^p
    a = cp.Variable(theta.shape[0])
    features = activation(torch.from_numpy(X @ theta.T)).numpy()
    objective = weights @ cp.abs(a) if p == 1 else cp.sum(cp.multiply(weights, cp.power(cp.abs(a), p)))
    prob = cp.Problem(cp.Minimize(objective), [features @ a == y])
    prob.solve(solver="CLARABEL")
    assert prob.status == "optimal"
    return prob.value


@pytest.mark.parametrize("solver", ["newton", "CLARABEL"])
@pytest.mark.parametrize("seed", [0, 1])
def test_flattest_interpolates_and_is_certified(activation, seed, solver):
    theta, X, y = problem(seed=seed)
    result = flattest_outer_weights(theta, X, y, activation, solver=solver)
    assert result.status == "optimal" and result.solver == solver
    assert (result.net(X) - y).abs().max().item() <= 1e-8 * y.abs().max().item()
    assert abs(result.duality_gap) <= 1e-6
    assert result.lower_bound <= result.flatness * (1 + 1e-12)
    assert result.flatness == pytest.approx(min_flatness(result.net, X, y), rel=1e-8)
    assert result.p == pytest.approx(activation.p)
    torch.testing.assert_close(result.effective_a, result.net.effective_outer_weights())


@pytest.mark.parametrize("solver", ["newton", "CLARABEL"])
def test_objective_matches_an_independent_cvxpy_formulation(activation, solver):
    theta, X, y = problem()
    result = flattest_outer_weights(theta, X, y, activation, solver=solver)
    assert result.flatness == pytest.approx(independent_cvxpy_optimum(theta, X, y, activation), rel=1e-6)


@pytest.mark.parametrize("name", ["relu", "quadratic"])
@pytest.mark.parametrize("noise_std", [0.0, 0.3])
def test_fast_solver_agrees_with_clarabel(name, noise_std):
    # Noiseless labels with the teacher among the directions make the p = 1 optimum degenerate.
    model = sum_of_single_index(d=12, k=2, link="relu", noise_std=noise_std, seed=5)
    X, y = model.sample(60, seed=6)
    theta = torch.cat(
        [model.theta_star, torch.randn(150, 12, generator=torch.Generator().manual_seed(7), dtype=torch.float64)]
    )
    fast = flattest_outer_weights(theta, X, y, name, solver="newton")
    reference = flattest_outer_weights(theta, X, y, name, solver="CLARABEL")
    assert fast.solver == "newton"
    assert fast.flatness == pytest.approx(reference.flatness, rel=1e-6)
    assert fast.residual <= 1e-8 * y.abs().max().item()
    assert abs(fast.duality_gap) <= 1e-6


def test_interior_point_stops_at_the_first_certified_vertex():
    from flatbook.flatness import flatness_weights
    from flatbook.flattest import feature_matrix
    from flatbook.lp import interior_point, vertex_from_dual

    theta, X, y = problem(n=30, m=120)
    Phi, kappa = feature_matrix(theta, X, "relu"), flatness_weights(theta, X, "relu")
    tried = []

    def vertex(lam):
        tried.append(lam)
        return vertex_from_dual(lam, Phi, y, kappa, tight_tols=())

    _, _, early, _ = interior_point(Phi, y, kappa, vertex=vertex)
    assert early is not None and len(tried) >= 1
    full_lam, _, none, _ = interior_point(Phi, y, kappa)
    full = vertex_from_dual(full_lam, Phi, y, kappa)
    assert none is None and full is not None
    torch.testing.assert_close(early[0], full[0], atol=1e-10, rtol=1e-9)  # the same optimal vertex
    value = float((kappa * early[0].abs()).sum())
    assert value == pytest.approx(float(early[1] @ y), rel=1e-9)  # zero duality gap: exact


def test_vertex_from_dual_survives_the_nnls_iteration_limit(monkeypatch):
    """scipy's NNLS raises at its iteration limit (it did on a tight set of a d = 100, n = 1600 master): the
    vertex is then not identified (None, so the caller falls back to the simplex) instead of an exception."""
    import flatbook.lp as lp
    from flatbook.flatness import flatness_weights

    theta, X, y = problem(n=30, m=120)
    Phi, kappa = feature_matrix(theta, X, "relu"), flatness_weights(theta, X, "relu")
    lam = lp.interior_point(Phi, y, kappa).lam
    calls = []

    def nnls(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("Maximum number of iterations reached.")

    monkeypatch.setattr(lp.scipy.optimize, "nnls", nnls)
    lam_far = lam + 0.5 * lam.abs().max() * torch.ones_like(lam)  # no basis certifies: the tight-set NNLS runs
    assert lp.vertex_from_dual(lam_far, Phi, y, kappa) is None and len(calls) == 2


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.6, 0.9])
def test_nearly_degenerate_vertices_are_certified(rho):
    """Chapter 5's paper grid points (single-index, leaky ReLU, n = 500) where the fast solver fell back to
    Clarabel until these tests.  At ρ* = 0.9 the optimal basis is identified, but on its ill-conditioned Φ_S
    (condition ~3e5) the basis dual violates a constraint by 1.5e-12 of round-off: scaled into the feasible
    set it certifies the vertex to a relative gap < 1e-9.  At ρ* = 0.6 one optimal weight is ~1e-8 and the
    dual ratios rank a wrong column n-th; the interior point's primal iterate ranks the right one."""
    import warnings
    from dataclasses import replace

    from flatbook.experiments import paper_experiments as pe

    config = replace(pe.CONFIGS["paper"], n=500)
    teacher = pe.teacher_for("single-index, LeakyReLU", config, 0)
    X, y = teacher.sample(config.n, seed=1000)
    i = [round(float(r), 2) for r in config.rhos].index(rho)
    directions = pe.directions_with_alignment(teacher.theta_star, 2 * config.n, float(config.rhos[i]), seed=i + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SolverFallbackWarning)
        result = flattest_outer_weights(directions, X, y, "leaky_relu")
    assert result.solver == "newton" and result.status == "optimal"
    assert abs(result.duality_gap) <= 1e-9 and result.support_size <= config.n


def test_newton_falls_back_to_clarabel(monkeypatch):
    import flatbook.flattest as flattest
    import flatbook.lp as lp

    theta, X, y = problem()
    monkeypatch.setattr(
        flattest,
        "interior_point",
        lambda Phi, y, kappa, vertex=None: (torch.zeros_like(y), torch.zeros(Phi.shape[1], dtype=y.dtype), None, None),
    )
    monkeypatch.setattr(lp, "simplex_crossover", lambda *args, **kwargs: None)  # nor do simplex pivots certify
    with pytest.warns(SolverFallbackWarning, match="Clarabel"):
        result = flattest_outer_weights(theta, X, y, "relu", solver="newton")
    assert result.solver == "CLARABEL"
    assert result.status == (
        "optimal (Clarabel after Newton: the interior-point dual did not identify an optimal vertex)"
    )
    assert abs(result.duality_gap) <= 1e-6


def test_auto_solver_choice():
    theta, X, y = problem(n=15, m=40)
    assert flattest_outer_weights(theta, X, y, "relu").solver == "CLARABEL"  # n m = 600 < NEWTON_MIN_SIZE
    assert flattest_outer_weights(theta, X, y, "quadratic").solver == "newton"  # p > 1: always the fast one
    theta, X, y = problem(n=60, m=120)
    assert flattest_outer_weights(theta, X, y, "relu").solver == "newton"


def test_dual_bound_holds_for_every_interpolator_with_the_same_directions(activation):
    theta, X, y = problem(seed=3)
    result = flattest_outer_weights(theta, X, y, activation)
    features = activation(X @ (theta / theta.norm(dim=1, keepdim=True)).T).numpy()
    null_space = torch.from_numpy(scipy.linalg.null_space(features))
    gen = torch.Generator().manual_seed(0)
    scale = result.effective_a.abs().max()
    for _ in range(50):
        a_eff = result.effective_a + null_space @ (
            scale * torch.randn(null_space.shape[1], generator=gen, dtype=torch.float64)
        )
        other = TwoLayerNet(a_eff / theta.norm(dim=1) ** activation.degree, theta, activation)
        assert (other(X) - y).abs().max() < 1e-8
        upsilon = min_flatness(other, X, y)
        assert result.lower_bound <= upsilon
        assert result.flatness <= upsilon


def test_relu_solution_is_sparse():
    theta, X, y = problem(n=20, m=80)
    result = flattest_outer_weights(theta, X, y, "relu")
    assert result.support_size <= X.shape[0]
    quad = flattest_outer_weights(theta, X, y, "quadratic")
    assert quad.support_size == theta.shape[0]


def test_too_few_neurons():
    theta, X, y = problem(n=15, m=10)
    with pytest.raises(InfeasibleInterpolationError, match="only m = 10 neurons for n = 15 samples"):
        flattest_outer_weights(theta, X, y, "relu")


def test_quadratic_features_of_low_rank():
    theta, X, y = problem(n=30, m=60, d=5)
    with pytest.raises(InfeasibleInterpolationError, match=r"rank 15 < n .*span at most 15 dimensions in d = 5"):
        flattest_outer_weights(theta, X, y, "quadratic")


def test_uncertifiable_solution_raises():
    """The certification gate refuses a primal-dual pair whose duality gap exceeds its tolerance: the optimal
    weights with half the optimal dual point (weak duality then proves only half of Υ)."""
    from flatbook.flattest import certify, feature_matrix

    theta, X, y = problem(n=30, m=90, d=10)
    result = flattest_outer_weights(theta, X, y, "relu")
    Phi = feature_matrix(theta, X, result.net.activation)
    args = (Phi, y, result.kappa, 1.0, 1e-8, 1e-6)
    assert certify(result.effective_a, result.dual, *args)[1] == pytest.approx(result.lower_bound, rel=1e-12)
    with pytest.raises(SolverError, match="could not certify.*duality gap"):
        certify(result.effective_a, 0.5 * result.dual, *args)


def test_l1_polish_recovers_the_vertex_from_an_inaccurate_start():
    """Two SCS iterations leave the LP far from optimal; the polish (the primal's heaviest columns, then simplex
    pivots) still reaches the optimal vertex, certified and equal to the default solve."""
    theta, X, y = problem(n=30, m=90, d=10)
    result = flattest_outer_weights(theta, X, y, "relu", solver="SCS", solver_options={"max_iters": 2})
    reference = flattest_outer_weights(theta, X, y, "relu")
    assert result.flatness == pytest.approx(reference.flatness, rel=1e-9)
    assert result.lower_bound >= result.flatness * (1 - 1e-6)


def test_dual_newton_polish_recovers_from_an_inaccurate_start():
    theta, X, y = problem(n=30, m=90, d=10)
    result = flattest_outer_weights(theta, X, y, "quadratic", solver="SCS", solver_options={"max_iters": 2})
    reference = flattest_outer_weights(theta, X, y, "quadratic")
    assert result.status == "optimal (polished from optimal_inaccurate)"
    assert result.flatness == pytest.approx(reference.flatness, rel=1e-10)


def test_unavailable_solver_raises():
    theta, X, y = problem()
    with pytest.raises(FlatbookInputError, match="unknown solver 'NOT_A_SOLVER'"):
        flattest_outer_weights(theta, X, y, "relu", solver="NOT_A_SOLVER")
    with pytest.raises(FlatbookInputError, match="Did you mean 'CLARABEL'"):
        flattest_outer_weights(theta, X, y, "relu", solver="clarabell")


def test_bad_inputs():
    theta, X, y = problem()
    y_nan = y.clone()
    y_nan[0] = float("nan")
    with pytest.raises(FlatbookInputError, match="y contains 1 NaN"):
        flattest_outer_weights(theta, X, y_nan, "relu")
    with pytest.raises(FlatbookInputError, match="X has 15 rows but y has 14"):
        flattest_outer_weights(theta, X, y[:-1], "relu")
    with pytest.raises(FlatbookInputError, match="unknown activation"):
        flattest_outer_weights(theta, X, y, "sigmoid")
    with pytest.raises(FlatbookInputError, match="identically zero"):
        flattest_outer_weights(theta, X, torch.zeros_like(y), "relu")


@pytest.mark.parametrize("n,columns,blocks", [(1, 3, 4), (3, 7, 4), (10, 40, 4), (33, 100, 8), (50, 20, 3), (4, 0, 4)])
@pytest.mark.parametrize("weighted", [True, False])
def testweighted_gram_is_the_full_product(n, columns, blocks, weighted):
    """Φ diag(d) Φᵀ (Φ Φᵀ without d), blocked (min_entries=0) and as one GEMM alike, for any number of rows
    (fewer than the blocks too) and of columns (fewer than the rows, or none)."""
    from flatbook.lp import weighted_gram

    gen = torch.Generator().manual_seed(n)
    Phi = torch.randn(n, columns, generator=gen, dtype=torch.float64)
    d = torch.rand(columns, generator=gen, dtype=torch.float64) if weighted else None
    full = (Phi if d is None else Phi * d) @ Phi.T
    for gram in (weighted_gram(Phi, d, blocks=blocks, min_entries=0), weighted_gram(Phi, d)):
        assert gram.shape == (n, n)
        torch.testing.assert_close(gram, full, rtol=1e-13, atol=1e-13)


def highs_l1_optimum(Phi, y, kappa):
    """min Σ κ_j |ã_j| s.t. Φ ã = y by HiGHS's simplex on the split LP (ã = ã⁺ − ã⁻): an independent value."""
    Phi, y, kappa = Phi.numpy(), y.numpy(), kappa.numpy()
    result = scipy.optimize.linprog(
        np.concatenate([kappa, kappa]), A_eq=np.hstack([Phi, -Phi]), b_eq=y, bounds=(0, None), method="highs-ds"
    )
    assert result.status == 0
    return result.fun


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("sparse_labels", [False, True])
def testsimplex_crossover_reaches_the_optimum_from_any_basis(seed, sparse_labels):
    """From a random basis (far from optimal) the pivots reach the LP optimum, certified, with HiGHS's value;
    labels that three columns fit exactly give degenerate bases (weights at zero) on the way, and for some
    seeds a degenerate optimum."""
    from flatbook.flatness import flatness_weights
    from flatbook.flattest import feature_matrix
    from flatbook.lp import simplex_crossover

    theta, X, y = problem(n=12, m=60, seed=seed)
    Phi, kappa = feature_matrix(theta, X, "relu"), flatness_weights(theta, X, "relu")
    if sparse_labels:
        y = Phi[:, :3] @ torch.tensor([1.0, -0.5, 2.0], dtype=Phi.dtype)
    gen = torch.Generator().manual_seed(seed)
    start = torch.randperm(Phi.shape[1], generator=gen)[: Phi.shape[0]]
    signs = torch.where(torch.rand(Phi.shape[0], generator=gen) < 0.5, -1.0, 1.0).to(Phi.dtype)
    a, lam = simplex_crossover(start, signs, Phi, y, kappa, max_pivots=20 * Phi.shape[0])
    assert float((Phi @ a - y).abs().max()) <= 1e-10 * float(y.abs().max())
    assert float(((Phi.T @ lam).abs() / kappa).max()) <= 1.0 + 1e-12  # feasible to round-off
    assert (a != 0).sum() <= Phi.shape[0]
    value = float((kappa * a.abs()).sum())
    assert value == pytest.approx(float(lam @ y), rel=1e-9)  # certified by its own dual
    assert value == pytest.approx(highs_l1_optimum(Phi, y, kappa), rel=1e-8)


def testsimplex_crossover_gives_up_after_its_pivots():
    """max_pivots = 0 from a basis that its dual does not certify: None, not a wrong vertex."""
    from flatbook.flatness import flatness_weights
    from flatbook.flattest import feature_matrix
    from flatbook.lp import simplex_crossover

    theta, X, y = problem(n=12, m=60)
    Phi, kappa = feature_matrix(theta, X, "relu"), flatness_weights(theta, X, "relu")
    start = torch.arange(Phi.shape[0])
    signs = torch.ones(Phi.shape[0], dtype=Phi.dtype)
    assert simplex_crossover(start, signs, Phi, y, kappa, max_pivots=0) is None
    assert simplex_crossover(start, signs, Phi, y, kappa, max_pivots=20 * Phi.shape[0]) is not None


def test_vertex_from_dual_crossover_certifies_what_the_dual_alone_cannot(monkeypatch):
    """A dual too far off for its tight set, NNLS failing (as on a d = 100, n = 1600 master) and a primal
    iterate stopped at a gap of 0.1, whose bases do not certify: without crossover no vertex; with it,
    pivots from the primal's basis (one at least) reach the optimum."""
    import flatbook.lp as lp
    from flatbook.flatness import flatness_weights

    theta, X, y = problem(n=30, m=120)
    Phi, kappa = feature_matrix(theta, X, "relu"), flatness_weights(theta, X, "relu")
    lam, primal, _, _ = lp.interior_point(Phi, y, kappa, tol=1e-1)  # an inexact master's iterate

    def nnls(*args, **kwargs):
        raise RuntimeError("Maximum number of iterations reached.")

    monkeypatch.setattr(lp.scipy.optimize, "nnls", nnls)
    lam_far = lam + 0.5 * lam.abs().max() * torch.ones_like(lam)
    assert lp.vertex_from_dual(lam_far, Phi, y, kappa, primal=primal) is None
    factorisations = []
    lu_factor = torch.linalg.lu_factor
    monkeypatch.setattr(torch.linalg, "lu_factor", lambda A: factorisations.append(1) or lu_factor(A))
    a, dual = lp.vertex_from_dual(lam_far, Phi, y, kappa, primal=primal, crossover=True)
    assert len(factorisations) >= 2  # one per basis: the start did not certify, a pivot was needed
    assert float((kappa * a.abs()).sum()) == pytest.approx(highs_l1_optimum(Phi, y, kappa), rel=1e-8)
    assert float((kappa * a.abs()).sum()) == pytest.approx(float(dual @ y), rel=1e-9)


def test_p1_dual_is_feasible_in_the_callers_units():
    """Chapter 5's ReLU point at ρ* = 0.95, seed 300 (n = 100, d = 20, m = 200, directions nearly aligned with
    the teacher): the dual, feasible in the solver's scaled units, exceeded κ_j by up to 7e-12 once converted
    back on one machine, and certification refused it.  The returned λ is feasible to 1e-12 in the caller's
    units, and its bound certifies the weights."""
    from flatbook.experiments.paper_experiments import CONFIGS, teacher_for
    from flatbook.flattest import feature_matrix
    from flatbook.interpolators import directions_with_alignment

    config = CONFIGS["book"]
    teacher = teacher_for("single-index, ReLU", config, 300)
    X, y = teacher.sample(config.n, seed=1300)
    directions = directions_with_alignment(teacher.theta_star, 200, 0.95, seed=316)
    result = flattest_outer_weights(directions, X, y, "relu")
    ratio = (feature_matrix(directions, X, "relu").T @ result.dual).abs() / result.kappa
    assert float(ratio.max()) <= 1 + 1e-12
    assert result.lower_bound == pytest.approx(result.flatness, rel=1e-8)


def test_certification_scales_a_dual_point_that_round_off_left_just_outside_the_feasible_set():
    """p = 1: a λ made feasible in the solver's units can exceed κ_j by round-off once Φᵀλ is recomputed in the
    caller's (a paper-scale run stopped on "λ is not dual feasible"); the certificate is the weak-duality bound of
    λ scaled into the feasible set, λᵀy / max_j |φ_jᵀλ|/κ_j, not an error."""
    from flatbook.flatness import flatness_weights
    from flatbook.flattest import certify, dual_objective

    teacher = sum_of_single_index(3, 2, link="relu", seed=0)
    X, y = teacher.sample(8, seed=1)
    theta = torch.randn(24, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    result = flattest_outer_weights(theta, X, y)
    Phi, kappa = feature_matrix(theta, X, "relu"), flatness_weights(theta, X, "relu")
    outside = result.dual * (1 + 1e-10)  # just outside: |Φᵀλ|_j = κ_j (1 + 1e-10) on the active constraints
    assert float(((Phi.T @ outside).abs() / kappa).max()) > 1 + 1e-11
    with pytest.raises(FlatbookInputError, match="not dual feasible"):
        dual_objective(outside, Phi, y, kappa, 1.0)  # a caller's infeasible λ is still refused
    flatness, lower, _, gap = certify(result.effective_a, outside, Phi, y, kappa, 1.0, 1e-8, 1e-6)
    assert lower == pytest.approx(result.lower_bound, rel=1e-12) and lower <= flatness * (1 + 1e-12)
