"""Checks of the built book (_build/html): every page exists, executed cleanly, renders math offline.

The fixture builds the book first when _build/html is missing or older than any
of its sources, so a stale build can never pass.
"""

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "scripts"))
from chapters_to_notebooks import toc_files  # noqa: E402

pytestmark = pytest.mark.book


SOURCE_SUFFIXES = {".py", ".md", ".bib", ".yml", ".js", ".css"}


def newest_source_mtime() -> float:
    """Newest change to what the book is built from (not caches, bytecode or install metadata)."""
    sources = [ROOT / "_config.yml", ROOT / "_toc.yml"]
    sources += [p for folder in ("book", "src") for p in (ROOT / folder).rglob("*")
                if p.is_file() and p.suffix in SOURCE_SUFFIXES
                and not any(part == "__pycache__" or part.endswith(".egg-info") for part in p.parts)]
    return max(p.stat().st_mtime for p in sources)


@pytest.fixture(scope="module")
def html_dir() -> Path:
    index = HTML / "index.html"
    if not index.exists() or index.stat().st_mtime < newest_source_mtime():
        jupyter_book = Path(sys.executable).parent / "jupyter-book"
        subprocess.run([str(jupyter_book), "build", str(ROOT), "--all", "-W", "-n", "--keep-going"],
                       check=True, cwd=ROOT)
    return HTML


def toc_pages() -> list[str]:
    return [name.removesuffix(".md") for name in toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))]


@pytest.mark.parametrize("page", toc_pages())
def test_page_was_built(html_dir, page):
    assert (html_dir / f"{page}.html").is_file(), f"{page} is in _toc.yml but was not built"


@pytest.mark.parametrize("page", toc_pages())
def test_page_has_no_execution_errors(html_dir, page):
    text = (html_dir / f"{page}.html").read_text()
    for marker in ("Traceback (most recent call last)", "CellExecutionError", "output traceback",
                   "Error</span>:", "Figure size"):
        assert marker not in text, f"{page}.html contains {marker!r}"


@pytest.mark.parametrize("page", toc_pages())
def test_page_has_no_unresolved_roles(html_dir, page):
    prose = re.sub(r"<pre.*?</pre>", "", (html_dir / f"{page}.html").read_text(), flags=re.S)
    for role in ("{glue:text}", "{eq}", "{cite}", "{numref}", "{ref}", "{doc}"):
        assert role not in prose, f"{page}.html shows an unresolved {role} role"


@pytest.mark.parametrize("page", toc_pages())
def test_page_loads_nothing_remote(html_dir, page):
    text = (html_dir / f"{page}.html").read_text()
    remote = re.findall(r'<(?:script|link|img)[^>]*(?:src|href)="(https?:)?//[^"]*"', text)
    assert not remote, f"{page}.html loads remote resources: {remote}"
    assert "mathjax/tex-svg-full.js" in text, f"{page}.html does not load the bundled MathJax"


def test_bundled_mathjax_is_shipped(html_dir):
    assert (html_dir / "_static" / "mathjax" / "tex-svg-full.js").stat().st_size > 1_000_000


def test_glued_numbers_are_rendered(html_dir):
    text = (html_dir / "book" / "notation.html").read_text()
    assert re.search(r'largest relative difference is <span class="pasted-text">\d\.\de-\d\d</span>', text)


class _Anchors(HTMLParser):
    """Collects the ids and the link targets of one HTML page."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])


def _parse(path: Path) -> _Anchors:
    parser = _Anchors()
    parser.feed(path.read_text())
    return parser


def test_internal_links_resolve(html_dir):
    """Every link inside the built site points at an existing page and, with a #fragment, an existing id."""
    pages = {path: _parse(path) for path in html_dir.rglob("*.html") if "_static" not in path.parts}
    broken = []
    for page, parsed in pages.items():
        for href in parsed.links:
            target, _, fragment = href.partition("#")
            if urlparse(target).scheme or target.startswith("//"):
                continue  # external: checked by the separate, non-blocking link check
            path = (page.parent / unquote(target)).resolve() if target else page
            if path.is_dir():
                path = path / "index.html"
            if not path.exists():
                broken.append(f"{page.relative_to(html_dir)} -> {href} (no such file)")
            elif fragment and path.suffix == ".html":
                ids = pages[path].ids if path in pages else _parse(path).ids
                if fragment not in ids:
                    broken.append(f"{page.relative_to(html_dir)} -> {href} (no such anchor)")
    assert not broken, "\n".join(broken)
