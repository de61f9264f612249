"""Layer-wise mirror descent: exact gradients, gradient descent as a special case, step control, errors."""

import pytest
import torch

from flatbook import TwoLayerNet, get_activation
from flatbook.data import teacher_student_classification
from flatbook.errors import FlatbookInputError, SolverError
from flatbook.training import (
    _state,
    get_loss,
    log_steps,
    loss_gradients,
    mirror_descent,
)


def problem(activation="relu", n=25, m=6, d=3, seed=0, classification=True):
    data = teacher_student_classification(d, n, k=2, n_test=1, seed=seed)
    X = data.X
    y = data.y if classification else X[:, 0] ** 2
    gen = torch.Generator().manual_seed(seed)
    net = TwoLayerNet(
        0.5 * torch.randn(m, generator=gen, dtype=torch.float64),
        0.5 * torch.randn(m, d, generator=gen, dtype=torch.float64),
        activation,
    )
    return net, X, y


@pytest.mark.parametrize("loss_name", ["square", "logistic", "exponential"])
@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "quadratic"])
def test_gradients_match_autograd(loss_name, activation):
    net, X, y = problem(activation, classification=loss_name != "square")
    loss, act = get_loss(loss_name), get_activation(activation)
    a, theta = net.a.clone().requires_grad_(True), net.theta.clone().requires_grad_(True)
    value = loss.value(act(X @ theta.T) @ a, y)
    grad_a, grad_theta = torch.autograd.grad(value, (a, theta))
    ours = loss_gradients(_state(net.a, net.theta, X, y, act, loss), X, y, act, loss)
    assert torch.allclose(ours[0], grad_a, rtol=1e-12, atol=1e-15)
    assert torch.allclose(ours[1], grad_theta, rtol=1e-12, atol=1e-15)


def test_euclidean_fixed_step_is_gradient_descent():
    net, X, y = problem()
    run = mirror_descent(net, X, y, loss="logistic", outer="euclidean", step=0.05, adaptive=False, max_steps=7)
    a, theta = net.a.clone(), net.theta.clone()
    act, loss = get_activation("relu"), get_loss("logistic")
    for _ in range(7):
        grad_a, grad_theta = loss_gradients(_state(a, theta, X, y, act, loss), X, y, act, loss)
        a, theta = a - 0.05 * grad_a, theta - 0.05 * grad_theta
    assert torch.allclose(run.net.a, a, rtol=1e-13) and torch.allclose(run.net.theta, theta, rtol=1e-13)
    assert run.steps == 7 and run.time == pytest.approx(0.35) and run.stopped == "max_steps"


@pytest.mark.parametrize("outer", ["euclidean", "hyperbolic_entropy", "p_norm"])
def test_adaptive_steps_decrease_the_loss_to_the_target(outer):
    net, X, y = problem(m=12)
    run = mirror_descent(
        net, X, y, outer=outer, target_loss=1e-6, max_steps=5000, record=lambda current: {"width": current.width}
    )
    losses = [row["loss"] for row in run.history]
    assert all(b <= a for a, b in zip(losses, losses[1:], strict=False))
    assert run.stopped == "target_loss" and losses[-1] <= 1e-6 < losses[-2]
    assert all(row["width"] == 12 for row in run.history)
    assert run.history[-1]["step"] == run.steps and run.history[0]["time"] == 0


def test_regression_with_the_square_loss_and_stopping_rules():
    net, X, y = problem(classification=False)
    run = mirror_descent(net, X, y, loss="square", outer="euclidean", max_time=3.0, max_steps=10**5)
    assert run.stopped == "max_time" and run.time >= 3.0
    assert run.history[-1]["loss"] < run.history[0]["loss"]
    stopped = mirror_descent(net, X, y, loss="square", max_steps=10**4, stop_when=lambda current: True)
    assert stopped.stopped == "stop_when" and stopped.steps == 1


def test_log_steps_are_geometric():
    steps = sorted(log_steps(10_000, 20))
    assert steps[0] == 0 and steps[-1] == 10_000 and len(steps) <= 22
    assert steps[-2] / steps[-3] == pytest.approx(steps[-3] / steps[-4], rel=0.2)


def test_errors_say_what_to_do():
    net, X, y = problem()
    with pytest.raises(FlatbookInputError, match=r"labels in \{-1, \+1\}"):
        mirror_descent(net, X, (y + 1) / 2, loss="logistic")
    with pytest.raises(FlatbookInputError, match="unknown loss 'hinge'"):
        mirror_descent(net, X, y, loss="hinge")
    with pytest.raises(FlatbookInputError, match="step must be a finite number > 0"):
        mirror_descent(net, X, y, step=0.0)
    with pytest.raises(FlatbookInputError, match="X has 3 columns but the network's inner weights have d = 2"):
        mirror_descent(TwoLayerNet(net.a, net.theta[:, :2]), X, y)
    big, Xb, yb = problem(classification=False)
    with pytest.raises(SolverError, match="diverged .* lower `step` or pass adaptive=True"):
        mirror_descent(big, 30 * Xb, yb, loss="square", step=10.0, adaptive=False, max_steps=200)


