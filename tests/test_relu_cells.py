"""κ_inf = min over the sphere of the flatness weight, exactly over the arrangement's faces (d ≤ 3), against
brute force: dense samples of the sphere, samples on every hyperplane of the arrangement and next to every ray
(taken on either side, so that σ'(0) is never decided by round-off), refined by local descent."""

import math

import pytest
import torch
from scipy.optimize import minimize

from flatbook import get_activation
from flatbook.errors import FlatbookInputError, SolverError
from flatbook.flatness import unit_flatness_weights
from flatbook.relu_cells import FACE_NUDGE, INSIDE_KAPPA_TOL, kappa_infimum


def sphere_points(d: int, count: int) -> torch.Tensor:
    if d == 2:
        angle = torch.linspace(0, 2 * math.pi, count, dtype=torch.float64)
        return torch.stack([angle.cos(), angle.sin()], 1)
    i = torch.arange(count, dtype=torch.float64) + 0.5  # a Fibonacci lattice
    polar, azimuth = torch.acos(1 - 2 * i / count), math.pi * (1 + 5**0.5) * i
    return torch.stack([polar.sin() * azimuth.cos(), polar.sin() * azimuth.sin(), polar.cos()], 1)


def brute_force_kappa_inf(X: torch.Tensor, activation) -> float:
    """The smallest κ found by sampling (the sphere; each hyperplane x_i^⊥ pushed 1e-9 to either side; points
    1e-9 off every pair's ray in each direction), then polished by Nelder–Mead from the 20 best samples."""
    n, d = X.shape
    unit_x = X / X.norm(dim=1, keepdim=True)
    samples = [sphere_points(d, 200_000)]
    for i in range(n):
        basis = torch.linalg.svd(unit_x[i][None, :])[2][1:]  # orthonormal basis of x_i^⊥
        on_plane = sphere_points(d - 1, 4_000 if d == 3 else 2) @ basis if d == 3 else torch.cat([basis, -basis])
        for side in (-1.0, 1.0):
            samples.append(on_plane + side * 1e-9 * unit_x[i])
        if d == 3:
            for j in range(i + 1, n):
                ray = torch.linalg.cross(unit_x[i], unit_x[j])
                ray = ray / ray.norm()
                for r in (ray, -ray):
                    for a in (-1.0, 1.0):
                        for b in (-1.0, 1.0):
                            samples.append((r + 1e-9 * (a * unit_x[i] + b * unit_x[j]))[None])
    U = torch.cat(samples)
    U = U / U.norm(dim=1, keepdim=True)
    kappa = unit_flatness_weights(U, X, activation)

    def kappa_at(v):
        v = torch.as_tensor(v, dtype=torch.float64)
        return float(unit_flatness_weights((v / v.norm())[None], X, activation)[0])

    best = float(kappa.min())
    for start in U[torch.argsort(kappa)[:20]]:
        polished = minimize(kappa_at, start.numpy(), method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-14})
        best = min(best, float(polished.fun))
    return best


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("name, slope", [("relu", 0.0), ("leaky_relu", 0.2)])
@pytest.mark.parametrize("seed", [0, 1])
def test_kappa_inf_is_the_smallest_kappa_brute_force_finds(d, name, slope, seed):
    """On these data the infimum lies inside a cell (d = 2, seed 0), on a hyperplane or at a ray."""
    activation = get_activation(name, negative_slope=slope) if slope else get_activation(name)
    X = torch.randn(9, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    check_against_brute_force(X, activation)


def test_kappa_inf_inside_a_cell_is_found_too():
    """A leaky ReLU close to linear (slope 0.9) whose infimum is an eigenvector inside a cell."""
    X = torch.randn(9, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    exact = check_against_brute_force(X, get_activation("leaky_relu", negative_slope=0.9))
    assert float((X / X.norm(dim=1, keepdim=True) @ exact.direction).abs().min()) > 1e-6


def check_against_brute_force(X, activation):
    exact = kappa_infimum(X, activation)
    reference = brute_force_kappa_inf(X, activation)
    assert exact.value > 0
    # exact is a lower bound of every value found (round-off allowance), and brute force closes on it
    assert exact.value <= reference * (1 + 1e-9)
    assert reference <= exact.value * (1 + 1e-6)
    # the direction is where κ is attained, or next to it: at a ray, off the hyperplanes it lies on, to the side
    # where those samples are inactive (σ'(0) is the negative slope, round-off's sign is not)
    assert abs(float(exact.direction.norm()) - 1) < 1e-12 and abs(float(exact.inside.norm()) - 1) < 1e-12
    unit_x = X / X.norm(dim=1, keepdim=True)
    on_hyperplane = (unit_x @ exact.direction).abs() < 1e-12
    # ``inside``: off them, on each one's inactive side by far more than round-off, and κ there is κ_inf up to the
    # nudge's first-order change (the brute-force tolerance above)
    torch.testing.assert_close(
        unit_x[on_hyperplane] @ exact.inside, torch.full_like(unit_x[on_hyperplane, 0], -FACE_NUDGE), rtol=1e-3, atol=0
    )
    inside_kappa = float(unit_flatness_weights(exact.inside[None], X, activation)[0])
    assert exact.value * (1 - 1e-9) <= inside_kappa <= exact.value * (1 + INSIDE_KAPPA_TOL)
    return exact


def test_data_in_an_open_half_space_leave_a_dead_direction():
    X = torch.randn(12, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    X[:, 0] = X[:, 0].abs() + 0.1  # every sample has x_1 > 0: u = −e_1 activates none
    exact = kappa_infimum(X)
    assert exact.value == 0.0
    assert bool((X @ exact.direction <= 1e-12).all())


def test_kappa_infimum_rejects_what_it_cannot_compute_exactly():
    X = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with pytest.raises(FlatbookInputError, match="d <= 3"):
        kappa_infimum(X)
    with pytest.raises(FlatbookInputError, match="ReLU family"):
        kappa_infimum(X[:, :3], "quadratic")
    parallel = torch.outer(torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64), torch.tensor([1.0, 2.0, 2.0]))
    with pytest.raises(FlatbookInputError, match="parallel"):
        kappa_infimum(parallel.double())


def test_kappa_infimum_checks_the_point_it_returns_inside_the_face(monkeypatch):
    """κ at ``inside`` is checked against κ_inf: a move off the hyperplanes too large to keep κ there (here the
    nudge made 10⁸ times larger, on data whose infimum lies on a hyperplane) is an error, not a silent point."""
    import flatbook.relu_cells as relu_cells

    X = torch.randn(9, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    exact = kappa_infimum(X)
    assert bool(((X / X.norm(dim=1, keepdim=True)) @ exact.direction).abs().min() < 1e-12), "needs a ray infimum"
    monkeypatch.setattr(relu_cells, "FACE_NUDGE", 0.1)
    with pytest.raises(SolverError, match="above κ_inf"):
        kappa_infimum(X)
