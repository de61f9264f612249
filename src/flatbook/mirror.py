"""Mirror potentials R, their mirror maps ∇R, inverses ∇Q and conjugates Q = R*.

Mirror descent replaces the gradient step ``w ← w − η ∇L(w)`` by a step on the
*dual* variable ``z = ∇R(w)``:  ``∇R(w⁺) = ∇R(w) − η ∇L(w)``, i.e.
``w⁺ = ∇Q(∇R(w) − η ∇L(w))`` (book, chapter 6, eq. ``eq-mirror-descent``).
Every potential here is separable, ``R(w) = Σ_i r(w_i)``, with ``r`` even,
strictly convex and ``r'`` increasing, so ``∇Q = (∇R)^{-1}`` acts coordinatewise.

The *dual potential* of a point is ``Q(∇R(w)) = ⟨w, ∇R(w)⟩ − R(w)`` (the
Fenchel-Young equality, eq. ``eq-fenchel-young``); the *horizon function*
``φ_α(w) = lim_{η→0} η (α Q(∇R(w/η)))^{1/α}`` (eq. ``eq-horizon``) is the
shape of R's level sets at infinity, a norm for every potential here:

==================================  ===========================  =  =================
potential                           r(w)                         α  φ_α(w)
==================================  ===========================  =  =================
:class:`Euclidean`                  w²/2                         2  ‖w‖₂
:class:`HyperbolicEntropy` (β)      w asinh(w/β) − √(w²+β²) + β  1  ‖w‖₁
:class:`PNorm` (p, β)               ((w²+β²)^{p/2} − β^p)/p      p  (p−1)^{1/p} ‖w‖_p
:class:`PNormPlusQuadratic` (p, β)  (w²)^{p/2}/p + β w²/2        p  (p−1)^{1/p} ‖w‖_p
==================================  ===========================  =  =================

``PNorm`` with β = 0 is the homogeneous potential ``|w|^p/p``; β > 0 smooths
it at the origin without changing its horizon.  Use :func:`get_potential`.
"""

from __future__ import annotations

import math

import torch

from .errors import FlatbookInputError
from .named import Named

__all__ = [
    "Potential",
    "Euclidean",
    "HyperbolicEntropy",
    "PNorm",
    "PNormPlusQuadratic",
    "Weighted",
    "POTENTIAL_NAMES",
    "get_potential",
    "horizon_limit",
    "balance",
    "neuron_cost_exponent",
    "mirror_step",
]

#: Newton steps of the generic inverse mirror map (each safeguarded by bisection).
_INVERSE_ITERATIONS = 60


