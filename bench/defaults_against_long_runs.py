"""How far the global solver's defaults end from long multi-start runs where pricing is heuristic (d > 3).

    python bench/defaults_against_long_runs.py                   # d = 8, n = 64 and d = 6, n = 48, seeds 0-4
    python bench/defaults_against_long_runs.py --instances 8:64 --seeds 0 1

For each instance d:n and seed: a noiseless single-index ReLU teacher (``single_index(d, "relu", seed)``,
samples with seed + 1000), width m = 2n, and :func:`flatbook.flattest_interpolator` three times: with its
defaults, as a long run (``rounds=80, stall_rounds=None, pricing_starts=256``) and as a longer one
(``rounds=400``, otherwise the same).  Nothing is proven in these dimensions (the proven lower bounds are
closed forms, far below), so the references are the long runs' Υ: upper bounds on Υ*(m), not Υ*(m).
Printed per row: Υ, rounds and stop of each run, and defaults / min(long, longer) − 1, the excess of the
defaults over the best run.  One process, two threads.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from flatbook import flattest_interpolator
from flatbook.data import single_index

from common import header

RUNS = {
    "defaults": {},
    "long": {"rounds": 80, "stall_rounds": None, "pricing_starts": 256},
    "longer": {"rounds": 400, "stall_rounds": None, "pricing_starts": 256},
}


def instance(text: str) -> tuple[int, int]:
    """'d:n' as two ints, d ≥ 2 and n ≥ 1."""
    try:
        d, n = (int(part) for part in text.split(":"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"an instance is d:n, e.g. 8:64, got {text!r}") from exc
    if d < 2 or n < 1:
        raise argparse.ArgumentTypeError(f"need d >= 2 and n >= 1, got {text!r}")
    return d, n


def point(d: int, n: int, seed: int) -> dict:
    X, y = single_index(d, link="relu", seed=seed).sample(n, seed=seed + 1000)
    row: dict = {"d": d, "n": n, "seed": seed}
    for name, options in RUNS.items():
        started = time.perf_counter()
        result = flattest_interpolator(X, y, "relu", 2 * n, seed=seed, **options)
        row[name] = {
            "upsilon": result.upper,
            "rounds": result.rounds,
            "stop": result.stop.value,
            "seconds": time.perf_counter() - started,
        }
    row["excess"] = row["defaults"]["upsilon"] / min(row["long"]["upsilon"], row["longer"]["upsilon"]) - 1
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=instance, nargs="+", default=[(8, 64), (6, 48)], help="d:n pairs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    print(header("noiseless single-index ReLU, m = 2n, heuristic pricing"))
    print("| d | n | seed | defaults: Υ, rounds, stop | long (80 rounds) | longer (400 rounds) | excess |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for d, n in args.instances:
        for seed in args.seeds:
            row = point(d, n, seed)
            rows.append(row)
            cells = " | ".join(
                f"{row[name]['upsilon']:.4f}, {row[name]['rounds']}, {row[name]['stop']}" for name in RUNS
            )
            print(f"| {d} | {n} | {seed} | {cells} | {100 * row['excess']:.2f} % |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
