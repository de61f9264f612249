"""Sphinx extension: pages that a browser loads without console errors (the browser test checks this).

- sphinx-thebe, which Jupyter Book 1 always loads, registers its inline
  configuration script each time the environment is read, so a full build
  carries it twice and the browser reports "Identifier 'THEBE_JS_URL' has
  already been declared".  Keep the first copy of every script.
- pydata-sphinx-theme starts a first-time visitor in the theme mode given by
  the template variable ``default_mode``; Jupyter Book leaves it empty, which
  the theme's script logs as an error ("Got invalid theme mode").  Default it to
  "auto" (follow the system setting).
- Progress bars of flatbook's sweeps would print into the pages: the kernels
  that execute the chapters inherit ``FLATBOOK_PROGRESS=off`` from the build
  (unless the builder set it otherwise).
"""

import os


def _script_key(script) -> tuple:
    """What a script tag loads or runs (an inline script's file name is None or '', by who added it)."""
    attributes = getattr(script, "attributes", {}) or {}
    return getattr(script, "filename", str(script)) or "", tuple(sorted((k, str(v)) for k, v in attributes.items()))


def keep_first_copy_of_each_script(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def default_theme_mode(app, pagename, templatename, context, doctree):
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


def setup(app):
    os.environ.setdefault("FLATBOOK_PROGRESS", "off")
    app.connect("html-page-context", default_theme_mode)
    app.connect("html-page-context", keep_first_copy_of_each_script, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
