"""Chapter 7: do trained networks reach the flattest interpolators?

Chapter 4's setting (a sum of ReLU ridge functions, low noise, m = 2n): each
optimiser trains the two-layer ReLU network to the interpolation tolerance
``target_loss`` from a seeded initialisation, recording along the way the
loss, the exact Hessian trace, the orbit-minimal flatness Υ of the function
reached so far (the Gauss-Newton part; book eq. ``eq-upsilon-gn``) and the
weighted alignment.  The reference for "flattest" is the flattest interpolator of the same data
and width over all directions (:func:`flatbook.global_flattest.flattest_interpolator`, never
given the trained networks or Θ*): a network of Υ ``flattest_upsilon`` and a proven lower bound
``flattest_lower`` on Υ of every width-m interpolator; also the flattest misaligned interpolator
(ρ(u) = 0, chapter 3's bad set), with its own bounds.

Tables: ``trajectories``; ``finals`` (one row per method and seed, with ``ratio`` = Υ / Υ of the
flattest interpolator found and the proven ends ``low_ratio`` and ``proven_ratio`` of Υ/Υ*(m; ŷ), ŷ the labels
the network fits: :func:`_against_flattest`); ``references`` (the two flattest
interpolators); ``init_scale`` and ``step_size`` (gradient descent from initialisations of growing scale, and
with fixed steps, on every seed); ``fixed_step`` (gradient
descent with SAM's and label noise's fixed step ``fixed_step`` on every seed: the control for their step rule);
``budget`` (SAM and label noise on every seed with the perturbation acting for each of
:func:`perturbation_budgets` steps, the field ``perturbation_budget``); ``solver`` and ``solver_summary`` (mirror
descent on the
outer weights converging to the convex optimum, chapter 7's last section).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Required, TypedDict

import torch

from .. import flattest_outer_weights, hessian_trace, min_flatness
from ..backend import default_device
from ..data import population_loss, sum_of_single_index
from ..errors import FlatbookInputError, InfeasibleInterpolationError
from ..flatness import orbit_flatness
from ..flattest_mirror import flattest_by_mirror_descent
from ..global_flattest import flattest_interpolator, residual_measure_bound
from ..interpolators import random_directions
from ..mirror import get_potential
from ..network import TwoLayerNet
from ..search import flattest_interpolator_report
from ..stats import loglog_slope, mean_interval
from ..tables import group, index, local_slopes, slope_across_seeds, where
from ..training import mirror_descent
from .runner import map_points

__all__ = [
    "CHAPTER",
    "VERSION",
    "Config",
    "CONFIGS",
    "BUDGET_FACTORS",
    "initial_network",
    "perturbation_budgets",
    "budget_summary",
    "upsilon_of_function",
    "run",
]

#: the chapter that shows this experiment's figures
CHAPTER = "book/07-training.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 2


class MethodOptions(TypedDict, total=False):
    """How a method trains: the outer potential (a name, or a name and its parameters) and the variants."""

    outer: Required[str | tuple[str, dict[str, float]]]
    sam: bool
    label_noise: bool


class _StepOptions(TypedDict, total=False):
    """The keyword arguments of :func:`flatbook.training.mirror_descent` that fix the steps."""

    adaptive: bool
    step: float
    perturbed_steps: int
    sam_radius: float
    label_noise: float
    seed: int


#: label → (initialisation, training keyword arguments); "small"/"large" name the config's init scales
METHODS: dict[str, tuple[str, MethodOptions]] = {
    "GD, small init": ("small", {"outer": "euclidean"}),
    "GD, large init": ("large", {"outer": "euclidean"}),
    "SAM": ("small", {"outer": "euclidean", "sam": True}),
    "label-noise GD": ("small", {"outer": "euclidean", "label_noise": True}),
    "mirror, hyperbolic entropy": ("small", {"outer": ("hyperbolic_entropy", {"beta": 0.1})}),
    "mirror, p = 3": ("small", {"outer": ("p_norm", {"p": 3.0, "beta": 0.1})}),
}

#: the methods that perturb their first ``perturbed_steps`` steps
PERTURBED_METHODS = [
    label for label, (_, options) in METHODS.items() if options.get("sam") or options.get("label_noise")
]

#: the perturbation budgets of the budget sweep, as multiples of the config's ``perturbed_steps`` (1 among them:
#: the methods' own runs are the sweep's point at the config's budget)
BUDGET_FACTORS = (0.1, 0.3, 1.0, 3.0)


@dataclass(frozen=True)
class Config:
    d: int = 10
    k: int = 2
    n: int = 50
    width_factor: int = 2
    noise_std: float = 0.1
    seeds: int = 5
    init_small: float = 0.1
    init_large: float = 3.0
    init_scales: tuple = (0.1, 0.3, 1.0, 3.0)
    step_sizes: tuple = (0.05, 0.2, 0.5)
    fixed_step: float = 0.05
    sam_radius: float = 0.05
    label_noise: float = 0.3
    perturbed_steps: int = 3_000
    target_loss: float = 1e-8
    max_steps: int = 30_000
    n_logs: int = 25
    flattest_tol: float = 1e-2
    flattest_rounds: int = 40
    solver_n: int = 30
    solver_m: int = 90
    solver_steps: int = 20_000
    solver_betas: tuple = (1e-2, 1e-4, 1e-8)
    seed: int = 0


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(
        d=5,
        n=12,
        seeds=1,
        init_scales=(0.1, 3.0),
        step_sizes=(0.2,),
        perturbed_steps=300,
        max_steps=3_000,
        n_logs=8,
        flattest_rounds=8,
        solver_n=8,
        solver_m=20,
        solver_steps=2_000,
        solver_betas=(1e-2, 1e-6),
    ),
    "book": Config(),
    "paper": Config(
        d=20,
        n=200,
        seeds=5,
        init_scales=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
        perturbed_steps=20_000,
        max_steps=200_000,
        solver_n=100,
        solver_m=300,
        solver_steps=200_000,
    ),
}


def _data(config: Config, seed: int):
    teacher = sum_of_single_index(config.d, config.k, link="relu", noise_std=config.noise_std, seed=seed)
    X, y = teacher.sample(config.n, seed=seed + 1000)
    return teacher, X, y


def initial_network(config: Config, scale: float, seed: int) -> TwoLayerNet:
    """a_j ~ N(0, s²/m), θ_j ~ N(0, s² I/d): the standard scaling times s."""
    m = config.width_factor * config.n
    gen = torch.Generator().manual_seed(seed)
    a = scale * torch.randn(m, generator=gen, dtype=torch.float64) / math.sqrt(m)
    theta = scale * torch.randn(m, config.d, generator=gen, dtype=torch.float64) / math.sqrt(config.d)
    return TwoLayerNet(a.to(default_device()), theta.to(default_device()), "relu")


def upsilon_of_function(net: TwoLayerNet, X, outputs=None) -> float:
    """Υ of the function the network computes now: the orbit minimum of (2/n) Σ_i ‖∇_w h(w, x_i)‖²
    (eq. ``eq-upsilon-gn``); ``outputs`` = net(X) where the caller has it already."""
    return min_flatness(net, X, net(X) if outputs is None else outputs)


def _method_scale(config: Config, label: str) -> float:
    """The initialisation scale a method of :data:`METHODS` starts from ("small" or "large" in the config)."""
    return {"small": config.init_small, "large": config.init_large}[METHODS[label][0]]


def _train(
    config: Config, label: str, scale: float, seed: int, step: float | None = None, perturbed_steps: int | None = None
) -> dict:
    """Train one network (``step``: gradient descent with that fixed step instead of the method's steps;
    ``perturbed_steps``: SAM's or label noise's perturbation for that many steps instead of the config's)."""
    teacher, X, y = _data(config, seed)
    _, options = METHODS.get(label, ("small", {"outer": "euclidean"}))
    outer = options["outer"]
    potential = get_potential(outer[0], **outer[1]) if isinstance(outer, tuple) else get_potential(outer)
    kwargs: _StepOptions = {} if step is None else {"adaptive": False, "step": step}
    if options.get("sam") or options.get("label_noise"):
        kwargs = {
            "adaptive": False,
            "step": config.fixed_step,
            "perturbed_steps": config.perturbed_steps if perturbed_steps is None else perturbed_steps,
            "sam_radius": config.sam_radius if options.get("sam") else 0.0,
            "label_noise": config.label_noise if options.get("label_noise") else 0.0,
            "seed": seed + 7,
        }

    def record(net):
        return {
            "upsilon": upsilon_of_function(net, X),
            "trace": hessian_trace(net, X, y),
            "alignment": net.weighted_alignment(teacher.theta_star),
        }

    run = mirror_descent(
        initial_network(config, scale, seed + 1),
        X,
        y,
        loss="square",
        outer=potential,
        target_loss=config.target_loss,
        max_steps=config.max_steps,
        n_logs=config.n_logs,
        record=record,
        **kwargs,
    )
    net = run.net
    try:  # the flattest outer weights for the trained network's own directions
        own = flattest_outer_weights(net.directions(), X, y, "relu")
        own_row: dict[str, float | None] = {
            "own_upsilon": own.flatness,
            "own_lower": own.lower_bound,  # weak duality: no outer weights on these directions are flatter
            "own_alignment": own.net.weighted_alignment(teacher.theta_star),
            "own_support": own.support_size,
        }
    except InfeasibleInterpolationError:  # its directions span fewer than n features (not reached here at book scale)
        own_row = {"own_upsilon": None, "own_lower": None, "own_alignment": None, "own_support": None}
    loss = population_loss(net, teacher)  # exact: ReLU network, ReLU ridges
    fitted = net(X).detach()
    final = {
        "method": label,
        "seed": seed,
        "init_scale": scale,
        "fixed_step": kwargs.get("step"),  # None: backtracking steps
        "steps": run.steps,
        "stopped": run.stopped,
        "loss": run.history[-1]["loss"],
        "trace": hessian_trace(net, X, y),
        "upsilon": upsilon_of_function(net, X, fitted),
        # V*(net(X) − y) ≤ this: the flattest interpolator of the network's own labels is at most Υ*(m; y) + this
        "residual_allowance": residual_measure_bound(X, fitted - y, "relu"),
        "alignment": net.weighted_alignment(teacher.theta_star),
        "population_loss": loss.value,
        "excess_loss": loss.excess,
        "bayes_risk": teacher.bayes_risk,
        "active": net.active_neurons(),
        **own_row,
    }
    trajectory = [{"method": label, "seed": seed, "init_scale": scale, **row} for row in run.history]
    return {"finals": [final], "trajectories": trajectory}


def _references(config: Config, seed: int) -> dict:
    """The flattest interpolator of the same data and width, over all directions and over the misaligned
    ones (ρ(u) = 0), each with its proven lower bound and exact population loss."""
    teacher, X, y = _data(config, seed)
    restrictions = {
        "flattest": {},
        "flattest misaligned": {"teacher": teacher.theta_star, "max_alignment": 0.0},
    }
    rows = []
    for name, restriction in restrictions.items():
        result = flattest_interpolator(
            X,
            y,
            "relu",
            width=config.width_factor * config.n,
            tol=config.flattest_tol,
            rounds=config.flattest_rounds,
            seed=seed + 3,
            **restriction,
        )
        # the report's residual_allowance: Υ*(m) ≤ Υ(net) + V*(r) for the fit's residual r (prop-ch4-repair)
        rows.append({"method": name, "seed": seed, **flattest_interpolator_report(result, X, y, teacher)})
    return {"references": rows}


def _solver(config: Config, activation: str, beta: float) -> dict:
    """Mirror descent on the outer weights from zero: distance to the convex optimum along the run."""
    teacher = sum_of_single_index(config.d, config.k, link=activation, seed=config.seed)
    X, y = teacher.sample(config.solver_n, seed=config.seed + 1)
    directions = random_directions(config.solver_m, config.d, seed=config.seed + 2)
    optimum = flattest_outer_weights(directions, X, y, activation, solver="CLARABEL")
    target = optimum.effective_a
    scale = float(target.norm())

    def record(net):
        return {
            "distance": float((net.a - target).norm()) / scale,
            "flatness_ratio": float(orbit_flatness(net.a, optimum.kappa, optimum.p)) / optimum.flatness,
        }

    solution = flattest_by_mirror_descent(
        directions,
        X,
        y,
        activation,
        beta=beta,
        max_steps=config.solver_steps,
        target_loss=1e-26,
        n_logs=config.n_logs,
        record=record,
    )
    rows = [
        {
            "activation": activation,
            "beta": beta if activation == "relu" else None,
            "step": r["step"],
            "loss": r["loss"],
            "distance": r["distance"],
            "flatness_ratio": r["flatness_ratio"],
        }
        for r in solution.run.history
    ]
    # p = 1: the iterate plus the flattest fixed-direction fit of its residual interpolates exactly, and Υ is
    # subadditive there, so Υ(ã) + Υ_dict(y − Φã) bounds an exact interpolator's Υ (≥ the optimum) from above
    repaired = math.nan
    if optimum.p == 1.0:
        residual = y - solution.net(X).detach()
        repaired = solution.flatness + (
            flattest_outer_weights(directions, X, residual, activation, solver="CLARABEL").flatness
            if solution.residual > 0
            else 0.0
        )
    summary = {
        "activation": activation,
        "beta": beta if activation == "relu" else None,
        "flatness": solution.flatness,
        "repaired_flatness": repaired,
        "optimum": optimum.flatness,
        "lower_bound": solution.lower_bound,
        "residual": solution.residual,
        "distance": rows[-1]["distance"],
        "steps": solution.run.steps,
        "max_abs_y": float(y.abs().max()),
    }
    return {"solver": rows, "solver_summary": [summary]}


def _point(config: Config, kind: str, **point) -> dict:
    compute: dict[str, Callable[..., dict]] = {"train": _train, "references": _references, "solver": _solver}
    return compute[kind](config, **point)


def _against_flattest(row: dict, flattest: dict, own_labels: bool) -> dict:
    """``row`` with its seed's flattest interpolator found (Υ ``flattest_upsilon``, proven bound ``flattest_lower``,
    residual allowance ``flattest_allowance``) and the ratios of eq. ``eq-training-bracket`` (a new dict: the
    point's result stays as computed): ``ratio`` = Υ/Υ(flattest found), ``low_ratio`` = Υ/(Υ(flattest found) +
    allowances) and ``proven_ratio`` = Υ/(bound − allowance).

    With ``own_labels`` the row's network is compared with the flattest interpolator of the labels ŷ = h(w, X) it
    fits exactly: |Υ*(m; ŷ) − Υ*(m; y)| ≤ V*(ŷ − y) (prop-ch4-repair, p = 1), which the row's own
    ``residual_allowance`` bounds, so it widens both ends (the flattest reference itself is measured on y)."""
    own = row["residual_allowance"] if own_labels else 0.0
    upper = flattest["upsilon"] + flattest["residual_allowance"] + own
    lower = flattest["lower"] - own
    return {
        **row,
        "flattest_upsilon": flattest["upsilon"],
        "flattest_lower": flattest["lower"],
        "flattest_allowance": flattest["residual_allowance"],
        "ratio": row["upsilon"] / flattest["upsilon"],
        "low_ratio": row["upsilon"] / upper,
        "proven_ratio": row["upsilon"] / lower if lower > 0 else math.inf,
    }


def _step_label(step: float) -> str:
    """The method name of gradient descent with the fixed step ``step``."""
    return f"GD, step {step:g}"


def _training_points(config: Config, seeds: list[int]) -> list[dict]:
    """Every training run, on every seed: each method, the initialisation and step sweeps, and the step-rule
    control, gradient descent with the perturbed methods' fixed step (the step sweep's run, where it has that
    step)."""
    points = [{"label": label, "scale": _method_scale(config, label), "seed": s} for s in seeds for label in METHODS]
    points += [{"label": f"GD, init {x:g}", "scale": x, "seed": s} for s in seeds for x in config.init_scales]
    steps = {(eta, s) for eta in (*config.step_sizes, config.fixed_step) for s in seeds}
    points += [
        {"label": _step_label(eta), "scale": config.init_small, "seed": s, "step": eta}
        for eta, s in sorted(steps, key=lambda pair: (pair[1], pair[0]))
    ]
    return [{"kind": "train", **point} for point in points]


def perturbation_budgets(config: Config) -> list[int]:
    """The budget sweep's numbers of perturbed steps (:data:`BUDGET_FACTORS` times ``perturbed_steps``), each
    at least 1 and below ``max_steps`` so that plain steps follow; a clear error otherwise."""
    budgets = [round(factor * config.perturbed_steps) for factor in BUDGET_FACTORS]
    if max(budgets) >= config.max_steps or min(budgets) < 1:
        raise FlatbookInputError(
            f"the perturbation budgets {budgets} ({BUDGET_FACTORS} times perturbed_steps = {config.perturbed_steps}) "
            f"must be at least 1 and below max_steps = {config.max_steps}: change perturbed_steps or raise max_steps."
        )
    return budgets


def budget_summary(rows: list[dict], budgets: list[int], level: float = 0.95) -> dict:
    """What the budget sweep says for one method (``rows``: its ``budget`` rows, every seed at every budget); every
    interval is a Student-t interval over the seeds at ``level`` (below 0.95 where several methods are read together).

    - ``slope``: the log-log slope of the final Υ against the budget fitted per seed, (mean, low, high), and
      ``trend`` its sign where the interval has one ("falls", "rises", else "unresolved");
    - ``local``: the same slopes between consecutive budgets (:func:`flatbook.tables.local_slopes`);
    - ``change``: Υ(largest budget)/Υ(smallest) − 1 paired by seed, (mean, low, high);
    - ``steepens``: the fall steepens, paired by seed: the slope falls and the last local slope minus the first
      has its whole interval below 0;
    - ``last``: the rows at the largest budget.
    """
    by_seed = {seed: index(members, "perturbation_budget") for seed, members in group(rows, "seed").items()}
    incomplete = [seed for seed, runs in by_seed.items() if sorted(runs) != sorted(budgets)]
    if incomplete or len(by_seed) < 2:
        raise FlatbookInputError(
            f"the budget summary needs at least two seeds, each at every budget {budgets}; seeds {incomplete} are not."
        )
    slope = slope_across_seeds(rows, "perturbation_budget", "upsilon", level)
    trend = "falls" if slope[2] < 0 else "rises" if slope[1] > 0 else "unresolved"

    def local_slope(runs, first, second):
        return loglog_slope([first, second], [runs[first]["upsilon"], runs[second]["upsilon"]])

    steeper = mean_interval(
        [local_slope(r, *budgets[-2:]) - local_slope(r, *budgets[:2]) for r in by_seed.values()], level
    )
    return {
        "slope": slope,
        "trend": trend,
        "local": local_slopes(rows, "perturbation_budget", "upsilon", level),
        "change": mean_interval(
            [r[budgets[-1]]["upsilon"] / r[budgets[0]]["upsilon"] - 1 for r in by_seed.values()], level
        ),
        "steepens": trend == "falls" and steeper[2] < 0,
        "last": [r[budgets[-1]] for r in by_seed.values()],
    }


def _budget_points(config: Config, seeds: list[int]) -> list[dict]:
    """SAM and label noise on every seed with each perturbation budget but the config's (the methods' own runs)."""
    return [
        {"kind": "train", "label": label, "scale": _method_scale(config, label), "seed": s, "perturbed_steps": budget}
        for s in seeds
        for label in PERTURBED_METHODS
        for budget in perturbation_budgets(config)
        if budget != config.perturbed_steps
    ]


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """Every method and seed, the two flattest interpolators, the initialisation, step and perturbation-budget
    sweeps, the step-rule control and the mirror solver."""
    seeds = [config.seed + 100 * s for s in range(config.seeds)]
    budget_points = _budget_points(config, seeds)
    points = (
        _training_points(config, seeds)
        + [{"kind": "references", "seed": s} for s in seeds]
        + [{"kind": "solver", "activation": "quadratic", "beta": 0.0}]
        + [{"kind": "solver", "activation": "relu", "beta": b} for b in config.solver_betas]
    )
    results = map_points(
        _point,
        config,
        points + budget_points,
        experiment="training_flatness",
        version=VERSION,
        jobs=jobs,
        backend=backend,
    )
    results, budget_results = results[: len(points)], results[len(points) :]
    tables = {
        key: [row for result in results for row in result.get(key, [])]
        for key in ("finals", "trajectories", "references", "solver", "solver_summary")
    }
    tables["budget"] = [
        {**row, "perturbation_budget": point["perturbed_steps"]}
        for point, result in zip(budget_points, budget_results, strict=True)
        for row in result["finals"]
    ]
    tables["budget"] += [  # the methods' own runs: the sweep's point at the config's budget (BUDGET_FACTORS has 1)
        {**row, "perturbation_budget": config.perturbed_steps}
        for row in where(tables["finals"], lambda r: r["method"] in PERTURBED_METHODS)
    ]
    flattest = {row["seed"]: row for row in where(tables["references"], method="flattest")}
    for key in ("finals", "references", "budget"):
        tables[key] = [
            _against_flattest(row, flattest[row["seed"]], own_labels=row["method"] != "flattest") for row in tables[key]
        ]
    tables["init_scale"] = where(tables["finals"], lambda r: r["method"].startswith("GD, init "))
    stepped = [r for r in tables["finals"] if r["fixed_step"] is not None and r["method"] not in METHODS]
    tables["step_size"] = [r for r in stepped if r["fixed_step"] in config.step_sizes]
    tables["fixed_step"] = [r for r in stepped if r["fixed_step"] == config.fixed_step]
    tables["finals"] = where(tables["finals"], lambda r: r["method"] in METHODS)
    tables["trajectories"] = where(tables["trajectories"], lambda r: r["method"] in METHODS)
    return tables
