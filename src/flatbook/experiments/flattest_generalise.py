"""Chapter 4: do the flattest interpolators generalise, the whole near-flattest set, and at which rate?

A sum of k ReLU ridges in dimension d (the teacher f*), labels y = f*(Θ* x) + ξ with x ~ N(0, I_d), and the
conditions of Theorem 3's rate switched on one at a time (our reading of ε₁ and ε₂, book eq. ``eq-rate-terms``):

- noise of variance τ²(n) = τ₀² (n/n₀)^{−ε₂} (ε₂ = 0: fixed noise, the primary outcome (F − F*)/τ²;
  ε₂ = 1: the imposed schedule τ² ∝ 1/n, whose excess measures the schedule);
- an approximation error: the orthogonal residual η He₃(⟨v, x⟩)/√6 of variance η²(n) = η₀² (n/n₀)^{−ε₁}
  (:mod:`flatbook.data`, eq. ``eq-residual``), which no ReLU network represents at all (paper scale);
- neither ("noiseless"): the statistical term alone, where the flattest interpolator's path norm is at most
  the teacher's (book, ``prop-ch4-path-norm``).

Every point: n samples, width m = ``width_factor``·n, the flattest interpolator over all
directions (:func:`flatbook.global_flattest.flattest_interpolator`, never given Θ*; in d ≤ 3 its pricing is
exact, so Υ(net) ≤ ``certified_factor``·Υ*(m) is proven when it stops ``CONVERGED``), and on the same data a
control not selected for flatness: the minimum-ℓ2 outer weights on ``control_width_factor``·n random
directions (a random-features approximation of the arc-cosine kernel interpolator; its ``certified_factor``
says how far from the flattest it is).  Population losses are exact
(Gaussian kernels plus η², :func:`flatbook.data.population_loss`).  Where the point asks for it
(``near=True``), the range of the excess over the near-flattest set {Υ ≤ (1 + ε)Υ_found} for every slack ε
in ``slacks``: its worst member found (:func:`flatbook.near_flattest.worst_near_flattest`, a lower estimate
of the worst) and a proven floor of the excess over the measures of that set on the solver's dictionary
(:func:`flatbook.near_flattest.frank_wolfe_floor`); without noise, at every slack of ``path_norm_slacks``, the
member of largest path norm on that dictionary, exactly or with a proven bracket
(:meth:`flatbook.near_flattest.NearFlattestSet.largest_path_norm`).

Tables of :func:`run`: ``runs`` (condition, n, seed, method "flattest" / "control"); ``near`` (condition, n,
seed, slack: worst, floor, the solver's); ``path_norm`` (noiseless, n, seed, slack: the largest path norm
over measures found, the search's bound on it, whether the search closed, the member's Υ, excess and smallest κ; the
largest over networks); ``rates`` and
``local_rates`` (log-log slopes of the excess against n, per seed then mean and 95 % interval, for the
flattest, the control and the set's worst); ``levels``
(per noisy condition, n and interpolator: (F − F*)/τ², median with its order-statistic interval, 20 %
trimmed mean, geometric mean with its interval, worst seed); ``verdicts`` (:func:`verdict` of the slope of
(F − F*)/τ² at fixed noise); ``paired`` (control over flattest on the same data: median log ratio and its
interval); ``measure`` (V* against n per condition, with its slope, the teacher's Υ and the noise's dual
bound); ``rademacher`` (the Rademacher complexity of the unit Υ-ball, computed exactly, against its bound);
``search_depth`` (fixed noise, n = ``depth_n``, every seed: the worst found as in the sweep beside a deeper
search, ``depth_starts`` starts on a dictionary widened by ``depth_directions`` random directions);
``balancedness`` (:func:`balancedness`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats as scipy_stats
from scipy.optimize import linprog

from .. import get_activation
from ..data import population_loss, sum_of_single_index
from ..errors import FlatbookInputError, SolverError
from ..flatness import min_flatness, unit_flatness_weights
from ..global_flattest import flattest_interpolator, measure_dual_bound, residual_measure_bound
from ..interpolators import minimum_l2_interpolator, random_directions
from ..near_flattest import frank_wolfe_floor, near_flattest_set
from ..network import TwoLayerNet
from ..relu_cells import kappa_infimum
from ..stats import mean_interval
from ..tables import group, local_slopes, slope_across_seeds, where
from .runner import map_points

__all__ = [
    "CHAPTER",
    "VERSION",
    "Config",
    "CONFIGS",
    "CONDITIONS",
    "DELTA",
    "RESOLUTION",
    "predicted_rate",
    "teacher_for",
    "resolved_excess",
    "median_interval",
    "in_half_space",
    "trimmed_mean",
    "verdict",
    "balancedness",
    "run",
]

#: the chapter that shows this experiment's figures
CHAPTER = "book/04-flattest-generalise.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 3

#: condition → (noise exponent ε₂, residual exponent ε₁); None switches the term off, 0 keeps it fixed
CONDITIONS = {
    "noiseless": (None, None),
    "fixed noise": (0.0, None),
    "noise, τ² ∝ 1/n": (1.0, None),
    "noise, τ² ∝ n^-1/4": (0.25, None),
    "fixed residual": (None, 0.0),
    "residual, η² ∝ 1/n": (None, 1.0),
    "residual, η² ∝ n^-1/4": (None, 0.25),
}

#: the margin of :func:`verdict`, fixed before any run: a log-log slope of (F − F*)/τ² whose 95 % interval lies
#: inside [−DELTA, DELTA] is called level ("tempered over the range"); 1/4 is the slowest rate the chapter's
#: conditions impose (ε = 1/4), so a slope within ±1/4 is one the chapter would not call a rate
DELTA = 0.25


@dataclass(frozen=True)
class Config:
    activation: str = "relu"
    d: int = 3
    k: int = 2
    n_grid: tuple = (12, 17, 24, 34, 48)
    seeds: int = 5
    width_factor: int = 2
    control_width_factor: int = 16
    noise_std0: float = 0.3
    residual_std0: float = 0.3
    tol: float = 0.01
    rounds: int = 15
    pricing_starts: int = 8
    pricing_steps: int = 10
    slacks: tuple = (0.001, 0.01, 0.05, 0.3, 1.0)
    near_conditions: tuple = ("noiseless", "fixed noise", "noise, τ² ∝ 1/n")
    worst_starts: int = 1
    depth_n: int = 24
    depth_starts: int = 32
    depth_directions: int = 500
    floor_steps: int = 8
    #: slacks at which the near-flattest network of largest path norm is computed (noiseless datasets only: the
    #: condition of eq-path-norm-teacher), and the branch-and-bound nodes each program may explore
    path_norm_slacks: tuple = (0.05,)
    path_norm_nodes: int = 20_000
    kappa_directions: int = 2000
    rademacher_draws: int = 6
    balance_d: int = 4
    balance_n: int = 10
    balance_widths: tuple = (1, 2, 4, 8, 16)
    conditions: tuple = ("noiseless", "fixed noise", "noise, τ² ∝ 1/n")
    seed: int = 0


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(
        n_grid=(8, 12, 16, 24),
        seeds=2,
        conditions=("noiseless", "fixed noise"),
        rounds=6,
        slacks=(0.01,),
        near_conditions=("fixed noise",),
        path_norm_slacks=(),
        rademacher_draws=2,
        depth_n=12,
        depth_starts=4,
        depth_directions=50,
        balance_n=8,
        balance_widths=(1, 4),
    ),
    # the near-flattest range at book scale: every condition and slack, four starts (the paper scale's), fewer
    # Frank-Wolfe steps; the paper scale adds sizes and seeds
    "book": Config(worst_starts=4, floor_steps=6),
    # the paper scale: nine sizes to n = 192 and 20 seeds; chapter 4 projects from its own per-seed spread
    # whether the verdict's interval on (F − F*)/τ² can then be narrower than ±DELTA (necessary for "level",
    # not sufficient: the mean slope must be small too)
    "paper": Config(
        n_grid=(12, 17, 24, 34, 48, 68, 96, 136, 192),
        seeds=20,
        rounds=40,
        worst_starts=4,
        path_norm_slacks=(0.05, 1.0),
        path_norm_nodes=2_000,
        floor_steps=30,
        rademacher_draws=20,
        conditions=tuple(CONDITIONS),
        near_conditions=tuple(CONDITIONS),
    ),
}


def predicted_rate(condition: str) -> float:
    """Theorem 3's exponent −min(1/2, ε₁, ε₂) (a missing term is +∞), or 0 where a term is fixed (no decay
    promised)."""
    exponents = [e for e in CONDITIONS[condition] if e is not None]
    return -min([0.5, *exponents])


def _scale(size0: float, exponent: float | None, n: int, n0: int) -> float:
    return 0.0 if exponent is None else size0 * (n / n0) ** (-exponent / 2)


def _sizes(condition: str, config: Config, n: int) -> tuple[float, float]:
    """(τ, η) of a condition at sample size n: τ(n) = τ₀ (n/n₀)^{−ε₂/2}, η(n) = η₀ (n/n₀)^{−ε₁/2}, 0 if off."""
    eps2, eps1 = CONDITIONS[condition]
    n0 = config.n_grid[0]
    return _scale(config.noise_std0, eps2, n, n0), _scale(config.residual_std0, eps1, n, n0)


def _points(condition: str, config: Config, n: int) -> list[dict]:
    """The sweep's points (datasets) of one condition at sample size n, one per seed."""
    tau, eta = _sizes(condition, config, n)
    near = condition in config.near_conditions
    return [
        {"noise_std": tau, "residual_std": eta, "n": n, "seed": config.seed + 100 * s, "near": near}
        for s in range(config.seeds)
    ]


