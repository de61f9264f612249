"""Running the points of an experiment: progress bar, on-disk cache, parallel processes or Dask.

Each experiment splits its sweep into *points* (e.g. one activation, n and
seed) and a module-level function ``point_function(config, **point)`` that
returns plain values (JSON).  :func:`map_points` runs the points that are not
cached yet and stores each result the moment it is done, so a re-run is
instant and an interrupted sweep resumes where it stopped.

- Cache: one JSON file per point under ``$FLATBOOK_CACHE`` (default
  ``~/.cache/flatbook``), keyed by the experiment, its ``VERSION``, the full
  config, the point and a fingerprint of the computing code the experiment runs
  (:func:`experiment_sources`: its module and every module of the package it
  imports, transitively, never the drawing in ``flatbook/figures/`` or the
  command line), so an edit of anything that can change its results invalidates
  them, and an edit of a plot, a colour, the style or another experiment's code
  keeps them.  ``VERSION`` (an integer in each experiment module) is for what the
  fingerprint cannot see: bump it when the results change meaning without a
  change in this package's code (a solver or library upgrade that changes the
  numbers, a changed reading of a field), and every point of that experiment is
  computed again.  ``FLATBOOK_CACHE=off`` disables the cache.  Entries sit in
  ``<cache>/<experiment>/<its fingerprint>/<key>.json``, so :func:`cache_summary`
  (``flatbook cache info``) tells entries of the current code from stale ones
  and :func:`clear_cache` (``flatbook cache clear``) removes either.
- Progress: a ``tqdm.auto`` bar per sweep (a widget in Jupyter when ipywidgets is installed, text
  otherwise; on a terminal only when it is interactive).  ``FLATBOOK_PROGRESS=off`` silences it
  (the book build does, so that no bar lands in a page); ``FLATBOOK_PROGRESS=on`` forces it.
- Parallel: ``jobs`` processes (joblib, loky); ``FLATBOOK_JOBS`` sets the
  default (1).  ``backend="dask"`` (or ``FLATBOOK_BACKEND=dask``) runs the same
  points on a ``dask.distributed`` cluster, one task per point: start
  a ``dask.distributed.Client`` first, or name a running scheduler with
  ``FLATBOOK_SCHEDULER=tcp://host:8786`` (``flatbook figure --scheduler``), and
  nothing else changes.
- Recording: inside ``with recording_points() as points:`` every point that :func:`map_points` returns is also
  appended to ``points`` with its function, its result and the seconds it took (``flatbook.paper_results``
  commits them beside an experiment's tables, so that a run can resume elsewhere and be spot-checked).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import os
import pprint
import time
import warnings
from pathlib import Path

from ..errors import FlatbookInputError, SolverFallbackWarning, did_you_mean
from ..progress import progress_bar

__all__ = [
    "BACKENDS",
    "default_jobs",
    "cache_report",
    "cache_counts",
    "run_report",
    "NOT_COMPUTING",
    "computing_sources",
    "experiment_sources",
    "code_fingerprint",
    "experiment_fingerprint",
    "cache_dir",
    "check_writable",
    "point_key",
    "experiment_names",
    "entry_path",
    "cache_summary",
    "clear_cache",
    "scheduler_address",
    "connect_scheduler",
    "map_points",
    "recording_points",
    "store_point",
]

#: where the points of a sweep run: local processes (loky) or a Dask cluster
BACKENDS = ("loky", "dask")

#: points computed and points read from the cache since the last :func:`cache_report`
_COUNTS = {"computed": 0, "cached": 0}

#: where :func:`map_points` records its points while :func:`recording_points` is active (None: not recording)
_RECORDED: list[dict] | None = None


@contextlib.contextmanager
def recording_points():
    """Within the block, every point :func:`map_points` returns is also appended to the yielded list, as it
    finishes (cached ones first), as ``{"experiment", "version", "function", "config", "point", "result",
    "seconds"}``: ``function`` is ``"module:qualname"``, ``config`` the configuration the point ran under (a sweep
    may change the experiment's for some points) as plain JSON, ``seconds`` None for a point read from the cache."""
    global _RECORDED
    previous, _RECORDED = _RECORDED, []
    try:
        yield _RECORDED
    finally:
        _RECORDED = previous


def cache_report() -> str:
    """How many points were computed and how many came from the cache since the last report."""
    computed, cached = _COUNTS["computed"], _COUNTS["cached"]
    _COUNTS.update(computed=0, cached=0)
    # No cache path: the chapters print this into published pages (`flatbook cache info` says where it is).
    return f"{computed} configuration points computed, {cached} read from the cache"


def cache_counts() -> dict[str, int]:
    """Points computed and points read from the cache so far in this process (:func:`cache_report` resets both)."""
    return dict(_COUNTS)


def run_report(config, seconds: float, width: int = 72) -> str:
    """A chapter's run in a few lines of at most ``width`` characters (a collapsed output box holds 75): the scale,
    the time, :func:`cache_report`, then the config, wrapped (the chapters show it in a collapsed cell; no path
    of the machine that ran it)."""
    from . import current_scale

    return f"scale {current_scale()!r}, ran in {seconds:.1f} s\n{cache_report()}\n{pprint.pformat(config, width=width)}"


PACKAGE = Path(__file__).resolve().parent.parent
#: parts of the package that only draw, parse the command line or file results: never part of the cache key
NOT_COMPUTING = ("figures", "cli.py", "__main__.py", "paper_results.py")


def computing_sources(root: Path = PACKAGE) -> list[Path]:
    """The package's .py files that can change a computed point: all but :data:`NOT_COMPUTING`, sorted."""
    return sorted(path for path in root.rglob("*.py") if path.relative_to(root).parts[0] not in NOT_COMPUTING)


def _module_path(parts: tuple[str, ...], root: Path) -> Path | None:
    """The file of the package module ``parts`` (relative to the package), a package's ``__init__.py``, or None."""
    folder = root.joinpath(*parts)
    if (folder / "__init__.py").is_file():
        return folder / "__init__.py"
    file = folder.with_suffix(".py")
    return file if parts and file.is_file() else None


def _imported_modules(path: Path, root: Path) -> set[tuple[str, ...]]:
    """The package modules that the file ``path`` imports anywhere (inside functions too), as parts relative to
    the package. ``from package import name`` counts ``name`` as a submodule where there is one, and otherwise
    the module the package's ``__init__.py`` takes ``name`` from."""
    parts = path.relative_to(root).with_suffix("").parts
    package = parts[:-1]  # a module's package; for an __init__.py, its own
    found: set[tuple[str, ...]] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [tuple(alias.name.split(".")) for alias in node.names]
            found.update(name[1:] for name in names if name[0] == root.name)
        elif isinstance(node, ast.ImportFrom):
            module = tuple(node.module.split(".")) if node.module else ()
            if node.level:
                base = package[: len(package) - node.level + 1] + module
            elif module[:1] == (root.name,):
                base = module[1:]
            else:
                continue
            found.add(base)
            for alias in node.names:
                if _module_path((*base, alias.name), root) is not None:
                    found.add((*base, alias.name))
                elif (root.joinpath(*base) / "__init__.py").is_file():
                    found.update(_defining_modules(base, alias.name, root))
    return {parts for parts in found if _module_path(parts, root) is not None}


def _defining_modules(package: tuple[str, ...], name: str, root: Path) -> set[tuple[str, ...]]:
    """The modules a package's ``__init__.py`` takes ``name`` from (``from .module import name``)."""
    init = root.joinpath(*package) / "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(init.read_text(), filename=str(init))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            if any((alias.asname or alias.name) == name for alias in node.names):
                found.add((*package, *node.module.split(".")))
    return found


def experiment_sources(experiment: str, root: Path = PACKAGE) -> list[Path]:
    """The computing code (:func:`computing_sources`) that ``experiment``'s module runs, sorted: the module, the
    packages above it, and every package module it imports, transitively. A package's ``__init__.py`` counts as
    code, but only the names taken from it are followed (its other re-exports are not what the points run)."""
    start = ("experiments", experiment)
    if _module_path(start, root) is None:
        raise FlatbookInputError(f"no experiment module {experiment!r} in {root / 'experiments'}.")
    computing = set(computing_sources(root))
    seen: set[tuple[str, ...]] = set()
    todo: list[tuple[str, ...]] = [start]
    while todo:
        parts = todo.pop()
        path = _module_path(parts, root)
        if parts in seen or path is None or path not in computing:
            continue
        seen.add(parts)
        todo.extend(parts[:i] for i in range(len(parts)))  # the packages above it run first
        if path.name != "__init__.py":
            todo.extend(_imported_modules(path, root))
    return sorted(path for parts in seen if (path := _module_path(parts, root)) is not None)


@functools.lru_cache(maxsize=32)
def code_fingerprint(root: Path = PACKAGE, experiment: str | None = None) -> str:
    """SHA-256 of computing code (paths and contents): the whole package's (:func:`computing_sources`), or only
    what ``experiment`` runs (:func:`experiment_sources`) when it is named."""
    sources = computing_sources(root) if experiment is None else experiment_sources(experiment, root)
    digest = hashlib.sha256()
    for path in sources:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_dir() -> Path | None:
    """Where point results are cached: ``$FLATBOOK_CACHE``, else ``~/.cache/flatbook``; None when off."""
    setting = os.environ.get("FLATBOOK_CACHE", "").strip()
    if setting.lower() in ("off", "0", "none", "false"):
        return None
    return Path(setting).expanduser() if setting else Path.home() / ".cache" / "flatbook"


def check_writable(directory: Path, what: str) -> Path:
    """Create ``directory`` if needed and check that a file can be written in it; a clear error otherwise.

    ``what`` names the setting the directory comes from (e.g. ``"--out"``), for the message.
    """
    directory = Path(directory).expanduser()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".flatbook-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        in_the_way = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None)
        reason = f"{in_the_way} is a file, not a folder" if in_the_way else exc.strerror or str(exc)
        raise FlatbookInputError(
            f"{what} {str(directory)!r} cannot hold files ({reason}); name a folder you can write to."
        ) from exc
    return directory


def point_key(experiment: str, config, point: dict, version: int = 0, function: str = "") -> str:
    """A stable key for one point: experiment, its version, the point function (``module:qualname``: two
    functions of one experiment can take the same point), config, point and the fingerprint of the code the
    experiment runs (:func:`experiment_fingerprint`)."""
    payload = json.dumps(
        {
            "experiment": experiment,
            "version": version,
            "function": function,
            "config": dataclasses.asdict(config),
            "point": point,
            "code": experiment_fingerprint(experiment),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def experiment_names() -> list[str]:
    """The experiments whose points the cache can hold: the modules of :mod:`flatbook.experiments`."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name != "runner")


def experiment_fingerprint(experiment: str) -> str:
    """:func:`code_fingerprint` of the code ``experiment`` runs; of the whole package's computing code for a
    name that is no experiment module (a sweep of the caller's own, e.g. in a test)."""
    return code_fingerprint(experiment=experiment if experiment in experiment_names() else None)


def _code_folder(experiment: str) -> str:
    """The name of the folder that holds the points of ``experiment``'s current computing code."""
    return experiment_fingerprint(experiment)[:16]


def entry_path(directory: Path, experiment: str, key: str) -> Path:
    """Where one point's result is cached: under a folder named by its experiment's code fingerprint."""
    return directory / experiment / _code_folder(experiment) / f"{key}.json"


def _cache_dir_for(action: str) -> Path:
    directory = cache_dir()
    if directory is None:
        raise FlatbookInputError(f"the cache is off (FLATBOOK_CACHE=off): there is nothing to {action}.")
    return directory


def _check_experiments(experiments) -> list[str]:
    known = experiment_names()
    unknown = [name for name in experiments if name not in known]
    if unknown:
        hints = ", ".join(_unknown_experiment(name, known) for name in unknown)
        raise FlatbookInputError(f"unknown experiment {hints}; choose from {', '.join(known)}.")
    return list(experiments) or known


def _unknown_experiment(name: str, known: list[str]) -> str:
    """An unknown experiment name with a hint: the experiment of a figure id, or the closest names."""
    from ..figures import REGISTRY

    if name in REGISTRY:
        return f"{name!r} (a figure id; its experiment is {REGISTRY[name].experiment})"
    return f"{name!r}{did_you_mean(name, known)}"


def cache_summary(experiments=()) -> list[dict]:
    """One row per experiment: cached points of the current code and stale ones (older code), with their bytes."""
    directory = _cache_dir_for("summarise")
    rows = []
    for name in _check_experiments(experiments):
        current = _code_folder(name)
        counts = {"current": 0, "current_bytes": 0, "stale": 0, "stale_bytes": 0}
        for path in (directory / name).glob("*/*.json"):
            kind = "current" if path.parent.name == current else "stale"
            counts[kind] += 1
            counts[f"{kind}_bytes"] += path.stat().st_size
        rows.append({"experiment": name, **counts})
    return rows


def clear_cache(experiments=(), *, stale_only: bool = False) -> int:
    """Delete the cached points of ``experiments`` (default: all), or only those of older code; return how many."""
    import shutil

    directory = _cache_dir_for("clear")
    removed = 0
    for name in _check_experiments(experiments):
        current = _code_folder(name)
        for folder in (directory / name).glob("*"):
            if folder.is_dir() and not (stale_only and folder.name == current):
                removed += sum(1 for _ in folder.glob("*.json"))
                shutil.rmtree(folder)
    return removed


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # missing or half-written: compute again


def _store(path: Path, result) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(result))
    tmp.replace(path)  # atomic: an interrupted write never leaves a corrupt entry


def store_point(experiment: str, config, point: dict, result, version: int = 0, function: str = "") -> Path | None:
    """Put one point's result into the cache of the current code, as :func:`map_points` would have stored it
    (a result computed elsewhere by the same code, by the point function ``module:qualname``); the entry's
    path, or None when the cache is off."""
    directory = cache_dir()
    if directory is None:
        return None
    path = entry_path(directory, experiment, point_key(experiment, config, point, version, function))
    _store(path, json.loads(json.dumps(result)))
    return path


def default_jobs(fallback: int = 1) -> int:
    """``$FLATBOOK_JOBS`` if set, else ``fallback``: the processes a sweep uses when ``jobs`` is not given."""
    value = os.environ.get("FLATBOOK_JOBS", str(fallback)).strip() or str(fallback)
    try:
        jobs = int(value)
    except ValueError:
        raise FlatbookInputError(f"FLATBOOK_JOBS={value!r} is not an integer number of processes.") from None
    if jobs < 1:
        raise FlatbookInputError(f"FLATBOOK_JOBS must be at least 1, got {jobs}.")
    return jobs


def _distributed():
    """The ``distributed`` package, or a clear error saying how to install it."""
    try:
        import distributed
    except ImportError as exc:
        raise FlatbookInputError(
            "running on Dask needs dask.distributed: from the flatbook checkout, pip install -e '.[cluster]' "
            "(or pip install 'distributed>=2024.1')."
        ) from exc
    return distributed


def scheduler_address() -> str | None:
    """``$FLATBOOK_SCHEDULER``, the Dask scheduler to run on when no Client is running (None if unset)."""
    return os.environ.get("FLATBOOK_SCHEDULER", "").strip() or None


#: seconds a connection to a Dask scheduler may take, handshake included, before it counts as unreachable
SCHEDULER_TIMEOUT = 10.0


def _identify(address: str, timeout: float) -> dict:
    """The scheduler's answer to Dask's ``identity`` call, the whole exchange bounded by ``timeout`` seconds.

    Runs in a daemon thread with its own event loop: it works inside Jupyter's loop too, and a server that
    never answers cannot keep the process alive.
    """
    import asyncio
    import threading

    from distributed.core import rpc

    async def ask():
        async with rpc(address, timeout=timeout) as remote:
            return await remote.identity()

    outcome: list = []

    def run():
        try:
            outcome.append(asyncio.run(asyncio.wait_for(ask(), timeout)))
        except BaseException as exc:  # handed to the caller below
            outcome.append(exc)

    thread = threading.Thread(target=run, name="flatbook-scheduler-probe", daemon=True)
    thread.start()
    thread.join(timeout + 1)
    if not outcome:
        raise TimeoutError(f"no answer within {timeout:g} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def connect_scheduler(address: str, timeout: float | None = None):
    """A ``dask.distributed.Client`` connected to the scheduler at ``address`` (e.g. ``tcp://host:8786``).

    The connection, handshake included, must succeed within ``timeout`` seconds (default
    ``SCHEDULER_TIMEOUT``, 10 s): an address where nothing listens, or where another kind of server (HTTP,
    SSH, a Dask worker) answers, raises a :class:`~flatbook.errors.FlatbookInputError` that says so.
    """
    distributed = _distributed()
    from distributed.comm.addressing import parse_address, parse_host_port

    timeout = SCHEDULER_TIMEOUT if timeout is None else timeout
    advice = (
        "start one with `dask scheduler` (it prints its tcp:// address) and workers with "
        "`dask worker ADDRESS`, then pass that address."
    )
    try:
        scheme, location = parse_address(address)
        host_port = parse_host_port(location) if scheme == "tcp" else None
    except ValueError as exc:
        raise FlatbookInputError(
            f"{address!r} is not a Dask scheduler address ({exc}); it looks like tcp://host:8786."
        ) from None
    try:
        if host_port is not None:
            import socket

            socket.create_connection(host_port, timeout=timeout).close()  # nothing listens: fail now
            identity = _identify(address, timeout)
            kind = identity.get("type") if isinstance(identity, dict) else None
            if kind != "Scheduler":
                raise _NotAScheduler(f"it answered as a Dask {kind}, not the scheduler" if kind else "not Dask")
        return distributed.Client(address, timeout=timeout)
    except TimeoutError:  # e.g. an HTTP server, waiting for a request Dask never sends
        reason = f"no Dask answer within {timeout:g} s: is it the port of another kind of server, e.g. HTTP?"
    except (OSError, _NotAScheduler) as exc:
        reason = f"{type(exc).__name__}: {exc}" if isinstance(exc, OSError) else str(exc)
    except Exception as exc:  # e.g. a banner (SSH, SMTP) read as a Dask frame size: MemoryError
        reason = f"it does not speak Dask's protocol; its reply, read as Dask's, raised {type(exc).__name__}"
    raise FlatbookInputError(f"cannot reach a Dask scheduler at {address!r} ({reason}); {advice}")


class _NotAScheduler(Exception):
    """A server that answered, but not as a Dask scheduler."""


def _dask_client():
    """The running Client, else one connected to ``$FLATBOOK_SCHEDULER``; a clear error when neither exists."""
    distributed = _distributed()
    try:
        return distributed.get_client()
    except ValueError:
        address = scheduler_address()
        if address:
            return connect_scheduler(address)
        raise FlatbookInputError(
            "backend='dask' needs a Dask scheduler: name it with FLATBOOK_SCHEDULER=tcp://host:8786 "
            "(on the command line, `flatbook figure ... --scheduler tcp://host:8786`), or in Python start "
            "a `dask.distributed.Client` first."
        ) from None


def _compute(function, config, point: dict) -> tuple:
    """One point and the seconds it took, with :class:`~flatbook.errors.SolverFallbackWarning` silenced: a
    fallback to Clarabel is certified like any answer, and in a sweep its warning would only print into the
    book's pages."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SolverFallbackWarning)
        result = function(config, **point)
    return result, time.perf_counter() - start


def map_points(
    function,
    config,
    points: list[dict],
    *,
    experiment: str,
    version: int = 0,
    jobs: int | None = None,
    backend: str | None = None,
    desc: str | None = None,
) -> list:
    """``[function(config, **point) for point in points]``, cached per point, in parallel if asked.

    ``experiment`` names the cache folder; ``version`` is the experiment's ``VERSION`` (part of the key).
    Results come back in the order of ``points``.
    """
    backend = backend or os.environ.get("FLATBOOK_BACKEND", "loky").strip() or "loky"
    if backend not in BACKENDS:
        raise FlatbookInputError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}.")
    jobs = default_jobs() if jobs is None else jobs
    directory = cache_dir()
    function_name = f"{function.__module__}:{function.__qualname__}"
    paths = [
        entry_path(directory, experiment, point_key(experiment, config, p, version, function_name))
        if directory
        else None
        for p in points
    ]
    results = [_load(path) if path is not None and path.exists() else None for path in paths]
    todo = [i for i, result in enumerate(results) if result is None]
    if directory is not None and todo:
        check_writable(directory, "the cache FLATBOOK_CACHE")  # before the first point, not after it
    _COUNTS["cached"] += len(points) - len(todo)
    _COUNTS["computed"] += len(todo)
    bar = progress_bar(len(points), len(points) - len(todo), desc or experiment)
    recorded = _RECORDED

    def record(i, seconds):
        if recorded is not None:
            recorded.append(
                {
                    "experiment": experiment,
                    "version": version,
                    "function": function_name,
                    "config": json.loads(json.dumps(dataclasses.asdict(config), default=str)),
                    "point": json.loads(json.dumps(points[i])),
                    "result": copy.deepcopy(results[i]),  # as computed, whatever the caller does with it later
                    "seconds": seconds,
                }
            )

    for i, result in enumerate(results):
        if result is not None:
            record(i, None)

    def finish(i, output):
        result, seconds = output
        result = json.loads(json.dumps(result))  # the same plain values whether fresh or cached
        if paths[i] is not None:
            _store(paths[i], result)
        results[i] = result
        record(i, seconds)
        bar.update(1)

    if backend == "dask":
        # Straight to the cluster, each point one task, stored as it arrives.  (joblib's Dask backend runs
        # everything in this process when the cluster has a single core.)
        client = _dask_client()
        futures = {client.submit(_compute, function, config, points[i], pure=False): i for i in todo}
        for future in _distributed().as_completed(futures):
            finish(futures[future], future.result())
    elif jobs == 1:
        for i in todo:
            finish(i, _compute(function, config, points[i]))
    else:
        import joblib

        threads = max(1, (os.cpu_count() or 1) // jobs)
        with (
            warnings.catch_warnings(),
            joblib.parallel_config(backend="loky", n_jobs=jobs, inner_max_num_threads=threads),
        ):
            # loky replaces a worker whose memory grew by more than its leak threshold (300 MB) after a task and
            # warns if other tasks were queued; the tasks run on the new worker and no result is lost.
            warnings.filterwarnings(
                "ignore", message="A worker stopped while some jobs were given", category=UserWarning
            )
            outputs = joblib.Parallel(n_jobs=jobs, return_as="generator")(
                joblib.delayed(_compute)(function, config, points[i]) for i in todo
            )
            for i, result in zip(todo, outputs, strict=True):
                finish(i, result)
    bar.close()
    return results
