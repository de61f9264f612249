"""Sphinx extension: every chapter's download menu offers its executed notebook, readable in plain Jupyter.

MyST-NB saves each executed chapter to ``_build/jupyter_execute/<page>.ipynb``.  Its Markdown still holds
the book's MyST: ``{glue:text}`` roles (JupyterLab renders none of them), ``{eq}``/``{doc}``/``{ref}``
references, ``(label)=`` targets and ``:::{exercise}`` blocks.  The copy offered for download is rewritten
for a reader without the book's tool chain:

- every glued value is written in, formatted as the page shows it;
- references become the text the page shows (equation and figure numbers, titles, "Author (Year)"),
  linked to the published book (``html.baseurl``);
- equation labels become ``\\tag{N}``, exercises and lemmas bold paragraphs, solutions ``<details>``;
- a first cell installs flatbook when the kernel lacks it.

sphinx-book-theme lists a page's ``.ipynb`` in the download menu when the page context has
``ipynb_source``; this sets it, and writes the copy next to the page's source in ``_sources/``.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path, PurePosixPath

#: a MyST role: {name}`content`
ROLE = re.compile(r"\{([a-z:-]+)\}`([^`]*)`")
#: "text <target>" inside a reference role
EXPLICIT = re.compile(r"^(.*?)\s*<([^>]+)>$", re.S)
DIRECTIVE = re.compile(r"^:::\{([a-z:-]+)\}[ \t]*([^\n]*)\n((?::[\w-]+:[^\n]*\n)*)(.*?)^:::[ \t]*$", re.S | re.M)
DISPLAY_LABEL = re.compile(r"\n([ \t]*)\$\$[ \t]*\((eq-[\w-]+)\)")
TARGET = re.compile(r"^\([\w-]+\)=[ \t]*\n", re.M)
INSTALL_CELL = (
    "# Run this first in a fresh environment: it installs flatbook (and what the chapters need) if it is missing.\n"
    "import importlib.util, subprocess, sys\n\n"
    'if importlib.util.find_spec("flatbook") is None:\n'
    '    subprocess.check_call([sys.executable, "-m", "pip", "install", "flatbook[book] @ git+{repository}"])'
)


class Resolver:
    """The text and the link of each reference, as the built page shows them."""

    def __init__(self, app, docname: str, glue: dict):
        self.env, self.docname, self.glue = app.env, docname, glue
        self.base = (app.config.html_baseurl or "").rstrip("/") + "/"
        self.citations = _citations(tuple(str(Path(app.srcdir) / bib) for bib in app.config.bibtex_bibfiles))

    def _doc(self, target: str) -> str:
        if target.startswith("/"):
            return target.lstrip("/")
        return str(PurePosixPath(self.docname).parent / target)

    def _url(self, docname: str, anchor: str = "") -> str:
        return f"{self.base}{docname}.html" + (f"#{anchor}" if anchor else "")

    def _number(self, docname: str, kind: str, anchor: str) -> str | None:
        """The number the page shows for a figure or equation ("3", or "2.1" with section numbers)."""
        number = self.env.toc_fignumbers.get(docname, {}).get(kind, {}).get(anchor)
        return ".".join(map(str, number)) if number else None

    def role(self, match: re.Match) -> str:
        name, content = match.groups()
        if name.startswith("glue"):
            from myst_nb.core.variables import format_plain_text

            key, _, spec = content.partition(":")
            return format_plain_text(self.glue[key]["data"]["text/plain"], spec or "s")
        explicit = EXPLICIT.match(content)
        text, target = (explicit.group(1), explicit.group(2)) if explicit else (None, content)
        if name == "eq":
            docname = self.env.domaindata["math"]["objects"].get(target, (None,))[0]
            number = docname and self._number(docname, "displaymath", f"equation-{target}")
            if number:
                return f"[({number})]({self._url(docname, f'equation-{target}')})"
        elif name == "doc":
            docname = self._doc(target)
            return f"[{text or self.env.titles[docname].astext()}]({self._url(docname)})"
        elif name == "prf:ref":
            proof = getattr(self.env, "proof_list", {}).get(target)
            if proof:
                shown = text or proof["realtype"].capitalize()
                return f"[{shown}]({self._url(proof['docname'], target)})"
        elif name in ("ref", "numref"):
            labels = self.env.domaindata["std"]["labels"]
            if target in labels:
                docname, anchor, title = labels[target]
                number = self._number(docname, "figure", anchor)
                shown = text or (f"Fig. {number}" if name == "numref" and number else title)
                return f"[{shown}]({self._url(docname, anchor)})"
        elif name.startswith("cite"):
            keys = [key.strip() for key in target.split(",")]
            found = [self.citations.get(key, (key, "")) for key in keys]
            if name == "cite:t":
                return "; ".join(f"{who} ({year})" for who, year in found)
            return "(" + "; ".join(f"{who}, {year}" for who, year in found) + ")"
        return text or target

    def markdown(self, source: str) -> str:
        source = TARGET.sub("", source)
        source = DISPLAY_LABEL.sub(lambda m: f"\n{m[1]}\\tag{{{self._equation_number(m[2])}}}\n{m[1]}$$", source)
        source = DIRECTIVE.sub(self._directive, source)
        return ROLE.sub(self.role, source)

    def _equation_number(self, label: str) -> str:
        return self._number(self.docname, "displaymath", f"equation-{label}") or label

    def _directive(self, match: re.Match) -> str:
        name, title, _options, body = match.groups()
        body = DIRECTIVE.sub(self._directive, body.strip())
        if name == "solution":
            return f"<details><summary>Solution</summary>\n\n{body}\n\n</details>"
        if name == "prf:proof":
            return f"*Proof.* {body} ∎"
        kind = name.removeprefix("prf:").capitalize()
        return f"**{kind}{f' ({title})' if title else ''}.** {body}"


@functools.lru_cache(maxsize=1)
def _citations(bibfiles: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """bibtex key → ("Surname", "Year") or ("Surname et al.", "Year"), from the book's .bib files (read once)."""
    from pybtex.database import parse_file

    found = {}
    for bib in bibfiles:
        for key, entry in parse_file(bib).entries.items():
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            surname = " ".join(people[0].last_names) if people else key
            if len(people) == 2:
                surname += " and " + " ".join(people[1].last_names)
            who = surname + (" et al." if len(people) > 2 else "")
            found[key] = (re.sub(r"[{}]", "", who), entry.fields.get("year", ""))
    return found


