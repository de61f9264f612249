"""Shared fixtures: small, seeded problems in float64 on the CPU."""

import pytest
import torch

from flatbook import TwoLayerNet, get_activation

ACTIVATION_CASES = [
    ("relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("quadratic", {}),
    ("relu_power", {"c": 1.5}),
    ("relu_power", {"c": 3.0}),
]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own empty experiment cache and runs sequentially unless it says otherwise."""
    monkeypatch.setenv("FLATBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FLATBOOK_JOBS", raising=False)
    monkeypatch.delenv("FLATBOOK_BACKEND", raising=False)
    return tmp_path / "cache"


@pytest.fixture(params=ACTIVATION_CASES, ids=lambda case: f"{case[0]}{case[1] or ''}")
def activation(request):
    name, params = request.param
    return get_activation(name, **params)


def random_problem(activation, n=9, m=7, d=4, seed=0):
    """A random network and data set (not an interpolator)."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    net = TwoLayerNet(randn(m), randn(m, d), activation)
    return net, randn(n, d), randn(n)
