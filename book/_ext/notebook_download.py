"""Sphinx extension: every chapter's download menu offers its executed notebook, readable in plain Jupyter.

MyST-NB saves each executed chapter to ``_build/jupyter_execute/<page>.ipynb``.  Its Markdown still holds
the book's MyST: ``{glue:text}`` roles (JupyterLab renders none of them), ``{eq}``/``{doc}``/``{ref}``
references, ``(label)=`` targets and ``:::{exercise}`` blocks.  The copy offered for download is rewritten
for a reader without the book's tool chain:

- every glued value is written in, formatted as the page shows it;
- references become the text the page shows (equation and figure numbers, titles, "Author (Year)"),
  linked to the published book (``html.baseurl``);
- equation labels become ``\\tag{N}``, exercises and lemmas bold paragraphs, solutions ``<details>``;
  a ``{glue:md}`` block becomes the Markdown it shows; ``[text]{#id}`` targets become HTML anchors;
- links to a label (``[symbol](#sym-...)``) point at the published page that defines it;
- Markdown outputs (tables the code writes, which cite the book with roles) are rewritten the same way;
- a first cell installs flatbook when the kernel lacks it; where the code's Markdown outputs cite the book,
  a second cell makes a re-run show those citations as links too (an IPython formatter with the page's
  references, resolved here);
- a page that reads files of the repository (``notebook_download_files`` in the Sphinx config: page name →
  files and folders) carries them: a cell writes them next to the notebook unless they are there, so the copy runs
  outside the checkout.

sphinx-book-theme lists a page's ``.ipynb`` in the download menu when the page context has
``ipynb_source``; this sets it, and writes the copy next to the page's source in ``_sources/``.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import re
import zlib
from pathlib import Path, PurePosixPath

#: a MyST role: {name}`content`
ROLE = re.compile(r"\{([a-z:-]+)\}`([^`]*)`")
#: "text <target>" inside a reference role
EXPLICIT = re.compile(r"^(.*?)\s*<([^>]+)>$", re.S)
DIRECTIVE = re.compile(r"^:::\{([a-z:-]+)\}[ \t]*([^\n]*)\n((?::[\w-]+:[^\n]*\n)*)(.*?)^:::[ \t]*$", re.S | re.M)
DISPLAY_LABEL = re.compile(r"\n([ \t]*)\$\$[ \t]*\((eq-[\w-]+)\)")
TARGET = re.compile(r"^\([\w-]+\)=[ \t]*\n", re.M)
#: a ```{glue:md} key``` block (or {glue}, {glue:text}), with its options
GLUE_BLOCK = re.compile(r"^```\{glue(?::\w+)?\}[ \t]+(\S+)[ \t]*\n(?::[\w-]+:[^\n]*\n)*```[ \t]*$", re.M)
#: an inline span with an id: [text]{#id}
ID_SPAN = re.compile(r"\[([^\]\n]*)\]\{#([\w-]+)\}")
#: a Markdown link to a label: [text](#label)
LABEL_LINK = re.compile(r"\]\(#([\w-]+)\)")
#: the ids of the code cells this extension puts before the chapter's own (install, references, files)
ADDED_CELLS = INSTALL_ID, REFERENCES_ID, FILES_ID = ("install-flatbook", "book-references", "repository-files")
INSTALL_CELL = (
    "# Run this first in a fresh environment: it installs flatbook (and what the chapters need) if it is missing.\n"
    "import importlib.util, subprocess, sys\n\n"
    'if importlib.util.find_spec("flatbook") is None:\n'
    '    subprocess.check_call([sys.executable, "-m", "pip", "install", "flatbook[book] @ git+{repository}"])'
)
REFERENCES_CELL = (
    "# The tables this notebook's code writes cite the book with MyST roles, which only the book renders:\n"
    "# show each as the link the book shows.\n"
    "import re\n\n"
    "from IPython import get_ipython\n"
    "from IPython.display import Markdown\n\n"
    "BOOK_REFERENCES = {references}\n\n"
    'get_ipython().display_formatter.formatters["text/markdown"].for_type(\n'
    '    Markdown, lambda md: re.sub(r"{role}", lambda m: BOOK_REFERENCES.get(m[0], m[0]), md.data)\n'
    ")"
)
FILES_CELL = (
    "# The files of the repository this page reads ({folders}), written next to the notebook unless they are there.\n"
    "import base64, zlib\n"
    "from pathlib import Path\n\n"
    "FILES = {files}\n\n"
    "for name, packed in FILES.items():\n"
    "    path = Path(name)\n"
    "    if not path.exists():\n"
    "        path.parent.mkdir(parents=True, exist_ok=True)\n"
    "        path.write_bytes(zlib.decompress(base64.b64decode(packed)))"
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
            text = self.glue[key]["data"]["text/plain"]
            try:
                return format_plain_text(text, spec or "s")
            except (ValueError, SyntaxError) as exc:
                raise ValueError(
                    f"{self.docname}: the glued value {key!r} is {text!r}, which the format {spec!r} cannot format: "
                    "glue a plain Python value (float(x), int(x)), not a NumPy or torch scalar."
                ) from exc
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
        source = GLUE_BLOCK.sub(self._glue_block, source)
        source = TARGET.sub("", source)
        source = DISPLAY_LABEL.sub(lambda m: f"\n{m[1]}\\tag{{{self._equation_number(m[2])}}}\n{m[1]}$$", source)
        source = DIRECTIVE.sub(self._directive, source)
        source = ID_SPAN.sub(lambda m: f'<a id="{m[2]}"></a>{m[1]}', source)
        source = LABEL_LINK.sub(self._label_link, source)
        return ROLE.sub(self.role, source)

    def _glue_block(self, match: re.Match) -> str:
        """A glued block: its Markdown (MyST, resolved like the cell around it) or, failing that, its text."""
        data = self.glue[match[1]]["data"]
        return data.get("text/markdown") or data["text/plain"]

    def _label_link(self, match: re.Match) -> str:
        """](#label) → ](the published page's address#anchor), for a label Sphinx knows; unchanged otherwise."""
        std = self.env.domaindata["std"]
        found = std["labels"].get(match[1]) or std["anonlabels"].get(match[1])
        return f"]({self._url(found[0], found[1])})" if found else match[0]

    def _equation_number(self, label: str) -> str:
        return self._number(self.docname, "displaymath", f"equation-{label}") or label

    def _directive(self, match: re.Match) -> str:
        name, title, options, body = match.groups()
        body = DIRECTIVE.sub(self._directive, body.strip())
        if name == "solution":
            return f"<details><summary>Solution</summary>\n\n{body}\n\n</details>"
        if name == "admonition" and "dropdown" in options:  # a collapsed note: collapsed in Jupyter too
            return f"<details><summary>{title}</summary>\n\n{body}\n\n</details>"
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


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def _code_cell(cell_id: str, source: str) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id,
        "metadata": {},
        "outputs": [],
        "source": source,
    }


