"""Every ```python block of README.md runs as pasted, in a fresh interpreter."""

import re
import subprocess
import sys

import pytest

from conftest import ROOT

BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_the_readme_has_python_examples():
    assert BLOCKS


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"README python block {index} failed:\n{result.stderr[-3000:]}"


@pytest.mark.slow
def test_the_first_example_is_seeded_labelled_and_certified(tmp_path):
    """The README's first example prints the same labelled numbers on every run, and its flattest interpolator
    is certified (it says so, and that the proof was recomputed)."""
    runs = [
        subprocess.run([sys.executable, "-c", BLOCKS[0]], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        for _ in range(2)
    ]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout
    assert "certified: True (CONVERGED)" in runs[0].stdout
    assert all(re.match(r"^[A-Za-zΥ].*\d", line) for line in runs[0].stdout.splitlines())  # every number labelled
