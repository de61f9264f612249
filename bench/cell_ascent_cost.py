"""What the cell-by-cell ascent costs and gives: the global solver with it (its default) and without.

    python bench/cell_ascent_cost.py                               # d:n = 6:48, 8:64, 20:100, 20:500; seed 0
    python bench/cell_ascent_cost.py --instances 20:500 --rounds 10 --steps 2 20

For each instance d:n, a single-index ReLU teacher with label noise 0.3 (``single_index(d, "relu", noise_std=0.3,
seed)``, samples with seed + 1), width m = 2n, and :func:`flatbook.flattest_interpolator` with ``rounds`` rounds
(``tol=0.01``): with the cell ascent (:func:`flatbook.pricing.ascend_cells`) at each ``--steps`` moves per start at
every level (0, the default: ``column_generation.CELL_ASCENT_STEPS``, the solver's moves per level), and the peer,
the same solver with ``cell_ascent=False`` (gradient ascent only), in the same process after one warm-up solve, the
order of the two alternating from row to row. Printed per row: Υ, rounds, stop and seconds per round of each, the
ratio of seconds per round against the peer, and of Υ. One process; run it alone. The cell ascent runs only without
exact pricing, so every instance needs d > 3."""

from __future__ import annotations

import argparse
import time

from flatbook import flattest_interpolator
from flatbook.data import single_index

from common import cell_ascent_fixed, header, instance


def solve(X, y, n: int, rounds: int, seed: int, steps: int | None) -> dict:
    """One solve, with the cell ascent at ``steps`` moves per start at every level (0: the solver's default
    moves, which grow with the pricer's level; None: without the cell ascent)."""
    with cell_ascent_fixed(moves=steps or None):
        started = time.perf_counter()
        result = flattest_interpolator(
            X, y, "relu", 2 * n, rounds=rounds, tol=0.01, seed=seed, cell_ascent=steps is not None
        )
        seconds = time.perf_counter() - started
    return {
        "upsilon": result.upper,
        "rounds": result.rounds,
        "stop": result.stop.value,
        "per_round": seconds / result.rounds,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--instances", type=instance, nargs="+", default=[(6, 48), (8, 64), (20, 100), (20, 500)], help="d:n pairs"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--steps", type=int, nargs="+", default=[0], help="moves per start at every level (0: the solver's default)"
    )
    args = parser.parse_args()
    if args.rounds < 1 or min(args.steps) < 0:
        parser.error("--rounds must be at least 1 and every --steps at least 0 (0: the solver's default)")
    if min(d for d, _ in args.instances) <= 3:
        parser.error("every instance needs d > 3: below, pricing is exact and the cell ascent never runs")
    print(header(f"single-index ReLU, noise 0.3, m = 2n, at most {args.rounds} rounds"))
    runs = "with cells: Υ, rounds, stop, s/round | without: Υ, rounds, stop, s/round"
    print(f"| d | n | seed | moves | {runs} | time ratio | Υ ratio |")
    print("|---|---|---|---|---|---|---|---|")
    X, y = single_index(4, link="relu", noise_std=0.3, seed=0).sample(16, seed=1)
    solve(X, y, 16, 2, 0, 0)  # warm-up: imports, first factorisations
    row_number = 0
    for d, n in args.instances:
        for seed in args.seeds:
            X, y = single_index(d, link="relu", noise_std=0.3, seed=seed).sample(n, seed=seed + 1)
            for steps in args.steps:
                first, second = (None, steps) if row_number % 2 == 0 else (steps, None)
                runs = {option: solve(X, y, n, args.rounds, seed, option) for option in (first, second)}
                row, peer = runs[steps], runs[None]
                row_number += 1
                cells = " | ".join(
                    f"{run['upsilon']:.4f}, {run['rounds']}, {run['stop']}, {run['per_round']:.2f}"
                    for run in (row, peer)
                )
                ratios = f"{row['per_round'] / peer['per_round']:.2f} | {row['upsilon'] / peer['upsilon']:.4f}"
                print(f"| {d} | {n} | {seed} | {steps} | {cells} | {ratios} |", flush=True)


if __name__ == "__main__":
    main()
