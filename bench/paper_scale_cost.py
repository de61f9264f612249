"""What the `paper` scale of chapters 3 and 4 costs on this machine: single points timed, the sweep projected.

    python bench/paper_scale_cost.py                          # n up to 1600, writes book/paper_scale/cost.json
    python bench/paper_scale_cost.py --n-max 400 --out /tmp/cost.json   # a quick look

Their paper sweeps (n up to 3200, m = 2n, five seeds) are too long to run on
two cores, so this times the configuration points of each kind (the first ``--seeds`` seeds, the
paper config, the cache off) for every n of the paper grid up to ``--n-max``,
keeps the point's result rows, and projects the whole sweep: the sum over all
its points of the measured time of a point of that kind and n, and beyond
``--n-max`` the largest measured time scaled by (n / n_max)³, the cost of one
solver iteration (forming the n × n normal or Hessian matrix of an n × 2n
feature matrix); solver iterations and search steps are taken not to grow
with n, so read it as an estimate.

Point kinds (every point of the sweep is one of these, at one of its sizes):

- chapter 3: the ReLU in d = 3 (the flattest interpolator and the flattest ρ0-bad ones, exact pricing),
  the centred-label certificate alone (timed at every n, however large: it is one arrangement
  enumeration), the ReLU in the paper's d = 100, the quadratic with n/D fixed and at fixed d;
- chapter 4: the noiseless condition, and one noisy and one residual condition standing for the others.

With ``--experiments`` a subset is timed and the other experiments' entries of ``--out`` are kept.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path

from flatbook.backend import default_device
from flatbook.experiments import bad_interpolators, flattest_generalise
from flatbook.experiments.runner import code_fingerprint

from common import header, timed


def chapter3_kinds(config):
    """(kind, point function, its keyword points but seed, the sweep's points of this kind per timed point)."""
    e = bad_interpolators
    kinds = [
        (
            f"{sweep}: {name}, alignments {', '.join(map(str, alignments))}",
            e._compare,
            [{"name": name, "d": d, "n": n, "alignments": alignments} for d, n in sizes],
            config.seeds,
        )
        for sweep, name, sizes, alignments in e.sweeps(config)
    ]
    certificate = [
        {"name": "relu", "d": config.certified_d, "n": n, "always_timed": True} for n in config.certificate_n_grid
    ]  # seconds even at n = 3072: timed at every n
    return [*kinds, ("certificate: relu, alignment 0", e._certificate, certificate, config.seeds)]


def chapter4_kinds(config):
    """As :func:`chapter3_kinds`, for chapter 4: the noiseless points, and the noisy and residual ones at their
    largest size (τ₀, η₀), which stand for every condition with that term (their programs have the same size)."""
    e = flattest_generalise
    with_noise = sum(e.CONDITIONS[c][0] is not None for c in config.conditions)
    with_residual = sum(e.CONDITIONS[c][1] is not None for c in config.conditions)
    return [
        (
            condition,
            e._point,
            [{"noise_std": tau, "residual_std": eta, "n": n} for n in config.n_grid],
            count * config.seeds,
        )
        for condition, (tau, eta), count in (
            ("statistical", (0.0, 0.0), len(config.conditions) - with_noise - with_residual),
            ("fixed noise", (config.noise_std0, 0.0), with_noise),
            ("fixed residual", (0.0, config.residual_std0), with_residual),
        )
    ]


EXPERIMENTS = {
    "bad_interpolators": (bad_interpolators, chapter3_kinds),
    "flattest_generalise": (flattest_generalise, chapter4_kinds),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), choices=list(EXPERIMENTS))
    parser.add_argument("--n-max", type=int, default=1600, help="largest n timed; larger n are projected")
    parser.add_argument("--seeds", type=int, default=1, help="seeds timed per point (the sweep's first ones)")
    parser.add_argument("--resume", action="store_true", help="reuse the points of an interrupted run's journal")
    parser.add_argument("--out", default="book/paper_scale/cost.json")
    args = parser.parse_args()
    if args.n_max < 1 or args.seeds < 1:
        parser.error("--n-max and --seeds must be positive")
    print(header(f"paper-scale cost, n <= {args.n_max}"), flush=True)
    out = Path(args.out)
    previous = json.loads(out.read_text()) if out.exists() else {"timings": [], "projections": []}
    timings = [t for t in previous["timings"] if t["experiment"] not in args.experiments]
    # Every timed point is appended to a journal as it finishes, so an interrupted run resumes with --resume.
    journal = out.with_suffix(".partial.jsonl")
    done = {}
    if args.resume and journal.exists():
        for line in journal.read_text().splitlines():
            entry = json.loads(line)
            done[entry["experiment"], entry["kind"], entry["d"], entry["n"], entry["seed"]] = entry
        print(f"resuming: {len(done)} points from {journal}", flush=True)
    elif journal.exists():
        journal.unlink()
    projections = [p for p in previous["projections"] if p["experiment"] not in args.experiments]
    for kept in projections:  # files written before the per-experiment fields: the run's own, at the top level
        kept.setdefault("n_max", previous.get("n_max"))
        kept.setdefault("command", previous.get("command"))
        kept.setdefault("created_utc", previous.get("created_utc"))
    for experiment in args.experiments:
        module, kinds = EXPERIMENTS[experiment]
        config = module.CONFIGS["paper"]
        total, measured_points, all_points = 0.0, 0, 0
        for kind, function, points, points_per_point in kinds(config):
            largest = None
            for point in points:
                n, always_timed = point["n"], point.pop("always_timed", False)
                if n <= args.n_max or always_timed:
                    times = []
                    d = point.get("d", getattr(config, "d", None))
                    for replicate in range(args.seeds):  # the sweep's own seeds: config.seed + 100 s
                        seed = config.seed + 100 * replicate
                        entry = done.get((experiment, kind, d, n, seed))
                        if entry is None:
                            rows, seconds = timed(partial(function, config, seed=seed, **point))
                            entry = {
                                "experiment": experiment,
                                "kind": kind,
                                "seed": seed,
                                "d": d,
                                "n": n,
                                "m": config.width_factor * n,
                                "seconds": round(seconds, 2),
                                "rows": rows,
                            }
                            with journal.open("a") as stream:
                                stream.write(json.dumps(entry) + "\n")
                        timings.append(entry)
                        print(
                            f"{experiment:20s} {kind:36s} n = {n:5d}, seed {seed:3d}: {entry['seconds']:8.1f} s",
                            flush=True,
                        )
                        times.append(entry["seconds"])
                    seconds = sum(times) / len(times)
                    largest = (n, seconds)
                    measured_points += points_per_point
                else:
                    seconds = largest[1] * (n / largest[0]) ** 3
                total += points_per_point * seconds
                all_points += points_per_point
        projections.append(
            {
                "experiment": experiment,
                "points": all_points,
                "points_at_measured_sizes": measured_points,
                "projected_hours": round(total / 3600, 1),
                "n_max": args.n_max,
                "seeds": args.seeds,
                "command": f"python bench/paper_scale_cost.py --experiments {experiment} --n-max {args.n_max} "
                f"--seeds {args.seeds}",
                "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
        print(f"{experiment}: {all_points} points, projected {total / 3600:.1f} h", flush=True)
    report = {
        "timings": timings,
        "projections": projections,
        "device": str(default_device()),
        "machine": header()[2:],
        "code_fingerprint": code_fingerprint()[:16],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    journal.unlink(missing_ok=True)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
