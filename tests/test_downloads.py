"""The notebooks of the download menu as a reader gets them: opened in plain Jupyter, outside the checkout.

Every page's ``.ipynb`` (``_build/html/_sources/<page>.ipynb``, which the download menu links) is checked as it
is served: no MyST that only the book renders (roles, directives, ``(label)=`` targets, ``[text]{#id}`` spans,
equation labels) in its Markdown cells or its Markdown outputs, and every link either external or to a page and
anchor of the published book that exists in the built site (the site's ``html.baseurl`` is mapped to
``_build/html``).  A relative link, ``#sym-...`` included, is dead in a downloaded notebook.

Which notebooks are executed, and why not all: each chapter is already executed once per CI run (by the book
build), and executing them all once more costs about five minutes of CI's thirty.  What a copy
outside the checkout changes is the folder the kernel starts in, so only the notebooks whose code reads files
(``reads_files``: paths, ``open``, ``paper_scale``...) can behave differently there.  The chapters that read
their experiment's committed paper-scale results do it one way (``paper_results.complete_run``, which finds
``paper_scale/results`` next to the notebook, where the download's first cells write the files it carries):
every such notebook is checked to carry the files it reads, and the first of them is executed here, from a
temporary folder, with every page that reads files in any other way.  After the run, the outputs the code wrote
must again hold no raw role (the notebook's own formatter cell resolves them) and must equal the saved ones.
"""

import io
import json
import re
import shutil
import sys
import tokenize
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

from conftest import ROOT, toc_pages

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import notebook_download  # noqa: E402  (the book's extension, which writes the downloaded notebooks)

pytestmark = pytest.mark.book

#: MyST that plain Jupyter shows raw
RAW_MYST = {
    "role": re.compile(r"\{[a-z][a-z:-]*\}`[^`]*`"),
    "directive": re.compile(r"^\s*(?:```|:::)\s*\{[a-z][a-z:-]*\}", re.M),
    "colon fence": re.compile(r"^:::", re.M),
    "target": re.compile(r"^\([\w-]+\)=\s*$", re.M),
    "span with an id": re.compile(r"\]\{#[\w-]+\}"),
    "equation label": re.compile(r"\$\$\s*\(eq-[\w-]+\)"),
}
MARKDOWN_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"""<a\s[^>]*href=["']([^"']+)["']""")
#: code that touches files: such a notebook may not run outside the checkout, so it is executed here
READS_FILES = re.compile(
    r"\bPath\(|\bopen\(|read_text|read_bytes|\.load\(|paper_scale|paper_results|__file__|chdir|glob\("
)

BASE_URL = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["baseurl"].rstrip("/") + "/"
PAGES = toc_pages()


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def markdown_of(notebook: dict) -> list[tuple[str, str]]:
    """(where, Markdown) for every Markdown cell and every Markdown output of a notebook."""
    found = []
    for number, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "markdown":
            found.append((f"cell {number} (Markdown)", _text(cell["source"])))
        for output in cell.get("outputs", []):
            if "text/markdown" in output.get("data", {}):
                found.append((f"cell {number} (output)", _text(output["data"]["text/markdown"])))
    return found


def raw_myst(notebook: dict) -> list[str]:
    """Every piece of MyST a plain Jupyter would show raw, with where it is."""
    return [
        f"{where}: {kind} {match.group(0)!r}"
        for where, text in markdown_of(notebook)
        for kind, pattern in RAW_MYST.items()
        for match in pattern.finditer(text)
    ]


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        if dict(attrs).get("id"):
            self.ids.add(dict(attrs)["id"])


