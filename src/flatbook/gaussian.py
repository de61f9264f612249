"""Gaussian expectations of products of homogeneous ridge functions, in closed form.

For x ~ N(0, I_d) and directions u, v with angle φ (cos φ = u·v / ‖u‖‖v‖), write
g = u·x/‖u‖ and h = v·x/‖v‖, a standard Gaussian pair with correlation cos φ.  Book,
notation chapter, eq. ``eq-gaussian-kernels``:

- ReLU, ReLU (the arc-cosine kernel of degree 1):
  E relu(u·x) relu(v·x) = ‖u‖‖v‖ (sin φ + (π − φ) cos φ) / (2π);
- leaky ReLU with slope s is (1 − s) relu(z) + s z, and E relu(u·x)(v·x) = u·v / 2, so
  every pair of leaky ReLUs (ReLU included) follows by bilinearity;
- ReLU², ReLU² (the arc-cosine kernel of degree 2):
  E relu(u·x)² relu(v·x)² = ‖u‖²‖v‖² (3 sin φ cos φ + (π − φ)(1 + 2 cos² φ)) / (2π);
- quadratic, quadratic (Isserlis): E (u·x)²(v·x)² = ‖u‖²‖v‖² + 2 (u·v)²;
- quadratic, leaky ReLU: with relu(z) = (z + |z|)/2 and E[(cos φ h + sin φ h')²|h|] = √(2/π)(1 + cos² φ),
  E (u·x)² relu(v·x) = ‖u‖²‖v‖ √(2/π) (1 + cos² φ) / 2, and the odd part s z contributes 0;
- quadratic, ReLU²: relu(z)² = (z² + z|z|)/2 and the odd half vanishes against (u·x)², so
  E (u·x)² relu(v·x)² = (‖u‖²‖v‖² + 2 (u·v)²) / 2.

:func:`kernel_available` says which pairs these cover; :func:`gaussian_kernel` returns the
matrix E σ₁(u_j·x) σ₂(v_k·x) for rows u_j of U and v_k of V.

Against the product teacher f*(x) = Π_{i≤k} ⟨θ*_i, x⟩ (orthonormal θ*_i), eq. ``eq-product-kernel``:
expand σ(⟨û, x⟩) = Σ_j h_j(σ) He_j(⟨û, x⟩)/j! with h_j(σ) = E σ(g) He_j(g), g ~ N(0, 1); only the
degree-k term meets the degree-k Hermite polynomial Π_i ⟨θ*_i, x⟩, and
E He_k(⟨û, x⟩) Π_i ⟨θ*_i, x⟩ = k! Π_i ⟨û, θ*_i⟩, so for σ homogeneous of degree c

    E σ(⟨u, x⟩) Π_i ⟨θ*_i, x⟩ = ‖u‖^c h_k(σ) Π_i ⟨û, θ*_i⟩,  û = u/‖u‖,

and E f*² = 1.  :func:`hermite_moment` computes h_k(σ) exactly from the Gaussian moments.
"""

from __future__ import annotations

import math

import torch

from .activations import HomogeneousActivation, LeakyReLU, Quadratic, ReLUPower


def _kind(activation: HomogeneousActivation) -> tuple[str, float]:
    """('leaky', slope) for the leaky-ReLU family (the ReLU included), ('quadratic', 0), ('relu2', 0), or
    ('other', 0)."""
    if isinstance(activation, LeakyReLU):
        return "leaky", activation.negative_slope
    if isinstance(activation, Quadratic):
        return "quadratic", 0.0
    if isinstance(activation, ReLUPower):
        if activation.degree == 1.0:
            return "leaky", 0.0
        if activation.degree == 2.0:
            return "relu2", 0.0
    return "other", 0.0


_PAIRS = {
    ("leaky", "leaky"),
    ("quadratic", "quadratic"),
    ("relu2", "relu2"),
    ("quadratic", "leaky"),
    ("leaky", "quadratic"),
    ("quadratic", "relu2"),
    ("relu2", "quadratic"),
}


def kernel_available(first: HomogeneousActivation, second: HomogeneousActivation) -> bool:
    """Whether :func:`gaussian_kernel` has a closed form for this pair of activations."""
    return (_kind(first)[0], _kind(second)[0]) in _PAIRS


def hermite3_vanishes(activation: HomogeneousActivation) -> bool:
    """Whether E σ(⟨u, x⟩) He₃(⟨v, x⟩) = 0 for all u, v: true for the leaky-ReLU family (an odd part
    s·z of degree 1 plus an even part) and the quadratic (even); false e.g. for ReLU²."""
    return _kind(activation)[0] in ("leaky", "quadratic")


