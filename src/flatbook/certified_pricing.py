"""A proven supremum of the dual ratio in any dimension: branch-and-bound over spherical caps.

The lower bound on V* from a dual point λ, V* ≥ λᵀy / sup_u G_λ(u) (eq. ``eq-measure-dual``), is proven only
with a proven upper bound on the supremum.  :class:`~flatbook.pricing.ExactPricer` gives the supremum itself
for the ReLU family in dimension ≤ 3; :class:`CapBranchAndBound` bounds it for the ReLU family and the
quadratic in any dimension, over the whole sphere, a subspace, or the ρ0-band {ρ(u) ≤ ρ0} of chapter 3
(book, chapter 2, "Certified pricing in any dimension", eq. ``eq-cap-bound``):

- **Caps.**  The sphere of the admissible subspace (dimension r) is covered by the radial projections of
  boxes on the faces of the cube [−1, 1]^r.  A box with centre c and half-widths h lies in the cap of centre
  ĉ = c/‖c‖ and angular radius δ with sin δ = ‖h‖ / max(1, ‖c‖ − ‖h‖): every point p of the box has
  ‖p‖ ≥ max(1, ‖c‖ − ‖h‖) and lies within ‖p − c‖ ≤ ‖h‖ of the line through c.
- **A bound on each cap.**  For a unit u in the cap, z_i = ⟨u, x_i⟩ lies in
  [‖x_i‖ cos(min(π, β_i + δ)), ‖x_i‖ cos(max(0, β_i − δ))], β_i the angle between ĉ and x_i.
  *ReLU family* (σ(z) = z, z > 0; s z, z ≤ 0): samples whose interval has one sign are linear on the cap,
  σ(z_i) = s_i z_i, so their part of the numerator is ⟨g, u⟩ with g = Σ λ_i s_i x_i, which on the cap lies
  in ‖g‖[cos(min(π, β_g + δ)), cos(max(0, β_g − δ))]; the others (the hyperplanes that cut the cap) add
  λ_i σ(z_i) within their intervals.  The denominator κ^{1/p} = 2√(S T) is bounded below by the fixed
  samples only: S ≥ (2/n) max(Σ s_i² min z_i², (‖B ĉ‖ − ‖X‖₂ · 2 sin(δ/2))₊²) with B = diag(s) X on the fixed
  samples, T ≥ (2/n)(Σ_{z_i > 0 surely} ‖x_i‖² + s² Σ_{others} ‖x_i‖²).  With the Cauchy-Schwarz bound
  G_λ ≤ (n/4) max |λ_i|/‖x_i‖ / γ over the samples that can be active on the cap (eq. ``eq-pricing-bound``),
  the smaller of the two bounds the cap.
  *Quadratic*: with u = cos φ ĉ + sin φ w (w ⊥ ĉ, φ ≤ δ), the numerator has |uᵀMu| ≤ |ĉᵀMĉ| +
  min(1, 2 sin δ) ‖(I − ĉĉᵀ)Mĉ‖ + sin²δ ‖M‖₂ (M = Σ λ_i x_i x_iᵀ; the three terms of the expansion);
  T = uᵀ B u ≥ cos²δ ĉᵀBĉ − 2 sin δ ‖(I − ĉĉᵀ)Bĉ‖, S ≥ (2/n) Σ min z_i⁴ and
  S ≥ (2/n²)(uᵀGu)² (power mean, G = Σ x_i x_iᵀ, bounded below in the same way); and the matrix geometric
  mean bound of :func:`~flatbook.pricing.quadratic_dual_ratio_bound` holds on every cap.
  Each bound tends to G_λ(ĉ) (or to the supremum of G_λ near ĉ, where G_λ jumps) as δ → 0.
- **Branching.**  The caps with the largest bounds are split (the box halved along its longest side) until
  every bound is within ``rel_tol`` of the best value found at an admissible point (the cap centres, moved into
  the band where they lie outside it, and the given starts), or the cap budget is spent.  The result's
  ``upper`` is the largest bound over every cap, discarded ones included (those are within ``rel_tol`` of the
  best value found), so it is proven however the search ends.

The bounds are evaluated in float64 with a relative allowance of 1e-9 for round-off (``ROUND_OFF``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .activations import HomogeneousActivation, LeakyReLU
from .admissible import AdmissibleSet
from .errors import FlatbookInputError
from .pricing import dual_ratio, dual_ratio_bound, quadratic_dual_ratio_bound

__all__ = ["CapBranchAndBound", "CertifiedSup", "cap_branch_and_bound_available"]

#: every cap bound is inflated by this relative allowance for the round-off of its float64 evaluation
ROUND_OFF = 1e-9
#: a box whose half-widths are all below this is not split further (its cap has radius ~1e-12)
SMALLEST_BOX = 1e-12


def cap_branch_and_bound_available(activation: HomogeneousActivation) -> bool:
    """Whether :class:`CapBranchAndBound` has cap bounds for ``activation``: the ReLU family and the quadratic."""
    return activation.piecewise_linear or (activation.even and activation.degree == 2.0)


@dataclass
class CertifiedSup:
    """What :meth:`CapBranchAndBound.sup` returns: a proven upper bound on sup G_λ and the best points found."""

    upper: float  #: proven: G_λ(u) ≤ upper for every admissible u
    best: float  #: the largest G_λ found at an admissible direction (so upper ≥ sup ≥ best)
    directions: torch.Tensor  #: (k, d) the best admissible directions found (cap centres or starts), best first
    values: torch.Tensor  #: (k,) G_λ at them
    caps: int  #: caps bounded
    complete: bool  #: True when upper ≤ (1 + rel_tol)·best; False when the cap budget ran out first


def _convex_lower(value: torch.Tensor, gradient: torch.Tensor, C: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """A lower bound on f(u) over each cap, for f convex with f(ĉ) = ``value`` and ∇f(ĉ) = ``gradient``:
    f(u) ≥ f(ĉ) + ⟨∇f, u − ĉ⟩ and, with u = cos φ ĉ + sin φ w (w ⊥ ĉ, φ ≤ δ),
    ⟨∇f, u − ĉ⟩ ≥ −(1 − cos δ)|⟨∇f, ĉ⟩| − sin δ ‖(I − ĉĉᵀ)∇f‖."""
    radial = (gradient * C).sum(1)
    tangent = torch.linalg.vector_norm(gradient - radial[:, None] * C, dim=1)
    angle = delta.clamp(max=math.pi / 2)
    bound = value - (1.0 - torch.cos(angle)) * radial.abs() - torch.sin(angle) * tangent
    return torch.where(delta <= math.pi / 2, bound, torch.zeros_like(bound)).clamp(min=0.0)


class CapBranchAndBound:
    """sup of G_λ over the admissible directions, bounded by branch-and-bound over caps, for many λ.

    ``admissible`` (default: every direction) is an :class:`~flatbook.admissible.AdmissibleSet`: the search runs
    on the unit sphere of its subspace and, for a ρ0-band, discards the caps that miss the band.  Everything
    that does not depend on λ is computed here.
    """

    def __init__(self, X: torch.Tensor, activation: HomogeneousActivation, admissible: AdmissibleSet | None = None):
        if not cap_branch_and_bound_available(activation):
            raise FlatbookInputError(
                f"cap branch-and-bound has bounds for the ReLU family and the quadratic, not {activation!r}; "
                "use flatbook.pricing.dual_ratio_bound."
            )
        self.X, self.activation = X, activation
        n, d = X.shape
        self.admissible = AdmissibleSet(d, device=X.device) if admissible is None else admissible
        self.basis = self.admissible.basis
        self.Xr = X @ self.basis  # coordinates in the admissible subspace
        self.r = self.Xr.shape[1]
        self.sub_norms = torch.linalg.vector_norm(self.Xr, dim=1)  # angles are taken in the subspace
        self.sq_norms = (X * X).sum(1)  # T uses the full ‖x_i‖²
        self.norms = self.sq_norms.sqrt()
        self.spectral = float(torch.linalg.matrix_norm(self.Xr, ord=2)) if n else 0.0
        band = self.admissible.max_alignment
        #: the angle between the band's edge and the teacher's span (None: no band to stay inside)
        self.band_angle = None if self.admissible.whole_subsphere or band is None else math.acos(band)
        if isinstance(activation, LeakyReLU):
            self.slope = activation.negative_slope
        else:  # the quadratic's forms
            self.G = self.Xr.T @ self.Xr
            self.B = 8.0 / n * (self.Xr * self.sq_norms[:, None]).T @ self.Xr
        signs = (1.0,) if activation.even else (1.0, -1.0)  # σ even: u and −u have one value
        lo, hi = [], []
        for k in range(self.r):
            for sign in signs:
                box_lo = -torch.ones(self.r, dtype=X.dtype, device=X.device)
                box_hi = torch.ones(self.r, dtype=X.dtype, device=X.device)
                box_lo[k] = box_hi[k] = sign
                lo.append(box_lo)
                hi.append(box_hi)
        self.initial = torch.stack(lo), torch.stack(hi)

    # -- geometry -----------------------------------------------------------------------------------------

    def _caps(self, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(unit centres ĉ (B, r), angular radii δ (B,)) of the caps that contain the boxes [lo, hi]."""
        centre, half = (lo + hi) / 2.0, (hi - lo) / 2.0
        size, length = torch.linalg.vector_norm(half, dim=1), torch.linalg.vector_norm(centre, dim=1)
        floor = torch.clamp(length - size, min=1.0)
        ratio = size / floor
        # sin δ ≤ ratio < 1 with ⟨p, c⟩ > 0 (as ‖c‖ > ‖h‖) gives δ ≤ asin(ratio); otherwise the whole sphere.
        delta = torch.where(ratio < 1.0, torch.asin(ratio.clamp(max=1.0)), torch.full_like(ratio, math.pi))
        return centre / length[:, None], delta * (1.0 + ROUND_OFF) + ROUND_OFF

    def _z_intervals(self, C: torch.Tensor, delta: torch.Tensor):
        """(⟨ĉ, x_i⟩, lower, upper ends of ⟨u, x_i⟩ over the cap) for every cap and sample, each (B, n)."""
        a = C @ self.Xr.T
        norms = self.sub_norms[None, :]
        beta = torch.acos((a / norms.clamp_min(1e-300)).clamp(-1.0, 1.0))
        slack = ROUND_OFF * norms
        hi = norms * torch.cos((beta - delta[:, None]).clamp(min=0.0)) + slack
        lo = norms * torch.cos((beta + delta[:, None]).clamp(max=math.pi)) - slack
        return a, lo, hi

    # -- the bounds of eq. ``eq-cap-bound`` ----------------------------------------------------------------

    def _relu_family_bounds(self, lam, C, delta, a, lo, hi) -> torch.Tensor:
        n, s = self.X.shape[0], self.slope
        positive, negative = lo > 0, hi <= 0
        ambiguous = ~(positive | negative)
        slope = positive.to(lo.dtype) + s * negative.to(lo.dtype)  # 0 on the ambiguous samples
        g = (slope * lam) @ self.Xr  # Σ λ_i s_i x_i over the fixed samples, (B, r)
        g_norm = torch.linalg.vector_norm(g, dim=1)
        beta_g = torch.acos(((g * C).sum(1) / g_norm.clamp_min(1e-300)).clamp(-1.0, 1.0))
        fixed_hi = g_norm * torch.cos((beta_g - delta).clamp(min=0.0))
        fixed_lo = g_norm * torch.cos((beta_g + delta).clamp(max=math.pi))
        # An ambiguous sample has lo ≤ 0 < hi: σ(z_i) ∈ [s·lo, hi].
        low_term, high_term = lam * s * lo, lam * hi
        amb_hi = torch.where(ambiguous, torch.maximum(low_term, high_term), 0.0).sum(1)
        amb_lo = torch.where(ambiguous, torch.minimum(low_term, high_term), 0.0).sum(1)
        numerator = torch.maximum((fixed_hi + amb_hi).abs(), (fixed_lo + amb_lo).abs())
        chord = 2.0 * torch.sin(delta / 2.0)
        fixed_at_centre = torch.linalg.vector_norm(slope * a, dim=1)
        S_linear = (fixed_at_centre - self.spectral * chord).clamp(min=0.0) ** 2
        S_samples = (slope**2 * torch.where(positive, lo**2, torch.where(negative, hi**2, 0.0))).sum(1)
        # ‖Bu‖² is convex: ‖Bu‖² ≥ ‖Bĉ‖² + 2⟨BᵀBĉ, u − ĉ⟩, tight to first order in δ.
        S_tangent = _convex_lower(fixed_at_centre**2, 2.0 * (slope**2 * a) @ self.Xr, C, delta)
        S = 2.0 / n * torch.maximum(torch.maximum(S_linear, S_samples), S_tangent)
        T = 2.0 / n * ((s * s + (1.0 - s * s) * positive.to(lo.dtype)) * self.sq_norms).sum(1)
        kappa = 2.0 * torch.sqrt(S * T)
        ratio_bound = torch.where(kappa > 0, numerator / kappa.clamp_min(1e-300), math.inf)
        if s == 0.0:
            # The ReLU: the hyperplanes that cut the cap add Σ_{A∩D} λ_i z_i ≤ Q β γ to the numerator (Q the largest
            # |λ_i|/‖x_i‖ there, β² = Σ_{A∩D} ‖x_i‖², γ² = Σ_{A∩D} z_i²) and γ², β² to the denominator's sums; with
            # |⟨g, u⟩| ≤ P α (α = ‖X_F u‖), Cauchy-Schwarz gives G ≤ (n/4) √((P² + Q²β²) / (T_F + β²)), monotone
            # in β², so its larger end over β² ∈ [0, Σ_A ‖x_i‖²] holds for every active set.
            T_fixed = (positive.to(lo.dtype) * self.sq_norms).sum(1)
            T_cut = (ambiguous.to(lo.dtype) * self.sq_norms).sum(1)
            per_cut = torch.where(ambiguous, lam.abs() / self.norms.clamp_min(1e-300), 0.0).amax(1)
            P = torch.where(
                S > 0, torch.maximum(fixed_hi.abs(), fixed_lo.abs()) / (n / 2.0 * S).clamp_min(1e-300).sqrt(), 0.0
            )
            P = torch.where((S > 0) | (g_norm == 0), P, math.inf)
            at_zero = torch.where(T_fixed > 0, P / T_fixed.clamp_min(1e-300).sqrt(), math.inf)
            at_all = torch.sqrt((P**2 + per_cut**2 * T_cut) / (T_fixed + T_cut).clamp_min(1e-300))
            mixed = n / 4.0 * torch.maximum(torch.where(P > 0, at_zero, 0.0), at_all)
            ratio_bound = torch.minimum(ratio_bound, mixed)
        live = ~negative if s == 0.0 else torch.ones_like(negative)
        per_sample = torch.where(self.norms > 0, lam.abs() / self.norms.clamp_min(1e-300), torch.zeros_like(self.norms))
        largest = torch.where(live, per_sample, 0.0).amax(1)
        cauchy_schwarz = n / 4.0 * largest / (1.0 if s == 0.0 else s)
        return torch.minimum(ratio_bound, cauchy_schwarz)

    def _quadratic_bounds(self, lam, C, delta, a, lo, hi) -> torch.Tensor:
        n = self.X.shape[0]
        sin_d = torch.sin(delta.clamp(max=math.pi / 2))
        cos_d = torch.cos(delta.clamp(max=math.pi / 2))
        twice = (2.0 * sin_d).clamp(max=1.0)  # sin 2φ ≤ min(1, 2 sin δ) for φ ≤ δ

        def form_range(Q):
            """(ĉᵀQĉ, ‖(I − ĉĉᵀ)Qĉ‖) for every centre."""
            Qc = C @ Q
            value = (Qc * C).sum(1)
            return value, torch.linalg.vector_norm(Qc - value[:, None] * C, dim=1)

        M = (self.Xr * lam[:, None]).T @ self.Xr
        value, tangent = form_range(M)
        numerator = value.abs() + twice * tangent + sin_d**2 * float(torch.linalg.matrix_norm(M, ord=2))
        min_sq = torch.where((lo <= 0) & (hi >= 0), 0.0, torch.minimum(lo * lo, hi * hi))  # min z_i² on the cap
        b_value, b_tangent = form_range(self.B)
        T = torch.maximum(cos_d**2 * b_value - twice * b_tangent, 8.0 / n * (min_sq * self.sq_norms).sum(1))
        g_value, g_tangent = form_range(self.G)
        gram_low = (cos_d**2 * g_value - twice * g_tangent).clamp(min=0.0)
        # Σ z_i⁴ is convex in u: Σ z_i⁴ ≥ Σ a_i⁴ + 4⟨Σ a_i³ x_i, u − ĉ⟩, tight to first order in δ.
        S_tangent = _convex_lower((a**4).sum(1), 4.0 * (a**3) @ self.Xr, C, delta)
        S = torch.maximum(
            torch.maximum(2.0 / n * (min_sq * min_sq).sum(1), 2.0 / n**2 * gram_low**2), 2.0 / n * S_tangent
        )
        k_2 = 3.0 * 2.0 ** (-2.0 / 3.0)
        denominator = k_2**0.75 * S.clamp(min=0.0) ** 0.25 * T.clamp(min=0.0) ** 0.5
        return torch.where(denominator > 0, numerator / denominator.clamp_min(1e-300), math.inf)

    def cap_bounds(self, lam: torch.Tensor, C: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """Proven upper bounds on G_λ over the caps (centres ĉ (B, r) in subspace coordinates, radii δ)."""
        a, lo, hi = self._z_intervals(C, delta)
        bounds = (self._relu_family_bounds if self.activation.piecewise_linear else self._quadratic_bounds)(
            lam, C, delta, a, lo, hi
        )
        return bounds * (1.0 + ROUND_OFF)

    def _whole_sphere_bound(self, lam: torch.Tensor) -> float:
        """The closed-form bound of :mod:`flatbook.pricing`, which holds on every cap."""
        if self.activation.piecewise_linear:
            return dual_ratio_bound(lam, self.X, self.activation)
        return quadratic_dual_ratio_bound(lam, self.X, self.admissible.subspace)

    # -- the search ---------------------------------------------------------------------------------------

    def sup(
        self,
        lam: torch.Tensor,
        starts: torch.Tensor | None = None,
        rel_tol: float = 1e-3,
        max_caps: int = 200_000,
        top: int = 1,
        batch: int = 2048,
    ) -> CertifiedSup:
        """Branch-and-bound for sup G_λ to a relative ``rel_tol``, within ``max_caps`` caps (see the module).

        ``starts`` (k, d): admissible directions whose values seed the best one (e.g. a heuristic ascent's
        maxima), so that caps are discarded early.  ``top``: how many of the best directions to return.
        """
        if not (rel_tol > 0 and max_caps >= 1 and top >= 1):
            raise FlatbookInputError("need rel_tol > 0, max_caps >= 1 and top >= 1.")
        X, activation = self.X, self.activation
        whole = self._whole_sphere_bound(lam)
        found_u, found_v = X[:0], X.new_zeros(0)

        def keep_best(U, values):
            nonlocal found_u, found_v
            values, U = torch.cat([found_v, values]), torch.cat([found_u, U])
            order = torch.topk(values, min(top, values.shape[0])).indices
            found_u, found_v = U[order], values[order]

        if starts is not None and starts.shape[0]:
            keep_best(starts, dual_ratio(starts, lam, X, activation))
        ceiling = whole * (1.0 + ROUND_OFF)

        def evaluate(lo, hi):
            """The caps' bounds (−inf where a cap misses the band), their centres' values kept as found."""
            C, delta = self._caps(lo, hi)
            bound = self.cap_bounds(lam, C, delta).clamp(max=ceiling)
            centres = C @ self.basis.T
            if self.band_angle is not None:
                # The angle to the teacher's span, acos ρ, is 1-Lipschitz on the sphere: a cap reaches the band
                # iff its centre's angle plus δ reaches the band's edge.
                angle = torch.acos(self.admissible.alignment(centres).clamp(max=1.0))
                bound = torch.where(angle + delta >= self.band_angle, bound, -math.inf)
                centres = self.admissible.project(centres)
            keep_best(centres, dual_ratio(centres, lam, X, activation))
            return bound

        lo, hi = self.initial
        bound = evaluate(lo, hi)
        discarded, caps = -math.inf, lo.shape[0]
        while True:
            best = float(found_v[0]) if found_v.shape[0] else 0.0
            open_ = bound > (1.0 + rel_tol) * best
            if bool((~open_).any()):
                discarded = max(discarded, float(bound[~open_].max()))
            lo, hi, bound = lo[open_], hi[open_], bound[open_]
            splittable = (hi - lo).amax(1) > 2 * SMALLEST_BOX
            if not bool(splittable.any()) or caps >= max_caps:
                break
            order = torch.argsort(torch.where(splittable, bound, -math.inf), descending=True)[:batch]
            order = order[splittable[order]]
            rest = torch.ones_like(bound, dtype=torch.bool)
            rest[order] = False
            lo_split, hi_split = lo[order], hi[order]
            axis = torch.argmax(hi_split - lo_split, dim=1)
            middle = ((lo_split + hi_split) / 2.0).gather(1, axis[:, None])[:, 0]
            rows = torch.arange(order.shape[0], device=X.device)
            left_hi, right_lo = hi_split.clone(), lo_split.clone()
            left_hi[rows, axis] = middle
            right_lo[rows, axis] = middle
            new_lo, new_hi = torch.cat([lo_split, right_lo]), torch.cat([left_hi, hi_split])
            lo, hi = torch.cat([lo[rest], new_lo]), torch.cat([hi[rest], new_hi])
            bound = torch.cat([bound[rest], evaluate(new_lo, new_hi)])
            caps += new_lo.shape[0]
        best = float(found_v[0]) if found_v.shape[0] else 0.0
        upper = max(best, discarded, float(bound.max()) if bound.shape[0] else -math.inf)
        return CertifiedSup(
            upper=upper,
            best=best,
            directions=found_u,
            values=found_v,
            caps=caps,
            complete=upper <= (1.0 + rel_tol) * best,
        )
