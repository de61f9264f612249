"""What the `paper` scale of chapters 3 to 7 costs on this machine: single points timed, the sweep projected.

    python bench/paper_scale_cost.py                          # n up to 1600, writes book/paper_scale/cost.json
    python bench/paper_scale_cost.py --n-max 400 --out /tmp/cost.json   # a quick look

Their paper sweeps (n up to 3200, m = 2n, five to ten seeds) are too long to run on
two cores, so this times the configuration points of each kind (the first ``--seeds`` seeds, the
paper config, the cache off) for every n of the paper grid up to ``--n-max``,
keeps the point's result rows, and projects the whole sweep: the sum over all
its points of the measured time of a point of that kind and n, and beyond
``--n-max`` the largest measured time scaled by (n / n_max)³, the cost of one
solver iteration (forming the n × n normal or Hessian matrix of an n × 2n
feature matrix); solver iterations, search steps and training steps are taken not to
grow with n, so read it as an estimate.  A kind whose every paper size exceeds ``--n-max``
(chapter 5 has the one n = 1000) is timed at n = n_max and projected from there.

Point kinds (every point of the sweep is one of these, at one of its sizes):

- chapter 3: the ReLU in d = 3 (the flattest interpolator and the flattest ρ0-bad ones, exact pricing),
  the centred-label certificate alone (timed at every n, however large: it is one arrangement
  enumeration), the ReLU in the paper's d = 100, the quadratic with n/D fixed and at fixed d;
- chapter 4: the noiseless condition, and one noisy and one residual condition standing for the others;
- chapter 5: the alignment grid of each setting (its noise sweep is the sweep setting's kind again: the noise
  does not change a program's size), the width sweep's other ratios, the flattest interpolator of each
  reference setting;
- chapter 6: each training run of the chapter (one n and one width per run: nothing is projected), the
  balance runs at each step, the scale and width sweeps' runs, the horizon and digits runs;
- chapter 7: each training method, each point of the initialisation and step sweeps, the two flattest
  interpolators of a seed, and each run of the mirror solver on the outer weights.

With ``--experiments`` a subset is timed and the other experiments' entries of ``--out`` are kept.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import fields, replace
from functools import partial
from pathlib import Path

from flatbook.backend import default_device
from flatbook.experiments import (
    bad_interpolators,
    flattest_generalise,
    mirror_flow,
    paper_experiments,
    training_flatness,
)
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
    largest size (τ₀, η₀), which stand for every condition with that term (their programs have the same size);
    each with the near-flattest range (the worst member and the floor at every slack) where its conditions have
    it, and without where they do not."""
    e = flattest_generalise
    members = {
        ("noiseless", 0.0, 0.0): [c for c in config.conditions if e.CONDITIONS[c] == (None, None)],
        ("fixed noise", config.noise_std0, 0.0): [c for c in config.conditions if e.CONDITIONS[c][0] is not None],
        ("fixed residual", 0.0, config.residual_std0): [c for c in config.conditions if e.CONDITIONS[c][1] is not None],
    }
    kinds = []
    for (condition, tau, eta), conditions in members.items():
        for near in (True, False):
            count = sum((c in config.near_conditions) == near for c in conditions)
            if count:
                kinds.append(
                    (
                        condition if near else f"{condition}, without the near-flattest range",
                        e._point,
                        [{"noise_std": tau, "residual_std": eta, "n": n, "near": near} for n in config.n_grid],
                        count * config.seeds,
                    )
                )
    return kinds


def sized(function, config, seed, **point):
    """Call a point function whose sizes live in its config: the point's config fields (``n``,
    ``width_ratio``, …) replace the config's, the others are the function's keywords."""
    names = {field.name for field in fields(config)}
    resized = replace(config, **{key: value for key, value in point.items() if key in names})
    return function(resized, seed=seed, **{key: value for key, value in point.items() if key not in names})


def chapter5_kinds(config):
    """As :func:`chapter3_kinds`, for chapter 5 (one n, config.n): per setting, all ρ* of one seed."""
    e = paper_experiments
    point = partial(sized, e._point)
    # the noise sweep's other τ run the sweep setting again (its own τ and m/n reuse the settings' rows)
    sweep_points = sum(tau != config.noise_std for tau in config.noise_sweep)
    grid = [
        (
            f"grid: {setting}",
            point,
            [{"n": config.n, "setting": setting}],
            config.seeds * (1 + (sweep_points if setting == config.sweep_setting else 0)),
        )
        for setting in config.settings
    ]
    widths = [
        (
            f"grid: {config.sweep_setting}, m/n = {ratio:g}",
            point,
            [{"n": config.n, "setting": config.sweep_setting, "width_ratio": ratio}],
            config.seeds,
        )
        for ratio in config.width_sweep
        if ratio != config.width_ratio
    ]
    references = [
        (f"reference: {setting}", point, [{"n": config.n, "setting": setting, "kind": "reference"}], config.seeds)
        for setting in config.reference_settings
    ]
    return grid + widths + references


def _unseeded(function, config, seed, **point):
    """Chapter 6's balance runs start from the config's own seed: ``seed`` is unused."""
    return sized(lambda resized, seed, **rest: function(resized, **rest), config, seed, **point)


