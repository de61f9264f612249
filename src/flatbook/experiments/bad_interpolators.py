"""Chapter 3: the flattest misaligned interpolators against the flattest interpolator, with proven bounds.

Every point: a noiseless single-index teacher in dimension d with the activation as its link,
n samples, width m = ``width_factor`` · n, then :func:`flatbook.global_flattest.flattest_interpolator` over all
directions (Υ*(m) ∈ [lower, upper]) and over the bad set ρ(u) ≤ ρ0 for each ρ0 of the sweep
(Υ_bad ∈ [lower, upper]), the teacher's own Υ, the centred-label certificate of the bad set
(:func:`flatbook.global_flattest.measure_dual_bound` with λ = y − ȳ, eq. ``eq-centred-certificate``)
and the exact population loss of every network.  The sweeps:

- ``certified``: ReLU, d = 3, ρ0 ∈ ``alignments``.  At ρ0 = 0 the bad set is a great circle and
  both solves price exactly, so both brackets are proven (and usually certified, gap ≤ tol).
- ``certificate``: ReLU, d = 3, ρ0 = 0, the certificate alone over a longer n grid (it costs one
  arrangement enumeration): with the teacher's Υ ≥ Υ*(m) it proves ratio ≥ (V_cert / V_teacher)^p.
- ``noisy``: the ρ0 = 0 comparison of ``certified`` with label noise of standard deviation ``noise_std``
  (the teacher no longer interpolates, so upper(best) is the flattest network found).
- ``memorising``: ReLU in d = ``memorising_d``, the fraction of samples that a misaligned direction isolates
  (:func:`isolated_samples`) against Cover's exact probability (:func:`cover_isolation_probability`).
- ``relu_high_d``: ReLU in a higher d, ρ0 = 0: pricing by bounds, so brackets are wide and the
  ratio of the two networks found is an estimate.
- ``quadratic``: n = ``quadratic_share`` · D with D = d(d−1)/2 the dimension of the quadratic
  forms that misaligned neurons compute, d on a grid (so n/D is fixed and n/d grows); and
  ``quadratic_regime``: fixed d, n up to D, where the bad set stops interpolating.

Tables: one per sweep (one row per point and method "best" / "bad"); ``ratios`` (one row per sweep,
point and ρ0: ``proven`` = lower(bad)/upper(best), ``outer`` = upper(bad)/lower(best), ``estimate`` =
upper(bad)/upper(best), ``certificate`` = (V_cert/V_teacher)^p where computed); the certificate rows also
carry the terms of proposition ``prop-centred-certificate`` where the bad set is a great circle (d = 3):
the exact sup of the centred process and inf of κ over it (:func:`circle_process`), ‖λ‖ and the bound
B_n(δ) (:func:`process_bound`); ``slopes`` (log-log
slope of each ratio against n/d per sweep and ρ0, mean and 95 % interval across seeds) and
``local_slopes`` (the same between consecutive grid points).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import get_activation
from ..admissible import AdmissibleSet
from ..backend import as_tensor, check_data
from ..column_generation import pricing_mode
from ..data import population_loss, single_index
from ..errors import FlatbookInputError
from ..flatness import min_flatness, relu_memorising_flatness, unit_flatness_weights
from ..global_flattest import fit_residual_allowance, flattest_interpolator, measure_dual_bound
from ..interpolators import complement_basis, memorising_network
from ..tables import column, distinct, group, local_slopes, slope_across_seeds, where
from .runner import map_points

__all__ = [
    "CHAPTER",
    "VERSION",
    "Config",
    "CONFIGS",
    "RATIOS",
    "run",
    "sweeps",
    "ratios",
    "certificate_ratios",
    "slopes",
    "bad_dimension",
    "teacher_upsilon",
    "process_bound",
    "circle_process",
    "cover_isolation_probability",
    "isolated_samples",
]

#: the chapter that shows this experiment's figures
CHAPTER = "book/03-bad-interpolators.md"
#: bump when the results change meaning without a change in the package's computing code
VERSION = 3
#: the ratios of ``ratios`` rows, and what each is
RATIOS = {
    "proven": "lower(bad) / upper(best): a proven lower bound on Υ_bad / Υ* (for p ≠ 1 up to the best network's fit)",
    "outer": "upper(bad) / lower(best): an upper bound on Υ_bad / Υ* up to the bad network's fit residual",
    "estimate": "upper(bad) / upper(best): the two networks found",
    "certificate": "(V_cert / V_teacher)^p: the centred-label certificate over the teacher's Υ (proven lower bound)",
}


@dataclass(frozen=True)
class Config:
    seeds: int = 5
    width_factor: int = 2
    #: the certified ReLU sweep: d = 3, exact pricing on the great circle ρ = 0
    certified_d: int = 3
    certified_n_grid: tuple = (6, 12, 17, 24, 34, 48)
    alignments: tuple = (0.0, 0.5)
    #: the ReLU in d = 4, ρ0 = 0: pricing exact on the bad set (a 2-sphere), by bounds for the flattest
    exact_bad_d: int = 4
    exact_bad_n_grid: tuple = (8, 16, 23, 32, 45)
    #: the centred-label certificate alone, ReLU, d = certified_d, ρ0 = 0
    certificate_n_grid: tuple = (6, 12, 24, 48, 96, 192, 384, 768)
    #: the ReLU in a higher dimension (heuristic: pricing by bounds)
    relu_high_d: int = 8
    relu_high_n_grid: tuple = (8, 16, 32)
    #: the certified comparison (ρ0 = 0, d = certified_d) with label noise ξ ~ N(0, noise_std²)
    noise_std: float = 0.3
    noisy_n_grid: tuple = (6, 12, 17, 24, 34, 48)
    #: the memorising regime: d, the n grid and datasets per n for the isolation fractions
    memorising_d: int = 8
    memorising_n_grid: tuple = (4, 8, 12, 14, 16, 20, 24, 32)
    memorising_datasets: int = 10
    #: δ of the process bound B_n(δ) (proposition prop-centred-certificate): it fails with probability ≤ 2δ
    process_delta: float = 1e-4
    #: the quadratic with n = share · d(d−1)/2 on a grid of d, and at one d with n up to d(d−1)/2
    quadratic_d_grid: tuple = (6, 8)
    quadratic_share: float = 0.5
    quadratic_regime_d: int = 6
    quadratic_regime_n_grid: tuple = (4, 8, 12, 14)
    #: solver settings where pricing is not exact (the bounds do not close anyway)
    heuristic_tol: float = 1e-2
    heuristic_pricing_starts: int = 16
    #: slopes are fitted over n/d ≥ this (the theorem's regime n ≫ d); local slopes cover every n
    fit_from_n_over_d: float = 4.0
    seed: int = 0


#: the config of each scale (smoke, book, paper)
CONFIGS = {
    "smoke": Config(
        seeds=2,
        certified_n_grid=(6, 12, 24),
        exact_bad_n_grid=(8, 16),
        certificate_n_grid=(6, 12, 24),
        relu_high_d=4,
        relu_high_n_grid=(4, 8),
        noisy_n_grid=(6, 12),
        memorising_d=4,
        memorising_n_grid=(3, 6, 9),
        memorising_datasets=3,
        quadratic_d_grid=(5, 6),
        quadratic_regime_d=5,
        quadratic_regime_n_grid=(4, 8),
    ),
    "book": Config(),
    "paper": Config(
        # n/d = 64 in d = 3: 1 to 4 minutes a point, and one seed in three found the bad master numerically
        # infeasible (the bad interpolant's V is ~1e5 already at n = 96): n/d = 32 is the certified limit here.
        certified_n_grid=(6, 12, 24, 48, 96),
        exact_bad_n_grid=(8, 16, 32, 64, 128),
        certificate_n_grid=tuple(6 * 2**k for k in range(10)),
        relu_high_d=100,
        relu_high_n_grid=(100, 200, 400),
        # d = 16 (n = 60) took from 8 s to over 6 minutes a point on two cores (the heuristic pricing's rounds):
        # the grid stops where every seed is affordable.
        quadratic_d_grid=(6, 8, 12),
        quadratic_regime_d=10,
        quadratic_regime_n_grid=(6, 12, 24, 36, 42, 44),
        heuristic_pricing_starts=64,
    ),
}


def bad_dimension(activation: str, d: int) -> int | None:
    """D: the dimension of the functions that neurons orthogonal to a single-index teacher span, if finite.

    For the quadratic they compute quadratic forms of the (d − 1)-dimensional projection P⊥x:
    D = d(d − 1)/2, so no ρ0 = 0 interpolator exists beyond n = D.  None for the ReLU family.
    """
    return get_activation(activation).feature_dimension(d - 1)


def _solver_options(config: Config, activation, teacher, rho: float | None) -> dict:
    """Certified pricing where the package has it (:func:`~flatbook.column_generation.pricing_mode`); elsewhere
    the heuristic settings (the closed-form bounds do not close the gap anyway)."""
    d = teacher.theta_star.shape[1]
    admissible = AdmissibleSet(d) if rho is None else AdmissibleSet(d, teacher.theta_star, rho)
    if pricing_mode(activation, admissible) != "bound":
        return {}
    return {"tol": config.heuristic_tol, "pricing_starts": config.heuristic_pricing_starts}


def teacher_upsilon(teacher, X, activation, m: int) -> float:
    """Υ of a single-index teacher's neuron split into m equal copies, m^{1−p} κ(θ*) (eq. ``eq-splitting``):
    for noiseless labels an interpolator of width m, so an upper bound on Υ*(m)."""
    activation = get_activation(activation)
    return m ** (1.0 - activation.p) * float(unit_flatness_weights(teacher.theta_star, X, activation)[0])


def process_bound(n: int, d: int, delta: float) -> float:
    """B_n(δ) of proposition ``prop-centred-certificate``: sup over the misaligned sphere of the centred process
    |Σ_i λ_i relu(⟨u, x_i⟩)| is at most ‖λ‖ B_n(δ) with probability ≥ 1 − 2δ (Gaussian x, ρ0 = 0, λ = y − ȳ):

    B_n(δ) = √((d − 1) log(9n) + 2 log(2/δ)) + 1 + √((d − 1)/n) + √(2 log(1/δ)/n)

    (a net of mesh 1/√n on the unit sphere of θ*⊥ and a union bound, plus the process's Lipschitz constant
    ‖λ‖ ‖P⊥X‖_op).
    """
    if not (isinstance(n, int) and n >= 1 and isinstance(d, int) and d >= 2 and 0 < delta < 1):
        raise FlatbookInputError(f"need n >= 1, d >= 2 and 0 < delta < 1, got n={n!r}, d={d!r}, delta={delta!r}.")
    k = d - 1
    return (
        math.sqrt(k * math.log(9 * n) + 2 * math.log(2 / delta))
        + 1
        + math.sqrt(k / n)
        + math.sqrt(2 * math.log(1 / delta) / n)
    )


def circle_process(X, y, teacher_direction) -> dict:
    """Exact sup of |Z(u)| = |Σ_i (y_i − ȳ) relu(⟨u, x_i⟩)| and inf of κ(u) over the great circle u ⊥ θ* (d = 3).

    Between consecutive kinks (u ⊥ P⊥x_i) the active set A is fixed, Z(u) = ⟨u, Σ_A λ_i x_i⟩ and
    S(u) = (2/n) Σ_A ⟨u, x_i⟩² is a quadratic form, so each extremum over an arc is at an end or at an
    extremal direction of the linear (resp. quadratic) form; at a kink σ'(0) = 0 leaves the kink's sample out
    of T = (2/n) Σ_A ‖x_i‖².  κ = 2√(S T) (eq. ``eq-kappa``, c = 1).  Returns {"sup": sup|Z|, "kappa_min":
    inf κ, "lambda_norm": ‖λ‖}.
    """
    X, y = check_data(X, y)
    theta = as_tensor(teacher_direction, "teacher_direction", ndim=2).reshape(1, -1)
    if X.shape[1] != 3 or theta.shape[1] != 3:
        raise FlatbookInputError(f"circle_process needs d = 3 (the bad set a great circle), got d = {X.shape[1]}.")
    n = X.shape[0]
    basis = complement_basis(theta).cpu().numpy()  # (3, 2)
    x = X.cpu().numpy()
    lam = (y - y.mean()).cpu().numpy()
    z = x @ basis  # (n, 2): coordinates of P⊥x_i
    sq = (x**2).sum(axis=1)
    base = np.arctan2(z[:, 1], z[:, 0])
    kinks = np.sort(np.mod(np.concatenate([base + np.pi / 2, base - np.pi / 2]), 2 * np.pi))
    ends = np.append(kinks, kinks[0] + 2 * np.pi)
    starts, stops = ends[:-1], ends[1:]
    keep = stops - starts > 0
    starts, stops = starts[keep], stops[keep]

    def unit(phi):
        return np.stack([np.cos(phi), np.sin(phi)], axis=-1)

    active = (unit((starts + stops) / 2) @ z.T) > 0  # (arcs, n)
    v = active.astype(float) @ (lam[:, None] * z)  # Z(u) = ⟨u, v⟩ on the arc
    T = 2.0 / n * (active.astype(float) @ sq)
    M = np.einsum("an,ni,nj->aij", active.astype(float), z, z)  # S(u) = (2/n) uᵀ M u on the arc

    def inside(phi):
        return np.mod(phi - starts, 2 * np.pi) <= stops - starts

    sup = np.abs(np.concatenate([(unit(starts) * v).sum(1), (unit(stops) * v).sum(1)])).max()
    norm_v = np.linalg.norm(v, axis=1)
    for phi in (np.arctan2(v[:, 1], v[:, 0]), np.arctan2(-v[:, 1], -v[:, 0])):
        if inside(phi).any():
            sup = max(sup, float(norm_v[inside(phi)].max()))
    # κ² = 4 S T: inside an arc at the least eigenvector of M (if it lies in the arc), and at every kink with
    # the smaller T of the two arcs beside it (the kink's own sample is inactive there).
    vals, vecs = np.linalg.eigh(M)
    kappa2 = []
    for sign in (1.0, -1.0):
        phi = np.arctan2(sign * vecs[:, 1, 0], sign * vecs[:, 0, 0])
        ok = inside(phi)
        kappa2.append(4 * (2.0 / n) * vals[ok, 0] * T[ok])
    u_kink = unit(starts)
    S_kink = 2.0 / n * (np.maximum(u_kink @ z.T, 0.0) ** 2).sum(1)
    T_kink = np.minimum(T, np.roll(T, 1))  # arc a starts at the kink between arcs a − 1 and a
    kappa2.append(4 * S_kink * T_kink)
    kappa_min = math.sqrt(max(float(np.concatenate(kappa2).min()), 0.0))
    return {"sup": float(sup), "kappa_min": kappa_min, "lambda_norm": float(np.linalg.norm(lam))}


def cover_isolation_probability(n: int, k: int) -> float:
    """P(one of n Gaussian points in R^k is strictly separated from the other n − 1 by a hyperplane through 0)
    = C(n, k)/2^n = P(Bin(n − 1, 1/2) ≤ k − 1): Cover's function-counting theorem, with every dichotomy
    equally likely for a sign-symmetric distribution (proposition ``prop-memorising``)."""
    if not (isinstance(n, int) and n >= 1 and isinstance(k, int) and k >= 1):
        raise FlatbookInputError(f"need n >= 1 and k >= 1, got n={n!r}, k={k!r}.")
    return sum(math.comb(n - 1, j) for j in range(min(k, n))) / 2 ** (n - 1)


def isolated_samples(X, within=None) -> list[bool]:
    """For each sample x_i: is there a direction θ (in span(``within``), a (d, r) orthonormal basis, if given) with
    ⟨θ, x_i⟩ > 0 and ⟨θ, x_j⟩ < 0 for every j ≠ i?  One feasibility linear program per sample
    (margins ±1, which is strict separation up to scale), as in
    :func:`~flatbook.interpolators.memorising_network`."""
    from scipy.optimize import linprog

    X = as_tensor(X, "X", ndim=2)
    n, d = X.shape
    W = np.eye(d) if within is None else as_tensor(within, "within", ndim=2).cpu().numpy()
    if W.shape[0] != d:
        raise FlatbookInputError(f"within has {W.shape[0]} rows but X has d = {d} columns.")
    Xw = X.cpu().numpy() @ W
    out = []
    for i in range(n):
        sign = np.ones(n)
        sign[i] = -1.0
        result = linprog(
            c=np.zeros(W.shape[1]), A_ub=sign[:, None] * Xw, b_ub=-np.ones(n), bounds=(None, None), method="highs"
        )
        out.append(result.status == 0)
    return out


def _dataset(config: Config, name: str, d: int, n: int, seed: int, noise: float = 0.0):
    """One point's data and what every row of it records: (activation, teacher, X, y, m, fields).

    The fields include the teacher's Υ at width m, m^{1−p} κ(θ*): the noiseless teacher split into m
    equal copies interpolates, so this is an upper bound on Υ*(m); with label noise (``noise`` > 0) the
    teacher does not interpolate and the field is nan.
    """
    activation = get_activation(name)
    teacher = single_index(d, link=name, noise_std=noise, seed=seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    m = config.width_factor * n
    fields = {
        "activation": name,
        "c": activation.degree,
        "p": activation.p,
        "d": d,
        "n": n,
        "m": m,
        "seed": seed,
        "noise": noise,
        "n_over_d": n / d,
        "teacher_upsilon": teacher_upsilon(teacher, X, activation, m) if noise == 0 else math.nan,
    }
    return activation, teacher, X, y, m, fields


def _compare(config: Config, name: str, d: int, n: int, seed: int, alignments: tuple, noise: float = 0.0) -> list[dict]:
    """The flattest interpolator and the flattest ρ0-bad one for each ρ0, with bounds, for one dataset."""
    activation, teacher, X, y, m, fields = _dataset(config, name, d, n, seed, noise)
    common = {
        **fields,
        "bad_dimension": bad_dimension(name, d),
        "memorising_upsilon": relu_memorising_flatness(X, y) if name == "relu" else math.nan,
        "memorising_bad_upsilon": _memorising_bad_upsilon(X, y, teacher) if name == "relu" else math.nan,
    }
    rows = []
    for rho in (None, *alignments):
        bad = {} if rho is None else {"teacher": teacher.theta_star, "max_alignment": rho}
        result = flattest_interpolator(
            X, y, activation, m, seed=seed, **bad, **_solver_options(config, activation, teacher, rho)
        )
        row = {
            **common,
            "method": "best" if rho is None else "bad",
            "rho": math.nan if rho is None else rho,
            "lower": result.lower,
            "upper": result.upper,
            "certified": result.certified,
            "gap": result.gap,
            "pricing": result.pricing,
            "population_loss": population_loss(result.net, teacher).value,
            "bayes_risk": noise**2,
            # prop-memorising, part 1: Υ(net) ≥ Υ_mem of the labels the network fits exactly, its own outputs
            "memorising_fitted_upsilon": (
                relu_memorising_flatness(X, result.net(X).detach()) if name == "relu" else math.nan
            ),
        }
        if rho is None:
            # prop-ch4-repair (p = 1, m ≥ n): Υ*(m) ≤ Υ(net) + this, the network fitting y only to a residual
            row["residual_allowance"] = fit_residual_allowance(result.net, X, y)
        if rho == 0.0:
            row.update(_certificate_terms(X, y, activation, teacher, m, fields["teacher_upsilon"]))
        rows.append(row)
    return rows


def _memorising_bad_upsilon(X, y, teacher) -> float:
    """Υ of the memorising network built from misaligned directions (ρ = 0), an upper bound on Υ_bad; nan if
    some sample cannot be isolated by such a direction (eq. ``eq-memorising``)."""
    net = memorising_network(X, y, complement_basis(teacher.theta_star))
    return math.nan if net is None else min_flatness(net, X, y)


def _certificate_terms(X, y, activation, teacher, m: int, teacher_value: float) -> dict:
    """The centred-label certificate on ρ = 0: m^{1−p} V_cert^p ≤ Υ_bad (eq. ``eq-centred-certificate``), and
    its ratio to ``teacher_value``, the teacher's Υ at width m."""
    bound = measure_dual_bound(X, y, activation, y - y.mean(), teacher=teacher.theta_star, max_alignment=0.0)
    certificate_upsilon = m ** (1.0 - activation.p) * bound.value**activation.p
    terms = {}
    if X.shape[1] == 3 and activation.name == "relu":
        process = circle_process(X, y, teacher.theta_star)
        terms = {
            "process_sup": process["sup"],
            "kappa_perp_min": process["kappa_min"],
            "lambda_norm": process["lambda_norm"],
            "kappa_teacher": float(unit_flatness_weights(teacher.theta_star, X, activation)[0]),
        }
    return {
        **terms,
        "certificate_upsilon": certificate_upsilon,
        "certificate_sup": bound.sup,
        "certificate_dual_value": bound.dual_value,
        "certificate_pricing": bound.pricing,
        "certificate_ratio": certificate_upsilon / teacher_value,
    }


