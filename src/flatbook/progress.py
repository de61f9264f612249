"""Progress bars: ``tqdm.auto`` (a widget in Jupyter when ipywidgets is installed, text otherwise).

``FLATBOOK_PROGRESS=off`` silences every bar (the book build sets it, so that no bar lands in a
page); ``FLATBOOK_PROGRESS=on`` forces them; unset, a bar shows in a Jupyter kernel and on an
interactive terminal.
"""

from __future__ import annotations

import os
import sys
import warnings

from .errors import FlatbookInputError

__all__ = ["progress_bar", "progress_disabled"]


def _in_jupyter_kernel() -> bool:
    shell = sys.modules.get("IPython")
    try:
        return shell is not None and "IPKernelApp" in shell.get_ipython().config
    except AttributeError:  # IPython imported, but no shell running
        return False


def progress_disabled() -> bool | None:
    """tqdm's ``disable`` for a sweep's bar: ``$FLATBOOK_PROGRESS`` off/on, else shown in a Jupyter kernel and
    left to tqdm (shown on an interactive terminal only) elsewhere."""
    setting = os.environ.get("FLATBOOK_PROGRESS", "").strip().lower()
    if setting in ("off", "0", "false", "no"):
        return True
    if setting in ("on", "1", "true", "yes"):
        return False
    if setting:
        raise FlatbookInputError(f"FLATBOOK_PROGRESS={setting!r}: use 'on' or 'off' (or leave it unset).")
    return False if _in_jupyter_kernel() else None


def progress_bar(
    total: int, initial: int = 0, desc: str | None = None, *, leave: bool = True, show: bool | None = None
):
    """A ``tqdm.auto`` bar; ``show=None`` leaves it to :func:`progress_disabled`, True/False decide."""
    with warnings.catch_warnings():
        # tqdm.auto warns once when a kernel has no ipywidgets, then falls back to a text bar: that is fine.
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm
    disable = progress_disabled() if show is None else not show
    return tqdm(total=total, initial=initial, desc=desc, leave=leave, disable=disable)
