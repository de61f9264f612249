"""Sphinx extension: every chapter's download menu offers the executed notebook (.ipynb, with outputs).

MyST-NB saves each executed chapter to ``_build/jupyter_execute/<page>.ipynb``.
sphinx-book-theme lists a page's ``.ipynb`` in the download menu when the page
context has ``ipynb_source``, but sets it only when a launch service (Binder,
Colab, ...) is configured, which this offline book has none of.  This copies the
executed notebook next to the page's source in ``_sources/`` and sets it.
"""

from pathlib import Path
from shutil import copy2


def add_notebook_download(app, pagename, templatename, context, doctree):
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        return  # not a notebook page (or not executed)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    # Before sphinx-book-theme builds the header buttons (priority 501).
    app.connect("html-page-context", add_notebook_download, priority=450)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
