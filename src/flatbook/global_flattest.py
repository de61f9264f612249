"""The flattest interpolator over all networks of a width, with proven bounds, and a check of its certificate.

Υ*(m) is the minimum of Υ (eq. ``eq-upsilon``) over *every* width-m network that
interpolates the data, every direction allowed.  Book, chapter 2, section
"The flattest interpolator over all directions":

- **Splitting lemma** (eq. ``eq-splitting``).  Group a network's neurons by direction u, with
  A_u the total effective weight on u and m_u the number of neurons.  Jensen within a group
  and Hölder across groups give, for p = 2c/(c+1) ≥ 1,
  Υ(w) ≥ Σ_u κ(u)|A_u|^p m_u^{1−p} ≥ m^{1−p} (Σ_u κ(u)^{1/p} |A_u|)^p,
  with equality when u carries m_u ∝ κ(u)^{1/p}|A_u| equal copies.  Hence
  Υ*(m) ≥ m^{1−p} V*^p, with equality up to integer rounding, where
- **the measure program** (eq. ``eq-measure-program``)
  V* = min over finite signed measures μ on the sphere of ∫ κ(u)^{1/p} d|μ|(u)
  subject to ∫ σ(⟨u, x_i⟩) dμ(u) = y_i, a convex, semi-infinite weighted-ℓ1 program
  with a minimiser of at most n atoms, and
- **its dual** (eq. ``eq-measure-dual``): max λᵀy s.t. sup_u G_λ(u) ≤ 1, with the dual ratio
  G_λ of :mod:`flatbook.pricing`.  Any λ gives V* ≥ λᵀy / sup_u G_λ(u).

:func:`flattest_interpolator` solves the measure program by column generation
(:class:`~flatbook.column_generation.ColumnGeneration`), splits the atoms it ends with into integer copies
(:func:`split_into_copies`, optimal for the separable convex allocation) and reports Υ of that network (an
upper bound on Υ*(m)) with the best *proven* lower bound, the dual point λ that gives it and the proven
bound on sup G_λ it used.  :func:`verify_certificate` recomputes that lower bound from λ with independent
code and checks the network.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from .activations import HomogeneousActivation, get_activation
from .admissible import AdmissibleSet
from .backend import as_tensor, check_data, is_count, lstsq_driver
from .certified_pricing import CapBranchAndBound
from .column_generation import CERTIFY_UP_TO, MAX_CAPS, ColumnGeneration, Pricer, StopReason
from .errors import FlatbookInputError, SolverError
from .flatness import min_flatness, unit_flatness_weights
from .flattest import flattest_outer_weights
from .interpolators import random_directions
from .network import TwoLayerNet
from .pricing import dual_ratio, maximize_dual_ratio, nudge_inactive

__all__ = [
    "Atoms",
    "CertificateCheck",
    "DualBound",
    "FlattestInterpolator",
    "StopReason",
    "flattest_interpolator",
    "measure_dual_bound",
    "residual_measure_bound",
    "fit_residual_allowance",
    "rounding_excess_bound",
    "split_into_copies",
    "verify_certificate",
]


class Atoms(NamedTuple):
    """The distinct directions of a flattest interpolator and the total effective weight on each."""

    directions: torch.Tensor  #: (K, d) unit rows
    weights: torch.Tensor  #: (K,) A_u = Σ of ã_j over the neurons with direction u


@dataclass
class FlattestInterpolator:
    """The result of :func:`flattest_interpolator`: a network, its Υ and bounds on Υ*(width)."""

    net: TwoLayerNet  #: exactly ``width`` neurons, interpolating
    upper: float  #: Υ(net) = min_flatness(net, X, y), an upper bound on Υ*(width)
    lower: float  #: a proven lower bound on Υ of every admissible width-``width`` interpolator
    lower_estimate: float  #: the bound implied by the largest pricing ratio found (an estimate, not proven)
    certified: bool  #: (upper − lower) / upper ≤ tol: from proven numbers only
    gap: float  #: (upper − lower) / upper
    atoms: Atoms  #: distinct directions and their total weights (the measure's atoms)
    stop: StopReason  #: why column generation stopped (only ``StopReason.CONVERGED`` is a proof)
    width: int  #: m
    p: float  #: 2c/(c+1)
    measure_value: float  #: V of the atoms returned: Σ κ(u)^{1/p}|A_u| (≥ V*)
    measure_lower: float  #: proven lower bound on V*: λᵀy / ``dual_sup`` with λ = ``dual``
    measure_lower_estimate: float  #: the lower bound on V* implied by the largest pricing ratio found
    pricing: str  #: how sup G_λ was bounded: "exact", "branch-and-bound" or "bound"
    rounds: int  #: column-generation rounds run
    dual: torch.Tensor  #: the dual point λ (n,) of the proven lower bound
    dual_sup: float  #: the proven upper bound on sup G_λ over the admissible directions used with it
    admissible: str  #: the directions allowed, in words
    columns: torch.Tensor  #: (M, d) the directions of the last restricted master (a dictionary for the set)
    #: per round: master value (approximate where ``master_exact`` is False), bounds, columns, pricing level
    history: list[dict] = field(default_factory=list)
    activation: HomogeneousActivation | None = None
    tol: float = 1e-3
    notes: tuple[str, ...] = ()  #: what else happened, in words

    @property
    def status(self) -> str:
        """What happened, in words: the stop (saying whether it proves anything), the set, any notes."""
        words = self.stop.describe(self.pricing, None, self.rounds)
        return "; ".join([f"{words} (over {self.admissible})", *self.notes])

    def at_width(self, X, y, width: int) -> FlattestInterpolator:
        """The same measure split for another width: no new solve, the bounds rescale as m^{1−p}."""
        X, y = check_data(X, y)
        if not is_count(width, 1):
            raise FlatbookInputError(f"width must be a positive int, got {width!r}.")
        return dataclasses.replace(
            self,
            **_at_width(
                self.atoms, X, y, self.activation, int(width), self.measure_lower, self.measure_lower_estimate, self.tol
            ),
        )

    @property
    def upper_measure_bound(self) -> float:
        """m^{1−p} V^p: Υ of the atoms split in ideal (real-valued) proportions."""
        return self.width ** (1.0 - self.p) * self.measure_value**self.p


def split_into_copies(weights: torch.Tensor, kappa: torch.Tensor, p: float, width: int) -> list[int]:
    """Integer copies m_k ≥ 1, Σ m_k = width, minimising Σ_k κ_k |A_k|^p m_k^{1−p} (eq. ``eq-splitting``).

    Greedy: each further copy goes to the atom whose term drops most; optimal because each term
    is convex and decreasing in m_k.  For p = 1 every allocation has the same value.
    """
    K = weights.shape[0]
    if width < K:
        raise FlatbookInputError(f"width {width} is below the {K} atoms of the flattest measure.")
    cost = (kappa * weights.abs() ** p).tolist()
    counts = [1] * K
    if p == 1.0:
        for extra in range(width - K):  # any split is optimal: spread evenly
            counts[extra % K] += 1
        return counts
    heap = [(-(b * (1.0 - 2.0 ** (1.0 - p))), k) for k, b in enumerate(cost)]
    heapq.heapify(heap)
    for _ in range(width - K):
        _, k = heapq.heappop(heap)
        counts[k] += 1
        c = counts[k]
        heapq.heappush(heap, (-(cost[k] * (c ** (1.0 - p) - (c + 1) ** (1.0 - p))), k))
    return counts


def rounding_excess_bound(atoms: int, width: int, p: float) -> float:
    """(m/(m − K))^{p−1} − 1: how far the integer split can exceed m^{1−p} V^p, relatively."""
    return (width / (width - atoms)) ** (p - 1.0) - 1.0 if width > atoms else math.inf


def _split_network(atoms: Atoms, kappa: torch.Tensor, p: float, width: int, activation) -> TwoLayerNet:
    """The width-``width`` network of the atoms split into the copies of :func:`split_into_copies`."""
    counts = torch.tensor(split_into_copies(atoms.weights, kappa, p, width), device=atoms.directions.device)
    theta = torch.repeat_interleave(atoms.directions, counts, dim=0)
    a = torch.repeat_interleave(atoms.weights / counts.to(atoms.weights.dtype), counts)
    return TwoLayerNet(a, theta, activation)


def _at_width(atoms, X, y, activation, width, measure_lower, measure_lower_estimate, tol) -> dict:
    """The fields of a result that depend on the width: the network (eq. ``eq-splitting``) and the bounds."""
    p = activation.p
    K = atoms.directions.shape[0]
    lower = width ** (1.0 - p) * measure_lower**p
    if width < K:
        raise FlatbookInputError(
            f"width {width} is below the {K} atoms of the flattest measure found, so no width-{width} network is "
            f"built from it; every admissible width-{width} interpolator still has Υ >= {lower:.6g} (proven). "
            f"Ask for a width of at least {K}."
        )
    kappa = unit_flatness_weights(atoms.directions, X, activation)
    net = _split_network(atoms, kappa, p, width, activation)
    upper = min_flatness(net, X, y)
    gap = (upper - lower) / upper
    return {
        "net": net,
        "upper": upper,
        "lower": lower,
        "lower_estimate": width ** (1.0 - p) * measure_lower_estimate**p,
        "certified": gap <= tol,
        "gap": gap,
        "width": width,
        "measure_value": float((kappa ** (1.0 / p) * atoms.weights.abs()).sum()),
    }


def _nudged_atoms(atoms: Atoms, X, y, activation, admissible: AdmissibleSet) -> Atoms:
    """Atoms moved off the hyperplanes they sit on (see :func:`flatbook.pricing.nudge_inactive`), inside the
    admissible set, weights refitted by least squares; the original atoms if that breaks interpolation."""
    moved = admissible.project(nudge_inactive(atoms.directions, X, basis=admissible.subspace))
    F = activation(X @ moved.T)
    refit = torch.linalg.lstsq(F, y[:, None], driver=lstsq_driver(F)).solution[:, 0]
    if float((F @ refit - y).abs().max()) <= 1e-9 * float(y.abs().max()):
        return Atoms(moved, refit)
    return atoms


def _check_counts(**counts) -> None:
    """Each count is (value, minimum, what it is); raise unless value is an int (or None where allowed)."""
    for name, (value, minimum, what, none_ok) in counts.items():
        if value is None and none_ok:
            continue
        if not is_count(value, minimum):
            kind = "a positive int" if minimum == 1 else "a non-negative int"
            allowed = " or None" if none_ok else ""
            raise FlatbookInputError(f"{name} must be {kind}{allowed} ({what}), got {value!r}.")


def flattest_interpolator(
    X,
    y,
    activation="relu",
    width: int | None = None,
    *,
    teacher=None,
    max_alignment=None,
    start_directions=None,
    n_start: int | None = None,
    rounds: int = 100,
    tol: float = 1e-3,
    pricing_starts: int = 64,
    pricing_steps: int = 60,
    slide_steps: int = 20,
    certify_up_to: int = CERTIFY_UP_TO,
    max_caps: int = MAX_CAPS,
    cell_ascent: bool = True,
    inexact_master: bool = True,
    warm_masters: bool = False,
    stall_rounds: int | None = 5,
    seed: int = 0,
    progress: bool = False,
    time_limit: float | None = None,
) -> FlattestInterpolator:
    """The flattest width-``width`` interpolator of (X, y), every direction allowed, with proven bounds.

    ``teacher`` (k, d, orthonormal rows) with ``max_alignment`` = ρ0 ∈ [0, 1) restricts every direction to
    ρ(u) = ‖Θ* u‖ ≤ ρ0: the flattest ρ0-bad interpolator.  ``start_directions`` warm-start the master (they
    are projected into the admissible set); if there are exactly ``width`` of them, the result is never worse
    than :func:`~flatbook.flattest.flattest_outer_weights` on them.  ``n_start`` random admissible directions
    (default max(2n, 2d)) join them in the first master (with ``n_start=0`` the start directions must
    interpolate on their own).

    Column generation (:class:`~flatbook.column_generation.ColumnGeneration`, where each stop is decided)
    runs at most ``rounds`` rounds and stops with ``StopReason.CONVERGED`` when the master's value is within
    ``tol`` (relative) of a proven lower bound.  Pricing is certified where the admissible directions span
    at most ``certify_up_to`` dimensions (default ``CERTIFY_UP_TO`` = 3; 0: never): by the ReLU family's
    arrangement, or by cap branch-and-bound for the ReLU family and the quadratic (on a ρ0-band, or above
    dimension 3, where its cost grows steeply; at most ``max_caps`` caps a round, default ``MAX_CAPS`` =
    500 000: a search that runs out proves a weaker bound); elsewhere it is a
    multi-start ascent (``pricing_starts`` random starts, ``pricing_steps`` steps; for the ReLU family over a whole
    subsphere, then, unless ``cell_ascent=False``, a cell-by-cell ascent from the best endpoints and from random
    starts, :func:`~flatbook.pricing.ascend_cells`, which can find the maxima that gradient ascent misses at the
    cells' walls, at a cost per round that bench/README.md measures) and the proven bound is a closed form.  A
    heuristic stop (the largest ratio found within ``tol`` of the master, no new column, or ``stall_rounds`` rounds
    without progress by ``tol``; ``None``: never) is taken only after the pricing has been escalated to its most
    thorough level and that found nothing either; the result's ``stop`` says which, and ``certified`` is computed
    from proven numbers only.

    Each round also polishes the master's atoms into at most 4 (:func:`~flatbook.atom_polish.polish_atoms`)
    and adds them as columns when they interpolate at least as flat as the master (the ReLU family only
    where its directions span more than 3 dimensions: below, its optima sit at the kinks of σ), and slides
    the master's n basic directions downhill on V for ``slide_steps`` steps
    (:func:`~flatbook.atom_polish.slide`) in rounds where the polish did not succeed.
    ``inexact_master`` solves the master during the rounds only to a tenth of the column generation's gap;
    ``warm_masters`` starts each inexact master after an inexact one from an early iterate of it (Gondzio
    1998).  ``progress`` shows a tqdm bar over the rounds; ``time_limit`` (seconds) ends the rounds after the
    first one that passes it (``StopReason.TIME_LIMIT``), and after half of it the pricing is escalated to its
    most thorough level (the branch-and-bound where certified), so that the rest goes to a proof: at that
    certifying level a time limit, not tailing-off, ends a run that has not converged.

    The result's ``lower`` is a proven lower bound on Υ of every admissible interpolator of this width
    (eq. ``eq-splitting`` with eq. ``eq-measure-dual``), from the dual point ``dual`` and the proven bound
    ``dual_sup`` on sup G_λ (:func:`verify_certificate` recomputes it); ``upper`` is Υ of ``net``.  A width
    below the number of atoms found raises :class:`~flatbook.errors.FlatbookInputError`.

    Examples
    --------
    >>> from flatbook import flattest_interpolator
    >>> from flatbook.data import single_index
    >>> X, y = single_index(d=2, link="relu", seed=0).sample(4, seed=3)
    >>> result = flattest_interpolator(X, y, width=4)
    >>> result.stop, result.certified
    (<StopReason.CONVERGED: 'converged'>, True)
    >>> round(result.lower, 4), round(result.upper, 4)  # proven lower bound, Υ of result.net
    (1.4777, 1.4777)
    """
    activation = get_activation(activation)
    X, y = check_data(X, y)
    n, d = X.shape
    if not isinstance(cell_ascent, bool):
        raise FlatbookInputError(f"cell_ascent must be True or False, got {cell_ascent!r}.")
    _check_counts(
        width=(width, 1, "the number of neurons m", False),
        rounds=(rounds, 1, "column-generation rounds", False),
        pricing_starts=(pricing_starts, 1, "random starts of the pricing ascent", False),
        pricing_steps=(pricing_steps, 0, "steps of the pricing ascent", False),
        certify_up_to=(certify_up_to, 0, "the largest dimension priced with a proof; 0: none", False),
        max_caps=(max_caps, 1, "caps the branch-and-bound may bound in a round", False),
        slide_steps=(slide_steps, 0, "steps of the slide; 0: no slide", False),
        stall_rounds=(stall_rounds, 1, "rounds without progress before a tailing-off stop; None: never", True),
        n_start=(n_start, 0, "random directions in the first master", True),
    )
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise FlatbookInputError(f"tol must be a positive number (a relative gap), got {tol!r}.")
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise FlatbookInputError(f"time_limit must be a positive number of seconds or None, got {time_limit!r}.")
    if float(y.abs().max()) == 0.0:
        raise FlatbookInputError("y is identically zero; the flattest interpolator is the zero network.")
    assert width is not None  # checked above
    admissible = AdmissibleSet(d, teacher, max_alignment, X.device)
    dictionary = X.new_zeros(0, d)
    if start_directions is not None:
        dictionary = as_tensor(start_directions, "start_directions", ndim=2, device=X.device)
        if dictionary.shape[1] != d:
            raise FlatbookInputError(f"start_directions has {dictionary.shape[1]} columns but X has d = {d}.")
        dictionary = admissible.project(dictionary)
    solve = ColumnGeneration(
        X,
        y,
        activation,
        admissible,
        start_directions=dictionary,
        n_start=None if n_start is None else int(n_start),
        rounds=int(rounds),
        tol=float(tol),
        pricing_starts=int(pricing_starts),
        pricing_steps=int(pricing_steps),
        slide_steps=int(slide_steps),
        certify_up_to=int(certify_up_to),
        max_caps=int(max_caps),
        cell_ascent=cell_ascent,
        inexact_master=inexact_master,
        warm_masters=warm_masters,
        stall_rounds=None if stall_rounds is None else int(stall_rounds),
        seed=seed,
        progress=progress,
        time_limit=time_limit,
    ).run()
    atoms = Atoms(solve.directions, solve.weights)
    if activation.piecewise_linear:
        atoms = _nudged_atoms(atoms, X, y, activation, admissible)
    result = FlattestInterpolator(
        **_at_width(atoms, X, y, activation, int(width), solve.proven, solve.estimate, float(tol)),
        atoms=atoms,
        stop=solve.stop,
        p=activation.p,
        measure_lower=solve.proven,
        measure_lower_estimate=solve.estimate,
        pricing=solve.mode,
        rounds=solve.rounds,
        dual=solve.dual,
        dual_sup=solve.dual_sup,
        admissible=admissible.description,
        columns=solve.columns,
        history=solve.history,
        activation=activation,
        tol=float(tol),
    )
    if dictionary.shape[0] == width and width >= n:
        warm = flattest_outer_weights(dictionary, X, y, activation)
        if warm.flatness < result.upper:
            gap = (warm.flatness - result.lower) / warm.flatness
            result = dataclasses.replace(
                result,
                net=warm.net,
                upper=warm.flatness,
                gap=gap,
                certified=gap <= tol,
                notes=("the warm-start dictionary's flattest weights were flatter than the split atoms",),
            )
    return result


class DualBound(NamedTuple):
    """A proven lower bound on V* from one dual point (the result of :func:`measure_dual_bound`)."""

    value: float  #: λᵀy / sup G_λ ≤ V* (0 if λᵀy ≤ 0)
    dual_value: float  #: λᵀy
    sup: float  #: the proven upper bound on sup_u G_λ(u) over the admissible directions
    pricing: str  #: how ``sup`` was bounded: "exact", "branch-and-bound" or "bound"


def measure_dual_bound(
    X, y, activation, lam, *, teacher=None, max_alignment=None, certify_up_to: int = CERTIFY_UP_TO
) -> DualBound:
    """V* ≥ λᵀy / sup_u G_λ(u) for one dual point λ, over every direction or over ρ(u) ≤ ρ0 (eq. ``eq-measure-dual``).

    Weak duality of the measure program: any λ with λᵀy > 0 bounds V* from below once the supremum of the
    dual ratio over the admissible directions is bounded from above with a proof: by the ReLU family's
    arrangement enumeration, by cap branch-and-bound, or by the closed forms of :mod:`flatbook.pricing`
    (the most thorough that ``certify_up_to`` allows, as :func:`~flatbook.column_generation.pricing_mode`
    chooses).  With
    the splitting lemma every admissible width-m interpolator then has Υ ≥ m^{1−p} value^p
    (eq. ``eq-splitting``).  Chapter 3 uses the centred labels λ = y − ȳ on the misaligned directions
    (eq. ``eq-centred-certificate``).
    """
    activation = get_activation(activation)
    X, y = check_data(X, y)
    lam = as_tensor(lam, "lam", ndim=1, device=X.device)
    if lam.shape[0] != X.shape[0]:
        raise FlatbookInputError(f"lam has {lam.shape[0]} entries but there are n = {X.shape[0]} samples.")
    admissible = AdmissibleSet(X.shape[1], teacher, max_alignment, X.device)
    pricer = Pricer(X, activation, admissible, torch.Generator().manual_seed(0), certify_up_to=certify_up_to)
    sup = pricer.proven_sup(lam)
    dual_value = float(lam @ y)
    value = dual_value / sup if dual_value > 0 and sup > 0 else 0.0
    return DualBound(value=value, dual_value=dual_value, sup=sup, pricing=pricer.mode)


def residual_measure_bound(X, residual, activation="relu") -> float:
    """An upper bound on V*(r), the measure program's value (eq. ``eq-measure-program``) for the labels r; p = 1.

    For p = 1 the value V*(·) is a gauge of the labels (positively homogeneous and subadditive), so a
    network g that fits y up to r = y − g(X) gives V*(y) ≤ V*(g(X)) + V*(r) ≤ Υ(g) + V*(r), and Υ*(m) ≤ V*(y)
    for every width m ≥ n (a finite measure reduces to at most n atoms without raising its value).  That
    turns an approximate interpolator into a statement about exact ones.  With M = 4n random directions
    whose n × M feature matrix Φ has full row rank, c = Φ⁺r (computed) interpolates r up to e = r − Φc, and
    V*(e) ≤ max_j κ_j √M ‖e‖₂ / σ_n(Φ) (any e is interpolated by Φ⁺e), so
    V*(r) ≤ Σ_j κ_j|c_j| + max_j κ_j √M ‖e‖₂ / σ_n(Φ); ``inf`` where Φ is rank deficient.  σ_n(Φ) is taken
    from below with a margin for round-off: the computed singular values are those of some Φ + E, with ‖E‖₂ a
    modest multiple of ε‖Φ‖₂ (the SVD's backward error, and the rounding of Φ's entries; ε the machine
    precision), so by Weyl's inequality σ_n(Φ) ≥ σ̂_n − ‖E‖₂; M·ε·σ̂₁ is taken for ‖E‖₂ (a rule of thumb for
    that multiple, not a proven constant).  Where the margin leaves nothing, ``inf``.
    """
    activation = get_activation(activation)
    if activation.p != 1.0:
        raise FlatbookInputError(
            f"residual_measure_bound uses the subadditivity of the measure value, which holds for p = 1 "
            f"(activations of degree 1, such as relu); {activation.name!r} has p = {activation.p:.4g}."
        )
    X, residual = check_data(X, residual)
    n, d = X.shape
    directions = random_directions(4 * n, d, seed=0).to(X.device)
    features = activation(X @ directions.T)
    left, singular, right = torch.linalg.svd(features, full_matrices=False)
    rounding = features.shape[1] * torch.finfo(features.dtype).eps * float(singular[0])
    smallest = float(singular[n - 1]) - rounding
    if smallest <= 0:
        return math.inf
    kappa = unit_flatness_weights(directions, X, activation)
    weights = right.T @ ((left.T @ residual) / singular)
    left_over = float(torch.linalg.vector_norm(residual - features @ weights))
    return float(kappa @ weights.abs()) + float(kappa.max()) * math.sqrt(4 * n) * left_over / smallest


def fit_residual_allowance(net, X, y) -> float:
    """For p = 1, :func:`residual_measure_bound` of the labels ``net`` leaves unfitted, y − net(X): then
    Υ*(m) ≤ Υ(net) + it for every width m ≥ n (chapter 4, ``prop-ch4-repair``); NaN for other p, where the
    measure value is not subadditive."""
    if net.activation.p != 1.0:
        return math.nan
    return residual_measure_bound(X, y - net(X).detach(), net.activation)


@dataclass
class CertificateCheck:
    """What :func:`verify_certificate` recomputed, and what disagreed (``problems``; empty when all holds)."""

    measure_lower: float  #: λᵀy / ``sup``, recomputed: a proven lower bound on V*
    lower: float  #: m^{1−p} (``measure_lower``)^p: a proven lower bound on Υ*(m)
    sup: float  #: an independent proven upper bound on sup G_λ over the admissible directions
    sampled_sup: float  #: the largest G_λ at an admissible direction found by sampling and ascent (≤ sup)
    upsilon: float  #: Υ(net), recomputed
    residual: float  #: max_i |net(x_i) − y_i| / max|y|
    alignment: float  #: the largest ρ(u) over the net's directions (0 without a teacher)
    problems: list[str]
    #: False when the independent branch-and-bound ran out of caps before ``rel_tol``, so that a claimed bound
    #: between ``lower`` and the true one is neither confirmed nor refuted (``unconfirmed`` says what)
    confirmed: bool = True
    unconfirmed: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether no check failed (an unconfirmed bound is not a failure: see ``confirmed``)."""
        return not self.problems