def test_fixed_inner_weights_stay_fixed():
    net, X, y = problem(classification=False)
    run = mirror_descent(net, X, y, loss="square", train_inner=False, max_steps=50)
    assert torch.equal(run.net.theta, net.theta) and not torch.equal(run.net.a, net.a)


def test_sam_takes_the_gradient_at_the_perturbed_point():
    net, X, y = problem(classification=False)
    act, loss = get_activation("relu"), get_loss("square")
    state = _state(net.a, net.theta, X, y, act, loss)
    g_a, g_t = loss_gradients(state, X, y, act, loss)
    norm = float(torch.sqrt((g_a**2).sum() + (g_t**2).sum()))
    shifted = _state(net.a + 0.05 * g_a / norm, net.theta + 0.05 * g_t / norm, X, y, act, loss)
    s_a, s_t = loss_gradients(shifted, X, y, act, loss)
    run = mirror_descent(
        net, X, y, loss="square", step=0.01, adaptive=False, max_steps=1, sam_radius=0.05, perturbed_steps=1
    )
    assert torch.allclose(run.net.a, net.a - 0.01 * s_a, rtol=1e-13)
    assert torch.allclose(run.net.theta, net.theta - 0.01 * s_t, rtol=1e-13)


def test_label_noise_perturbs_only_the_noisy_steps_and_is_seeded():
    net, X, y = problem(classification=False)
    kwargs = dict(loss="square", step=0.01, adaptive=False, max_steps=20)
    plain = mirror_descent(net, X, y, **kwargs)
    noisy = mirror_descent(net, X, y, label_noise=0.5, perturbed_steps=10, seed=3, **kwargs)
    again = mirror_descent(net, X, y, label_noise=0.5, perturbed_steps=10, seed=3, **kwargs)
    assert torch.equal(noisy.net.a, again.net.a)
    assert not torch.allclose(noisy.net.a, plain.net.a)
    silent = mirror_descent(net, X, y, label_noise=0.5, perturbed_steps=0, **kwargs)
    assert torch.equal(silent.net.a, plain.net.a)
    with pytest.raises(FlatbookInputError, match="pass adaptive=False with a fixed `step`"):
        mirror_descent(net, X, y, loss="square", sam_radius=0.1)


@pytest.mark.slow
def test_the_round_off_floor_stops_a_run_without_an_error():
    """A line search that cannot decrease a loss 1e-20 times below its first has reached the floor of the mirror
    maps' round trip: convergence, not a wrong gradient (chapter 7's paper-scale solver once raised there)."""
    from flatbook.data import sum_of_single_index
    from flatbook.flattest_mirror import flattest_by_mirror_descent
    from flatbook.interpolators import random_directions
    from flatbook.training import ROUND_OFF

    X, y = sum_of_single_index(5, 2, link="quadratic", seed=0).sample(10, seed=1)
    directions = random_directions(30, 5, seed=2)
    solution = flattest_by_mirror_descent(directions, X, y, "quadratic", target_loss=1e-40, max_steps=200_000)
    assert solution.run.stopped == "round-off" and solution.residual < 1e-10, solution.run.history[-1]
    assert solution.run.history[-1]["loss"] <= ROUND_OFF * solution.run.history[0]["loss"]
    assert solution.run.history[-1]["step"] == solution.run.steps < 200_000  # the final state is logged


def test_a_run_stuck_on_a_relu_kink_stops_there_without_blaming_the_gradient():
    """Hyperbolic entropy (β = 1) on a width-6 ReLU network drives a sample onto a neuron's hyperplane, where the
    gradient with σ'(0) = 0 increases the loss along every step (the loss is not differentiable there): the run
    stops with ``stopped == "kink"`` instead of raising "the gradient is likely wrong" (it once did).  With some
    BLAS builds the halved steps end below round-off instead (the parameters stop changing, the loss neither
    rises nor falls): that is the same kink and stops the same way (it used to run on to ``max_steps``)."""
    from flatbook.mirror import get_potential
    from flatbook.training import KINK

    data = teacher_student_classification(10, 100, 3, 5000, seed=0)
    generator = torch.Generator().manual_seed(1)
    a = 0.1 * torch.randn(6, generator=generator, dtype=torch.float64)
    theta = 0.1 * torch.randn(6, 10, generator=generator, dtype=torch.float64)
    run = mirror_descent(
        TwoLayerNet(a, theta, "relu"),
        data.X,
        data.y,
        outer=get_potential("hyperbolic_entropy", beta=1.0),
        max_steps=2_000,
    )
    assert run.stopped == "kink" and run.steps < 2_000, (run.stopped, run.steps)
    assert run.history[-1]["loss"] > 1e-2  # not a minimum: the data are not even separated
    pre = (data.X @ run.net.theta.T).abs() / (data.X.norm(dim=1)[:, None] * run.net.theta.norm(dim=1)[None, :])
    assert float(pre.min()) <= KINK
