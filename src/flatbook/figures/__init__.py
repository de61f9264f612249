"""The book's figures: drawing, apart from computing, each figure declared next to the function that draws it.

From a figure id on a page, e.g. ``ch3-gap``:

- the function that **draws** it is the one decorated with ``@figure`` and that
  id in ``flatbook/figures/`` (here ``flatbook.figures.bad_interpolators.plot_gap``);
- the function that **computes** its tables is ``run`` of the experiment that
  decorator names (here ``flatbook.experiments.bad_interpolators.run``).

``flatbook figure --list`` prints both for every id.  One drawing module per
experiment, with the experiment's name; :mod:`.style` is the one style they
share.  Chapters show a figure with ``plot(figure_id, tables)`` and, under it, the code that draws it
with ``drawing_code(figure_id)`` (a collapsed block); the command
``flatbook figure ID --scale S`` regenerates it with :func:`~flatbook.figures.saving.make` (PNG, SVG, PDF
and a JSON sidecar with its provenance).  Nothing here is part of the sweep
cache's key: editing a drawing or the style never recomputes a sweep.
"""

from __future__ import annotations

# Importing the drawing modules registers their figures (in the book's order, whatever the import order).
from . import (  # noqa: F401
    bad_interpolators,
    convex_dual,
    flattest_generalise,
    mirror_flow,
    paper_experiments,
    symmetry_paradox,
    training_flatness,
)
from .registry import REGISTRY, DrawingCode, FigureSpec, drawing_code, figure, get_spec, plot
from .saving import make

__all__ = ["REGISTRY", "DrawingCode", "FigureSpec", "drawing_code", "figure", "get_spec", "make", "plot"]
