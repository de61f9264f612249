"""The near-flattest set's linear programs: one warm-started HiGHS model against a cold solve per program.

    python bench/bench_near_flattest.py                  # n in {48, 96}
    python bench/bench_near_flattest.py --n 192

On chapter 4's paper configuration (fixed noise, seed 0, the flattest interpolator of width 2n found first), the
worst member at every slack (four starts) and the Frank-Wolfe floor (30 steps) are computed two ways, in the
same run: every vertex a cold ``scipy.optimize.linprog`` (HiGHS with presolve: the peer), and one HiGHS model
whose costs and budget change between solves, each solve starting from the last basis (what ``NearFlattestSet``
does), with primal simplex (the set's choice) and with dual simplex (HiGHS's default). Printed: seconds, the
ratio to the peer, and the largest relative difference of the values found (all must agree).
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.optimize
import torch

from flatbook import flattest_interpolator, get_activation
from flatbook import near_flattest as nf
from flatbook.experiments import flattest_generalise

from common import header, timed


def cold_vertex(self, objective, budget):
    """argmax objectiveᵀμ over P_budget, one cold linprog (the peer)."""
    k = self.U.shape[0]
    c, w = objective.cpu().numpy(), self.w.cpu().numpy()
    Phi = self.Phi.cpu().numpy()
    result = scipy.optimize.linprog(
        np.concatenate([-c, c]),
        A_ub=np.concatenate([w, w])[None, :],
        b_ub=[budget],
        A_eq=np.hstack([Phi, -Phi]),
        b_eq=self.y.cpu().numpy(),
        bounds=(0, None),
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    if result.status != 0:
        return None
    z = torch.as_tensor(result.x, dtype=self.X.dtype, device=self.X.device)
    return z[:k] - z[k:]


def warm_dual_simplex_vertex(self, objective, budget):
    """The warm-started model with HiGHS's default dual simplex in place of the set's primal simplex."""
    if self._vertex_lp is None:
        self._vertex_lp = nf._VertexProgram(self.Phi.cpu().numpy(), self.w.cpu().numpy(), self.y.cpu().numpy())
        self._vertex_lp.highs.setOptionValue("simplex_strategy", 1)
    return warm_primal_simplex_vertex(self, objective, budget)


warm_primal_simplex_vertex = nf.NearFlattestSet.vertex


def excesses(near, config):
    return [
        value
        for slack in config.slacks
        for value in (
            near.worst(slack, starts=config.worst_starts, seed=0).excess,
            nf.frank_wolfe_floor(near, slack, steps=config.floor_steps).floor,
        )
    ]


def point(n: int) -> None:
    config = flattest_generalise.CONFIGS["paper"]
    teacher = flattest_generalise.teacher_for("fixed noise", config, n, 0)
    X, y = teacher.sample(n, seed=1000)
    relu = get_activation("relu")
    flattest = flattest_interpolator(X, y, relu, width=2 * n, tol=config.tol, rounds=config.rounds, seed=0)
    rows = {}
    for name, vertex in (
        ("cold linprog per vertex", cold_vertex),
        ("one warm-started model, dual simplex", warm_dual_simplex_vertex),
        ("one warm-started model, primal simplex", warm_primal_simplex_vertex),
    ):
        nf.NearFlattestSet.vertex = vertex
        try:
            near = nf.near_flattest_set(X, y, relu, 2 * n, teacher, flattest=flattest)
            rows[name] = timed(excesses, near, config)
        finally:
            nf.NearFlattestSet.vertex = warm_primal_simplex_vertex
    peer_values, peer_seconds = rows["cold linprog per vertex"]
    for name, (values, seconds) in rows.items():
        gap = max(abs(a - b) / max(abs(b), 1e-300) for a, b in zip(values, peer_values, strict=True))
        print(f"| {n} | {len(near.U)} | {name} | {seconds:.1f} | {peer_seconds / seconds:.1f}x | {gap:.1e} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[48, 96])
    args = parser.parse_args()
    print(header())
    print("| n | dictionary | linear programs | seconds | speed-up | largest relative difference |")
    print("|---|---|---|---|---|---|")
    for n in args.n:
        point(n)


if __name__ == "__main__":
    main()