def teacher_for(condition: str, config: Config, n: int, seed: int):
    """The teacher of a condition at sample size n: noise and residual sizes depend on n."""
    return _teacher(config, *_sizes(condition, config, n), seed)


def _teacher(config, noise_std, residual_std, seed):
    return sum_of_single_index(
        config.d, config.k, link=config.activation, noise_std=noise_std, seed=seed, residual_std=residual_std
    )


def _near_rows(config, X, y, activation, width, teacher, flattest, seed, noiseless, least_kappa) -> list[dict]:
    """The range of the excess over the near-flattest set at every slack: worst found, proven floor, solver's
    (rows ``method`` "near"); without noise, the member of largest path norm at every slack of
    ``path_norm_slacks`` (rows ``method`` "path").  The dictionary holds the direction ``least_kappa`` where κ is
    least: a cancelling pair there adds the most path norm per unit of Υ."""
    rows = []
    # one dictionary and kernel
    near = near_flattest_set(X, y, activation, width, teacher, flattest=flattest, extra_directions=least_kappa[None])
    for slack in config.path_norm_slacks if noiseless else ():
        largest = near.largest_path_norm(slack, node_limit=config.path_norm_nodes)
        rows.append(
            {
                "method": "path",
                "slack": slack,
                "path_norm": largest.path_norm,
                "path_norm_bound": largest.bound,
                "network_path_norm": largest.network_path_norm,
                "optimal": largest.optimal,
                "nodes": largest.nodes,
                "upsilon": largest.member.upsilon,
                "excess": largest.member.excess,
                "kappa_min": float(unit_flatness_weights(largest.member.net.directions(), X, activation).min()),
                "flattest_upsilon": largest.member.flattest_upsilon,
                "dictionary": int(near.U.shape[0]),
                "dictionary_kappa_min": float(near.w.min()) ** activation.p,  # w = κ^{1/p}
            }
        )
    for slack in config.slacks:
        worst = near.worst(slack, starts=config.worst_starts, seed=seed)
        floor = frank_wolfe_floor(near, slack, steps=config.floor_steps)
        rows.append(
            {
                "method": "near",
                "slack": slack,
                "worst": worst.excess,
                "climbs": list(worst.climbs),  # the excess each start's climb ended at (the first: from the solver's)
                "worst_upsilon": worst.upsilon,
                "worst_path_norm": float(worst.net.effective_outer_weights().abs().sum()),
                "worst_kappa_min": float(unit_flatness_weights(worst.net.directions(), X, activation).min()),
                "floor": max(floor.floor, 0.0),
                "floor_found": floor.found,
                "flattest": worst.flattest_excess,
                "flattest_upsilon": worst.flattest_upsilon,
                "dictionary": int(near.U.shape[0]),
            }
        )
    return rows


