"""The sweep runner: cache per point, resume after an interruption, parallel and Dask give the same table."""

import http.server
import json
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from flatbook.errors import FlatbookInputError
from flatbook.experiments import runner
from flatbook.experiments.runner import map_points

CALLS = []


@dataclass(frozen=True)
class Toy:
    scale: float = 2.0


def toy_point(config, x, fail_at=None):
    """A cheap point function that records its calls (in this process)."""
    if x == fail_at:
        raise KeyboardInterrupt("interrupted")
    CALLS.append(x)
    return [{"x": x, "y": config.scale * x**2}]


POINTS = [{"x": x} for x in range(6)]


def test_second_run_is_served_from_the_cache(isolated_cache):
    CALLS.clear()
    first = map_points(toy_point, Toy(), POINTS, experiment="toy")
    assert CALLS == list(range(6))
    CALLS.clear()
    second = map_points(toy_point, Toy(), POINTS, experiment="toy")
    assert CALLS == [] and second == first
    assert len(list((isolated_cache / "toy").glob("*/*.json"))) == 6
    # Another config is another set of points.
    map_points(toy_point, Toy(scale=3.0), POINTS, experiment="toy")
    assert CALLS == list(range(6))


def test_an_interrupted_sweep_resumes(isolated_cache):
    CALLS.clear()
    points = [{"x": x, "fail_at": 3} for x in range(6)]
    with pytest.raises(KeyboardInterrupt):
        map_points(toy_point, Toy(), points, experiment="toy")
    assert CALLS == [0, 1, 2]
    CALLS.clear()
    done = map_points(toy_point, Toy(), [{"x": x, "fail_at": 3} for x in range(3)], experiment="toy")
    assert CALLS == [] and [r[0]["x"] for r in done] == [0, 1, 2]


def test_corrupt_cache_entries_are_recomputed(isolated_cache):
    map_points(toy_point, Toy(), POINTS[:1], experiment="toy")
    (entry,) = (isolated_cache / "toy").glob("*/*.json")
    entry.write_text("{not json")
    CALLS.clear()
    assert map_points(toy_point, Toy(), POINTS[:1], experiment="toy") == [[{"x": 0, "y": 0.0}]]
    assert CALLS == [0]
    assert json.loads(entry.read_text()) == [{"x": 0, "y": 0.0}]


def test_cache_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("FLATBOOK_CACHE", "off")
    assert runner.cache_dir() is None
    CALLS.clear()
    map_points(toy_point, Toy(), POINTS[:2], experiment="toy")
    map_points(toy_point, Toy(), POINTS[:2], experiment="toy")
    assert CALLS == [0, 1, 0, 1]


@pytest.mark.slow
def test_parallel_processes_give_the_same_table():
    sequential = map_points(toy_point, Toy(), POINTS, experiment="toy-seq")
    parallel = map_points(toy_point, Toy(), POINTS, experiment="toy-par", jobs=2)
    assert parallel == sequential


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_table(monkeypatch):
    distributed = pytest.importorskip("distributed")
    from flatbook.experiments import symmetry_paradox

    monkeypatch.setenv("FLATBOOK_CACHE", "off")  # both runs must really compute
    config = symmetry_paradox.CONFIGS["smoke"]
    local = symmetry_paradox.run(config, backend="loky")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        on_cluster = symmetry_paradox.run(config, backend="dask")
        executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
    assert on_cluster == local
    assert sum(executed.values()) == len(config.activations)  # each point was a task on a worker


def test_bad_settings_are_rejected(monkeypatch):
    with pytest.raises(FlatbookInputError, match="unknown backend 'spark'"):
        map_points(toy_point, Toy(), POINTS, experiment="toy", backend="spark")
    monkeypatch.setenv("FLATBOOK_JOBS", "many")
    with pytest.raises(FlatbookInputError, match="FLATBOOK_JOBS='many' is not an integer"):
        map_points(toy_point, Toy(), POINTS, experiment="toy")
    monkeypatch.delenv("FLATBOOK_JOBS")
    with pytest.raises(FlatbookInputError, match="backend='dask' needs a Dask scheduler: name it with FLATBOOK_SCHED"):
        map_points(toy_point, Toy(), POINTS, experiment="toy-nodask", backend="dask")


def test_default_jobs_reads_the_environment_before_the_fallback(monkeypatch):
    monkeypatch.delenv("FLATBOOK_JOBS", raising=False)
    assert runner.default_jobs() == 1 and runner.default_jobs(2) == 2
    monkeypatch.setenv("FLATBOOK_JOBS", "3")
    assert runner.default_jobs(2) == 3
    monkeypatch.setenv("FLATBOOK_JOBS", "0")
    with pytest.raises(FlatbookInputError, match="FLATBOOK_JOBS must be at least 1"):
        runner.default_jobs(2)


