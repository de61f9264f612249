"""Cap branch-and-bound (eq-cap-bound): the cap geometry, each cap's bound, and the supremum against references
that share no code with it (the arrangement enumeration, fine grids, points on every hyperplane and ray)."""

import math

import pytest
import torch

from flatbook import get_activation
from flatbook.admissible import AdmissibleSet
from flatbook.certified_pricing import CapBranchAndBound, cap_branch_and_bound_available
from flatbook.errors import FlatbookInputError
from flatbook.pricing import ExactPricer, dual_ratio, maximize_dual_ratio

RELU_FAMILY = [get_activation("relu"), get_activation("leaky_relu", negative_slope=0.2)]
ALL = [*RELU_FAMILY, get_activation("quadratic")]


def problem(n, d, seed):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    return X, torch.randn(n, generator=gen, dtype=torch.float64)


def random_boxes(search, count, seed):
    """Boxes on the cube's faces as the search makes them: random nested halvings of the initial ones."""
    gen = torch.Generator().manual_seed(seed)
    lo, hi = search.initial
    pick = torch.randint(lo.shape[0], (count,), generator=gen)
    lo, hi = lo[pick].clone(), hi[pick].clone()
    for _ in range(int(torch.randint(1, 12, (1,), generator=gen))):
        axis = torch.argmax(hi - lo, dim=1)
        middle = ((lo + hi) / 2).gather(1, axis[:, None])[:, 0]
        left = torch.rand(count, generator=gen) < 0.5
        rows = torch.arange(count)
        hi[rows[left], axis[left]] = middle[left]
        lo[rows[~left], axis[~left]] = middle[~left]
    return lo, hi


def points_in_boxes(lo, hi, per_box, seed):
    """Random points of each box, its corners included, radially projected onto the sphere: (boxes, k, r)."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.rand(lo.shape[0], per_box, lo.shape[1], generator=gen, dtype=torch.float64)
    t[:, :2] = torch.randint(0, 2, (lo.shape[0], 2, lo.shape[1]), generator=gen).to(torch.float64)  # corners
    P = lo[:, None, :] + t * (hi - lo)[:, None, :]
    return P / torch.linalg.vector_norm(P, dim=2, keepdim=True)


@pytest.mark.parametrize("r", [2, 3, 5])
def test_every_point_of_a_box_lies_in_its_cap(r):
    X, _ = problem(10, r, 0)
    search = CapBranchAndBound(X, get_activation("relu"))
    lo, hi = random_boxes(search, 400, seed=r)
    C, delta = search._caps(lo, hi)
    P = points_in_boxes(lo, hi, 64, seed=r + 1)
    angles = torch.acos((P * C[:, None, :]).sum(2).clamp(-1, 1))
    assert bool((angles <= delta[:, None]).all())


@pytest.mark.parametrize("activation", ALL, ids=str)
@pytest.mark.parametrize("r", [2, 3, 4])
def test_a_cap_bound_is_above_the_ratio_everywhere_on_the_cap_hyperplanes_included(activation, r):
    """The bound of eq-cap-bound against G_λ at random points of each cap, at its corners, and at points
    moved onto the hyperplanes ⟨u, x_i⟩ = 0 that cross the cap (where the ReLU ratio peaks)."""
    X, lam = problem(12, r, r)
    search = CapBranchAndBound(X, activation)
    lo, hi = random_boxes(search, 300, seed=10 + r)
    C, delta = search._caps(lo, hi)
    bounds = search.cap_bounds(lam, C, delta)
    P = points_in_boxes(lo, hi, 48, seed=20 + r)
    # onto a hyperplane: remove the component along x_i of the sample nearest to orthogonal
    i = torch.argmin((P @ X.T).abs(), dim=2)
    x = X[i]
    on_plane = P - ((P * x).sum(2, keepdim=True) / (x * x).sum(2, keepdim=True)) * x
    on_plane = on_plane / torch.linalg.vector_norm(on_plane, dim=2, keepdim=True)
    inside = torch.acos((on_plane * C[:, None, :]).sum(2).clamp(-1, 1)) <= delta[:, None]
    for points, keep in ((P, torch.ones_like(inside)), (on_plane, inside)):
        values = dual_ratio(points.reshape(-1, r), lam, X, activation).reshape(points.shape[:2])
        values = torch.where(keep, values, 0.0)
        assert bool((values <= bounds[:, None] * (1 + 1e-12)).all())


@pytest.mark.parametrize("activation", RELU_FAMILY, ids=str)
@pytest.mark.parametrize("d,n,seed", [(2, 15, 0), (3, 24, 1), (3, 40, 2)])
def test_relu_supremum_agrees_with_the_arrangement_enumeration(activation, d, n, seed):
    """Two different methods: the enumeration of every face (exact) and the caps (to rel_tol)."""
    X, lam = problem(n, d, seed)
    exact = ExactPricer(X, activation).sup(lam)[0]
    found = CapBranchAndBound(X, activation).sup(lam, rel_tol=1e-4)
    assert found.complete and found.best <= exact * (1 + 1e-9) and exact <= found.upper * (1 + 1e-12)
    assert found.upper <= exact * (1 + 1e-4 + 1e-9)


def rays_and_arcs_2d(X, count=20_000):
    """In d = 2: the arrangement's rays (perpendicular to each sample, both signs) and a fine circle."""
    rays = torch.stack([-X[:, 1], X[:, 0]], dim=1)
    angles = torch.linspace(0, 2 * math.pi, count, dtype=torch.float64)
    circle = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
    U = torch.cat([rays, -rays, circle])
    return U / torch.linalg.vector_norm(U, dim=1, keepdim=True)


