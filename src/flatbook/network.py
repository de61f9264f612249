"""The two-layer homogeneous network h(w, x) = Σ_j a_j σ(⟨θ_j, x⟩) and its rescaling symmetry.

With σ positively c-homogeneous, the per-neuron rescaling
``(a_j, θ_j) → (α_j^{-c} a_j, α_j θ_j)``, ``α_j > 0``, leaves h unchanged
(book, notation chapter, eq. ``eq-rescaling``).  What the symmetry cannot
change is the *effective* outer weight ``ã_j = a_j ‖θ_j‖^c`` and the direction
``u_j = θ_j / ‖θ_j‖``.
"""

from __future__ import annotations

import torch

from .activations import ACTIVATION_NAMES, HomogeneousActivation, get_activation
from .backend import as_tensor, check_data, row_chunks
from .errors import FlatbookInputError

__all__ = ["forward", "TwoLayerNet"]


def forward(a: torch.Tensor, theta: torch.Tensor, X: torch.Tensor, activation: HomogeneousActivation) -> torch.Tensor:
    """h(w, x_i) = Σ_j a_j σ(⟨θ_j, x_i⟩) for every row x_i of X (a pure function, autograd-friendly)."""
    return activation(X @ theta.T) @ a


class TwoLayerNet:
    """A two-layer network with outer weights ``a`` (m,), inner weights ``theta`` (m, d).

    ``net(X)`` returns the outputs (n,).  The object is immutable in spirit:
    :meth:`rescale` returns a new network.

    Examples
    --------
    >>> import torch
    >>> from flatbook import TwoLayerNet
    >>> net = TwoLayerNet(a=[1.0, -0.5], theta=[[1.0, 0.0], [0.0, 2.0]], activation="relu")
    >>> X = torch.tensor([[1.0, 1.0], [2.0, -1.0]], dtype=torch.float64)
    >>> net(X)
    tensor([0., 2.], dtype=torch.float64)
    >>> net.width, net.input_dim
    (2, 2)

    Rescaling neuron j by α_j > 0, (a_j, θ_j) → (a_j/α_j, α_j θ_j) for the ReLU (c = 1), leaves the function
    unchanged:

    >>> net.rescale(torch.tensor([2.0, 0.5], dtype=torch.float64))(X)
    tensor([0., 2.], dtype=torch.float64)
    """

    def __init__(self, a, theta, activation="relu"):
        self.activation = get_activation(activation)
        self.theta = as_tensor(theta, "theta", ndim=2)
        self.a = as_tensor(a, "a", ndim=1, device=self.theta.device)
        if self.a.shape[0] != self.theta.shape[0]:
            raise FlatbookInputError(
                f"a has {self.a.shape[0]} entries but theta has {self.theta.shape[0]} rows; "
                "each neuron needs one outer weight and one row of inner weights."
            )

    @property
    def width(self) -> int:
        """Number of neurons m."""
        return self.a.shape[0]

    @property
    def input_dim(self) -> int:
        """Input dimension d."""
        return self.theta.shape[1]

    @property
    def device(self) -> torch.device:
        return self.theta.device

    def __call__(self, X) -> torch.Tensor:
        X = as_tensor(X, "X", ndim=2, device=self.device)
        if X.shape[1] != self.input_dim:
            raise FlatbookInputError(f"X has {X.shape[1]} columns but the network expects d = {self.input_dim}.")
        out = torch.empty(X.shape[0], dtype=X.dtype, device=X.device)
        for rows in row_chunks(X.shape[0], self.width):
            out[rows] = forward(self.a, self.theta, X[rows], self.activation)
        return out

    def residuals(self, X, y) -> torch.Tensor:
        """r_i = h(w, x_i) − y_i."""
        X, y = check_data(X, y, self.input_dim)
        return self(X.to(self.device)) - y.to(self.device)

    def empirical_loss(self, X, y) -> float:
        """F_S(w) = (1/n) Σ_i (h(w, x_i) − y_i)²  (no factor ½)."""
        return float((self.residuals(X, y) ** 2).mean())

    def rescale(self, alpha) -> TwoLayerNet:
        """The network (α_j^{-c} a_j, α_j θ_j): same function, different parameters.

        ``alpha`` is a positive scalar or a positive vector of length m.
        """
        alpha = as_tensor(alpha, "alpha", device=self.device)
        if alpha.ndim == 0:
            alpha = alpha.expand(self.width)
        if alpha.shape != (self.width,):
            raise FlatbookInputError(f"alpha must be a scalar or have shape ({self.width},), got {tuple(alpha.shape)}.")
        if (alpha <= 0).any():
            raise FlatbookInputError(
                f"alpha must be strictly positive (the symmetry needs α_j > 0); "
                f"got {int((alpha <= 0).sum())} entries <= 0, e.g. {float(alpha.min()):.3g}."
            )
        c = self.activation.degree
        return TwoLayerNet(alpha ** (-c) * self.a, alpha[:, None] * self.theta, self.activation)

    def inner_norms(self) -> torch.Tensor:
        """‖θ_j‖ for every neuron."""
        return torch.linalg.vector_norm(self.theta, dim=1)

    def directions(self) -> torch.Tensor:
        """u_j = θ_j / ‖θ_j‖ (rows of zeros stay zero)."""
        norms = self.inner_norms()
        return self.theta / torch.where(norms > 0, norms, torch.ones_like(norms))[:, None]

    def effective_outer_weights(self) -> torch.Tensor:
        """ã_j = a_j ‖θ_j‖^c, invariant under the rescaling symmetry."""
        return self.a * self.inner_norms() ** self.activation.degree

    def active_neurons(self, mass: float = 0.99) -> int:
        """The fewest neurons whose |ã_j| = |a_j| ‖θ_j‖^c add up to ``mass`` of Σ_j |ã_j| (a sparsity count)."""
        if not 0 < mass <= 1:
            raise FlatbookInputError(f"mass must lie in (0, 1], got {mass!r}.")
        weights = torch.sort(self.effective_outer_weights().abs(), descending=True).values
        total = float(weights.sum())
        if total == 0:
            return 0
        return int(torch.searchsorted(torch.cumsum(weights, 0), mass * total * (1 - 1e-12))) + 1

    def distinct_directions(self, mass: float = 0.99, cosine: float = 0.99) -> int:
        """How many distinct directions the :meth:`active_neurons` carry: heaviest first, a neuron starts a new
        group unless its u_j has cosine ≥ ``cosine`` with a group's first direction (copies of one direction
        count once)."""
        if not -1 <= cosine <= 1:
            raise FlatbookInputError(f"cosine must lie in [-1, 1], got {cosine!r}.")
        order = torch.argsort(self.effective_outer_weights().abs(), descending=True)[: self.active_neurons(mass)]
        leaders: list[torch.Tensor] = []
        for u in self.directions()[order]:
            if not any(float(u @ leader) >= cosine for leader in leaders):
                leaders.append(u)
        return len(leaders)

    def weighted_alignment(self, theta_star) -> float:
        """Σ_j |ã_j| ρ_j / Σ_j |ã_j|: the alignment of the neurons that carry the weight."""
        weights = self.effective_outer_weights().abs()
        return float((weights * self.alignment(theta_star)).sum() / weights.sum())

    def alignment(self, theta_star) -> torch.Tensor:
        """ρ_j = ‖P_{Θ*} θ_j‖ / ‖θ_j‖, with P_{Θ*} the projection onto the row span of Θ*.

        ``theta_star`` (k, d) need not be orthonormal; its row span is used.
        """
        theta_star = as_tensor(theta_star, "theta_star", device=self.device)
        if theta_star.ndim == 1:
            theta_star = theta_star[None, :]
        if theta_star.ndim != 2 or theta_star.shape[1] != self.input_dim:
            raise FlatbookInputError(
                f"theta_star must have shape (k, {self.input_dim}), got {tuple(theta_star.shape)}."
            )
        basis = torch.linalg.qr(theta_star.T).Q  # (d, k) orthonormal basis of span Θ*
        norms = self.inner_norms()
        if (norms == 0).any():
            raise FlatbookInputError(
                f"{int((norms == 0).sum())} neuron(s) have θ_j = 0, whose alignment is undefined; drop them first."
            )
        return torch.linalg.vector_norm(self.theta @ basis, dim=1) / norms

    @classmethod
    def from_module(cls, module: torch.nn.Module, activation=None) -> TwoLayerNet:
        """The network of a bias-free ``nn.Sequential(nn.Linear(d, m), act, nn.Linear(m, 1))``.

        ``act`` may be ``nn.ReLU()``, ``nn.LeakyReLU(s)`` or any module for which ``activation``
        (a flatbook activation or its name) is given explicitly; the weights are copied in float64,
        so :func:`~flatbook.flatness.hessian_trace` and :func:`~flatbook.flatness.min_flatness` apply to a model you
        trained yourself.  Any other architecture, or an ``activation`` that does not compute what ``act`` does
        (checked on a probe batch), is rejected with the reason.
        """
        layers = list(module.children()) if isinstance(module, torch.nn.Sequential) else []
        shape = " -> ".join(type(layer).__name__ for layer in layers) or type(module).__name__
        if len(layers) != 3 or not all(isinstance(layers[i], torch.nn.Linear) for i in (0, 2)):
            raise FlatbookInputError(
                f"expected nn.Sequential(nn.Linear(d, m, bias=False), activation, nn.Linear(m, 1, bias=False)), "
                f"got {shape}."
            )
        inner, act, outer = layers
        if inner.bias is not None or outer.bias is not None:
            raise FlatbookInputError(
                "the two nn.Linear layers must have bias=False: a bias breaks the "
                "rescaling symmetry that flatbook's flatness measures rely on."
            )
        if outer.out_features != 1:
            raise FlatbookInputError(f"the last layer must have one output, got {outer.out_features}.")
        if activation is None:
            if isinstance(act, torch.nn.LeakyReLU):
                activation = get_activation("leaky_relu", negative_slope=act.negative_slope)
            elif isinstance(act, torch.nn.ReLU):
                activation = get_activation("relu")
            else:
                raise FlatbookInputError(
                    f"cannot tell the degree of {type(act).__name__}; pass activation= (e.g. 'quadratic')."
                )
        net = cls(outer.weight.detach()[0].to(torch.float64), inner.weight.detach().to(torch.float64), activation)
        _check_same_function(module, net)
        return net

    def to_module(self) -> torch.nn.Sequential:
        """A bias-free ``nn.Sequential`` computing the same function (float64, on this network's device).

        The middle module applies this network's activation, so the round trip
        ``TwoLayerNet.from_module(net.to_module(), net.activation)`` is exact.
        """
        inner = torch.nn.Linear(self.input_dim, self.width, bias=False, dtype=self.theta.dtype, device=self.device)
        outer = torch.nn.Linear(self.width, 1, bias=False, dtype=self.theta.dtype, device=self.device)
        with torch.no_grad():
            inner.weight.copy_(self.theta)
            outer.weight.copy_(self.a[None, :])
        return torch.nn.Sequential(inner, _ActivationModule(self.activation), outer)

    def __repr__(self) -> str:
        return f"TwoLayerNet(m={self.width}, d={self.input_dim}, activation={self.activation!r})"


