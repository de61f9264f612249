"""Positively homogeneous activations σ with σ(λz) = λ^c σ(z) for λ > 0.

Each activation knows its degree ``c`` and its first and second derivatives
in closed form (book, notation chapter, eq. ``eq-homogeneity``), so the exact
Hessian trace needs no autograd.  Calling an activation is autograd-friendly
(no NaN gradients at z = 0, also for non-integer c).

Use :func:`get_activation`::

    relu = get_activation("relu")                    # c = 1
    leaky = get_activation("leaky_relu", negative_slope=0.1)   # c = 1
    quad = get_activation("quadratic")               # c = 2
    cube = get_activation("relu_power", c=3)         # ReLU^c, any real c >= 1
"""

from __future__ import annotations

import math

import torch

from .errors import FlatbookInputError
from .named import Named

__all__ = [
    "HomogeneousActivation",
    "LeakyReLU",
    "ReLU",
    "Quadratic",
    "ReLUPower",
    "ACTIVATION_NAMES",
    "get_activation",
]


def _half_gaussian_moment(q: float) -> float:
    """E[g^q 1{g > 0}] = 2^{q/2} Γ((q+1)/2) / (2 √π) for g ~ N(0, 1)."""
    return 2 ** (q / 2) * math.gamma((q + 1) / 2) / (2 * math.sqrt(math.pi))


class HomogeneousActivation(Named):
    """Base class: a positively ``degree``-homogeneous function applied elementwise."""

    name: str = "activation"
    factory = "get_activation"
    degree: float = 1.0
    #: σ(−z) = σ(z): u and −u give the same feature, so a direction and its opposite count as one
    even: bool = False
    #: σ is linear on each side of 0 (the ReLU family): on a cell of the data's hyperplane arrangement the
    #: network is linear, so its optima sit on cell boundaries and the arrangement can be enumerated
    piecewise_linear: bool = False

    def feature_dimension(self, r: int) -> int | None:
        """The dimension of span{σ(⟨u, ·⟩) : u in an r-dimensional subspace}, where it is finite: at most that
        many generic samples can be interpolated with directions in the subspace.  None: infinite."""
        return None

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def derivative(self, z: torch.Tensor) -> torch.Tensor:
        """σ'(z), a (c-1)-homogeneous function."""
        raise NotImplementedError

    def second_derivative(self, z: torch.Tensor) -> torch.Tensor:
        """σ''(z), a (c-2)-homogeneous function (0 almost everywhere for c = 1)."""
        raise NotImplementedError

    def derivative_squared(self, z: torch.Tensor) -> torch.Tensor:
        """σ'(z)², the per-sample factor of the trace's curvature term (book eq. ``eq-trace``)."""
        return self.derivative(z).square()

    def trace_sums(
        self, z: torch.Tensor, weights: torch.Tensor, a: torch.Tensor | None = None, y: torch.Tensor | None = None
    ):
        """Per-neuron sums of the trace (book eq. ``eq-trace``) over a block z of pre-activations (rows ×
        neurons), with weights_i = ‖x_i‖²: (Σ_i σ(z_ij)², Σ_i w_i σ'(z_ij)², Σ_i r_i w_i σ''(z_ij)), where
        r = σ(z) a − y are the residuals; the third is None without ``a`` and ``y``, and for c = 1, where
        σ'' = 0.  May overwrite z."""
        sigma = self(z)
        sums = torch.linalg.vector_norm(sigma, dim=0).square(), weights @ self.derivative_squared(z)
        if a is None or y is None or self.degree == 1.0:
            return (*sums, None)
        return (*sums, ((sigma @ a - y) * weights) @ self.second_derivative(z))

    @staticmethod
    def _in_place_allowed(z: torch.Tensor) -> bool:
        """Whether z may be overwritten: not when autograd will need it."""
        return not (z.requires_grad and torch.is_grad_enabled())

    @property
    def p(self) -> float:
        """Exponent of the orbit-minimal flatness, p = 2c / (c + 1)."""
        return 2.0 * self.degree / (self.degree + 1.0)

    def gaussian_moments(self) -> tuple[float, float, float]:
        """(E σ(g)², E σ'(g)², E σ'(g)² g²) for g ~ N(0, 1), in closed form."""
        raise NotImplementedError


class LeakyReLU(HomogeneousActivation):
    """σ(z) = z for z > 0 and s·z for z ≤ 0 (c = 1); ``negative_slope = 0`` is the ReLU."""

    degree = 1.0
    piecewise_linear = True

    def __init__(self, negative_slope: float = 0.01, name: str = "leaky_relu"):
        if not (math.isfinite(negative_slope) and 0.0 <= negative_slope < 1.0):
            raise FlatbookInputError(
                f"negative_slope must lie in [0, 1), got {negative_slope!r}; 0 gives the ReLU, 0.01 is torch's default."
            )
        self.negative_slope = float(negative_slope)
        self.name = name

    def __call__(self, z):
        if self.negative_slope == 0:
            return torch.relu(z)
        return torch.where(z > 0, z, self.negative_slope * z)

    def derivative(self, z):
        if self.negative_slope == 0:
            return (z > 0).to(z.dtype)
        return torch.where(z > 0, torch.ones_like(z), torch.full_like(z, self.negative_slope))

    def derivative_squared(self, z):
        if self.negative_slope == 0:
            return self.derivative(z)  # σ' ∈ {0, 1}: no squaring pass
        return torch.where(z > 0, torch.ones_like(z), torch.full_like(z, self.negative_slope**2))

    def second_derivative(self, z):
        return torch.zeros_like(z)

    def trace_sums(self, z, weights, a=None, y=None):
        if self.negative_slope != 0 or not self._in_place_allowed(z):
            return super().trace_sums(z, weights, a, y)
        # The ReLU in place: z → max(z, 0) → 1{z > 0} = σ'(z)² (two passes over z, no temporaries); σ'' = 0.
        torch.relu_(z)
        sum_sigma2 = torch.linalg.vector_norm(z, dim=0).square()
        return sum_sigma2, weights @ z.sign_(), None

    def gaussian_moments(self):
        # σ² = z² and σ'² = 1 on z > 0; slope² times the same on z < 0.
        half = (1.0 + self.negative_slope**2) / 2.0
        return half, half, half

    def params(self):
        return {} if self.name == "relu" else {"negative_slope": self.negative_slope}


