"""Local moves on a measure's atoms: fewer atoms by Gauss-Newton, and sliding its directions downhill on V.

Column generation (:mod:`flatbook.column_generation`) approaches the flattest measure one cut at a time and
ends with heavy atoms slightly off their optimum, near-copies of one direction and many light corrections.
Two local moves help it (book, chapter 2, "Computing it"), both keeping interpolation exact:

- :func:`polish_atoms`: interpolate with the k ≤ 4 heaviest atoms (or groups of near-copies merged by
  :func:`merge_near_copies`), directions by Gauss-Newton on the variable-projection residual
  (:func:`projected_residual`, Golub & Pereyra 1973), kept when at least as flat;
- :func:`slide`: n directions with an invertible feature matrix descend along the tangent gradient of
  V(U) = Σ_k w(u_k)|μ_k|, μ = Φ(U)⁻¹y (the local step of sliding Frank-Wolfe).
"""

from __future__ import annotations

import math

import torch

from .backend import lstsq_driver
from .flatness import unit_flatness_weights

__all__ = ["merge_near_copies", "polish_atoms", "projected_residual", "slide"]


def polish_atoms(
    atom_dirs,
    atom_weights,
    X,
    y,
    activation,
    project,
    ceiling: float | None = None,
    max_atoms: int = 4,
    steps: int = 30,
):
    """Try to interpolate with only the k ≤ ``max_atoms`` heaviest atoms, their directions polished.

    Column generation ends with the heavy atoms slightly off their optimum, some of them split into
    near-copies of one direction, and many atoms of weight ~1e-6 that correct for it; each costs a
    neuron when the atoms are split into copies.  For k = 1, 2, …: Gauss-Newton on k directions, the
    weights by least squares (variable projection), until the residual is below 1e-11 max|y|, started
    at the k heaviest atoms and at the k heaviest groups of near-copies merged (:func:`merge_near_copies`).
    Returns (directions, weights, V) of the flatter of the two k-atom interpolators at the first k where
    one has a V no larger than ``ceiling`` (default: the atoms' own V) to 1e-9, else None.
    """
    p = activation.p
    kappa = unit_flatness_weights(atom_dirs, X, activation)
    contribution = kappa ** (1.0 / p) * atom_weights.abs()
    value = float(contribution.sum()) if ceiling is None else ceiling
    merged = merge_near_copies(atom_dirs, contribution, even=activation.even)
    heaviest = atom_dirs[torch.argsort(contribution, descending=True)]
    scale = float(y.abs().max())

    def polished(U):
        """(directions, weights, V) of the interpolator Gauss-Newton reaches from U, or None where it reaches none:
        also where a direction leaves what ``project`` can map (a zero row: for ρ0 = 0, a direction inside the
        teacher's span) and the iterate stops being finite."""
        U = project(U) if project is not None else U.clone()
        try:
            for _ in range(steps):
                if not _directions(U):
                    return None
                residual, _, J = projected_residual(U, X, y, activation, jacobian=True)
                if not bool(torch.isfinite(J).all()):
                    return None
                if float(residual.abs().max()) <= 1e-11 * scale:
                    break
                step = torch.linalg.lstsq(J, -residual[:, None], driver=lstsq_driver(J)).solution[:, 0]
                U = U + step.reshape(U.shape)
                U = U / torch.linalg.vector_norm(U, dim=1, keepdim=True)
                if project is not None:
                    U = project(U)
            if not _directions(U):
                return None
            residual, mu, _ = projected_residual(U, X, y, activation)
        except torch.linalg.LinAlgError:  # a Jacobian LAPACK cannot factor: no interpolator from this start
            return None
        if float(residual.abs().max()) > 1e-11 * scale:
            return None
        return U, mu, float((unit_flatness_weights(U, X, activation) ** (1.0 / p) * mu.abs()).sum())

    for k in range(1, min(max_atoms, atom_dirs.shape[0] - 1) + 1):
        starts = [heaviest[:k]]
        if merged.shape[0] >= k and not torch.allclose(merged[:k], heaviest[:k], rtol=0, atol=1e-12):
            starts.append(merged[:k])
        found = [f for f in map(polished, starts) if f is not None and f[2] <= value * (1.0 + 1e-9)]
        if found:
            return min(found, key=lambda f: f[2])
    return None


def _directions(U) -> bool:
    """Whether every row of U is a direction: finite and non-zero."""
    return bool(torch.isfinite(U).all()) and bool((torch.linalg.vector_norm(U, dim=1) > 0).all())


