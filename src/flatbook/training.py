"""Full-batch training of the two-layer network by layer-wise mirror descent (gradient descent included).

Each layer has its own potential (:mod:`flatbook.mirror`); one step is
``∇R_a(a⁺) = ∇R_a(a) − η ∇_a L`` and ``∇R_θ(θ⁺) = ∇R_θ(θ) − η ∇_θ L`` (book,
chapter 6, eq. ``eq-mirror-descent``); the Euclidean potential on both layers
is plain gradient descent.  ``L(w) = (1/n) Σ_i ℓ(h(w, x_i), y_i)`` with the
square loss (regression, no ½, as everywhere in the book) or the logistic or
exponential loss of the margin ``y_i h(w, x_i)`` (classification).

Step sizes: a fixed ``step`` (what the balance check of chapter 6 needs), or
``adaptive=True``: backtracking that halves a step until the loss decreases and
grows the next one by ``growth``.  For exponentially-tailed losses the accepted
steps grow like 1/L, so the flow time ``t = Σ_k η_k`` reaches the very late
phase of training, where the direction converges, in thousands of steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .backend import check_binary_labels, check_data
from .errors import FlatbookInputError, SolverError
from .mirror import Potential, get_potential
from .network import TwoLayerNet

__all__ = [
    "ROUND_OFF",
    "KINK",
    "OutputLoss",
    "SquareLoss",
    "LogisticLoss",
    "ExponentialLoss",
    "LOSSES",
    "get_loss",
    "TrainingRun",
    "log_steps",
    "mirror_descent",
]


class OutputLoss:
    """A loss ℓ(h, y) of one output, averaged over the data: value and derivative in h."""

    name = "loss"

    def value(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def derivative(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """∂L/∂h_i = ℓ'(h_i, y_i)/n."""
        raise NotImplementedError


class SquareLoss(OutputLoss):
    """L = (1/n) Σ (h_i − y_i)² (no ½, the book's F_S)."""

    name = "square"

    def value(self, out, y):
        return ((out - y) ** 2).mean()

    def derivative(self, out, y):
        return 2 * (out - y) / out.shape[0]


class LogisticLoss(OutputLoss):
    """L = (1/n) Σ log(1 + exp(−y_i h_i)), labels ±1."""

    name = "logistic"

    def value(self, out, y):
        return torch.nn.functional.softplus(-y * out).mean()

    def derivative(self, out, y):
        return -y * torch.sigmoid(-y * out) / out.shape[0]


class ExponentialLoss(OutputLoss):
    """L = (1/n) Σ exp(−y_i h_i), labels ±1."""

    name = "exponential"

    def value(self, out, y):
        return torch.exp(-y * out).mean()

    def derivative(self, out, y):
        return -y * torch.exp(-y * out) / out.shape[0]


#: the losses :func:`get_loss` accepts, by name
LOSSES = {loss.name: loss for loss in (SquareLoss(), LogisticLoss(), ExponentialLoss())}


def get_loss(name) -> OutputLoss:
    """The loss called ``name`` (square, logistic, exponential); an OutputLoss is returned unchanged."""
    if isinstance(name, OutputLoss):
        return name
    if name not in LOSSES:
        raise FlatbookInputError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}.")
    return LOSSES[name]


@dataclass
class _State:
    """Parameters and the forward quantities reused by the next step."""

    a: torch.Tensor
    theta: torch.Tensor
    pre: torch.Tensor  # X θᵀ
    features: torch.Tensor  # σ(X θᵀ)
    out: torch.Tensor  # h(w, x_i)
    loss: float


def _state(a, theta, X, y, activation, loss) -> _State:
    pre = X @ theta.T
    features = activation(pre)
    out = features @ a
    return _State(a, theta, pre, features, out, float(loss.value(out, y)))


def loss_gradients(state: _State, X, y, activation, loss) -> tuple[torch.Tensor, torch.Tensor]:
    """(∇_a L, ∇_θ L): ∂L/∂a_j = Σ_i g_i σ(⟨θ_j, x_i⟩), ∂L/∂θ_j = a_j Σ_i g_i σ'(⟨θ_j, x_i⟩) x_i, g = ∂L/∂h."""
    g = loss.derivative(state.out, y)
    grad_a = state.features.T @ g
    grad_theta = ((g[:, None] * activation.derivative(state.pre)) * state.a[None, :]).T @ X
    return grad_a, grad_theta


