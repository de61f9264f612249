"""Exact pricing (ReLU, d = 3): one ExactPricer for many λ against the enumeration afresh for each λ.

    python bench/bench_pricing.py
    python bench/bench_pricing.py --n 48 96 192 --duals 5

Column generation prices tens of dual points λ on the same data.  Three ways to get sup_u G_λ(u) and the
2n best faces for each of ``--duals`` random λ (Gaussian data, d = 3, ReLU):

- afresh: the enumeration redone for every λ: enumerate the arrangement, form and
  pseudo-invert every face's GᵀG, and value every face's stationary point and every ray in float64
  (``afresh`` below);
- one-shot: :func:`flatbook.pricing.exact_dual_ratio_sup`, an :class:`~flatbook.pricing.ExactPricer`
  built for one λ and used once;
- reused: one :class:`~flatbook.pricing.ExactPricer` built once, then ``sup`` per λ.

Printed per n: the faces; how many have their stationary point u or −u inside (mean over the λ: the reused
pricer values these, and those its float32 test cannot tell from them); seconds per λ of each (fastest of
three runs of all ``--duals``; the build once, apart); the ratios afresh / reused and one-shot / reused;
and the largest difference of the 2n best values between afresh and reused, relative to the largest
(round-off: the same faces, the same formula).
"""

from __future__ import annotations

import argparse
from functools import partial

import torch

from flatbook import get_activation
from flatbook.pricing import ExactPricer, arrangement_faces, exact_dual_ratio_sup, face_values

from common import fastest, header


def afresh(lam, X, activation, top, chunk=20_000):
    """The ``top`` best values of the enumeration redone from scratch for one λ (no reuse across λ),
    and how many faces have their stationary point u or −u inside."""
    n, r = X.shape
    sq_norms, slope = (X * X).sum(1), activation.negative_slope
    rays, ray_patterns, spans, patterns = arrangement_faces(X)
    outer = (X[:, :, None] * X[:, None, :]).reshape(-1, r * r)
    values, inside = [face_values(lam, X, sq_norms, rays, ray_patterns, slope)], 0
    for start in range(0, patterns.shape[0], chunk):
        pat, span = patterns[start : start + chunk], spans[start : start + chunk]
        s = torch.where(pat > 0, torch.ones_like(pat), torch.where(pat < 0, torch.full_like(pat, slope), 0 * pat))
        normal = span.transpose(1, 2) @ ((s * s) @ outer).reshape(-1, r, r) @ span
        rhs = span.transpose(1, 2) @ ((s * lam) @ X)[:, :, None]
        u = torch.einsum("frk,fk->fr", span, (torch.linalg.pinv(normal, hermitian=True) @ rhs)[:, :, 0])
        plus, minus = face_values(lam, X, sq_norms, u, pat, slope, both_signs=True)
        values.extend((plus, minus))
        inside += int(((plus >= 0) | (minus >= 0)).sum())
    return torch.topk(torch.cat(values), top).values, inside


def each(price, duals) -> list:
    """``price`` (a function of λ) at each λ of ``duals``."""
    return [price(lam) for lam in duals]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[48, 96, 192])
    parser.add_argument("--duals", type=int, default=5, help="random dual points λ per n")
    args = parser.parse_args()
    if any(n < 4 for n in args.n) or args.duals < 1:
        parser.error("every --n must be at least 4 and --duals at least 1")
    relu = get_activation("relu")
    print(header("ReLU, d = 3, top = 2n"))
    print(
        "| n | faces | inside per λ | build s | afresh s/λ | one-shot s/λ | reused s/λ | afresh / reused "
        "| one-shot / reused | max rel. diff |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        gen = torch.Generator().manual_seed(n)
        X = torch.randn(n, 3, generator=gen, dtype=torch.float64)
        duals = [torch.randn(n, generator=gen, dtype=torch.float64) for _ in range(args.duals)]
        top = 2 * n
        pricer, build = fastest(ExactPricer, X, relu, repeats=1)
        faces = sum(chunk[0].shape[0] for chunk in pricer.chunks)
        before, t_before = fastest(each, partial(afresh, X=X, activation=relu, top=top), duals, repeats=3)
        _, t_once = fastest(each, partial(exact_dual_ratio_sup, X=X, activation=relu, top=top), duals, repeats=3)
        now, t_now = fastest(each, partial(pricer.sup, top=top), duals, repeats=3)
        diff = max(
            float((values[: result[2].shape[0]] - result[2]).abs().max() / result[0])
            for (values, _), result in zip(before, now, strict=True)
        )
        inside = sum(count for _, count in before) / len(before)
        per = args.duals
        print(
            f"| {n} | {faces} | {inside:.0f} | {build:.2f} | {t_before / per:.3f} | {t_once / per:.3f} "
            f"| {t_now / per:.4f} | {t_before / t_now:.1f} | {t_once / t_now:.1f} | {diff:.1e} |"
        )


if __name__ == "__main__":
    main()
