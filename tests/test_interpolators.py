import pytest
import torch

from flatbook import TwoLayerNet, flattest_outer_weights, get_activation, min_flatness
from flatbook.data import random_orthonormal, single_index
from flatbook.errors import FlatbookInputError
from flatbook.flatness import flatness_weights, orbit_flatness, population_flatness_weight
from flatbook.flattest import feature_matrix, other_interpolators
from flatbook.interpolators import (
    alignment_projector,
    directions_with_alignment,
    minimum_l2_interpolator,
    orthogonal_directions,
    random_directions,
    teacher_and_random_directions,
)


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.9, 1.0])
def test_directions_have_exactly_the_requested_alignment(rho):
    theta_star = random_orthonormal(2, 7, seed=0)
    dirs = directions_with_alignment(theta_star, 50, rho, seed=1)
    torch.testing.assert_close(dirs.norm(dim=1), torch.ones(50, dtype=torch.float64))
    net = TwoLayerNet(torch.ones(50), dirs, "relu")
    torch.testing.assert_close(
        net.alignment(theta_star), torch.full((50,), rho, dtype=torch.float64), atol=1e-12, rtol=0
    )


def test_orthogonal_and_teacher_dictionaries():
    theta_star = random_orthonormal(1, 5, seed=2)
    bad = orthogonal_directions(theta_star, 20, seed=0)
    assert (bad @ theta_star.T).abs().max() < 1e-12
    good = teacher_and_random_directions(theta_star, 20, seed=0)
    torch.testing.assert_close(good[0], theta_star[0])
    assert good.shape == (20, 5)
    assert random_directions(10, 5, seed=3).shape == (10, 5)


def test_direction_errors():
    theta_star = random_orthonormal(3, 3, seed=0)
    with pytest.raises(FlatbookInputError, match="spans all of R\\^3"):
        orthogonal_directions(theta_star, 4)
    with pytest.raises(FlatbookInputError, match="rho must lie in"):
        directions_with_alignment(random_orthonormal(1, 3), 4, 1.5)
    with pytest.raises(FlatbookInputError, match="need m > k"):
        teacher_and_random_directions(random_orthonormal(2, 4), 2)


@pytest.mark.parametrize(
    "name,params",
    [("relu", {}), ("leaky_relu", {"negative_slope": 0.3}), ("quadratic", {}), ("relu_power", {"c": 2.5})],
)
def test_population_flatness_weight_is_the_large_n_limit(name, params):
    activation = get_activation(name, **params)
    X = torch.randn(400_000, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    kappa = flatness_weights(random_directions(4, 6, seed=1), X, activation)
    torch.testing.assert_close(
        kappa, torch.full_like(kappa, population_flatness_weight(activation, 6)), rtol=2e-2, atol=0
    )


def test_population_flatness_weight_closed_forms():
    assert population_flatness_weight(get_activation("relu"), 9) == pytest.approx(6.0)  # 2 sqrt(d)
    d = 10
    assert population_flatness_weight(get_activation("quadratic"), d) == pytest.approx(
        3 * 2 ** (-2 / 3) * 6 ** (1 / 3) * (8 * (d + 2)) ** (2 / 3)
    )


def test_other_interpolators_interpolate_and_respect_the_bound():
    model = single_index(d=6, link="relu", noise_std=0.1, seed=0)
    X, y = model.sample(12, seed=1)
    theta = random_directions(30, 6, seed=2)
    for activation in ("relu", "quadratic"):
        result = flattest_outer_weights(theta, X, y, activation)
        others = other_interpolators(result, X, 25, spread=torch.logspace(-3, 0, 25), seed=3)
        act = result.net.activation
        for a_eff in others[:5]:
            net = TwoLayerNet(a_eff, theta, act)  # unit-norm directions: a = ã
            assert (net(X) - y).abs().max() < 1e-10
            assert min_flatness(net, X, y) == pytest.approx(
                float(orbit_flatness(a_eff, result.kappa, result.p)), rel=1e-8
            )
        assert (orbit_flatness(others, result.kappa, result.p) >= result.lower_bound * (1 - 1e-12)).all()
        with pytest.raises(FlatbookInputError, match="spread must be"):
            other_interpolators(result, X, 5, spread=[1.0, 2.0])


def test_alignment_projector():
    theta_star = random_orthonormal(2, 8, seed=0)
    directions = random_directions(30, 8, seed=1)
    for rho in (0.0, 0.4, 1.0):
        projected = alignment_projector(theta_star, rho)(directions)
        net = TwoLayerNet(torch.ones(30), projected, "relu")
        torch.testing.assert_close(
            net.alignment(theta_star), torch.full((30,), rho, dtype=torch.float64), atol=1e-12, rtol=0
        )
        torch.testing.assert_close(projected.norm(dim=1), torch.ones(30, dtype=torch.float64))


def test_memorising_network_isolates_each_sample_or_says_it_cannot():
    """eq-memorising: the network from isolating directions interpolates with Υ = (4/n) Σ ‖x_i‖ |y_i|; restricted to
    the complement of the teacher it exists for n ≤ d − 1 points in general position, and not when a sample lies
    in the cone of the others (here: beyond Cover's 2(d − 1) points in the (d − 1)-dimensional complement)."""
    from flatbook.flatness import relu_memorising_flatness
    from flatbook.interpolators import complement_basis, memorising_network

    teacher = single_index(8, seed=0)
    basis = complement_basis(teacher.theta_star)
    assert basis.shape == (8, 7) and float((basis.T @ teacher.theta_star.T).abs().max()) < 1e-12
    X, y = teacher.sample(7, seed=1)
    net = memorising_network(X, y, basis)
    assert float((net(X) - y).abs().max()) < 1e-10
    assert float((net.theta @ teacher.theta_star.T).abs().max()) < 1e-10  # every neuron misaligned
    assert min_flatness(net, X, y) == pytest.approx(relu_memorising_flatness(X, y), rel=1e-10)
    X, y = teacher.sample(40, seed=1)
    assert memorising_network(X, y, basis) is None


@pytest.mark.parametrize("activation", ["relu", "quadratic"])
def test_minimum_l2_interpolator_interpolates_with_the_least_norm_outer_weights(activation):
    X, y = single_index(4, link=activation, noise_std=0.3, seed=0).sample(8, seed=1)
    directions = random_directions(20, 4, seed=2)
    net = minimum_l2_interpolator(X, y, activation, directions)
    assert float((net(X) - y).abs().max()) < 1e-10
    Phi = feature_matrix(directions, X, activation)
    null = torch.linalg.svd(Phi).Vh[8:]  # Φ v = 0: adding v keeps interpolating
    for v in null[:3]:
        assert float((Phi @ (net.a + v) - y).abs().max()) < 1e-10
        assert float((net.a + v).norm()) > float(net.a.norm())  # a = Φ⁺y is orthogonal to the null space


def test_minimum_l2_interpolator_refuses_what_cannot_interpolate():
    X, y = single_index(4, noise_std=0.3, seed=0).sample(8, seed=1)
    with pytest.raises(FlatbookInputError, match="do not span the 8 labels"):
        minimum_l2_interpolator(X, y, "relu", random_directions(5, 4, seed=2))
    with pytest.raises(FlatbookInputError, match="d = 3 columns"):
        minimum_l2_interpolator(X, y, "relu", random_directions(20, 3, seed=2))