def in_half_space(X) -> bool:
    """Whether the samples lie in an open half-space through the origin: some u has ⟨u, x_i⟩ < 0 for every i (then
    σ(⟨u, ·⟩) is dead on the whole sample and κ(u) = 0). Exactly, as the feasibility of the LP Xu ≤ −1."""
    X = np.asarray(X.cpu() if isinstance(X, torch.Tensor) else X, dtype=np.float64)
    found = linprog(np.zeros(X.shape[1]), A_ub=X, b_ub=-np.ones(X.shape[0]), bounds=(None, None), method="highs")
    if found.status not in (0, 2):  # 0: a feasible u, 2: infeasible
        raise SolverError(f"HiGHS could not decide the half-space program: {found.message}")
    return found.status == 0


def _net_row(net, X, y, teacher, activation) -> dict:
    loss = population_loss(net, teacher)
    weights = net.effective_outer_weights().abs()
    live = weights > 0
    kappa = unit_flatness_weights(net.directions()[live], X, activation)
    fitted = net(X).detach()
    return {
        "upsilon": min_flatness(net, X, y),
        "path_norm": float(weights.sum()),
        "net_kappa_min": float(kappa.min()),
        "excess": loss.excess,
        "estimation_error": loss.excess - teacher.approximation_error,
        "train_residual": float((fitted - y).abs().max()),
        # V*(y − net(X)) ≤ this: with Υ(net), an upper bound on Υ*(m) for m ≥ n at exact interpolation (p = 1)
        "residual_allowance": residual_measure_bound(X, y - fitted, activation),
    }