def _ids(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        parser = _Ids()
        parser.feed(path.read_text())
        cache[path] = parser.ids
    return cache[path]


def dead_links(notebook: dict, html_dir: Path) -> list[str]:
    """Links of the notebook's Markdown that lead nowhere from a downloaded copy: relative ones, and those to
    the published book whose page or anchor the built site lacks (other external links are not followed)."""
    dead, cache = [], {}
    for where, text in markdown_of(notebook):
        for link in MARKDOWN_LINK.findall(text) + HTML_LINK.findall(text):
            if link.startswith(BASE_URL):
                target, _, anchor = link[len(BASE_URL) :].partition("#")
                path = html_dir / unquote(target or "index.html")
                if not path.is_file():
                    dead.append(f"{where}: {link} (no such page)")
                elif anchor and path.suffix == ".html" and anchor not in _ids(path, cache):
                    dead.append(f"{where}: {link} (no such anchor)")
            elif not urlparse(link).scheme:
                dead.append(f"{where}: {link} (relative: nothing is next to a downloaded notebook)")
    return dead


def reads_files(notebook: dict) -> bool:
    return any(
        cell["cell_type"] == "code" and READS_FILES.search(without_comments(_text(cell["source"])))
        for cell in notebook["cells"]
    )


def _downloaded(html_dir: Path, page: str) -> dict:
    path = html_dir / "_sources" / f"{page}.ipynb"
    if not path.is_file():
        pytest.fail(f"{page} has no notebook in its download menu ({path} is missing)")
    return json.loads(path.read_text())


def _offered(html_dir: Path) -> list[str]:
    return [page for page in PAGES if (html_dir / "_sources" / f"{page}.ipynb").is_file()]


def test_every_chapter_offers_a_notebook(html_dir):
    offered = _offered(html_dir)
    chapters = [page for page in PAGES if Path(page).name[:2].isdigit() or Path(page).name == "reproduce"]
    assert set(chapters) <= set(offered), f"no notebook in the download menu of {sorted(set(chapters) - set(offered))}"


@pytest.mark.parametrize("page", PAGES)
def test_downloaded_notebook_has_no_raw_myst_and_no_dead_link(html_dir, page):
    if not (html_dir / "_sources" / f"{page}.ipynb").is_file():
        pytest.skip(f"{page} is not a notebook page")
    notebook = _downloaded(html_dir, page)
    problems = raw_myst(notebook) + dead_links(notebook, html_dir)
    assert not problems, f"{page}.ipynb, as downloaded:\n" + "\n".join(problems[:20])


def test_the_checks_catch_what_they_look_for(html_dir):
    """The patterns above find raw roles, blocks, spans and dead links (a check that finds nothing proves nothing)."""
    markdown = (
        "See {doc}`notation`, [$a$](#sym-weights) and [$b$]{#sym-b}.\n"
        f"```{{glue:md}} key\n:format: myst\n```\n[ok]({BASE_URL}index.html) [gone]({BASE_URL}nowhere.html)\n"
        f'[no anchor]({BASE_URL}index.html#no-such-anchor) <a href="notation.html">x</a>'
    )
    notebook = {"cells": [{"cell_type": "markdown", "source": markdown}]}
    assert [problem.split(": ")[1].split(" ")[0] for problem in raw_myst(notebook)] == ["role", "directive", "span"]
    dead = {problem.split(": ", 1)[1].rsplit(" (", 1)[0] for problem in dead_links(notebook, html_dir)}
    assert dead == {"#sym-weights", f"{BASE_URL}nowhere.html", f"{BASE_URL}index.html#no-such-anchor", "notation.html"}
    assert reads_files({"cells": [{"cell_type": "code", "source": 'Path("paper_scale")'}]})
    assert not reads_files({"cells": [{"cell_type": "code", "source": "plot('ch3-gap', tables)"}]})


#: a chapter's read of its experiment's committed paper-scale results, through the one function that finds them
READS_COMMITTED = re.compile(r"paper_results\.(?:complete_run|run_status)\(\"(\w+)\"\)")


def without_comments(source: str) -> str:
    """The code with its comments removed: a comment that names a file reads none.  A cell that is not Python
    (a magic) is kept whole."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    return tokenize.untokenize(t for t in tokens if t.type != tokenize.COMMENT)


def chapter_code(notebook: dict) -> list[str]:
    """The source, without comments, of every code cell the chapter wrote (not those the download menu's copy
    adds before them)."""
    return [
        without_comments(_text(cell["source"]))
        for cell in notebook["cells"]
        if cell["cell_type"] == "code" and cell.get("id") not in notebook_download.ADDED_CELLS
    ]


def committed_results_read(notebook: dict) -> set[str]:
    """The experiments whose committed results the notebook's code reads with ``paper_results.complete_run`` (or
    whose run it describes with ``paper_results.run_status``)."""
    return {name for source in chapter_code(notebook) for name in READS_COMMITTED.findall(source)}


def reads_other_files(notebook: dict) -> bool:
    """Whether the chapter's code reads files otherwise than through ``paper_results.complete_run`` (and the
    ``paper_results`` calls that only format what it returned); the cell that writes the carried files is the
    download's, not the chapter's."""
    code = chapter_code(notebook)
    stripped = [
        re.sub(r"paper_results\.(complete_run|run_status|provenance)\(|from flatbook import paper_results", "", c)
        for c in code
    ]
    return any(READS_FILES.search(source) for source in stripped)


def _executed_here(html_dir: Path) -> list[str]:
    """Every page that reads files of its own, and the first one that reads only committed results: those all
    go through ``paper_results.complete_run`` and the files the download carries, one mechanism, executed once."""
    pages = [page for page in _offered(html_dir) if reads_files(_downloaded(html_dir, page))]
    own = [page for page in pages if reads_other_files(_downloaded(html_dir, page))]
    results_only = [page for page in pages if page not in own]
    return own + results_only[:1]


def test_a_notebook_that_reads_files_is_executed_here(html_dir):
    """The scan finds the pages that read the repository's files: the reproduce page reads book/paper_scale of
    its own, chapter 1 (the first chapter) only its committed paper-scale results."""
    assert _executed_here(html_dir)[-2:] == ["book/reproduce", "book/01-symmetry-paradox"]


NUMBER = re.compile(r"([-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)")
#: below this a printed number is round-off (a residual of an exact interpolator): its digits change with the
#: order of a BLAS reduction, i.e. with the number of threads, so two runs of the same code need not share them
ROUND_OFF = 1e-12


def same_up_to_round_off(first: str, second: str) -> bool:
    """The same text with the same numbers, except numbers that are round-off in both (|x| ≤ ROUND_OFF)."""
    a, b = NUMBER.split(first), NUMBER.split(second)
    if len(a) != len(b) or a[::2] != b[::2]:
        return False
    return all(x == y or max(abs(float(x)), abs(float(y))) <= ROUND_OFF for x, y in zip(a[1::2], b[1::2], strict=True))


def test_outputs_are_compared_exactly_except_round_off():
    assert same_up_to_round_off("| good | 0.054 | 8e-15 |", "| good | 0.054 | 1e-14 |")
    assert not same_up_to_round_off("| good | 0.054 | 8e-15 |", "| good | 0.055 | 8e-15 |")
    assert not same_up_to_round_off("| good | 1e-10 |", "| good | 2e-10 |")
    assert not same_up_to_round_off("| good | 1 |", "| bad | 1 |")


def test_the_checks_for_committed_results_catch_what_they_look_for():
    carried = {
        "cell_type": "code",
        "id": notebook_download.FILES_ID,
        "source": "path = Path(name)\npath.write_bytes(b)",
    }
    reads = {"cells": [carried, {"cell_type": "code", "source": 'paper = paper_results.complete_run("convex_dual")'}]}
    assert committed_results_read(reads) == {"convex_dual"} and not reads_other_files(reads)
    assert reads_other_files({"cells": [{"cell_type": "code", "source": 'Path("paper_scale") / "x.json"'}]})
    commented = {"cells": [{"cell_type": "code", "source": "# the run in book/paper_scale/results\nx = 1  # open("}]}
    assert not reads_other_files(commented) and not reads_files(commented)
    status = {"cells": [{"cell_type": "code", "source": 'glue("s", paper_results.run_status("mirror_flow"))'}]}
    assert committed_results_read(status) == {"mirror_flow"} and not reads_other_files(status)


def test_every_notebook_carries_the_committed_results_it_reads(html_dir):
    """A chapter that reads an experiment's committed results must carry that file in its download (the
    ``notebook_download_files`` entry of _config.yml), or a reader's copy stops with an error."""
    for page in _offered(html_dir):
        notebook = _downloaded(html_dir, page)
        carried = "".join(_text(c["source"]) for c in notebook["cells"] if c.get("id") == notebook_download.FILES_ID)
        missing = [
            name for name in committed_results_read(notebook) if f"'paper_scale/results/{name}.json.gz'" not in carried
        ]
        assert not missing, f"{page}.ipynb reads the committed results of {missing} without carrying them"


@pytest.mark.slow
def test_notebooks_that_read_files_run_outside_the_checkout(html_dir, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    for page in _executed_here(html_dir):
        folder = tmp_path / Path(page).name
        folder.mkdir()
        copy = folder / f"{Path(page).name}.ipynb"
        shutil.copy(html_dir / "_sources" / f"{page}.ipynb", copy)
        saved = json.loads(copy.read_text())
        notebook = nbformat.reads(copy.read_text(), as_version=4)
        client = NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
        )
        client.execute()
        run = json.loads(nbformat.writes(notebook))
        problems = raw_myst(run) + dead_links(run, html_dir)
        assert not problems, f"{page}.ipynb, executed in {folder}:\n" + "\n".join(problems[:20])
        outputs = [text for where, text in markdown_of(run) if where.endswith("(output)")]
        shown = [text for where, text in markdown_of(saved) if where.endswith("(output)")]
        assert len(outputs) == len(shown) and all(map(same_up_to_round_off, outputs, shown)), (
            f"{page}.ipynb writes other tables outside the checkout than the book shows:\n"
            + "\n".join(
                f"{a}\n  !=\n{b}" for a, b in zip(outputs, shown, strict=False) if not same_up_to_round_off(a, b)
            )
        )