@pytest.mark.parametrize("activation", RELU_FAMILY, ids=str)
@pytest.mark.parametrize("rho0", [0.3, 0.5, pytest.param(0.8, marks=pytest.mark.slow)])
def test_band_supremum_in_two_dimensions_matches_the_arcs_with_their_rays_and_ends(activation, rho0):
    """The ρ0-band in d = 2 is two pairs of arcs; the supremum over them is attained at a ray of the
    arrangement inside the band, at an arc's end, or at a stationary point, all of which a fine grid plus the
    rays plus the ends contains to within the grid's resolution."""
    X, lam = problem(14, 2, 3)
    teacher = torch.tensor([[0.6, 0.8]], dtype=torch.float64)
    U = rays_and_arcs_2d(X, 200_000)
    ends = []
    for sign_in in (1.0, -1.0):
        for sign_out in (1.0, -1.0):
            ends.append(sign_in * rho0 * teacher[0] + sign_out * math.sqrt(1 - rho0**2) * torch.tensor([-0.8, 0.6]))
    U = torch.cat([U, torch.stack(ends).to(torch.float64)])
    admissible = (U @ teacher.T).abs()[:, 0] <= rho0 + 1e-15
    reference = float(dual_ratio(U[admissible], lam, X, activation).max())
    found = CapBranchAndBound(X, activation, AdmissibleSet(2, teacher, rho0)).sup(lam, rel_tol=1e-5)
    assert found.complete
    assert reference <= found.upper * (1 + 1e-12)
    assert found.upper == pytest.approx(reference, rel=1e-4)
    assert bool(((found.directions @ teacher.T).abs() <= rho0 + 1e-12).all())  # what it found is admissible


@pytest.mark.parametrize(
    "d,n", [(2, 3), (2, 12), pytest.param(3, 6, marks=pytest.mark.slow), pytest.param(3, 24, marks=pytest.mark.slow)]
)
def test_quadratic_supremum_agrees_with_a_fine_grid_and_ascent(d, n):
    X, lam = problem(n, d, d + n)
    quadratic = get_activation("quadratic")
    gen = torch.Generator().manual_seed(7)
    if d == 2:
        angles = torch.linspace(0, math.pi, 400_000, dtype=torch.float64)
        U = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
    else:
        U = torch.randn(400_000, d, generator=gen, dtype=torch.float64)
    values = dual_ratio(U, lam, X, quadratic)
    _, polished = maximize_dual_ratio(lam, X, quadratic, U[torch.topk(values, 64).indices], steps=200)
    reference = max(float(values.max()), float(polished.max()))
    found = CapBranchAndBound(X, quadratic).sup(lam, rel_tol=1e-3, max_caps=2_000_000)
    assert found.complete and reference <= found.upper * (1 + 1e-12)
    assert found.upper == pytest.approx(reference, rel=1e-3)


def test_a_leaky_relu_direction_with_every_sample_on_one_side_is_priced():
    """Samples all in one half-space: the direction that deactivates all of them is a cap where only the
    negative slope acts (a case the ReLU never meets); the supremum still matches the enumeration."""
    X, lam = problem(20, 3, 5)
    X[:, 0] = X[:, 0].abs() + 0.1
    leaky = get_activation("leaky_relu", negative_slope=0.1)
    exact = ExactPricer(X, leaky).sup(lam)[0]
    found = CapBranchAndBound(X, leaky).sup(lam, rel_tol=1e-5)
    assert exact <= found.upper * (1 + 1e-12) and found.upper == pytest.approx(exact, rel=1e-5)


def test_a_budget_that_runs_out_still_gives_a_proven_bound():
    X, lam = problem(40, 5, 9)
    relu = get_activation("relu")
    short = CapBranchAndBound(X, relu).sup(lam, rel_tol=1e-6, max_caps=500)
    U = torch.randn(200_000, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    sampled = float(dual_ratio(U, lam, X, relu).max())
    assert not short.complete and short.upper >= sampled and short.upper >= short.best


def test_what_it_cannot_bound_is_refused():
    X, _ = problem(10, 3, 0)
    assert not cap_branch_and_bound_available(get_activation("relu_power", c=3.0))
    with pytest.raises(FlatbookInputError, match="ReLU family and the quadratic"):
        CapBranchAndBound(X, get_activation("relu_power", c=3.0))
    with pytest.raises(FlatbookInputError, match="rel_tol > 0"):
        CapBranchAndBound(X, get_activation("relu")).sup(torch.ones(10, dtype=torch.float64), rel_tol=0.0)
