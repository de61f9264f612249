"""Regenerating a figure from its id at a scale: PNG, SVG and PDF plus a JSON sidecar with its provenance.

The three images are byte-for-byte reproducible: the same figure saved twice, at any date, gives the same
files (no dates, fixed SVG ids); the sidecar records what made them and their SHA-256 hashes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from .. import __version__
from ..backend import default_device
from ..errors import FlatbookInputError, did_you_mean
from ..experiments import SCALES, config_for
from ..experiments.runner import cache_counts, check_writable, experiment_fingerprint
from .registry import get_spec

__all__ = ["own_checkout", "git_commit", "machine", "package_versions", "save_figure", "make"]

#: what savefig may write that changes from one run to the next (dates, the matplotlib version), per format
_METADATA = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "Creator": None, "Producer": None},
}

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
    """The commit of flatbook's own checkout (``+uncommitted-changes`` if src/ or book/ differ from it, the
    results in book/paper_scale aside: they are outputs, not code); None when the package does not run from
    its checkout (the sidecar then cites the package version only)."""
    root = own_checkout(package)
    if root is None:
        return None
    try:
        commit = _git(root, "rev-parse", "HEAD").strip()
        dirty = _git(root, "status", "--porcelain", "--", "src", "book", ":(exclude)book/paper_scale").strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+uncommitted-changes" if dirty else "")


def package_versions() -> dict:
    """Python's version and those of flatbook and the libraries its numbers depend on (None: not installed)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for package in ("flatbook", "torch", "numpy", "scipy", "cvxpy", "clarabel", "matplotlib", "joblib"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    return versions


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):
        return None


def machine() -> str:
    """The machine in one line, without its name: CPU model and architecture, cores, memory, OS, GPU if used."""
    memory = _memory_gib()
    parts = [
        f"{_cpu_model()} ({platform.machine()})",
        f"{os.cpu_count()} cores",
        f"{memory:g} GiB" if memory is not None else "memory unknown",
        f"{platform.system()} {platform.release()}",
    ]
    device = default_device()
    if device.type == "cuda":
        import torch

        parts.append(f"GPU {torch.cuda.get_device_name(device)}")
    return ", ".join(parts)


def save_figure(fig: Figure, out: Path, name: str, title: str) -> dict[str, str]:
    """Write ``<out>/<name>.{png,svg,pdf}``, reproducible to the byte; return each file's SHA-256 by file name."""
    hashes = {}
    with matplotlib.rc_context({"svg.hashsalt": name}):  # SVG ids from the content, not a random salt
        for ext, metadata in _METADATA.items():
            path = out / f"{name}.{ext}"
            fig.savefig(path, bbox_inches="tight", metadata={"Title": title, **metadata})
            hashes[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def make(
    figure_id: str,
    scale: str = "book",
    out: str | Path = "figures",
    jobs: int | None = None,
    backend: str | None = None,
    command: Sequence[str] | None = None,
) -> dict:
    """Run the figure's experiment at ``scale``, write ``<out>/<id>.{png,svg,pdf,json}``; return the sidecar.

    ``command`` is the command line to record (default: this process's, ``sys.argv``).
    """
    spec = get_spec(figure_id)
    if scale not in SCALES:
        raise FlatbookInputError(
            f"unknown scale {scale!r}{did_you_mean(scale, SCALES)}; choose one of {', '.join(SCALES)}."
        )
    module = spec.experiment_module
    config = config_for(module.CONFIGS, scale)
    out = check_writable(Path(out), "the output folder")
    command = [Path(sys.argv[0]).name, *sys.argv[1:]] if command is None else list(command)
    start, before = time.perf_counter(), cache_counts()
    tables = module.run(config, jobs=jobs, backend=backend)
    after = cache_counts()
    hashes = save_figure(spec.draw(tables), out, figure_id, spec.title)
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
        "code_fingerprint": experiment_fingerprint(spec.experiment),
        "command_line": shlex.join(command),
        "versions": package_versions(),
        "device": str(default_device()),
        "machine": machine(),
        "wall_time_s": round(time.perf_counter() - start, 3),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cache": {
            "points_computed": after["computed"] - before["computed"],
            "points_from_cache": after["cached"] - before["cached"],
        },
        "files": list(hashes),
        "sha256": hashes,
    }
    (out / f"{figure_id}.json").write_text(json.dumps(sidecar, indent=2, default=str) + "\n")
    return sidecar
