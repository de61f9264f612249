"""Chapter 6: mirror descent on a two-layer ReLU network, sparse (hyperbolic entropy) and dense (p = 3) features.

Every run starts from the same small random initialisation and trains on ±1
labels with the logistic loss by :func:`flatbook.training.mirror_descent`.
Tables:

- ``trajectories``: per potential (the three main ones and the layer-wise
  ``MIXED_POTENTIALS``) and seed, the loss, the ℓ1, ℓ2, ℓ3 and Q normalised
  margins, the dual potential Q(∇R(w)) and the active neurons along training;
- ``kkt``: per main potential and seed, the KKT residual (book eq. ``eq-kkt``) of
  the direction reached when the loss first drops below each of ``kkt_losses``,
  with two active sets, and in every main potential's problem, as trained and re-balanced into that problem;
- ``rates``: per potential and seed, the exponents of Q(∇R(w)) and of t·L against
  g = log(1/L), fitted late in training (book eq. ``eq-rates``);
- ``solutions``: per potential and seed, the final margins (also in each
  potential's per-neuron geometry, book eq. ``eq-neuron-cost``), active neurons,
  test accuracy and the sorted per-neuron weights |a_j| ‖θ_j‖;
- ``cosines``: cosine between the final parameter directions of two potentials;
- ``balance``: the largest drift of the balance quantity B_j (book eq.
  ``eq-balance``) along fixed-step training up to a fixed flow time, per potential, step size and seed
  (data and start);
- ``slow``: hyperbolic entropy with scale β swept (and, at ``width_beta``, the
  width swept), per seed: active neurons and the ratio Q(∇R(w)) / ‖w‖₁ along
  training;
- ``alignment``: per (β, width, seed), the flow time at which Q(∇R(w)) / ‖w‖₁ first
  reaches ``align_level`` (book eq. ``eq-alignment``; inf when never);
- ``sparsification``: per (β, seed), the time to the sparse level and the final
  direction's cosine with gradient descent's;
- ``horizon``: potentials with the horizon of |w|³/3: final ℓ3 margin and cosines;
- ``digits``: handwritten digits (even vs odd), per potential and seed: test
  accuracy against the fraction of neurons or weights pruned by magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..backend import default_device
from ..data import digits_parity, teacher_student_classification
from ..errors import FlatbookInputError
from ..margins import (
    kkt_residual,
    neuron_cost_margin,
    normalised_margin,
    parameters,
    q_margin,
    rebalanced,
    smallest_margin,
)
from ..mirror import balance, get_potential
from ..network import TwoLayerNet
from ..tables import column, group, index, one, where
from ..training import get_loss, mirror_descent
from .runner import map_points

__all__ = [
    "CHAPTER",
    "VERSION",
    "MAIN_POTENTIALS",
    "MIXED_POTENTIALS",
    "run_potentials",
    "points",
    "Config",
    "CONFIGS",
    "prune",
    "run",
]

#: the chapter that shows this experiment's figures
CHAPTER = "book/06-mirror-flow.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 2

#: (label, potential name, parameters) of the main comparison
MAIN_POTENTIALS: tuple[tuple[str, str, dict[str, float]], ...] = (
    ("gradient descent", "euclidean", {}),
    ("hyperbolic entropy", "hyperbolic_entropy", {"beta": 0.01}),
    ("p = 3", "p_norm", {"p": 3.0}),
)
#: (label, outer potential and parameters, inner potential and parameters): a different potential on each layer,
#: the same pair both ways round (the same per-neuron exponent q, book eq. ``eq-neuron-cost``)
MIXED_POTENTIALS: tuple[tuple[str, str, dict[str, float], str, dict[str, float]], ...] = (
    ("entropy on a, Euclidean on θ", "hyperbolic_entropy", {"beta": 0.01}, "euclidean", {}),
    ("Euclidean on a, entropy on θ", "euclidean", {}, "hyperbolic_entropy", {"beta": 0.01}),
)
#: the labels of the runs whose per-neuron geometry (eq. ``eq-neuron-cost``) every final network is measured in
GEOMETRIES = (*(label for label, _, _ in MAIN_POTENTIALS), *(pair[0] for pair in MIXED_POTENTIALS))
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
    seeds: int = 5
    target_loss: float = 1e-100
    max_steps: int = 20_000
    n_logs: int = 60
    active_mass: float = 0.99
    distinct_cosine: float = 0.99
    kkt_losses: tuple = (1e-3, 1e-10, 1e-30, 1e-100)
    kkt_active_slack: float = 0.01
    kkt_zero_mass: float = 0.01
    kkt_zero_masses: tuple = (0.001, 0.01, 0.05)
    kkt_weight_ratio: float = 1e3
    rate_from: float = 20.0
    rate_split: float = 80.0
    betas: tuple = (1e-2, 3e-2, 1e-1, 0.3, 1.0, 3.0, 10.0)
    widths: tuple = (25, 50, 100, 200)
    width_beta: float = 0.3
    align_level: float = 0.5
    sweep_target_loss: float = 1e-250
    sparse_fraction: float = 0.25
    balance_steps: tuple = (0.4, 0.2, 0.1, 0.05)
    balance_time: float = 100.0
    digits_seeds: int = 8
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
        kkt_losses=(1e-3, 1e-8),
        rate_from=5.0,
        rate_split=10.0,
        betas=(1e-2, 1.0),
        widths=(6, 12),
        sweep_target_loss=1e-10,
        balance_steps=(0.2, 0.1),
        balance_time=5.0,
        digits_seeds=1,
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
        widths=(50, 100, 200, 400, 800),
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


def _main_point(config: Config, label: str, seed: int) -> dict:
    """The run labelled ``label`` (a main potential or a layer-wise pair, :func:`run_potentials`) from seed ``seed``'s
    start."""
    data = _teacher_data(config, config.seed + 100 * seed)
    potential, inner = run_potentials(label)
    inner_potential = potential if inner is None else inner
    levels = list(config.kkt_losses) if inner is None else []  # the KKT residual needs one horizon degree

    def record(net):
        row = {
            "l1_margin": normalised_margin(net, data.X, data.y, 1),
            "l2_margin": normalised_margin(net, data.X, data.y, 2),
            "l3_margin": normalised_margin(net, data.X, data.y, 3),
            "dual": float(potential.dual_potential(net.a) + inner_potential.dual_potential(net.theta)),
            "active": net.active_neurons(config.active_mass),
        }
        if inner is None:
            row["q_margin"] = q_margin(net, data.X, data.y, potential)
        loss = float(get_loss("logistic").value(net(data.X), data.y))  # what mirror_descent logs
        if levels and loss <= levels[0] and smallest_margin(net, data.X, data.y) > 0:
            level = levels.pop(0)
            while levels and loss <= levels[0]:  # one logged step can cross several levels
                level = levels.pop(0)
            row["kkt"] = {"level": level, **_kkt(config, net, data, potential)}
        return row

    run = mirror_descent(
        _initial_network(config, config.d, config.m, config.seed + 100 * seed + 1),
        data.X,
        data.y,
        outer=potential,
        inner=inner_potential,
        target_loss=config.target_loss,
        max_steps=config.max_steps,
        n_logs=config.n_logs,
        record=record,
    )
    trajectory = [
        {"potential": label, "seed": seed, **{k: v for k, v in row.items() if k != "kkt"}} for row in run.history
    ]
    kkt = [
        {"potential": label, "seed": seed, "loss": row["loss"], "step": row["step"], **row["kkt"]}
        for row in run.history
        if "kkt" in row
    ]
    final = trajectory[-1]
    solution = {
        "potential": label,
        "seed": seed,
        "steps": run.steps,
        "stopped": run.stopped,
        "loss": final["loss"],
        "time": final["time"],
        **{key: final.get(key) for key in ("l1_margin", "l2_margin", "l3_margin", "q_margin", "active")},
        **{
            f"cost_margin {other}": neuron_cost_margin(run.net, data.X, data.y, *run_potentials(other))
            for other in GEOMETRIES
        },
        "distinct_directions": run.net.distinct_directions(config.active_mass, config.distinct_cosine),
        "train_accuracy": _accuracy(run.net, data.X, data.y),
        "test_accuracy": _accuracy(run.net, data.X_test, data.y_test),
        "neuron_weights": sorted(_neuron_weights(run.net).tolist(), reverse=True),
        "parameters": parameters(run.net).tolist(),
    }
    return {"trajectories": trajectory, "kkt": kkt, "rates": _rates(config, trajectory), "solutions": [solution]}


def _kkt(config: Config, net: TwoLayerNet, data, potential) -> dict:
    """The KKT residual (eq. ``eq-kkt``) of the direction of ``net``, two ways (in the ℓ₁ problem the neurons that
    carry ``kkt_zero_mass`` of Σ|ã_j|, and in the others the entries carrying that share of ‖θ_j‖₁, counted as zero):

    - ``relative``: active samples within ``kkt_active_slack`` of the smallest margin, relative (complementary
      slackness to that fraction);
    - ``window``: active samples whose loss weight e^{−y_i h_i} is at least 1 / ``kkt_weight_ratio`` of the largest,
      a fixed set of samples, whose slack log(ratio) / g shrinks as g = min_i y_i h_i grows; the same window in
      every main potential's problem (``window <label>``): the contrast, the other potentials' KKT conditions;
      and ``balanced <label>``, the same after the network is re-balanced into that problem's balance
      (:func:`~flatbook.margins.rebalanced`: the same function, the point of its rescaling orbit a KKT point of
      that problem would have to be at; the ℓ₁ problem's zero coordinates are the same on the whole orbit).

    In the ℓ₁ problem also ``nonzero <label>``, the coordinates not counted as zero (each must meet its sign
    exactly, so a sparser direction has fewer equations to meet), and the residual at each of
    ``kkt_zero_masses``; ``strict`` (ℓ₁ runs) counts only exact zeros (``zero_tol``), in the loss-weight window.
    """
    g = smallest_margin(net, data.X, data.y)
    window = math.log(config.kkt_weight_ratio) / g

    def residual(problem, active_tol, of=net, zero_mass=config.kkt_zero_mass):
        zero_mass = zero_mass if problem.horizon_degree == 1 else 0.0
        return kkt_residual(of, data.X, data.y, problem, active_tol=active_tol, zero_mass=zero_mass)

    relative, own = residual(potential, config.kkt_active_slack), residual(potential, window)
    row = {
        "g": g,
        "relative": relative.relative,
        "relative_active": len(relative.active),
        "window_active": len(own.active),
        "window_slack": window,
    }
    for label, _, _ in MAIN_POTENTIALS:
        problem, _ = run_potentials(label)
        in_problem = own if problem == potential else residual(problem, window)
        row[f"window {label}"] = in_problem.relative
        row[f"balanced {label}"] = residual(problem, window, rebalanced(net, problem)).relative
        if problem.horizon_degree == 1:  # the ℓ1 problem: how many coordinates must meet ±1, and other zero masses
            row[f"nonzero {label}"] = int((~in_problem.zero).sum())
            for mass in config.kkt_zero_masses:
                row[f"window {label} zero mass {mass:g}"] = residual(problem, window, zero_mass=mass).relative
    if potential.horizon_degree == 1:
        row["strict"] = kkt_residual(net, data.X, data.y, potential, active_tol=window).relative
    return row


def run_potentials(label: str) -> tuple:
    """(outer, inner) potentials of a run's label."""
    for main_label, name, params in MAIN_POTENTIALS:
        if main_label == label:
            return get_potential(name, **params), None
    for mixed_label, outer, outer_params, inner, inner_params in MIXED_POTENTIALS:
        if label == mixed_label:
            return get_potential(outer, **outer_params), get_potential(inner, **inner_params)
    raise FlatbookInputError(f"no potential is labelled {label!r}.")


def _rates(config: Config, trajectory: list[dict]) -> list[dict]:
    """Exponents of Q(∇R(w)) and t·L against g = log(1/L) (eq. ``eq-rates``), over g ≥ ``rate_from`` and on the
    two windows either side of ``rate_split`` (local exponents, to see whether the fit bends)."""
    late = [r for r in trajectory if -math.log(r["loss"]) >= config.rate_from]
    if len(late) < 4:
        return []
    row = {"potential": trajectory[0]["potential"], "seed": trajectory[0]["seed"]}
    windows = {
        "": late,
        " early": [r for r in late if -math.log(r["loss"]) < config.rate_split],
        " late": [r for r in late if -math.log(r["loss"]) >= config.rate_split],
    }
    for suffix, rows in windows.items():
        g = np.array([-math.log(r["loss"]) for r in rows])
        enough = len(rows) >= 2 and np.ptp(g) > 0
        row["dual_exponent" + suffix] = (
            float(np.polyfit(np.log(g), np.log(column(rows, "dual")), 1)[0]) if enough else math.nan
        )
        row["loss_exponent" + suffix] = (
            float(np.polyfit(np.log(g), np.log(column(rows, "time")) - g, 1)[0]) if enough else math.nan
        )
    return [row]


def _balance_point(config: Config, label: str, name: str, params: dict, step: float, seed: int = 0) -> dict:
    """Fixed-step mirror descent to flow time ``balance_time`` from seed ``seed``'s data and start; the largest
    drift max_j |B_j(t) − B_j(0)|."""
    data = _teacher_data(config, config.seed + 100 * seed)
    potential = get_potential(name, **params)
    start = _initial_network(config, config.d, config.m, config.seed + 100 * seed + 1)
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
                "seed": seed,
                "step": step,
                "steps": run.steps,
                "time": run.time,
                "loss": run.history[-1]["loss"],
                "drift": max(r["drift"] for r in run.history),
                "dual_potential": run.history[-1]["dual"],
            }
        ]
    }


