"""Sphinx extension: the PDF of the whole book, numbered as the HTML is, and linked from every HTML page.

``scripts/build_pdf.sh`` builds that PDF after the HTML (Jupyter Book's LaTeX builder, from the HTML
build's Sphinx environment) and copies it to the site's root under the LaTeX document's name
(``latex.latex_documents.targetname`` in ``_config.yml``: ``flatbook.tex`` gives ``flatbook.pdf``).

HTML: each page gets a header button "PDF" and an entry in its download menu, both linking that file; a
page's own ".pdf" entry (the browser's print dialog) stays as sphinx-book-theme made it.

LaTeX, so that the PDF shows what the HTML shows:

- (``numfig_secnum_depth: 0`` in ``_config.yml``, not here: figures and equations are numbered through the
  whole book, (1) to (N), as on the HTML pages, not per chapter.  Set for both builders, since a value the
  LaTeX build changed would make the next HTML build read, and execute, every chapter again.)
- ``[text]{#id}`` spans (the notation page's symbols) become link targets: Sphinx's LaTeX writer drops the
  id of an inline node, and every "symbol → notation" link of the chapters would lead nowhere;
- each chapter's first section carries its title as sphinx-proof looks it up (lower-cased, after smart
  quotes): without it a lemma in a chapter whose title has an apostrophe loses its number and its label;
- in code (the docstrings' code blocks and literals) a character the monospaced font lacks is written as
  ``MONOSPACE_FALLBACK`` says: XeLaTeX would drop it silently (tests/test_pdf.py reads LaTeX's log for any
  other missing glyph).  FreeMono has every other character the book uses; FreeSerif, for the prose, all.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform

LABEL = "download-book-pdf-button"
#: characters FreeMono lacks → what code shows instead in the PDF
MONOSPACE_FALLBACK = {"ᵀ": "^T"}
#: nodes LaTeX sets in the monospaced font
MONOSPACED = (nodes.literal, nodes.literal_block, nodes.doctest_block, addnodes.desc_signature)
TOOLTIP = "Download the whole book as a PDF"


def pdf_name(app) -> str:
    """The file name of the book's PDF: the first LaTeX document's, with .pdf for .tex."""
    documents = app.config.latex_documents
    if not documents:
        raise ValueError("latex_documents is empty: set latex.latex_documents.targetname in _config.yml")
    return str(PurePosixPath(documents[0][1]).with_suffix(".pdf"))


def add_pdf_links(app, pagename, templatename, context, doctree):
    """After sphinx-book-theme's header buttons (priority 501): a button, and an entry in the download menu."""
    buttons = context.get("header_buttons")
    if buttons is None or app.builder.format != "html":
        return
    url = context["pathto"](pdf_name(app), 1)
    link = {"type": "link", "url": url, "tooltip": TOOLTIP, "icon": "fas fa-book", "label": LABEL}
    for button in buttons:
        if button.get("label") == "download-buttons":
            button["buttons"].append({**link, "text": "book .pdf"})
    buttons.insert(0, {**link, "text": "PDF"})


class LatexFixes(SphinxPostTransform):
    """Link targets for inline ids, the chapter titles sphinx-proof looks for, and code without glyphs the
    monospaced font lacks (see the module docstring)."""

    default_priority = 5  # before sphinx-proof and the writer
    builders = ("latex",)

    def run(self, **kwargs) -> None:
        for span in list(self.document.findall(nodes.inline)):
            for anchor in span["ids"]:
                span.parent.insert(span.parent.index(span), nodes.target("", "", refid=anchor))
        for section in self.document.findall(nodes.section):
            docname = section.get("docname")
            if docname in self.env.titles:
                title = self.env.titles[docname].astext().lower()
                if title not in section["names"]:
                    section["names"].append(title)
        fallback = str.maketrans(MONOSPACE_FALLBACK)
        for code in self.document.findall(lambda node: isinstance(node, MONOSPACED)):
            for text in list(code.findall(nodes.Text)):
                if text.translate(fallback) != text:
                    text.parent.replace(text, nodes.Text(text.translate(fallback)))
            if isinstance(code, nodes.FixedTextElement):  # a code block is highlighted from its source
                code.rawsource = code.rawsource.translate(fallback)


def setup(app):
    app.connect("html-page-context", add_pdf_links, priority=502)
    app.add_post_transform(LatexFixes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
