"""The figure registry and the figure command: every figure regenerates, with provenance, from its id."""

import json
import re
from pathlib import Path

import pytest

import flatbook.flattest
from flatbook.cli import main
from flatbook.errors import FlatbookInputError
from flatbook.figures import REGISTRY, make

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("figure_id", list(REGISTRY))
def test_every_figure_regenerates_at_smoke_scale(figure_id, tmp_path):
    sidecar = make(figure_id, scale="smoke", out=tmp_path)
    for ext in ("png", "svg", "pdf", "json"):
        assert (tmp_path / f"{figure_id}.{ext}").stat().st_size > 1000 or ext == "json"
    stored = json.loads((tmp_path / f"{figure_id}.json").read_text())
    assert stored == json.loads(json.dumps(sidecar, default=str))
    for key in ("id", "scale", "config", "git_commit", "versions", "wall_time_s", "device", "chapter"):
        assert key in stored
    assert stored["scale"] == "smoke" and stored["id"] == figure_id
    assert "seed" in stored["config"] and stored["versions"]["torch"]


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


def test_cli_writes_a_figure(tmp_path, capsys):
    assert main(["figure", "ch1-orbit-curves", "--scale", "smoke", "--out", str(tmp_path)]) == 0
    assert "ch1-orbit-curves.png" in capsys.readouterr().out
    assert (tmp_path / "ch1-orbit-curves.pdf").exists()


def test_every_chapter_figure_is_registered_and_shown_by_its_id():
    for chapter in sorted((ROOT / "book").glob("*.md")):
        text = chapter.read_text()
        labels = set(re.findall(r"name: fig-([\w-]+)", text))
        shown = set(re.findall(r'plot\("([\w-]+)", tables\)', text))
        registered = {spec.id for spec in REGISTRY.values() if spec.chapter == f"book/{chapter.name}"}
        assert labels == shown == registered, chapter.name