def _sweep_point(config: Config, beta: float | None, width: int, seed: int) -> dict:
    """Hyperbolic entropy with scale ``beta`` (None: gradient descent) and ``width`` neurons to ``sweep_target_loss``,
    recording the active neurons and Q(∇R(w)) / ‖w‖₁ (eq. ``eq-alignment``; 1 in the ℓ₁ horizon's regime)."""
    data = _teacher_data(config, config.seed + 100 * seed)
    potential = get_potential("euclidean") if beta is None else get_potential("hyperbolic_entropy", beta=beta)

    def record(net):
        w = parameters(net)
        ratio = float(potential.dual_potential(w) / w.abs().sum())
        return {"active": net.active_neurons(config.active_mass), "ratio": ratio}

    run = mirror_descent(
        _initial_network(config, config.d, width, config.seed + 100 * seed + 1),
        data.X,
        data.y,
        outer=potential,
        target_loss=config.sweep_target_loss,
        max_steps=config.max_steps,
        n_logs=4 * config.n_logs,
        record=record,
    )
    return {
        "slow": [
            {
                "beta": beta,
                "width": width,
                "seed": seed,
                "steps": run.steps,
                "stopped": run.stopped,
                "time": row["time"],
                "loss": row["loss"],
                "active": row["active"],
                "ratio": row["ratio"],
                "final": i == len(run.history) - 1,
                "parameters": parameters(run.net).tolist() if i == len(run.history) - 1 else None,
            }
            for i, row in enumerate(run.history)
        ]
    }