def readable_notebook(notebook: dict, resolver: Resolver, repository: str) -> dict:
    """The executed notebook with its MyST Markdown resolved (see the module docstring) and an install cell."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = resolver.markdown(source)
    install = {
        "cell_type": "code",
        "execution_count": None,
        "id": "install-flatbook",
        "metadata": {},
        "outputs": [],
        "source": INSTALL_CELL.format(repository=repository),
    }
    notebook["cells"].insert(0, install)
    return notebook


def _executed(app, pagename) -> Path:
    return Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"


def offer_notebook(app, pagename, templatename, context, doctree):
    """Before sphinx-book-theme builds its download menu (priority 501): list the notebook in it."""
    if _executed(app, pagename).is_file():
        context["ipynb_source"] = f"{pagename}.ipynb"


def write_readable_copy(app, pagename, templatename, context, doctree):
    """After sphinx-book-theme's launch buttons (priority 501), which copy the raw notebook to the same place."""
    executed = _executed(app, pagename)
    if not executed.is_file():
        return  # not a notebook page (or not executed)
    glue_file = executed.with_name(f"{Path(pagename).name}.glue.json")
    glue = json.loads(glue_file.read_text()) if glue_file.is_file() else {}
    repository = app.config.html_theme_options.get("repository_url", "")
    notebook = readable_notebook(json.loads(executed.read_text()), Resolver(app, pagename, glue), repository)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


def setup(app):
    app.connect("html-page-context", offer_notebook, priority=450)
    app.connect("html-page-context", write_readable_copy, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
