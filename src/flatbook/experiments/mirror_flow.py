"""Chapter 6: mirror descent on a two-layer ReLU network, sparse (hyperbolic entropy) and dense (p = 3) features.

Every run starts from the same small random initialisation and trains on ±1
labels with the logistic loss by :func:`flatbook.training.mirror_descent`.
Tables:

- ``trajectories``: per potential and seed, the loss, the ℓ1, ℓ2, ℓ3 and Q
  normalised margins and the active neurons along training;
- ``solutions``: per potential and seed, the final margins, active neurons,
  test accuracy and the sorted per-neuron weights |a_j| ‖θ_j‖;
- ``cosines``: cosine between the final parameter directions of two potentials;
- ``balance``: the largest drift of the balance quantity B_j (book eq.
  ``eq-balance``) along fixed-step training up to a fixed flow time, per step size;
- ``slow``: hyperbolic entropy with scale β swept: active neurons along
  training, final direction's cosine with gradient descent's;
- ``horizon``: potentials with the horizon of |w|³/3: final ℓ3 margin and cosines;
- ``digits``: handwritten digits (even vs odd): test accuracy against the fraction
  of neurons or weights pruned by magnitude.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..backend import default_device
from ..data import digits_parity, teacher_student_classification
from ..errors import FlatbookInputError
from ..margins import normalised_margin, parameters, q_margin
from ..mirror import balance, get_potential
from ..network import TwoLayerNet
from ..tables import column, group, index, where
from ..training import mirror_descent
from .runner import map_points

__all__ = ["CHAPTER", "VERSION", "MAIN_POTENTIALS", "Config", "CONFIGS", "prune", "run"]

#: the chapter that shows this experiment's figures
CHAPTER = "book/06-mirror-flow.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 1

#: (label, potential name, parameters) of the main comparison
MAIN_POTENTIALS = (
    ("gradient descent", "euclidean", {}),
    ("hyperbolic entropy", "hyperbolic_entropy", {"beta": 0.01}),
    ("p = 3", "p_norm", {"p": 3.0}),
)
#: three potentials with the horizon (p-1)^{1/p} ‖w‖_3, two of them non-homogeneous
HORIZON_POTENTIALS = (
    ("|w|³/3", "p_norm", {"p": 3.0}),
    ("((w²+β²)^{3/2} − β³)/3", "p_norm", {"p": 3.0, "beta": 0.1}),
    ("|w|³/3 + βw²/2", "p_norm_plus_quadratic", {"p": 3.0, "beta": 0.1}),
)


@dataclass(frozen=True)
class Config:
    d: int = 10
    n: int = 100
    m: int = 50
    teacher_neurons: int = 3
    init_scale: float = 0.1
    seeds: int = 3
    target_loss: float = 1e-100
    max_steps: int = 20_000
    n_logs: int = 60
    active_mass: float = 0.99
    betas: tuple = (1e-2, 3e-2, 1e-1, 0.3, 1.0, 3.0, 10.0)
    sweep_target_loss: float = 1e-250
    sparse_factor: float = 1.5
    balance_steps: tuple = (0.4, 0.2, 0.1, 0.05)
    balance_time: float = 100.0
    digits_train: int = 1_000
    digits_width: int = 100
    digits_target_loss: float = 1e-6
    prune_fractions: tuple = (0.0, 0.25, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
    n_test: int = 5_000
    seed: int = 0


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(
        d=5,
        n=30,
        m=12,
        seeds=1,
        target_loss=1e-8,
        max_steps=600,
        n_logs=15,
        betas=(1e-2, 1.0),
        sweep_target_loss=1e-10,
        balance_steps=(0.2, 0.1),
        balance_time=5.0,
        digits_train=200,
        digits_width=20,
        digits_target_loss=1e-3,
        prune_fractions=(0.0, 0.5, 0.9),
        n_test=500,
    ),
    "book": Config(),
    "paper": Config(
        d=20,
        n=400,
        m=200,
        teacher_neurons=4,
        seeds=5,
        max_steps=100_000,
        betas=(1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 0.3, 1.0, 3.0, 10.0, 30.0),
        balance_steps=(0.4, 0.2, 0.1, 0.05, 0.025),
        digits_width=400,
        n_test=20_000,
    ),
}


def _initial_network(config: Config, d: int, width: int, seed: int) -> TwoLayerNet:
    """a_j, θ_ij i.i.d. N(0, s²) with s = init_scale (inner weights divided by √(d/10) for wide inputs)."""
    gen = torch.Generator().manual_seed(seed)
    a = config.init_scale * torch.randn(width, generator=gen, dtype=torch.float64)
    theta = config.init_scale / math.sqrt(max(1.0, d / 10)) * torch.randn(width, d, generator=gen, dtype=torch.float64)
    return TwoLayerNet(a.to(default_device()), theta.to(default_device()), "relu")


def _teacher_data(config: Config, seed: int):
    return teacher_student_classification(config.d, config.n, config.teacher_neurons, config.n_test, seed=seed)


def _accuracy(net: TwoLayerNet, X, y) -> float:
    return float((torch.sign(net(X)) == y).double().mean())


def _neuron_weights(net: TwoLayerNet) -> torch.Tensor:
    """|a_j| ‖θ_j‖, the weight neuron j carries (ReLU: c = 1)."""
    return net.effective_outer_weights().abs()


def _main_point(config: Config, label: str, name: str, params: dict, seed: int) -> dict:
    data = _teacher_data(config, config.seed + 100 * seed)
    potential = get_potential(name, **params)

    def record(net):
        return {
            "l1_margin": normalised_margin(net, data.X, data.y, 1),
            "l2_margin": normalised_margin(net, data.X, data.y, 2),
            "l3_margin": normalised_margin(net, data.X, data.y, 3),
            "q_margin": q_margin(net, data.X, data.y, potential),
            "active": net.active_neurons(config.active_mass),
        }

    run = mirror_descent(
        _initial_network(config, config.d, config.m, config.seed + 100 * seed + 1),
        data.X,
        data.y,
        outer=potential,
        target_loss=config.target_loss,
        max_steps=config.max_steps,
        n_logs=config.n_logs,
        record=record,
    )
    trajectory = [{"potential": label, "seed": seed, **row} for row in run.history]
    final = trajectory[-1]
    solution = {
        "potential": label,
        "seed": seed,
        "steps": run.steps,
        "stopped": run.stopped,
        "loss": final["loss"],
        "time": final["time"],
        **{key: final[key] for key in ("l1_margin", "l2_margin", "l3_margin", "q_margin", "active")},
        "train_accuracy": _accuracy(run.net, data.X, data.y),
        "test_accuracy": _accuracy(run.net, data.X_test, data.y_test),
        "neuron_weights": sorted(_neuron_weights(run.net).tolist(), reverse=True),
        "parameters": parameters(run.net).tolist(),
    }
    return {"trajectories": trajectory, "solutions": [solution]}


def _balance_point(config: Config, label: str, name: str, params: dict, step: float) -> dict:
    """Fixed-step mirror descent to flow time ``balance_time``; the largest drift max_j |B_j(t) − B_j(0)|."""
    data = _teacher_data(config, config.seed)
    potential = get_potential(name, **params)
    start = _initial_network(config, config.d, config.m, config.seed + 1)
    initial = balance(start, potential)
    run = mirror_descent(
        start,
        data.X,
        data.y,
        outer=potential,
        step=step,
        adaptive=False,
        max_time=config.balance_time * (1 - 1e-9),
        max_steps=10**9,
        n_logs=40,
        record=lambda net: {
            "drift": float((balance(net, potential) - initial).abs().max()),
            "dual": float(potential.dual_potential(net.a) + potential.dual_potential(net.theta)),
        },
    )
    return {
        "balance": [
            {
                "potential": label,
                "step": step,
                "steps": run.steps,
                "time": run.time,
                "loss": run.history[-1]["loss"],
                "drift": max(r["drift"] for r in run.history),
                "dual_potential": run.history[-1]["dual"],
            }
        ]
    }


def _sweep_point(config: Config, beta: float | None) -> dict:
    """Hyperbolic entropy with scale ``beta`` (None: gradient descent) to ``sweep_target_loss``."""
    data = _teacher_data(config, config.seed)
    potential = get_potential("euclidean") if beta is None else get_potential("hyperbolic_entropy", beta=beta)
    run = mirror_descent(
        _initial_network(config, config.d, config.m, config.seed + 1),
        data.X,
        data.y,
        outer=potential,
        target_loss=config.sweep_target_loss,
        max_steps=config.max_steps,
        n_logs=4 * config.n_logs,
        record=lambda net: {"active": net.active_neurons(config.active_mass)},
    )
    return {
        "slow": [
            {
                "beta": beta,
                "steps": run.steps,
                "stopped": run.stopped,
                "time": row["time"],
                "loss": row["loss"],
                "active": row["active"],
                "final": i == len(run.history) - 1,
                "parameters": parameters(run.net).tolist() if i == len(run.history) - 1 else None,
            }
            for i, row in enumerate(run.history)
        ]
    }


def _horizon_point(config: Config, label: str, name: str, params: dict) -> dict:
    data = _teacher_data(config, config.seed)
    run = mirror_descent(
        _initial_network(config, config.d, config.m, config.seed + 1),
        data.X,
        data.y,
        outer=get_potential(name, **params),
        target_loss=config.target_loss,
        max_steps=config.max_steps,
    )
    return {
        "horizon": [
            {
                "potential": label,
                "steps": run.steps,
                "stopped": run.stopped,
                "loss": run.history[-1]["loss"],
                "l3_margin": normalised_margin(run.net, data.X, data.y, 3),
                "parameters": parameters(run.net).tolist(),
            }
        ]
    }


def prune(net: TwoLayerNet, fraction: float, what: str) -> TwoLayerNet:
    """Zero the ``fraction`` smallest neurons (by |a_j| ‖θ_j‖) or weights (by |w|, per layer)."""
    if what not in ("neurons", "weights"):
        raise FlatbookInputError(f"prune what={what!r}? Choose 'neurons' or 'weights'.")
    if not 0 <= fraction <= 1:
        raise FlatbookInputError(f"fraction must lie in [0, 1], got {fraction!r}.")
    if what == "neurons":
        count = int(round(fraction * net.width))
        keep = torch.ones(net.width, dtype=net.a.dtype, device=net.device)
        keep[torch.argsort(_neuron_weights(net))[:count]] = 0
        return TwoLayerNet(net.a * keep, net.theta, net.activation)
    layers = []
    for weights in (net.a, net.theta):
        flat = weights.reshape(-1)
        count = int(round(fraction * flat.numel()))
        mask = torch.ones_like(flat)
        mask[torch.argsort(flat.abs())[:count]] = 0
        layers.append((flat * mask).reshape(weights.shape))
    return TwoLayerNet(*layers, net.activation)


def _digits_point(config: Config, label: str, name: str, params: dict) -> dict:
    data = digits_parity(config.digits_train, seed=config.seed)
    run = mirror_descent(
        _initial_network(config, data.X.shape[1], config.digits_width, config.seed + 1),
        data.X,
        data.y,
        outer=get_potential(name, **params),
        target_loss=config.digits_target_loss,
        max_steps=config.max_steps,
    )
    rows = [
        {
            "potential": label,
            "pruned": what,
            "fraction": fraction,
            "test_accuracy": _accuracy(prune(run.net, fraction, what), data.X_test, data.y_test),
            "active": run.net.active_neurons(config.active_mass),
            "steps": run.steps,
            "loss": run.history[-1]["loss"],
        }
        for what in ("neurons", "weights")
        for fraction in config.prune_fractions
    ]
    return {"digits": rows}


def _cosine(u: list, v: list) -> float:
    u, v = np.asarray(u), np.asarray(v)
    return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))


def _point(config: Config, kind: str, **point) -> dict:
    return {
        "main": _main_point,
        "balance": _balance_point,
        "sweep": _sweep_point,
        "horizon": _horizon_point,
        "digits": _digits_point,
    }[kind](config, **point)


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """All runs of chapter 6 (see the module docstring for the tables)."""
    points = (
        [
            {"kind": "main", "label": lab, "name": nam, "params": par, "seed": s}
            for s in range(config.seeds)
            for lab, nam, par in MAIN_POTENTIALS
        ]
        + [
            {"kind": "balance", "label": lab, "name": nam, "params": par, "step": step}
            for lab, nam, par in MAIN_POTENTIALS
            for step in config.balance_steps
        ]
        + [{"kind": "sweep", "beta": beta} for beta in (None, *config.betas)]
        + [{"kind": "horizon", "label": lab, "name": nam, "params": par} for lab, nam, par in HORIZON_POTENTIALS]
        + [{"kind": "digits", "label": lab, "name": nam, "params": par} for lab, nam, par in MAIN_POTENTIALS]
    )
    results = map_points(_point, config, points, experiment="mirror_flow", version=VERSION, jobs=jobs, backend=backend)
    tables = {
        key: [row for result in results for row in result.get(key, [])]
        for key in ("trajectories", "solutions", "balance", "slow", "horizon", "digits")
    }
    tables["cosines"] = _cosines(tables["solutions"], tables["horizon"])
    tables["sparsification"] = _sparsification(tables["slow"], config.sparse_factor)
    for key in ("solutions", "slow", "horizon"):
        for row in tables[key]:
            row.pop("parameters", None)
    return tables


def _cosines(solutions: list[dict], horizon: list[dict]) -> list[dict]:
    """Cosine between the final parameter directions of every pair of runs from the same initialisation."""
    rows = []
    groups = {f"seed {s}": runs for s, runs in group(solutions, "seed", sort=True).items()}
    groups["horizon"] = horizon
    for name, runs in groups.items():
        for i, first in enumerate(runs):
            for second in runs[i + 1 :]:
                rows.append(
                    {
                        "group": name,
                        "first": first["potential"],
                        "second": second["potential"],
                        "cosine": _cosine(first["parameters"], second["parameters"]),
                    }
                )
    return rows


def _sparsification(slow: list[dict], sparse_factor: float) -> list[dict]:
    """Per β: the first logged flow time with at most ``sparse_factor`` × (sparsest final count) active neurons."""
    finals = index(where(slow, final=True), "beta")
    target = math.floor(sparse_factor * min(r["active"] for b, r in finals.items() if b is not None))
    gd = finals[None]
    rows = []
    for beta, final in finals.items():
        reached = column(where(slow, lambda r: r["active"] <= target, beta=beta), "time")
        rows.append(
            {
                "beta": beta,
                "target_active": target,
                "time_to_sparse": min(reached) if reached else math.inf,
                "final_time": final["time"],
                "final_active": final["active"],
                "final_loss": final["loss"],
                "cosine_with_gd": _cosine(final["parameters"], gd["parameters"]),
            }
        )
    return rows
