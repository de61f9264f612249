"""Chapter 3's helper functions: the exact terms of the centred-label proposition on the great circle, its bound
B_n(δ), Cover's isolation probability and the isolation linear programs, each against an independent reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from flatbook.data import single_index
from flatbook.errors import FlatbookInputError
from flatbook.experiments.bad_interpolators import (
    circle_process,
    cover_isolation_probability,
    isolated_samples,
    process_bound,
)
from flatbook.interpolators import complement_basis, memorising_network


def _reference(X, y, theta_star, points=200_001):
    """sup |Z| and inf κ on the circle u ⊥ θ*, brute force: a dense grid of angles plus every kink u ⊥ P⊥x_i,
    where the kink's own sample is taken as inactive (σ'(0) = 0), in plain numpy."""
    x, lam = X.numpy(), (y - y.mean()).numpy()
    basis = complement_basis(theta_star).numpy()
    z = x @ basis
    n = len(lam)
    phi = np.linspace(0, 2 * np.pi, points)
    angles = np.arctan2(z[:, 1], z[:, 0])
    kinks = np.concatenate([angles + np.pi / 2, angles - np.pi / 2])
    owner = np.concatenate([np.arange(n), np.arange(n)])
    U = np.stack([np.cos(phi), np.sin(phi)], 1)
    proj = U @ z.T
    sup = np.abs(np.maximum(proj, 0) @ lam).max()
    active = proj > 0
    S = 2 / n * (np.maximum(proj, 0) ** 2).sum(1)
    T = 2 / n * (active * (x**2).sum(1)).sum(1)
    kappa = 2 * np.sqrt(S * T)
    Uk = np.stack([np.cos(kinks), np.sin(kinks)], 1)
    proj_k = Uk @ z.T
    proj_k[np.arange(2 * n), owner] = 0.0  # on its own kink the sample is inactive
    sup_k = np.abs(np.maximum(proj_k, 0) @ lam).max()
    S_k = 2 / n * (np.maximum(proj_k, 0) ** 2).sum(1)
    T_k = 2 / n * ((proj_k > 0) * (x**2).sum(1)).sum(1)
    kappa_k = 2 * np.sqrt(S_k * T_k)
    return max(sup, sup_k), min(kappa.min(), kappa_k.min())


@pytest.mark.parametrize("n,seed", [(5, 0), (12, 1), (40, 2)])
def test_circle_process_matches_brute_force(n, seed):
    teacher = single_index(3, link="relu", seed=seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    exact = circle_process(X, y, teacher.theta_star)
    sup, kappa_min = _reference(X, y, teacher.theta_star)
    # The exact sup can only exceed a sampled one, by at most the grid's resolution (Lipschitz in the angle).
    assert sup <= exact["sup"] * (1 + 1e-12)
    assert exact["sup"] == pytest.approx(sup, rel=1e-6)
    assert exact["kappa_min"] <= kappa_min * (1 + 1e-12)
    assert exact["kappa_min"] == pytest.approx(kappa_min, rel=1e-6)
    assert exact["lambda_norm"] == pytest.approx(float(torch.linalg.vector_norm(y - y.mean())), rel=1e-12)


def test_circle_process_rejects_other_dimensions():
    teacher = single_index(4, link="relu", seed=0)
    X, y = teacher.sample(8, seed=1)
    with pytest.raises(FlatbookInputError, match="d = 3"):
        circle_process(X, y, teacher.theta_star)


def test_process_bound_formula_and_event():
    n, d, delta = 100, 3, 1e-3
    expected = (
        math.sqrt(2 * math.log(900) + 2 * math.log(2000)) + 1 + math.sqrt(2 / 100) + math.sqrt(2 * math.log(1000) / 100)
    )
    assert process_bound(n, d, delta) == pytest.approx(expected, rel=1e-14)
    assert process_bound(n, d, 1e-6) > process_bound(n, d, 1e-3)  # a rarer failure costs a larger bound
    with pytest.raises(FlatbookInputError):
        process_bound(10, 3, 1.5)
    # The proposition's event on Gaussian data (fails with probability ≤ 2δ = 2e-4 per dataset).
    for seed in range(5):
        teacher = single_index(3, link="relu", noise_std=0.3, seed=seed)
        X, y = teacher.sample(60, seed=seed + 1000)
        terms = circle_process(X, y, teacher.theta_star)
        assert terms["sup"] <= terms["lambda_norm"] * process_bound(60, 3, 1e-4)


def test_cover_isolation_probability():
    for n, k in [(1, 1), (5, 7), (8, 7), (14, 7), (15, 7), (30, 7), (20, 3)]:
        assert cover_isolation_probability(n, k) == pytest.approx(stats.binom.cdf(k - 1, n - 1, 0.5), rel=1e-12)
        # Cover's count of homogeneous dichotomies, C(n, k) = 2 Σ_{j<k} binom(n − 1, j), over 2^n
        count = 2 * sum(math.comb(n - 1, j) for j in range(k))
        assert cover_isolation_probability(n, k) == pytest.approx(min(count, 2**n) / 2**n, rel=1e-12)
    assert cover_isolation_probability(14, 7) == 0.5  # n = 2(d − 1) with k = d − 1: exactly one half
    assert cover_isolation_probability(13, 7) > 0.5 > cover_isolation_probability(15, 7)
    with pytest.raises(FlatbookInputError):
        cover_isolation_probability(0, 3)


def test_isolated_samples():
    generator = torch.Generator().manual_seed(0)
    X = torch.randn(5, 6, generator=generator, dtype=torch.float64)
    assert isolated_samples(X) == [True] * 5  # n ≤ d points in general position: every dichotomy
    X3 = torch.cat([X[:2], (X[0] + X[1])[None]])  # x_3 in the cone of x_1, x_2: ⟨θ, x_3⟩ < 0 whenever both are
    assert isolated_samples(X3)[2] is False
    # Agreement with memorising_network: it exists exactly when every sample with y ≠ 0 is isolated.
    for seed in range(4):
        teacher = single_index(5, link="relu", seed=seed)
        X, y = teacher.sample(9, seed=seed + 1000)
        within = complement_basis(teacher.theta_star)
        isolated = isolated_samples(X, within)
        needed = all(ok for ok, label in zip(isolated, y.tolist(), strict=True) if label != 0)
        assert (memorising_network(X, y, within) is not None) == needed
    # The isolated fraction follows Cover's probability (d = 5 inside θ*⊥: k = 4, n = 8: q = P(Bin(7, ½) ≤ 3) = ½).
    fractions = []
    for seed in range(40):
        teacher = single_index(5, link="relu", seed=seed)
        X, _ = teacher.sample(8, seed=seed + 1000)
        fractions.append(np.mean(isolated_samples(X, complement_basis(teacher.theta_star))))
    q = cover_isolation_probability(8, 4)
    assert abs(np.mean(fractions) - q) <= 4 * math.sqrt(q * (1 - q) / 40)  # worst-case dependence within a dataset
