"""The figure registry: each drawing function declares its figure id where it is defined.

::

    from ..experiments import my_experiment
    from .registry import figure

    @figure("ch8-my-figure", my_experiment, "What the figure shows, in a line")
    def plot_my_figure(tables: dict) -> Figure:
        ...

in ``flatbook/figures/my_experiment.py`` registers the figure ``ch8-my-figure``:
drawn by ``plot_my_figure`` from the tables that ``my_experiment.run(config)``
computes, shown in ``my_experiment.CHAPTER`` (imported in ``flatbook/figures/__init__.py``).
The registry fills as the drawing modules are imported (``flatbook.figures``
imports them all); an id is written once in the package.
"""

from __future__ import annotations

import html
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from matplotlib.figure import Figure

from ..errors import FlatbookInputError, did_you_mean

__all__ = ["DrawingCode", "FigureSpec", "REGISTRY", "drawing_code", "figure", "get_spec", "plot"]

Draw = Callable[[dict], Figure]


@dataclass(frozen=True)
class FigureSpec:
    """One figure: its id, what computes its tables, what draws it."""

    id: str
    title: str
    #: the experiment module that computes the tables: ``run(config)``, ``CONFIGS``, ``CHAPTER``
    experiment_module: ModuleType
    #: the function that draws the figure from those tables
    draw: Draw

    @property
    def experiment(self) -> str:
        """Short name of the experiment, e.g. ``"bad_interpolators"`` (also its cache folder)."""
        return self.experiment_module.__name__.rpartition(".")[2]

    @property
    def chapter(self) -> str:
        """The chapter's source file, e.g. ``"book/03-bad-interpolators.md"``."""
        return self.experiment_module.CHAPTER

    @property
    def computed_by(self) -> str:
        """Dotted name of the function that computes the tables."""
        return f"{self.experiment_module.__name__}.run"

    @property
    def drawn_by(self) -> str:
        """Dotted name of the function that draws the figure."""
        return f"{self.draw.__module__}.{self.draw.__qualname__}"


#: every figure by id, in the book's order (by chapter; within a chapter, in the order declared)
REGISTRY: dict[str, FigureSpec] = {}


def figure(figure_id: str, experiment: ModuleType, title: str) -> Callable[[Draw], Draw]:
    """Register the decorated function as the one that draws ``figure_id`` from ``experiment.run``'s tables."""
    missing = [name for name in ("run", "CONFIGS", "CHAPTER") if not hasattr(experiment, name)]
    if missing:
        raise TypeError(
            f"figure {figure_id!r}: {experiment.__name__} is not an experiment module (it has no {', '.join(missing)})."
        )

    def register(draw: Draw) -> Draw:
        if figure_id in REGISTRY:
            raise ValueError(
                f"figure id {figure_id!r} is declared twice: by {REGISTRY[figure_id].drawn_by} "
                f"and by {draw.__module__}.{draw.__qualname__}."
            )
        REGISTRY[figure_id] = FigureSpec(figure_id, title, experiment, draw)
        ordered = sorted(REGISTRY.values(), key=lambda spec: spec.chapter)  # stable: declaration order kept
        REGISTRY.clear()
        REGISTRY.update((spec.id, spec) for spec in ordered)
        return draw

    return register


def get_spec(figure_id: str) -> FigureSpec:
    """The registry entry of ``figure_id``; an unknown id raises an error listing the valid ones."""
    if figure_id not in REGISTRY:
        raise FlatbookInputError(
            f"unknown figure id {figure_id!r}{did_you_mean(figure_id, REGISTRY)}; valid ids: {', '.join(REGISTRY)} "
            "(or run `flatbook figure --list`)."
        )
    return REGISTRY[figure_id]


def plot(figure_id: str, tables: dict) -> Figure:
    """Draw registered figure ``figure_id`` from its experiment's tables (what the chapters call)."""
    return get_spec(figure_id).draw(tables)


@dataclass(frozen=True)
class DrawingCode:
    """The source of the function that draws a figure; in a notebook or a page, a collapsed block under it."""

    figure_id: str
    drawn_by: str
    source: str

    def __str__(self) -> str:
        return f"# {self.figure_id}: drawn by {self.drawn_by}\n{self.source}"

    def _repr_html_(self) -> str:
        from pygments import highlight  # IPython's own dependency: present wherever this is displayed
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        code = highlight(self.source, PythonLexer(), HtmlFormatter(cssclass="highlight"))
        return (
            f'<details class="drawing-code"><summary>The code that draws this figure '
            f"(<code>{html.escape(self.drawn_by)}</code>, house style from <code>flatbook.figures.style</code>)"
            f"</summary>{code}</details>"
        )


def drawing_code(figure_id: str) -> DrawingCode:
    """The source of the function registered for ``figure_id``, read from the installed package (it cannot drift)."""
    spec = get_spec(figure_id)
    return DrawingCode(figure_id, spec.drawn_by, inspect.getsource(spec.draw))