def test_cache_report_counts_points():
    runner.cache_report()  # reset
    map_points(toy_point, Toy(scale=5.0), POINTS[:3], experiment="toy-report")
    map_points(toy_point, Toy(scale=5.0), POINTS[:4], experiment="toy-report")
    assert runner.cache_report() == "4 configuration points computed, 3 read from the cache"  # no path
    assert runner.cache_report() == "0 configuration points computed, 0 read from the cache"


def test_the_version_is_part_of_the_key(isolated_cache):
    CALLS.clear()
    map_points(toy_point, Toy(), POINTS[:2], experiment="toy", version=1)
    map_points(toy_point, Toy(), POINTS[:2], experiment="toy", version=1)
    assert CALLS == [0, 1]
    map_points(toy_point, Toy(), POINTS[:2], experiment="toy", version=2)  # bumped: computed again
    assert CALLS == [0, 1, 0, 1]


def other_toy_point(config, x, fail_at=None):
    """A second point function of the same experiment that takes the same points."""
    return [{"x": x, "other": True}]


def test_two_point_functions_of_one_experiment_do_not_share_a_cache_entry(isolated_cache):
    first = map_points(toy_point, Toy(), POINTS[:2], experiment="toy")
    second = map_points(other_toy_point, Toy(), POINTS[:2], experiment="toy")
    assert all("other" not in rows[0] for rows in first) and all(rows[0]["other"] for rows in second)
    assert map_points(toy_point, Toy(), POINTS[:2], experiment="toy") == first  # each from its own entry


def test_drawing_and_style_edits_keep_the_cache_key(tmp_path):
    package = tmp_path / "flatbook"
    shutil.copytree(runner.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    sources = {path.relative_to(package).as_posix() for path in runner.computing_sources(package)}
    assert {"flattest.py", "tables.py", "experiments/runner.py", "experiments/bad_interpolators.py"} <= sources
    assert not any(s.startswith("figures/") for s in sources) and "cli.py" not in sources
    before = runner.code_fingerprint(package)
    for drawing in ("figures/style.py", "figures/bad_interpolators.py", "cli.py"):
        (package / drawing).write_text((package / drawing).read_text() + "\n# a new legend colour\n")
        runner.code_fingerprint.cache_clear()
        assert runner.code_fingerprint(package) == before, drawing
    (package / "experiments" / "bad_interpolators.py").write_text(
        (package / "experiments" / "bad_interpolators.py").read_text() + "\n# a change of computation\n"
    )
    runner.code_fingerprint.cache_clear()
    assert runner.code_fingerprint(package) != before


def _edited(package, relative):
    """Append a comment to one file of the copied package: a change of its code as far as a fingerprint sees."""
    (package / relative).write_text((package / relative).read_text() + "\n# an edit\n")
    runner.code_fingerprint.cache_clear()


def test_an_experiment_fingerprint_sees_the_code_it_runs_and_no_other(tmp_path):
    package = tmp_path / "flatbook"
    shutil.copytree(runner.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))

    def fingerprints():
        runner.code_fingerprint.cache_clear()
        return {name: runner.code_fingerprint(package, name) for name in ("mirror_flow", "convex_dual")}

    names = lambda name: {p.relative_to(package).as_posix() for p in runner.experiment_sources(name, package)}  # noqa: E731
    # imported inside a function (column_generation), through a package's re-export (flatbook's own names), and
    # the packages above the module
    assert {"lp.py", "network.py", "__init__.py", "experiments/__init__.py"} <= names("convex_dual")
    assert "near_flattest.py" in names("flattest_generalise") and "near_flattest.py" not in names("convex_dual")
    assert not any(name.startswith("figures/") for name in names("mirror_flow"))
    before = fingerprints()
    _edited(package, "experiments/mirror_flow.py")
    after = fingerprints()
    assert after["mirror_flow"] != before["mirror_flow"] and after["convex_dual"] == before["convex_dual"]
    _edited(package, "network.py")  # shared by both
    shared = fingerprints()
    assert all(shared[name] != after[name] for name in shared)
    _edited(package, "near_flattest.py")  # chapter 4's alone
    assert fingerprints() == shared
    with pytest.raises(FlatbookInputError, match="no experiment module 'runner_typo'"):
        runner.experiment_sources("runner_typo", package)


