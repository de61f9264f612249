import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flatbook import get_activation
from flatbook.activations import ACTIVATION_NAMES
from flatbook.errors import FlatbookInputError


def test_names_and_degrees():
    assert ACTIVATION_NAMES == ("relu", "leaky_relu", "quadratic", "relu_power")
    assert get_activation("relu").degree == 1.0
    assert get_activation("leaky_relu").degree == 1.0
    assert get_activation("quadratic").degree == 2.0
    assert get_activation("relu_power", c=2.5).degree == 2.5
    assert get_activation("quadratic").p == pytest.approx(4 / 3)
    assert get_activation("relu").p == 1.0


@settings(max_examples=50, deadline=None)
@given(scale=st.floats(1e-3, 1e3), seed=st.integers(0, 2**16))
def test_positive_homogeneity(scale, seed):
    z = torch.randn(50, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    for name, params in [
        ("relu", {}),
        ("leaky_relu", {"negative_slope": 0.3}),
        ("quadratic", {}),
        ("relu_power", {"c": 1.7}),
    ]:
        act = get_activation(name, **params)
        c = act.degree
        torch.testing.assert_close(act(scale * z), scale**c * act(z), rtol=1e-12, atol=0)
        torch.testing.assert_close(act.derivative(scale * z), scale ** (c - 1) * act.derivative(z), rtol=1e-12, atol=0)


def test_derivatives_match_autograd(activation):
    z = torch.linspace(-3, 3, 61, dtype=torch.float64)
    z = z[z.abs() > 1e-6].requires_grad_(True)  # the kink at 0 has no classical derivative
    (first,) = torch.autograd.grad(activation(z).sum(), z, create_graph=True)
    # For piecewise-linear σ the first derivative is piecewise constant and has no graph.
    second = torch.autograd.grad(first.sum(), z)[0] if first.requires_grad else torch.zeros_like(z)
    torch.testing.assert_close(first.detach(), activation.derivative(z.detach()), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(second, activation.second_derivative(z.detach()), rtol=1e-12, atol=1e-14)


def test_no_nan_gradients_at_zero():
    z = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    act = get_activation("relu_power", c=1.5)
    (first,) = torch.autograd.grad(act(z).sum(), z, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), z)
    assert torch.isfinite(first).all() and torch.isfinite(second).all()


def test_relu_power_one_is_relu():
    z = torch.randn(100, dtype=torch.float64)
    torch.testing.assert_close(get_activation("relu_power", c=1)(z), get_activation("relu")(z))


def test_unknown_activation_lists_the_valid_ones():
    with pytest.raises(FlatbookInputError, match="unknown activation 'tanh'.*relu, leaky_relu, quadratic, relu_power"):
        get_activation("tanh")


@pytest.mark.parametrize("c", [0.5, -1, math.nan, math.inf])
def test_relu_power_rejects_degree_below_one(c):
    with pytest.raises(FlatbookInputError, match="c >= 1"):
        get_activation("relu_power", c=c)


def test_bad_parameters():
    with pytest.raises(FlatbookInputError, match="does not take parameters"):
        get_activation("relu", c=2)
    with pytest.raises(FlatbookInputError, match="negative_slope"):
        get_activation("leaky_relu", negative_slope=1.5)


def test_equality_and_repr():
    assert get_activation("leaky_relu", negative_slope=0.1) == get_activation("leaky_relu", negative_slope=0.1)
    assert get_activation("leaky_relu", negative_slope=0.1) != get_activation("leaky_relu", negative_slope=0.2)
    assert repr(get_activation("relu_power", c=3)) == "get_activation('relu_power', c=3.0)"


@pytest.mark.parametrize(
    "activation",
    ["relu", "quadratic", get_activation("leaky_relu", negative_slope=0.1), get_activation("relu_power", c=1.5)],
)
def test_derivative_squared_is_the_square_of_the_derivative(activation):
    """The trace's fast path (a 0/1 mask for the ReLU) is σ'(z)², zero included."""
    activation = get_activation(activation)
    z = torch.cat([torch.linspace(-3, 3, 61, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)])
    assert torch.equal(activation.derivative_squared(z), activation.derivative(z).square())


def _trace_sums_by_definition(activation, z, weights, a, y):
    residuals = activation(z) @ a - y
    return (
        activation(z).square().sum(dim=0),
        (weights[:, None] * activation.derivative(z).square()).sum(dim=0),
        ((residuals * weights)[:, None] * activation.second_derivative(z)).sum(dim=0),
    )


@pytest.mark.parametrize(
    "activation",
    [
        "relu",
        "quadratic",
        get_activation("leaky_relu", negative_slope=0.1),
        get_activation("relu_power", c=1.5),
        get_activation("relu_power", c=3.0),
    ],
)
@pytest.mark.parametrize("with_residuals", [False, True])
def test_trace_sums_are_the_trace_sums(activation, with_residuals):
    """The per-neuron sums of the trace, Σ_i σ(z_ij)², Σ_i w_i σ'(z_ij)² and Σ_i r_i w_i σ''(z_ij), from their
    definition; the in-place paths of the ReLU and the quadratic included, on a block with exact zeros
    (σ'(0) = 0)."""
    activation = get_activation(activation)
    z = torch.randn(37, 11, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    z[::5, ::3] = 0.0
    weights = torch.rand(37, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    a = torch.randn(11, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y = torch.randn(37, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    expected = _trace_sums_by_definition(activation, z, weights, a, y)
    got = activation.trace_sums(z.clone(), weights, *((a, y) if with_residuals else (None, None)))
    for k in range(2):
        assert torch.allclose(got[k], expected[k], rtol=1e-13, atol=0)
    if with_residuals and activation.degree != 1.0:
        assert torch.allclose(got[2], expected[2], rtol=1e-12, atol=1e-13)
    else:  # no residuals given, or c = 1, where σ'' = 0: no third sum
        assert got[2] is None


@pytest.mark.parametrize("name", ["relu", "quadratic"])
def test_trace_sums_under_autograd(name):
    """With a pre-activation block that requires grad, the sums are differentiable (no in-place pass)."""
    activation = get_activation(name)
    z = torch.randn(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    weights = torch.ones(9, dtype=torch.float64)
    sigma2 = activation.trace_sums(z, weights)[0]
    (gradient,) = torch.autograd.grad(sigma2.sum(), z)
    detached = z.detach()
    assert torch.allclose(gradient, 2 * activation(detached) * activation.derivative(detached))
