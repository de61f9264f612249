"""The figure registry and the figure command: every figure regenerates, with provenance, from its id."""

import hashlib
import inspect
import json
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from matplotlib.figure import Figure

import flatbook.figures.bad_interpolators
import flatbook.flattest
from flatbook.cli import main
from flatbook.errors import FlatbookInputError
from flatbook.experiments import SCALES, bad_interpolators
from flatbook.experiments.runner import code_fingerprint, map_points
from flatbook.figures import REGISTRY, drawing_code, get_spec, make, registry, saving
from flatbook.figures.style import new_panels

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.parametrize("figure_id", list(REGISTRY))
def test_every_figure_regenerates_at_smoke_scale(figure_id, tmp_path, smoke_cache, monkeypatch):
    monkeypatch.setenv("FLATBOOK_CACHE", str(smoke_cache))
    sidecar = make(figure_id, scale="smoke", out=tmp_path)
    for ext in ("png", "svg", "pdf", "json"):
        assert (tmp_path / f"{figure_id}.{ext}").stat().st_size > 1000 or ext == "json"
    stored = json.loads((tmp_path / f"{figure_id}.json").read_text())
    assert stored == json.loads(json.dumps(sidecar, default=str))
    for key in (
        "id",
        "scale",
        "config",
        "git_commit",
        "flatbook_version",
        "versions",
        "wall_time_s",
        "device",
        "chapter",
        "machine",
        "command_line",
        "cache",
        "sha256",
        "code_fingerprint",
    ):
        assert key in stored
    for name, digest in stored["sha256"].items():
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == digest
    assert stored["scale"] == "smoke" and stored["id"] == figure_id
    assert "seed" in stored["config"] and stored["versions"]["torch"]
    spec = REGISTRY[figure_id]
    assert stored["experiment"] == spec.computed_by and stored["plot"] == spec.drawn_by


@pytest.mark.slow
def test_second_run_does_no_solves(tmp_path, monkeypatch):
    calls = []
    original = flatbook.flattest._check_rank  # every solve of the convex program passes here
    monkeypatch.setattr(flatbook.flattest, "_check_rank", lambda *a: calls.append(1) or original(*a))
    make("ch2-dual-bound", scale="smoke", out=tmp_path)
    assert calls
    calls.clear()
    make("ch2-sorted-weights", scale="smoke", out=tmp_path)  # same experiment, same config: cached
    assert calls == []


