"""Mirror descent from zero with the flattest program's potential reaches the cvxpy solution."""

import pytest
import torch

from flatbook import flattest_outer_weights
from flatbook.data import sum_of_single_index
from flatbook.errors import FlatbookInputError
from flatbook.flattest_mirror import flattest_by_mirror_descent
from flatbook.interpolators import random_directions


def instance(link, n=10, m=30, d=5):
    teacher = sum_of_single_index(d, 2, link=link, seed=0)
    X, y = teacher.sample(n, seed=1)
    return random_directions(m, d, seed=2), X, y


@pytest.mark.slow
def test_quadratic_p_four_thirds_reaches_the_convex_optimum():
    U, X, y = instance("quadratic")
    reference = flattest_outer_weights(U, X, y, "quadratic", solver="CLARABEL")
    solution = flattest_by_mirror_descent(U, X, y, "quadratic", max_steps=30_000, target_loss=1e-22)
    error = float((solution.effective_a - reference.effective_a).norm() / reference.effective_a.norm())
    assert error < 1e-4
    assert solution.flatness == pytest.approx(reference.flatness, rel=1e-6)
    assert solution.lower_bound == pytest.approx(reference.flatness, rel=1e-6)
    assert solution.residual < 1e-6 * float(y.abs().max())  # still converging after 30 000 steps


@pytest.mark.slow
def test_relu_hyperbolic_entropy_approaches_the_l1_optimum_as_beta_shrinks():
    U, X, y = instance("relu")
    optimum = flattest_outer_weights(U, X, y, "relu", solver="CLARABEL").flatness
    gaps = []
    for beta in (1e-2, 1e-6):
        solution = flattest_by_mirror_descent(U, X, y, "relu", beta=beta, max_steps=30_000, target_loss=1e-22)
        assert solution.residual < 1e-8 * float(y.abs().max())
        assert solution.lower_bound <= optimum * (1 + 1e-9) <= solution.flatness * (1 + 1e-9)
        gaps.append(solution.flatness / optimum - 1)
    assert gaps[1] < gaps[0] / 2 and gaps[1] < 0.05


def test_trajectory_and_errors():
    U, X, y = instance("quadratic")
    solution = flattest_by_mirror_descent(
        U, X, y, "quadratic", max_steps=200, record=lambda net: {"a_norm": float(net.a.norm())}
    )
    assert solution.run.history[0]["a_norm"] == 0.0 and solution.run.history[-1]["a_norm"] > 0
    silent = torch.cat([U, -torch.ones(1, U.shape[1], dtype=U.dtype) * 1e3])
    X_pos = X.abs()  # every sample has positive coordinates: the all-negative direction never fires
    with pytest.raises(FlatbookInputError, match="silent on every sample"):
        flattest_by_mirror_descent(silent, X_pos, y, "relu")


def test_relu_lower_bound_is_weak_duality_of_the_scaled_dual_point_without_recomputing_its_feasibility(monkeypatch):
    """For p = 1 the dual point is scaled onto |Φᵀλ| = κ by the product that decides the scale; a check that
    recomputes Φᵀλ can find it a round-off outside and refuse it, so the bound must not go through one."""
    import flatbook.flattest_mirror as module

    def refuses(*args):
        raise FlatbookInputError("λ is not dual feasible (|Φᵀλ|_j > κ_j for some j).")

    monkeypatch.setattr(module, "dual_objective", refuses)
    U, X, y = instance("relu")
    optimum = flattest_outer_weights(U, X, y, "relu", solver="CLARABEL").flatness
    solution = flattest_by_mirror_descent(U, X, y, "relu", beta=1e-2, max_steps=2_000)
    assert 0 < solution.lower_bound <= optimum * (1 + 1e-9) <= solution.flatness * (1 + 1e-9)
