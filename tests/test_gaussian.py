"""Closed-form Gaussian kernels and the exact population loss, against quadrature and Monte Carlo."""

import math

import numpy as np
import pytest
import torch

from flatbook import TwoLayerNet, get_activation, population_loss
from flatbook.data import multi_index_product, single_index, sum_of_single_index
from flatbook.errors import FlatbookInputError
from flatbook.gaussian import gaussian_kernel, hermite_moment, kernel_available, product_kernel

ACTS = {
    "relu": get_activation("relu"),
    "leaky": get_activation("leaky_relu", negative_slope=0.3),
    "quadratic": get_activation("quadratic"),
    "relu2": get_activation("relu_power", c=2),
}
PAIRS = [(a, b) for a in ACTS for b in ACTS if kernel_available(ACTS[a], ACTS[b])]


def polar_integral(f1, f2, u, v, points=400_000):
    """E f1(u·x) f2(v·x), x ~ N(0, I_2), for c1-, c2-homogeneous f1, f2 (independent of the closed forms).

    In polar coordinates the radial part is ∫ r^{1+c1+c2} e^{-r²/2} dr / (2π) = 2^{c/2} Γ(1 + c/2) / (2π)
    with c = c1 + c2, and the angular part a periodic integral, by the trapezoid rule on a fine grid
    (error O(h²) at the kinks: ~1e-11 here).
    """
    c = f1.degree + f2.degree
    theta = torch.linspace(0, 2 * math.pi, points + 1, dtype=torch.float64)[:-1]
    e = torch.stack([theta.cos(), theta.sin()], dim=1)
    angular = float((f1(e @ torch.from_numpy(u)) * f2(e @ torch.from_numpy(v))).mean()) * 2 * math.pi
    return angular * 2 ** (c / 2) * math.gamma(1 + c / 2) / (2 * math.pi)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_kernels_match_two_dimensional_quadrature(pair):
    first, second = ACTS[pair[0]], ACTS[pair[1]]
    rng = np.random.default_rng(0)
    for _ in range(4):
        u, v = rng.standard_normal(2) * 1.3, rng.standard_normal(2) * 0.7
        closed = float(gaussian_kernel(first, torch.from_numpy(u[None]), second, torch.from_numpy(v[None]))[0, 0])
        assert closed == pytest.approx(polar_integral(first, second, u, v), rel=1e-8, abs=1e-12)


def test_kernels_at_equal_and_opposite_directions():
    u = torch.tensor([[0.6, 0.8]], dtype=torch.float64)
    relu = ACTS["relu"]
    assert float(gaussian_kernel(relu, u, relu, u)[0, 0]) == pytest.approx(0.5)  # E relu(g)² = 1/2
    assert float(gaussian_kernel(relu, u, relu, -u)[0, 0]) == pytest.approx(0.0, abs=1e-15)
    quad = ACTS["quadratic"]
    assert float(gaussian_kernel(quad, u, quad, u)[0, 0]) == pytest.approx(3.0)  # E g⁴ = 3
    relu2 = ACTS["relu2"]
    assert float(gaussian_kernel(relu2, u, relu2, u)[0, 0]) == pytest.approx(1.5)  # E relu(g)⁴ = 3/2


@pytest.mark.parametrize(
    "net_act,link",
    [
        ("relu", "relu"),
        ("quadratic", "quadratic"),
        ("quadratic", "relu"),
        (("leaky_relu", {"negative_slope": 0.2}), "relu"),
        (("relu_power", {"c": 2}), "quadratic"),
    ],
)
def test_exact_population_loss_agrees_with_monte_carlo(net_act, link):
    name, params = net_act if isinstance(net_act, tuple) else (net_act, {})
    activation = get_activation(name, **params)
    teacher = sum_of_single_index(6, 2, link=link, noise_std=0.3, seed=1)
    gen = torch.Generator().manual_seed(2)
    net = TwoLayerNet(
        torch.randn(9, generator=gen, dtype=torch.float64) / 3,
        torch.randn(9, 6, generator=gen, dtype=torch.float64),
        activation,
    )
    exact = population_loss(net, teacher)
    assert exact.method == "exact" and exact.stderr == 0.0 and exact.n_test == 0
    sampled = population_loss(net, teacher, n_test=400_000, method="monte carlo")
    assert abs(exact.value - sampled.value) <= 4 * sampled.stderr
    assert exact.bayes_risk == pytest.approx(0.09)


