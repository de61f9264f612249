"""Bring your own torch model: TwoLayerNet.from_module / to_module, checked against torch.func.hessian."""

import pytest
import torch
from torch import nn

from flatbook import TwoLayerNet, hessian_trace, min_flatness
from flatbook.errors import FlatbookInputError


def model(act, d=4, m=6, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, m, bias=False), act, nn.Linear(m, 1, bias=False)).double()


def torch_hessian_trace(module, X, y):
    """Tr ∇²F_S over every parameter, by torch.func.hessian on the module itself (independent of flatbook)."""
    params = {name: p.detach() for name, p in module.named_parameters()}

    def loss(p):
        out = torch.func.functional_call(module, p, (X,))[:, 0]
        return ((out - y) ** 2).mean()

    hessian = torch.func.hessian(loss)(params)
    return sum(float(hessian[name][name].reshape(p.numel(), p.numel()).trace()) for name, p in params.items())


@pytest.mark.parametrize("act", [nn.ReLU(), nn.LeakyReLU(0.2)], ids=["relu", "leaky"])
def test_from_module_gives_the_same_function_and_trace(act):
    module = model(act)
    X = torch.randn(20, 4, dtype=torch.float64)
    y = torch.randn(20, dtype=torch.float64)
    net = TwoLayerNet.from_module(module)
    torch.testing.assert_close(net(X), module(X)[:, 0].detach(), rtol=1e-12, atol=1e-12)
    assert hessian_trace(net, X, y) == pytest.approx(torch_hessian_trace(module, X, y), rel=1e-10)
    assert min_flatness(net, X, y) <= hessian_trace(net, X, y) * (1 + 1e-12)


def test_round_trip_and_explicit_activation():
    net = TwoLayerNet(torch.randn(5, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64), "quadratic")
    module = net.to_module()
    X = torch.randn(7, 3, dtype=torch.float64)
    torch.testing.assert_close(module(X)[:, 0], net(X))
    back = TwoLayerNet.from_module(module, activation="quadratic")
    torch.testing.assert_close(back.a, net.a)
    torch.testing.assert_close(back.theta, net.theta)
    y = net(X) + 0.1
    assert hessian_trace(back, X, y) == pytest.approx(torch_hessian_trace(module, X, y), rel=1e-10)


def test_other_architectures_are_rejected_with_the_reason():
    with pytest.raises(FlatbookInputError, match="Linear -> ReLU -> Linear -> ReLU"):
        TwoLayerNet.from_module(
            nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 1, bias=False), nn.ReLU())
        )
    with pytest.raises(FlatbookInputError, match="bias=False"):
        TwoLayerNet.from_module(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1, bias=False)))
    with pytest.raises(FlatbookInputError, match="one output"):
        TwoLayerNet.from_module(nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False)))
    with pytest.raises(FlatbookInputError, match="pass activation="):
        TwoLayerNet.from_module(nn.Sequential(nn.Linear(3, 4, bias=False), nn.Tanh(), nn.Linear(4, 1, bias=False)))
    with pytest.raises(FlatbookInputError, match="expected nn.Sequential"):
        TwoLayerNet.from_module(nn.Linear(3, 1))


@pytest.mark.parametrize(
    ("act", "activation"),
    [(nn.Tanh(), "relu"), (nn.LeakyReLU(0.1), "relu"), (nn.ReLU(), "quadratic"), (nn.ReLU(), "leaky_relu")],
    ids=["tanh-as-relu", "leaky-as-relu", "relu-as-quadratic", "relu-as-leaky"],
)
def test_an_activation_that_is_not_the_modules_is_rejected(act, activation):
    with pytest.raises(FlatbookInputError, match=f"does not match the module's middle layer {type(act).__name__}"):
        TwoLayerNet.from_module(model(act), activation=activation)


def test_a_float32_module_passes_the_probe_check():
    module = model(nn.ReLU()).float()
    net = TwoLayerNet.from_module(module)
    X = torch.randn(30, 4)
    torch.testing.assert_close(net(X), module(X)[:, 0].detach().double(), rtol=1e-5, atol=1e-6)
