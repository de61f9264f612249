"""Run an experiment's paper configuration and commit-ready results: book/paper_scale/results/EXPERIMENT.json.gz.

    python scripts/paper_scale.py bad_interpolators            # two processes, resumes from the results file
    python scripts/paper_scale.py mirror_flow --jobs 4

Run it from a clean checkout (it refuses uncommitted changes in src/ or book/: the file names the commit that
computed it), one experiment at a time, alone on the machine if its wall time is to mean anything. Stopped
(Ctrl-C or SIGTERM), it writes the points whose results had reached it (``complete`` false: with local worker
processes results arrive in the order of the points, so one that finished behind a point still running is lost
to the stop; with FLATBOOK_BACKEND=dask and FLATBOOK_SCHEDULER naming a scheduler each is kept as it finishes);
the next run, here or on a fresh machine with the same computing code, puts them back into the cache and
computes only the rest; the points it resumes keep the seconds the earlier run recorded for them. Points of older
computing code are resumed only where flatbook.paper_results.SAME_FINISHED_POINTS declares that the current code
computes them identically; the file then names, point by point, the code that computed them. A complete file
of the current code is left alone unless ``--again``. What the file holds: ``flatbook.paper_results``.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from flatbook import paper_results
from flatbook.errors import FlatbookInputError
from flatbook.experiments.runner import experiment_fingerprint, experiment_names

RESULTS = Path(__file__).resolve().parent.parent / "book" / "paper_scale" / "results"


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", choices=experiment_names())
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--again", action="store_true", help="recompute a complete file of the current code")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    path = RESULTS / paper_results.file_name(args.experiment)
    previous = None
    if path.exists():
        previous = paper_results.load(path)
        current = previous["code_fingerprint"] == experiment_fingerprint(args.experiment)
        if previous["complete"] and current and not args.again:
            print(f"{path} is complete and from the current code; --again recomputes it.")
            return 0
        resumed = paper_results.resume_into_cache(previous) if not args.again else 0
        print(f"{resumed} finished points of {path} put back into the cache")
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        results = paper_results.run(args.experiment, "paper", jobs=args.jobs)
    except FlatbookInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if previous is not None and not args.again:
        paper_results.carry_over(results, previous)
    paper_results.write(results, path)
    if results["failure"]:
        print(
            f"error: a point could not be computed ({results['failure']}); the {len(results['points'])} points "
            f"that finished are in {path}, and the same command resumes from them once the cause is fixed.",
            file=sys.stderr,
        )
        return 1
    state = "complete" if results["complete"] else "stopped; run the same command to resume"
    print(
        f"{path}: {state}, {len(results['points'])} points ({results['points_computed']} computed, "
        f"{results['points_cached']} from the cache) in {results['wall_time_s']:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