def test_exact_population_loss_of_the_teacher_itself_is_the_bayes_risk():
    teacher = single_index(5, link="relu", noise_std=0.5, seed=0)
    net = TwoLayerNet(torch.ones(1, dtype=torch.float64), teacher.theta_star, "relu")
    loss = population_loss(net, teacher)
    assert loss.excess == pytest.approx(0.0, abs=1e-14)


@pytest.mark.parametrize("name", list(ACTS))
def test_hermite_moments_match_quadrature(name):
    from numpy.polynomial.hermite_e import hermeval
    from scipy.integrate import quad

    activation = ACTS[name]
    for k in range(7):

        def integrand(g, k=k):
            value = float(activation(torch.tensor(g, dtype=torch.float64)))
            return value * hermeval(g, [0.0] * k + [1.0]) * math.exp(-g * g / 2) / math.sqrt(2 * math.pi)

        # split at the kink g = 0
        numeric = sum(quad(integrand, *ends, epsabs=1e-12, limit=200)[0] for ends in ((-np.inf, 0.0), (0.0, np.inf)))
        assert hermite_moment(activation, k) == pytest.approx(numeric, rel=1e-9, abs=1e-12)
    assert hermite_moment(ACTS["relu"], 1) == pytest.approx(0.5)  # E relu(g) g = 1/2
    assert hermite_moment(ACTS["relu"], 2) == pytest.approx(1 / math.sqrt(2 * math.pi))
    assert hermite_moment(ACTS["quadratic"], 2) == pytest.approx(2.0)
    # exact zeros where a parity argument makes them vanish (the product teacher's closed form relies on it)
    assert all(hermite_moment(ACTS[a], k) == 0.0 for a in ("relu", "leaky") for k in (3, 5, 7, 9))
    assert all(hermite_moment(ACTS[a], k) == 0.0 for a in ("quadratic", "relu2") for k in (4, 6, 8))


