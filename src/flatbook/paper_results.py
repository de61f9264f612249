"""Paper-scale results committed with the book: an experiment's tables and every point, with their provenance.

``python scripts/paper_scale.py EXPERIMENT`` runs an experiment's paper configuration and writes
``book/paper_scale/results/EXPERIMENT.json.gz`` (:func:`write`; gzip-compressed JSON, one point per line
inside): the tables the chapter reads, every point with the
function that computed it, the configuration fields a sweep changed for it (``config_changes``), its result and
its seconds (:func:`flatbook.experiments.runner.recording_points`),
and the provenance: the commit (a run refuses uncommitted changes), the fingerprint of the code the experiment
runs, the configuration, machine, device, library versions, wall time, command line and cache hits.

A stopped run writes the points whose results had reached it (``complete`` false, no tables: with local worker
processes results arrive in the order of the points, so one that finished behind a point still running is lost
to the stop; with ``FLATBOOK_BACKEND=dask`` each is kept as it finishes); :func:`resume_into_cache` puts those points
back into the cache, on any machine with the same computing code, so the next run computes only the rest, and
:func:`carry_over` gives them back the seconds the earlier run recorded. Points of older computing code are
resumed only where :data:`SAME_FINISHED_POINTS` declares that the current code computes them identically; the
file then says, point by point, which code computed each (``carried_from``) and why it stands for the current.
:func:`spot_check` recomputes the cheapest committed points with the current code and lists every number that
differs beyond a tolerance: the check that committed results are still what the code computes.
"""

from __future__ import annotations

import dataclasses
import datetime
import gzip
import importlib
import json
import math
import shlex
import sys
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from .backend import default_device
from .errors import FlatbookInputError, InfeasibleInterpolationError, SolverError
from .experiments import config_for
from .experiments.runner import (
    cache_dir,
    experiment_fingerprint,
    experiment_names,
    recording_points,
    store_point,
)
from .figures.saving import git_commit, machine, package_versions
from .prose import counted

__all__ = [
    "FORMAT",
    "Difference",
    "file_name",
    "run",
    "write",
    "load",
    "results_folder",
    "committed",
    "complete_run",
    "run_status",
    "provenance",
    "resume_into_cache",
    "SAME_FINISHED_POINTS",
    "carry_over",
    "cheapest_points",
    "spot_check",
    "differences",
]

#: the layout of a results file; a reader refuses any other
FORMAT = 1

#: Older computing code whose finished points the current code computes identically:
#: (experiment, fingerprint of the current code, fingerprint of the older) → why. Declared only where every change
#: between the two acts only where the older code raised, so that a point it finished takes the same path through
#: the new code; tied to the current fingerprint, so that any later change of the code ends the declaration.
SAME_FINISHED_POINTS: dict[tuple[str, str, str], str] = {
    (
        "flattest_generalise",
        "261176713920fe021d94550c9bb682e2c638551ca478c9e002756e4ad78df738",
        "bfd1195abf0d9fb55f3849ab41ae31097e3384ab2f2c7cf92bd6204223fed54f",
    ): "near_flattest.RESTART_OPTIONS gained a last restart, primal simplex with no iteration limit, tried only "
    "after every earlier attempt has ended without a verdict, where the older code raised SolverError and stopped "
    "the run",
}


@dataclasses.dataclass(frozen=True)
class Difference:
    """One number of a committed point that the current code computes differently (:func:`spot_check`)."""

    function: str  #: ``module:qualname`` of the point function
    point: dict  #: the point's arguments
    where: str  #: the path to the number inside the point's result, e.g. ``[0].upper``
    committed: Any
    recomputed: Any


def _module(experiment: str):
    if experiment not in experiment_names():
        raise FlatbookInputError(f"unknown experiment {experiment!r}; choose from {', '.join(experiment_names())}.")
    return importlib.import_module(f"flatbook.experiments.{experiment}")


def _plain(value):
    """JSON's view of a value (tuples become lists), so that committed and fresh configurations compare equal."""
    return json.loads(json.dumps(value, default=str))


