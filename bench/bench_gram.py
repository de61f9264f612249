"""The blocked lower-triangle Gram matrix Φ diag(d) Φᵀ against one GEMM, and where it starts to win.

    python bench/bench_gram.py
    python bench/bench_gram.py --sizes 1600x25000

Every p = 1 interior-point step and every p > 1 dual Newton step of :mod:`flatbook.flattest` forms
Φ diag(d) Φᵀ (n × n from n × m).  ``weighted_gram`` with ``min_entries=0`` forms it from its lower block
triangle (4 row blocks, 5/8 of the flops) and mirrors it; the default switches to that form from
``BLOCKED_GRAM_MIN_ENTRIES`` entries of Φ up.  Printed per size: the one-GEMM seconds (fastest of
seven runs) and the blocked form's time as a ratio of it (< 1: the blocked form is faster).
"""

from __future__ import annotations

import argparse

import torch

from flatbook.lp import BLOCKED_GRAM_MIN_ENTRIES, weighted_gram

from common import fastest, header

SIZES = [
    "50x100",
    "100x200",
    "200x400",
    "250x500",
    "250x2500",
    "400x800",
    "500x1000",
    "500x5000",
    "1000x2000",
    "1000x10000",
    "2000x4000",
]


def size(text: str) -> tuple[int, int]:
    try:
        n, m = (int(part) for part in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size is n x m, as in 1000x2000; got {text!r}") from None
    if n < 1 or m < 1:
        raise argparse.ArgumentTypeError(f"n and m must be positive; got {text!r}")
    return n, m


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=size, nargs="+", default=[size(s) for s in SIZES])
    parser.add_argument("--blocks", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args()
    if any(b < 1 for b in args.blocks):
        parser.error("--blocks must be positive")
    print(header(f"BLOCKED_GRAM_MIN_ENTRIES = {BLOCKED_GRAM_MIN_ENTRIES}"))
    print("| n | m | one GEMM ms | " + " | ".join(f"{b} blocks / one GEMM" for b in args.blocks) + " |")
    print("|---|---|---|" + "---|" * len(args.blocks))
    gen = torch.Generator().manual_seed(0)
    for n, m in args.sizes:
        Phi = torch.randn(n, m, generator=gen, dtype=torch.float64)
        d = torch.rand(m, generator=gen, dtype=torch.float64)
        one = fastest(lambda P, w: (P * w) @ P.T, Phi, d, repeats=7)[1]
        ratios = [fastest(weighted_gram, Phi, d, b, 0, repeats=7)[1] / one for b in args.blocks]
        print(f"| {n} | {m} | {1e3 * one:.2f} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |", flush=True)


if __name__ == "__main__":
    main()
