"""What the `paper` scale of chapters 3 and 4 costs on this machine: single points timed, the sweep projected.

    python bench/paper_scale_cost.py                          # n up to 1600, writes book/paper_scale/cost.json
    python bench/paper_scale_cost.py --n-max 400 --out /tmp/cost.json   # a quick look

Their paper sweeps (n up to 3200, m = 2n, five seeds) are too long to run on
two cores, so this times one configuration point of each kind (seed 0, the
paper config, the cache off) for every n of the paper grid up to ``--n-max``,
keeps the point's result rows, and projects the whole sweep: the sum over all
its points of the measured time of a point of that kind and n, and beyond
``--n-max`` the largest measured time scaled by (n / n_max)³, the cost of one
solver iteration (forming the n × n normal or Hessian matrix of an n × 2n
feature matrix); solver iterations and search steps are taken not to grow
with n, so read it as an estimate.

Point kinds (the sweep's other points cost the same as one of these):

- chapter 3: ReLU (also for the LeakyReLU, whose linear programs have the same
  sizes, and for the label-noise sweep, whose points skip one of the three
  direct searches, so they are overstated by about a third), quadratic, and the
  quadratic of the regime sweep at its smaller d;
- chapter 4: the vanishing-noise condition (the other conditions solve
  programs of the same sizes).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

from flatbook.backend import default_device
from flatbook.experiments import bad_interpolators, flattest_generalise
from flatbook.experiments.runner import code_fingerprint

from common import header, timed


def chapter3_kinds(config):
    """(kind, its config, point arguments but n and seed, its n grid, the sweep's points of this kind per n)."""
    per_n = config.seeds
    regime = replace(config, activations=("quadratic",), d=config.regime_d, n_grid=config.regime_n_grid,
                     bad_alignments=(0.0,))
    relu_like = sum(name != "quadratic" for name in config.activations) + 1  # + the label-noise sweep
    return [
        ("relu", config, {"name": "relu"}, config.n_grid, relu_like * per_n),
        ("quadratic", config, {"name": "quadratic"}, config.n_grid, per_n),
        (f"quadratic, regime d = {config.regime_d}", regime, {"name": "quadratic"}, config.regime_n_grid, per_n),
    ]


def chapter4_kinds(config):
    """As :func:`chapter3_kinds`, for chapter 4."""
    conditions = len(flattest_generalise.CONDITIONS)
    return [("vanishing noise", config, {"condition": "vanishing noise"}, config.n_grid, conditions * config.seeds)]


EXPERIMENTS = {
    "bad_interpolators": (bad_interpolators, chapter3_kinds),
    "flattest_generalise": (flattest_generalise, chapter4_kinds),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), choices=list(EXPERIMENTS))
    parser.add_argument("--n-max", type=int, default=1600, help="largest n timed; larger n are projected")
    parser.add_argument("--out", default="book/paper_scale/cost.json")
    args = parser.parse_args()
    print(header(f"paper-scale cost, n <= {args.n_max}"), flush=True)
    timings, projections = [], []
    for experiment in args.experiments:
        module, kinds = EXPERIMENTS[experiment]
        config = module.CONFIGS["paper"]
        total, measured_points, all_points = 0.0, 0, 0
        for kind, kind_config, point, n_grid, points_per_n in kinds(config):
            largest = None
            for n in n_grid:
                if n <= args.n_max:
                    rows, seconds = timed(partial(module._point, kind_config, n=n, seed=kind_config.seed, **point))
                    timings.append({"experiment": experiment, "kind": kind, "d": kind_config.d, "n": n,
                                    "m": kind_config.width_factor * n, "seconds": round(seconds, 2),
                                    "rows": rows})
                    print(f"{experiment:20s} {kind:28s} n = {n:5d}: {seconds:8.1f} s", flush=True)
                    largest = (n, seconds)
                    measured_points += points_per_n
                else:
                    seconds = largest[1] * (n / largest[0]) ** 3
                total += points_per_n * seconds
                all_points += points_per_n
        projections.append({"experiment": experiment, "points": all_points,
                            "points_at_measured_sizes": measured_points, "projected_hours": round(total / 3600, 1)})
        print(f"{experiment}: {all_points} points, projected {total / 3600:.1f} h", flush=True)
    report = {"command": f"python bench/paper_scale_cost.py --n-max {args.n_max}",
              "n_max": args.n_max, "timings": timings, "projections": projections,
              "device": str(default_device()), "machine": header()[2:],
              "code_fingerprint": code_fingerprint()[:16],
              "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