def run(experiment: str, scale: str = "paper", jobs: int | None = None, *, allow_uncommitted: bool = False) -> dict:
    """Run ``experiment`` at ``scale`` with its points recorded; the results file's content (:func:`write`).

    Refuses to start when the checkout has uncommitted changes in src/ or book/ (the commit would not say what
    computed the numbers) unless ``allow_uncommitted``. Interrupted (KeyboardInterrupt), or stopped by a point
    the code cannot compute (a solver's error or a RuntimeError of the numerical library, named in ``failure``),
    it returns the points that finished with ``complete`` False and no tables.
    """
    module = _module(experiment)
    config = config_for(module.CONFIGS, scale)
    run_config = _plain(dataclasses.asdict(config))
    commit = git_commit()
    if commit is not None and commit.endswith("+uncommitted-changes") and not allow_uncommitted:
        raise FlatbookInputError(
            "the checkout has uncommitted changes in src/ or book/: commit them first, so that the results name "
            "the code that computed them."
        )
    fingerprint = experiment_fingerprint(experiment)  # of the code as the run starts: files may change during it
    start = time.perf_counter()
    tables = None
    failure = None
    with recording_points() as points:
        try:
            tables = module.run(config, jobs=jobs)
        except KeyboardInterrupt:
            pass
        # a point the code could not compute: a solver's error, or one inside the numerical library (torch raises
        # RuntimeError, e.g. LinAlgError); the points that finished are kept for the next run to resume from
        except (SolverError, InfeasibleInterpolationError, RuntimeError) as exc:
            failure = f"{type(exc).__name__}: {exc}"
    return {
        "format": FORMAT,
        "experiment": experiment,
        "scale": scale,
        "complete": tables is not None,
        "failure": failure,
        "config": run_config,
        "code_fingerprint": fingerprint,
        "git_commit": commit,
        "versions": package_versions(),
        "machine": machine(),
        "device": str(default_device()),
        "wall_time_s": round(time.perf_counter() - start, 1),
        "command": shlex.join(sys.argv),
        "points_computed": sum(point["seconds"] is not None for point in points),
        "points_cached": sum(point["seconds"] is None for point in points),
        "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tables": _plain(tables) if tables is not None else None,
        "points": [_with_config_changes(point, run_config) for point in _plain(list(points))],
    }


def _with_config_changes(point: dict, run_config: dict) -> dict:
    """A recorded point with its configuration written as ``config_changes``: the fields a sweep changed from the
    run's configuration (empty for most points), which :func:`_configurations` applies again."""
    point = dict(point)
    config = point.pop("config")
    point["config_changes"] = {
        field: value for field, value in config.items() if field not in run_config or value != run_config[field]
    }
    return point


def _configurations(results: dict, config) -> list:
    """The configuration each committed point ran under: ``config`` with the point's ``config_changes``.

    A point without ``config_changes`` is taken to have run under ``config`` when its function and arguments
    occur once in the file (every sweep of these experiments reruns points of the run's own configuration, which
    run first, so a swept point recurs); when they occur more than once, a sweep ran it under several
    configurations that the file does not tell apart. Those, and a point whose changes name fields ``config``
    lacks (it ran under another kind of configuration), have None: they are neither resumed nor spot-checked.
    """
    seen = Counter(_point_identity(entry) for entry in results["points"])
    fields = {field.name for field in dataclasses.fields(config)}

    def configuration(entry):
        if "config_changes" not in entry:
            return config if seen[_point_identity(entry)] == 1 else None
        changes = entry["config_changes"]
        return dataclasses.replace(config, **_arguments(changes)) if changes.keys() <= fields else None

    return [configuration(entry) for entry in results["points"]]


def _point_identity(entry: dict) -> str:
    return json.dumps([entry["function"], entry["point"]], sort_keys=True)


def file_name(experiment: str) -> str:
    """The name of an experiment's results file in ``book/paper_scale/results``."""
    return f"{experiment}.json.gz"


