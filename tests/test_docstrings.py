"""The package documents itself: every book equation a docstring cites (``eq-…``) exists in the book, every
public module declares ``__all__``, and the API reference (book/api/) documents every module once, on a page of
the table of contents, with the public modules before the experiments' internals."""

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: a label as the package cites it, e.g. "(eq. ``eq-primal``)"
CITATION = re.compile(r"(?<![\w-])(eq-[a-z0-9]+(?:-[a-z0-9]+)*)")
#: an equation label in the book: "$$ (eq-primal)" after a display, or ":label: eq-primal" in a math directive
LABEL = re.compile(r"\$\$\s*\((eq-[\w-]+)\)|:label:\s*(eq-[\w-]+)")
#: cited but not in the book yet; strict, so the entry must go once the label exists
NOT_YET_IN_THE_BOOK: dict[str, str] = {}


def cited_labels() -> dict[str, list[str]]:
    """label → the package files that cite it."""
    citing: dict[str, list[str]] = {}
    for path in sorted((ROOT / "src" / "flatbook").rglob("*.py")):
        for label in dict.fromkeys(CITATION.findall(path.read_text())):
            citing.setdefault(label, []).append(str(path.relative_to(ROOT)))
    return citing


def book_labels() -> set[str]:
    return {a or b for page in (ROOT / "book").rglob("*.md") for a, b in LABEL.findall(page.read_text())}


CITED = cited_labels()


def test_the_package_cites_equations():
    assert len(CITED) > 10 and "eq-primal" in CITED


@pytest.mark.parametrize(
    "label",
    [
        pytest.param(label, marks=pytest.mark.xfail(strict=True, reason=NOT_YET_IN_THE_BOOK[label]))
        if label in NOT_YET_IN_THE_BOOK
        else label
        for label in sorted(CITED)
    ],
)
def test_cited_equation_exists_in_the_book(label):
    assert label in book_labels(), f"{label}, cited in {', '.join(CITED[label])}, is not an equation label in book/"


PUBLIC_MODULES = sorted(
    ".".join(path.relative_to(ROOT / "src").with_suffix("").parts).removesuffix(".__init__")
    for path in (ROOT / "src" / "flatbook").rglob("*.py")
    if path.name != "__main__.py"
)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_module_declares_what_it_exports(module_name):
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    assert exported, f"{module_name} declares no __all__"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ names what it does not define: {missing}"
    assert len(set(exported)) == len(exported)


API = ROOT / "book" / "api"
#: the modules that run the book's experiments and draw its figures, documented last, apart from the public API
INTERNAL = ("flatbook.experiments", "flatbook.figures", "flatbook.paper_results")


def api_pages() -> list[Path]:
    """The pages of the API reference, in the order of the table of contents."""
    from conftest import toc_pages

    return [ROOT / f"{page}.md" for page in toc_pages() if page.startswith("book/api/")]


def documented_modules() -> list[tuple[str, str]]:
    """(page, module) for every ``automodule`` of the API reference, in reading order."""
    return [
        (page.name, module)
        for page in api_pages()
        for module in re.findall(r"^\.\. automodule:: (\S+)", page.read_text(), re.M)
    ]


def test_the_api_reference_documents_every_public_module_once():
    assert api_pages()[0] == API / "index.md" and len(api_pages()) > 3
    assert sorted(API.glob("*.md")) == sorted(api_pages()), "a page of book/api/ is missing from _toc.yml"
    modules = [module for _, module in documented_modules()]
    assert len(modules) == len(set(modules)), "a module is documented twice (duplicate object descriptions)"
    assert set(modules) == set(PUBLIC_MODULES) - {"flatbook.cli"}, "book/api/ and the package's modules disagree"


def test_the_api_reference_puts_the_public_api_first():
    """The index lists what ``import flatbook`` exports; the experiments' internals come after every public module,
    on pages of their own."""
    import flatbook

    summary = (API / "index.md").read_text()
    listed = {
        line.strip().rsplit(".", 1)[-1] for line in summary.split(".. autosummary::")[1].split("```")[0].splitlines()
    }
    assert set(flatbook.__all__) <= listed
    pages = documented_modules()
    internal = [i for i, (_, module) in enumerate(pages) if module.startswith(INTERNAL)]
    public = [i for i, (_, module) in enumerate(pages) if not module.startswith(INTERNAL)]
    assert max(public) < min(internal)
    assert not {page for page, module in pages if module.startswith(INTERNAL)} & {
        page for page, module in pages if not module.startswith(INTERNAL)
    }, "a page mixes public modules and internals"
