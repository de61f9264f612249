"""What chapter 3's comparison costs per point: the flattest interpolator and the flattest ρ0-bad one, with bounds.

    python bench/bad_set_cost.py                                  # ReLU, d = 3, ρ0 = 0, n = 6 ... 96
    python bench/bad_set_cost.py --activation quadratic --d 8 --n 8 16 24 --rho 0

For each n (and seed), a noiseless single-index teacher in dimension d with the activation as its link,
n samples, width m = 2n, then :func:`flatbook.flattest_interpolator` twice: over all directions (best)
and over the bad set ρ(u) ≤ ρ0 (bad).  Printed per point: the seconds of each solve, whether each
pricing was exact (so its lower bound is the proven optimum up to ``tol``) and certified, and the two
ratios that bracket the truth: lower(bad) / upper(best), the one a lower-bound theorem needs, and
upper(bad) / lower(best).  It measures what chapter 3's sweep would cost at these sizes; it is not a
timed test.
"""

from __future__ import annotations

import argparse

from flatbook import flattest_interpolator
from flatbook.data import single_index

from common import header, timed


def point(activation: str, d: int, n: int, rho: float, seed: int) -> dict:
    teacher = single_index(d, link=activation, noise_std=0.0, seed=seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    best, t_best = timed(lambda: flattest_interpolator(X, y, activation, 2 * n, seed=seed))
    bad, t_bad = timed(
        lambda: flattest_interpolator(X, y, activation, 2 * n, teacher=teacher.theta_star, max_alignment=rho, seed=seed)
    )
    return {
        "n": n,
        "seed": seed,
        "best_s": t_best,
        "bad_s": t_bad,
        "best": f"{best.pricing}, {'certified' if best.certified else 'gap ' + format(best.gap, '.2g')}",
        "bad": f"{bad.pricing}, {'certified' if bad.certified else 'gap ' + format(bad.gap, '.2g')}",
        "proven_ratio": bad.lower / best.upper,
        "outer_ratio": bad.upper / best.lower,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--activation", default="relu")
    parser.add_argument("--d", type=int, default=3)
    parser.add_argument("--n", type=int, nargs="+", default=[6, 12, 24, 48, 96])
    parser.add_argument("--rho", type=float, default=0.0, help="ρ0 of the bad set (default 0: orthogonal)")
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    if args.d < 2 or min(args.n) < 2 or not 0 <= args.rho < 1 or args.seeds < 1:
        parser.error("need d >= 2, every n >= 2, 0 <= rho < 1 and seeds >= 1")
    print(header(f"{args.activation}, d = {args.d}, ρ0 = {args.rho}, m = 2n, noiseless single-index teacher"))
    print("| n | seed | best s | bad s | best | bad | lower(bad)/upper(best) | upper(bad)/lower(best) |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.n:
        for seed in range(args.seeds):
            r = point(args.activation, args.d, n, args.rho, seed)
            print(
                f"| {n} | {seed} | {r['best_s']:.1f} | {r['bad_s']:.1f} | {r['best']} | {r['bad']} "
                f"| {r['proven_ratio']:.3g} | {r['outer_ratio']:.3g} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