def write(results: dict, path: str | Path) -> Path:
    """Write ``results`` (from :func:`run`) as compact JSON, one point per line (readable after ``gunzip``),
    gzip-compressed when ``path`` ends in ``.gz`` with no date in the header (the same results, the same
    bytes); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {key: value for key, value in results.items() if key != "points"}
    lines = [json.dumps(point, sort_keys=True, separators=(",", ":")) for point in results["points"]]
    body = json.dumps(head, sort_keys=True, separators=(",", ":"))[:-1]
    text = (body + ',"points":[\n' + ",\n".join(lines) + "\n]}\n").encode()
    path.write_bytes(gzip.compress(text, compresslevel=9, mtime=0) if path.suffix == ".gz" else text)
    return path


def load(path: str | Path) -> dict:
    """A results file written by :func:`write` (plain or gzip-compressed), checked for its format."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        results = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    except (OSError, EOFError, zlib.error, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FlatbookInputError(f"{path} is not a readable results file ({exc}).") from exc
    if not isinstance(results, dict) or results.get("format") != FORMAT:
        raise FlatbookInputError(f"{path} is not a results file of format {FORMAT}; regenerate it.")
    unexplained = {p["carried_from"] for p in results["points"] if "carried_from" in p} - set(
        results.get("carried_because", {})
    )
    if unexplained:
        raise FlatbookInputError(
            f"{path} has points of older code ({', '.join(sorted(f[:8] for f in unexplained))}) without the reason "
            "they stand for the file's code (carried_because): regenerate it."
        )
    return results


def results_folder(start: str | Path | None = None) -> Path:
    """``book/paper_scale/results`` of the checkout that ``start`` (default: the working directory) lies in,
    whether it is the checkout's root, ``book/`` (the build) or a folder with a notebook copy inside it."""
    here = Path.cwd() if start is None else Path(start)
    here = here.resolve()
    candidates = [
        here / "paper_scale" / "results",
        *(p / "book" / "paper_scale" / "results" for p in (here, *here.parents)),
    ]
    found = next((folder for folder in candidates if folder.is_dir()), None)
    if found is None:
        raise FlatbookInputError(
            f"no book/paper_scale/results folder above {here}: run this from the flatbook checkout."
        )
    return found


def committed(experiment: str, start: str | Path | None = None) -> dict:
    """The committed paper-scale results of ``experiment`` (:func:`results_folder`), loaded; a clear error when
    there are none, naming the command that computes them."""
    _module(experiment)
    path = results_folder(start) / file_name(experiment)
    if not path.is_file():
        raise FlatbookInputError(
            f"no paper-scale results for {experiment} in {path.parent}: python scripts/paper_scale.py {experiment}"
        )
    return load(path)


def _code_configuration(experiment: str, results: dict, scale: str):
    """The current code's ``scale`` configuration of ``experiment`` where ``results`` ran under it, else None."""
    config = config_for(_module(experiment).CONFIGS, scale)
    return config if _plain(dataclasses.asdict(config)) == results["config"] else None


def _current_configuration(experiment: str, results: dict) -> bool:
    """Whether ``results`` are of the paper configuration the current code's experiment has."""
    return _code_configuration(experiment, results, "paper") is not None


def complete_run(experiment: str, start: str | Path | None = None) -> dict:
    """The committed paper-scale results of ``experiment`` that a chapter may read: complete, and of the paper
    configuration the current code's experiment has; otherwise an error naming the command that makes them."""
    results = committed(experiment, start)
    command = f"python scripts/paper_scale.py {experiment}"
    if not results["complete"]:
        cause = f" by {results['failure']}" if results.get("failure") else ""
        raise FlatbookInputError(
            f"the paper-scale run of {experiment} was stopped{cause} with {counted(len(results['points']), 'point')} "
            f"done: resume it with {command}"
        )
    if not _current_configuration(experiment, results):
        raise FlatbookInputError(
            f"the committed paper-scale results of {experiment} are of another paper configuration: {command} --again"
        )
    return results


