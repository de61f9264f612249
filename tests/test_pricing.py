"""The dual ratio G_λ and the three ways to its supremum, against brute force on fine grids."""

import math

import cvxpy as cp
import numpy as np
import pytest
import scipy.optimize
import torch

from flatbook import get_activation, pricing
from flatbook.errors import FlatbookInputError, SolverError
from flatbook.pricing import (
    ExactPricer,
    arrangement_faces,
    ascend_cells,
    cell_maximizer,
    dual_ratio,
    dual_ratio_bound,
    exact_dual_ratio_sup,
    face_values,
    least_distance,
    maximize_dual_ratio,
    nudge_inactive,
    quadratic_dual_ratio_bound,
)

PIECEWISE_LINEAR = [get_activation("relu"), get_activation("leaky_relu", negative_slope=0.2)]


def instance(n=30, d=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    lam = torch.randn(n, generator=gen, dtype=torch.float64)
    return X, lam


def circle(count):
    angles = torch.linspace(0, 2 * math.pi, count + 1, dtype=torch.float64)[:-1]
    return torch.stack([angles.cos(), angles.sin()], dim=1)


def independent_ratio(u, lam, X, activation):
    """G_λ(u) written out in numpy from eq. eq-kappa, for one unit direction."""
    z = X.numpy() @ u
    sigma = activation(torch.from_numpy(z)).numpy()
    dsigma = activation.derivative(torch.from_numpy(z)).numpy()
    n, c = X.shape[0], activation.degree
    S = 2 / n * (sigma**2).sum()
    T = 2 / n * (dsigma**2 * (X.numpy() ** 2).sum(1)).sum()
    kappa = (c + 1) * c ** (-c / (c + 1)) * S ** (1 / (c + 1)) * T ** (c / (c + 1))
    return abs(lam.numpy() @ sigma) / kappa ** (1 / activation.p)


def test_dual_ratio_matches_its_definition_and_is_scale_free(activation):
    X, lam = instance(d=4)
    U = torch.randn(5, 4, dtype=torch.float64)
    values = dual_ratio(U, lam, X, activation)
    for u, value in zip(U, values, strict=True):
        assert float(value) == pytest.approx(independent_ratio((u / u.norm()).numpy(), lam, X, activation), rel=1e-12)
    torch.testing.assert_close(dual_ratio(7.3 * U, lam, X, activation), values)


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_a_face_values_u_and_minus_u_in_one_pass_as_in_two(activation):
    """face_values(..., both_signs=True) against two single-sign calls, on every face of a 3-d arrangement at
    its own stationary point (inside for one sign) and at random directions (inside for neither, mostly)."""
    X, lam = instance(n=12, d=3, seed=4)
    _, _, spans, patterns = arrangement_faces(X)
    sq_norms = (X * X).sum(1)
    gen = torch.Generator().manual_seed(5)
    U = torch.einsum("frk,fk->fr", spans, torch.randn(spans.shape[0], 3, generator=gen, dtype=torch.float64))
    U = torch.cat([U, torch.randn(50, 3, generator=gen, dtype=torch.float64)])
    patterns = torch.cat([patterns, patterns[:50]])
    slope = activation.negative_slope
    plus, minus = face_values(lam, X, sq_norms, U, patterns, slope, both_signs=True)
    assert torch.equal(plus, face_values(lam, X, sq_norms, U, patterns, slope))
    assert torch.equal(minus, face_values(lam, X, sq_norms, -U, patterns, slope))
    assert bool((plus >= 0).any()) and bool((minus >= 0).any()) and bool((plus < 0).any())


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_exact_supremum_in_two_dimensions_matches_a_fine_circle(activation):
    X, lam = instance(n=25, d=2)
    sup, u = exact_dual_ratio_sup(lam, X, activation)
    grid = float(dual_ratio(circle(200_000), lam, X, activation).max())
    # The grid can only be below the supremum, and with 2·10^5 points by at most O(1e-4) relatively.
    assert grid <= sup * (1 + 1e-12)
    assert sup <= grid * (1 + 1e-3)
    # The returned direction attains it with the package's own σ'(0) convention (it is nudged off 0).
    assert float(dual_ratio(u[None], lam, X, activation)) == pytest.approx(sup, rel=1e-6)


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_supremum_in_three_dimensions_is_above_every_sample_and_every_ascent(activation, seed):
    X, lam = instance(n=30, d=3, seed=seed)
    sup, _ = exact_dual_ratio_sup(lam, X, activation)
    gen = torch.Generator().manual_seed(seed + 10)
    samples = torch.randn(300_000, 3, generator=gen, dtype=torch.float64)
    assert float(dual_ratio(samples, lam, X, activation).max()) <= sup * (1 + 1e-12)
    starts = torch.randn(100, 3, generator=gen, dtype=torch.float64)
    _, values = maximize_dual_ratio(lam, X, activation, starts)
    assert float(values.max()) <= sup * (1 + 1e-9)
    # The ascent never ends below where it started (it only accepts improving steps).
    assert (values >= dual_ratio(starts, lam, X, activation)).all()


def test_exact_supremum_on_a_subspace_matches_a_fine_circle_in_it():
    X, lam = instance(n=30, d=3)
    relu = get_activation("relu")
    basis = torch.linalg.qr(torch.randn(3, 2, dtype=torch.float64)).Q
    sup, u = exact_dual_ratio_sup(lam, X, relu, basis)
    grid = float(dual_ratio(circle(200_000) @ basis.T, lam, X, relu).max())
    assert grid <= sup * (1 + 1e-12) and sup <= grid * (1 + 1e-3)
    assert float((u - basis @ (basis.T @ u)).norm()) < 1e-6  # the maximiser lies in the subspace


@pytest.mark.parametrize("d", [2, 5, 12])
def test_cheap_bound_is_a_bound(activation, d):
    for seed in range(3):
        X, lam = instance(n=40, d=d, seed=seed)
        bound = dual_ratio_bound(lam, X, activation)
        gen = torch.Generator().manual_seed(seed)
        _, values = maximize_dual_ratio(lam, X, activation, torch.randn(200, d, generator=gen, dtype=torch.float64))
        assert float(values.max()) <= bound


@pytest.mark.parametrize("d", [2, 5, 12])
def test_the_cauchy_schwarz_bound_is_attained_by_a_single_sample_neuron(d):
    """For the ReLU the bound (n/4) max_i |λ_i|/‖x_i‖ is attained: a direction that activates one sample alone
    (here x_0 = 3e_0, every other sample on the negative side of e_0) with λ = e_0 has exactly that ratio, so a
    constant taken at the wrong extreme, in either direction, fails."""
    gen = torch.Generator().manual_seed(d)
    X = torch.randn(20, d, generator=gen, dtype=torch.float64)
    X[:, 0] = -X[:, 0].abs() - 0.1
    X[0] = 0.0
    X[0, 0] = 3.0
    lam = torch.zeros(20, dtype=torch.float64)
    lam[0] = 1.0
    relu = get_activation("relu")
    attained = float(dual_ratio(torch.eye(d, dtype=torch.float64)[:1], lam, X, relu)[0])
    assert attained == pytest.approx(20 / 4 / 3.0, rel=1e-12)
    assert dual_ratio_bound(lam, X, relu) == pytest.approx(attained, rel=1e-12)


@pytest.mark.parametrize("d", [2, 3, 8])
def test_quadratic_bound_is_a_bound_and_within_a_small_factor(d):
    quad = get_activation("quadratic")
    for seed in range(3):
        X, lam = instance(n=60, d=d, seed=seed)
        bound = quadratic_dual_ratio_bound(lam, X)
        gen = torch.Generator().manual_seed(seed)
        _, values = maximize_dual_ratio(lam, X, quad, torch.randn(300, d, generator=gen, dtype=torch.float64))
        found = float(values.max())
        assert found <= bound
        # The power-mean step alone loses 3^{1/4} ≈ 1.32 for Gaussian data; allow the matrix mean 1.5 more.
        assert bound <= 2.0 * found
        # Never worse than the generic bound.
        assert bound <= dual_ratio_bound(lam, X, quad)


def every_face_values(lam, X, activation, basis=None):
    """The enumeration without ExactPricer's caching and pre-selection: every face's stationary point
    u = G⁺λ valued with :func:`face_values`, and every ray; the values of the rays and of the u that lie
    in their faces (u ≠ 0), largest first."""
    Xr = X if basis is None else X @ basis
    rays, ray_patterns, spans, patterns = arrangement_faces(Xr)
    sq_norms, slope = (X * X).sum(1), activation.negative_slope
    s = torch.where(patterns > 0, 1.0, torch.where(patterns < 0, slope, 0.0)).to(X.dtype)
    normal = spans.transpose(1, 2) @ torch.einsum("fi,ij,ik->fjk", s * s, Xr, Xr) @ spans
    rhs = spans.transpose(1, 2) @ ((s * lam) @ Xr)[:, :, None]
    u = (spans @ torch.linalg.pinv(normal, hermitian=True) @ rhs)[:, :, 0]
    plus, minus = face_values(lam, Xr, sq_norms, u, patterns, slope, both_signs=True)
    values = torch.cat([face_values(lam, Xr, sq_norms, rays, ray_patterns, slope), plus, minus])
    U = torch.cat([rays, u, -u])
    return torch.sort(values[(values >= 0) & (U.norm(dim=1) > 0)], descending=True).values


def on_a_boundary(X, activation, first: int):
    """λ whose stationary point in one cell is a ray of the arrangement, on that cell's boundary: u₀ on the
    hyperplanes of samples ``first`` and ``first + 1``, the cell on their positive sides, λ = G u₀."""
    u0 = torch.linalg.cross(X[first], X[first + 1])
    z = X @ u0
    pattern = torch.sign(z)
    pattern[first : first + 2] = 1.0
    s = torch.where(pattern > 0, 1.0, activation.negative_slope).to(X.dtype)
    z[first : first + 2] = 0.0
    return s * z


def boundary_instances(activation):
    """(X, λ): Gaussian data, and λ whose stationary points lie exactly on face boundaries."""
    X = torch.randn(24, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return [(X, on_a_boundary(X, activation, first)) for first in range(0, 8, 2)]


def instances_for_pricing(activation):
    """(X, λ, basis): Gaussian data with random λ; λ with stationary points exactly on face boundaries; rows of
    norms from 10⁻³ to 10³ and a zero row; subspaces of dimension 3 in d = 4, 2 in d = 3 and 1 in d = 2."""
    gen = torch.Generator().manual_seed(8)
    boundary = boundary_instances(activation)
    X = boundary[0][0]
    yield X, torch.randn(24, generator=gen, dtype=torch.float64), None
    for X, lam in boundary:
        yield X, lam, None
    scaled = X * 10.0 ** torch.linspace(-3, 3, 24, dtype=torch.float64)[:, None]
    scaled[5] = 0.0
    yield scaled, torch.randn(24, generator=gen, dtype=torch.float64), None
    for d, r in ((4, 3), (3, 2), (2, 1)):
        X = torch.randn(20, d, generator=gen, dtype=torch.float64)
        basis = torch.linalg.qr(torch.randn(d, r, generator=gen, dtype=torch.float64)).Q
        yield X, torch.randn(20, generator=gen, dtype=torch.float64), basis


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_exact_pricer_reuse_and_preselection_lose_no_face(activation):
    """One ExactPricer for several λ (its cached arrangement, and its float32 pre-selection of the faces whose
    stationary point lies inside) keeps every ray and face that valuing every face afresh keeps, with the same
    values: on random λ, on λ whose stationary points sit exactly on face boundaries (where a pre-selection
    with no margin drops faces), on rows of very different norms with a zero row, and on subspaces."""
    for X, lam, basis in instances_for_pricing(activation):
        pricer = ExactPricer(X, activation, basis, chunk=500)  # several chunks
        sup, U, values = pricer.sup(lam, top=10**9)
        reference = every_face_values(lam, X, activation, basis)
        assert values.shape == reference.shape
        torch.testing.assert_close(values, reference, rtol=1e-12, atol=0)
        assert sup == float(values[0])
        assert U.shape == (values.shape[0], X.shape[1]) and bool(torch.isfinite(U).all())
        torch.testing.assert_close(dual_ratio(U[:4], lam, X, activation), values[:4], rtol=1e-6, atol=0)


def test_a_preselection_without_margin_drops_boundary_faces(monkeypatch):
    """The negative control of the test above: with no margin, float32 round-off of ⟨u, x_i⟩ = 0 drops faces
    that the float64 test keeps, on the boundary instances."""
    relu = get_activation("relu")
    monkeypatch.setattr(ExactPricer, "PRESELECTION_MARGIN", 0.0)
    dropped = [
        ExactPricer(X, relu, chunk=500).sup(lam, top=10**9)[2].shape[0] < every_face_values(lam, X, relu).shape[0]
        for X, lam in boundary_instances(relu)
    ]
    assert any(dropped)


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_exact_supremum_on_rows_of_very_different_norms_is_above_every_sample_and_every_ascent(activation):
    """Row norms from 10⁻³ to 10³: the arrangement keeps the rays of every pair of samples, the small rows'
    included (parallel normals are judged relative to their own norms, not the largest row's), and the
    supremum bounds every sample and every ascent."""
    X, lam = instance(n=30, d=3, seed=3)
    X = X * 10.0 ** torch.linspace(-3, 3, 30, dtype=torch.float64)[:, None]
    assert arrangement_faces(X)[0].shape[0] == 30 * 29  # ± the cross product of each of the C(30, 2) pairs
    sup, _ = exact_dual_ratio_sup(lam, X, activation)
    gen = torch.Generator().manual_seed(13)
    samples = torch.randn(300_000, 3, generator=gen, dtype=torch.float64)
    assert float(dual_ratio(samples, lam, X, activation).max()) <= sup * (1 + 1e-12)
    _, values = maximize_dual_ratio(lam, X, activation, torch.randn(100, 3, generator=gen, dtype=torch.float64))
    assert float(values.max()) <= sup * (1 + 1e-9)


def test_exact_pricing_rejects_what_it_cannot_do():
    X, lam = instance(d=4)
    with pytest.raises(FlatbookInputError, match="dimension <= 3"):
        exact_dual_ratio_sup(lam, X, get_activation("relu"))
    with pytest.raises(FlatbookInputError, match="ReLU"):
        exact_dual_ratio_sup(lam, X[:, :3], get_activation("quadratic"))


def test_nudge_moves_off_hyperplanes_to_the_negative_side_only():
    X, _ = instance(n=10, d=3)
    u = torch.linalg.cross(X[0], X[1])  # on the hyperplanes of samples 0 and 1
    moved = nudge_inactive(u[None], X)[0]
    z_before, z_after = X @ u, X @ moved
    assert (z_after[:2] < 0).all()
    assert torch.equal(torch.sign(z_after[2:]), torch.sign(z_before[2:]))
    assert float((moved - u).norm()) < 1e-7 * float(u.norm())
    generic = torch.randn(4, 3, dtype=torch.float64)  # on no hyperplane: left exactly as it is
    assert torch.equal(nudge_inactive(generic, X), generic)


def arc_pattern_grid(X, u, count=400_000):
    """Points of a fine circle in the open cell (arc) of the 2-d direction u: same strict sign on every sample."""
    grid = circle(count)
    inside = ((grid @ X.T > 0) == (X @ u > 0)[None, :]).all(1) & ((grid @ X.T).abs() > 0).all(1)
    return grid[inside]


def arc_ends(X, u):
    """The arrangement's rays that bound the arc of u (every other sample's sign agrees with u's), moved to the
    negative side of the sample they lie on: the arc's ends under the package's σ'(0) convention."""
    rays = torch.stack([-X[:, 1], X[:, 0]], dim=1)
    rays = torch.cat([rays, -rays]) / torch.cat([rays, -rays]).norm(dim=1, keepdim=True)
    own = torch.arange(len(X)).repeat(2)
    signs = (rays @ X.T > 0) == (X @ u > 0)[None, :]
    signs[torch.arange(len(rays)), own] = True
    return nudge_inactive(rays[signs.all(1)], X)


@pytest.mark.parametrize("seed", range(6))
def test_least_distance_is_the_least_norm_point_that_cvxpy_finds(seed):
    """Against cvxpy (Clarabel) on min ‖w‖ s.t. Gw ≥ h: the same point (to the interior-point solver's 1e-6), feasible
    to round-off, its active set the constraints that hold with equality there; an empty set gives None."""
    rng = np.random.default_rng(seed)
    G, h = rng.standard_normal((30, 5)), np.concatenate([[1.0], np.zeros(29)])
    G = G * np.sign(G @ rng.standard_normal(5))[:, None]  # a cell of 29 hyperplanes, cut by G_0 w ≥ 1
    w = cp.Variable(5)
    cp.Problem(cp.Minimize(cp.sum_squares(w)), [G @ w >= h]).solve(solver="CLARABEL")
    found, active = least_distance(G, h)
    assert float(np.abs(found - w.value).max()) < 1e-6 * float(np.abs(w.value).max())
    assert float((G @ found - h).min()) > -1e-12
    slack = G @ found - h
    assert bool(active.any())
    assert float(np.abs(slack[active]).max()) < 1e-12
    assert float(slack[~active].min()) > 1e-9
    assert least_distance(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 1.0])) is None


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
@pytest.mark.parametrize("seed", range(8))
def test_cell_maximizer_is_the_maximum_of_a_fine_grid_on_its_arc_and_its_ends(activation, seed):
    """In d = 2 a cell is an arc.  Its maximiser's value is at least the largest G_λ on the 4·10^5 circle points
    inside the arc (less 1e-9: its least-distance program is exact to round-off, and the ridge of a singular cell
    moves the optimum by less), and at most the largest of
    those and of G_λ at the arc's two ends (moved to the negative side of their sample, where G_λ jumps up): 1e-3
    allows the grid's spacing (G_λ is smooth inside the arc)."""
    X, lam = instance(n=12, d=2, seed=seed)
    gen = torch.Generator().manual_seed(seed + 20)
    for u in torch.randn(6, 2, generator=gen, dtype=torch.float64):
        u = u / u.norm()
        best, claimed = cell_maximizer(lam, X, activation, u)
        value = float(dual_ratio(best[None], lam, X, activation)[0])
        assert claimed == value
        grid = float(dual_ratio(arc_pattern_grid(X, u), lam, X, activation).max())
        ends = float(dual_ratio(arc_ends(X, u), lam, X, activation).max())
        assert grid <= value * (1 + 1e-9)
        assert value <= max(grid, ends) * (1 + 1e-3)
        assert float(best.norm()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
@pytest.mark.parametrize("seed", range(8))
def test_cell_maximizer_in_three_dimensions_beats_every_sample_of_its_cell_and_never_the_supremum(activation, seed):
    """d = 3: above every one of 3·10^5 random directions with the start's sign pattern (less 1e-9, as on the
    arcs above), and below the exact supremum over the sphere (the arrangement's enumeration, another
    method).  The plane Σ_i λ_i σ(⟨v, x_i⟩) = 0 cuts some of these cells: both of its sides count."""
    X, lam = instance(n=10, d=3, seed=seed)
    sup, _ = exact_dual_ratio_sup(lam, X, activation)
    gen = torch.Generator().manual_seed(seed + 30)
    samples = torch.randn(300_000, 3, generator=gen, dtype=torch.float64)
    signs = samples @ X.T > 0
    for u in torch.randn(5, 3, generator=gen, dtype=torch.float64):
        same = (signs == (X @ u > 0)[None, :]).all(1)
        best, _ = cell_maximizer(lam, X, activation, u / u.norm())
        value = float(dual_ratio(best[None], lam, X, activation)[0])
        assert float(dual_ratio(samples[same], lam, X, activation).max()) <= value * (1 + 1e-9)
        assert value <= sup * (1 + 1e-9)


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_the_cell_maximiser_stays_in_the_closure_of_the_start_s_cell_among_many_far_walls(activation):
    """d = 6, n = 300: the program starts from the 24 walls nearest the start and must add every wall its solution
    crosses.  The maximiser keeps each sample's side, except samples on their hyperplane there (within 2e-9 relative:
    those it moves to the negative side); and it is at least as large as every sample of the cell (5·10^4 directions
    near the start, kept where the sign pattern is the start's)."""
    X, lam = instance(n=300, d=6, seed=12)
    gen = torch.Generator().manual_seed(13)
    norms = X.norm(dim=1)
    for u in torch.randn(4, 6, generator=gen, dtype=torch.float64):
        u = u / u.norm()
        best, value = cell_maximizer(lam, X, activation, u)
        start_sides, sides = X @ u > 0, X @ best > 0
        on_wall = (X @ best).abs() <= 2e-9 * norms
        assert bool(((sides == start_sides) | on_wall).all())
        steps = torch.rand(50_000, 1, generator=gen, dtype=torch.float64) * 0.05
        samples = u + steps * torch.randn(50_000, 6, generator=gen, dtype=torch.float64)
        samples = samples[((samples @ X.T > 0) == start_sides[None, :]).all(1)]
        assert samples.shape[0] > 100
        assert float(dual_ratio(samples, lam, X, activation).max()) <= value * (1 + 1e-9)


def test_least_distance_is_scale_free_and_refuses_what_it_cannot_read():
    """Scaling h scales the point (the emptiness test is relative); a zero row holds or empties the set by the sign
    of its h; a set that holds 0 gives 0; NaN, infinite or mismatched input is refused."""
    rng = np.random.default_rng(3)
    G = rng.standard_normal((12, 4))
    G = G * np.sign(G @ rng.standard_normal(4))[:, None]
    h = np.concatenate([[1.0], np.zeros(11)])
    found, active = least_distance(G, h)
    for t in (1e-8, 1e8):
        scaled, scaled_active = least_distance(G, t * h)
        assert float(np.abs(scaled - t * found).max()) <= 1e-12 * t * float(np.abs(found).max())
        assert np.array_equal(scaled_active, active)
    with_zero = least_distance(np.vstack([G, np.zeros(4)]), np.concatenate([h, [0.0]]))
    assert np.allclose(with_zero[0], found, rtol=1e-12, atol=0)
    assert least_distance(np.vstack([G, np.zeros(4)]), np.concatenate([h, [1e-3]])) is None
    zero, _ = least_distance(G, np.zeros(12))
    assert not zero.any()
    for bad_G, bad_h, match in (
        (G, h[:5], "shapes"),
        (G * np.nan, h, "finite"),
        (G, np.full_like(h, np.inf), "finite"),
    ):
        with pytest.raises(FlatbookInputError, match=match):
            least_distance(bad_G, bad_h)


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_the_cell_maximiser_reaches_the_full_program_s_optimum_from_one_wall_per_dimension(activation, monkeypatch):
    """With a working set of one wall per dimension (d = 6, n = 300) nearly every program must grow it.  The reference
    is cvxpy (Clarabel) on the full program, every wall: min vᵀQv s.t. ±gᵀv ≥ 1, s_i⟨v, x_i⟩ ≥ 0, valued as
    |gᵀv| / (2 (vᵀQv)^{1/2} T^{1/2}); the maximiser, moved across the walls it reaches, is at least that (less 1e-6,
    the interior-point solver's accuracy), and it keeps every sample's side but those on their hyperplane there."""
    monkeypatch.setattr(pricing, "CELL_WORKING_WALLS", 1)
    X, lam = instance(n=300, d=6, seed=14)
    gen = torch.Generator().manual_seed(15)
    Xn, n = X.numpy(), X.shape[0]
    for u in torch.randn(3, 6, generator=gen, dtype=torch.float64):
        positive = Xn @ u.numpy() > 0
        slopes = np.where(positive, 1.0, activation.negative_slope)
        g, B = Xn.T @ (lam.numpy() * slopes), np.sqrt(2.0 / n) * slopes[:, None] * Xn
        T = 2.0 / n * float((slopes**2 * (Xn**2).sum(1)).sum())
        reference = 0.0
        for sign in (1.0, -1.0):
            v = cp.Variable(6)
            constraints = [sign * g @ v >= 1, (np.where(positive, 1.0, -1.0)[:, None] * Xn) @ v >= 0]
            problem = cp.Problem(cp.Minimize(cp.sum_squares(B @ v)), constraints)
            problem.solve(solver="CLARABEL")
            if problem.status == "optimal":
                found = v.value
                reference = max(reference, abs(g @ found) / (2 * np.linalg.norm(B @ found) * np.sqrt(T)))
        best, value = cell_maximizer(lam, X, activation, u / u.norm())
        assert value >= reference * (1 - 1e-6)
        on_wall = (X @ best).abs() <= 2e-9 * X.norm(dim=1)  # moved to their negative side
        assert bool((((X @ best > 0).numpy() == positive) | on_wall.numpy()).all())


@pytest.mark.parametrize("scale", [1e-6, 1e-12, 1e-14])
@pytest.mark.parametrize("slope", [0.0, 1e-6])
def test_the_cell_maximiser_is_unmoved_by_a_badly_scaled_feature_or_a_tiny_negative_slope(slope, scale):
    """d = 3 with the third feature scaled by 1e-6 (the cell's quadratic form ill-conditioned), 1e-12 or 1e-14 (it
    counts as singular: the ridge), and σ with negative slope 0 (the ReLU) or 1e-6: above every one of 3·10^5 random
    directions with the start's sign pattern (less 1e-9), as in the test above.  The ridge must act in the
    direction's own coordinates: put on coordinates that scale the feature up to the others' size, it lets the
    maximiser point along that feature, where every ⟨v, x_i⟩ is at round-off, and the value falls 15 % short."""
    activation = get_activation("leaky_relu", negative_slope=slope) if slope else get_activation("relu")
    X, lam = instance(n=10, d=3, seed=16)
    X[:, 2] *= scale
    gen = torch.Generator().manual_seed(17)
    samples = torch.randn(300_000, 3, generator=gen, dtype=torch.float64)
    signs = samples @ X.T > 0
    for u in torch.randn(6, 3, generator=gen, dtype=torch.float64):
        same = (signs == (X @ u > 0)[None, :]).all(1)
        _, value = cell_maximizer(lam, X, activation, u / u.norm())
        assert float(dual_ratio(samples[same], lam, X, activation).max()) <= value * (1 + 1e-9)


def test_a_cell_where_every_sample_is_on_the_negative_side_has_no_relu_maximiser():
    """There σ vanishes for the ReLU (G_λ = 0 on the whole cell): no maximiser, and an ascent started there stays put
    at 0; the leaky ReLU's σ does not vanish, so its cell has one."""
    X, lam = instance(n=12, d=4, seed=11)
    X[:, 0] = X[:, 0].abs() + 0.1
    u = -torch.eye(4, dtype=torch.float64)[0]
    relu, leaky = PIECEWISE_LINEAR
    assert cell_maximizer(lam, X, relu, u) is None
    U, values = ascend_cells(lam, X, relu, u[None])
    assert torch.equal(U[0], u) and float(values[0]) == 0.0
    best = cell_maximizer(lam, X, leaky, u)
    assert best is not None and best[1] >= float(dual_ratio(u[None], lam, X, leaky)[0])


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_ascending_from_every_arc_reaches_the_supremum_of_a_fine_circle(activation):
    """Started once inside every cell of a 2-d arrangement, the cell ascent's best value is the supremum: at least
    the largest of 2·10^5 circle points, at most the exact supremum (the arrangement's rays and faces)."""
    X, lam = instance(n=15, d=2, seed=3)
    angles = torch.sort(torch.remainder(torch.atan2(X[:, 0], -X[:, 1]), math.pi)).values
    rays = torch.cat([angles, angles + math.pi])
    edges = torch.sort(rays).values
    wrap = torch.cat([torch.zeros(len(edges) - 1), torch.tensor([2 * math.pi])])  # the last arc crosses angle 0
    middles = (edges + torch.roll(edges, -1) + wrap) / 2
    starts = torch.stack([middles.cos(), middles.sin()], dim=1).to(torch.float64)
    _, values = ascend_cells(lam, X, activation, starts)
    grid = float(dual_ratio(circle(200_000), lam, X, activation).max())
    sup, _ = exact_dual_ratio_sup(lam, X, activation)
    assert grid <= float(values.max()) * (1 + 1e-9)
    assert float(values.max()) <= sup * (1 + 1e-9)


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
@pytest.mark.parametrize("zero_sample", [False, True])
def test_cell_ascent_never_descends_and_reports_the_ratio_of_what_it_returns(activation, zero_sample):
    """d = 6, on the whole sphere and on a 4-dimensional subspace: each value is G_λ at its returned unit direction
    (recomputed), never below the start's, and the directions stay in the subspace.  A sample at the origin
    (σ(0) = 0 whatever the direction) is no wall of any cell and changes none of this."""
    X, lam = instance(n=40, d=6, seed=5)
    if zero_sample:
        X[0] = 0.0
    gen = torch.Generator().manual_seed(6)
    basis = torch.linalg.qr(torch.randn(6, 4, generator=gen, dtype=torch.float64)).Q
    for subspace in (None, basis):
        starts = torch.randn(20, 6, generator=gen, dtype=torch.float64)
        if subspace is not None:
            starts = starts @ subspace @ subspace.T
        U, values = ascend_cells(lam, X, activation, starts, subspace)
        torch.testing.assert_close(values, dual_ratio(U, lam, X, activation), rtol=1e-12, atol=0)
        assert bool((values >= dual_ratio(starts, lam, X, activation) * (1 - 1e-12)).all())
        assert bool((values > dual_ratio(starts, lam, X, activation) * (1 + 1e-6)).any())
        torch.testing.assert_close(U.norm(dim=1), torch.ones(20, dtype=torch.float64))
        if subspace is not None:
            assert float((U - U @ subspace @ subspace.T).abs().max()) < 1e-9


def test_the_cell_ascent_refuses_an_activation_that_is_not_piecewise_linear():
    X, lam = instance(n=10, d=4)
    with pytest.raises(FlatbookInputError, match="ReLU family"):
        ascend_cells(lam, X, get_activation("quadratic"), torch.randn(3, 4, dtype=torch.float64))


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_ascending_starts_together_gives_what_ascending_each_alone_gives(activation):
    """Few samples, many starts: most starts share a cell, and the batch computes each cell's maximiser once.
    Each start must still end exactly where it ends alone."""
    X, lam = instance(n=6, d=3, seed=7)
    starts = torch.randn(150, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    U, values = ascend_cells(lam, X, activation, starts)
    for j in range(0, 150, 3):
        alone_u, alone_value = ascend_cells(lam, X, activation, starts[j : j + 1])
        assert float(values[j]) == float(alone_value[0])
        assert torch.equal(U[j], alone_u[0])


@pytest.mark.parametrize("activation", PIECEWISE_LINEAR, ids=str)
def test_the_ascent_ends_on_the_better_side_of_every_wall_it_reaches(activation):
    """Run to the end, the ascent's endpoints sit on cell walls (where G_λ's maxima are) on their negative side,
    where σ' and so T are smaller: moving an endpoint across the walls within 1e-5 of it (relative) must not
    raise G_λ by more than that move can (1e-4).  A wall the program's solution sits near but the ascent did not
    cross (round-off leaves it there) would leave T a sample too large."""
    X, lam = instance(n=40, d=6, seed=9)
    starts = torch.randn(15, 6, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    U, values = ascend_cells(lam, X, activation, starts, max_steps=50)
    across = dual_ratio(nudge_inactive(U, X, rel_tol=1e-5), lam, X, activation)
    assert bool((across <= values * (1 + 1e-4)).all())


def test_least_distance_out_of_iterations_raises_and_the_cell_maximiser_goes_on(monkeypatch):
    """Where the active-set iterations run out nothing is known about the set: least_distance says so (a
    SolverError), where None would read as "empty"; the cell maximiser, a heuristic, then takes no candidate from
    that sign's program and returns None rather than failing."""
    X, lam = instance(n=10, d=3, seed=4)

    def exhausted(*args, **kwargs):
        raise RuntimeError("Maximum number of iterations reached.")

    monkeypatch.setattr(scipy.optimize, "nnls", exhausted)
    with pytest.raises(SolverError, match="ran out of active-set iterations.*unknown"):
        least_distance(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([1.0, 1.0]))
    assert cell_maximizer(lam, X, get_activation("relu"), X[0] / X[0].norm()) is None
