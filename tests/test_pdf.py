"""The whole-book PDF (scripts/build_pdf.sh) as a reader gets it: the file every HTML page links, read back.

Its text is extracted with pdftotext (poppler-utils, installed by scripts/install_latex.sh) and compared with
the built HTML:

- every page of the table of contents is in it, in order: its title and every paragraph of its prose (those
  without math, compared letter by letter, so that line breaks, hyphenation and ligatures do not matter);
- no "??" (what LaTeX prints for a reference it could not resolve), and LaTeX's log reports no undefined
  reference or citation and no character missing from a font (it would be dropped from the page silently);
- every figure of the HTML, with the HTML's number and its figure id in its caption, and an image for each;
- every labelled equation with the HTML's number (LaTeX's own record of what it printed, flatbook.aux), each
  number printed, and no equation numbered beyond the HTML's last;
- every work of the HTML's bibliography.
"""

import re
import shutil
import subprocess
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, toc_pages

pytestmark = pytest.mark.book

LATEX = ROOT / "_build" / "latex"
NAME = Path(yaml.safe_load((ROOT / "_config.yml").read_text())["latex"]["latex_documents"]["targetname"]).stem


def letters(text: str) -> str:
    """Lower-case letters and digits only, after Unicode compatibility folding (ligatures, math italics)."""
    return re.sub(r"[^a-z0-9]", "", unicodedata.normalize("NFKC", text).lower())


@pytest.fixture(scope="module")
def pdf(html_dir) -> Path:
    path = html_dir / f"{NAME}.pdf"
    assert path.is_file(), f"{path} is missing: build it with bash scripts/build_pdf.sh (after the HTML)"
    assert path.stat().st_mtime >= (html_dir / "objects.inv").stat().st_mtime, (
        f"{path} is older than the HTML: rebuild it with bash scripts/build_pdf.sh"
    )
    return path


