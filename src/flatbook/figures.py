"""The figure registry: every figure of the book, by a stable id, regenerable at any scale.

A figure is an experiment (``flatbook.experiments.<experiment>``) run at a
scale, plus one of that module's plot functions.  Chapters show a figure with
``plot(figure_id, tables)``; the command ``flatbook figure ID --scale S``
regenerates it with :func:`make`, which writes PNG, SVG and PDF and a JSON
sidecar with its provenance.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .backend import default_device
from .errors import FlatbookInputError
from .experiments import SCALES, config_for


@dataclass(frozen=True)
class FigureSpec:
    """One figure: where it appears and what makes it."""

    id: str
    chapter: str      #: the chapter's source file, e.g. "book/01-symmetry-paradox.md"
    experiment: str   #: module name under flatbook.experiments
    plot: str         #: plot function of that module
    title: str


_SPECS = [
    FigureSpec("ch1-orbit-curves", "book/01-symmetry-paradox.md", "symmetry_paradox", "plot_orbit_curves",
               "Hessian trace along a symmetry orbit, closed form and exact"),
    FigureSpec("ch1-paradox", "book/01-symmetry-paradox.md", "symmetry_paradox", "plot_paradox",
               "Population loss against the traces each orbit reaches"),
    FigureSpec("ch2-dual-bound", "book/02-convex-dual-bound.md", "convex_dual", "plot_dual_bound",
               "Interpolators with fixed directions above the dual certificate"),
    FigureSpec("ch2-sorted-weights", "book/02-convex-dual-bound.md", "convex_dual", "plot_sorted_weights",
               "Sorted effective outer weights: sparse (ReLU) and spread (quadratic)"),
    FigureSpec("ch2-balancedness", "book/02-convex-dual-bound.md", "convex_dual", "plot_balancedness",
               "Flatness and largest weight against the width: dictionary optimum vs global flattest"),
    FigureSpec("ch3-gap", "book/03-bad-interpolators.md", "bad_interpolators", "plot_gap",
               "Flatness gap of misaligned interpolators against n"),
    FigureSpec("ch3-regime", "book/03-bad-interpolators.md", "bad_interpolators", "plot_regime",
               "Quadratic: the gap against n / (d(d-1)/2)"),
    FigureSpec("ch3-losses", "book/03-bad-interpolators.md", "bad_interpolators", "plot_losses",
               "Population loss of flattest and misaligned interpolators"),
    FigureSpec("ch4-excess-loss", "book/04-flattest-generalise.md", "flattest_generalise", "plot_excess_loss",
               "Excess loss of the flattest interpolators found against n"),
    FigureSpec("ch4-balancedness", "book/04-flattest-generalise.md", "flattest_generalise", "plot_balancedness",
               "Largest effective outer weight of the flattest found against the width"),
    FigureSpec("ch5-loss-vs-flatness", "book/05-experiments.md", "paper_experiments", "plot_loss_vs_flatness",
               "Population loss against flatness at controlled alignment, per setting"),
    FigureSpec("ch5-correlations", "book/05-experiments.md", "paper_experiments", "plot_correlations",
               "Rank correlation of flatness and population loss per setting"),
    FigureSpec("ch5-beyond", "book/05-experiments.md", "paper_experiments", "plot_beyond",
               "Rank correlation against label noise and against the width ratio"),
    FigureSpec("ch6-margins", "book/06-mirror-flow.md", "mirror_flow", "plot_margins",
               "Normalised margins along training for three mirror potentials"),
    FigureSpec("ch6-neurons", "book/06-mirror-flow.md", "mirror_flow", "plot_neurons",
               "Sorted per-neuron weights: sparse (hyperbolic entropy) and dense (GD, p = 3)"),
    FigureSpec("ch6-balance", "book/06-mirror-flow.md", "mirror_flow", "plot_balance",
               "Drift of the balance equation against the step size"),
    FigureSpec("ch6-slow", "book/06-mirror-flow.md", "mirror_flow", "plot_slow",
               "Hyperbolic entropy: time to the sparse solution against the scale"),
    FigureSpec("ch6-digits", "book/06-mirror-flow.md", "mirror_flow", "plot_digits",
               "Handwritten digits: test accuracy against magnitude pruning"),
    FigureSpec("ch7-loss-vs-flatness", "book/07-training.md", "training_flatness", "plot_loss_vs_flatness",
               "Trained networks on the population-loss-vs-flatness plane, beside the searches"),
    FigureSpec("ch7-upsilon-training", "book/07-training.md", "training_flatness", "plot_upsilon_along_training",
               "Orbit-minimal flatness of the function along training, per optimiser"),
    FigureSpec("ch7-init-scale", "book/07-training.md", "training_flatness", "plot_init_scale",
               "Gradient descent: distance from the flattest and population loss against the initialisation scale"),
    FigureSpec("ch7-mirror-solver", "book/07-training.md", "training_flatness", "plot_mirror_solver",
               "Mirror descent on the outer weights converging to the flattest outer weights"),
]
REGISTRY: dict[str, FigureSpec] = {spec.id: spec for spec in _SPECS}


def get_spec(figure_id: str) -> FigureSpec:
    """The registry entry of ``figure_id``; an unknown id raises an error listing the valid ones."""
    if figure_id not in REGISTRY:
        raise FlatbookInputError(
            f"unknown figure id {figure_id!r}; valid ids: {', '.join(REGISTRY)} "
            "(or run `flatbook figure --list`)."
        )
    return REGISTRY[figure_id]


def experiment_module(spec: FigureSpec):
    return importlib.import_module(f"flatbook.experiments.{spec.experiment}")


def plot(figure_id: str, tables: dict):
    """Draw registered figure ``figure_id`` from an experiment's tables (what the chapters call)."""
    spec = get_spec(figure_id)
    return getattr(experiment_module(spec), spec.plot)(tables)


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[2]
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "book"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        return commit + ("+uncommitted-changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout (e.g. an installed wheel)


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version()}
    for package in ("flatbook", "torch", "numpy", "scipy", "cvxpy", "clarabel", "matplotlib", "joblib"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    return versions


def make(figure_id: str, scale: str = "book", out: str | Path = "figures", jobs: int | None = None,
         backend: str | None = None) -> dict:
    """Run the figure's experiment at ``scale``, write ``<out>/<id>.{png,svg,pdf,json}``; return the sidecar."""
    spec = get_spec(figure_id)
    if scale not in SCALES:
        raise FlatbookInputError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}.")
    module = experiment_module(spec)
    config = config_for(module.CONFIGS, scale)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tables = module.run(config, jobs=jobs, backend=backend)
    fig = getattr(module, spec.plot)(tables)
    paths = {}
    for ext in ("png", "svg", "pdf"):
        paths[ext] = out / f"{figure_id}.{ext}"
        fig.savefig(paths[ext], bbox_inches="tight", metadata=None if ext != "png" else {"Title": spec.title})
    sidecar = {
        "id": figure_id, "title": spec.title, "chapter": spec.chapter, "scale": scale,
        "experiment": f"flatbook.experiments.{spec.experiment}.run", "plot": spec.plot,
        "config": dataclasses.asdict(config), "git_commit": _git_commit(), "versions": _versions(),
        "device": str(default_device()), "machine": platform.machine(),
        "wall_time_s": round(time.perf_counter() - start, 3),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": [p.name for p in paths.values()],
    }
    (out / f"{figure_id}.json").write_text(json.dumps(sidecar, indent=2, default=str) + "\n")
    return sidecar