def test_cli_lists_and_rejects(capsys, tmp_path):
    assert main(["figure", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(figure_id in listed for figure_id in REGISTRY)
    assert main(["figure", "no-such-figure", "--scale", "smoke", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown figure id 'no-such-figure'" in err and "ch1-paradox" in err
    assert main(["figure", "ch1-paradox", "--scale", "galactic", "--out", str(tmp_path)]) == 2
    assert "unknown scale 'galactic'; choose one of smoke, book, paper" in capsys.readouterr().err
    with pytest.raises(FlatbookInputError):
        make("ch1-paradox", scale="galactic", out=tmp_path)


def test_cli_rejects_every_bad_argument_before_computing(capsys, tmp_path, monkeypatch):
    import flatbook.figures as figures

    def no_computation(*args, **kwargs):
        raise AssertionError("a figure was computed before the arguments were checked")

    monkeypatch.setattr(figures, "make", no_computation)
    assert main(["figure", "ch1-paradox", "ch1-paradx", "--out", str(tmp_path)]) == 2
    assert "unknown figure id 'ch1-paradx' (did you mean ch1-paradox" in capsys.readouterr().err
    assert main(["figure", "ch1-paradox", "--jobs", "0", "--out", str(tmp_path)]) == 2
    assert "--jobs must be a positive number" in capsys.readouterr().err
    assert main(["figure", "ch1-paradox", "--backend", "spark", "--out", str(tmp_path)]) == 2
    assert "unknown backend 'spark'" in capsys.readouterr().err
    scheduler = ["--scheduler", "tcp://127.0.0.1:1", "--out", str(tmp_path)]
    assert main(["figure", "ch1-paradox", *scheduler, "--backend", "loky"]) == 2
    assert "cannot be combined with --backend loky" in capsys.readouterr().err
    assert main(["figure", "ch1-paradox", *scheduler, "--jobs", "2"]) == 2
    assert "--jobs counts local processes" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("flatbook ")


def test_cli_rejects_an_unreachable_scheduler_before_computing(capsys, tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    import flatbook.figures as figures

    monkeypatch.setattr(figures, "make", lambda *a, **k: pytest.fail("computed before connecting"))
    monkeypatch.setenv("FLATBOOK_SCHEDULER", "tcp://127.0.0.1:1")  # nothing listens on port 1
    assert main(["figure", "ch1-paradox", "--out", str(tmp_path)]) == 2
    assert "cannot reach a Dask scheduler at 'tcp://127.0.0.1:1'" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_runs_the_points_on_a_scheduler_from_the_shell(tmp_path, monkeypatch):
    """`flatbook figure --scheduler ADDRESS`, in a separate process, against a LocalCluster this test starts."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("FLATBOOK_CACHE", "off")  # the points must be computed, on the cluster
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as cluster:
        before = cluster.scheduler.transition_counter
        command = [sys.executable, "-m", "flatbook", "figure", "ch1-orbit-curves", "--scale", "smoke"]
        done = subprocess.run(
            [*command, "--out", str(tmp_path), "--scheduler", cluster.scheduler_address],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert cluster.scheduler.transition_counter > before  # the cluster ran the figure's points
    assert f"Dask scheduler at {cluster.scheduler_address}" in done.stderr
    assert (tmp_path / "ch1-orbit-curves.png").exists()


@pytest.mark.slow
def test_cli_writes_a_figure(tmp_path, capsys):
    assert main(["figure", "ch1-orbit-curves", "--scale", "smoke", "--out", str(tmp_path)]) == 0
    assert "ch1-orbit-curves.png" in capsys.readouterr().out
    assert (tmp_path / "ch1-orbit-curves.pdf").exists()


def test_every_chapter_figure_is_registered_and_shown_by_its_id():
    """The ids on each page (figure names and plot calls, in reading order) are the registered ones, in order."""
    for chapter in sorted((ROOT / "book").glob("*.md")):
        text = chapter.read_text()
        labels = re.findall(r"name: fig-([\w-]+)", text)
        shown = re.findall(r'plot\("([\w-]+)", tables\)', text)
        # under each figure, in the next cell, its drawing code (collapsed, input hidden)
        drawn = re.findall(
            r'plot\("[\w-]+", tables\)\n```\n\n```\{code-cell\} ipython3\n:tags: \[remove-input\]\n'
            r'drawing_code\("([\w-]+)"\)\n```',
            text,
        )
        registered = [spec.id for spec in REGISTRY.values() if spec.chapter == f"book/{chapter.name}"]
        # a figure redrawn from the chapter's committed paper-scale results: fig-<id>-paper, by the same function
        paper = [label.removesuffix("-paper") for label in labels if label.endswith("-paper")]
        labels = [label for label in labels if not label.endswith("-paper")]
        assert paper == re.findall(r'plot\("([\w-]+)", paper\["tables"\]\)', text), chapter.name
        assert set(paper) <= set(registered), chapter.name
        assert labels == shown == drawn == registered, chapter.name


def test_the_drawing_code_is_the_registered_functions_source():
    for figure_id, spec in REGISTRY.items():
        code = drawing_code(figure_id)
        assert code.source == inspect.getsource(spec.draw) and code.source.startswith("@figure(")
        compile(code.source, spec.drawn_by, "exec")  # a whole definition, not a fragment
        page = code._repr_html_()
        assert page.startswith('<details class="drawing-code">') and page.endswith("</details>")
        assert spec.draw.__name__ in page and "<summary>" in page
        assert str(code).startswith(f"# {figure_id}: drawn by {spec.drawn_by}")
    with pytest.raises(FlatbookInputError, match="unknown figure id"):
        drawing_code("ch9-nothing")


def string_literals(path: Path) -> list[str]:
    """The string literals of a Python file, as written (quotes included)."""
    with tokenize.open(path) as source:
        return [token.string for token in tokenize.generate_tokens(source.readline) if token.type == tokenize.STRING]


def test_each_id_is_written_once_in_the_package():
    literals = {path: string_literals(path) for path in (ROOT / "src" / "flatbook").rglob("*.py")}
    for figure_id in REGISTRY:
        places = [
            (path.name, count)
            for path, strings in literals.items()
            if (count := strings.count(f'"{figure_id}"') + strings.count(f"'{figure_id}'"))
        ]
        assert places == [(f"{REGISTRY[figure_id].experiment}.py", 1)], (figure_id, places)


def test_the_registry_names_what_computes_and_what_draws():
    spec = get_spec("ch3-gap")
    assert spec.experiment_module is bad_interpolators and spec.experiment == "bad_interpolators"
    assert spec.chapter == "book/03-bad-interpolators.md"
    assert spec.computed_by == "flatbook.experiments.bad_interpolators.run"
    assert spec.drawn_by == "flatbook.figures.bad_interpolators.plot_gap"
    assert spec.draw is flatbook.figures.bad_interpolators.plot_gap
    for spec in REGISTRY.values():  # every drawing module is the experiment's namesake under flatbook.figures
        assert spec.draw.__module__ == f"flatbook.figures.{spec.experiment}"
        assert all(hasattr(spec.experiment_module, name) for name in ("run", "CONFIGS", "CHAPTER", "VERSION"))
        assert tuple(spec.experiment_module.CONFIGS) == SCALES, spec.id  # every id works at every scale


def test_declaring_a_figure_checks_its_id_and_experiment(monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", dict(REGISTRY))
    with pytest.raises(ValueError, match="'ch3-gap' is declared twice"):
        registry.figure("ch3-gap", bad_interpolators, "again")(lambda tables: None)
    with pytest.raises(TypeError, match="is not an experiment module"):
        registry.figure("ch9-new", flatbook.flattest, "no run")


def _git_init(path):
    subprocess.run(["git", "init", "-q", str(path)], check=True)


def test_sidecar_cites_the_commit_of_flatbooks_own_checkout():
    commit = saving.git_commit()
    assert saving.own_checkout() == ROOT
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert commit is not None and commit.startswith(head)


def test_an_installed_copy_inside_another_repository_cites_no_commit(tmp_path):
    """flatbook in a site-packages that sits in some other git work tree: that tree's commit is not flatbook's."""
    _git_init(tmp_path)
    package = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "flatbook"
    package.mkdir(parents=True)
    assert saving.own_checkout(package) is None and saving.git_commit(package) is None


def test_a_source_tree_of_another_project_cites_no_commit(tmp_path):
    _git_init(tmp_path)
    (tmp_path / "src" / "flatbook").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "not-flatbook"\n')
    assert saving.own_checkout(tmp_path / "src" / "flatbook") is None


def test_changed_code_marks_the_commit_and_written_results_do_not(tmp_path):
    """A run writes its results into book/paper_scale; that must not make the next run's commit look dirty."""
    _git_init(tmp_path)
    package = tmp_path / "src" / "flatbook"
    package.mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "flatbook"\n')
    (package / "core.py").write_text("x = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "code"], cwd=tmp_path, check=True)
    (tmp_path / "book" / "paper_scale" / "results").mkdir(parents=True)
    (tmp_path / "book" / "paper_scale" / "results" / "experiment.json").write_text("{}")
    assert not saving.git_commit(package).endswith("+uncommitted-changes")
    (tmp_path / "book" / "chapter.md").write_text("# changed\n")
    assert saving.git_commit(package).endswith("+uncommitted-changes")


def test_a_flatbook_source_tree_outside_git_cites_no_commit(tmp_path):
    (tmp_path / "src" / "flatbook").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "flatbook"\n')
    assert saving.own_checkout(tmp_path / "src" / "flatbook") is None


def _no_computation(monkeypatch):
    import flatbook.figures as figures

    monkeypatch.setattr(figures, "make", lambda *a, **k: pytest.fail("a figure was computed"))


def test_cli_names_the_scheduler_option_for_the_dask_backend(capsys, tmp_path, monkeypatch):
    _no_computation(monkeypatch)
    monkeypatch.delenv("FLATBOOK_SCHEDULER", raising=False)
    assert main(["figure", "ch1-paradox", "--backend", "dask", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "name its scheduler with --scheduler tcp://host:8786" in err and "Client" not in err
    monkeypatch.setenv("FLATBOOK_BACKEND", "dask")
    assert main(["figure", "ch1-paradox", "--out", str(tmp_path)]) == 2
    assert "--scheduler" in capsys.readouterr().err


def test_cli_refuses_an_output_or_cache_folder_it_cannot_write(capsys, tmp_path, monkeypatch):
    _no_computation(monkeypatch)
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    for out in (blocker, blocker / "figures"):
        assert main(["figure", "ch1-paradox", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert (
            err == f"flatbook: error: --out {str(out)!r} cannot hold files ({blocker} is a file, not a folder); "
            "name a folder you can write to.\n"
        )
    monkeypatch.setenv("FLATBOOK_CACHE", str(blocker / "cache"))
    assert main(["figure", "ch1-paradox", "--out", str(tmp_path / "figures")]) == 2
    assert f"FLATBOOK_CACHE '{blocker / 'cache'}' cannot hold files" in capsys.readouterr().err


def test_cli_scales_ignore_case_and_unknown_names_get_suggestions(capsys, tmp_path, monkeypatch):
    import flatbook.figures as figures

    calls = []
    monkeypatch.setattr(figures, "make", lambda *a, **k: calls.append(k) or {"files": [], "wall_time_s": 0.0})
    argv = ["figure", "ch1-paradox", "--scale", " Smoke", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert calls[0]["scale"] == "smoke" and calls[0]["command"] == ["flatbook", *argv]
    assert main(["figure", "ch1-paradox", "--scale", "bok", "--out", str(tmp_path)]) == 2
    assert "unknown scale 'bok' (did you mean book?)" in capsys.readouterr().err
    for lookup in (get_spec, drawing_code, lambda figure_id: make(figure_id, out=tmp_path)):
        with pytest.raises(FlatbookInputError, match=r"unknown figure id 'ch3-gaps' \(did you mean ch3-gap"):
            lookup("ch3-gaps")


@dataclass(frozen=True)
class ToyConfig:
    seed: int = 0


def toy_point(config, x):
    return [{"x": x, "y": x * x + config.seed}]


def _toy_spec():
    """A registry entry whose experiment is three cached toy points and whose drawing is one line."""

    def run(config, jobs=None, backend=None):
        points = [{"x": x} for x in range(3)]
        return {"rows": [row for rows in map_points(toy_point, config, points, experiment="toy-fig") for row in rows]}

    def draw(tables):
        fig = Figure(figsize=(3, 2))
        ax = fig.subplots()
        ax.plot([r["x"] for r in tables["rows"]], [r["y"] for r in tables["rows"]], label=r"$\Upsilon$")
        ax.imshow([[0.0, 1.0], [2.0, 3.0]], extent=(0, 1, 0, 1))
        ax.legend()
        return fig

    module = SimpleNamespace(CONFIGS=dict.fromkeys(SCALES, ToyConfig()), run=run)
    return SimpleNamespace(
        experiment_module=module,
        experiment="toy-fig",
        draw=draw,
        title="Toy",
        chapter="book/toy.md",
        computed_by="run",
        drawn_by="draw",
    )


def test_the_sidecar_records_command_cache_hits_hashes_and_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(saving, "get_spec", lambda figure_id: _toy_spec())
    command = ["flatbook", "figure", "toy", "--out", "somewhere"]
    first = make("toy", scale="smoke", out=tmp_path / "a", command=command)
    second = make("toy", scale="smoke", out=tmp_path / "b")
    assert first["cache"] == {"points_computed": 3, "points_from_cache": 0}
    assert second["cache"] == {"points_computed": 0, "points_from_cache": 3}
    assert first["command_line"] == "flatbook figure toy --out somewhere"
    assert second["command_line"] == shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])
    assert first["code_fingerprint"] == code_fingerprint()  # "toy-fig" is no experiment module: the whole package
    for sidecar, folder in ((first, tmp_path / "a"), (second, tmp_path / "b")):
        assert sidecar == json.loads((folder / "toy.json").read_text())
        assert set(sidecar["sha256"]) == {"toy.png", "toy.svg", "toy.pdf"} == set(sidecar["files"])
        for name, digest in sidecar["sha256"].items():
            assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
    assert first["sha256"] == second["sha256"]  # the same figure, the same bytes
    machine = first["machine"]
    assert f"{os.cpu_count()} cores" in machine and "GiB" in machine and platform.system() in machine
    assert socket.gethostname() not in machine


def test_saving_the_same_figure_twice_gives_the_same_bytes(tmp_path, monkeypatch):
    """Whenever it is saved: no date in the PDF or SVG, no random SVG ids, no matplotlib version in the files."""
    draw = _toy_spec().draw
    hashes = []
    for epoch, folder in (("1000000000", tmp_path / "a"), ("1700000000", tmp_path / "b")):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)  # what matplotlib dates a file by, if it dates it
        folder.mkdir()
        hashes.append(saving.save_figure(draw({"rows": [{"x": 0, "y": 1}, {"x": 1, "y": 0}]}), folder, "toy", "Toy"))
    assert hashes[0] == hashes[1]
    for ext in ("png", "svg", "pdf"):
        assert (tmp_path / "a" / f"toy.{ext}").read_bytes() == (tmp_path / "b" / f"toy.{ext}").read_bytes(), ext
        assert b"Matplotlib" not in (tmp_path / "a" / f"toy.{ext}").read_bytes(), ext


@pytest.mark.parametrize(("count", "rows", "columns"), [(1, 1, 1), (3, 1, 3), (4, 2, 3), (7, 3, 3)])
def test_panels_wrap_in_rows_of_at_most_three(count, rows, columns):
    fig, axes = new_panels(count, row_height=2.5)
    assert len(axes) == len(fig.axes) == count  # the last row's unused places are empty
    assert {ax.get_subplotspec().get_geometry()[:2] for ax in axes} == {(rows, columns)}
    assert fig.get_size_inches()[1] == pytest.approx(2.5 * rows)
    with pytest.raises(FlatbookInputError, match="at least one panel"):
        new_panels(0)
