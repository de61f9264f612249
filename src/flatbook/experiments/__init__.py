"""Experiments: one module per chapter experiment, each computing ``run(config) -> tables``.

A *table* is a list of rows, each a dict of plain values (str, int, float),
so results are easy to cache, compare and print (:mod:`flatbook.tables` selects,
groups and summarises them).  Each module holds the computing only: a frozen
``Config`` dataclass, ``CONFIGS`` for the three scales, the point functions the
sweep runner (:mod:`.runner`) caches, ``run`` and the statistics of its
tables, ``CHAPTER`` (the chapter that shows it) and ``VERSION`` (bump it when
the results change meaning without a change in the code; see :mod:`.runner`).
Its figures are drawn by the namesake module in :mod:`flatbook.figures`.
The three scales:

- ``smoke``: seconds, for the tests;
- ``book``: the default; every chapter within 90 s on two CPU cores;
- ``paper``: the sizes a paper would print (GPU-sized).

The scale of a chapter comes from ``$FLATBOOK_SCALE`` (default ``book``).
"""

from __future__ import annotations

import os

from ..errors import FlatbookInputError, did_you_mean

__all__ = ["SCALES", "current_scale", "config_for"]

#: the scales every experiment has a config for (see above)
SCALES = ("smoke", "book", "paper")


def current_scale() -> str:
    """``$FLATBOOK_SCALE`` if set (one of :data:`SCALES`, case ignored), else ``"book"``."""
    scale = os.environ.get("FLATBOOK_SCALE", "book").strip().lower() or "book"
    if scale not in SCALES:
        raise FlatbookInputError(f"FLATBOOK_SCALE={scale!r} is not a scale; choose one of {', '.join(SCALES)}.")
    return scale


def config_for(configs: dict, scale: str | None = None):
    """The config of ``scale`` (default: :func:`current_scale`) from a module's ``CONFIGS``."""
    scale = current_scale() if scale is None else scale
    if scale not in configs:
        raise FlatbookInputError(
            f"unknown scale {scale!r}{did_you_mean(scale, configs)}; choose one of {', '.join(configs)}."
        )
    return configs[scale]