@pytest.mark.slow
@pytest.mark.parametrize("experiment", runner.experiment_names())
def test_every_function_an_experiment_runs_is_in_its_fingerprint(experiment, isolated_cache):
    """The smoke run of each experiment, in this process, traced: every function of the package it calls lies in a
    file of :func:`experiment_sources` (or in the drawing and command-line files no fingerprint holds)."""
    import importlib
    import sys

    from flatbook.experiments import config_for

    module = importlib.import_module(f"flatbook.experiments.{experiment}")
    called = set()

    def profile(frame, event, arg):
        if event == "call":
            called.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        module.run(config_for(module.CONFIGS, "smoke"), jobs=1)
    finally:
        sys.setprofile(None)
    package = runner.PACKAGE.resolve()
    ran = {Path(f).resolve() for f in called if Path(f).resolve().is_relative_to(package)}
    computing = set(runner.computing_sources(package))
    assert ran & computing, "the trace saw none of the package's code"
    assert ran & computing <= set(runner.experiment_sources(experiment, package)), sorted(
        str(p.relative_to(package)) for p in (ran & computing) - set(runner.experiment_sources(experiment, package))
    )


def _fill(isolated_cache, experiment="symmetry_paradox"):
    """Six points of the current code, and two left by older code (another fingerprint folder)."""
    map_points(toy_point, Toy(), POINTS, experiment=experiment)
    old = isolated_cache / experiment / "0123456789abcdef"
    old.mkdir(parents=True)
    for name in ("a", "b"):
        (old / f"{name}.json").write_text("[]")


def test_cache_summary_tells_current_from_stale(isolated_cache):
    _fill(isolated_cache)
    rows = {row["experiment"]: row for row in runner.cache_summary()}
    assert set(rows) == set(runner.experiment_names()) and "runner" not in rows
    assert (rows["symmetry_paradox"]["current"], rows["symmetry_paradox"]["stale"]) == (6, 2)
    assert rows["symmetry_paradox"]["current_bytes"] > 0 and rows["convex_dual"]["current"] == 0


def test_clear_stale_keeps_the_current_points(isolated_cache):
    _fill(isolated_cache)
    assert runner.clear_cache(["symmetry_paradox"], stale_only=True) == 2
    CALLS.clear()
    map_points(toy_point, Toy(), POINTS, experiment="symmetry_paradox")
    assert CALLS == []  # still served from the cache
    assert runner.clear_cache(["symmetry_paradox"]) == 6
    map_points(toy_point, Toy(), POINTS, experiment="symmetry_paradox")
    assert CALLS == list(range(6))


def test_clear_names_only_known_experiments(isolated_cache):
    _fill(isolated_cache)
    with pytest.raises(FlatbookInputError, match="unknown experiment 'symetry_paradox'"):
        runner.clear_cache(["symetry_paradox"])
    assert runner.cache_summary(["symmetry_paradox"])[0]["current"] == 6  # nothing was deleted


def test_cache_commands_say_what_they_did(isolated_cache, capsys):
    from flatbook.cli import main

    _fill(isolated_cache)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(isolated_cache) in out and "6 points" in out and "2 points" in out
    assert main(["cache", "clear", "symmetry_paradox", "--stale"]) == 0
    assert "removed 2 stale cached points" in capsys.readouterr().out
    assert main(["cache", "clear", "nope"]) == 2
    assert "unknown experiment 'nope'" in capsys.readouterr().err
    assert main(["cache", "clear"]) == 2  # not without --all: stdin is not a terminal here
    assert "pass --all to do that" in capsys.readouterr().err
    assert runner.cache_summary(["symmetry_paradox"])[0]["current"] == 6
    assert main(["cache", "clear", "--all"]) == 0
    assert "removed 6 cached points" in capsys.readouterr().out


def test_clearing_everything_asks_on_a_terminal(isolated_cache, capsys, monkeypatch):
    from flatbook.cli import main

    _fill(isolated_cache)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda question: "n")
    assert main(["cache", "clear"]) == 0 and "nothing deleted" in capsys.readouterr().out
    assert runner.cache_summary(["symmetry_paradox"])[0]["current"] == 6
    monkeypatch.setattr("builtins.input", lambda question: "y")
    assert main(["cache", "clear"]) == 0 and "removed 8 cached points" in capsys.readouterr().out
    assert main(["cache", "clear", "symmetry_paradox", "--all"]) == 2
    assert "not both" in capsys.readouterr().err


def test_cache_commands_with_the_cache_off(monkeypatch, capsys):
    from flatbook.cli import main

    monkeypatch.setenv("FLATBOOK_CACHE", "off")
    assert main(["cache", "info"]) == 2
    assert "the cache is off" in capsys.readouterr().err