def gaussian_kernel(
    first: HomogeneousActivation, U: torch.Tensor, second: HomogeneousActivation, V: torch.Tensor
) -> torch.Tensor:
    """K_jk = E σ₁(⟨u_j, x⟩) σ₂(⟨v_k, x⟩) for x ~ N(0, I) (eq. ``eq-gaussian-kernels``), shape (len U, len V)."""
    (kind1, s), (kind2, t) = _kind(first), _kind(second)
    if (kind1, kind2) not in _PAIRS:
        raise ValueError(f"no closed form for E σ₁σ₂ with {first!r} and {second!r}; use Monte Carlo.")
    if kind1 == "leaky" and kind2 == "quadratic" or kind1 == "relu2" and kind2 == "quadratic":
        return gaussian_kernel(second, V, first, U).T
    norm_u = torch.linalg.vector_norm(U, dim=1)[:, None]
    norm_v = torch.linalg.vector_norm(V, dim=1)[None, :]
    dot = U @ V.T
    scale = (norm_u * norm_v).clamp_min(torch.finfo(U.dtype).tiny)
    cos = (dot / scale).clamp(-1.0, 1.0)
    phi = torch.arccos(cos)
    sin = torch.sqrt((1.0 - cos * cos).clamp_min(0.0))
    if kind1 == "quadratic" and kind2 == "quadratic":
        return norm_u**2 * norm_v**2 + 2.0 * dot**2
    if kind1 == "quadratic" and kind2 == "leaky":
        return (1.0 - t) * norm_u**2 * norm_v * math.sqrt(2.0 / math.pi) * (1.0 + cos**2) / 2.0
    if kind1 == "quadratic" and kind2 == "relu2":
        return (norm_u**2 * norm_v**2 + 2.0 * dot**2) / 2.0
    if kind1 == "relu2":
        return norm_u**2 * norm_v**2 * (3.0 * sin * cos + (math.pi - phi) * (1.0 + 2.0 * cos**2)) / (2.0 * math.pi)
    relu_relu = norm_u * norm_v * (sin + (math.pi - phi) * cos) / (2.0 * math.pi)
    return (1 - s) * (1 - t) * relu_relu + ((1 - s) * t + s * (1 - t)) * dot / 2.0 + s * t * dot


def _abs_moment(power: int) -> float:
    """E|g|^power = 2^{power/2} Γ((power + 1)/2) / √π."""
    return 2.0 ** (power / 2.0) * math.gamma((power + 1) / 2.0) / math.sqrt(math.pi)


def _moment(power: int) -> int:
    """E g^power: 0 for odd powers, (power − 1)!! for even ones (an integer, so sums of them are exact)."""
    return 0 if power % 2 else math.prod(range(power - 1, 0, -2))


def hermite_moment(activation: HomogeneousActivation, k: int) -> float:
    """h_k(σ) = E σ(g) He_k(g) for g ~ N(0, 1), exactly (He_k the probabilists' Hermite polynomial).

    Only the part of σ with the parity of k contributes: for the leaky ReLU with slope s the even part
    is (1 − s)|z|/2 and the odd part (1 + s) z/2; for ReLU², z²/2 and z|z|/2; the quadratic is even.
    Each part times the monomials of He_k integrates to Gaussian moments; the polynomial parts give
    integer sums, so h_k is exactly 0 where it vanishes: odd k ≥ 3 for the leaky-ReLU family (the ReLU
    included), even k ≥ 4 for ReLU², every k ≠ 0, 2 for the quadratic.
    """
    import numpy as np

    if not (isinstance(k, int) and k >= 0):
        raise ValueError(f"k must be an int >= 0, got {k!r}.")
    kind, slope = _kind(activation)
    even = k % 2 == 0
    if kind == "leaky":  # (scale, E g^j × the part's shape): h_k = scale Σ_j coef_j moment(j)
        scale, moment = (
            ((1.0 - slope) / 2.0, lambda j: _abs_moment(j + 1))
            if even
            else ((1.0 + slope) / 2.0, lambda j: _moment(j + 1))
        )
    elif kind == "relu2":
        scale, moment = (0.5, lambda j: _moment(j + 2)) if even else (0.5, lambda j: _abs_moment(j + 2))
    elif kind == "quadratic":
        scale, moment = (1.0, lambda j: _moment(j + 2)) if even else (0.0, lambda j: 0)
    else:
        raise ValueError(f"no closed-form Hermite moment for {activation!r}; use Monte Carlo.")
    coefficients = np.polynomial.hermite_e.herme2poly([0.0] * k + [1.0])  # integers
    return scale * float(sum(int(coef) * moment(j) for j, coef in enumerate(coefficients) if coef != 0.0))


def product_kernel(activation: HomogeneousActivation, U: torch.Tensor, theta_star: torch.Tensor) -> torch.Tensor:
    """E σ(⟨u_j, x⟩) Π_i ⟨θ*_i, x⟩ for rows u_j of U and orthonormal rows θ*_i (eq. ``eq-product-kernel``),
    shape (len U,): ‖u_j‖^c h_k(σ) Π_i ⟨û_j, θ*_i⟩."""
    norm = torch.linalg.vector_norm(U, dim=1)
    unit = U / norm.clamp_min(torch.finfo(U.dtype).tiny)[:, None]
    moment = hermite_moment(activation, theta_star.shape[0])
    return norm**activation.degree * moment * torch.prod(unit @ theta_star.T, dim=1)


__all__ = ["gaussian_kernel", "hermite3_vanishes", "hermite_moment", "kernel_available", "product_kernel"]
