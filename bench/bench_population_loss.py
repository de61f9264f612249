"""The exact population loss for Gaussian inputs against Monte Carlo at 1 % precision, timed in the same run.

    python bench/bench_population_loss.py                       # m in {100, 1000, 10000}, d in {20, 100}
    python bench/bench_population_loss.py --m 100 --d 20

For a ReLU network with m random neurons (outer weights of size 1/m) and a noiseless single-index ReLU
teacher in dimension d: ``population_loss(..., method="exact")`` (closed-form arc-cosine kernels,
O((m + k) m d)) against ``method="monte carlo"`` with enough samples for a standard error of 1 % of the
loss.  The sample size comes from a pilot run of 20 000 samples (n = 20 000 (s / 0.01 F)²); past
``--max-samples`` the Monte Carlo is timed at that cap and its time scaled linearly to the sample size
it needs (marked "projected").  Printed: both times, their ratio, the two values and how many Monte
Carlo standard errors apart they are.
"""

from __future__ import annotations

import argparse

import torch

from flatbook import TwoLayerNet, population_loss
from flatbook.data import single_index

from common import header, timed

PILOT = 20_000


def point(m: int, d: int, max_samples: int, seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    net = TwoLayerNet(
        torch.randn(m, generator=generator, dtype=torch.float64) / m,
        torch.randn(m, d, generator=generator, dtype=torch.float64),
        "relu",
    )
    teacher = single_index(d, link="relu", noise_std=0.0, seed=seed)
    exact, t_exact = timed(lambda: population_loss(net, teacher, method="exact"))
    pilot = population_loss(net, teacher, n_test=PILOT, seed=seed + 1, method="monte carlo")
    needed = int(PILOT * (pilot.stderr / (0.01 * pilot.value)) ** 2) + 1
    samples = min(needed, max_samples)
    mc, t_mc = timed(lambda: population_loss(net, teacher, n_test=samples, seed=seed + 2, method="monte carlo"))
    t_needed = t_mc * needed / samples
    return {
        "m": m,
        "d": d,
        "exact_s": t_exact,
        "mc_s": t_needed,
        "projected": needed > samples,
        "samples": needed,
        "ratio": t_needed / t_exact,
        "exact": exact.value,
        "mc": mc.value,
        "z": (mc.value - exact.value) / mc.stderr,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--d", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--max-samples", type=int, default=2_000_000)
    args = parser.parse_args()
    if min(args.m) < 1 or min(args.d) < 2 or args.max_samples < PILOT:
        parser.error(f"need m >= 1, d >= 2 and --max-samples >= {PILOT}")
    print(header("ReLU network, noiseless single-index ReLU teacher, Monte Carlo to 1 % standard error"))
    print("| m | d | exact s | Monte Carlo s | samples | MC / exact | F exact | F Monte Carlo | z |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in args.d:
        for m in args.m:
            r = point(m, d, args.max_samples)
            mc = f"{r['mc_s']:.2f}" + (" (projected)" if r["projected"] else "")
            print(
                f"| {m} | {d} | {r['exact_s']:.4f} | {mc} | {r['samples']:,} | {r['ratio']:.0f} "
                f"| {r['exact']:.5g} | {r['mc']:.5g} | {r['z']:+.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