def packed_files(root: Path, paths: list[str]) -> dict[str, str]:
    """Every file named, or under a folder named, in ``paths`` (relative to ``root``) → its bytes,
    zlib-compressed and base64-encoded, keyed by its path relative to the top folder, where the chapters run
    (``book/paper_scale/results/x.json.gz`` → ``paper_scale/results/x.json.gz``)."""
    files = {}
    for name in paths:
        base = root / name
        if not (base.is_dir() or base.is_file()):
            raise ValueError(f"notebook_download_files names {name!r}, which is no file or folder under {root}")
        top = root / PurePosixPath(name).parts[0]
        for path in [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file()):
            packed = base64.b64encode(zlib.compress(path.read_bytes(), 9)).decode("ascii")
            files[path.relative_to(top).as_posix()] = packed
    return files


def readable_notebook(notebook: dict, resolver: Resolver, repository: str, files: dict[str, str] | None = None) -> dict:
    """The executed notebook with its MyST Markdown resolved (see the module docstring) and an install cell;
    ``files`` (from :func:`packed_files`) are written by a cell of their own."""
    notebook = copy.deepcopy(notebook)
    cited = {}  # role in a Markdown output → what the page shows for it
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = resolver.markdown(_text(cell["source"]))
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/markdown" in data:
                markdown = _text(data["text/markdown"])
                cited.update((m[0], resolver.markdown(m[0])) for m in ROLE.finditer(markdown))
                data["text/markdown"] = resolver.markdown(markdown)
    cells = [_code_cell(INSTALL_ID, INSTALL_CELL.format(repository=repository))]
    if cited:
        references = "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in sorted(cited.items())) + "}"
        cells.append(_code_cell(REFERENCES_ID, REFERENCES_CELL.format(references=references, role=ROLE.pattern)))
    if files:
        listing = "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in files.items()) + "}"
        folders = ", ".join(sorted({name.split("/")[0] + "/" for name in files}))
        cells.append(_code_cell(FILES_ID, FILES_CELL.format(folders=folders, files=listing)))
    notebook["cells"][:0] = cells
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
    folders = app.config.notebook_download_files.get(pagename, [])
    files = packed_files(Path(app.srcdir), folders) if folders else None
    notebook = readable_notebook(json.loads(executed.read_text()), Resolver(app, pagename, glue), repository, files)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


def setup(app):
    # page name → files and folders of the repository (relative to the book's root) its downloaded notebook carries
    app.add_config_value("notebook_download_files", {}, "html", dict)
    app.connect("html-page-context", offer_notebook, priority=450)
    app.connect("html-page-context", write_readable_copy, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
