"""Exact flatness Tr ∇²F_S(w), its behaviour under rescaling, and the orbit minimum Υ(w).

For F_S(w) = (1/n) Σ_i r_i², r_i = h(w, x_i) − y_i, z_ij = ⟨θ_j, x_i⟩ (book,
notation chapter, eq. ``eq-trace``)::

    Tr ∇²F_S(w) = (2/n) Σ_i Σ_j [ σ(z_ij)² + a_j² σ'(z_ij)² ‖x_i‖² + r_i a_j σ''(z_ij) ‖x_i‖² ].

Under (a_j, θ_j) → (α_j^{-c} a_j, α_j θ_j) neuron j's share becomes
``A_j α_j^{2c} + B_j α_j^{-2}`` with A_j = (2/n) Σ_i σ(z_ij)² and
B_j = (2/n) Σ_i (a_j² σ'(z_ij)² + r_i a_j σ''(z_ij)) ‖x_i‖² (eq. ``eq-trace-alpha``),
minimised at α_j = (B_j / (c A_j))^{1/(2c+2)} with value
``(c+1) c^{-c/(c+1)} A_j^{1/(c+1)} B_j^{c/(c+1)}`` (book, chapter 2, eq. ``eq-upsilon-neuron``).
At an interpolator this is κ_j |ã_j|^p with ã_j = a_j ‖θ_j‖^c,
p = 2c/(c+1) and κ_j from :func:`flatness_weights` (eq. ``eq-upsilon``).

Everything is O(n m d) work in row chunks; nothing forms the Hessian.
"""

from __future__ import annotations

import torch

from .activations import HomogeneousActivation, get_activation
from .backend import as_tensor, check_data, row_chunks
from .errors import FlatbookInputError, UnboundedFlatnessError
from .network import TwoLayerNet

__all__ = [
    "orbit_minimum",
    "relu_memorising_flatness",
    "trace_coefficients",
    "hessian_trace",
    "min_flatness",
    "optimal_rescaling",
    "unit_flatness_weights",
    "flatness_weights",
    "population_flatness_weight",
    "orbit_flatness",
]


#: entries of one (rows × m) block of pre-activations: 16 MB of float64.  With the ReLU's in-place sums
#: (:meth:`~flatbook.activations.HomogeneousActivation.trace_sums`) 2**21 was 10-20 % faster than 2**20 at
#: n = 2000, m = 8000 and n = m = 5000; 2**22 was slower (fresh pages for each temporary).
TRACE_BLOCK_ENTRIES = 2**21


def _neuron_sums(theta, X, activation, a=None, y=None):
    """Per-neuron sums over samples: Σ_i σ(z_ij)², Σ_i σ'(z_ij)² ‖x_i‖², and with ``a`` and ``y`` the residual
    term Σ_i r_i σ''(z_ij) ‖x_i‖², r_i = Σ_j a_j σ(z_ij) − y_i (zeros without them, and for c = 1, where
    σ'' = 0).  One GEMM per block of rows serves the network's output and all three sums."""
    m = theta.shape[0]
    sum_sigma2 = torch.zeros(m, dtype=theta.dtype, device=theta.device)
    sum_dsigma2 = torch.zeros_like(sum_sigma2)
    sum_r_d2sigma = torch.zeros_like(sum_sigma2)
    for rows in row_chunks(X.shape[0], m, budget=TRACE_BLOCK_ENTRIES):
        Xc = X[rows]
        z = Xc @ theta.T
        sq_norms = (Xc * Xc).sum(dim=1)
        block = activation.trace_sums(z, sq_norms, a, None if y is None else y[rows])  # may overwrite z
        sum_sigma2 += block[0]
        sum_dsigma2 += block[1]
        if block[2] is not None:
            sum_r_d2sigma += block[2]
    return sum_sigma2, sum_dsigma2, sum_r_d2sigma