def projected_residual(U, X, y, activation, jacobian: bool = False):
    """Variable projection: r(U) = F μ − y with F_ij = σ(⟨x_i, û_j⟩), û_j = U_j / ‖U_j‖, and μ = F⁺y; with
    ``jacobian`` also ∂r/∂U (n, k·d), in closed form (Golub & Pereyra 1973) for F of full column rank:
    dr = (I − F F⁺) dF μ − F⁺ᵀ dFᵀ r, where ∂F_ij/∂U_j = σ'(⟨x_i, û_j⟩) (x_i − ⟨x_i, û_j⟩ û_j) / ‖U_j‖.
    O(n k d) memory: reverse-mode autograd of the least squares needed an n × n block per sample
    (32 GB at n = 1600).  Returns (r, μ, ∂r/∂U or None)."""
    norms = torch.linalg.vector_norm(U, dim=1, keepdim=True)
    unit = U / norms
    Z = X @ unit.T
    F = activation(Z)
    mu = torch.linalg.lstsq(F, y[:, None], driver=lstsq_driver(F)).solution[:, 0]
    residual = F @ mu - y
    if not jacobian:
        return residual, mu, None
    n, k = F.shape
    dF = activation.derivative(Z)[:, :, None] * (X[:, None, :] - Z[:, :, None] * unit) / norms  # (n, k, d)
    pinv = torch.linalg.pinv(F)  # (k, n)
    moved = (dF * mu[:, None]).reshape(n, -1)  # dF μ
    moved = moved - F @ (pinv @ moved)
    # the second term: column block j is −(F⁺ᵀ)_{:, j} (dF_{:, j}ᵀ r)ᵀ
    through_mu = pinv.T[:, :, None] * torch.einsum("i,ijd->jd", residual, dF)[None]
    return residual, mu, moved - through_mu.reshape(n, -1)


def merge_near_copies(atom_dirs, contribution, even: bool, cosine: float = 0.99):
    """The atoms' directions merged into groups of near-copies (cosine above ``cosine``; for an even σ, where
    u and −u give one column, |cosine|), each the contribution-weighted mean of its members, unit norm,
    heaviest group (by total contribution) first.  Atoms join, heaviest first, the first group formed whose
    running sum they are near; one product against every group's sum per atom (O(K²d) flops, K torch calls)."""
    count = atom_dirs.shape[0]
    sums = atom_dirs.new_zeros(atom_dirs.shape)
    norms, totals = contribution.new_zeros(count), contribution.new_zeros(count)
    groups = 0
    for i in torch.argsort(contribution, descending=True).tolist():
        u, weight = atom_dirs[i], contribution[i]
        cosines = (sums[:groups] @ u) / norms[:groups]
        near = torch.nonzero((cosines.abs() if even else cosines) > cosine)
        g = int(near[0]) if near.shape[0] else groups
        sign = torch.sign(cosines[g]) if g < groups else 1.0
        sums[g] += sign * weight * u
        totals[g] += weight
        norms[g] = torch.linalg.vector_norm(sums[g])
        groups += g == groups
    merged = sums[:groups][torch.argsort(totals[:groups], descending=True)]
    return merged / torch.linalg.vector_norm(merged, dim=1, keepdim=True)


def slide(U, X, y, activation, project, steps: int = 20, angle: float = 0.1):
    """Move n directions with an invertible feature matrix to lower V(U) = Σ_k w(u_k)|μ_k|, μ = Φ(U)⁻¹y.

    The continuous local step of sliding Frank-Wolfe: the master's basic directions (n of them,
    so every iterate still interpolates exactly) descend along the tangent gradient of V, with
    backtracking on the step angle.  Returns the moved directions and V there (inf if Φ(U) is
    singular at the start).
    """

    def value(V):
        F = activation(X @ V.T)
        mu = torch.linalg.solve(F, y)
        return (unit_flatness_weights(V, X, activation) ** (1.0 / activation.p) * mu.abs()).sum()

    # Every point is evaluated on the autograd tape: the gradient at an accepted trial is then one
    # backward pass, not another O(n³) solve.
    U = U.detach().clone().requires_grad_(True)
    try:
        objective = value(U)
    except RuntimeError:  # singular: nothing to slide
        return U.detach(), math.inf
    current = float(objective.detach())
    for _ in range(steps):
        (grad,) = torch.autograd.grad(objective, U)
        U = U.detach()
        grad = grad - (grad * U).sum(1, keepdim=True) * U
        largest = float(torch.linalg.vector_norm(grad, dim=1).max())
        if not largest > 0 or not math.isfinite(largest):
            break
        while angle > 1e-6:
            trial = U - (angle / largest) * grad
            trial = trial / torch.linalg.vector_norm(trial, dim=1, keepdim=True)
            if project is not None:
                trial = project(trial)
            trial = trial.detach().requires_grad_(True)
            try:
                trial_objective = value(trial)
                trial_value = float(trial_objective.detach())
            except RuntimeError:
                trial_value = math.inf
            if trial_value < current:
                U, objective, current, angle = trial, trial_objective, trial_value, angle * 1.5
                break
            trial_objective = None  # a rejected trial's tape goes before the next one is built
            angle *= 0.5
        else:
            break
    return U.detach(), current
