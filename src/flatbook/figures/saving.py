"""Regenerating a figure from its id at a scale: PNG, SVG and PDF plus a JSON sidecar with its provenance."""

from __future__ import annotations

import dataclasses
import json
import platform
import re
import subprocess
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .. import __version__
from ..backend import default_device
from ..errors import FlatbookInputError
from ..experiments import SCALES, config_for
from .registry import get_spec

__all__ = ["own_checkout", "git_commit", "make"]

PACKAGE = Path(__file__).resolve().parents[1]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout


def own_checkout(package: Path = PACKAGE) -> Path | None:
    """The root of flatbook's own git checkout when ``package`` runs from it (``<root>/src/flatbook`` with
    flatbook's pyproject.toml, and ``<root>`` the top of a git work tree); None otherwise, e.g. when flatbook is
    installed in a site-packages that happens to sit inside some other repository."""
    root = package.parent.parent
    pyproject = root / "pyproject.toml"
    if package.parent.name != "src" or not pyproject.is_file():
        return None
    if not re.search(r'^name\s*=\s*"flatbook"', pyproject.read_text(), re.M):
        return None
    try:
        toplevel = Path(_git(root, "rev-parse", "--show-toplevel").strip()).resolve()
    except (OSError, subprocess.SubprocessError):
        return None
    return root if toplevel == root.resolve() else None


def git_commit(package: Path = PACKAGE) -> str | None:
    """The commit of flatbook's own checkout (``+uncommitted-changes`` if src/ or book/ differ from it); None
    when the package does not run from its checkout (the sidecar then cites the package version only)."""
    root = own_checkout(package)
    if root is None:
        return None
    try:
        commit = _git(root, "rev-parse", "HEAD").strip()
        dirty = _git(root, "status", "--porcelain", "--", "src", "book").strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+uncommitted-changes" if dirty else "")


def _versions() -> dict:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for package in ("flatbook", "torch", "numpy", "scipy", "cvxpy", "clarabel", "matplotlib", "joblib"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    return versions


def make(
    figure_id: str,
    scale: str = "book",
    out: str | Path = "figures",
    jobs: int | None = None,
    backend: str | None = None,
) -> dict:
    """Run the figure's experiment at ``scale``, write ``<out>/<id>.{png,svg,pdf,json}``; return the sidecar."""
    spec = get_spec(figure_id)
    if scale not in SCALES:
        raise FlatbookInputError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}.")
    module = spec.experiment_module
    config = config_for(module.CONFIGS, scale)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tables = module.run(config, jobs=jobs, backend=backend)
    fig = spec.draw(tables)
    paths = {}
    for ext in ("png", "svg", "pdf"):
        paths[ext] = out / f"{figure_id}.{ext}"
        fig.savefig(paths[ext], bbox_inches="tight", metadata=None if ext != "png" else {"Title": spec.title})
    sidecar = {
        "id": figure_id,
        "title": spec.title,
        "chapter": spec.chapter,
        "scale": scale,
        "experiment": spec.computed_by,
        "plot": spec.drawn_by,
        "config": dataclasses.asdict(config),
        "flatbook_version": __version__,
        "git_commit": git_commit(),
        "versions": _versions(),
        "device": str(default_device()),
        "machine": platform.machine(),
        "wall_time_s": round(time.perf_counter() - start, 3),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": [p.name for p in paths.values()],
    }
    (out / f"{figure_id}.json").write_text(json.dumps(sidecar, indent=2, default=str) + "\n")
    return sidecar