def _flattest(config, X, y, activation, m, seed):
    """The global solver with the experiment's options."""
    return flattest_interpolator(
        X,
        y,
        activation,
        width=m,
        tol=config.tol,
        rounds=config.rounds,
        pricing_starts=config.pricing_starts,
        pricing_steps=config.pricing_steps,
        seed=seed,
    )


def _search_depth_point(config, n, seed):
    """How far the worst-near-flattest search is from saturation on one fixed-noise dataset at the largest slack:
    the worst found as in the sweep (``worst_starts`` starts on the solver's dictionary) beside the worst found
    with ``depth_starts`` starts on that dictionary widened by ``depth_directions`` random directions."""
    activation = get_activation(config.activation)
    teacher = teacher_for("fixed noise", config, n, seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    m = config.width_factor * n
    flattest = _flattest(config, X, y, activation, m, seed)
    slack = config.slacks[-1]
    near = near_flattest_set(X, y, activation, m, teacher, flattest=flattest)
    widened = near_flattest_set(
        X, y, activation, m, teacher, flattest=flattest,
        extra_directions=random_directions(config.depth_directions, config.d, seed=seed + 5),
    )  # fmt: skip
    return {
        "n": n,
        "seed": seed,
        "slack": slack,
        "worst": near.worst(slack, starts=config.worst_starts, seed=seed).excess,
        "deep_worst": widened.worst(slack, starts=config.depth_starts, seed=seed).excess,
        "dictionary": int(near.U.shape[0]),
        "deep_dictionary": int(widened.U.shape[0]),
    }


def _point(config, noise_std, residual_std, n, seed, near=False):
    """One dataset: the flattest interpolator and the control (rows ``method`` "flattest", "control"), and with
    ``near`` the near-flattest range at every slack (rows ``method`` "near")."""
    activation = get_activation(config.activation)
    teacher = _teacher(config, noise_std, residual_std, seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    noise = y - teacher.target(X)
    m = config.width_factor * n
    flattest = _flattest(config, X, y, activation, m, seed)
    control_directions = random_directions(config.control_width_factor * n, config.d, seed=seed + 1)
    control = minimum_l2_interpolator(X, y, activation, control_directions)
    grid = random_directions(config.kappa_directions, config.d, seed=seed + 2)
    kappa = unit_flatness_weights(grid, X, activation)
    infimum = kappa_infimum(X, activation)
    common = {
        "d": config.d,
        "n": n,
        "m": m,
        "seed": seed,
        "noise_variance": teacher.bayes_risk,
        "approximation_error": teacher.approximation_error,
        # E (0 − y)² − τ² = E f*² + η²: the excess of predicting zero
        "signal_variance": population_loss(_zero_net(config), teacher).excess,
        "lower": flattest.lower,
        "gap": flattest.gap,
        "stop": flattest.stop.value,
        "proven": flattest.stop.proven,
        "pricing": flattest.pricing,
        "atoms": int(flattest.atoms.directions.shape[0]),
        "measure_upper": flattest.measure_value,
        "measure_lower": flattest.measure_lower,
        # Υ of the teacher network (unit outer weights) on these inputs: it interpolates only without noise
        "teacher_upsilon": float(unit_flatness_weights(teacher.theta_star, X, activation).sum()),
        # κ_inf exactly over the arrangement's faces (d ≤ 3), the largest κ over random directions
        "kappa_inf": infimum.value,
        "kappa_max": float(kappa.max()),
        # sup_u κ(u) ≤ (4/n) ‖X‖_op ‖X‖_F (S ≤ (2/n)‖X‖_op², T ≤ (2/n)‖X‖_F²): a proven ceiling
        "kappa_sup_bound": 4.0 / n * float(torch.linalg.matrix_norm(X, ord=2)) * math.sqrt(float((X * X).sum())),
        "sum_sq_norms": float((X * X).sum()),
        "half_space": in_half_space(X),
        "control_condition": float(torch.linalg.cond(activation(X @ control_directions.T))),
    }
    if noise_std > 0:  # weak duality: V* ≥ λᵀy / sup_u G_λ(u) for any λ, proven in d ≤ 3 (eq-noise-dual)
        # λ = P⊥ξ, the noise off the span of the teacher's features: λᵀy = ‖P⊥ξ‖² (no cross term with f*(X));
        # λ = ξ beside it, whose ξᵀy = ‖ξ‖² + ξᵀf*(X) can be ≤ 0 at small n. The bound is the larger.
        features = activation(X @ teacher.theta_star.T)
        off_span = noise - features @ torch.linalg.lstsq(features, noise[:, None]).solution[:, 0]
        projected = measure_dual_bound(X, y, activation, off_span)
        plain = measure_dual_bound(X, y, activation, noise)
        common.update(
            noise_dual_bound=max(projected.value, plain.value),
            noise_dual_projected=projected.value,
            noise_dual_plain=plain.value,
            noise_dual_pricing=projected.pricing if plain.pricing == projected.pricing else "mixed",
        )
        common["noise_sq_norm"] = float(noise @ noise)
    rows = [
        {**common, "method": method, **_net_row(net, X, y, teacher, activation)}
        for method, net in (("flattest", flattest.net), ("control", control))
    ]
    for row in rows:
        row["certified_factor"] = row["upsilon"] / flattest.lower
    if near:
        noiseless = noise_std == 0 and residual_std == 0
        rows += [
            {**common, **row}
            for row in _near_rows(config, X, y, activation, m, teacher, flattest, seed, noiseless, infimum.inside)
        ]
    return rows


def _zero_net(config) -> TwoLayerNet:
    """The zero function as a network (one neuron with outer weight 0)."""
    return TwoLayerNet(
        torch.zeros(1, dtype=torch.float64), torch.eye(config.d, dtype=torch.float64)[:1], config.activation
    )


def _rademacher_point(config, n, seed):
    """The empirical Rademacher complexity of the unit Υ-ball on one noiseless dataset, computed exactly.

    For H_V = {Σ_j ã_j σ(⟨u_j, x⟩) : Σ_j κ(u_j)|ã_j| ≤ V} a linear functional is largest at one atom, so
    R̂_S(H_1) = E_ε sup_u |Σ_i ε_i σ(⟨u, x_i⟩)| / (n κ(u)) = E_ε sup_u G_ε(u) / n, with the supremum of the dual
    ratio proven by the pricing (exact in d ≤ 3).  Returned beside its bound 2 (Σ_i ‖x_i‖²)^{1/2} / (n κ_inf)
    (contraction and Cauchy–Schwarz; κ_inf = inf_u κ(u), exact, :func:`flatbook.relu_cells.kappa_infimum`)."""
    activation = get_activation(config.activation)
    teacher = _teacher(config, 0.0, 0.0, seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    generator = torch.Generator().manual_seed(seed + 3)
    sups = []
    pricing = set()
    for _ in range(config.rademacher_draws):
        signs = (2 * torch.randint(0, 2, (n,), generator=generator) - 1).to(X)
        bound = measure_dual_bound(X, y, activation, signs)
        sups.append(bound.sup)
        pricing.add(bound.pricing)
    complexity = float(np.mean(sups)) / n
    kappa_inf = kappa_infimum(X, activation).value
    return {
        "n": n,
        "seed": seed,
        "complexity": complexity,
        "complexity_se": float(np.std(sups, ddof=1) / math.sqrt(len(sups))) / n if len(sups) > 1 else math.nan,
        "kappa_inf": kappa_inf,
        # κ_inf = 0: some direction activates no sample (the data lie in a half-space), no path-norm control
        "bound": 2.0 * math.sqrt(float((X * X).sum())) / (n * kappa_inf) if kappa_inf > 0 else math.inf,
        "pricing": "/".join(sorted(pricing)),
    }


#: relative resolution of the exact excess: aᵀKa − 2aᵀk + E f*² cancels terms of the size of E y², so an excess
#: below about 1e-14 E y² is rounding; logs and ratios use at least this much
RESOLUTION = 1e-14


def resolved_excess(row: dict, field: str = "excess") -> float:
    """F − F* of a row (or another excess ``field``), at least ``RESOLUTION``·E y², so its log exists."""
    return max(row[field], RESOLUTION * row["signal_variance"])


def median_interval(values, level: float = 0.95) -> tuple[float, float, float, float]:
    """Median and the distribution-free order-statistic interval (x_(j), x_(n+1−j)) for it: the largest j whose
    coverage 1 − 2 P(Bin(n, 1/2) < j) is at least ``level``, or j = 1 (the range) when even that covers less.
    Returns (median, low, high, coverage).  Valid for any continuous distribution: heavy tails do not widen it
    beyond the sample's own order statistics."""
    values = np.sort(np.asarray(values, dtype=float))
    size = values.size
    if size < 2:
        raise FlatbookInputError("a median interval needs at least two values.")
    best = 1
    for j in range(1, size // 2 + 1):
        if 1.0 - 2.0 * scipy_stats.binom.cdf(j - 1, size, 0.5) >= level:
            best = j
    coverage = 1.0 - 2.0 * scipy_stats.binom.cdf(best - 1, size, 0.5)
    return float(np.median(values)), float(values[best - 1]), float(values[size - best]), float(coverage)


def trimmed_mean(values, proportion: float = 0.2) -> float:
    """The mean after cutting ``proportion`` of the values at each end (scipy's trim_mean)."""
    return float(scipy_stats.trim_mean(np.asarray(values, dtype=float), proportion))


def verdict(low: float, high: float, delta: float = DELTA) -> str:
    """Benign, tempered or catastrophic *over the measured range*, from the 95 % interval [low, high] of the
    log-log slope of (F − F*)/τ² against n: "level" (tempered over the range) if the interval lies in
    [−delta, delta], else "falling" if it lies below 0 (benign, or tempered with a transient), "growing"
    (catastrophic-like) if above 0, else "undecided".  No finite range decides a limit: a rate slower than
    n^{±delta} is not excluded.  ``delta`` is a convention fixed in advance, not a margin derived from the question."""
    if not low <= high:
        raise FlatbookInputError(f"need low <= high, got [{low}, {high}].")
    if -delta <= low and high <= delta:
        return "level"
    if high < 0:
        return "falling"
    if low > 0:
        return "growing"
    return "undecided"


def _levels(runs, near_rows):
    """Per noisy condition, n and interpolator (flattest, control, and the set's worst and floor at each slack):
    (F − F*)/τ² across seeds, median with its order-statistic interval, 20 % trimmed mean, geometric mean with its
    t-interval on the log scale, worst seed."""
    series = []
    for (condition, method, n), members in group(runs, "condition", "method", "n", sort=True).items():
        series.append(
            (condition, method, n, [r["excess"] / r["noise_variance"] for r in members if r["noise_variance"]])
        )
    for (condition, slack, n), members in group(near_rows, "condition", "slack", "n", sort=True).items():
        for field in ("worst", "floor"):
            ratios = [r[field] / r["noise_variance"] for r in members if r["noise_variance"]]
            series.append((condition, f"{field} {slack:g}", n, ratios))
    rows = []
    for condition, method, n, ratios in series:
        if len(ratios) < 2:
            continue
        median, low, high, coverage = median_interval(ratios)
        logs = [math.log(max(x, RESOLUTION)) for x in ratios]
        mean, log_low, log_high = mean_interval(logs)
        rows.append(
            {
                "condition": condition,
                "method": method,
                "n": n,
                "median": median,
                "low": low,
                "high": high,
                "coverage": coverage,
                "trimmed_mean": trimmed_mean(ratios),
                "geomean": math.exp(mean),
                "geo_low": math.exp(log_low),
                "geo_high": math.exp(log_high),
                "worst": max(ratios),
                "ratios": sorted(ratios),
            }
        )
    return rows


def _paired(runs):
    """Per condition and n: log(excess of the control / excess of the flattest) on the same datasets: median and
    its order-statistic interval, and the fraction of datasets where the flattest is better."""
    rows = []
    for (condition, n), members in group(runs, "condition", "n", sort=True).items():
        by_seed = group(members, "seed")
        logs = [
            math.log(
                resolved_excess(where(pair, method="control")[0]) / resolved_excess(where(pair, method="flattest")[0])
            )
            for pair in by_seed.values()
        ]
        median, low, high, coverage = median_interval(logs)
        rows.append(
            {
                "condition": condition,
                "n": n,
                "median_log_ratio": median,
                "low": low,
                "high": high,
                "coverage": coverage,
                "flattest_better": sum(x > 0 for x in logs) / len(logs),
            }
        )
    return rows


def _slope_row(rows, field, **labels) -> tuple[dict, list[dict]]:
    """Slope of a field against n, per seed, mean and 95 % interval, with the local slopes between sizes."""

    def value(r):
        return resolved_excess(r, field) if field in ("excess", "worst", "floor") else r[field]

    mean, low, high = slope_across_seeds(rows, "n", value)
    summary = {
        **labels,
        "field": field,
        "rate": mean,
        "low": low,
        "high": high,
        "sizes": len({r["n"] for r in rows}),
        "seeds": len(group(rows, "seed")),
    }
    local = [{**labels, "field": field, **step} for step in local_slopes(rows, "n", value)]
    return summary, local


def _ratio_rows(rows, field):
    return [{**r, "ratio": resolved_excess(r, field) / r["noise_variance"]} for r in rows]


def _rates(runs, near_rows, config):
    """Slopes against n: the excess of the flattest and the control, the set's worst and floor per slack (the
    floor only where it is positive on every dataset), and for noisy conditions also (F − F*)/τ² (the primary
    outcome) with its :func:`verdict`."""
    rates, local, verdicts = [], [], []
    for condition in config.conditions:
        noisy = CONDITIONS[condition][0] is not None
        series = [
            (method, where(runs, condition=condition, method=method), "excess") for method in ("flattest", "control")
        ]
        for slack in config.slacks:
            members = where(near_rows, condition=condition, slack=slack)
            if members:
                series.append((f"worst {slack:g}", members, "worst"))
                # a floor of 0 (Frank–Wolfe proved nothing above it) has no trend to fit: that series is left out
                if all(r["floor"] > 0 for r in members):
                    series.append((f"floor {slack:g}", members, "floor"))
        for method, rows, field in series:
            summary, steps = _slope_row(rows, field, condition=condition, method=method)
            rates.append({**summary, "outcome": "excess", "theory": predicted_rate(condition)})
            local += [{**s, "outcome": "excess"} for s in steps]
            if noisy:
                ratio_rows = _ratio_rows(rows, field)
                summary, steps = _slope_row(ratio_rows, "ratio", condition=condition, method=method)
                rates.append({**summary, "outcome": "excess/τ²", "theory": predicted_rate(condition)})
                local += [{**s, "outcome": "excess/τ²"} for s in steps]
                if CONDITIONS[condition][0] == 0.0:
                    verdicts.append(
                        {
                            "condition": condition,
                            "method": method,
                            "rate": summary["rate"],
                            "low": summary["low"],
                            "high": summary["high"],
                            "verdict": verdict(summary["low"], summary["high"]),
                            "delta": DELTA,
                        }
                    )
    return rates, local, verdicts


def _measure(runs, config):
    """V* (the flattest measure's value; Υ* = V* for the ReLU) against n per condition, with its slope, the
    teacher's Υ on the same inputs, the noise's dual bound and V*²/(n τ²), the size of the optimistic-rate
    bound relative to the noise."""
    flat = where(runs, method="flattest")
    rows, slopes = [], []
    for condition in config.conditions:
        sel = where(flat, condition=condition)
        for n, members in group(sel, "n", sort=True).items():
            row = {
                "condition": condition,
                "n": n,
                "measure": float(np.median([r["measure_upper"] for r in members])),
                "teacher_upsilon": float(np.median([r["teacher_upsilon"] for r in members])),
                "path_norm": float(np.median([r["path_norm"] for r in members])),
                "kappa_inf": float(np.median([r["kappa_inf"] for r in members])),
                "kappa_max": float(np.median([r["kappa_max"] for r in members])),
            }
            if members[0]["noise_variance"] > 0:
                row["noise_dual_bound"] = float(np.median([r["noise_dual_bound"] for r in members]))
                row["bound_over_noise"] = float(
                    np.median([r["measure_upper"] ** 2 / (n * r["noise_variance"]) for r in members])
                )
            rows.append(row)
        summary, _ = _slope_row(sel, "measure_upper", condition=condition, method="flattest")
        slopes.append(summary)
        if sel and sel[0].get("noise_dual_bound") is not None and all(r.get("noise_dual_bound") for r in sel):
            summary, _ = _slope_row(sel, "noise_dual_bound", condition=condition, method="flattest")
            slopes.append(summary)
    return rows, slopes


def _balance_point(config: Config, name: str) -> list[dict]:
    """:func:`balancedness` for one activation."""
    activation = get_activation(name)
    teacher = sum_of_single_index(config.balance_d, config.k, link=name, seed=config.seed)
    X, y = teacher.sample(config.balance_n, seed=config.seed + 1000)
    base = flattest_interpolator(
        X, y, activation, width=config.balance_n, tol=config.tol, rounds=config.rounds, seed=config.seed
    )
    atoms = base.atoms.weights.shape[0]
    rows = []
    for factor in config.balance_widths:
        at = base.at_width(X, y, atoms * factor)
        kappa = unit_flatness_weights(at.net.theta, X, activation)
        weighted = kappa ** (1 / activation.p) * at.net.a.abs()  # unit directions: ã_j = a_j
        rows.append(
            {
                "activation": name,
                "p": activation.p,
                "atoms": atoms,
                "m": at.width,
                "upsilon": at.upper,
                "lower": at.lower,
                "stop": base.stop.value,
                "pricing": base.pricing,
                "max_effective_weight": float(at.net.a.abs().max()),
                "spread": at.width * float(weighted.max()) / at.measure_value,
            }
        )
    return rows


def balancedness(config: Config, jobs: int | None = None, backend: str | None = None) -> list[dict]:
    """How evenly the solver's network spreads its weight, from the splitting lemma (eq. ``eq-splitting``).

    One noiseless dataset per activation (ReLU, c = 1; quadratic, c = 2) in d = ``balance_d`` with
    n = ``balance_n``; the measure ``flattest_interpolator`` returns (in d > 3 not certified: each row keeps its
    proven ``lower`` bound and the ``stop``) split for widths K·w, w in ``balance_widths`` (K atoms).  For
    p > 1 the optimal split gives every neuron the same weighted size κ_j^{1/p}|ã_j| = V/m, so
    ``spread`` = m · max_j κ_j^{1/p}|ã_j| / V → 1; for p = 1 every split has the same Υ.
    """
    points = [{"name": name} for name in ("relu", "quadratic")]
    results = map_points(
        _balance_point, config, points, experiment="flattest_generalise", version=VERSION, jobs=jobs, backend=backend
    )
    return [row for rows in results for row in rows]


def _dataset(point: dict) -> tuple:
    return (point["noise_std"], point["residual_std"], point["n"], point["seed"])


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """Every condition, n and seed; the near-flattest range, slopes, levels, verdicts; the checks of the
    chapter's propositions (measure growth, Rademacher complexity); the balancedness table."""
    unknown = [c for c in (*config.conditions, *config.near_conditions) if c not in CONDITIONS]
    if unknown:
        raise FlatbookInputError(f"unknown conditions {unknown}; choose from {list(CONDITIONS)}.")
    if not 1 <= config.d <= 3:
        raise FlatbookInputError(
            f"this experiment needs d <= 3 (got d = {config.d}): κ_inf and the noise's dual bound are computed "
            "exactly over the data's hyperplane arrangement, which is enumerated in d <= 3 only."
        )
    # a dataset is (τ, η, n, seed): conditions that coincide (every noise condition at n₀) share one point, which
    # computes the near-flattest range if any of them asks for it
    wanted = [
        (condition, point)
        for n in sorted(config.n_grid, reverse=True)  # largest first: the long points start early
        for condition in config.conditions
        for point in _points(condition, config, n)
    ]
    shared: dict[tuple, dict] = {}
    for _, point in wanted:
        key = _dataset(point)
        shared[key] = {**point, "near": point["near"] or shared.get(key, point)["near"]}
    points = list(shared.values())
    rademacher_points = [{"n": n, "seed": config.seed} for n in sorted(config.n_grid, reverse=True)]
    results = map_points(
        _point, config, points, experiment="flattest_generalise", version=VERSION, jobs=jobs, backend=backend
    )
    rademacher = map_points(
        _rademacher_point,
        config,
        rademacher_points,
        experiment="flattest_generalise",
        version=VERSION,
        jobs=jobs,
        backend=backend,
    )
    depth = map_points(
        _search_depth_point,
        config,
        [{"n": config.depth_n, "seed": point["seed"]} for point in _points("fixed noise", config, config.depth_n)],
        experiment="flattest_generalise",
        version=VERSION,
        jobs=jobs,
        backend=backend,
    )
    by_point = {_dataset(point): rows for point, rows in zip(points, results, strict=True)}
    order = list(CONDITIONS)
    every = sorted(
        (
            {"condition": condition, **row}
            for condition, point in wanted
            for row in by_point[_dataset(point)]
            if row["method"] != "near" or condition in config.near_conditions
        ),
        key=lambda r: (order.index(r["condition"]), r["n"], r["seed"], r.get("slack", 0.0)),
    )
    runs = [r for r in every if r["method"] in ("flattest", "control")]
    near_rows = [r for r in every if r["method"] == "near"]
    path_rows = [r for r in every if r["method"] == "path"]
    rates, local, verdicts = _rates(runs, near_rows, config)
    measure, measure_slopes = _measure(runs, config)
    return {
        "runs": runs,
        "near": near_rows,
        "path_norm": path_rows,
        "rates": rates,
        "local_rates": local,
        "levels": _levels(runs, near_rows),
        "verdicts": verdicts,
        "paired": _paired(runs),
        "measure": measure,
        "measure_slopes": measure_slopes,
        "rademacher": sorted(rademacher, key=lambda r: r["n"]),
        "search_depth": sorted(depth, key=lambda r: r["seed"]),
        "balancedness": balancedness(config, jobs=jobs, backend=backend),
    }
