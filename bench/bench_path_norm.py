"""The near-flattest set's largest path norm over measures: the package's branch and bound on the atoms' signs
against HiGHS's mixed-integer solver on the same program.

    python bench/bench_path_norm.py                       # n in {48, 96}, seeds 0 and 1
    python bench/bench_path_norm.py --n 192 --seeds 100

On chapter 4's paper configuration (noiseless, the flattest interpolator of width 2n found first, the dictionary
with the direction where κ is least), max ‖μ‖₁ over P_B(ε) is solved at each of the paper's slacks under the
paper's node limit, twice in the same run: as a mixed-integer linear program by HiGHS (the peer: a binary sign b_j
per atom, z⁺_j ≤ (B/w_j) b_j and z⁻_j ≤ (B/w_j)(1 − b_j), started from the successive-LP climb, with the options
that were fastest for it: no symmetry detection, no RINS or RENS sub-MIPs) and by ``near_flattest._largest_l1``
(its model of P_B built inside the timing). Printed: seconds, the ratio to the peer, nodes (HiGHS's explored
nodes; the package's relaxations solved), whether each proved its member optimal, the members' ‖μ‖₁ and the
relative difference of the two bounds (both proven upper bounds on the same maximum: within the 1e-4 gap of each
other when both close).
"""

from __future__ import annotations

import argparse
import time

import highspy
import numpy as np
import scipy.sparse
import torch

from flatbook import get_activation
from flatbook import near_flattest as nf
from flatbook.experiments import flattest_generalise
from flatbook.relu_cells import kappa_infimum

from common import header, timed

#: the peer's HiGHS options besides its defaults
MIP_OPTIONS = {
    "output_flag": False,
    "mip_rel_gap": nf.PATH_NORM_GAP,
    "primal_feasibility_tolerance": 1e-9,
    "dual_feasibility_tolerance": 1e-9,
    "mip_feasibility_tolerance": 1e-9,
    "mip_detect_symmetry": False,
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
}


def mixed_integer(Phi, w, y, budget, start, node_limit):
    """HiGHS's branch and bound on max Σ_j (z⁺_j + z⁻_j) over [Φ, −Φ]z = y, [w, w]ᵀz ≤ B with a binary sign per
    atom, warm-started at the measure ``start``: (member's ‖μ‖₁, bound, optimal, nodes)."""
    n, k = Phi.shape
    cap = budget / w
    eye, zero = scipy.sparse.identity(k, format="csc"), scipy.sparse.csc_matrix((k, k))
    rows = scipy.sparse.csc_matrix(np.vstack([np.hstack([Phi, -Phi]), np.concatenate([w, w])[None, :]]))
    A = scipy.sparse.vstack(
        [
            scipy.sparse.hstack([rows, scipy.sparse.csc_matrix((n + 1, k))]),
            scipy.sparse.hstack([eye, zero, -scipy.sparse.diags(cap)]),
            scipy.sparse.hstack([zero, eye, scipy.sparse.diags(cap)]),
        ],
        format="csc",
    )
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = 3 * k, n + 1 + 2 * k
    lp.col_cost_ = np.concatenate([np.ones(2 * k), np.zeros(k)])
    lp.col_lower_ = np.zeros(3 * k)
    lp.col_upper_ = np.concatenate([cap, cap, np.ones(k)])
    lp.row_lower_ = np.concatenate([y, np.full(1 + 2 * k, -highspy.kHighsInf)])
    lp.row_upper_ = np.concatenate([y, [budget], np.zeros(k), cap])
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    lp.integrality_ = [highspy.HighsVarType.kContinuous] * (2 * k) + [highspy.HighsVarType.kInteger] * k
    solver = highspy.Highs()
    for name, value in {**MIP_OPTIONS, "mip_max_nodes": node_limit}.items():
        solver.setOptionValue(name, value)
    solver.passModel(lp)
    warm = highspy.HighsSolution()
    warm.col_value = list(np.concatenate([np.clip(start, 0, None), np.clip(-start, 0, None), 1.0 * (start > 0)]))
    solver.setSolution(warm)
    solver.run()
    info = solver.getInfo()
    z = np.asarray(solver.getSolution().col_value)
    optimal = solver.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return float(np.abs(z[:k] - z[k : 2 * k]).sum()), float(info.mip_dual_bound), optimal, int(info.mip_node_count)


def branch_and_bound(Phi, w, y, budget, node_limit):
    """The package's search, its model of P_B built first: (member's ‖μ‖₁, bound, optimal, nodes)."""
    program = nf._VertexProgram(Phi, w, y, seed=np.arange(Phi.shape[1]), working_atoms=None, options=nf.SEARCH_OPTIONS)
    search = nf._largest_l1(program, budget, node_limit)
    return float(np.abs(search.member).sum()), search.bound, search.optimal, search.nodes


def point(n: int, seed: int) -> None:
    config = flattest_generalise.CONFIGS["paper"]
    teacher = flattest_generalise.teacher_for("noiseless", config, n, seed)
    X, y = teacher.sample(n, seed=seed + 1000)
    relu = get_activation("relu")
    flattest = flattest_generalise._flattest(config, X, y, relu, 2 * n, seed)
    least = kappa_infimum(X, relu).inside
    near = nf.near_flattest_set(X, y, relu, 2 * n, teacher, flattest=flattest, extra_directions=least[None])
    Phi, w, y_np = (t.cpu().numpy() for t in (near.Phi, near.w, near.y))
    for slack in config.path_norm_slacks:
        budget = near.budget_at(slack)
        start = near._ascend(near.start, budget, 50, lambda mu: float(mu.abs().sum()), torch.sign).cpu().numpy()
        # CPU seconds of this process (HiGHS runs on one thread here), so that other work does not count
        rows = {
            "HiGHS mixed-integer": timed(
                mixed_integer, Phi, w, y_np, budget, start, config.path_norm_nodes, clock=time.process_time
            ),
            "branch and bound": timed(
                branch_and_bound, Phi, w, y_np, budget, config.path_norm_nodes, clock=time.process_time
            ),
        }
        (_, peer_bound, _, _), peer_seconds = rows["HiGHS mixed-integer"]
        for name, ((found, bound, optimal, nodes), seconds) in rows.items():
            print(
                f"| {n} | {seed} | {len(near.U)} | {slack:g} | {name} | {seconds:.1f} | {peer_seconds / seconds:.1f}x "
                f"| {nodes} | {optimal} | {found:.6f} | {abs(bound - peer_bound) / peer_bound:.1e} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[48, 96])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    if min(args.n) < 4 or min(args.seeds) < 0:
        parser.error("--n must be at least 4 and --seeds non-negative")
    print(header("CPU seconds"))
    columns = ["n", "seed", "dictionary", "slack", "solver", "seconds", "speed-up", "nodes", "optimal"]
    columns += ["‖μ‖₁ found", "bounds differ"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for n in args.n:
        for seed in args.seeds:
            point(n, seed)


if __name__ == "__main__":
    main()