def _check_same_function(module: torch.nn.Module, net: TwoLayerNet, n_probe: int = 64) -> None:
    """Raise unless ``module`` and ``net`` agree on a fixed Gaussian probe batch, up to the module's precision."""
    weight = next(module.parameters())
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n_probe, net.input_dim, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        theirs = module(X.to(dtype=weight.dtype, device=weight.device))[:, 0].to(torch.float64).cpu()
        X = X.to(net.device)
        ours = net(X).cpu()
        # rounding of the module's sum is bounded by a multiple of eps times the sum of its terms' sizes
        size = (net.activation(X @ net.theta.T).abs() @ net.a.abs()).cpu()
    tolerance = (torch.finfo(weight.dtype).eps ** 0.5) * (size + 1.0)
    worst = int(torch.argmax((theirs - ours).abs() - tolerance))
    if (theirs - ours).abs()[worst] > tolerance[worst]:
        raise FlatbookInputError(
            f"activation={net.activation!r} does not match the module's middle layer "
            f"{type(list(module.children())[1]).__name__}: on a probe input the module gives "
            f"{float(theirs[worst]):.6g} and the network "
            f"{float(ours[worst]):.6g}; pass the activation the module applies (flatbook needs a positively "
            f"homogeneous one: {', '.join(ACTIVATION_NAMES)})."
        )


class _ActivationModule(torch.nn.Module):
    """A flatbook activation as an ``nn.Module`` (for :meth:`TwoLayerNet.to_module`)."""

    def __init__(self, activation: HomogeneousActivation):
        super().__init__()
        self.activation = activation

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.activation(z)

    def extra_repr(self) -> str:
        return repr(self.activation)
