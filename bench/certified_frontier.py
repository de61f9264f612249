"""The certified frontier: in which dimensions the flattest interpolator's proven gap closes, and how fast.

    python bench/certified_frontier.py                        # d = 2 … 8, n/d in {4, 8}, seeds 0 1 2, 600 s
    python bench/certified_frontier.py --d 4 5 --ratios 8 --limit 60 --max-caps 500000

For each d, n = ratio·d and seed: a noiseless single-index ReLU teacher (``single_index(d, "relu", seed)``,
samples with seed + 1000), width m = 2n, and :func:`flatbook.flattest_interpolator` with certified pricing
in every dimension (``certify_up_to=d``: the arrangement's exact supremum for d ≤ 3, cap branch-and-bound
above, at most ``--max-caps`` caps a round: default 20 million), ``tol=0.01`` and ``time_limit=--limit``
seconds (``--no-cell-ascent``: with ``cell_ascent=False``, its candidates from gradient ascent alone).  From the
rounds' history: the first time the proven gap (an exact master's value over the best
proven lower bound, minus 1) is at most 1 %, and whether that happened within 60 s and within the limit.
A dimension is tried only while some seed of the previous one certified within the limit.  Printed per
(d, n): seeds certified within 60 s and within the limit, the median time to certify, the final proven gap of
each seed, the branch-and-bound's caps in all.  One process, two threads; run it alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from flatbook import flattest_interpolator
from flatbook.data import single_index

from common import header

GAP = 0.01


def point(d: int, n: int, seed: int, limit: float, max_caps: int, cell_ascent: bool) -> dict:
    teacher = single_index(d, link="relu", noise_std=0.0, seed=seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    result = flattest_interpolator(
        X,
        y,
        "relu",
        2 * n,
        certify_up_to=d,
        tol=GAP,
        time_limit=limit,
        rounds=10_000,
        max_caps=max_caps,
        cell_ascent=cell_ascent,
    )
    certified_at = next(
        (
            row["seconds"]
            for row in result.history
            if row["master_exact"] and row["lower_proven"] > 0 and row["master"] / row["lower_proven"] - 1 <= GAP
        ),
        None,
    )
    return {
        "d": d,
        "n": n,
        "seed": seed,
        "certified_at": certified_at,
        "gap": result.upper / result.lower - 1 if result.lower > 0 else float("inf"),
        "stop": result.stop.value,
        "rounds": result.rounds,
        "caps": sum(row["caps"] for row in result.history),
        "seconds": result.history[-1]["seconds"] if result.history else 0.0,
        "pricing": result.pricing,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[2, 3, 4, 5, 6, 7, 8])
    parser.add_argument("--ratios", type=int, nargs="+", default=[4, 8], help="n = ratio · d")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--limit", type=float, default=600.0, help="seconds per solve")
    parser.add_argument(
        "--max-caps", type=int, default=20_000_000, help="caps the branch-and-bound may bound in a round"
    )
    parser.add_argument("--no-cell-ascent", action="store_true", help="candidates from gradient ascent alone")
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    if any(d < 2 for d in args.d) or any(r < 1 for r in args.ratios) or args.limit <= 0 or args.max_caps < 1:
        parser.error("need d >= 2, ratios >= 1, a positive --limit and --max-caps")
    print(
        header(
            f"noiseless single-index ReLU, m = 2n, proven gap <= {GAP:.0%}, limit {args.limit:g} s, "
            f"at most {args.max_caps} caps a round"
        )
    )
    print("| d | n | pricing | certified ≤ 60 s | certified ≤ limit | median s to certify | final gaps | caps |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for ratio in args.ratios:
        for d in sorted(args.d):
            found = [
                point(d, ratio * d, seed, args.limit, args.max_caps, not args.no_cell_ascent) for seed in args.seeds
            ]
            rows += found
            times = [row["certified_at"] for row in found if row["certified_at"] is not None]
            fast = sum(t <= 60.0 for t in times)
            median = f"{statistics.median(times):.1f}" if times else "-"
            gaps = ", ".join(f"{row['gap']:.3g}" for row in found)
            print(
                f"| {d} | {ratio * d} | {found[0]['pricing']} | {fast}/{len(found)} | {len(times)}/{len(found)} "
                f"| {median} | {gaps} | {sum(row['caps'] for row in found)} |",
                flush=True,
            )
            if not times:
                break  # no seed certified: higher dimensions will not either
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