class Potential(Named):
    """A separable mirror potential R(w) = Σ_i r(w_i) (base class)."""

    name = "potential"
    factory = "get_potential"
    #: degree α of the horizon function φ_α (book eq. ``eq-horizon``)
    horizon_degree: float = 2.0

    # --- per-coordinate pieces a subclass defines -------------------------------------------------
    def _r(self, w: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _dr(self, w: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _dr_inverse(self, z: torch.Tensor) -> torch.Tensor:
        """(r')^{-1}(z); the default solves r'(w) = z by Newton's method safeguarded by bisection."""
        return _invert_increasing_odd(self._dr, self._d2r, z)

    def _d2r(self, w: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def horizon(self, w: torch.Tensor) -> torch.Tensor:
        """φ_α(w) in closed form (see the module table), a norm of w."""
        raise NotImplementedError

    # --- the public interface ---------------------------------------------------------------------
    def value(self, w: torch.Tensor) -> torch.Tensor:
        """R(w) = Σ_i r(w_i)."""
        return self._r(w).sum()

    def mirror_map(self, w: torch.Tensor) -> torch.Tensor:
        """∇R(w), the dual variable z of w."""
        return self._dr(w)

    def inverse_mirror_map(self, z: torch.Tensor) -> torch.Tensor:
        """∇Q(z) = (∇R)^{-1}(z), the primal point of a dual variable."""
        return self._dr_inverse(z)

    def conjugate(self, z: torch.Tensor) -> torch.Tensor:
        """Q(z) = R*(z) = sup_w ⟨z, w⟩ − R(w), attained at w = ∇Q(z)."""
        w = self.inverse_mirror_map(z)
        return (z * w - self._r(w)).sum()

    def dual_potential(self, w: torch.Tensor) -> torch.Tensor:
        """Q(∇R(w)) = ⟨w, ∇R(w)⟩ − R(w) (Fenchel-Young with equality; book eq. ``eq-fenchel-young``)."""
        return self.dual_potential_coordinates(w).sum()

    def dual_potential_coordinates(self, w: torch.Tensor) -> torch.Tensor:
        """w_i r'(w_i) − r(w_i), the terms of :meth:`dual_potential` (elementwise)."""
        return w * self._dr(w) - self._r(w)

    def hessian_diagonal(self, w: torch.Tensor) -> torch.Tensor:
        """∇²R(w) (diagonal, since R is separable)."""
        return self._d2r(w)


def _invert_increasing_odd(f, df, z: torch.Tensor) -> torch.Tensor:
    """Solve f(w) = z coordinatewise for an odd, strictly increasing f (Newton inside a bisection bracket)."""
    target = z.abs()
    low = torch.zeros_like(target)
    high = torch.ones_like(target)
    while bool((f(high) < target).any()):  # grow the bracket until f(high) >= |z|
        high = torch.where(f(high) < target, 2 * high, high)
    w = (low + high) / 2
    for _ in range(_INVERSE_ITERATIONS):
        value = f(w) - target
        low = torch.where(value < 0, w, low)
        high = torch.where(value >= 0, w, high)
        newton = w - value / df(w).clamp_min(torch.finfo(w.dtype).tiny)
        inside = (newton > low) & (newton < high)
        w_next = torch.where(inside, newton, (low + high) / 2)
        if bool((w_next == w).all()):
            break
        w = w_next
    return torch.sign(z) * w


class Euclidean(Potential):
    """r(w) = w²/2: mirror descent is gradient descent; Q(z) = z²/2, φ₂ = ‖w‖₂."""

    name = "euclidean"
    horizon_degree = 2.0

    def _r(self, w):
        return w * w / 2

    def _dr(self, w):
        return w

    def _dr_inverse(self, z):
        return z

    def _d2r(self, w):
        return torch.ones_like(w)

    def horizon(self, w):
        return torch.linalg.vector_norm(w)


class HyperbolicEntropy(Potential):
    """r(w) = w asinh(w/β) − √(w²+β²) + β: r' = asinh(w/β), (r')^{-1}(z) = β sinh z, Q(z) = β(cosh z − 1).

    Near 0 (|w| ≪ β) it is the Euclidean potential divided by β; far out it grows
    like |w| log|w|, and its horizon is the ℓ₁ norm (α = 1).  Small β: sparse bias.
    """

    name = "hyperbolic_entropy"
    horizon_degree = 1.0

    def __init__(self, beta: float = 0.1):
        self.beta = _positive(beta, "beta", "the hyperbolic entropy needs a scale β > 0")

    def _r(self, w):
        return w * torch.asinh(w / self.beta) - torch.sqrt(w * w + self.beta**2) + self.beta

    def _dr(self, w):
        return torch.asinh(w / self.beta)

    def _dr_inverse(self, z):
        return self.beta * torch.sinh(z)

    def _d2r(self, w):
        return 1 / torch.sqrt(w * w + self.beta**2)

    def horizon(self, w):
        return torch.linalg.vector_norm(w, ord=1)

    def params(self):
        return {"beta": self.beta}


class PNorm(Potential):
    """r(w) = ((w²+β²)^{p/2} − β^p)/p, p > 1: homogeneous |w|^p/p for β = 0, smoothed at 0 for β > 0.

    r'(w) = w (w²+β²)^{p/2−1}; for β = 0 its inverse is sign(z)|z|^{1/(p−1)} and
    Q(z) = |z|^q/q with q = p/(p−1).  Horizon (α = p): (p−1)^{1/p} ‖w‖_p.
    """

    name = "p_norm"

    def __init__(self, p: float = 3.0, beta: float = 0.0):
        if not (isinstance(p, (int, float)) and math.isfinite(p) and p > 1):
            raise FlatbookInputError(f"the p-norm potential needs a real p > 1, got p={p!r}.")
        if not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta >= 0):
            raise FlatbookInputError(f"beta must be a finite number >= 0 (0: homogeneous), got {beta!r}.")
        self.p, self.beta = float(p), float(beta)
        self.horizon_degree = self.p

    def _r(self, w):
        return ((w * w + self.beta**2) ** (self.p / 2) - self.beta**self.p) / self.p

    def _dr(self, w):
        if self.beta == 0:
            return torch.sign(w) * w.abs() ** (self.p - 1)
        return w * (w * w + self.beta**2) ** (self.p / 2 - 1)

    def _d2r(self, w):
        s = w * w + self.beta**2
        if self.beta == 0:
            return (self.p - 1) * w.abs() ** (self.p - 2)
        return s ** (self.p / 2 - 2) * ((self.p - 1) * w * w + self.beta**2)

    def _dr_inverse(self, z):
        if self.beta == 0:
            return torch.sign(z) * z.abs() ** (1 / (self.p - 1))
        if self.p == 3:  # w² (w² + β²) = z²  ⇒  w² = (√(β⁴ + 4z²) − β²)/2 = 2z² / (√(β⁴ + 4z²) + β²)
            return z * torch.sqrt(2 / (torch.sqrt(self.beta**4 + 4 * z * z) + self.beta**2))
        return super()._dr_inverse(z)

    def horizon(self, w):
        return (self.p - 1) ** (1 / self.p) * torch.linalg.vector_norm(w, ord=self.p)

    def params(self):
        return {"p": self.p, "beta": self.beta}


class PNormPlusQuadratic(Potential):
    """r(w) = |w|^p/p + β w²/2 (p > 2): a non-homogeneous potential with the horizon of |w|^p/p.

    For p = 3, r'(w) = w|w| + βw has the inverse sign(z)(√(β² + 4|z|) − β)/2.
    """

    name = "p_norm_plus_quadratic"

    def __init__(self, p: float = 3.0, beta: float = 1.0):
        if not (isinstance(p, (int, float)) and math.isfinite(p) and p > 2):
            raise FlatbookInputError(
                f"p_norm_plus_quadratic needs p > 2 (so that |w|^p dominates at infinity), got p={p!r}."
            )
        self.p = float(p)
        self.beta = _positive(beta, "beta", "the quadratic part needs a weight β > 0")
        self.horizon_degree = self.p

    def _r(self, w):
        return w.abs() ** self.p / self.p + self.beta * w * w / 2

    def _dr(self, w):
        return torch.sign(w) * w.abs() ** (self.p - 1) + self.beta * w

    def _d2r(self, w):
        return (self.p - 1) * w.abs() ** (self.p - 2) + self.beta

    def _dr_inverse(self, z):
        if self.p == 3:  # w|w| + βw = z  ⇒  |w| = (√(β² + 4|z|) − β)/2 = 2|z| / (√(β² + 4|z|) + β)
            return 2 * z / (torch.sqrt(self.beta**2 + 4 * z.abs()) + self.beta)
        return super()._dr_inverse(z)

    def horizon(self, w):
        return (self.p - 1) ** (1 / self.p) * torch.linalg.vector_norm(w, ord=self.p)

    def params(self):
        return {"p": self.p, "beta": self.beta}


class Weighted(Potential):
    """R(w) = Σ_i κ_i r(w_i) for a base potential r and positive weights κ (one per coordinate).

    ∇R(w)_i = κ_i r'(w_i), ∇Q(z)_i = (r')^{-1}(z_i/κ_i), Q(z) = Σ_i κ_i q(z_i/κ_i).  With
    r = |w|^p/p and κ the flatness weights, its minimum over interpolators is the
    flattest interpolator of chapter 2 (book, chapter 7, eq. ``eq-mirror-solver``).
    """

    name = "weighted"

    def __init__(self, base: Potential | str, weights):
        from .backend import as_tensor

        self.base = get_potential(base)
        self.weights = as_tensor(weights, "weights", ndim=1)
        if not bool((self.weights > 0).all()):
            raise FlatbookInputError("the weights of a weighted potential must all be > 0.")
        self.horizon_degree = self.base.horizon_degree

    def _r(self, w):
        return self.weights * self.base._r(w)

    def _dr(self, w):
        return self.weights * self.base._dr(w)

    def _d2r(self, w):
        return self.weights * self.base._d2r(w)

    def _dr_inverse(self, z):
        return self.base._dr_inverse(z / self.weights)

    def horizon(self, w):
        raise NotImplementedError("the horizon of a weighted potential is not a named norm; use horizon_limit.")

    def params(self):
        return {"base": repr(self.base), "weights": tuple(self.weights.tolist())}


def _positive(value, name: str, why: str) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise FlatbookInputError(f"{name} must be a finite number > 0 ({why}), got {value!r}.")
    return float(value)


_REGISTRY = {
    "euclidean": Euclidean,
    "hyperbolic_entropy": HyperbolicEntropy,
    "p_norm": PNorm,
    "p_norm_plus_quadratic": PNormPlusQuadratic,
}
#: the names :func:`get_potential` accepts
POTENTIAL_NAMES = tuple(_REGISTRY)


def get_potential(name, **params) -> Potential:
    """The potential called ``name`` (one of :data:`POTENTIAL_NAMES`); a Potential is returned unchanged.

    Examples
    --------
    >>> import torch
    >>> from flatbook.mirror import get_potential
    >>> potential = get_potential("hyperbolic_entropy", beta=0.1)
    >>> potential
    get_potential('hyperbolic_entropy', beta=0.1)
    >>> get_potential(potential) is potential
    True
    """
    if isinstance(name, Potential):
        if params:
            raise FlatbookInputError("pass parameters only together with a potential name.")
        return name
    if name not in _REGISTRY:
        raise FlatbookInputError(f"unknown potential {name!r}; choose one of {', '.join(POTENTIAL_NAMES)}.")
    try:
        return _REGISTRY[name](**params)
    except TypeError as exc:
        raise FlatbookInputError(f"potential {name!r} does not take parameters {sorted(params)}: {exc}") from exc


def horizon_limit(potential: Potential, w: torch.Tensor, eta: float) -> torch.Tensor:
    """η (α Q(∇R(w/η)))^{1/α} at a finite η: tends to ``potential.horizon(w)`` as η → 0 (eq. ``eq-horizon``)."""
    alpha = potential.horizon_degree
    return eta * (alpha * potential.dual_potential(w / eta)) ** (1 / alpha)


def balance(net, outer: Potential | str, inner: Potential | str | None = None) -> torch.Tensor:
    """B_j = c Q_a(∇R_a(a_j)) − Q_θ(∇R_θ(θ_j)) per neuron: constant along mirror flow (book eq. ``eq-balance``).

    Along d/dt ∇R(w) = −∇L, d/dt Q(∇R(w)) = −⟨w, ∇L⟩, and Euler's identity for
    the c-homogeneous σ gives ⟨θ_j, ∇_{θ_j} L⟩ = c a_j ∂L/∂a_j, so the two
    layers' dual potentials move in lockstep.  Gradient descent: c a_j² − ‖θ_j‖².
    """
    outer = get_potential(outer)
    inner = outer if inner is None else get_potential(inner)
    c = net.activation.degree
    return c * outer.dual_potential_coordinates(net.a) - inner.dual_potential_coordinates(net.theta).sum(dim=1)


def neuron_cost_exponent(outer: Potential | str, inner: Potential | str | None = None, degree: float = 1.0) -> float:
    """q = α_a α_θ / (α_θ + c α_a): the degree in |ã_j| of a neuron's dual potential far out (eq. ``eq-neuron-cost``).

    Far from the origin Q_a(∇R_a(a_j)) ∝ |a_j|^{α_a} and Q_θ(∇R_θ(θ_j)) ∝ ‖θ_j‖_{α_θ}^{α_θ}; the balance
    equation (eq. ``eq-balance``) ties them, c Q_a ≈ Q_θ, so with |ã_j| = |a_j| ‖θ_j‖^c_{α_θ} the neuron
    costs ∝ |ã_j|^q.  One potential on both layers: q = α / (1 + c) (1 for gradient descent on a ReLU
    network, 1/2 for hyperbolic entropy, 3/2 for p = 3).  ``degree`` is the activation's c.
    """
    outer = get_potential(outer)
    inner = outer if inner is None else get_potential(inner)
    if not (math.isfinite(degree) and degree > 0):
        raise FlatbookInputError(f"degree must be the activation's homogeneity c > 0, got {degree!r}.")
    a, t = outer.horizon_degree, inner.horizon_degree
    return a * t / (t + degree * a)


def mirror_step(potential: Potential, w: torch.Tensor, gradient: torch.Tensor, step: float) -> torch.Tensor:
    """One mirror-descent step w⁺ = ∇Q(∇R(w) − η ∇L(w)) (book eq. ``eq-mirror-descent``)."""
    return potential.inverse_mirror_map(potential.mirror_map(w) - step * gradient)
