"""Command line (also ``python -m flatbook``).

- ``flatbook figure ID ... --scale {smoke,book,paper} --out DIR [--jobs N] [--backend B] [--scheduler ADDR]``
- ``flatbook cache info [EXPERIMENT ...]`` and ``flatbook cache clear (EXPERIMENT ... | --all) [--stale]``
"""

from __future__ import annotations

import argparse
import os
import sys

from .errors import FlatbookInputError, did_you_mean
from .experiments import SCALES
from .experiments.runner import BACKENDS, cache_dir, check_writable, scheduler_address

__all__ = ["main"]


def _figure(args) -> int:
    from .figures import REGISTRY

    if args.list:
        width = max(len(i) for i in REGISTRY)
        for spec in REGISTRY.values():
            print(f"{spec.id:<{width}}  {spec.chapter:<32}  {spec.title}")
            print(f"{'':<{width}}  computed by {spec.computed_by}, drawn by {spec.drawn_by}")
        return 0
    ids = list(REGISTRY) if args.all else args.ids
    if not ids:
        print("name a figure id, --all, or --list", file=sys.stderr)
        return 2
    # Reject every bad argument before anything is computed (a paper-scale figure takes hours).
    unknown = [figure_id for figure_id in ids if figure_id not in REGISTRY]
    if unknown:
        hints = ", ".join(f"{figure_id!r}{did_you_mean(figure_id, REGISTRY)}" for figure_id in unknown)
        raise FlatbookInputError(
            f"unknown figure id {hints}; valid ids: {', '.join(REGISTRY)} "
            "(`flatbook figure --list` shows what each one is)."
        )
    args.scale = args.scale.strip().lower()
    if args.scale not in SCALES:
        raise FlatbookInputError(
            f"unknown scale {args.scale!r}{did_you_mean(args.scale, SCALES)}; choose one of {', '.join(SCALES)}."
        )
    if args.jobs is not None and args.jobs < 1:
        raise FlatbookInputError(f"--jobs must be a positive number of processes, got {args.jobs}.")
    if args.backend is not None and args.backend not in BACKENDS:
        raise FlatbookInputError(f"unknown backend {args.backend!r}; choose one of {', '.join(BACKENDS)}.")
    scheduler = args.scheduler or scheduler_address()
    if scheduler is not None:
        if args.backend not in (None, "dask"):
            raise FlatbookInputError(
                f"--scheduler runs the points with Dask; it cannot be combined with --backend {args.backend}."
            )
        if args.jobs is not None:
            raise FlatbookInputError("--jobs counts local processes; with --scheduler the cluster's workers decide.")
    elif (args.backend or os.environ.get("FLATBOOK_BACKEND", "").strip()) == "dask":
        raise FlatbookInputError(
            "--backend dask runs the points on a Dask cluster: name its scheduler with --scheduler tcp://host:8786 "
            "(or FLATBOOK_SCHEDULER); `dask scheduler` starts one and prints its address."
        )
    check_writable(args.out, "--out")
    cache = cache_dir()
    if cache is not None:
        check_writable(cache, "FLATBOOK_CACHE")
    if scheduler is not None:
        from .experiments.runner import connect_scheduler

        client = connect_scheduler(scheduler)  # before anything is computed: an unreachable address fails now
        args.backend = "dask"
        print(f"flatbook: running the points on the Dask scheduler at {scheduler}", file=sys.stderr)
    try:
        _make_all(ids, args)
    finally:
        if scheduler is not None:
            client.close()
    return 0


def _make_all(ids, args) -> None:
    from .figures import make

    for figure_id in ids:
        sidecar = make(
            figure_id, scale=args.scale, out=args.out, jobs=args.jobs, backend=args.backend, command=args.command_line
        )
        print(
            f"{figure_id}: {', '.join(sidecar['files'])} + {figure_id}.json in {args.out} "
            f"({sidecar['wall_time_s']:.1f} s, scale {args.scale})"
        )


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.1f} MB" if n_bytes >= 1e5 else f"{n_bytes / 1e3:.1f} kB"


def _clear_all_confirmed(args) -> bool:
    """``cache clear`` without experiment names deletes every point: it needs ``--all``, or a yes on a terminal."""
    if args.all and args.experiments:
        raise FlatbookInputError("name experiments or pass --all, not both.")
    if args.all or args.experiments or args.stale or cache_dir() is None:
        return True
    if not sys.stdin.isatty():
        raise FlatbookInputError(
            "`cache clear` without experiment names would delete every cached point; "
            "pass --all to do that, or name experiments (`flatbook cache info` lists them)."
        )
    return input(f"delete every cached point in {cache_dir()}? [y/N] ").strip().lower() in ("y", "yes")


def _cache(args) -> int:
    from .experiments.runner import cache_summary, clear_cache

    if args.action == "info":
        if args.all:
            raise FlatbookInputError("--all is for `cache clear`; `cache info` shows every experiment by default.")
        rows = cache_summary(args.experiments)
        print(f"cache: {cache_dir()}  (FLATBOOK_CACHE moves it)")
        width = max(len(row["experiment"]) for row in rows)
        print(f"{'experiment':<{width}}  {'current code':>22}  {'older code (stale)':>22}")
        for row in rows:
            current = f"{row['current']} points, {_size(row['current_bytes'])}"
            stale = f"{row['stale']} points, {_size(row['stale_bytes'])}"
            print(f"{row['experiment']:<{width}}  {current:>22}  {stale:>22}")
        return 0
    if not _clear_all_confirmed(args):
        print("nothing deleted")
        return 0
    removed = clear_cache(args.experiments, stale_only=args.stale)
    which = "stale " if args.stale else ""
    print(f"removed {removed} {which}cached points from {cache_dir()}")
    return 0


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flatbook", description="Regenerate the figures of the flatbook book.")
    parser.add_argument("--version", action="version", version=f"flatbook {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    figure = commands.add_parser("figure", help="regenerate figures by id (PNG, SVG, PDF and a JSON sidecar)")
    figure.add_argument("ids", nargs="*", metavar="ID", help="figure ids (see --list)")
    figure.add_argument(
        "--list",
        action="store_true",
        help="list every figure id with its chapter and the functions that compute and draw it",
    )
    figure.add_argument("--all", action="store_true", help="every figure of the book")
    figure.add_argument("--scale", default="book", help=f"one of {', '.join(SCALES)} (default: book)")
    figure.add_argument("--out", default="figures", help="output folder (default: ./figures)")
    figure.add_argument("--jobs", type=int, default=None, help="parallel processes (default: $FLATBOOK_JOBS or 1)")
    figure.add_argument("--backend", default=None, help="loky (default) or dask (needs --scheduler)")
    figure.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the points on the Dask scheduler at ADDRESS, e.g. tcp://host:8786 (default: $FLATBOOK_SCHEDULER)",
    )
    cache = commands.add_parser("cache", help="what the experiment cache holds, and clearing it")
    cache.add_argument("action", choices=("info", "clear"), help="info: points per experiment; clear: delete them")
    cache.add_argument(
        "experiments", nargs="*", metavar="EXPERIMENT", help="experiment names (info: default all; clear: or --all)"
    )
    cache.add_argument("--all", action="store_true", help="clear: every experiment's points")
    cache.add_argument("--stale", action="store_true", help="clear only points computed by older code")
    args = parser.parse_args(argv)
    args.command_line = ["flatbook", *(sys.argv[1:] if argv is None else argv)]
    try:
        return _cache(args) if args.command == "cache" else _figure(args)
    except FlatbookInputError as exc:
        print(f"flatbook: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
