"""Mirror descent as a solver of the flattest-outer-weights program (book, chapter 7, eq. ``eq-mirror-solver``).

For fixed unit directions the network is linear in its outer weights,
h = Φ a.  Mirror descent on the square loss, started at a = 0 with the
weighted potential R(a) = Σ_j κ_j r(a_j), keeps its dual variable in the row
space of Φ: ∇R(a_k) = −Σ_{i<k} η_i ∇L(a_i) = Φᵀ μ_k.  If it converges to an
interpolator a∞, then ∇R(a∞) = Φᵀ μ∞ is the KKT condition of

    min_a  R(a)   subject to  Φ a = y,

so a∞ is the interpolator of least potential (Gunasekar et al., 2018).  With
r = |a|^p/p, R is the flatness Σ κ_j |a_j|^p of chapter 2 up to the factor p,
and the limit is the flattest interpolator, with dual variable λ = p μ∞.  For the
ReLU (p = 1) the weighted hyperbolic entropy with a small scale β stands in for
the weighted ℓ₁ norm: its minimiser tends to the ℓ₁ one as β → 0, its leading
term being log(1/β) Σ_j κ_j |a_j|.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .activations import get_activation
from .backend import as_tensor, check_data
from .errors import FlatbookInputError
from .flatness import orbit_flatness, unit_flatness_weights
from .flattest import dual_objective, feature_matrix
from .mirror import Weighted, get_potential
from .network import TwoLayerNet
from .training import TrainingRun, mirror_descent

__all__ = ["MirrorSolution", "flattest_by_mirror_descent"]


@dataclass
class MirrorSolution:
    """The outer weights mirror descent reached, their flatness and a dual lower bound."""

    net: TwoLayerNet  #: unit directions with the outer weights reached
    effective_a: torch.Tensor  #: ã (= a, the directions being unit vectors)
    flatness: float  #: Σ_j κ_j |ã_j|^p
    lower_bound: float  #: dual objective at the dual point read off the iterate
    residual: float  #: max_i |Φ ã − y|_i
    run: TrainingRun  #: the trajectory (``record`` rows included)


def flattest_by_mirror_descent(
    theta,
    X,
    y,
    activation="relu",
    *,
    beta: float = 1e-6,
    target_loss: float = 1e-20,
    max_steps: int = 200_000,
    step: float = 1.0,
    n_logs: int = 60,
    record=None,
) -> MirrorSolution:
    """Mirror descent on the outer weights from zero with the potential Σ_j κ_j r(a_j) of the flattest program.

    r = |a|^p/p for p = 2c/(c+1) > 1, and the hyperbolic entropy of scale
    ``beta`` for p = 1.  Steps are adaptive (backtracking on the loss); training
    stops at ``target_loss`` or ``max_steps``.  ``record(net)`` adds columns to
    the trajectory, as in :func:`flatbook.training.mirror_descent`.
    """
    activation = get_activation(activation)
    theta = as_tensor(theta, "theta", ndim=2)
    X, y = check_data(X, y, theta.shape[1])
    X, y = X.to(theta.device), y.to(theta.device)
    units = theta / torch.linalg.vector_norm(theta, dim=1, keepdim=True)
    kappa = unit_flatness_weights(units, X, activation)
    if not bool((kappa > 0).all()):
        raise FlatbookInputError(
            f"{int((kappa <= 0).sum())} direction(s) are silent on every sample "
            "(κ_j = 0); drop them before calling the mirror-descent solver."
        )
    p = activation.p
    base = get_potential("p_norm", p=p) if p > 1 else get_potential("hyperbolic_entropy", beta=beta)
    potential = Weighted(base, kappa)
    start = TwoLayerNet(torch.zeros_like(kappa), units, activation)
    run = mirror_descent(
        start,
        X,
        y,
        loss="square",
        outer=potential,
        train_inner=False,
        step=step,
        target_loss=target_loss,
        max_steps=max_steps,
        n_logs=n_logs,
        record=record,
    )
    a = run.net.a
    Phi = feature_matrix(units, X, activation)
    mu = torch.linalg.lstsq(Phi.T, potential.mirror_map(a)).solution  # ∇R(a) = Φᵀμ
    if p > 1:
        lower_bound = dual_objective(p * mu, Phi, y, kappa, p)
    else:  # μ scaled onto the boundary of the dual feasible set |Φᵀλ| ≤ κ by the same product that decides the
        # scale (recomputing Φᵀλ could leave it a round-off outside): λᵀy is a lower bound by weak duality
        lower_bound = float(mu @ y) / float(((Phi.T @ mu).abs() / kappa).max())
    return MirrorSolution(
        net=run.net,
        effective_a=a,
        flatness=float(orbit_flatness(a, kappa, p)),
        lower_bound=lower_bound,
        residual=float((Phi @ a - y).abs().max()),
        run=run,
    )