def _pdftotext(pdf: Path, *options: str) -> str:
    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext is missing: bash scripts/install_latex.sh installs poppler-utils")
    result = subprocess.run(["pdftotext", *options, "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def text(pdf) -> str:
    return _pdftotext(pdf)


def without_running_heads(text: str, headings: set[str]) -> str:
    """The text without what LaTeX repeats on every page: the book's title at the top, and at the bottom the
    page number and the current chapter or section title, which would split a paragraph that crosses a page."""
    title = letters(yaml.safe_load((ROOT / "_config.yml").read_text())["title"])
    known = {letters(heading) for heading in headings} | {title}
    pages = []
    for page in text.split("\f"):
        lines = [line for line in page.splitlines() if line.strip()]
        if lines and letters(lines[0]) == title:
            lines = lines[1:]
        for _ in range(2):
            if lines and (re.fullmatch(r"\s*[0-9ivxlc]+\s*", lines[-1]) or letters(lines[-1]) in known):
                lines = lines[:-1]
        pages.append("\n".join(lines))
    return "\n".join(pages)


@pytest.fixture(scope="module")
def layout(pdf) -> str:
    """The text laid out as on the page (equation numbers at the right margin)."""
    return _pdftotext(pdf, "-layout")


class _Prose(HTMLParser):
    """A page's title, its prose paragraphs without math or code, its figures and its numbered equations."""

    SKIP = {"script", "style", "pre", "nav", "header", "footer", "aside", "details", "table"}
    #: what is not prose: code, math, hidden solutions, and the bibliography (LaTeX moves it to the end)
    SKIP_CLASSES = {"cell_input", "math", "toggle-details", "citation"}

    def __init__(self):
        super().__init__()
        self.title, self.paragraphs, self.figures, self.equations, self.headings = "", [], [], {}, []
        self._stack, self._text, self._in = [], None, {"main": 0, "h1": 0, "skip": 0, "figcaption": 0, "eqno": 0}
        self._heading = None
        self._caption, self._equation = "", None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        self._stack.append((tag, classes))
        if tag == "main" or "bd-article" in classes:
            self._in["main"] += 1
        if tag in self.SKIP or self.SKIP_CLASSES & set(classes):
            self._in["skip"] += 1
        if tag == "h1":
            self._in["h1"] += 1
        if tag in ("h1", "h2", "h3", "h4") and self._in["main"]:
            self._heading = ""
        if tag == "p" and self._in["main"] and not self._in["skip"] and not self._in["figcaption"]:
            self._text = ""
        if tag == "figcaption":
            self._in["figcaption"] += 1
            self._caption = ""
        if "eqno" in classes:
            self._in["eqno"] += 1
            self._equation = ""
        if self._in["eqno"] and tag == "a" and (attrs.get("href") or "").startswith("#equation-"):
            self.equations[attrs["href"][len("#equation-") :]] = self._equation.strip()

    def handle_endtag(self, tag):
        if not self._stack:
            return
        opened, classes = self._stack.pop()
        if opened == "main" or "bd-article" in classes:
            self._in["main"] -= 1
        if opened in self.SKIP or self.SKIP_CLASSES & set(classes):
            self._in["skip"] -= 1
        if opened == "h1":
            self._in["h1"] -= 1
        if opened in ("h1", "h2", "h3", "h4") and self._heading is not None:
            self.headings.append(self._heading.strip().rstrip("#").strip())
            self._heading = None
        if opened == "p" and self._text is not None:
            if len(letters(self._text)) > 40:
                self.paragraphs.append(self._text)
            self._text = None
        if opened == "figcaption":
            self._in["figcaption"] -= 1
            self.figures.append(" ".join(self._caption.split()))
        if "eqno" in classes:
            self._in["eqno"] -= 1

    def handle_data(self, data):
        if self._in["h1"] and not self.title:
            self.title = data.strip()
        if self._heading is not None:
            self._heading += data
        if self._text is not None:
            if self._in["skip"]:
                self._text = None  # a paragraph with math or code: not compared
            else:
                self._text += data
        if self._in["figcaption"]:
            self._caption += data
        if self._in["eqno"] and self._equation is not None:
            self._equation += data


@pytest.fixture(scope="module")
def pages(html_dir) -> dict[str, _Prose]:
    parsed = {}
    for page in toc_pages():
        parser = _Prose()
        parser.feed((html_dir / f"{page}.html").read_text())
        parsed[page] = parser
    return parsed


def test_every_page_links_the_pdf(html_dir, pdf):
    """A header button on every page of the site (search and index pages too) leads to the PDF."""
    unlinked = []
    for page in html_dir.rglob("*.html"):
        content = page.read_text()
        if "_static" in page.parts or 'http-equiv="Refresh"' in content:
            continue  # a redirect (index.html leads to the first page)
        hrefs = re.findall(r'<a href="([^"]+\.pdf)"', content)
        if not any((page.parent / href).resolve() == pdf.resolve() for href in hrefs):
            unlinked.append(str(page.relative_to(html_dir)))
    assert not unlinked, f"pages without a link to {pdf.name}: {unlinked}"


def test_every_chapter_is_in_the_pdf_in_order(text, pages):
    """Each page's title and paragraphs, in order.  A paragraph is found whole or, where pdftotext's reading
    order moves a fragment of a line (beside a link or a change of font), as every one of its words of four
    letters or more close after the previous paragraph; at most 2 % of them may be found only so."""
    headings = {heading for prose in pages.values() for heading in prose.headings}
    headings |= {"Contents", "Bibliography", "Index", "Proof Index", "Python Module Index"}
    plain = without_running_heads(text, headings)
    body = letters(plain)
    position, missing, scattered = 0, [], []
    for page, prose in pages.items():
        assert prose.title, f"{page}: no title found in its HTML"
        found = body.find(letters(prose.title), position)
        if found < 0:
            missing.append(f"{page}: title {prose.title!r}")
            continue
        position = found
        for paragraph in prose.paragraphs:
            found = body.find(letters(paragraph), position)
            if found >= 0:
                position = found
                continue
            near = body[position : position + 4 * len(letters(paragraph)) + 500]
            if all(word in near for word in map(letters, paragraph.split()) if len(word) >= 4):
                scattered.append(paragraph)
            else:
                missing.append(f"{page}: {paragraph[:80]!r}")
    compared = sum(len(prose.paragraphs) for prose in pages.values())
    assert compared > 100, f"only {compared} paragraphs compared"
    assert len(scattered) <= 0.02 * compared, f"{len(scattered)} paragraphs found only in pieces: {scattered[:5]}"
    assert not missing, f"{len(missing)} pieces of the HTML are not in the PDF (or out of order):\n" + "\n".join(
        missing[:15]
    )


def test_no_unresolved_reference(text):
    assert "??" not in text, "the PDF shows ?? (an unresolved reference): " + text[text.index("??") - 200 :][:300]


def test_latex_log_has_no_undefined_reference_or_missing_glyph(pdf):
    log = (LATEX / f"{NAME}.log").read_text(errors="replace")
    problems = re.findall(
        r"^(?:LaTeX Warning: (?:Hyper r|R)eference .*|LaTeX Warning: Citation .*|Missing character: .*)$", log, re.M
    )
    assert "There were undefined references" not in log
    assert not problems, "\n".join(sorted(set(problems))[:15])


def test_every_figure_is_in_the_pdf_with_the_html_number(text, pages, pdf):
    captions = [caption for prose in pages.values() for caption in prose.figures]
    assert len(captions) >= 20, f"only {len(captions)} figures found in the HTML"
    flat = " ".join(text.split())
    wrong = []
    for caption in captions:
        number = re.match(r"Fig\. (\d+)", caption)
        figure_id = re.search(r"Figure id: ([a-z0-9-]+)", caption)
        assert number and figure_id, f"an HTML figure caption without number or id: {caption[:80]!r}"
        shown = re.search(rf"Fig\. {number[1]}: (?:(?!Fig\. \d+:).)*?Figure id: {re.escape(figure_id[1])}", flat)
        if not shown:
            wrong.append(f"Fig. {number[1]} ({figure_id[1]})")
    assert not wrong, f"figures not in the PDF with the HTML's number and id: {wrong}"
    assert len(re.findall(r"Fig\. \d+:", flat)) == len(captions), "the PDF has other figures than the HTML"
    images = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    count = len(images.splitlines()) - 2  # two header lines
    assert count >= len(captions), f"{count} images in the PDF for {len(captions)} figures"


def test_equations_have_the_html_numbers(layout, pages):
    html = {label: number for prose in pages.values() for label, number in prose.equations.items()}
    assert len(html) >= 30, f"only {len(html)} numbered equations found in the HTML"
    aux = (LATEX / f"{NAME}.aux").read_text()
    latex = {
        label: f"({number})" for label, number in re.findall(r"\\newlabel\{equation:[^:]+:([^}]+)\}\{\{([^}]*)\}", aux)
    }
    differ = {label: (number, latex.get(label)) for label, number in html.items() if latex.get(label) != number}
    assert not differ, f"equation numbers (HTML, PDF) that differ: {differ}"
    assert len(latex) == len(html), f"the PDF numbers {sorted(set(latex) - set(html))}, which the HTML does not"
    # what the page shows: each number at the right margin, in order, and none beyond the HTML's last
    printed = [int(n) for n in re.findall(r"\s{4}\((\d+)\)[ \t]*$", layout, re.M)]
    last = max(int(number.strip("()")) for number in html.values())
    assert printed == sorted(printed) and max(printed) == last, f"equation numbers in the PDF: {printed}"
    assert len(printed) >= 0.9 * last, f"only {len(printed)} of {last} equation numbers found at the margin"


def test_bibliography_lists_every_work_of_the_html(text, html_dir):
    html_labels = set()
    for page in toc_pages():
        html_labels |= set(
            re.findall(
                r'<span class="label"><span class="fn-bracket">\[</span>([^<]+)<',
                (html_dir / f"{page}.html").read_text(),
            )
        )
    assert len(html_labels) >= 10, f"only {len(html_labels)} works in the HTML's bibliography"
    bibliography = text[text.rindex("Bibliography") - 20000 :] if "Bibliography" in text else ""
    missing = sorted(label for label in html_labels if f"[{label}]" not in text)
    assert bibliography and not missing, f"works of the HTML's bibliography not in the PDF: {missing}"