def orbit_minimum(A, B, c: float):
    """inf over α > 0 of A α^{2c} + B α^{-2} = (c+1) c^{-c/(c+1)} A^{1/(c+1)} B^{c/(c+1)}, for A, B ≥ 0.

    The one formula behind Υ (eq. ``eq-upsilon-neuron``) and the flatness weights κ
    (eq. ``eq-kappa``, with A = S_j and B = T_j); works on tensors and floats alike.
    """
    return (c + 1.0) * c ** (-c / (c + 1.0)) * A ** (1.0 / (c + 1.0)) * B ** (c / (c + 1.0))


def _checked(net, X, y):
    if not isinstance(net, TwoLayerNet):
        raise FlatbookInputError(f"net must be a flatbook.TwoLayerNet, got {type(net).__name__}.")
    X, y = check_data(X, y, net.input_dim)
    return X.to(net.device), y.to(net.device)


def trace_coefficients(net: TwoLayerNet, X, y) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-neuron (A_j, B_j) with Tr ∇²F_S(net.rescale(α)) = Σ_j A_j α_j^{2c} + B_j α_j^{-2}."""
    X, y = _checked(net, X, y)
    n = X.shape[0]
    s2, ds2, rd2 = _neuron_sums(net.theta, X, net.activation, a=net.a, y=y)
    A = 2.0 / n * s2
    B = 2.0 / n * (net.a**2 * ds2 + net.a * rd2)
    return A, B


def hessian_trace(net: TwoLayerNet, X, y) -> float:
    """Exact Tr ∇²F_S(w) w.r.t. all parameters (a and θ), residual term included (eq. ``eq-trace``).

    Examples
    --------
    >>> import torch
    >>> from flatbook import TwoLayerNet, hessian_trace, min_flatness, optimal_rescaling
    >>> net = TwoLayerNet(a=[1.0, -0.5], theta=[[1.0, 0.0], [0.0, 2.0]])
    >>> X = torch.tensor([[1.0, 1.0], [2.0, -1.0]], dtype=torch.float64)
    >>> y = net(X)  # the network interpolates its own outputs
    >>> hessian_trace(net, X, y)
    16.5

    The same number from the Hessian of the loss, formed by autograd:

    >>> def loss(a, theta):
    ...     return ((torch.relu(X @ theta.T) @ a - y) ** 2).mean()
    >>> H = torch.autograd.functional.hessian(loss, (net.a, net.theta))
    >>> round(float(H[0][0].trace() + H[1][1].reshape(4, 4).trace()), 10)
    16.5
    """
    A, B = trace_coefficients(net, X, y)
    return float((A + B).sum())


#: A negative B_j smaller than this fraction of max_k |B_k| is round-off, taken as 0 (the neuron adds nothing to Υ).
CURVATURE_ROUNDOFF = 1e-10


def _clean_curvature(B):
    """Set round-off negatives of B to 0.

    At an interpolator B_j = a_j² T_j + a_j R_j, with R_j the residual term;
    for a neuron with a tiny a_j the round-off residuals can make B_j slightly
    negative.  Negative values with |B_j| ≤ ``CURVATURE_ROUNDOFF`` · max_k |B_k|
    are taken as 0: the neuron adds nothing to Υ.
    """
    roundoff = (B < 0) & (B.abs() <= CURVATURE_ROUNDOFF * float(B.abs().max()))
    return torch.where(roundoff, torch.zeros_like(B), B)


def _orbit_minima(A, B, c):
    """Per-neuron inf_α A α^{2c} + B α^{-2}; raises if B_j < 0 (the infimum is −∞)."""
    B = _clean_curvature(B)
    if (B < 0).any():
        j = int(torch.nonzero(B < 0)[0])
        raise UnboundedFlatnessError(
            f"neuron {j} has B_j = {float(B[j]):.3g} < 0: away from an interpolator the residual "
            "term of the Hessian can be negative, and shrinking that neuron (α_j → 0) sends the "
            "trace to −∞. Υ is meaningful at (near-)interpolators: fit the data first."
        )
    return orbit_minimum(A, B, c)


def min_flatness(net: TwoLayerNet, X, y) -> float:
    """Υ(w) = inf over per-neuron rescalings α > 0 of Tr ∇²F_S (eq. ``eq-upsilon-neuron``).

    Examples
    --------
    >>> import torch
    >>> from flatbook import TwoLayerNet, hessian_trace, min_flatness, optimal_rescaling
    >>> net = TwoLayerNet(a=[1.0, -0.5], theta=[[1.0, 0.0], [0.0, 2.0]])
    >>> X = torch.tensor([[1.0, 1.0], [2.0, -1.0]], dtype=torch.float64)
    >>> y = net(X)  # the network interpolates its own outputs
    >>> round(min_flatness(net, X, y), 4)
    14.6606
    >>> min_flatness(net, X, y) <= hessian_trace(net, X, y)
    True
    """
    A, B = trace_coefficients(net, X, y)
    return float(_orbit_minima(A, B, net.activation.degree).sum())


def optimal_rescaling(net: TwoLayerNet, X, y, rel_tol: float = 1e-13) -> torch.Tensor:
    """The α > 0 with ``hessian_trace(net.rescale(α), X, y) == min_flatness(net, X, y)``.

    α_j = (B_j / (c A_j))^{1/(2c+2)}.  A neuron with a_j = 0 (B_j = 0 < A_j) only
    reaches its infimum 0 as α_j → 0, and one with A_j = 0 < B_j as α_j → ∞;
    for those, α_j is chosen so that the neuron adds at most
    ``rel_tol · Υ / m`` to the trace.  Neurons with A_j = B_j = 0 keep α_j = 1.

    Examples
    --------
    >>> import torch
    >>> from flatbook import TwoLayerNet, hessian_trace, min_flatness, optimal_rescaling
    >>> net = TwoLayerNet(a=[1.0, -0.5], theta=[[1.0, 0.0], [0.0, 2.0]])
    >>> X = torch.tensor([[1.0, 1.0], [2.0, -1.0]], dtype=torch.float64)
    >>> y = net(X)  # the network interpolates its own outputs
    >>> alpha = optimal_rescaling(net, X, y)
    >>> alpha
    tensor([1.0878, 0.5946], dtype=torch.float64)
    >>> round(hessian_trace(net.rescale(alpha), X, y), 4), round(min_flatness(net, X, y), 4)
    (14.6606, 14.6606)
    """
    A, B = trace_coefficients(net, X, y)
    c = net.activation.degree
    upsilon = float(_orbit_minima(A, B, c).sum())
    B = _clean_curvature(B)
    budget = rel_tol * max(upsilon, torch.finfo(A.dtype).tiny) / net.width
    alpha = torch.ones_like(A)
    both = (A > 0) & (B > 0)
    alpha[both] = (B[both] / (c * A[both])) ** (1.0 / (2.0 * c + 2.0))
    only_a = (A > 0) & (B == 0)
    alpha[only_a] = (budget / A[only_a]) ** (1.0 / (2.0 * c))
    only_b = (A == 0) & (B > 0)
    alpha[only_b] = (B[only_b] / budget) ** 0.5
    return alpha


def unit_flatness_weights(u, X, activation):
    """κ_j (eq. ``eq-kappa``) for directions u that are already unit rows, without checks; differentiable in u."""
    n = X.shape[0]
    s2, ds2, _ = _neuron_sums(u, X, activation)
    return orbit_minimum(2.0 / n * s2, 2.0 / n * ds2, activation.degree)


def flatness_weights(theta, X, activation: HomogeneousActivation | str) -> torch.Tensor:
    """κ_j with Υ(w) = Σ_j κ_j |ã_j|^p at every interpolator with directions u_j = θ_j/‖θ_j‖ (eq. ``eq-kappa``).

    κ_j = (c+1) c^{-c/(c+1)} S_j^{1/(c+1)} T_j^{c/(c+1)},
    S_j = (2/n) Σ_i σ(⟨u_j, x_i⟩)², T_j = (2/n) Σ_i σ'(⟨u_j, x_i⟩)² ‖x_i‖².
    Only the directions of ``theta`` matter; rows of zeros are rejected.  ``activation`` is an
    activation or its name (as for :func:`~flatbook.flattest.feature_matrix`).

    Examples
    --------
    At an interpolator Υ is the weighted ℓ1 norm of the effective outer weights (ReLU: p = 1):

    >>> import torch
    >>> from flatbook import TwoLayerNet, min_flatness
    >>> from flatbook.flatness import flatness_weights
    >>> net = TwoLayerNet(a=[1.0, -0.5], theta=[[1.0, 0.0], [0.0, 2.0]])
    >>> X = torch.tensor([[1.0, 1.0], [2.0, -1.0]], dtype=torch.float64)
    >>> kappa = flatness_weights(net.theta, X, "relu")
    >>> kappa
    tensor([11.8322,  2.8284], dtype=torch.float64)
    >>> upsilon = float((kappa * net.effective_outer_weights().abs()).sum())
    >>> round(upsilon, 4), round(min_flatness(net, X, net(X)), 4)
    (14.6606, 14.6606)
    """
    activation = get_activation(activation)
    theta = as_tensor(theta, "theta", ndim=2)
    X = as_tensor(X, "X", ndim=2, device=theta.device)
    if X.shape[1] != theta.shape[1]:
        raise FlatbookInputError(f"X has {X.shape[1]} columns but theta has d = {theta.shape[1]}.")
    norms = torch.linalg.vector_norm(theta, dim=1)
    if (norms == 0).any():
        raise FlatbookInputError(
            f"{int((norms == 0).sum())} row(s) of theta are zero and have no direction; drop them."
        )
    u = theta / norms[:, None]
    return unit_flatness_weights(u, X, activation)


def population_flatness_weight(activation: HomogeneousActivation, d: int) -> float:
    """The n → ∞ limit of every κ_j for x ~ N(0, I_d) (eq. ``eq-kappa-population``).

    By rotation invariance g = ⟨u_j, x⟩ ~ N(0, 1) and ‖x‖² = g² + χ²_{d−1}, so
    S → 2 E σ(g)² and T → 2 (E σ'(g)² g² + (d − 1) E σ'(g)²), the same for all u_j.
    """
    if not (isinstance(d, int) and d >= 1):
        raise FlatbookInputError(f"d must be a positive int, got {d!r}.")
    sigma2, dsigma2, dsigma2_g2 = activation.gaussian_moments()
    return orbit_minimum(2.0 * sigma2, 2.0 * (dsigma2_g2 + (d - 1) * dsigma2), activation.degree)


def relu_memorising_flatness(X, y) -> float:
    """Υ of the ReLU interpolator that memorises: one neuron per sample with y_i ≠ 0, active on that sample only.

    Such a neuron u_i has σ(⟨u_i, x_j⟩) = 0 for j ≠ i, so S = (2/n)⟨u_i, x_i⟩², T = (2/n)‖x_i‖²,
    κ = 2√(ST) = (4/n)⟨u_i, x_i⟩‖x_i‖ and ã_i = y_i / ⟨u_i, x_i⟩: its Υ = κ|ã_i| = (4/n)‖x_i‖|y_i| does
    not depend on the direction (eq. ``eq-memorising``).  The network exists when every such sample
    can be isolated by a direction (almost surely for n ≤ d; each sample with probability ≥ 1/2 up to
    n = 2d by Cover's theorem, all of them ever more rarely beyond), and then
    Υ = (4/n) Σ_i ‖x_i‖ |y_i| at every width.  Negative labels need a neuron with negative outer weight.
    """
    X, y = check_data(X, y)
    return float(4.0 / X.shape[0] * (torch.linalg.vector_norm(X, dim=1) * y.abs()).sum())


def orbit_flatness(effective_a: torch.Tensor, kappa: torch.Tensor, p: float) -> torch.Tensor:
    """Υ = Σ_j κ_j |ã_j|^p for interpolators given by their effective weights (eq. ``eq-upsilon``);
    ``effective_a`` may be (m,) or a batch (count, m)."""
    return (kappa * effective_a.abs() ** p).sum(dim=-1)
