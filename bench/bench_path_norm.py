"""The near-flattest set's largest path norm over measures: HiGHS's branch and bound with the package's options
against HiGHS's defaults.

    python bench/bench_path_norm.py                       # n in {48, 96}, seeds 0 and 1
    python bench/bench_path_norm.py --n 136 --seeds 0

On chapter 4's paper configuration (noiseless, the flattest interpolator of width 2n found first, the dictionary
with the direction where κ is least), the mixed-integer program max ‖μ‖₁ over P_B(ε) is solved at each of the
paper's slacks, from the same successive-LP start and under the paper's node limit, twice in the same run: with
HiGHS's default options (the peer) and with ``near_flattest.PATH_NORM_OPTIONS`` (no symmetry detection, no RINS
or RENS sub-MIPs). Printed: seconds, the ratio to the peer, nodes, whether each proved its incumbent optimal, and
the relative difference of the two bounds (both are proven upper bounds on the same maximum: within HiGHS's gap
of each other when both close).
"""

from __future__ import annotations

import argparse
import time

import torch

from flatbook import get_activation
from flatbook import near_flattest as nf
from flatbook.experiments import flattest_generalise
from flatbook.relu_cells import kappa_infimum

from common import header, timed


def point(n: int, seed: int) -> None:
    config = flattest_generalise.CONFIGS["paper"]
    teacher = flattest_generalise.teacher_for("noiseless", config, n, seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    relu = get_activation("relu")
    flattest = flattest_generalise._flattest(config, X, y, relu, 2 * n, seed)
    least = kappa_infimum(X, relu).inside
    near = nf.near_flattest_set(X, y, relu, 2 * n, teacher, flattest=flattest, extra_directions=least[None])
    for slack in config.path_norm_slacks:
        budget = near.budget_at(slack)
        start = near._ascend(near.start, budget, 50, lambda mu: float(mu.abs().sum()), torch.sign).cpu().numpy()
        rows = {}
        for name, options in (("HiGHS defaults", {}), ("PATH_NORM_OPTIONS", nf.PATH_NORM_OPTIONS)):
            # CPU seconds of this process (HiGHS runs on one thread here), so that other work does not count
            rows[name] = timed(
                nf._largest_l1, near._program(), budget, start, config.path_norm_nodes, options, clock=time.process_time
            )
        (_, peer_bound, _, _), peer_seconds = rows["HiGHS defaults"]
        for name, ((_, bound, optimal, nodes), seconds) in rows.items():
            print(
                f"| {n} | {seed} | {len(near.U)} | {slack:g} | {name} | {seconds:.1f} | {peer_seconds / seconds:.1f}x "
                f"| {nodes} | {optimal} | {abs(bound - peer_bound) / peer_bound:.1e} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[48, 96])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    if min(args.n) < 4 or min(args.seeds) < 0:
        parser.error("--n must be at least 4 and --seeds non-negative")
    print(header("CPU seconds"))
    print("| n | seed | dictionary | slack | options | seconds | speed-up | nodes | optimal | bounds differ |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        for seed in args.seeds:
            point(n, seed)


if __name__ == "__main__":
    main()
