"""The chapters' worked examples: visible cells tagged ``worked-example`` that call the public API on a small
instance.  Every main section of a chapter that computes has one.  A chapter's examples, copied in order into a
fresh interpreter (nothing from the chapter's other cells: an example builds on the earlier examples only),
run against the installed package, and each prints what it shows."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted(path for path in (ROOT / "book").glob("*.md") if path.stem[:2].isdigit())
CELL = re.compile(r"^```\{code-cell\} ipython3\n(?::tags: \[([^\]\n]*)\]\n)?(.*?)^```$", re.S | re.M)
SECTION = re.compile(r"^## (.+)$", re.M)
#: sections that compute nothing of their own: the closing summary and exercises (which have their own
#: runnable solutions, tests/test_exercises.py), and sections of prose that sort what the chapter found
NO_EXAMPLE = (
    "Summary",
    "Exercises",
    "What is proven, what is heuristic",
    "Reproducing at paper scale",
    "Back to flat interpolators: a question for the next chapter",
    # reads the committed paper-scale results of the checkout: nothing a reader types in a fresh interpreter
    "At the paper scale",
)


def sections(chapter: Path) -> dict[str, list[str]]:
    """Each ``##`` section of a chapter → the code of its worked-example cells."""
    text = chapter.read_text()
    heads = list(SECTION.finditer(text))
    out = {}
    for head, following in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end() : following.start() if following else len(text)]
        out[head.group(1)] = [
            code for tags, code in CELL.findall(body) if "worked-example" in [t.strip() for t in tags.split(",")]
        ]
    return out


#: runs the cells given as JSON on stdin in one namespace; prints, as JSON, each cell's own output
RUN_IN_ORDER = """
import contextlib, io, json, sys
cells, outputs, namespace = json.load(sys.stdin), [], {"__name__": "__main__"}
for i, code in enumerate(cells):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, f"<worked example {i + 1}>", "exec"), namespace)
    outputs.append(out.getvalue())
print(json.dumps(outputs))
"""


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_every_main_section_opens_with_a_worked_example(chapter):
    missing = [title for title, codes in sections(chapter).items() if not codes and title not in NO_EXAMPLE]
    assert not missing, f"{chapter.name}: sections without a worked example: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_worked_examples_run_in_a_fresh_interpreter(chapter, tmp_path):
    cells = [code for codes in sections(chapter).values() for code in codes]
    for code in cells:
        assert 1 <= len(code.splitlines()) <= 20, f"a worked example is short:\n{code}"
        assert max(map(len, code.splitlines())) <= 120, f"its lines fit a code box:\n{code}"
    env = {**os.environ, "FLATBOOK_SCALE": "smoke", "FLATBOOK_PROGRESS": "off", "MPLBACKEND": "Agg"}
    env["FLATBOOK_CACHE"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-c", RUN_IN_ORDER],
        input=json.dumps(cells),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for code, output in zip(cells, json.loads(done.stdout), strict=True):
        assert output.strip(), f"a worked example prints what it shows:\n{code}"
        # the desktop page's output box holds 77 characters (tests/test_browser.py checks the page itself)
        assert max(map(len, output.splitlines())) <= 76, f"its output fits the page's code box:\n{output}"