def run_status(experiment: str, start: str | Path | None = None) -> str:
    """What the committed paper-scale results of ``experiment`` are, as a plain-text predicate for a chapter that
    shows none of them ("its paper-scale results …"): "have not been computed", "are of another paper
    configuration", "were stopped (by …,) with N points computed" (each with the command that computes, recomputes
    or resumes them; after a point the code could not compute, once the cause is fixed) or "are complete"."""
    _module(experiment)
    command = f"python scripts/paper_scale.py {experiment}"
    if not (results_folder(start) / file_name(experiment)).is_file():
        return f"have not been computed ({command} computes them)"
    results = committed(experiment, start)
    if not _current_configuration(experiment, results):
        return f"are of another paper configuration ({command} --again recomputes them)"
    if not results["complete"]:
        done = f"with {counted(len(results['points']), 'point')} computed"
        if results.get("failure"):
            failure = results["failure"].rstrip(".")
            return f"were stopped by {failure}, {done} ({command} resumes from them once the cause is fixed)"
        return f"were stopped {done} ({command} resumes them)"
    return "are complete"


def _duration(seconds: float) -> str:
    """A duration in minutes, or in hours from two hours up."""
    return f"{seconds / 3600:.1f} hours" if seconds >= 7200 else f"{seconds / 60:.1f} minutes"


def provenance(results: dict) -> str:
    """Where committed results come from, as a sentence for a chapter (Markdown): file, command, commit,
    wall time (of the last invocation, where it resumed points from earlier ones), the points' computing time
    summed over them, how many points older code computed (:func:`carry_over`) and why they stand, machine, and
    whether the computing code that made them is the current one."""
    experiment = results["experiment"]
    current = results["code_fingerprint"] == experiment_fingerprint(experiment)
    code = (
        "by the current computing code"
        if current
        else "by an older computing code, whose cheapest points the tests recompute with the current one"
    )
    timing = (
        f"in {_duration(results['wall_time_s'])}"
        if results.get("points_cached", 0) == 0
        else f"in {_duration(results['wall_time_s'])} of its last invocation, which resumed "
        f"{results['points_cached']} points from earlier runs"
    )
    seconds = [point["seconds"] for point in results["points"]]
    unrecorded = sum(s is None for s in seconds)
    if seconds and not unrecorded:
        timing += f" (its {len(seconds)} points took {_duration(sum(seconds))} of computing, summed over them)"
    elif unrecorded:
        timing += f" (the computing time of {unrecorded} of its {len(seconds)} points is not recorded)"
    carried = Counter(point["carried_from"] for point in results["points"] if "carried_from" in point)
    older = "".join(
        f" {count} of its points were computed by older code (fingerprint `{fingerprint[:8]}`), declared to compute "
        f"them as the code that wrote the file does ({results['carried_because'][fingerprint]}) and checked on the "
        "cheapest of them, recomputed when they were resumed."
        for fingerprint, count in sorted(carried.items())
    )
    return (
        f"Read from `book/paper_scale/results/{file_name(experiment)}`, written by "
        f"`python scripts/paper_scale.py {experiment}` at commit `{(results['git_commit'] or '')[:12]}` "
        f"{timing} on {results['machine']}, {code}.{older}"
    )


def _same_points_reason(results: dict) -> str | None:
    """Why the current code's points stand for those of ``results``: "" for the same code, the declared reason
    (:data:`SAME_FINISHED_POINTS`) for older code that computes its finished points identically, else None."""
    experiment = results["experiment"]
    current = experiment_fingerprint(experiment)
    if results["code_fingerprint"] == current:
        return ""
    return SAME_FINISHED_POINTS.get((experiment, current, results["code_fingerprint"]))


