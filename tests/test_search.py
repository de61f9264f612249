import pytest
import torch

from flatbook import get_activation
from flatbook.data import sum_of_single_index
from flatbook.errors import FlatbookInputError
from flatbook.interpolators import alignment_projector, random_directions
from flatbook.search import _lagrangian_gradient, dictionary_search, direct_search, interpolator_report


def data(n=30, d=6, seed=0):
    teacher = sum_of_single_index(d=d, k=2, link="relu", noise_std=0.05, seed=seed)
    X, y = teacher.sample(n, seed=seed + 1)
    return teacher, X, y


def test_dictionary_search_with_teacher_directions_is_flatter():
    teacher, X, y = data()
    plain = dictionary_search(X, y, "relu", 90, seed=3)
    with_teacher = dictionary_search(X, y, "relu", 90, seed=3, extra_directions=teacher.theta_star)
    # The teacher's two directions let the program drop most of the random ones (not implied by the
    # inclusion of dictionaries, which only gives <=): at least 10 % flatter on this instance.
    assert with_teacher.upsilon < 0.9 * plain.upsilon
    report = interpolator_report(with_teacher.solution, X, y, teacher, n_test=5_000)
    assert report["residual"] <= 1e-8 * report["max_abs_y"]
    plain_report = interpolator_report(plain.solution, X, y, teacher, n_test=5_000)
    assert report["weighted_alignment"] > plain_report["weighted_alignment"]


@pytest.mark.parametrize("name", ["relu", "quadratic"])
def test_envelope_gradient_matches_finite_differences(name):
    # Danskin: the derivative of the optimal value V(U) along a direction equals the Lagrangian's.
    teacher, X, y = data(n=15, d=6, seed=4)
    activation = get_activation(name)
    U = random_directions(40, 6, seed=5)
    search = direct_search(X, y, activation, U, steps=0)
    grad = _lagrangian_gradient(U, search.solution, X, y, activation)
    direction = torch.randn(U.shape, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    direction -= (direction * U).sum(1, keepdim=True) * U
    h = 1e-5
    plus = direct_search(X, y, activation, U + h * direction, steps=0).upsilon
    minus = direct_search(X, y, activation, U - h * direction, steps=0).upsilon
    assert (plus - minus) / (2 * h) == pytest.approx(float((grad * direction).sum()), rel=1e-3)


def test_direct_search_lowers_upsilon_and_keeps_interpolating():
    teacher, X, y = data(n=30, d=6, seed=7)
    start = random_directions(60, 6, seed=8)
    result = direct_search(X, y, "relu", start, steps=5)
    assert all(b < a for a, b in zip(result.history, result.history[1:], strict=False))
    assert len(result.history) >= 2
    assert result.solution.residual <= 1e-8 * float(y.abs().max())


def test_constrained_search_stays_in_its_class():
    teacher, X, y = data(n=25, d=7, seed=9)
    project = alignment_projector(teacher.theta_star, 0.0)
    result = direct_search(X, y, "relu", random_directions(60, 7, seed=10), steps=3, constraint=project)
    assert result.method == "constrained direct search"
    assert result.solution.net.alignment(teacher.theta_star).max() < 1e-9


def test_direct_search_arguments():
    teacher, X, y = data()
    with pytest.raises(FlatbookInputError, match="min_angle"):
        direct_search(X, y, "relu", random_directions(60, 6), steps=2, angle=0.1, min_angle=0.2)
