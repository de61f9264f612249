import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flatbook import TwoLayerNet, get_activation, hessian_trace
from flatbook.data import random_orthonormal
from flatbook.errors import FlatbookInputError

from conftest import random_problem


def test_forward_matches_definition(activation):
    net, X, _ = random_problem(activation)
    expected = torch.stack([sum(net.a[j] * activation(net.theta[j] @ x) for j in range(net.width)) for x in X])
    torch.testing.assert_close(net(X), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(log_alpha=st.lists(st.floats(-3, 3), min_size=7, max_size=7), seed=st.integers(0, 1000))
def test_rescaling_keeps_the_function_on_fresh_inputs(log_alpha, seed):
    for activation in [get_activation("relu"), get_activation("quadratic"), get_activation("relu_power", c=2.5)]:
        net, X, y = random_problem(activation, seed=seed)
        alpha = torch.exp(torch.tensor(log_alpha, dtype=torch.float64))
        rescaled = net.rescale(alpha)
        fresh = torch.randn(200, net.input_dim, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        torch.testing.assert_close(rescaled(fresh), net(fresh), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(
            rescaled.effective_outer_weights(), net.effective_outer_weights(), rtol=1e-10, atol=1e-12
        )


def test_rescaling_moves_the_trace(activation):
    net, X, y = random_problem(activation)
    alpha = torch.ones(net.width, dtype=torch.float64)
    alpha[0] = 10.0
    assert hessian_trace(net.rescale(alpha), X, y) > 2 * hessian_trace(net, X, y)


def test_alignment():
    theta_star = random_orthonormal(2, 6, seed=3)
    inside = torch.tensor([[1.0, 2.0]], dtype=torch.float64) @ theta_star
    outside = torch.randn(1, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    outside = outside - outside @ theta_star.T @ theta_star  # project out span Θ*
    net = TwoLayerNet(torch.ones(2, dtype=torch.float64), torch.cat([inside, outside]), "relu")
    torch.testing.assert_close(
        net.alignment(theta_star), torch.tensor([1.0, 0.0], dtype=torch.float64), atol=1e-12, rtol=0
    )


def test_shape_mismatch_errors():
    with pytest.raises(FlatbookInputError, match="a has 3 entries but theta has 4 rows"):
        TwoLayerNet(torch.ones(3), torch.ones(4, 2), "relu")
    net = TwoLayerNet(torch.ones(3), torch.ones(3, 2), "relu")
    with pytest.raises(FlatbookInputError, match="X has 5 columns but the network expects d = 2"):
        net(torch.ones(4, 5))
    with pytest.raises(FlatbookInputError, match=r"alpha must be a scalar or have shape \(3,\)"):
        net.rescale(torch.ones(4))


@pytest.mark.parametrize("alpha", [0.0, -1.0, [1.0, 0.0, 2.0]])
def test_nonpositive_alpha_is_rejected(alpha):
    net = TwoLayerNet(torch.ones(3), torch.ones(3, 2), "relu")
    with pytest.raises(FlatbookInputError, match="alpha must be strictly positive"):
        net.rescale(alpha)


def test_nan_weights_are_rejected():
    with pytest.raises(FlatbookInputError, match="theta contains 1 NaN or inf entry"):
        TwoLayerNet(torch.ones(2), torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), "relu")


def test_device_variable_is_validated(monkeypatch):
    monkeypatch.setenv("FLATBOOK_DEVICE", "not-a-device")
    with pytest.raises(FlatbookInputError, match="FLATBOOK_DEVICE='not-a-device' is not a torch device"):
        TwoLayerNet([1.0], [[1.0]], "relu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error a machine without a GPU gives")
@pytest.mark.parametrize("inputs", ["tensors", "lists"])
def test_a_requested_cuda_device_is_honoured_for_tensor_inputs_too(monkeypatch, inputs):
    """FLATBOOK_DEVICE=cuda applies to every input: without a GPU, tensors are refused as lists are."""
    monkeypatch.setenv("FLATBOOK_DEVICE", "cuda")
    a, theta = ([1.0], [[1.0]]) if inputs == "lists" else (torch.ones(1), torch.ones(1, 1))
    with pytest.raises(FlatbookInputError, match="FLATBOOK_DEVICE='cuda' asks for CUDA but torch sees no GPU"):
        TwoLayerNet(a, theta, "relu")


@pytest.mark.parametrize("device", ["meta", "mps"])
def test_a_device_that_cannot_hold_the_data_is_refused(monkeypatch, device):
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has an MPS device")
    monkeypatch.setenv("FLATBOOK_DEVICE", device)
    with pytest.raises(FlatbookInputError, match=f"FLATBOOK_DEVICE='{device}'"):
        TwoLayerNet(torch.ones(1), torch.ones(1, 1), "relu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_tensors_move_to_the_requested_device(monkeypatch):
    monkeypatch.setenv("FLATBOOK_DEVICE", "cuda")
    net = TwoLayerNet(torch.ones(2), torch.ones(2, 3), "relu")  # CPU tensors
    assert net.theta.device.type == net.a.device.type == net(torch.ones(4, 3)).device.type == "cuda"
    monkeypatch.setenv("FLATBOOK_DEVICE", "cpu")
    net = TwoLayerNet(torch.ones(2, device="cuda"), torch.ones(2, 3, device="cuda"), "relu")
    assert net.theta.device.type == net.a.device.type == "cpu"
    monkeypatch.setenv("FLATBOOK_DEVICE", f"cuda:{torch.cuda.device_count()}")  # one past the last GPU
    with pytest.raises(FlatbookInputError, match="is not available here"):
        TwoLayerNet(torch.ones(2), torch.ones(2, 3), "relu")


def test_active_neurons_counts_the_weight_carrying_neurons():
    net = TwoLayerNet(
        torch.tensor([5.0, -3.0, 1.0, 0.5, 0.0], dtype=torch.float64),
        torch.eye(5, 2, dtype=torch.float64) + 1.0,
        "relu",
    )
    weights = net.effective_outer_weights().abs()
    order = torch.sort(weights, descending=True).values
    share = torch.cumsum(order, 0) / order.sum()
    assert net.active_neurons(1.0) == 4  # the zero neuron never counts
    assert net.active_neurons(float(share[1])) == 2
    assert net.active_neurons(0.99) == int((share < 0.99 * (1 - 1e-12)).sum()) + 1
    with pytest.raises(FlatbookInputError, match=r"mass must lie in \(0, 1\]"):
        net.active_neurons(0.0)


def test_distinct_directions_count_copies_of_a_direction_once():
    """Four active neurons: two copies of e_1 (one rescaled), e_2, and a direction at cosine 0.98 to e_2, which
    counts as its own at the default cosine 0.99 and joins e_2's group at 0.97."""
    near_e2 = torch.tensor([math.sqrt(1 - 0.98**2), 0.98], dtype=torch.float64)
    theta = torch.stack(
        [torch.tensor([1.0, 0.0]), torch.tensor([3.0, 0.0]), torch.tensor([0.0, 2.0]), near_e2]
    ).double()
    net = TwoLayerNet(torch.tensor([4.0, -1.0, 2.0, 1.0], dtype=torch.float64), theta, "relu")
    assert net.active_neurons(1.0) == 4
    assert net.distinct_directions(1.0) == 3
    assert net.distinct_directions(1.0, cosine=0.97) == 2
    with pytest.raises(FlatbookInputError, match="cosine must lie"):
        net.distinct_directions(cosine=1.5)


def test_weighted_alignment_weights_each_neuron_by_its_effective_weight():
    theta_star = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    theta = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    net = TwoLayerNet(torch.tensor([1.0, -3.0, 0.5], dtype=torch.float64), theta, "relu")
    weights = torch.tensor([2.0, 3.0, 0.5 * 2**0.5], dtype=torch.float64)  # |a_j| ‖θ_j‖
    rho = torch.tensor([1.0, 0.0, 2**-0.5], dtype=torch.float64)
    assert net.weighted_alignment(theta_star) == pytest.approx(float((weights * rho).sum() / weights.sum()))
    assert net.rescale(torch.tensor([0.3, 2.0, 5.0], dtype=torch.float64)).weighted_alignment(
        theta_star
    ) == pytest.approx(net.weighted_alignment(theta_star), rel=1e-12)