def resume_into_cache(results: dict) -> int:
    """Put the committed points back into the cache, each under the configuration it ran under, when the current
    computing code computes them identically (the same fingerprint, or an older one that
    :data:`SAME_FINISHED_POINTS` declares) under the same configuration; return how many (a point whose
    configuration the file does not tell, :func:`_configurations`, is left out). A run then computes only the
    missing points.

    Points of older code are first checked: the cheapest of them is recomputed (:func:`spot_check`), and a
    difference, or no point that can be recomputed, raises rather than resume any. A declaration names one older
    fingerprint; a file of code older still is resumed through a file written in between (:func:`carry_over`)."""
    directory = cache_dir()
    config = _code_configuration(results["experiment"], results, results["scale"])
    reason = _same_points_reason(results)
    if directory is None or reason is None or config is None:
        return 0
    if reason:
        _check_declaration(results, reason)
    restored = 0
    for entry, point_config in zip(results["points"], _configurations(results, config), strict=True):
        if point_config is not None:
            store_point(
                entry["experiment"],
                point_config,
                _arguments(entry["point"]),
                entry["result"],
                entry["version"],
                entry["function"],
            )
            restored += 1
    return restored


def _check_declaration(results: dict, reason: str) -> None:
    """Recompute the cheapest point of ``results``, a file of older code that :data:`SAME_FINISHED_POINTS`
    declares the current code computes identically; raise, naming the declaration, where it cannot be checked or
    a number differs."""
    experiment = results["experiment"]
    declaration = (
        f"the points of {experiment}'s older code ({results['code_fingerprint'][:8]}) are declared to be what the "
        f"current code computes ({reason})"
    )
    remedy = "remove the declaration from flatbook.paper_results.SAME_FINISHED_POINTS and rerun with --again"
    if not cheapest_points(results, points=1):
        raise FlatbookInputError(f"{declaration}, but none of them can be recomputed to check it: {remedy}.")
    found = spot_check(results, points=1)
    if found:
        raise FlatbookInputError(f"{declaration}, but its cheapest point differs ({found[0]}): {remedy}.")


def carry_over(results: dict, earlier: dict) -> int:
    """Give each point of ``results`` that came from the cache (seconds None) what ``earlier``, the results file
    it was resumed from (:func:`resume_into_cache`), recorded for it (same function, arguments and
    ``config_changes``): its seconds, and, where the file's code is older, ``carried_from``, the fingerprint of
    the code that computed it, with the reason in ``results["carried_because"]``; return how many.

    A resumed run then still says what each point cost where it was computed, so that :func:`cheapest_points`
    can choose among all of them, and which code computed it. ``points_cached`` still counts them as read from
    the cache. A file whose points the current code does not stand for gives nothing."""
    reason = _same_points_reason(earlier)
    if reason is None:
        return 0

    def identity(entry):
        return _point_identity(entry), json.dumps(entry.get("config_changes"), sort_keys=True)

    recorded = {identity(entry): entry for entry in earlier["points"]}
    # points ``earlier`` carried from still older code stand for the current code by both reasons
    because = {
        fingerprint: f"{text}; then {reason}" if reason else text
        for fingerprint, text in earlier.get("carried_because", {}).items()
    }
    if reason:
        because[earlier["code_fingerprint"]] = reason
    carried = 0
    for entry in results["points"]:
        source = recorded.get(identity(entry)) if entry["seconds"] is None else None
        if source is None:
            continue
        entry["seconds"] = source["seconds"]
        computed_by = source.get("carried_from") or (earlier["code_fingerprint"] if reason else None)
        if computed_by is not None:
            entry["carried_from"] = computed_by
        carried += 1
    used = {entry["carried_from"] for entry in results["points"] if "carried_from" in entry}
    if used:
        results["carried_because"] = {fingerprint: because[fingerprint] for fingerprint in sorted(used)}
    return carried


def _arguments(point: dict) -> dict:
    """A recorded point's arguments as the experiment wrote them (JSON turned its tuples into lists)."""

    def restore(value):
        return tuple(restore(v) for v in value) if isinstance(value, list) else value

    return {name: restore(value) for name, value in point.items()}


