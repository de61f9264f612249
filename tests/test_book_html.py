"""Checks of the built book (_build/html): every page exists, executed cleanly, renders math offline.

The ``html_dir`` fixture (conftest.py) builds the book first when _build/html is
missing or older than any of its sources, so a stale build can never pass.
"""

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import toc_pages

pytestmark = pytest.mark.book


@pytest.mark.parametrize("page", toc_pages())
def test_page_was_built(html_dir, page):
    assert (html_dir / f"{page}.html").is_file(), f"{page} is in _toc.yml but was not built"


@pytest.mark.parametrize("page", toc_pages())
def test_page_has_no_execution_errors(html_dir, page):
    text = (html_dir / f"{page}.html").read_text()
    for marker in (
        "Traceback (most recent call last)",
        "CellExecutionError",
        "output traceback",
        "Error</span>:",
        "Figure size",
    ):
        assert marker not in text, f"{page}.html contains {marker!r}"


@pytest.mark.parametrize("page", toc_pages())
def test_page_has_no_unresolved_roles(html_dir, page):
    prose = re.sub(r"<pre.*?</pre>", "", (html_dir / f"{page}.html").read_text(), flags=re.S)
    for role in ("{glue:text}", "{eq}", "{cite}", "{numref}", "{ref}", "{doc}"):
        assert role not in prose, f"{page}.html shows an unresolved {role} role"


@pytest.mark.parametrize("page", toc_pages())
def test_page_loads_nothing_remote(html_dir, page):
    text = (html_dir / f"{page}.html").read_text()
    # (a canonical link names the published address of the page; browsers do not fetch it)
    tags = re.findall(r"<(?:script|link|img)[^>]*>", text)
    remote = [tag for tag in tags if re.search(r'(?:src|href)="(?:https?:)?//', tag) and 'rel="canonical"' not in tag]
    assert not remote, f"{page}.html loads remote resources: {remote}"
    if 'class="math' in text:
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


#: (anchor on the notation page, regex that finds the symbol in a formula's TeX); B_j has two meanings (the trace's
#: coefficient in chapters 1-2, the balance quantity in chapter 6), so its first use may link to either row
SYMBOLS = [
    ("sym-teacher", r"\\Theta\^\\star|f\^\\star"),
    ("sym-weights", r"\\theta_j"),
    ("sym-activation", r"\\sigma"),
    ("sym-alpha", r"\\alpha_j"),
    ("sym-effective", r"\\tilde a"),
    ("sym-rho", r"\\rho"),
    ("sym-loss", r"F_S|F\^\\star"),
    ("sym-trace", r"\\operatorname\{Tr\}"),
    ("sym-upsilon", r"\\Upsilon"),
    ("sym-kappa", r"\\kappa"),
    ("sym-dual", r"\\Phi"),
    ("sym-potential", r"R\^\*|\\nabla R"),
    ("sym-horizon", r"\\phi_\\alpha"),
    (("sym-balance", "sym-trace-coefficients"), r"B_j"),
    ("sym-trace-coefficients", r"A_j"),
    ("sym-margin", r"\\gamma_"),
    ("sym-measure", r"V\^\\star|G_\\lambda"),
]


class _Formulas(HTMLParser):
    """The formulas of a page's prose, in order, each with the link it sits in (None if none).

    Code and navigation (the page's table of contents repeats its headings' formulas) are skipped.
    """

    def __init__(self):
        super().__init__()
        self.formulas, self._links, self._math, self._code = [], [], None, 0

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "a":
            self._links.append(dict(attrs).get("href"))
        if self._code or "cell_input" in classes or tag in ("pre", "nav"):
            self._code += 1
        elif "math" in classes and self._math is None:
            self._math = [tag, 1, ""]
        elif self._math is not None and tag == self._math[0]:
            self._math[1] += 1

    def handle_endtag(self, tag):
        if tag == "a" and self._links:
            self._links.pop()
        if self._code:
            self._code -= 1
        elif self._math is not None and tag == self._math[0]:
            self._math[1] -= 1
            if self._math[1] == 0:
                self.formulas.append((self._math[2], self._links[-1] if self._links else None))
                self._math = None

    def handle_data(self, data):
        if self._math is not None:
            self._math[2] += data


def _anchors(entry) -> tuple[str, ...]:
    """The notation rows a symbol's first use may link to."""
    return entry if isinstance(entry, tuple) else (entry,)


def test_notation_defines_every_linked_symbol(html_dir):
    ids = _parse(html_dir / "book" / "notation.html").ids
    assert {anchor for entry, _ in SYMBOLS for anchor in _anchors(entry)} <= ids


