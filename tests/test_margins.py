"""Normalised margins: scale invariance, the Q-margin in the Euclidean and hyperbolic-entropy cases, errors."""

import pytest
import torch

from flatbook import TwoLayerNet
from flatbook.errors import FlatbookInputError
from flatbook.margins import (
    network_degree,
    normalised_margin,
    q_margin,
    smallest_margin,
)


def classified(activation="relu", seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    net = TwoLayerNet(torch.randn(7, generator=gen, dtype=torch.float64),
                      torch.randn(7, 3, generator=gen, dtype=torch.float64), activation)
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
    from flatbook.mirror import get_potential

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
