"""Normalised margins: scale invariance, the Q-margin in the Euclidean and hyperbolic-entropy cases, the KKT
residual of the max-margin problem at constructed KKT points and away from them, errors."""

import cvxpy as cp
import numpy as np
import pytest
import scipy.optimize
import torch

from flatbook import TwoLayerNet
from flatbook.errors import FlatbookInputError
from flatbook.margins import (
    kkt_residual,
    network_degree,
    neuron_cost_margin,
    normalised_margin,
    q_margin,
    rebalanced,
    smallest_margin,
)
from flatbook.mirror import get_potential, neuron_cost_exponent
from flatbook.network import forward


def classified(activation="relu", seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    net = TwoLayerNet(
        torch.randn(7, generator=gen, dtype=torch.float64),
        torch.randn(7, 3, generator=gen, dtype=torch.float64),
        activation,
    )
    out = net(X)
    keep = out.abs() > 0.05
    return net, X[keep], torch.sign(out[keep])


@pytest.mark.parametrize("activation", ["relu", "quadratic"])
@pytest.mark.parametrize("norm", [1.0, 2.0, 3.0])
def test_normalised_margin_is_scale_invariant(activation, norm):
    net, X, y = classified(activation)
    assert network_degree(net) == 1 + net.activation.degree
    base = normalised_margin(net, X, y, norm)
    assert base > 0
    for scale in (0.1, 7.0):
        scaled = TwoLayerNet(scale * net.a, scale * net.theta, net.activation)
        assert normalised_margin(scaled, X, y, norm) == pytest.approx(base, rel=1e-12)


def test_q_margin_of_the_euclidean_potential_is_the_l2_margin():
    net, X, y = classified()
    assert q_margin(net, X, y, "euclidean") == pytest.approx(normalised_margin(net, X, y, 2.0), rel=1e-12)


def test_q_margin_of_hyperbolic_entropy_tends_to_the_l1_margin():

    net, X, y = classified()
    potential = get_potential("hyperbolic_entropy", beta=1e-3)
    big = TwoLayerNet(1e4 * net.a, 1e4 * net.theta)
    assert q_margin(big, X, y, potential) == pytest.approx(normalised_margin(big, X, y, 1.0), rel=1e-5)


def test_margin_errors():
    net, X, y = classified()
    assert smallest_margin(net, X, y) > 0
    assert smallest_margin(net, X, -y) < 0
    with pytest.raises(FlatbookInputError, match=r"labels in \{-1, \+1\}"):
        normalised_margin(net, X, 2 * y)
    with pytest.raises(FlatbookInputError, match="norm must be >= 1"):
        normalised_margin(net, X, y, 0.5)
    with pytest.raises(FlatbookInputError, match="one horizon degree for both layers"):
        q_margin(net, X, y, "euclidean", "hyperbolic_entropy")
    with pytest.raises(FlatbookInputError, match="all parameters zero"):
        normalised_margin(TwoLayerNet(0 * net.a, 0 * net.theta), X, y)


def max_margin_point(potential):
    """A KKT point of min φ_α(w)^α s.t. y_i h(w, x_i) ≥ 1, by SLSQP, for a width-3 quadratic network on 8 points
    (smooth, so SLSQP's solution satisfies the KKT conditions to its tolerance).  For the ℓ₁ horizon, w = u − v
    with u, v ≥ 0 and the objective Σ(u + v): smooth too, and its zeros are exact."""
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(8, 2, generator=gen, dtype=torch.float64)
    y = torch.sign(X[:, 0] ** 2 - X[:, 1] ** 2)
    m, size = 3, 9
    activation = TwoLayerNet(torch.ones(1), torch.ones(1, 2), "quadratic").activation

    def margins(v):
        v = torch.as_tensor(v, dtype=torch.float64)
        return (y * forward(v[:m], v[m:].reshape(m, 2), X, activation)).numpy()

    start = 2 * np.array([1.0, -1.0, 0.1, 1.0, 0.0, 0.0, 1.0, 0.3, 0.3])  # separates the data
    options = {"ftol": 1e-14, "maxiter": 2000}
    if potential.horizon_degree == 1:
        split = np.concatenate([np.clip(start, 0, None), np.clip(-start, 0, None)]) + 0.01
        result = scipy.optimize.minimize(
            np.sum,
            split,
            method="SLSQP",
            bounds=[(0, None)] * (2 * size),
            options=options,
            constraints=[{"type": "ineq", "fun": lambda z: margins(z[:size] - z[size:]) - 1}],
        )
        w = result.x[:size] - result.x[size:]
    else:
        alpha = potential.horizon_degree
        result = scipy.optimize.minimize(
            lambda v: float(potential.horizon(torch.as_tensor(v)) ** alpha),
            start,
            method="SLSQP",
            options=options,
            constraints=[{"type": "ineq", "fun": lambda v: margins(v) - 1}],
        )
        w = result.x
    w = torch.as_tensor(w)
    return TwoLayerNet(w[:m], w[m:].reshape(m, 2), "quadratic"), X, y


@pytest.mark.parametrize(
    "name, params", [("euclidean", {}), ("p_norm", {"p": 3.0}), ("hyperbolic_entropy", {"beta": 0.1})]
)
def test_kkt_residual_vanishes_at_a_kkt_point_and_not_away_from_it(name, params):
    potential = get_potential(name, **params)
    net, X, y = max_margin_point(potential)
    at = kkt_residual(net, X, y, potential)
    assert at.relative < 1e-5, at
    assert len(at.active) >= 1 and (at.multipliers >= 0).all()
    grown = kkt_residual(TwoLayerNet(5 * net.a, 5 * net.theta, "quadratic"), X, y, potential)
    assert abs(grown.relative - at.relative) < 1e-6  # a property of the direction only
    moved = kkt_residual(TwoLayerNet(1.1 * net.a, net.theta + 0.05, "quadratic"), X, y, potential)
    assert moved.relative > 0.1, moved


def horizon_objective(net, potential):
    """φ_α(a)^α + φ_α(θ)^α, the max-margin problem's objective (eq. kkt)."""
    alpha = potential.horizon_degree
    return float(potential.horizon(net.a) ** alpha + potential.horizon(net.theta.reshape(-1)) ** alpha)


@pytest.mark.parametrize("activation", ["relu", "quadratic"])
@pytest.mark.parametrize(
    "name, params", [("euclidean", {}), ("p_norm", {"p": 3.0}), ("hyperbolic_entropy", {"beta": 0.1})]
)
def test_rebalanced_keeps_the_function_and_is_the_least_objective_on_the_orbit(activation, name, params):
    """Same outputs; the objective at most its value at the network itself and at 300 random rescalings; and per
    neuron no value on a grid of 4001 scales s ∈ [e^-4, e^4] of that neuron alone is below it (to the grid's
    resolution), the whole objective evaluated each time."""
    potential = get_potential(name, **params)
    net, X, _ = classified(activation, seed=3)
    balanced = rebalanced(net, potential)
    torch.testing.assert_close(balanced(X), net(X), rtol=1e-12, atol=1e-12)
    least = horizon_objective(balanced, potential)
    assert least <= horizon_objective(net, potential) * (1 + 1e-12)
    gen = torch.Generator().manual_seed(1)
    for _ in range(300):
        scale = torch.exp(torch.randn(net.width, generator=gen, dtype=torch.float64))
        assert least <= horizon_objective(balanced.rescale(scale), potential) * (1 + 1e-12)
    grid = torch.exp(torch.linspace(-4.0, 4.0, 4001, dtype=torch.float64))
    for j in range(net.width):
        values = []
        for s in grid[::40]:  # a coarse pass, then a fine one around its best
            scale = torch.ones(net.width, dtype=torch.float64)
            scale[j] = s
            values.append(horizon_objective(balanced.rescale(scale), potential))
        best = int(np.argmin(values)) * 40
        for s in grid[max(best - 40, 0) : best + 41]:
            scale = torch.ones(net.width, dtype=torch.float64)
            scale[j] = s
            assert horizon_objective(balanced.rescale(scale), potential) >= least * (1 - 1e-12)


def test_rebalanced_leaves_a_neuron_with_a_zero_layer_as_it_is():
    """a_j = 0 or θ_j = 0: the infimum over the orbit is not attained (it sends the other layer to 0), so such a
    neuron keeps its weights; the others are re-balanced as usual."""
    net, X, _ = classified("relu", seed=3)
    a, theta = net.a.clone(), net.theta.clone()
    a[0], theta[1] = 0.0, 0.0
    dead = TwoLayerNet(a, theta, "relu")
    balanced = rebalanced(dead, "euclidean")
    assert float(balanced.a[0]) == 0.0 and torch.equal(balanced.theta[0], dead.theta[0])
    assert float(balanced.a[1]) == float(dead.a[1]) and float(balanced.theta[1].abs().sum()) == 0.0
    torch.testing.assert_close(balanced(X), dead(X), rtol=1e-12, atol=1e-12)
    live = balanced.a[2:].abs() / balanced.theta[2:].norm(dim=1)  # ℓ2, c = 1: |a_j| = ‖θ_j‖ at the balance
    torch.testing.assert_close(live, torch.ones_like(live), rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    "name, params", [("euclidean", {}), ("p_norm", {"p": 3.0}), ("hyperbolic_entropy", {"beta": 0.1})]
)
def test_a_kkt_point_is_already_balanced_in_its_own_problem(name, params):
    """Stationarity along the rescalings (which keep every margin): re-balancing a constructed KKT point moves
    it by no more than SLSQP's tolerance, and its residual stays at 0 to that tolerance."""
    potential = get_potential(name, **params)
    net, X, y = max_margin_point(potential)
    balanced = rebalanced(net, potential)
    live = (net.a.abs() > 1e-6) & (net.theta.norm(dim=1) > 1e-6)
    torch.testing.assert_close(balanced.a[live], net.a[live], rtol=1e-4, atol=0)
    assert kkt_residual(balanced, X, y, potential).relative < 1e-5


def test_zero_mass_counts_the_light_coordinates_of_an_l1_point_as_zero():
    """Lift the exact zeros of an ℓ₁ KKT point to 1e-5 of the largest weight: with only ``zero_tol`` those
    coordinates need |Σ μ_i ∇ y_i h| = 1 and the residual jumps; counting as zero the neurons that carry 1 % of
    Σ|ã_j| and, in the others, the entries that carry 1 % of ‖θ_j‖₁ restores a residual of the order of the lift."""
    potential = get_potential("hyperbolic_entropy", beta=0.1)
    net, X, y = max_margin_point(potential)
    w = torch.cat([net.a, net.theta.reshape(-1)])
    zeros = w.abs() <= 1e-6 * w.abs().max()
    assert 0 < int(zeros.sum()) < w.numel()
    lifted = torch.where(zeros, 1e-5 * w.abs().max(), w)
    lifted_net = TwoLayerNet(lifted[:3], lifted[3:].reshape(3, 2), "quadratic")
    assert kkt_residual(lifted_net, X, y, potential).relative > 0.1
    assert kkt_residual(lifted_net, X, y, potential, zero_mass=0.01).relative < 1e-3
    assert kkt_residual(net, X, y, potential, zero_mass=0.01).relative < 1e-5  # exact zeros: no change
    with pytest.raises(FlatbookInputError, match="zero_mass"):
        kkt_residual(net, X, y, potential, zero_mass=1.0)


def test_neuron_cost_exponent_of_one_and_of_two_potentials():
    """q = α/(1 + c) for one potential on both layers; α_a α_θ/(α_θ + c α_a) for two (symmetric when c = 1)."""
    entropy, p3 = get_potential("hyperbolic_entropy", beta=0.1), get_potential("p_norm", p=3.0)
    assert neuron_cost_exponent("euclidean") == 1.0
    assert neuron_cost_exponent(entropy) == 0.5 and neuron_cost_exponent(p3) == 1.5
    assert neuron_cost_exponent("euclidean", degree=2.0) == pytest.approx(2 / 3)
    mixed = neuron_cost_exponent(entropy, "euclidean")
    assert mixed == neuron_cost_exponent("euclidean", entropy) == pytest.approx(2 / 3)
    assert neuron_cost_exponent(entropy, "euclidean", degree=2.0) == pytest.approx(0.5)
    with pytest.raises(FlatbookInputError, match="degree"):
        neuron_cost_exponent("euclidean", degree=0.0)


@pytest.mark.parametrize("outer, inner", [("euclidean", None), ("hyperbolic_entropy", "euclidean"), ("p_norm", None)])
def test_neuron_cost_margin_depends_on_the_function_only(outer, inner):
    """Rescaling a neuron (a_j/s, s θ_j) or the whole network leaves it unchanged; for gradient descent on a
    balanced network it is twice the ℓ2 normalised margin (‖w‖² = 2 Σ_j |a_j| ‖θ_j‖ at balance)."""
    net, X, y = classified()
    gen = torch.Generator().manual_seed(3)
    s = torch.rand(net.width, generator=gen, dtype=torch.float64) + 0.5
    rescaled = TwoLayerNet(net.a / s, net.theta * s[:, None], "relu")
    grown = TwoLayerNet(3 * net.a, 3 * net.theta, "relu")
    base = neuron_cost_margin(net, X, y, outer, inner)
    assert neuron_cost_margin(rescaled, X, y, outer, inner) == pytest.approx(base, rel=1e-12)
    assert neuron_cost_margin(grown, X, y, outer, inner) == pytest.approx(base, rel=1e-12)
    if outer == "euclidean":
        norms = net.theta.norm(dim=1)
        balanced = TwoLayerNet(
            net.a.sign() * (net.a.abs() * norms).sqrt(),
            net.theta / norms[:, None] * (net.a.abs() * norms).sqrt()[:, None],
            "relu",
        )
        assert base == pytest.approx(2 * normalised_margin(balanced, X, y, 2), rel=1e-12)
    with pytest.raises(FlatbookInputError, match="network is zero"):
        neuron_cost_margin(TwoLayerNet(0 * net.a, net.theta, "relu"), X, y, outer, inner)


def test_kkt_residual_errors():
    net, X, y = max_margin_point(get_potential("euclidean"))
    with pytest.raises(FlatbookInputError, match="misclassifies"):
        kkt_residual(TwoLayerNet(-net.a, net.theta, "quadratic"), X, y, "euclidean")
    with pytest.raises(FlatbookInputError, match="one horizon degree"):
        kkt_residual(net, X, y, "euclidean", get_potential("hyperbolic_entropy", beta=0.1))
    with pytest.raises(FlatbookInputError, match="active_tol"):
        kkt_residual(net, X, y, "euclidean", active_tol=-1.0)


def quadratic_margin_jacobian(net, X, y):
    """∂(y_i h(w, x_i))/∂w for h = Σ_j a_j (θ_j·x)², by hand: (θ_j·x)² for a_j, 2 a_j (θ_j·x) x for θ_j."""
    inner = X @ net.theta.T  # (n, m)
    by_theta = 2 * (net.a * inner)[:, :, None] * X[:, None, :]  # (n, m, d)
    return y[:, None] * torch.cat([inner**2, by_theta.reshape(len(X), -1)], dim=1)


@pytest.mark.parametrize(
    "source, shift, zero_mass, active_tol, traded",
    [
        ("hyperbolic_entropy", 0.02, 0.01, 1e-2, False),
        ("hyperbolic_entropy", 0.02, 0.0, 1e-2, False),
        ("hyperbolic_entropy", 0.05, 0.05, 1e-2, False),
        ("euclidean", 0.0, 0.2, 0.5, True),
    ],
)
def test_the_l1_residual_is_the_least_over_the_multipliers(source, shift, zero_mass, active_tol, traded):
    """The ℓ₁ problem's residual of a direction near a KKT point (of the ℓ₁ problem itself, shifted; or of the ℓ₂
    one, whose light coordinates count as zero under 20 % of the mass): it equals cvxpy's minimum over μ ≥ 0 of the
    same convex problem, the margins' gradients written out by hand, and is at most the shortcut of fitting μ on the
    smooth coordinates first and adding the zero coordinates' excursions after; where the zero coordinates' bound
    binds (``traded``), well below it (0.23 against 0.62 of ‖∇φ‖ on that instance; the assert asks 10 % less)."""
    potential = get_potential("hyperbolic_entropy", beta=0.1)
    net, X, y = max_margin_point(get_potential(source))
    moved = TwoLayerNet(1.1 * net.a, net.theta + shift, "quadratic") if shift else net
    found = kkt_residual(moved, X, y, potential, zero_mass=zero_mass, active_tol=active_tol)
    factor = smallest_margin(moved, X, y) ** (-1 / 2)  # degree L = 2: the smallest margin becomes 1
    scaled = TwoLayerNet(factor * moved.a, factor * moved.theta, "quadratic")
    J = quadratic_margin_jacobian(scaled, X, y)[found.active].numpy()
    g = np.sign(torch.cat([scaled.a, scaled.theta.reshape(-1)]).numpy())  # ∇‖w‖₁ off zero
    zero = found.zero.numpy()
    mu = cp.Variable(J.shape[0], nonneg=True)
    combination = J.T @ mu
    fit_part = cp.sum_squares(g[~zero] - combination[~zero])
    problem = cp.Problem(cp.Minimize(fit_part + cp.sum_squares(cp.pos(cp.abs(combination[zero]) - 1))))
    problem.solve(solver=cp.CLARABEL)
    reference = np.sqrt(problem.value) / np.linalg.norm(g[~zero])
    assert found.relative == pytest.approx(reference, rel=1e-6, abs=1e-9)
    start, _ = scipy.optimize.nnls(J[:, ~zero].T, g[~zero])
    fit, free = g[~zero] - J[:, ~zero].T @ start, J[:, zero].T @ start
    shortcut = np.linalg.norm(np.concatenate([fit, np.clip(np.abs(free) - 1, 0, None)])) / np.linalg.norm(g[~zero])
    assert found.relative <= shortcut * (1 + 1e-9)
    if traded:
        assert found.relative < 0.9 * shortcut, (found.relative, shortcut)


def test_the_l1_zero_coordinates_are_kept_by_rescaling():
    """The zero rule on a hand-built network: the neuron of |ã_j| 1e-3 of Σ|ã_j| ≈ 3 is zero under 1 % of the mass,
    and θ's entry 1e-3 of ‖θ_j‖₁ in another neuron; rescaling each neuron by a random factor, and the whole network,
    keeps the set (a scale of 1e-3 makes the light neuron's a_j as large as the others')."""
    potential = get_potential("hyperbolic_entropy", beta=0.1)
    a = torch.tensor([1e-3, 1.0, -2.0], dtype=torch.float64)
    theta = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1e-3, -2.0], [0.5, 0.25, -0.25]], dtype=torch.float64)
    net = TwoLayerNet(a, theta, "relu")
    X = torch.tensor([[1.0, 0.2, -0.3], [0.5, -1.0, -1.0], [0.2, 0.1, -1.0]], dtype=torch.float64)
    y = torch.sign(net(X))
    expected = torch.tensor([True, False, False, True, True, True, False, True, False, False, False, False])
    gen = torch.Generator().manual_seed(0)
    scales = [torch.ones(3), torch.tensor([1e-3, 1.0, 10.0]), torch.exp(torch.randn(3, generator=gen))]
    for scale in (s.to(torch.float64) for s in scales):
        for size in (1.0, 7.0):
            moved = net.rescale(scale)
            moved = TwoLayerNet(size * moved.a, size * moved.theta, "relu")
            zero = kkt_residual(moved, X, y, potential, zero_mass=0.01).zero
            assert torch.equal(zero, expected), zero