def _function(name: str):
    """The point function named ``module:qualname``; a clear error when the code no longer has it."""
    module_name, _, qualname = name.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise FlatbookInputError(f"the point function {name!r} no longer exists: regenerate the results.") from exc
    return target


def differences(committed, recomputed, *, rtol: float, atol: float, where: str = "") -> list[tuple]:
    """Every (path, committed, recomputed) where two JSON values differ: numbers beyond ``atol + rtol·|committed|``
    (NaN equals NaN, infinities must match), anything else unequal."""
    if isinstance(committed, dict) and isinstance(recomputed, dict):
        if committed.keys() != recomputed.keys():
            return [(where or ".", sorted(committed), sorted(recomputed))]
        return [
            d
            for k in committed
            for d in differences(committed[k], recomputed[k], rtol=rtol, atol=atol, where=f"{where}.{k}")
        ]
    if isinstance(committed, list) and isinstance(recomputed, list):
        if len(committed) != len(recomputed):
            return [(where or ".", f"{len(committed)} items", f"{len(recomputed)} items")]
        return [
            d
            for i, (a, b) in enumerate(zip(committed, recomputed, strict=True))
            for d in differences(a, b, rtol=rtol, atol=atol, where=f"{where}[{i}]")
        ]
    if isinstance(committed, bool) or isinstance(recomputed, bool):  # True is not the number 1 here
        same = isinstance(committed, bool) and isinstance(recomputed, bool) and committed == recomputed
        return [] if same else [(where, committed, recomputed)]
    numbers = (int, float)
    if isinstance(committed, numbers) and isinstance(recomputed, numbers):
        a, b = float(committed), float(recomputed)
        if math.isnan(a) and math.isnan(b):
            return []
        if math.isinf(a) or math.isinf(b):
            return [] if a == b else [(where, committed, recomputed)]
        return [] if abs(a - b) <= atol + rtol * abs(a) else [(where, committed, recomputed)]
    return [] if committed == recomputed else [(where, committed, recomputed)]


def cheapest_points(results: dict, points: int = 3, max_seconds: float = math.inf) -> list[tuple[dict, Any]]:
    """The committed points a spot check recomputes, as (point, configuration): the ``points`` cheapest by their
    recorded seconds, as many as took at most ``max_seconds`` together, among those whose configuration the file
    tells (:func:`_configurations`; a point read from the cache has no seconds and is left out, unless
    :func:`carry_over` gave it those of the run that computed it).

    The paper configuration itself must be unchanged: a different one raises, naming the command to rerun.
    """
    config = _code_configuration(results["experiment"], results, results["scale"])
    if config is None:
        raise FlatbookInputError(
            f"the {results['scale']} configuration of {results['experiment']} changed since its results were "
            f"committed: regenerate them (python scripts/paper_scale.py {results['experiment']})."
        )
    known = zip(results["points"], _configurations(results, config), strict=True)
    timed = sorted(
        ((e, c) for e, c in known if e["seconds"] is not None and c is not None), key=lambda pair: pair[0]["seconds"]
    )
    chosen, total = [], 0.0
    for entry, point_config in timed[:points]:
        total += entry["seconds"]
        if total > max_seconds:
            break
        chosen.append((entry, point_config))
    return chosen


def spot_check(
    results: dict, points: int = 3, max_seconds: float = math.inf, *, rtol: float = 1e-6, atol: float = 1e-9
) -> list[Difference]:
    """Recompute the committed points :func:`cheapest_points` chooses with the current code; every number that
    differs beyond ``atol + rtol·|committed|``, as :class:`Difference` rows (empty: the committed points are what
    this code computes)."""
    found = []
    for entry, point_config in cheapest_points(results, points, max_seconds):
        recomputed = _plain(_function(entry["function"])(point_config, **_arguments(entry["point"])))
        for where, old, new in differences(entry["result"], recomputed, rtol=rtol, atol=atol):
            found.append(Difference(entry["function"], entry["point"], where, old, new))
    return found
