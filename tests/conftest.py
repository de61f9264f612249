"""Shared fixtures: small, seeded problems in float64 on the CPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from filelock import FileLock

from flatbook import TwoLayerNet, get_activation

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "scripts"))
from chapters_to_notebooks import toc_files  # noqa: E402

# No progress bars in test output, nor in the chapters the tests execute (their kernels inherit this).
os.environ.setdefault("FLATBOOK_PROGRESS", "off")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Under pytest-xdist the workers fill the cores: one intra-op thread per test process and per subprocess a
    # test starts.  Two OpenMP threads sharing a busy core wait for each other at every operation (an exercise
    # that runs in 18 s took 47 s beside one busy core).
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

ACTIVATION_CASES = [
    ("relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("quadratic", {}),
    ("relu_power", {"c": 1.5}),
    ("relu_power", {"c": 3.0}),
]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own empty experiment cache and runs sequentially unless it says otherwise."""
    monkeypatch.setenv("FLATBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FLATBOOK_JOBS", raising=False)
    monkeypatch.delenv("FLATBOOK_BACKEND", raising=False)
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def smoke_cache(tmp_path_factory):
    """One experiment cache shared by the tests that run whole experiments at smoke scale (set FLATBOOK_CACHE
    to it): each experiment is computed once per test process, by the first test that needs it."""
    return tmp_path_factory.mktemp("smoke-cache")


@pytest.fixture(params=ACTIVATION_CASES, ids=lambda case: f"{case[0]}{case[1] or ''}")
def activation(request):
    name, params = request.param
    return get_activation(name, **params)


def random_problem(activation, n=9, m=7, d=4, seed=0):
    """A random network and data set (not an interpolator)."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    net = TwoLayerNet(randn(m), randn(m, d), activation)
    return net, randn(n, d), randn(n)


SOURCE_SUFFIXES = {".py", ".md", ".bib", ".yml", ".js", ".css"}


def newest_source_mtime() -> float:
    """Newest change to what the book is built from (not caches, bytecode or install metadata)."""
    sources = [ROOT / "_config.yml", ROOT / "_toc.yml"]
    sources += [
        p
        for folder in ("book", "src")
        for p in (ROOT / folder).rglob("*")
        if p.is_file()
        and p.suffix in SOURCE_SUFFIXES
        and not any(part == "__pycache__" or part.endswith(".egg-info") for part in p.parts)
    ]
    return max(p.stat().st_mtime for p in sources)


@pytest.fixture(scope="session")
def html_dir() -> Path:
    """The built site (and the whole-book PDF it links), rebuilt first when it is missing or older than any source."""
    # objects.inv is written by every HTML build (index.html, a redirect, only by the first)
    built = HTML / "objects.inv"

    def stale() -> bool:
        return not built.exists() or built.stat().st_mtime < newest_source_mtime()

    if not stale():
        return HTML
    # Under pytest-xdist every worker asks: the first rebuilds, the others wait for it and find the site fresh.
    HTML.parent.mkdir(exist_ok=True)
    with FileLock(HTML.parent / "rebuild.lock"):
        if not stale():
            return HTML
        jupyter_book = Path(sys.executable).parent / "jupyter-book"
        subprocess.run(
            [str(jupyter_book), "build", str(ROOT), "--all", "-W", "-n", "--keep-going"], check=True, cwd=ROOT
        )
        subprocess.run(["bash", str(ROOT / "scripts" / "build_pdf.sh")], check=True, cwd=ROOT)
    return HTML


def toc_pages() -> list[str]:
    """The book's pages in reading order, as paths without suffix (e.g. "book/intro")."""
    return [name.removesuffix(".md") for name in toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))]