@pytest.mark.parametrize("page", [p for p in toc_pages() if p.startswith("book/0")])
def test_first_use_of_each_symbol_links_to_the_notation_page(html_dir, page):
    parser = _Formulas()
    parser.feed((html_dir / f"{page}.html").read_text())
    assert parser.formulas, f"{page}: no formulas found"
    unlinked = []
    for entry, pattern in SYMBOLS:
        first = next(((tex, href) for tex, href in parser.formulas if re.search(pattern, tex)), None)
        if first is not None and not any((first[1] or "").endswith(f"notation.html#{a}") for a in _anchors(entry)):
            unlinked.append(f"{' or '.join(_anchors(entry))}: first used in {first[0][:50]!r}, linked to {first[1]}")
    assert not unlinked, f"{page}: " + "; ".join(unlinked)


def _config() -> dict:
    import yaml

    return yaml.safe_load((Path(__file__).resolve().parent.parent / "_config.yml").read_text())


#: the services a launch button opens a page's source in (Binder, Colab, a JupyterHub through nbgitpuller)
LAUNCH_LINK = re.compile(r'href="([^"]*(?:mybinder\.org|colab\.research\.google\.com|git-pull\?)[^"]*)"')


@pytest.mark.parametrize("page", [page for page in toc_pages() if page[5:7].isdigit()])
def test_chapter_offers_its_repository_and_no_launch_link_to_its_source(html_dir, page):
    """Repository and issue links; no launch button, since each would open the chapter's MyST source (book/*.md),
    which Colab cannot open and Binder shows with raw roles (README: run the downloaded notebook instead)."""
    repository = _config()["repository"]["url"]
    text = (html_dir / f"{page}.html").read_text()
    assert f'href="{repository}"' in text and f'href="{repository}/issues' in text
    launches = LAUNCH_LINK.findall(text)
    assert not launches, f"{page}.html has launch links that open its source, not a notebook: {launches}"


@pytest.mark.parametrize("page", [page for page in toc_pages() if page[5:7].isdigit() or page.endswith("notation")])
def test_downloaded_notebook_reads_in_plain_jupyter(html_dir, page):
    """The .ipynb in the download menu: glued values and references written in, an install cell first."""
    import json

    notebook = json.loads((html_dir / "_sources" / f"{page}.ipynb").read_text())
    first = notebook["cells"][0]
    assert first["cell_type"] == "code" and "pip" in first["source"] and "flatbook" in first["source"]
    markdown = "\n".join(cell["source"] for cell in notebook["cells"] if cell["cell_type"] == "markdown")
    leftovers = re.findall(r"\{[a-z:-]+\}`[^`]*`|^\([\w-]+\)=$|^:::|\$\$ \(eq-", markdown, re.M)
    assert not leftovers, f"{page}.ipynb still has MyST only the book renders: {leftovers[:5]}"
    source = (html_dir.parent.parent / f"{page}.md").read_text()
    # every exercise and lemma keeps its text, every solution sits in a <details> block
    assert markdown.count("<details><summary>Solution</summary>") == source.count(":::{solution}")
    blocks = re.findall(r"^\*\*(?:Exercise|Lemma)[^*]*\*\*(.*)$", markdown, re.M)
    assert len(blocks) == source.count(":::{exercise}") + source.count(":::{prf:lemma}")
    assert all(len(text.strip()) > 20 for text in blocks), "an exercise or lemma lost its text"
    if "{glue:text}" in source:
        # a glued number of the page appears in the copy as the page shows it
        shown = re.search(r'<span class="pasted-text">([^<]+)</span>', (html_dir / f"{page}.html").read_text())
        assert shown and shown.group(1) in markdown


def _build_cache() -> str | None:
    """The experiment cache of this session (read at import, before the tests' own isolated caches)."""
    from flatbook.experiments.runner import cache_dir

    directory = cache_dir()
    return str(directory) if directory else None


BUILD_CACHE = _build_cache()


@pytest.mark.parametrize("page", toc_pages())
def test_page_shows_no_path_of_the_machine_that_built_it(html_dir, page):
    """Published pages carry no local path: not the checkout, not the home folder, not the experiment cache."""
    text = (html_dir / f"{page}.html").read_text()
    root = Path(__file__).resolve().parent.parent
    for path in (str(root) + "/", str(Path.home()) + "/", BUILD_CACHE or str(root) + "/"):
        assert path not in text, f"{page}.html shows the local path {path}"
