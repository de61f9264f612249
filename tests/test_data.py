import math

import pytest
import torch

from flatbook import MultiIndexModel, TwoLayerNet, get_activation, population_loss
from flatbook.data import multi_index_product, random_orthonormal, single_index, sum_of_single_index
from flatbook.errors import FlatbookInputError


def test_random_orthonormal_rows():
    theta_star = random_orthonormal(3, 10, seed=1)
    torch.testing.assert_close(theta_star @ theta_star.T, torch.eye(3, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(theta_star, random_orthonormal(3, 10, seed=1))


def test_sampling_is_reproducible_and_follows_the_model():
    model = sum_of_single_index(d=8, k=2, link="relu", noise_std=0.0, seed=0)
    X1, y1 = model.sample(50, seed=7)
    X2, y2 = model.sample(50, seed=7)
    torch.testing.assert_close(X1, X2)
    z = X1 @ model.theta_star.T
    torch.testing.assert_close(y1, torch.relu(z).sum(dim=1))
    assert not torch.equal(model.sample(50, seed=8)[0], X1)


def test_noise_level_and_bayes_risk():
    model = single_index(d=4, link="quadratic", noise_std=0.5, seed=0)
    X, y = model.sample(40_000, seed=1)
    noise = y - model.target(X)
    assert model.bayes_risk == 0.25
    assert abs(noise.var().item() - 0.25) < 5 * 0.25 * math.sqrt(2 / 40_000)


def test_population_loss_of_the_teacher_is_the_bayes_risk():
    model = single_index(d=5, link="relu", noise_std=0.3, seed=2)
    teacher_net = TwoLayerNet([1.0], model.theta_star, "relu")
    result = population_loss(teacher_net, model, n_test=5000)
    assert result.value == pytest.approx(0.09, abs=1e-14)
    assert result.excess == pytest.approx(0.0, abs=1e-14)


def test_population_loss_against_a_closed_form():
    # h(x) = <u, x>^2 against the zero link: F = E <u,x>^4 + τ² = 3 ||u||^4 + τ².
    d = 6
    u = torch.arange(1.0, d + 1, dtype=torch.float64) / 10
    model = MultiIndexModel(random_orthonormal(1, d, seed=0), lambda z: torch.zeros(len(z), dtype=z.dtype), 0.2)
    result = population_loss(TwoLayerNet([1.0], u[None, :], "quadratic"), model, n_test=400_000, chunk=50_000)
    exact = 3 * float(u @ u) ** 2 + 0.04
    assert abs(result.value - exact) < 4 * result.stderr
    assert result.stderr < 0.01 * exact


def test_product_link_has_unit_second_moment():
    model = multi_index_product(d=6, k=3, seed=0)
    _, y = model.sample(200_000, seed=3)
    assert abs((y**2).mean().item() - 1.0) < 0.03


def test_teacher_validation():
    with pytest.raises(FlatbookInputError, match="orthonormal rows"):
        MultiIndexModel(torch.ones(2, 3), lambda z: z[:, 0])
    with pytest.raises(FlatbookInputError, match="noise_std"):
        single_index(d=3, noise_std=-1.0)
    with pytest.raises(FlatbookInputError, match="1 <= k <= d"):
        random_orthonormal(4, 3)
    model = single_index(d=3)
    with pytest.raises(FlatbookInputError, match="n must be a positive int"):
        model.sample(0)
    with pytest.raises(FlatbookInputError, match="network has d = 4 but the teacher has d = 3"):
        population_loss(TwoLayerNet([1.0], [[1.0, 0, 0, 0]], "relu"), model)


def test_teacher_student_classification_is_balanced_and_reproducible():
    from flatbook.data import teacher_student_classification

    data = teacher_student_classification(d=6, n=200, k=3, n_test=300, seed=4)
    assert data.X.shape == (200, 6) and data.X_test.shape == (300, 6)
    assert set(data.y.unique().tolist()) == {-1.0, 1.0}
    assert abs(float(data.y.mean())) <= 0.02  # split at the median of the training outputs
    again = teacher_student_classification(d=6, n=200, k=3, n_test=300, seed=4)
    assert torch.equal(data.X, again.X) and torch.equal(data.y_test, again.y_test)
    with pytest.raises(FlatbookInputError, match="need 1 <= k <= d teacher neurons"):
        teacher_student_classification(d=2, n=10, k=3)


def test_digits_parity_is_the_bundled_data_set():
    from flatbook.data import digits_parity

    data = digits_parity(n_train=500, seed=0)
    assert data.X.shape == (500, 64) and data.X_test.shape == (1297, 64)
    assert set(data.y.unique().tolist()) == {-1.0, 1.0}
    assert torch.allclose(data.X.mean(0), torch.zeros(64, dtype=torch.float64), atol=1e-12)
    with pytest.raises(FlatbookInputError, match="n_train must be an int"):
        digits_parity(n_train=5000)


@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "quadratic"])
def test_orthogonal_residual_adds_its_variance_to_the_population_loss(activation):
    # The residual η He₃(v·x)/√6 is L²-orthogonal to every ReLU-family or quadratic network: the exact
    # loss is the loss without it plus η², and Monte Carlo on the full labels agrees within 4 standard errors.
    plain = sum_of_single_index(d=4, k=2, link="relu", noise_std=0.1, seed=3)
    model = sum_of_single_index(d=4, k=2, link="relu", noise_std=0.1, seed=3, residual_std=0.5)
    assert torch.equal(plain.theta_star, model.theta_star)
    assert float((model.theta_star @ model.residual_direction).abs().max()) < 1e-12
    net = TwoLayerNet(
        torch.tensor([0.7, -0.4, 0.2]),
        torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64),
        activation,
    )
    exact = population_loss(net, model)
    assert exact.method == "exact" and model.approximation_error == 0.25
    assert exact.value == pytest.approx(population_loss(net, plain).value + 0.25, rel=1e-12)
    sampled = population_loss(net, model, n_test=400_000, method="monte carlo")
    assert abs(sampled.value - exact.value) < 4 * sampled.stderr


def test_orthogonal_residual_needs_a_vanishing_third_hermite_coefficient_for_the_closed_form():
    model = sum_of_single_index(d=3, k=1, seed=0, residual_std=0.5)
    net = TwoLayerNet([1.0], model.theta_star, get_activation("relu_power", c=2.0))
    assert population_loss(net, model, n_test=1000).method == "monte carlo"
    with pytest.raises(FlatbookInputError, match="orthogonal"):
        MultiIndexModel(model.theta_star, model.link, 0.0, 0.5, model.theta_star[0])
    with pytest.raises(FlatbookInputError, match="residual_direction"):
        MultiIndexModel(model.theta_star, model.link, 0.0, 0.5)