def chapter6_kinds(config):
    """As :func:`chapter3_kinds`, for chapter 6: the experiment's own points, one kind per point but its seed (counted
    over the seeds); every run has the config's n (the digits their own data) and its width."""
    e = mirror_flow
    widths = {"sweep": None, "digits": config.digits_width}
    kinds: dict[str, list] = {}
    for spec in e.points(config):
        seeded = "seed" in spec
        spec = {key: value for key, value in spec.items() if key != "seed"}
        name = _chapter6_kind_name(spec)
        if name not in kinds:
            m = spec["width"] if spec["kind"] == "sweep" else widths.get(spec["kind"], config.m)
            function = partial(sized if seeded else _unseeded, e._point)
            kinds[name] = [name, function, [{"n": config.n, "m": m, **spec}], 0]
        kinds[name][3] += 1
    return [tuple(kind) for kind in kinds.values()]


def _chapter6_kind_name(spec: dict) -> str:
    """The kind's name in cost.json (kept as the first measurement named them)."""
    kind = spec["kind"]
    if kind == "balance":
        return f"balance: {spec['label']}, step {spec['step']:g}"
    if kind == "sweep":
        return f"sweep: β = {spec['beta']}, m = {spec['width']}"
    return f"{kind}: {spec['label']}"


def _solver_run(config, seed, n, activation, beta):
    """Chapter 7's mirror solver on n samples (it runs once, with the config's own seed: ``seed`` is unused)."""
    return training_flatness._solver(replace(config, solver_n=n), activation, beta)


def chapter7_kinds(config):
    """As :func:`chapter3_kinds`, for chapter 7 (one n, config.n; the solver's config.solver_n)."""
    e = training_flatness
    point = partial(sized, e._point)
    scale = {"small": config.init_small, "large": config.init_large}
    training = [
        (label, point, [{"n": config.n, "kind": "train", "label": label, "scale": scale[init]}], config.seeds)
        for label, (init, _) in e.METHODS.items()
    ]
    inits = [
        (f"GD, init {x:g}", point, [{"n": config.n, "kind": "train", "label": f"GD, init {x:g}", "scale": x}], 1)
        for x in config.init_scales
    ]
    steps = [
        (
            f"GD, step {eta:g}",
            point,
            [{"n": config.n, "kind": "train", "label": f"GD, step {eta:g}", "scale": config.init_small, "step": eta}],
            1,
        )
        for eta in config.step_sizes
    ]
    references = [("flattest interpolators", point, [{"n": config.n, "kind": "references"}], config.seeds)]
    solver = [
        (
            f"mirror solver: {activation}, β = {beta:g}",
            _solver_run,
            [{"n": config.solver_n, "m": config.solver_m, "activation": activation, "beta": beta}],
            1,
        )
        for activation, beta in [("quadratic", 0.0), *(("relu", b) for b in config.solver_betas)]
    ]
    return training + inits + steps + references + solver


EXPERIMENTS = {
    "bad_interpolators": (bad_interpolators, chapter3_kinds),
    "flattest_generalise": (flattest_generalise, chapter4_kinds),
    "paper_experiments": (paper_experiments, chapter5_kinds),
    "mirror_flow": (mirror_flow, chapter6_kinds),
    "training_flatness": (training_flatness, chapter7_kinds),
}
#: experiments whose timed points' result rows are kept (the reproduce page shows them); chapter 6's rows are
#: whole training trajectories, megabytes that no page reads
KEEP_ROWS = {"bad_interpolators", "flattest_generalise", "paper_experiments", "training_flatness"}


def width(config, point: dict, n: int) -> int:
    """The network width of a timed point: its own ``m``, else its width ratio (or the config's) times n."""
    if "m" in point:
        return point.pop("m")
    ratio = point.get("width_ratio", getattr(config, "width_factor", None) or getattr(config, "width_ratio", None))
    return int(round(ratio * n))


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
                if largest is None and n > args.n_max and not always_timed:  # no paper size timed: time at n_max
                    point = {**point, "n": args.n_max}
                timed_n = point["n"]
                m = width(config, point, timed_n)
                if timed_n <= args.n_max or always_timed:
                    times = []
                    d = point.get("d", getattr(config, "d", None))
                    for replicate in range(args.seeds):  # the sweep's own seeds: config.seed + 100 s
                        seed = config.seed + 100 * replicate
                        entry = done.get((experiment, kind, d, timed_n, seed))
                        if entry is None:
                            rows, seconds = timed(partial(function, config, seed=seed, **point))
                            entry = {
                                "experiment": experiment,
                                "kind": kind,
                                "seed": seed,
                                "d": d,
                                "n": timed_n,
                                "m": m,
                                "seconds": round(seconds, 2),
                                "rows": rows if experiment in KEEP_ROWS else None,
                            }
                            with journal.open("a") as stream:
                                stream.write(json.dumps(entry) + "\n")
                        timings.append(entry)
                        print(
                            f"{experiment:20s} {kind:36s} n = {timed_n:5d}, seed {seed:3d}: {entry['seconds']:8.1f} s",
                            flush=True,
                        )
                        times.append(entry["seconds"])
                    largest = (timed_n, sum(times) / len(times))
                    seconds = largest[1] * (n / timed_n) ** 3  # n = timed_n unless no paper size was within n_max
                    measured_points += points_per_point if n == timed_n else 0
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