def _step_gradient(state, X, y, activation, loss, sam_radius, label_noise, noise):
    """The gradient one step uses: plain, at the SAM-perturbed point, or with noisy labels."""
    if label_noise > 0:
        noisy = y + label_noise * torch.randn(y.shape[0], generator=noise, dtype=y.dtype).to(y.device)
        return loss_gradients(state, X, noisy, activation, loss)
    grad_a, grad_theta = loss_gradients(state, X, y, activation, loss)
    if sam_radius > 0:
        norm = float(torch.sqrt((grad_a**2).sum() + (grad_theta**2).sum()))
        if norm > 0:
            shifted = _state(
                state.a + sam_radius * grad_a / norm,
                state.theta + sam_radius * grad_theta / norm,
                X,
                y,
                activation,
                loss,
            )
            return loss_gradients(shifted, X, y, activation, loss)
    return grad_a, grad_theta


@dataclass
class TrainingRun:
    """The trained network, its logged trajectory and why training stopped."""

    net: TwoLayerNet
    history: list[dict] = field(default_factory=list)
    steps: int = 0
    time: float = 0.0  #: flow time Σ_k η_k
    stopped: str = ""  #: "target_loss", "max_steps", "max_time", "stop_when", "round-off" or "kink"


#: an adaptive run that cannot decrease a loss this many times below its first one has reached the
#: round-off floor (the mirror maps' round trip ∇Q(∇R(w)) moves w by more than any step left to take),
#: and stops there ("round-off") instead of reporting a wrong gradient
ROUND_OFF = 1e-20
#: a sample whose pre-activation is at most this fraction of ‖θ_j‖‖x_i‖ sits on neuron j's kink
KINK = 1e-12


def _on_a_kink(theta: torch.Tensor, X: torch.Tensor, activation) -> bool:
    """True when some sample sits, to round-off, on the hyperplane θ_j·x = 0 of a degree-1 activation.

    There σ' jumps and the gradient autograd takes (σ'(0) = 0 for the ReLU) need not be a descent
    direction: an adaptive line search then shrinks the step to nothing at a point that is neither a
    minimum nor a wrong gradient.
    """
    if activation.degree != 1:
        return False
    scale = torch.linalg.vector_norm(X, dim=1)[:, None] * torch.linalg.vector_norm(theta, dim=1)[None, :]
    return bool(((X @ theta.T).abs() <= KINK * scale)[scale > 0].any())


def log_steps(max_steps: int, n_logs: int) -> set[int]:
    """Step numbers on a geometric grid from 0 to ``max_steps`` (where the trajectory is recorded)."""
    return {0, max_steps} | set(np.unique(np.geomspace(1, max(1, max_steps), n_logs).astype(int)).tolist())


