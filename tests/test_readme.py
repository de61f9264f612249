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
