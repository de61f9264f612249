"""Multi-index teachers y = f*(Θ* x) + ξ with x ~ N(0, I_d), ξ ~ N(0, τ²), and the population loss.

Conventions (book, notation chapter): Θ* ∈ R^{k×d} has orthonormal rows;
single-index means k = 1; a sum of single-index models has
f*(z) = Σ_k g_k(z_k); :func:`multi_index_product` (f*(z) = Π_k z_k) is a
genuinely multi-index link, not a sum of ridge functions of the teacher
directions, and serves as the high-approximation-error case.

A teacher may carry an *orthogonal residual* η He₃(⟨v, x⟩)/√6 along a unit v ⟂ Θ*
(He₃(t) = t³ − 3t, so the term has variance η²).  Every ReLU-family and quadratic
ridge function σ(⟨θ, x⟩) has a vanishing third Hermite coefficient, so the residual is
L²-orthogonal to every such network and to the ridge teacher: no network of those
activations can represent any of it, and its variance η² is exactly the approximation
error (book, chapter 4, eq. ``eq-residual``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .activations import HomogeneousActivation, get_activation
from .backend import DTYPE, as_tensor, default_device
from .errors import FlatbookInputError
from .gaussian import gaussian_kernel, hermite3_vanishes, kernel_available, product_kernel

__all__ = [
    "random_orthonormal",
    "SumOfRidges",
    "ProductLink",
    "MultiIndexModel",
    "single_index",
    "sum_of_single_index",
    "multi_index_product",
    "orthogonal_direction",
    "PopulationLoss",
    "exact_population_loss_available",
    "population_loss",
    "PopulationQuadratic",
    "population_quadratic",
    "LabelledData",
    "teacher_student_classification",
    "digits_parity",
]


def _generator(seed: int) -> torch.Generator:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise FlatbookInputError(f"seed must be an int, got {seed!r}.")
    return torch.Generator(device="cpu").manual_seed(seed)


def random_orthonormal(k: int, d: int, seed: int = 0) -> torch.Tensor:
    """A (k, d) matrix with orthonormal rows, uniform on the Stiefel manifold (QR of a Gaussian)."""
    if not (1 <= k <= d):
        raise FlatbookInputError(f"need 1 <= k <= d for k orthonormal directions in R^d, got k={k}, d={d}.")
    gaussian = torch.randn(d, k, generator=_generator(seed), dtype=DTYPE)
    q, r = torch.linalg.qr(gaussian)
    q = q * torch.sign(torch.diagonal(r))  # make the distribution exactly Haar
    return q.T.contiguous().to(default_device())


class SumOfRidges:
    """f*(z) = Σ_k g_k(z_k): a sum of single-index links (k = 1 is a single-index link)."""

    def __init__(self, functions: Sequence, k: int):
        if isinstance(functions, str) or callable(functions) or not isinstance(functions, Sequence):
            functions = [functions] * k
        if len(functions) != k:
            raise FlatbookInputError(f"need one link per teacher direction: got {len(functions)} for k = {k}.")
        self.functions = [get_activation(g) if isinstance(g, str) else g for g in functions]
        self.k = k

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        total = self.functions[0](z[:, 0])
        for i, g in enumerate(self.functions[1:], start=1):
            total = total + g(z[:, i])
        return total

    def __repr__(self) -> str:
        return "SumOfRidges(" + ", ".join(getattr(g, "name", repr(g)) for g in self.functions) + ")"


class ProductLink:
    """f*(z) = Π_k z_k, a genuinely multi-index link with E f*² = 1."""

    def __init__(self, k: int):
        self.k = k

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        return torch.prod(z, dim=1)

    def __repr__(self) -> str:
        return f"ProductLink(k={self.k})"


class MultiIndexModel:
    """The teacher y = link(Θ* x) + ξ, x ~ N(0, I_d), ξ ~ N(0, noise_std²).

    ``link`` maps a (n, k) tensor of teacher coordinates z = Θ* x to (n,) labels.  With
    ``residual_std`` = η > 0 the labels gain η He₃(⟨v, x⟩)/√6 along ``residual_direction`` v, a
    unit vector orthogonal to Θ* (the module docstring says why this is pure approximation error).

    Examples
    --------
    >>> import torch
    >>> from flatbook import MultiIndexModel
    >>> teacher = MultiIndexModel(torch.eye(2, 3, dtype=torch.float64), lambda z: z[:, 0] * z[:, 1])
    >>> teacher.k, teacher.d
    (2, 3)
    >>> X, y = teacher.sample(1000, seed=0)
    >>> X.shape, y.dtype
    (torch.Size([1000, 3]), torch.float64)
    >>> bool(torch.equal(y, X[:, 0] * X[:, 1]))
    True
    """

    def __init__(
        self,
        theta_star,
        link: Callable[[torch.Tensor], torch.Tensor],
        noise_std: float = 0.0,
        residual_std: float = 0.0,
        residual_direction=None,
    ):
        theta_star = as_tensor(theta_star, "theta_star")
        if theta_star.ndim == 1:
            theta_star = theta_star[None, :]
        if theta_star.ndim != 2:
            raise FlatbookInputError(f"theta_star must be (k, d), got shape {tuple(theta_star.shape)}.")
        gram = theta_star @ theta_star.T
        if not torch.allclose(gram, torch.eye(len(gram), dtype=DTYPE, device=gram.device), atol=1e-10):
            raise FlatbookInputError(
                "theta_star must have orthonormal rows (Θ* Θ*ᵀ = I); orthonormalise it, "
                "e.g. with torch.linalg.qr, or use random_orthonormal(k, d, seed)."
            )
        if not callable(link):
            raise FlatbookInputError(f"link must be callable on a (n, k) tensor, got {link!r}.")
        if not (math.isfinite(noise_std) and noise_std >= 0):
            raise FlatbookInputError(f"noise_std must be a finite number >= 0, got {noise_std!r}.")
        if not (math.isfinite(residual_std) and residual_std >= 0):
            raise FlatbookInputError(f"residual_std must be a finite number >= 0, got {residual_std!r}.")
        self.theta_star = theta_star
        self.link = link
        self.noise_std = float(noise_std)
        self.residual_std = float(residual_std)
        self.residual_direction = None
        if residual_std > 0:
            if residual_direction is None:
                raise FlatbookInputError(
                    "residual_std > 0 needs a residual_direction (a unit vector orthogonal "
                    "to theta_star), e.g. orthogonal_direction(theta_star, seed)."
                )
            v = as_tensor(residual_direction, "residual_direction", ndim=1, device=theta_star.device)
            if (
                v.shape[0] != theta_star.shape[1]
                or abs(float(v.norm()) - 1) > 1e-10
                or float((theta_star @ v).abs().max()) > 1e-10
            ):
                raise FlatbookInputError(
                    "residual_direction must be a unit vector of length d orthogonal to "
                    "every row of theta_star; orthogonal_direction(theta_star, seed) makes one."
                )
            self.residual_direction = v

    @property
    def k(self) -> int:
        return self.theta_star.shape[0]

    @property
    def d(self) -> int:
        return self.theta_star.shape[1]

    @property
    def bayes_risk(self) -> float:
        """F* = τ², the population loss of the teacher itself."""
        return self.noise_std**2

    @property
    def approximation_error(self) -> float:
        """η², the variance of the orthogonal residual (no ReLU-family or quadratic network fits any of it)."""
        return self.residual_std**2

    def target(self, X) -> torch.Tensor:
        """The noiseless labels f*(Θ* x_i), plus η He₃(⟨v, x_i⟩)/√6 with a residual."""
        X = as_tensor(X, "X", ndim=2, device=self.theta_star.device)
        if X.shape[1] != self.d:
            raise FlatbookInputError(f"X has {X.shape[1]} columns but the teacher lives in d = {self.d}.")
        labels = self.link(X @ self.theta_star.T)
        if self.residual_direction is not None:
            t = X @ self.residual_direction
            labels = labels + self.residual_std * (t**3 - 3 * t) / math.sqrt(6.0)
        return labels

    def sample(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """n i.i.d. samples (X, y); the same seed gives the same data on every device."""
        if not (isinstance(n, int) and n >= 1):
            raise FlatbookInputError(f"n must be a positive int, got {n!r}.")
        gen = _generator(seed)
        X = torch.randn(n, self.d, generator=gen, dtype=DTYPE)
        noise = self.noise_std * torch.randn(n, generator=gen, dtype=DTYPE)
        X = X.to(self.theta_star.device)
        return X, self.target(X) + noise.to(X.device)

    def __repr__(self) -> str:
        residual = f", residual_std={self.residual_std}" if self.residual_std else ""
        return f"MultiIndexModel(k={self.k}, d={self.d}, link={self.link!r}, noise_std={self.noise_std}{residual})"


def orthogonal_direction(theta_star, seed: int = 0) -> torch.Tensor:
    """A random unit vector orthogonal to the rows of Θ* (the residual's direction v)."""
    theta_star = as_tensor(theta_star, "theta_star", ndim=2)
    k, d = theta_star.shape
    if k >= d:
        raise FlatbookInputError(f"the teacher's {k} directions span R^{d}: no direction is orthogonal to them.")
    # the d Gaussian draws after the d·k that random_orthonormal(k, d, seed) used for Θ*: independent of them
    g = torch.randn(d * k + d, generator=_generator(seed), dtype=DTYPE)[d * k :].to(theta_star.device)
    for _ in range(2):  # Gram-Schmidt twice: orthogonal to rounding error
        g = g - theta_star.T @ (theta_star @ g)
    return g / g.norm()


def single_index(d: int, link="relu", noise_std: float = 0.0, seed: int = 0) -> MultiIndexModel:
    """y = g(⟨θ*, x⟩) + ξ with a random unit θ*; ``link`` is an activation name or a callable.

    Examples
    --------
    >>> from flatbook.data import single_index
    >>> teacher = single_index(d=3, link="relu", seed=0)
    >>> teacher
    MultiIndexModel(k=1, d=3, link=SumOfRidges(relu), noise_std=0.0)
    >>> X, y = teacher.sample(4, seed=1)
    >>> X.shape, y.shape
    (torch.Size([4, 3]), torch.Size([4]))
    """
    return MultiIndexModel(random_orthonormal(1, d, seed), SumOfRidges(link, 1), noise_std)


def sum_of_single_index(
    d: int, k: int, link="relu", noise_std: float = 0.0, seed: int = 0, residual_std: float = 0.0
) -> MultiIndexModel:
    """y = Σ_k g_k(⟨θ*_k, x⟩) + ξ; ``link`` is one name/callable for all k, or a list of k.

    ``residual_std`` = η > 0 adds the orthogonal residual η He₃(⟨v, x⟩)/√6 (eq. ``eq-residual``)
    along v = :func:`orthogonal_direction` (Θ*, seed); the ridge part is the same as without it.
    """
    theta_star = random_orthonormal(k, d, seed)
    direction = orthogonal_direction(theta_star, seed) if residual_std > 0 else None
    return MultiIndexModel(theta_star, SumOfRidges(link, k), noise_std, residual_std, direction)


def multi_index_product(d: int, k: int = 3, noise_std: float = 0.0, seed: int = 0) -> MultiIndexModel:
    """y = Π_k ⟨θ*_k, x⟩ + ξ: not a sum of ridge functions, the high-approximation-error case."""
    if k < 2:
        raise FlatbookInputError(f"a product link needs k >= 2 directions, got k={k}.")
    return MultiIndexModel(random_orthonormal(k, d, seed), ProductLink(k), noise_std)


@dataclass(frozen=True)
class PopulationLoss:
    """F(w) = E (h(w, x) − y)²: exact (``method == "exact"``, stderr 0) or a Monte Carlo estimate."""

    value: float
    stderr: float
    bayes_risk: float
    n_test: int  #: Monte Carlo samples (0 when exact)
    method: str = "monte carlo"

    @property
    def excess(self) -> float:
        """F(w) − F*."""
        return self.value - self.bayes_risk

    def __float__(self) -> float:
        return self.value


def _ridge_terms(model: MultiIndexModel):
    """The teacher as a list of (activation, direction) ridge terms with unit coefficients, or None."""
    link = model.link
    if not isinstance(link, SumOfRidges):
        return None
    terms = []
    for g, direction in zip(link.functions, model.theta_star, strict=True):
        if not isinstance(g, HomogeneousActivation):
            return None
        terms.append((g, direction))
    return terms


def exact_population_loss_available(net, model: MultiIndexModel) -> bool:
    """Whether :func:`population_loss` has a closed form (eq. ``eq-gaussian-kernels``, and
    ``eq-product-kernel`` for the product teacher) for this pair."""
    return _closed_form(net.activation, model)


def _closed_form(activation: HomogeneousActivation, model: MultiIndexModel) -> bool:
    """Whether a network with this activation has a closed-form population loss against ``model``."""
    if isinstance(model.link, ProductLink):  # eq-product-kernel: the network's own kernel is all it needs
        terms = []
    else:
        terms = _ridge_terms(model)
        if terms is None:
            return False
    acts = [activation] + [g for g, _ in terms]
    if model.residual_std > 0 and not all(hermite3_vanishes(a) for a in acts):
        return False
    return all(kernel_available(a, b) for a in acts for b in acts)


#: entries of one block of the m × m kernel in the exact population loss: about 16 MB of float64, so each
#: temporary is served from the allocator's heap instead of fresh pages (at m = 10⁴ blocks of 4096 rows
#: took 9 s, blocks of 256 rows 3 s)
KERNEL_BLOCK_ENTRIES = 2_000_000


def _distinct_neurons(a, theta):
    """(a', θ') with the same function Σ_j a_j σ(⟨θ_j, x⟩): zero outer weights dropped, equal rows of θ merged."""
    active = a != 0
    theta, inverse = torch.unique(theta[active], dim=0, return_inverse=True)
    return torch.zeros(theta.shape[0], dtype=a.dtype, device=a.device).index_add_(0, inverse, a[active]), theta


def _teacher_terms(act: HomogeneousActivation, theta: torch.Tensor, model: MultiIndexModel):
    """(k, E f*²): k_j = E σ(⟨θ_j, x⟩) f*(Θ*x) (eq. ``eq-gaussian-kernels``, or eq. ``eq-product-kernel`` for the
    product teacher, whose E f*² = 1) and the teacher's second moment."""
    if isinstance(model.link, ProductLink):
        return product_kernel(act, theta, model.theta_star.to(theta)), 1.0
    terms = _ridge_terms(model)
    assert terms is not None  # exact_population_loss_available
    cross = sum(gaussian_kernel(act, theta, g, v[None, :].to(theta))[:, 0] for g, v in terms)
    teacher = sum(
        float(gaussian_kernel(g1, v1[None, :], g2, v2[None, :])[0, 0]) for g1, v1 in terms for g2, v2 in terms
    )
    return cross, teacher


def _exact_population_loss(net, model: MultiIndexModel, chunk: int | None = None) -> float:
    """E (h − f*)² + η² + τ² = aᵀK a − 2 aᵀk + E f*² + η² + τ² with the Gaussian kernels of
    :mod:`flatbook.gaussian` (the residual, orthogonal to h and f*, adds its variance η²); for the
    product teacher k is eq. ``eq-product-kernel`` and E f*² = 1.  Neurons with a_j = 0 are left out and
    copies of one θ_j merged (their a_j summed), both exactly: a sparse flattest interpolator or one split
    into copies costs O(K² d) for its K distinct neurons, not O(m² d)."""
    act = net.activation
    a, theta = _distinct_neurons(net.a, net.theta)
    width = theta.shape[0]
    chunk = chunk or max(1, KERNEL_BLOCK_ENTRIES // max(1, width))
    quadratic = 0.0
    for start in range(0, width, chunk):  # aᵀKa in row blocks: O(chunk·m) memory
        rows = slice(start, start + chunk)
        quadratic += float(a[rows] @ (gaussian_kernel(act, theta[rows], act, theta) @ a))
    cross, teacher = _teacher_terms(act, theta, model)
    return max(quadratic - 2.0 * float(a @ cross) + teacher, 0.0) + model.approximation_error + model.bayes_risk


class PopulationQuadratic(NamedTuple):
    """F(μ) = μᵀKμ − 2bᵀμ + c: the exact population loss of h = Σ_j μ_j σ(⟨u_j, x⟩) as a function of the outer
    weights μ on fixed unit directions u_j (from :func:`population_quadratic`)."""

    K: torch.Tensor  #: (k, k) K_jl = E σ(⟨u_j, x⟩) σ(⟨u_l, x⟩), positive semidefinite
    b: torch.Tensor  #: (k,) b_j = E σ(⟨u_j, x⟩) f*(Θ*x)
    c: float  #: E f*² + η² + τ²
    bayes_risk: float  #: τ², so that the excess is F(μ) − τ²

    def __call__(self, mu: torch.Tensor) -> float:
        """F(μ)."""
        return float(mu @ (self.K @ mu) - 2.0 * self.b @ mu) + self.c


def population_quadratic(activation, U, model: MultiIndexModel) -> PopulationQuadratic:
    """The exact population loss as a convex quadratic in the outer weights on the directions U (rows), with
    the closed-form kernels of :func:`population_loss` (eq. ``eq-gaussian-kernels``)."""
    activation = get_activation(activation)
    U = as_tensor(U, "U", ndim=2)
    if not _closed_form(activation, model):
        raise FlatbookInputError(f"no closed-form population loss for {activation!r} against the teacher {model!r}.")
    cross, teacher = _teacher_terms(activation, U, model)
    constant = teacher + model.approximation_error + model.bayes_risk
    return PopulationQuadratic(gaussian_kernel(activation, U, activation, U), cross, constant, model.bayes_risk)


def population_loss(
    net, model: MultiIndexModel, n_test: int = 200_000, seed: int = 12345, chunk: int = 20_000, method: str = "auto"
) -> PopulationLoss:
    """F(w) = E (h(w,x) − f*(Θ*x))² + τ² for x ~ N(0, I).

    ``method="auto"`` (default) computes it exactly whenever the network's activation and the
    teacher's links have closed-form Gaussian kernels (ReLU, leaky ReLU, ReLU², quadratic: eq.
    ``eq-gaussian-kernels``; the product teacher: eq. ``eq-product-kernel``), in O((m + k) m d) with
    no sampling error (``stderr = 0``); otherwise,
    or with ``method="monte carlo"``, it estimates the function error from ``n_test`` fresh Gaussian
    inputs, ``chunk`` rows at a time, with its standard error.  The noise enters exactly (E ξ² = τ²).

    Examples
    --------
    >>> from flatbook import TwoLayerNet, population_loss
    >>> from flatbook.data import single_index
    >>> teacher = single_index(d=3, link="relu", seed=0)
    >>> population_loss(TwoLayerNet([1.0], teacher.theta_star), teacher).value  # the teacher itself
    0.0

    Half the teacher misses E (relu(g)/2)² = 1/8 for g ~ N(0, 1), in closed form:

    >>> loss = population_loss(TwoLayerNet([0.5], teacher.theta_star), teacher)
    >>> round(loss.value, 10), loss.method, loss.stderr
    (0.125, 'exact', 0.0)
    """
    if net.input_dim != model.d:
        raise FlatbookInputError(f"the network has d = {net.input_dim} but the teacher has d = {model.d}.")
    if method not in ("auto", "exact", "monte carlo"):
        raise FlatbookInputError(f"method must be 'auto', 'exact' or 'monte carlo', got {method!r}.")
    if method != "monte carlo" and exact_population_loss_available(net, model):
        return PopulationLoss(_exact_population_loss(net, model), 0.0, model.bayes_risk, 0, "exact")
    if method == "exact":
        raise FlatbookInputError(
            f"no closed form for {net.activation!r} against the teacher {model!r}; use method='monte carlo'."
        )
    if not (isinstance(n_test, int) and n_test >= 2):
        raise FlatbookInputError(f"n_test must be an int >= 2 (for a standard error), got {n_test!r}.")
    gen = _generator(seed)
    total = total_sq = 0.0
    for start in range(0, n_test, chunk):
        rows = min(chunk, n_test - start)
        X = torch.randn(rows, model.d, generator=gen, dtype=DTYPE).to(net.device)
        err2 = (net(X) - model.target(X)) ** 2
        total += float(err2.sum())
        total_sq += float((err2**2).sum())
    mean = total / n_test
    var = max(total_sq / n_test - mean**2, 0.0) * n_test / (n_test - 1)
    return PopulationLoss(mean + model.bayes_risk, math.sqrt(var / n_test), model.bayes_risk, n_test)


@dataclass(frozen=True)
class LabelledData:
    """A binary classification task: training and test inputs with labels in {−1, +1}."""

    X: torch.Tensor
    y: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    description: str


def teacher_student_classification(d: int, n: int, k: int = 3, n_test: int = 5_000, seed: int = 0) -> LabelledData:
    """Labels y = sign(Σ_k s_k ReLU(⟨θ*_k, x⟩) − b) of a ReLU teacher with k orthonormal neurons.

    The signs s_k alternate (+, −, +, ...) and b is the median of the teacher's
    output, so the classes are balanced and the task is not linear; x ~ N(0, I_d).
    """
    if not (isinstance(k, int) and 1 <= k <= d):
        raise FlatbookInputError(f"need 1 <= k <= d teacher neurons, got k={k!r}, d={d!r}.")
    for name, value in (("n", n), ("n_test", n_test)):
        if not (isinstance(value, int) and value >= 1):
            raise FlatbookInputError(f"{name} must be a positive int, got {value!r}.")
    theta_star = random_orthonormal(k, d, seed)
    signs = torch.tensor([(-1.0) ** i for i in range(k)], dtype=DTYPE, device=theta_star.device)
    gen = _generator(seed + 1)
    X = torch.randn(n + n_test, d, generator=gen, dtype=DTYPE).to(theta_star.device)
    teacher = torch.relu(X @ theta_star.T) @ signs
    y = torch.sign(teacher - torch.median(teacher[:n]))
    y[y == 0] = 1.0
    return LabelledData(
        X[:n], y[:n], X[n:], y[n:], f"ReLU teacher with {k} neurons (signs {signs.tolist()}), d={d}, n={n}"
    )


def digits_parity(n_train: int = 1_000, seed: int = 0) -> LabelledData:
    """scikit-learn's 8×8 handwritten digits (1797 images, shipped with the package), even (+1) vs odd (−1).

    A random split with ``n_train`` training images; pixels are centred by the
    training mean and scaled by the training standard deviation (one number).
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise FlatbookInputError("digits_parity needs scikit-learn: pip install scikit-learn.") from exc
    images, labels = load_digits(return_X_y=True)
    if not (isinstance(n_train, int) and 1 <= n_train < len(labels)):
        raise FlatbookInputError(f"n_train must be an int in [1, {len(labels) - 1}], got {n_train!r}.")
    order = torch.randperm(len(labels), generator=_generator(seed))
    X = torch.as_tensor(images, dtype=DTYPE)[order]
    y = torch.as_tensor(1.0 - 2.0 * (labels % 2), dtype=DTYPE)[order]
    mean = X[:n_train].mean(dim=0)
    scale = (X[:n_train] - mean).std()
    X = ((X - mean) / scale).to(default_device())
    y = y.to(X.device)
    return LabelledData(
        X[:n_train],
        y[:n_train],
        X[n_train:],
        y[n_train:],
        f"digits even vs odd, {n_train} training and {len(labels) - n_train} test images",
    )
