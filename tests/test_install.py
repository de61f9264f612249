"""`pip install .` gives a working package: the wheel built from the source, installed into a fresh virtual
environment, imports from there and its `flatbook` command runs.

Offline and without downloading torch: the wheel is built with this environment's setuptools (from the test
extra), installed with ``--no-deps --no-index`` into a venv without site packages, and the declared dependencies
are then taken from this environment through a ``.pth`` file, each checked against the version range the wheel
declares (the package's own and those of the ``cluster`` extra).
"""

import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
import torch

from flatbook import TwoLayerNet, hessian_trace

from conftest import ROOT

CHECK = """
import importlib.metadata as metadata, sys
from pathlib import Path
from packaging.requirements import Requirement
import flatbook, torch
from flatbook import TwoLayerNet, hessian_trace

assert Path(flatbook.__file__).is_relative_to(sys.prefix), flatbook.__file__  # the installed copy, not the source
for line in metadata.requires("flatbook"):
    requirement = Requirement(line)
    if requirement.marker is None or requirement.marker.evaluate({"extra": "cluster"}):  # pip install '.[cluster]'
        found = metadata.version(requirement.name)
        assert requirement.specifier.contains(found, prereleases=True), (line, found)
net = TwoLayerNet(torch.ones(3), torch.eye(3, 2), "relu")
print(flatbook.__version__, repr(hessian_trace(net, torch.ones(4, 2), torch.zeros(4))))
"""


def run(*command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_pip_install_of_the_source_gives_a_working_package(tmp_path):
    source = tmp_path / "source"  # a copy, so that building leaves nothing in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    pip = [sys.executable, "-m", "pip"]
    run(*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "-w", tmp_path / "dist", source)
    (wheel,) = (tmp_path / "dist").glob("flatbook-*.whl")
    modules = {p.relative_to(source / "src").as_posix() for p in (source / "src" / "flatbook").rglob("*.py")}
    assert modules <= set(zipfile.ZipFile(wheel).namelist()), "the wheel lacks modules of src/flatbook"

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    run(*pip, "--python", python, "install", "--quiet", "--no-deps", "--no-index", wheel)
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    Path(site, "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    installed_version, trace = run(python, "-c", CHECK, cwd=tmp_path).split()
    net = TwoLayerNet(torch.ones(3), torch.eye(3, 2), "relu")
    assert (installed_version, float(trace)) == (version, hessian_trace(net, torch.ones(4, 2), torch.zeros(4)))
    assert run(venv / "bin" / "flatbook", "--version", cwd=tmp_path).strip() == f"flatbook {version}"
    assert "ch3-gap" in run(venv / "bin" / "flatbook", "figure", "--list", cwd=tmp_path)
