"""Sphinx extension: the package's docstrings, read as the API page shows them.

- They write math as plain text (``Σ_j κ_j |ã_j|^p``), which reStructuredText would read as
  substitutions (``|...|``): every ``|`` outside inline literals, roles and literal blocks is escaped,
  so the text shows as written.
- They cite the book's equations as ````eq-label```` (tests/test_docstrings.py checks each exists):
  each becomes a numbered link to the equation.
"""

import re

#: inline literals ``...`` and roles :name:`...`, left as they are
PROTECTED = re.compile(r"``.+?``|:[\w:.-]+:`[^`]+`|`[^`]+`_?")


#: a book equation cited as an inline literal
EQUATION = re.compile(r"``(eq-[a-z0-9]+(?:-[a-z0-9]+)*)``")


def _escape(text: str) -> str:
    text = EQUATION.sub(r":eq:`\1`", text)
    out, last = [], 0
    for match in PROTECTED.finditer(text):
        out.append(text[last : match.start()].replace("|", r"\|"))
        out.append(match.group(0))
        last = match.end()
    out.append(text[last:].replace("|", r"\|"))
    return "".join(out)


def escape_bars(app, what, name, obj, options, lines):
    literal_indent = None  # inside a literal block (after a paragraph ending in "::") of this indentation
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if not line.strip() or indent > literal_indent:
                continue
            literal_indent = None
        lines[i] = _escape(line)
        if line.rstrip().endswith("::"):
            literal_indent = indent


def setup(app):
    app.connect("autodoc-process-docstring", escape_bars)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