def _certificate(config: Config, name: str, d: int, n: int, seed: int) -> dict:
    """The centred-label certificate alone (no column generation), for the long n grid, with the terms of its
    proposition (where d = 3) and the bound B_n(δ)."""
    activation, teacher, X, y, m, fields = _dataset(config, name, d, n, seed)
    return {
        "sweep": "certificate",
        **fields,
        "rho": 0.0,
        "process_bound": process_bound(n, d, config.process_delta),
        **_certificate_terms(X, y, activation, teacher, m, fields["teacher_upsilon"]),
    }


def _isolation(config: Config, d: int, n: int, seed: int) -> dict:
    """The memorising regime on one dataset: which samples a misaligned direction isolates, against Cover."""
    teacher = single_index(d, link="relu", seed=seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    isolated = isolated_samples(X, complement_basis(teacher.theta_star))
    return {
        "sweep": "memorising",
        "d": d,
        "n": n,
        "seed": seed,
        "n_over_d": n / d,
        "isolated_fraction": sum(isolated) / n,
        # one sample's indicator: Bernoulli(q) by exchangeability, independent across datasets (an exact test)
        "first_isolated": bool(isolated[0]),
        "all_isolated": all(isolated),
        # prop-memorising (2)'s condition: every sample with y_i ≠ 0 isolated, so Υ_bad = Υ* = Υ_mem
        "labelled_isolated": all(flag for flag, label in zip(isolated, y.tolist(), strict=True) if label != 0),
        "cover_probability": cover_isolation_probability(n, d - 1),
        "memorising_upsilon": relu_memorising_flatness(X, y),
        "teacher_upsilon": teacher_upsilon(teacher, X, "relu", 1),
    }


def sweeps(config: Config) -> list[tuple[str, str, list[tuple[int, int]], tuple]]:
    """(name, activation, its (d, n) sizes, its alignments ρ0) of each column-generation sweep; the ``noisy``
    sweep's labels carry noise of standard deviation ``config.noise_std``, every other sweep's none."""
    d3, quadratic_d = config.certified_d, config.quadratic_regime_d

    def quadratic_n(d: int) -> int:
        dimension = bad_dimension("quadratic", d)
        assert dimension is not None  # the quadratic's bad neurons span quadratic forms in d - 1 variables
        return round(config.quadratic_share * dimension)

    return [
        ("certified", "relu", [(d3, n) for n in config.certified_n_grid], config.alignments),
        ("noisy", "relu", [(d3, n) for n in config.noisy_n_grid], (0.0,)),
        ("exact_bad", "relu", [(config.exact_bad_d, n) for n in config.exact_bad_n_grid], (0.0,)),
        ("relu_high_d", "relu", [(config.relu_high_d, n) for n in config.relu_high_n_grid], (0.0,)),
        (
            "quadratic",
            "quadratic",
            [(d, quadratic_n(d)) for d in config.quadratic_d_grid],
            (0.0,),
        ),
        ("quadratic_regime", "quadratic", [(quadratic_d, n) for n in config.quadratic_regime_n_grid], (0.0,)),
    ]


def _map(function, config: Config, points: list[dict], label: str, jobs, backend) -> list:
    return map_points(
        function,
        config,
        points,
        experiment="bad_interpolators",
        version=VERSION,
        jobs=jobs,
        backend=backend,
        desc=f"chapter 3: {label}",
    )


def run(config: Config, jobs: int | None = None, backend: str | None = None) -> dict[str, list[dict]]:
    """All sweeps, the ratio brackets of every point, and their slopes and local slopes across seeds.

    The column-generation points of all sweeps run in one batch, largest first (so that two processes finish
    together), and a point that two sweeps share (same activation, d, n, seed and alignments) runs once.
    """
    seeds = [config.seed + 100 * s for s in range(config.seeds)]
    planned: dict[str, list[dict[str, Any]]] = {
        sweep: [
            {
                "name": name,
                "d": d,
                "n": n,
                "seed": seed,
                "alignments": alignments,
                "noise": config.noise_std if sweep == "noisy" else 0.0,
            }
            for d, n in sizes
            for seed in seeds
        ]
        for sweep, name, sizes, alignments in sweeps(config)
    }

    def key(point):
        return repr(sorted(point.items()))

    unique = {key(p): p for points in planned.values() for p in points}
    order = sorted(unique, key=lambda key: -unique[key]["n"] * unique[key]["d"])  # n·d: a rough cost
    results = dict(
        zip(order, _map(_compare, config, [unique[k] for k in order], "flattest and bad", jobs, backend), strict=True)
    )
    tables = {
        sweep: [{"sweep": sweep, **row} for p in points for row in results[key(p)]] for sweep, points in planned.items()
    }
    points = [
        {"name": "relu", "d": config.certified_d, "n": n, "seed": seed}
        for n in config.certificate_n_grid
        for seed in seeds
    ]
    tables["certificate"] = _map(_certificate, config, points, "certificate", jobs, backend)
    isolation = [
        {"d": config.memorising_d, "n": n, "seed": config.seed + 100 * s}
        for n in config.memorising_n_grid
        for s in range(config.memorising_datasets)
    ]
    tables["memorising"] = _map(_isolation, config, isolation, "memorising regime", jobs, backend)
    ratio_rows = [r for sweep, *_ in sweeps(config) for r in ratios(tables[sweep])]
    ratio_rows += certificate_ratios(tables["certificate"])
    tables["ratios"] = ratio_rows
    tables["slopes"], tables["local_slopes"] = slopes(ratio_rows, config.fit_from_n_over_d)
    return tables


#: the fields of a bad row that its ratio row keeps
_KEPT = (
    "sweep",
    "activation",
    "c",
    "p",
    "d",
    "n",
    "m",
    "seed",
    "n_over_d",
    "rho",
    "noise",
    "teacher_upsilon",
    "bad_dimension",
    "memorising_upsilon",
    "memorising_bad_upsilon",
)


def _capped_by_teacher(upper: float, best: dict) -> float:
    """An upper end on Υ*: ``upper``, or the teacher's Υ where that is smaller and the teacher interpolates (no
    label noise: split into m copies, it is an interpolator of the width)."""
    return min(upper, best["teacher_upsilon"]) if best["noise"] == 0 else upper


def ratios(rows: list[dict]) -> list[dict]:
    """Per point and ρ0: the proven bracket [lower(bad)/upper(best), upper(bad)/lower(best)] on Υ_bad/Υ*, the ratio
    of the networks found, and the certificate's proven lower bound where computed.

    lower(bad) is the larger of the two lower bounds, and upper(best)
    the smaller of the flattest network's Υ plus its residual allowance (prop-ch4-repair: the network fits y only
    up to a residual; p = 1, elsewhere no allowance, ``allowance_included`` false) and the teacher's (the
    noiseless teacher, split into m copies, is an interpolator of the width too; with label noise it is not).
    Their ratio is ``separation`` (above 1: the bad set is proven less flat than the flattest) and, clamped at 1,
    the proven lower end ``proven`` (the bad set is a subset, so Υ_bad ≥ Υ*).
    """
    out = []
    for members in group(rows, "sweep", "activation", "d", "n", "seed").values():
        best = where(members, method="best")[0]
        # p = 1: the allowance (inf where its bound failed, so that nothing is claimed); elsewhere none exists
        allowance_included = best["p"] == 1
        best_upper = _capped_by_teacher(
            best["upper"] + (best["residual_allowance"] if allowance_included else 0.0), best
        )
        found_upper = _capped_by_teacher(best["upper"], best)
        for bad in where(members, method="bad"):
            separation = max(bad["lower"], best["lower"]) / best_upper
            out.append(
                {
                    **{k: bad[k] for k in _KEPT},
                    "separation": separation,  # lower(bad)/upper(best), not clamped: > 1 proves Υ_bad > Υ*
                    "proven": max(1.0, separation),
                    "outer": bad["upper"] / best["lower"] if best["lower"] > 0 else math.inf,
                    "estimate": bad["upper"] / found_upper,  # the two networks found
                    "certificate": bad.get("certificate_ratio", math.nan)
                    if best["noise"] == 0
                    else bad.get("certificate_upsilon", math.nan) / best_upper,
                    "certified": bool(bad["certified"] and best["certified"]),
                    "bad_certified": bool(bad["certified"]),
                    "allowance_included": allowance_included,
                    "best_upper": best["upper"],
                    "best_loss": best["population_loss"],
                    "bad_loss": bad["population_loss"],
                }
            )
    return out


def certificate_ratios(rows: list[dict]) -> list[dict]:
    """Rows of the ``certificate`` sweep as ``ratios`` rows: the certificate's proven lower bound, and no
    column-generation bracket (nan, so that :func:`slopes` fits only the certificate)."""
    absent = {
        name: math.nan
        for name in (
            "separation",
            "proven",
            "outer",
            "estimate",
            "best_upper",
            "best_loss",
            "bad_loss",
            "memorising_upsilon",
            "memorising_bad_upsilon",
        )
    }
    flags = {
        "certified": False,
        "bad_certified": False,
        "allowance_included": False,
        "bad_dimension": None,
    }
    return [{**r, **absent, **flags, "certificate": r["certificate_ratio"]} for r in rows]


def slopes(ratio_rows: list[dict], fit_from_n_over_d: float = 0.0) -> tuple[list[dict], list[dict]]:
    """Log-log slopes of each ratio against n/d per (sweep, ρ0), fitted per seed over n/d ≥ ``fit_from_n_over_d``
    then mean and 95 % interval (only where two sizes qualify); and the local slopes between consecutive n over
    every n, with intervals, to show where a fit bends."""
    fits, local = [], []
    for (sweep, rho), members in group(ratio_rows, "sweep", "rho", sort=True).items():
        c = members[0]["c"]
        for name in RATIOS:
            usable = [r for r in members if math.isfinite(r[name]) and r[name] > 0]
            if len(usable) < len(members) or len(distinct(usable, "n")) < 2:
                continue
            in_regime = [r for r in usable if r["n_over_d"] >= fit_from_n_over_d]
            if len(distinct(in_regime, "n")) >= 2:
                mean, low, high = slope_across_seeds(in_regime, "n_over_d", name)
                fits.append(
                    {
                        "sweep": sweep,
                        "rho": rho,
                        "ratio": name,
                        "slope": mean,
                        "low": low,
                        "high": high,
                        "theory": c / (c + 1),
                        "from_n_over_d": fit_from_n_over_d,
                        "to_n_over_d": max(column(in_regime, "n_over_d")),
                        "sizes": len(distinct(in_regime, "n")),
                    }
                )
            for step in local_slopes(usable, "n_over_d", name):
                local.append(
                    {
                        "sweep": sweep,
                        "rho": rho,
                        "ratio": name,
                        "n_over_d": step["x_mid"],
                        "slope": step["slope"],
                        "low": step["low"],
                        "high": step["high"],
                    }
                )
    return fits, local
