import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from torch.func import hessian

from flatbook import TwoLayerNet, flattest_outer_weights, get_activation, hessian_trace, min_flatness, optimal_rescaling
from flatbook.data import single_index
from flatbook.errors import FlatbookInputError, UnboundedFlatnessError
from flatbook.flatness import flatness_weights, trace_coefficients
from flatbook.network import forward

from conftest import random_problem


def autograd_trace(net, X, y):
    m, d = net.theta.shape

    def loss(params):
        return ((forward(params[:m], params[m:].reshape(m, d), X, net.activation) - y) ** 2).mean()

    return torch.trace(hessian(loss)(torch.cat([net.a, net.theta.reshape(-1)]))).item()


def interpolator(activation, n=10, m=25, d=6, seed=0):
    """An interpolating network (flattest outer weights for random directions)."""
    model = single_index(d=d, link="relu", noise_std=0.1, seed=seed)
    X, y = model.sample(n, seed=seed + 1)
    theta = torch.randn(m, d, generator=torch.Generator().manual_seed(seed + 2), dtype=torch.float64)
    result = flattest_outer_weights(theta, X, y, activation)
    # Shuffle the orbit so that the network is not already at the optimal rescaling.
    alpha = torch.exp(torch.randn(m, generator=torch.Generator().manual_seed(seed + 3), dtype=torch.float64))
    return result.net.rescale(alpha), X, y


@pytest.mark.parametrize("seed", [0, 1])
def test_trace_matches_autograd_away_from_interpolators(activation, seed):
    net, X, y = random_problem(activation, seed=seed)
    exact, auto = hessian_trace(net, X, y), autograd_trace(net, X, y)
    assert abs(exact - auto) <= 1e-10 * abs(auto)


def test_trace_matches_autograd_at_interpolators(activation):
    net, X, y = interpolator(activation)
    assert net.empirical_loss(X, y) < 1e-20
    exact, auto = hessian_trace(net, X, y), autograd_trace(net, X, y)
    assert abs(exact - auto) <= 1e-10 * abs(auto)


def test_trace_is_a_sum_of_two_powers_of_alpha(activation):
    net, X, y = random_problem(activation)
    A, B = trace_coefficients(net, X, y)
    c = activation.degree
    alpha = torch.linspace(0.5, 2.0, net.width, dtype=torch.float64)
    predicted = float((A * alpha ** (2 * c) + B * alpha ** (-2.0)).sum())
    assert hessian_trace(net.rescale(alpha), X, y) == pytest.approx(predicted, rel=1e-12)


def test_min_flatness_equals_a_numerical_minimisation(activation):
    net, X, y = interpolator(activation, m=12, n=8)
    A, B = trace_coefficients(net, X, y)
    keep = (A > 0) & (B > 0)  # neurons whose infimum is attained
    net = TwoLayerNet(net.a[keep], net.theta[keep], activation)

    def trace_of_log_alpha(log_alpha):
        return hessian_trace(net.rescale(torch.exp(torch.as_tensor(log_alpha))), X, y)

    numerical = minimize(
        trace_of_log_alpha, np.zeros(net.width), method="BFGS", options={"gtol": 1e-10, "maxiter": 2000}
    ).fun
    assert min_flatness(net, X, y) == pytest.approx(numerical, rel=1e-6)
    assert min_flatness(net, X, y) <= numerical * (1 + 1e-12)


def test_min_flatness_is_the_weighted_lp_norm(activation):
    net, X, y = interpolator(activation)
    kappa = flatness_weights(net.theta, X, activation)
    lp = float((kappa * net.effective_outer_weights().abs() ** activation.p).sum())
    assert min_flatness(net, X, y) == pytest.approx(lp, rel=1e-8)


def test_optimal_rescaling_attains_min_flatness(activation):
    net, X, y = interpolator(activation)
    alpha = optimal_rescaling(net, X, y)
    assert (alpha > 0).all()
    assert hessian_trace(net.rescale(alpha), X, y) == pytest.approx(min_flatness(net, X, y), rel=1e-10)
    assert min_flatness(net.rescale(alpha), X, y) == pytest.approx(min_flatness(net, X, y), rel=1e-10)


def test_optimal_rescaling_with_zero_outer_weights():
    # ReLU flattest interpolators are sparse: neurons with a_j = 0 reach their infimum only as α_j → 0.
    net, X, y = interpolator(get_activation("relu"))
    assert (net.a == 0).any()
    alpha = optimal_rescaling(net, X, y)
    assert hessian_trace(net.rescale(alpha), X, y) == pytest.approx(min_flatness(net, X, y), rel=1e-10)


def test_flatness_weights_are_invariant_to_norms():
    X = torch.randn(20, 4, dtype=torch.float64)
    theta = torch.randn(5, 4, dtype=torch.float64)
    quad = get_activation("quadratic")
    torch.testing.assert_close(flatness_weights(3.0 * theta, X, quad), flatness_weights(theta, X, quad))
    with pytest.raises(FlatbookInputError, match="zero and have no direction"):
        flatness_weights(torch.zeros(2, 4), X, quad)


def test_negative_curvature_is_reported():
    # Far from an interpolator the residual term can make B_j < 0 (quadratic: σ'' = 2 > 0, a_j r_i < 0).
    X = torch.ones(1, 1, dtype=torch.float64)
    net = TwoLayerNet([1e-3], [[1e-3]], "quadratic")
    with pytest.raises(UnboundedFlatnessError, match="B_j .* < 0"):
        min_flatness(net, X, torch.tensor([10.0], dtype=torch.float64))


@pytest.mark.parametrize("bad", ["nan_X", "inf_y", "rows", "cols"])
def test_bad_data_is_rejected(bad):
    net, X, y = random_problem(get_activation("relu"))
    if bad == "nan_X":
        X[0, 0] = float("nan")
        match = "X contains 1 NaN or inf entry"
    elif bad == "inf_y":
        y[1] = float("inf")
        match = "y contains 1 NaN or inf entry"
    elif bad == "rows":
        y = y[:-1]
        match = "X has 9 rows but y has 8 entries"
    else:
        X = X[:, :-1]
        match = "X has 3 columns but the network's inner weights have d = 4"
    for fn in (hessian_trace, min_flatness, optimal_rescaling):
        with pytest.raises(FlatbookInputError, match=match):
            fn(net, X, y)


def test_net_type_is_checked():
    with pytest.raises(FlatbookInputError, match="net must be a flatbook.TwoLayerNet"):
        hessian_trace("not a net", torch.ones(2, 2), torch.ones(2))


def test_memorising_flatness_is_the_upsilon_of_the_memorising_network():
    """eq-memorising: one neuron per nonzero label, active on that sample only, costs (4/n)‖x_i‖|y_i| whatever its
    direction and norm; checked against min_flatness of networks built from X θ_i = h e_i − 1 for two heights h."""
    from flatbook.flatness import relu_memorising_flatness

    gen = torch.Generator().manual_seed(3)
    n, d = 6, 9
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    y[2] = 0.0  # a zero label needs no neuron
    keep = y != 0
    for height in (2.0, 7.0):  # two different isolating directions per sample
        targets = height * torch.eye(n, dtype=torch.float64) - 1  # active on sample i only, with value h − 1
        theta = torch.linalg.lstsq(X, targets).solution.T[keep]
        net = TwoLayerNet(y[keep] / (height - 1), theta, get_activation("relu"))
        assert float((net(X) - y).abs().max()) < 1e-10
        assert min_flatness(net, X, y) == pytest.approx(relu_memorising_flatness(X, y), rel=1e-10)