def test_run_report_fits_a_code_box(monkeypatch):
    """The collapsed report under each chapter's run: scale, time, cache counts, then the config, within the
    75 columns of a collapsed output box."""
    from flatbook.experiments import SCALES
    from flatbook.figures import REGISTRY

    monkeypatch.setenv("FLATBOOK_SCALE", "book")
    for module in {spec.experiment_module for spec in REGISTRY.values()}:
        for scale in SCALES:
            config = module.CONFIGS[scale]
            report = runner.run_report(config, 12.34)
            lines = report.splitlines()
            assert lines[0] == "scale 'book', ran in 12.3 s" and lines[1].endswith("read from the cache")
            assert max(map(len, lines)) <= 74, (module.__name__, scale, max(lines, key=len))
            assert eval("\n".join(lines[2:]), vars(module)) == config  # the whole config, nothing lost


def test_an_unwritable_cache_fails_before_the_first_point(isolated_cache, monkeypatch):
    blocker = isolated_cache.parent / "a-file"
    blocker.write_text("in the way")
    for setting in (blocker, blocker / "cache"):
        monkeypatch.setenv("FLATBOOK_CACHE", str(setting))
        CALLS.clear()
        with pytest.raises(FlatbookInputError, match=f"{blocker} is a file, not a folder"):
            map_points(toy_point, Toy(), POINTS, experiment="toy")
        assert CALLS == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_a_read_only_cache_folder_is_refused(isolated_cache, monkeypatch):
    read_only = isolated_cache.parent / "read-only"
    read_only.mkdir(mode=0o500)
    monkeypatch.setenv("FLATBOOK_CACHE", str(read_only / "cache"))
    with pytest.raises(FlatbookInputError, match="cannot hold files"):
        map_points(toy_point, Toy(), POINTS, experiment="toy")


def test_unknown_experiments_get_the_closest_names(isolated_cache):
    with pytest.raises(FlatbookInputError, match=r"'symetry_paradox' \(did you mean symmetry_paradox\?\)"):
        runner.cache_summary(["symetry_paradox"])
    with pytest.raises(FlatbookInputError, match=r"'ch3-gap' \(a figure id; its experiment is bad_interpolators\)"):
        runner.clear_cache(["ch3-gap"])


def _serve(handle) -> int:
    """A TCP server on 127.0.0.1 (a free port) that calls ``handle(connection)`` for every client, in a thread."""
    server = socket.create_server(("127.0.0.1", 0))

    def accept():
        while True:
            connection, _ = server.accept()
            threading.Thread(target=handle, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1]


def _banner(connection):
    connection.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
    time.sleep(30)  # and then wait, as an SSH server does for the client's banner


def _http_server() -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def _connect_within(address: str, timeout: float, bound: float) -> BaseException | None:
    """connect_scheduler(address, timeout) in a thread; the error it raised, or a failure if it ran past ``bound``."""
    outcome = []

    def attempt():
        try:
            runner.connect_scheduler(address, timeout=timeout).close()
            outcome.append(None)
        except BaseException as exc:  # whatever it is, the test reports it
            outcome.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(bound)
    if thread.is_alive():
        pytest.fail(f"connecting to {address} still ran after {bound} s")
    return outcome[0]


def test_a_server_that_sends_a_banner_is_not_a_scheduler():
    pytest.importorskip("distributed")
    address = f"tcp://127.0.0.1:{_serve(_banner)}"
    error = _connect_within(address, timeout=5, bound=10)
    assert isinstance(error, FlatbookInputError), repr(error)
    assert f"cannot reach a Dask scheduler at '{address}' (it does not speak Dask's protocol" in str(error)


@pytest.mark.slow
def test_an_http_port_is_not_a_scheduler_and_does_not_hang():
    pytest.importorskip("distributed")
    address = f"tcp://127.0.0.1:{_http_server()}"
    start = time.monotonic()
    error = _connect_within(address, timeout=1, bound=10)
    assert isinstance(error, FlatbookInputError), repr(error)
    assert "no Dask answer within 1 s" in str(error) and time.monotonic() - start < 5


def test_a_scheduler_address_that_is_not_one_is_refused():
    pytest.importorskip("distributed")
    with pytest.raises(FlatbookInputError, match="'tcp://somewhere' is not a Dask scheduler address"):
        runner.connect_scheduler("tcp://somewhere", timeout=1)


def test_the_cli_stops_at_a_banner_port_before_computing(capsys, tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    import flatbook.figures as figures
    from flatbook.cli import main

    monkeypatch.setattr(figures, "make", lambda *a, **k: pytest.fail("computed before connecting"))
    address = f"tcp://127.0.0.1:{_serve(_banner)}"
    assert main(["figure", "ch1-paradox", "--out", str(tmp_path), "--scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"flatbook: error: cannot reach a Dask scheduler at '{address}'") and err.count("\n") == 1