def mirror_descent(
    net: TwoLayerNet,
    X,
    y,
    *,
    loss="logistic",
    outer: Potential | str = "euclidean",
    inner: Potential | str | None = None,
    step: float = 0.1,
    adaptive: bool = True,
    growth: float = 1.5,
    max_steps: int = 10_000,
    target_loss: float | None = None,
    max_time: float | None = None,
    n_logs: int = 80,
    record: Callable[[TwoLayerNet], dict] | None = None,
    stop_when: Callable[[TwoLayerNet], bool] | None = None,
    train_inner: bool = True,
    sam_radius: float = 0.0,
    label_noise: float = 0.0,
    perturbed_steps: int = 0,
    seed: int = 0,
) -> TrainingRun:
    """Train ``net`` by layer-wise mirror descent with potentials ``outer`` (on a) and ``inner`` (on θ).

    ``inner`` defaults to ``outer``; ``train_inner=False`` keeps θ fixed (a linear
    model in a).  Stops at ``target_loss``, after ``max_steps`` or at flow time
    ``max_time``, when ``stop_when(net)`` is true at a logged step, or when an adaptive step can no
    longer decrease a loss already :data:`ROUND_OFF` times below the first (``stopped == "round-off"``)
    or at a point where a sample sits on a ReLU kink and the gradient is no descent direction
    (``stopped == "kink"``; a Clarke-stationary point of the non-smooth loss, or near one).
    ``history`` has, at the steps of :func:`log_steps`, the step, flow time,
    loss, step size and whatever ``record(net)`` returns.

    Two variants change the gradient, not the geometry, for the first
    ``perturbed_steps`` steps (then plain steps take the loss to ``target_loss``,
    which neither variant reaches on its own); both need fixed steps:

    - ``sam_radius`` ρ > 0, sharpness-aware minimisation: the gradient is taken at
      w + ρ g/‖g‖, g the gradient at w (both layers together);
    - ``label_noise`` δ > 0: the gradient uses labels y + δ ξ with fresh
      ξ ~ N(0, I) each step (seeded by ``seed``).

    The logged and stopping loss is always the clean one.

    Examples
    --------
    >>> import torch
    >>> from flatbook import TwoLayerNet
    >>> from flatbook.data import single_index
    >>> from flatbook.training import mirror_descent
    >>> X, y = single_index(d=2, link="relu", seed=0).sample(4, seed=3)
    >>> theta = torch.randn(6, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> net = TwoLayerNet(torch.full((6,), 0.1, dtype=torch.float64), theta)
    >>> run = mirror_descent(net, X, y, loss="square", outer="euclidean", target_loss=1e-6)
    >>> run.stopped
    'target_loss'
    >>> run.net.empirical_loss(X, y) <= 1e-6
    True
    """
    X, y = check_data(X, y, net.input_dim)
    loss = get_loss(loss)
    if loss.name != "square":
        check_binary_labels(y, f"the {loss.name} loss")
    outer = get_potential(outer)
    inner = outer if inner is None else get_potential(inner)
    if not (math.isfinite(step) and step > 0):
        raise FlatbookInputError(f"step must be a finite number > 0, got {step!r}.")
    if adaptive and not growth >= 1:
        raise FlatbookInputError(f"growth must be >= 1 (how much the next step may grow), got {growth!r}.")
    if (sam_radius > 0 or label_noise > 0) and adaptive:
        raise FlatbookInputError(
            "SAM and label noise change the gradient, so a loss-decrease line search "
            "does not apply: pass adaptive=False with a fixed `step`."
        )
    if sam_radius < 0 or label_noise < 0 or perturbed_steps < 0:
        raise FlatbookInputError("sam_radius, label_noise and perturbed_steps must be >= 0.")
    noise = torch.Generator().manual_seed(seed) if label_noise > 0 else None
    activation = net.activation
    state = _state(net.a, net.theta, X, y, activation, loss)
    run = TrainingRun(net=net)
    logged = log_steps(max_steps, n_logs)

    def log(current: TwoLayerNet, eta: float) -> None:
        row = {"step": run.steps, "time": run.time, "loss": state.loss, "step_size": eta}
        if record is not None:
            row.update(record(current))
        run.history.append(row)

    eta = step
    log(net, eta)
    while True:
        if target_loss is not None and state.loss <= target_loss:
            run.stopped = "target_loss"
            break
        if run.steps >= max_steps:
            run.stopped = "max_steps"
            break
        if max_time is not None and run.time >= max_time:
            run.stopped = "max_time"
            break
        perturbed = run.steps < perturbed_steps
        grad_a, grad_theta = _step_gradient(
            state, X, y, activation, loss, sam_radius if perturbed else 0.0, label_noise if perturbed else 0.0, noise
        )
        dual_a = outer.mirror_map(state.a)  # ∇R(w), once per step: each trial is ∇Q(∇R(w) − η∇L) (mirror.mirror_step)
        dual_theta = inner.mirror_map(state.theta) if train_inner else None
        for _ in range(200):
            theta = inner.inverse_mirror_map(dual_theta - eta * grad_theta) if train_inner else state.theta
            trial = _state(outer.inverse_mirror_map(dual_a - eta * grad_a), theta, X, y, activation, loss)
            if not adaptive or trial.loss <= state.loss:
                break
            eta /= 2
        else:
            trial = None
        # Stuck: no step of 2^-200 times the last decreases the loss, or the step accepted is below round-off
        # (the parameters did not change although the gradient is not zero, so every later step repeats it).
        frozen = (
            trial is not None
            and adaptive
            and trial.loss == state.loss
            and torch.equal(trial.a, state.a)
            and torch.equal(trial.theta, state.theta)
            and bool(grad_a.any() or grad_theta.any())
        )
        if trial is None or frozen:
            if state.loss <= ROUND_OFF * run.history[0]["loss"]:  # at the floor of the mirror maps' round trip
                run.stopped = "round-off"
                break
            if _on_a_kink(state.theta, X, activation):
                run.stopped = "kink"
                break
        if trial is None:
            raise SolverError(
                f"mirror descent could not decrease the loss {state.loss:.3e} at step {run.steps} "
                "even with a step 2^-200 times the last one; the gradient is likely wrong."
            )
        if not math.isfinite(trial.loss):
            raise SolverError(
                f"mirror descent diverged at step {run.steps} (loss {trial.loss}) with a fixed "
                f"step {eta:.3g}; lower `step` or pass adaptive=True."
            )
        improved = trial.loss < state.loss
        state = trial
        run.steps += 1
        run.time += eta
        if run.steps in logged or (target_loss is not None and state.loss <= target_loss):
            current = TwoLayerNet(state.a, state.theta, activation)
            log(current, eta)
            if stop_when is not None and stop_when(current):
                run.stopped = "stop_when"
                break
        if adaptive and improved:  # a flat stretch (e.g. a point no ReLU sees) does not inflate the step
            eta *= growth
    run.net = TwoLayerNet(state.a, state.theta, activation)
    if run.history[-1]["step"] != run.steps:
        log(run.net, eta)
    return run
