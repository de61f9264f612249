"""Mirror potentials: mirror map and inverse, Fenchel-Young, conjugate by brute force, horizon, balance."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from flatbook import TwoLayerNet
from flatbook.errors import FlatbookInputError
from flatbook.mirror import (
    POTENTIAL_NAMES,
    balance,
    get_potential,
    horizon_limit,
    mirror_step,
)
from flatbook.training import mirror_descent

POTENTIAL_CASES = [
    ("euclidean", {}),
    ("hyperbolic_entropy", {"beta": 0.05}),
    ("hyperbolic_entropy", {"beta": 3.0}),
    ("p_norm", {"p": 3.0}),
    ("p_norm", {"p": 4 / 3}),
    ("p_norm", {"p": 3.0, "beta": 0.4}),
    ("p_norm", {"p": 2.5, "beta": 0.3}),  # generic (Newton) inverse
    ("p_norm_plus_quadratic", {"p": 3.0, "beta": 0.5}),
    ("p_norm_plus_quadratic", {"p": 4.0, "beta": 0.5}),  # generic (Newton) inverse
]


@pytest.fixture(params=POTENTIAL_CASES, ids=lambda case: f"{case[0]}{case[1] or ''}")
def potential(request):
    name, params = request.param
    return get_potential(name, **params)


def points(seed=0, size=40, scale=3.0):
    gen = torch.Generator().manual_seed(seed)
    w = scale * torch.randn(size, generator=gen, dtype=torch.float64)
    return torch.cat([w, torch.tensor([0.0, 1e-9, -1e-9, 25.0, -25.0], dtype=torch.float64)])


def test_mirror_map_round_trip(potential):
    w = points()
    assert torch.allclose(potential.inverse_mirror_map(potential.mirror_map(w)), w, rtol=1e-10, atol=1e-12)
    z = points(seed=1)
    assert torch.allclose(potential.mirror_map(potential.inverse_mirror_map(z)), z, rtol=1e-10, atol=1e-12)


def test_mirror_map_and_hessian_are_the_derivatives(potential):
    w = points()[:40].clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(potential.value(w), w, create_graph=True)
    assert torch.allclose(grad, potential.mirror_map(w.detach()), rtol=1e-12, atol=1e-14)
    (second,) = torch.autograd.grad(grad.sum(), w)
    assert torch.allclose(second, potential.hessian_diagonal(w.detach()), rtol=1e-9)


def test_fenchel_young(potential):
    w, z = points(), points(seed=2)
    # equality at conjugate pairs: R(w) + Q(∇R(w)) = <w, ∇R(w)>
    for x in w:
        x = x.reshape(1)
        lhs = potential.value(x) + potential.conjugate(potential.mirror_map(x))
        assert float(lhs) == pytest.approx(float(x @ potential.mirror_map(x)), rel=1e-10, abs=1e-12)
    assert float(potential.conjugate(potential.mirror_map(w))) == pytest.approx(
        float(potential.dual_potential(w)), rel=1e-10
    )
    # inequality everywhere else
    gap = potential.value(w) + potential.conjugate(z) - w @ z
    assert float(gap) >= -1e-9


def test_conjugate_is_the_numerical_supremum(potential):
    for z in (-2.5, -0.3, 0.0, 0.7, 4.0):

        def negative(v, z=z):
            return -(z * v - float(potential.value(torch.tensor([v], dtype=torch.float64))))

        result = minimize_scalar(negative, bounds=(-500, 500), method="bounded", options={"xatol": 1e-12})
        assert float(potential.conjugate(torch.tensor([z], dtype=torch.float64))) == pytest.approx(
            -result.fun, rel=1e-7, abs=1e-9
        )


def test_horizon_is_the_limit(potential):
    w = points(size=8)[:8]
    assert float(horizon_limit(potential, w, eta=1e-7)) == pytest.approx(float(potential.horizon(w)), rel=1e-5)


def test_horizons_are_the_named_norms():
    w = torch.tensor([3.0, -4.0, 0.5], dtype=torch.float64)
    assert float(get_potential("euclidean").horizon(w)) == pytest.approx(float(w.norm()))
    assert float(get_potential("hyperbolic_entropy", beta=0.1).horizon(w)) == pytest.approx(7.5)
    assert float(get_potential("p_norm", p=3).horizon(w)) == pytest.approx(2 ** (1 / 3) * (27 + 64 + 0.125) ** (1 / 3))


def test_euclidean_mirror_step_is_gradient_descent():
    w, g = points(), points(seed=3)
    assert torch.equal(mirror_step(get_potential("euclidean"), w, g, 0.1), w - 0.1 * g)


def test_balance_is_the_classical_one_for_gradient_descent():
    gen = torch.Generator().manual_seed(0)
    net = TwoLayerNet(
        torch.randn(5, generator=gen, dtype=torch.float64),
        torch.randn(5, 3, generator=gen, dtype=torch.float64),
        "relu",
    )
    expected = (net.a**2 - net.theta.pow(2).sum(1)) / 2
    assert torch.allclose(balance(net, "euclidean"), expected)


@pytest.mark.parametrize(
    "name,params,activation",
    [("euclidean", {}, "relu"), ("hyperbolic_entropy", {"beta": 0.1}, "relu"), ("p_norm", {"p": 3.0}, "quadratic")],
)
def test_balance_drift_is_first_order_in_the_step(name, params, activation):
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(30, 4, generator=gen, dtype=torch.float64)
    y = torch.sign(X[:, 0] * X[:, 1] + 0.1)
    net = TwoLayerNet(
        0.3 * torch.randn(8, generator=gen, dtype=torch.float64),
        0.3 * torch.randn(8, 4, generator=gen, dtype=torch.float64),
        activation,
    )
    potential = get_potential(name, **params)
    start = balance(net, potential)
    drift = []
    for step in (0.02, 0.01):
        run = mirror_descent(
            net, X, y, outer=potential, step=step, adaptive=False, max_time=2.0 - 1e-9, max_steps=10**6
        )
        drift.append(float((balance(run.net, potential) - start).abs().max()))
    assert drift[1] < 0.6 * drift[0]  # halves with the step (first order), up to higher-order terms
    assert drift[1] < 1e-2 * float(potential.dual_potential(run.net.a) + potential.dual_potential(run.net.theta))


def test_bad_potentials_are_refused():
    with pytest.raises(FlatbookInputError, match="unknown potential 'entropy'; choose one of"):
        get_potential("entropy")
    with pytest.raises(FlatbookInputError, match="beta must be a finite number > 0"):
        get_potential("hyperbolic_entropy", beta=0.0)
    with pytest.raises(FlatbookInputError, match="p > 1"):
        get_potential("p_norm", p=1.0)
    with pytest.raises(FlatbookInputError, match="p > 2"):
        get_potential("p_norm_plus_quadratic", p=2.0)
    with pytest.raises(FlatbookInputError, match="does not take parameters"):
        get_potential("euclidean", beta=1.0)
    assert set(POTENTIAL_NAMES) == {"euclidean", "hyperbolic_entropy", "p_norm", "p_norm_plus_quadratic"}
    assert get_potential("p_norm", p=3.0) == get_potential("p_norm", p=3)
    assert math.isfinite(hash(get_potential("hyperbolic_entropy", beta=0.2)))
    assert "beta=0.2" in repr(get_potential("hyperbolic_entropy", beta=0.2))
    assert np.isclose(get_potential("p_norm", p=3).horizon_degree, 3)


def test_weighted_potential_scales_each_coordinate():
    from flatbook.mirror import Weighted

    weights = torch.tensor([0.5, 2.0, 3.0], dtype=torch.float64)
    base = get_potential("p_norm", p=4 / 3)
    potential = Weighted(base, weights)
    w = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    assert float(potential.value(w)) == pytest.approx(float((weights * w.abs() ** (4 / 3) / (4 / 3)).sum()))
    assert torch.allclose(potential.inverse_mirror_map(potential.mirror_map(w)), w, rtol=1e-12)
    z = torch.tensor([0.7], dtype=torch.float64)
    one = Weighted(base, torch.tensor([2.5], dtype=torch.float64))
    result = minimize_scalar(
        lambda v: -(0.7 * v - float(one.value(torch.tensor([v], dtype=torch.float64)))),
        bounds=(-50, 50),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert float(one.conjugate(z)) == pytest.approx(-result.fun, rel=1e-7)
    with pytest.raises(FlatbookInputError, match="must all be > 0"):
        Weighted(base, torch.tensor([1.0, 0.0], dtype=torch.float64))