def _horizon_point(config: Config, label: str, name: str, params: dict, seed: int) -> dict:
    data = _teacher_data(config, config.seed + 100 * seed)
    run = mirror_descent(
        _initial_network(config, config.d, config.m, config.seed + 100 * seed + 1),
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
                "seed": seed,
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

    def smallest_zeroed(weights: torch.Tensor) -> torch.Tensor:
        flat = weights.reshape(-1)
        count = int(round(fraction * flat.numel()))
        mask = torch.ones_like(flat)
        mask[torch.argsort(flat.abs())[:count]] = 0
        return (flat * mask).reshape(weights.shape)

    return TwoLayerNet(smallest_zeroed(net.a), smallest_zeroed(net.theta), net.activation)


def _digits_point(config: Config, label: str, name: str, params: dict, seed: int) -> dict:
    data = digits_parity(config.digits_train, seed=config.seed + 100 * seed)
    run = mirror_descent(
        _initial_network(config, data.X.shape[1], config.digits_width, config.seed + 100 * seed + 1),
        data.X,
        data.y,
        outer=get_potential(name, **params),
        target_loss=config.digits_target_loss,
        max_steps=config.max_steps,
    )
    rows = [
        {
            "potential": label,
            "seed": seed,
            "pruned": what,
            "fraction": fraction,
            "test_accuracy": _accuracy(prune(run.net, fraction, what), data.X_test, data.y_test),
            "active": run.net.active_neurons(config.active_mass),
            "distinct_directions": run.net.distinct_directions(config.active_mass, config.distinct_cosine),
            "steps": run.steps,
            "loss": run.history[-1]["loss"],
        }
        for what in ("neurons", "weights")
        for fraction in config.prune_fractions
    ]
    return {"digits": rows}


def _cosine(u: list, v: list) -> float:
    a, b = np.asarray(u), np.asarray(v)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _point(config: Config, kind: str, **point) -> dict:
    compute: dict[str, Callable[..., dict]] = {
        "main": _main_point,
        "balance": _balance_point,
        "sweep": _sweep_point,
        "horizon": _horizon_point,
        "digits": _digits_point,
    }
    return compute[kind](config, **point)


def points(config: Config) -> list[dict]:
    """Every run of chapter 6, as keyword points (each with its ``kind``)."""
    seeds = range(config.seeds)
    sweeps = {(beta, config.m, s) for beta in (None, *config.betas) for s in seeds}
    sweeps |= {(config.width_beta, width, s) for width in config.widths for s in seeds}
    main_potentials = [(name, params) for _, name, params in MAIN_POTENTIALS]
    return (
        [{"kind": "main", "label": label, "seed": s} for s in seeds for label in GEOMETRIES]
        + [
            {"kind": "balance", "label": lab, "name": nam, "params": par, "step": step, "seed": s}
            for lab, nam, par in MAIN_POTENTIALS
            for step in config.balance_steps
            for s in seeds
        ]
        + [
            {"kind": "sweep", "beta": beta, "width": width, "seed": s}
            for beta, width, s in sorted(sweeps, key=lambda p: (p[0] is not None, p[0] or 0.0, p[1], p[2]))
        ]
        + [
            {"kind": "horizon", "label": lab, "name": nam, "params": par, "seed": s}
            for s in seeds
            for lab, nam, par in HORIZON_POTENTIALS
            if (nam, par) not in main_potentials  # that run is the main comparison's
        ]
        + [
            {"kind": "digits", "label": lab, "name": nam, "params": par, "seed": s}
            for s in range(config.digits_seeds)
            for lab, nam, par in MAIN_POTENTIALS
        ]
    )


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """All runs of chapter 6 (see the module docstring for the tables)."""
    results = map_points(
        _point, config, points(config), experiment="mirror_flow", version=VERSION, jobs=jobs, backend=backend
    )
    tables = {
        key: [row for result in results for row in result.get(key, [])]
        for key in ("trajectories", "kkt", "rates", "solutions", "balance", "slow", "horizon", "digits")
    }
    tables["horizon"] = _with_main_runs(tables["horizon"], tables["solutions"])
    tables["cosines"] = _cosines(tables["solutions"], tables["horizon"])
    beta_sweep = where(tables["slow"], lambda r: r["beta"] in (None, *config.betas), width=config.m)
    tables["sparsification"] = _sparsification(beta_sweep, config.sparse_fraction)
    tables["alignment"] = _alignment(tables["slow"], config.align_level)
    for key in ("solutions", "slow", "horizon"):
        for row in tables[key]:
            row.pop("parameters", None)
    return tables


def _with_main_runs(horizon: list[dict], solutions: list[dict]) -> list[dict]:
    """The horizon table with the homogeneous potential's runs, which are the main comparison's, in the order of
    ``HORIZON_POTENTIALS`` per seed."""
    rows = []
    for seed in sorted({r["seed"] for r in solutions}):
        for label, name, params in HORIZON_POTENTIALS:
            main = [lab for lab, n, p in MAIN_POTENTIALS if (n, p) == (name, params)]
            if main:
                run = one(solutions, potential=main[0], seed=seed)
                keys = ("seed", "steps", "stopped", "loss", "l3_margin", "parameters")
                rows.append({"potential": label, **{key: run[key] for key in keys}})
            else:
                rows.append(one(horizon, potential=label, seed=seed))
    return rows


def _cosines(solutions: list[dict], horizon: list[dict]) -> list[dict]:
    """Cosine between the final parameter directions of every pair of runs from the same initialisation."""
    rows = []
    groups = {f"seed {s}": runs for s, runs in group(solutions, "seed", sort=True).items()}
    groups |= {f"horizon {s}": runs for s, runs in group(horizon, "seed", sort=True).items()}
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


def _sparsification(slow: list[dict], sparse_fraction: float) -> list[dict]:
    """Per seed and β: the first logged flow time with at most ``sparse_fraction`` × (gradient descent's final
    count from the same start: the dense reference, outside the sweep of β) active neurons, and the final
    direction's cosine with gradient descent's."""
    rows = []
    for seed, runs in group(slow, "seed", sort=True).items():
        finals = index(where(runs, final=True), "beta")
        gd = finals[None]
        target = math.floor(sparse_fraction * gd["active"])
        for beta, final in finals.items():
            reached = [r["time"] for r in where(runs, beta=beta) if r["active"] <= target]
            rows.append(
                {
                    "beta": beta,
                    "seed": seed,
                    "target_active": target,
                    "time_to_sparse": min(reached) if reached else math.inf,
                    "final_time": final["time"],
                    "final_active": final["active"],
                    "final_loss": final["loss"],
                    "stopped": final["stopped"],
                    "cosine_with_gd": _cosine(final["parameters"], gd["parameters"]),
                }
            )
    return rows


def _alignment(slow: list[dict], level: float) -> list[dict]:
    """Per hyperbolic-entropy run (β, width, seed): the first logged flow time with Q(∇R(w)) / ‖w‖₁ ≥ ``level``
    (eq. ``eq-alignment``); ``aligned_at_start`` when the initialisation already is, inf when the run never is."""
    rows = []
    runs = group(where(slow, lambda r: r["beta"] is not None), "beta", "width", "seed")
    for (beta, width, seed), run in runs.items():
        reached = [r["time"] for r in run if r["ratio"] >= level]
        final = one(run, final=True)
        rows.append(
            {
                "beta": beta,
                "width": width,
                "seed": seed,
                "aligned_at_start": run[0]["ratio"] >= level,
                "time": min(reached) if reached else math.inf,
                "final_time": final["time"],
                "final_ratio": final["ratio"],
                "stopped": final["stopped"],
            }
        )
    return rows
