"""The near-flattest set's linear programs: one warm-started HiGHS model, restricted to a working set of atoms,
against the same model over the whole dictionary and a cold solve per program.

    python bench/bench_near_flattest.py                  # n in {48, 96}
    python bench/bench_near_flattest.py --n 192

On chapter 4's paper configuration (fixed noise, seed 0, the flattest interpolator of width 2n found first), the
worst member at every slack (four starts) and the Frank-Wolfe floor (30 steps) are computed two ways, in the
same run: every vertex a cold ``scipy.optimize.linprog`` (HiGHS with presolve: the peer), and one HiGHS model
whose costs and budget change between solves, each solve starting from the last basis, over the whole dictionary
(with dual simplex, HiGHS's default, and with primal simplex) and restricted to a working set of atoms that
pricing extends (primal simplex: what ``NearFlattestSet`` does). Printed: seconds, the ratio to the peer, and the
largest relative difference of the values found (all must agree).
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


def whole_dictionary_vertex(simplex_strategy: int):
    """The warm-started model over every atom of the dictionary (never cut back), with HiGHS's ``simplex_strategy``
    (1: dual, 4: primal)."""

    def vertex(self, objective, budget):
        if self._vertex_lp is None:
            Phi, w, y = (t.cpu().numpy() for t in (self.Phi, self.w, self.y))
            self._vertex_lp = nf._VertexProgram(Phi, w, y, seed=np.arange(Phi.shape[1]), working_atoms=None)
            self._vertex_lp.highs.setOptionValue("simplex_strategy", simplex_strategy)
        return restricted_vertex(self, objective, budget)

    return vertex


restricted_vertex = nf.NearFlattestSet.vertex


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
        ("one warm-started model, whole dictionary, dual simplex", whole_dictionary_vertex(1)),
        ("one warm-started model, whole dictionary, primal simplex", whole_dictionary_vertex(4)),
        ("one warm-started model, working set, primal simplex", restricted_vertex),
    ):
        nf.NearFlattestSet.vertex = vertex
        try:
            near = nf.near_flattest_set(X, y, relu, 2 * n, teacher, flattest=flattest)
            rows[name] = timed(excesses, near, config)
        finally:
            nf.NearFlattestSet.vertex = restricted_vertex
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