def verify_certificate(
    result: FlattestInterpolator,
    X,
    y,
    *,
    teacher=None,
    max_alignment=None,
    samples: int = 20_000,
    rel_tol: float = 1e-6,
    max_caps: int = 2_000_000,
    seed: int = 0,
    raise_on_failure: bool = True,
) -> CertificateCheck:
    """Recompute the proven lower bound of a :func:`flattest_interpolator` result from scratch, and check its net.

    The bound: weak duality of the measure program, V* ≥ λᵀy / sup G_λ for the result's λ (``dual``), with
    sup G_λ bounded independently of the solver's pricing: where the result's pricing was certified, by cap
    branch-and-bound to ``rel_tol`` (:class:`~flatbook.certified_pricing.CapBranchAndBound`, a different
    method from the arrangement enumeration of exact pricing, and started afresh), else by the closed-form
    bounds; and, as a floor that any valid bound must clear, the largest G_λ found at ``samples`` random
    admissible directions and the local maxima an ascent reaches from the best of them.  The network: its
    width, interpolation (to 1e-8 max|y|), alignment (ρ ≤ ρ0 to 1e-12), Υ against ``upper`` (to 1e-9), the
    rounding allowance of the split (``upper`` ≤ m^{1−p}V^p (m/(m − K))^{p−1}) and lower ≤ upper.  Pass the
    ``teacher`` and ``max_alignment`` the result was computed with.  Raises
    :class:`~flatbook.errors.SolverError` listing what disagreed unless ``raise_on_failure`` is False.  A
    branch-and-bound that runs out of its ``max_caps`` before ``rel_tol`` proves only a weaker bound: a claim
    above it is then reported as unconfirmed (``confirmed`` False), not as a failure.

    Examples
    --------
    >>> from flatbook import flattest_interpolator
    >>> from flatbook.data import single_index
    >>> from flatbook.global_flattest import verify_certificate
    >>> X, y = single_index(d=2, link="relu", seed=0).sample(4, seed=3)
    >>> result = flattest_interpolator(X, y, width=4)
    >>> check = verify_certificate(result, X, y)
    >>> check.problems
    []
    >>> round(check.lower, 4), round(check.upsilon, 4)
    (1.4777, 1.4777)
    """
    activation = result.activation
    if activation is None or not isinstance(result, FlattestInterpolator):
        raise FlatbookInputError("verify_certificate needs the result of flattest_interpolator.")
    X, y = check_data(X, y, result.net.input_dim)
    n = X.shape[0]
    problems: list[str] = []
    admissible = AdmissibleSet(X.shape[1], teacher, max_alignment, X.device)
    if admissible.description != result.admissible:
        problems.append(f"the result is over {result.admissible}, the check over {admissible.description}")
    lam = result.dual.to(X)
    if lam.shape != (n,):
        raise FlatbookInputError(f"the result's dual has shape {tuple(lam.shape)}, the data n = {n} samples.")
    # The floor: G_λ at admissible directions, the best of them moved up by ascent.
    generator = torch.Generator().manual_seed(seed)
    U = admissible.random(samples, generator)
    values = dual_ratio(U, lam, X, activation)
    best = U[torch.topk(values, min(64, samples)).indices]
    best, best_values = maximize_dual_ratio(lam, X, activation, best, admissible.project)
    sampled = max(float(values.max()), float(best_values.max()))
    # An independent proven bound on the supremum.
    complete = True
    if result.pricing != "bound":
        search = CapBranchAndBound(X, activation, admissible)
        certified = search.sup(lam, starts=best, rel_tol=rel_tol, max_caps=max_caps)
        sup, sampled, complete = certified.upper, max(sampled, certified.best), certified.complete
    else:
        sup = Pricer(X, activation, admissible, generator, certify_up_to=0).closed_form_bound(lam)
    dual_value = float(lam @ y)
    measure_lower = dual_value / sup if dual_value > 0 and sup > 0 else 0.0
    p, m = result.p, result.width
    lower = m ** (1.0 - p) * measure_lower**p
    if result.dual_sup < sampled * (1.0 - 1e-9):
        problems.append(
            f"the claimed bound on sup G_λ, {result.dual_sup:.9g}, is below G_λ = {sampled:.9g} at an admissible "
            "direction: it is no bound"
        )
    claimed = dual_value / result.dual_sup if dual_value > 0 and result.dual_sup > 0 else 0.0
    if result.measure_lower > claimed * (1.0 + 1e-9) + 1e-300:
        problems.append(
            f"measure_lower = {result.measure_lower:.9g} exceeds λᵀy / dual_sup = {claimed:.9g} from the result's own λ"
        )
    unconfirmed = []
    if result.measure_lower > measure_lower * (1.0 + max(2.0 * rel_tol, 1e-9)) + 1e-300:
        words = f"measure_lower = {result.measure_lower:.9g} exceeds the recomputed proven bound {measure_lower:.9g}"
        if complete:
            problems.append(words)
        else:
            unconfirmed.append(
                f"{words}, from a branch-and-bound stopped at {max_caps} caps with sup G_λ in "
                f"[{sampled:.9g}, {sup:.9g}]: raise max_caps to confirm or refute it"
            )
    if abs(result.lower - m ** (1.0 - p) * result.measure_lower**p) > 1e-9 * max(result.lower, 1e-300):
        problems.append("lower is not m^{1−p} measure_lower^p (eq. eq-splitting)")
    net = result.net
    if net.width != m:
        problems.append(f"the network has {net.width} neurons, not width = {m}")
    residual = float((net(X) - y).abs().max()) / float(y.abs().max())
    if residual > 1e-8:
        problems.append(f"the network does not interpolate: max|net(x_i) − y_i| = {residual:.2e} max|y|")
    alignment = float(admissible.alignment(net.theta).max())
    if admissible.max_alignment is not None and alignment > admissible.max_alignment + 1e-12:
        problems.append(f"a direction has ρ = {alignment:.15g} > ρ0 = {admissible.max_alignment:g}")
    upsilon = min_flatness(net, X, y)
    if abs(upsilon - result.upper) > 1e-9 * upsilon:
        problems.append(f"Υ(net) = {upsilon:.12g}, the result says upper = {result.upper:.12g}")
    K = result.atoms.directions.shape[0]
    if not result.notes and upsilon > result.upper_measure_bound * (1.0 + rounding_excess_bound(K, m, p)) * (1 + 1e-9):
        problems.append("Υ(net) exceeds m^{1−p}V^p by more than the rounding allowance (m/(m − K))^{p−1}")
    if result.lower > upsilon * (1.0 + 1e-9):
        problems.append(f"lower = {result.lower:.9g} exceeds Υ(net) = {upsilon:.9g}")
    if result.certified != ((result.upper - result.lower) / result.upper <= result.tol):
        problems.append("certified does not follow from upper, lower and tol")
    check = CertificateCheck(
        measure_lower=measure_lower,
        lower=lower,
        sup=sup,
        sampled_sup=sampled,
        upsilon=upsilon,
        residual=residual,
        alignment=alignment,
        problems=problems,
        confirmed=not unconfirmed,
        unconfirmed=tuple(unconfirmed),
    )
    if problems and raise_on_failure:
        raise SolverError("the certificate does not check: " + "; ".join(problems))
    return check
