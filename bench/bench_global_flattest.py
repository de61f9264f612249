"""The global flattest interpolator against the pipeline the book used before, on chapter 3's paper points.

    python bench/bench_global_flattest.py                      # n in {100, 200, 400, 800, 1600}, d = 100
    python bench/bench_global_flattest.py --n 100 200 --quick
    python bench/bench_global_flattest.py --slide-steps 0 --rounds 100   # the solver's own options

For each activation (ReLU, leaky ReLU, quadratic), n and seed (0 unless ``--seeds`` says otherwise), one
noiseless single-index teacher in d = 100 (chapter 3's paper configuration) and the same m = 2n random
directions (no teacher direction: no oracle) go to

- ``pipeline``: the flattest outer weights over those directions, then the direct search of
  :mod:`flatbook.search` (20 envelope-gradient steps, every iterate an exact interpolator): an upper
  bound on Υ*(m), with no lower bound;
- ``global``: :func:`flatbook.flattest_interpolator` warm-started from the same directions, width m:
  Υ of the network it returns (``upper``), the proven lower bound and the estimated one.

``--rounds``, ``--slide-steps`` and ``--warm-masters`` pass those options to the global solver (its defaults
otherwise).
Printed per point: seconds of each, the time ratio global / pipeline, Υ of each and their ratio
(≤ 1 means the global solver found an interpolator at least as flat), Υ of the teacher split into m
copies (an interpolator neither solver is given: how far both are from Υ*(m) at least), the gaps
upper / lower − 1 (proven and estimated), the rounds run and why they stopped (``StopReason``).
One process, two threads, same instances.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from flatbook import flattest_interpolator
from flatbook.data import single_index
from flatbook.experiments.bad_interpolators import teacher_upsilon
from flatbook.interpolators import random_directions
from flatbook.search import direct_search

from common import header, timed


def point(name, n, d, seed=0, steps=20, **options):
    teacher = single_index(d, link=name, noise_std=0.0, seed=seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    start = random_directions(2 * n, d, seed=seed + 1)
    pipeline, t_pipeline = timed(lambda: direct_search(X, y, name, start, steps=steps))
    best, t_global = timed(lambda: flattest_interpolator(X, y, name, 2 * n, start_directions=start, **options))
    return {
        "activation": name,
        "n": n,
        "d": d,
        "m": 2 * n,
        "seed": seed,
        "pipeline_s": t_pipeline,
        "global_s": t_global,
        "time_ratio": t_global / t_pipeline,
        # the teacher split into m copies: an interpolator neither solver is given (an oracle upper bound)
        "pipeline_upsilon": pipeline.upsilon,
        "teacher_upsilon": teacher_upsilon(teacher, X, name, 2 * n),
        "global_upper": best.upper,
        "global_lower": best.lower,
        "global_lower_estimate": best.lower_estimate,
        "upsilon_ratio": best.upper / pipeline.upsilon,
        "proven_gap": best.upper / best.lower - 1,
        "estimated_gap": best.upper / best.lower_estimate - 1,
        "rounds": best.rounds,
        "atoms": int(best.atoms.directions.shape[0]),
        "stop": best.stop.value,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100, 200, 400, 800, 1600])
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--activations", nargs="+", default=["relu", "leaky_relu", "quadratic"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="teacher, sample and start seeds")
    parser.add_argument("--quick", action="store_true", help="n = 100, 200 only")
    parser.add_argument("--rounds", type=int, help="column generation rounds (the solver's default if not given)")
    parser.add_argument("--slide-steps", type=int, help="steps of the atoms' slide per round (default: the solver's)")
    parser.add_argument(
        "--warm-masters", action="store_true", help="warm-start the inexact masters (warm_masters=True)"
    )
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    if any(n < 2 for n in args.n) or args.d < 2:
        parser.error("n and d must be at least 2")
    if any(seed < 0 for seed in args.seeds):
        parser.error("seeds must be non-negative")
    if (args.rounds is not None and args.rounds < 1) or (args.slide_steps is not None and args.slide_steps < 0):
        parser.error("--rounds must be at least 1 and --slide-steps at least 0")
    options = {
        key: value
        for key, value in (
            ("rounds", args.rounds),
            ("slide_steps", args.slide_steps),
            ("warm_masters", args.warm_masters or None),
        )
        if value is not None
    }
    ns = [100, 200] if args.quick else args.n
    print(header(f"d = {args.d}, m = 2n, noiseless single-index teacher, solver options {options or 'default'}"))
    print(
        "| activation | n | seed | pipeline s | global s | time ratio | Υ pipeline | Υ global | Υ ratio | Υ teacher "
        "| proven gap | estimated gap | rounds | stop |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in args.activations:
        for n, seed in itertools.product(ns, args.seeds):
            row = point(name, n, args.d, seed, **options)
            rows.append(row)
            print(
                f"| {name} | {n} | {seed} | {row['pipeline_s']:.1f} | {row['global_s']:.1f} "
                f"| {row['time_ratio']:.2f} "
                f"| {row['pipeline_upsilon']:.4g} | {row['global_upper']:.4g} | {row['upsilon_ratio']:.3f} "
                f"| {row['teacher_upsilon']:.4g} "
                f"| {row['proven_gap']:.3g} | {row['estimated_gap']:.3g} | {row['rounds']} "
                f"| {row['stop']} |",
                flush=True,
            )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