@pytest.mark.parametrize("name", list(ACTS))
def test_product_kernel_matches_two_dimensional_quadrature(name):
    # E σ(u·x) x₁x₂ for x ~ N(0, I₂) in polar coordinates (as polar_integral, with degree c + 2)
    activation = ACTS[name]
    rng = np.random.default_rng(1)
    theta = torch.linspace(0, 2 * math.pi, 400_001, dtype=torch.float64)[:-1]
    e = torch.stack([theta.cos(), theta.sin()], dim=1)
    c = activation.degree + 2
    for _ in range(3):
        u = torch.from_numpy(rng.standard_normal(2) * 1.4)
        angular = float((activation(e @ u) * e[:, 0] * e[:, 1]).mean()) * 2 * math.pi
        numeric = angular * 2 ** (c / 2) * math.gamma(1 + c / 2) / (2 * math.pi)
        closed = float(product_kernel(activation, u[None], torch.eye(2, dtype=torch.float64))[0])
        assert closed == pytest.approx(numeric, rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("name,k", [("relu", 2), ("relu", 3), ("leaky", 2), ("quadratic", 2), ("relu2", 3)])
def test_exact_population_loss_of_the_product_teacher_agrees_with_monte_carlo(name, k):
    teacher = multi_index_product(6, k, noise_std=0.2, seed=3)
    gen = torch.Generator().manual_seed(4)
    net = TwoLayerNet(
        torch.randn(7, generator=gen, dtype=torch.float64) / 2,
        torch.randn(7, 6, generator=gen, dtype=torch.float64),
        ACTS[name],
    )
    exact = population_loss(net, teacher)
    assert exact.method == "exact" and exact.stderr == 0.0
    sampled = population_loss(net, teacher, n_test=400_000, method="monte carlo")
    assert abs(exact.value - sampled.value) <= 4 * sampled.stderr


def test_product_teacher_with_an_orthogonal_residual():
    # The He₃ residual along v ⟂ Θ* is orthogonal to the product (independent factors) and, for the
    # leaky-ReLU family, to the network: the closed form adds η²; ReLU² has h₃ ≠ 0, so Monte Carlo.
    from flatbook.data import MultiIndexModel, ProductLink, orthogonal_direction, random_orthonormal

    theta_star = random_orthonormal(3, 6, seed=5)
    model = MultiIndexModel(
        theta_star,
        ProductLink(3),
        noise_std=0.2,
        residual_std=0.5,
        residual_direction=orthogonal_direction(theta_star, seed=6),
    )
    gen = torch.Generator().manual_seed(7)
    a, theta = (
        torch.randn(7, generator=gen, dtype=torch.float64) / 2,
        torch.randn(7, 6, generator=gen, dtype=torch.float64),
    )
    exact = population_loss(TwoLayerNet(a, theta, "relu"), model)
    assert exact.method == "exact"
    sampled = population_loss(TwoLayerNet(a, theta, "relu"), model, n_test=400_000, method="monte carlo")
    assert abs(exact.value - sampled.value) <= 4 * sampled.stderr
    assert population_loss(TwoLayerNet(a, theta, ACTS["relu2"]), model, n_test=1_000).method == "monte carlo"


def test_monte_carlo_where_no_closed_form_and_errors():
    teacher = multi_index_product(5, 2, seed=0)
    net = TwoLayerNet(
        torch.ones(3, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64), get_activation("relu_power", c=3)
    )  # ReLU³: no closed form here
    loss = population_loss(net, teacher, n_test=1_000)
    assert loss.method == "monte carlo" and loss.stderr > 0
    with pytest.raises(FlatbookInputError, match="no closed form"):
        population_loss(net, teacher, method="exact")
    with pytest.raises(FlatbookInputError, match="method must be"):
        population_loss(net, teacher, method="quadrature")


@pytest.mark.parametrize(
    "teacher",
    [sum_of_single_index(5, 2, link="relu", noise_std=0.2, seed=3), multi_index_product(5, k=3, noise_std=0.2, seed=3)],
)
def test_exact_population_loss_merges_copies_and_drops_zero_weights(teacher):
    """Copies of a neuron (a flattest interpolator split over its width) and zero outer weights change nothing:
    the loss equals aᵀKa − 2aᵀk + L₀ summed over all 11 neurons, with k_j from one-neuron networks
    (L(σ(⟨θ_j, ·⟩)) = K_jj − 2k_j + L₀) and L₀ the zero predictor's loss; and Monte Carlo agrees."""
    relu = get_activation("relu")
    gen = torch.Generator().manual_seed(4)
    theta = torch.randn(4, 5, generator=gen, dtype=torch.float64)
    copies = torch.tensor([3, 1, 2, 5])
    a = torch.repeat_interleave(torch.tensor([0.7, -0.4, 0.0, 1.1], dtype=torch.float64) / copies, copies)
    net = TwoLayerNet(a, torch.repeat_interleave(theta, copies, dim=0), relu)
    one = torch.ones(1, dtype=torch.float64)
    zero_loss = population_loss(TwoLayerNet(0 * one, theta[:1], relu), teacher).value
    K = gaussian_kernel(relu, net.theta, relu, net.theta)
    k = torch.tensor(
        [
            (zero_loss + float(K[j, j]) - population_loss(TwoLayerNet(one, net.theta[j : j + 1], relu), teacher).value)
            / 2
            for j in range(net.width)
        ],
        dtype=torch.float64,
    )
    exact = population_loss(net, teacher)
    assert exact.value == pytest.approx(float(a @ K @ a - 2 * a @ k) + zero_loss, rel=1e-12)
    sampled = population_loss(net, teacher, n_test=200_000, method="monte carlo")
    assert abs(exact.value - sampled.value) <= 4 * sampled.stderr