class ReLU(LeakyReLU):
    """σ(z) = max(z, 0) (c = 1)."""

    def __init__(self):
        super().__init__(negative_slope=0.0, name="relu")


class Quadratic(HomogeneousActivation):
    """σ(z) = z² (c = 2)."""

    name = "quadratic"
    degree = 2.0
    even = True

    def feature_dimension(self, r: int) -> int | None:
        """σ(⟨u, x⟩) = uᵀ(x xᵀ)u is linear in the symmetric matrix u uᵀ: r(r + 1)/2 dimensions."""
        return r * (r + 1) // 2

    def __call__(self, z):
        return z * z

    def derivative(self, z):
        return 2.0 * z

    def second_derivative(self, z):
        return torch.full_like(z, 2.0)

    def trace_sums(self, z, weights, a=None, y=None):
        if not self._in_place_allowed(z):
            return super().trace_sums(z, weights, a, y)
        # In place: z → z² = σ, one pass; σ'² = 4σ and σ'' = 2, so the rest are reductions of σ, and the
        # residual term Σ_i r_i w_i σ'' = 2 r·w is the same for every neuron.
        sigma = z.square_()
        sums = torch.linalg.vector_norm(sigma, dim=0).square(), 4.0 * (weights @ sigma)
        if a is None or y is None:
            return (*sums, None)
        return (*sums, (2.0 * ((sigma @ a - y) @ weights)).expand(z.shape[1]).clone())

    def gaussian_moments(self):
        return 3.0, 4.0, 12.0  # E g⁴, E (2g)², E (2g)² g²


class ReLUPower(HomogeneousActivation):
    """σ(z) = max(z, 0)^c for real c >= 1 (c = 1 is the ReLU)."""

    name = "relu_power"

    def __init__(self, c: float = 2.0):
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 1.0):
            raise FlatbookInputError(
                f"relu_power needs a real degree c >= 1, got c={c!r}; below 1 the "
                "derivative blows up at 0 and the flatness is infinite."
            )
        self.degree = float(c)

    def _power(self, z, exponent, coefficient):
        # Double-where: the discarded branch never sees z <= 0, so gradients stay finite.
        positive = z > 0
        safe = torch.where(positive, z, torch.ones_like(z))
        return torch.where(positive, coefficient * safe**exponent, torch.zeros_like(z))

    def __call__(self, z):
        return self._power(z, self.degree, 1.0)

    def derivative(self, z):
        return self._power(z, self.degree - 1.0, self.degree)

    def second_derivative(self, z):
        c = self.degree
        if c == 1.0:
            return torch.zeros_like(z)
        return self._power(z, c - 2.0, c * (c - 1.0))

    def gaussian_moments(self):
        c = self.degree
        return (
            _half_gaussian_moment(2 * c),
            c**2 * _half_gaussian_moment(2 * c - 2),
            c**2 * _half_gaussian_moment(2 * c),
        )

    def params(self):
        return {"c": self.degree}


_REGISTRY = {
    "relu": ReLU,
    "leaky_relu": LeakyReLU,
    "quadratic": Quadratic,
    "relu_power": ReLUPower,
}

#: the names :func:`get_activation` accepts
ACTIVATION_NAMES = tuple(_REGISTRY)


def get_activation(name, **params) -> HomogeneousActivation:
    """The homogeneous activation called ``name`` (one of :data:`~flatbook.activations.ACTIVATION_NAMES`).

    An existing :class:`HomogeneousActivation` is returned unchanged.

    Examples
    --------
    >>> import torch
    >>> from flatbook import get_activation
    >>> relu = get_activation("relu")
    >>> relu.degree
    1.0
    >>> relu(torch.tensor([-1.0, 2.0], dtype=torch.float64))
    tensor([0., 2.], dtype=torch.float64)
    >>> get_activation("relu_power", c=2.0)
    get_activation('relu_power', c=2.0)
    """
    if isinstance(name, HomogeneousActivation):
        if params:
            raise FlatbookInputError("pass parameters only together with an activation name.")
        return name
    if name not in _REGISTRY:
        raise FlatbookInputError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATION_NAMES)}.")
    try:
        return _REGISTRY[name](**params)
    except TypeError as exc:
        raise FlatbookInputError(f"activation {name!r} does not take parameters {sorted(params)}: {exc}") from exc
