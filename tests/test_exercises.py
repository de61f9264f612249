"""Every exercise has a solution whose code runs: extracted from the chapter, in a fresh interpreter, at the smoke
scale (the scale of a chapter's experiments comes from FLATBOOK_SCALE), so a solution that stops working fails."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXERCISE = re.compile(r"^:::\{exercise\}\n:label: (\S+)\n", re.M)
SOLUTION = re.compile(r"^:::\{solution\} (\S+)\n(.*?)^:::$", re.S | re.M)
CODE = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
CHAPTERS = sorted(path for path in (ROOT / "book").glob("*.md") if path.stem[:2].isdigit() or path.stem == "notation")


def solution_code():
    for chapter in CHAPTERS:
        for label, body in SOLUTION.findall(chapter.read_text()):
            for i, code in enumerate(CODE.findall(body)):
                yield pytest.param(code, id=f"{label}-{i}")


def test_every_chapter_has_exercises_each_with_a_solution_that_has_code():
    for chapter in CHAPTERS:
        text = chapter.read_text()
        exercises = EXERCISE.findall(text)
        solved = {label: body for label, body in SOLUTION.findall(text)}
        assert exercises, f"{chapter.name} has no exercise"
        assert set(exercises) == set(solved), f"{chapter.name}: exercises and solutions disagree"
        assert all(CODE.search(body) for body in solved.values()), f"{chapter.name}: a solution without code"
        assert all(":class: dropdown" in body for body in solved.values()), f"{chapter.name}: solutions are hidden"


@pytest.mark.slow
@pytest.mark.parametrize("code", list(solution_code()))
def test_solution_runs_in_a_fresh_interpreter(code, tmp_path):
    env = {**os.environ, "FLATBOOK_SCALE": "smoke", "FLATBOOK_PROGRESS": "off", "MPLBACKEND": "Agg"}
    env["FLATBOOK_CACHE"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "a solution prints its answer"
