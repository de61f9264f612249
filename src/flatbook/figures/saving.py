"""Regenerating a figure from its id at a scale: PNG, SVG and PDF plus a JSON sidecar with its provenance."""

from __future__ import annotations

import dataclasses
import json
import platform
import subprocess
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..backend import default_device
from ..errors import FlatbookInputError
from ..experiments import SCALES, config_for
from .registry import get_spec


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[3]
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src", "book"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return commit + ("+uncommitted-changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout (e.g. an installed wheel)


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
        "git_commit": _git_commit(),
        "versions": _versions(),
        "device": str(default_device()),
        "machine": platform.machine(),
        "wall_time_s": round(time.perf_counter() - start, 3),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": [p.name for p in paths.values()],
    }
    (out / f"{figure_id}.json").write_text(json.dumps(sidecar, indent=2, default=str) + "\n")
    return sidecar
