"""Sphinx extension: the ``Examples`` section of a docstring, shown as a heading of the API reference.

The package's docstrings are plain reStructuredText, except that the main functions end with a
numpy-style section (``tests/test_doctests.py`` runs its ``>>>`` lines)::

    Examples
    --------
    >>> ...

A section title inside a docstring is an error in reStructuredText, so the two heading lines become a
rubric; nothing else of the docstring changes (sphinx.ext.napoleon would also reread every attribute's
description as "type: text").
"""

import re

#: a section heading of a numpy-style docstring: a name, then a line of dashes as long
HEADING = re.compile(r"^(\s*)(Examples?)\s*$")


def examples_as_rubric(app, what, name, obj, options, lines):
    for i in range(len(lines) - 1):
        match = HEADING.match(lines[i])
        underline = lines[i + 1].strip()
        if match and underline and set(underline) == {"-"} and len(underline) == len(match.group(2)):
            lines[i] = f"{match.group(1)}.. rubric:: {match.group(2)}"
            lines[i + 1] = ""


def setup(app):
    app.connect("autodoc-process-docstring", examples_as_rubric)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
