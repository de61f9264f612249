"""One figure style for the whole book: colour-blind-safe colours, sizes for the book's column.

Plot functions build figures with :func:`new_figure` and draw inside
:func:`book_style`.  The figure is made by pyplot (so that Jupyter's own
backend displays it when a cell returns it) and closed at once, so pyplot keeps
no state and a cell that returns it shows it exactly once.  No backend is forced.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.rcsetup import cycler
from matplotlib.ticker import NullFormatter

from ..errors import FlatbookInputError

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

__all__ = [
    "book_style",
    "new_figure",
    "new_panels",
    "PANELS_PER_ROW",
    "legend_below",
    "no_minor_labels",
    "finish_panels",
]

#: Okabe & Ito (2008) palette, safe for the common colour-vision deficiencies.
PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "black": "#000000",
}
#: Colours that mean the same thing in every chapter.
ROLE = {
    "good": PALETTE["blue"],
    "bad": PALETTE["vermillion"],
    "bound": PALETTE["black"],
    "relu": PALETTE["blue"],
    "leaky_relu": PALETTE["green"],
    "quadratic": PALETTE["orange"],
    "relu_power": PALETTE["purple"],
}
#: How activations are named in titles and legends.
DISPLAY_NAME = {"relu": "ReLU", "leaky_relu": "LeakyReLU", "quadratic": "quadratic", "relu_power": "ReLU$^c$"}
COLUMN_WIDTH = 6.4  # inches: the text column of the book at 100 % zoom
PANELS_PER_ROW = 3  # the most panels side by side that stay readable at the column width

RC: dict[RcKeyType, Any] = {
    "axes.prop_cycle": cycler(color=list(PALETTE.values())),
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "savefig.dpi": 200,
    "figure.dpi": 110,
}


@contextmanager
def book_style():
    """Matplotlib settings of the book, for the duration of a ``with`` block."""
    with mpl.rc_context(RC):
        yield


def new_figure(ncols: int = 1, nrows: int = 1, height: float = 3.0, **subplot_kw):
    """A (figure, axes) pair at the book's column width, laid out with constrained layout."""
    with book_style():
        fig = plt.figure(figsize=(COLUMN_WIDTH, height), layout="constrained")
        plt.close(fig)
        axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig, axes.ravel()


def new_panels(count: int, row_height: float = 3.0, **subplot_kw):
    """``count`` panels in rows of at most ``PANELS_PER_ROW`` at the column width, each row ``row_height``
    inches high: a (figure, axes) pair like :func:`new_figure`'s with exactly ``count`` axes (the last row's
    unused places are left empty)."""
    if count < 1:
        raise FlatbookInputError(f"a figure needs at least one panel, got count = {count}.")
    rows = math.ceil(count / PANELS_PER_ROW)
    fig, axes = new_figure(ncols=min(count, PANELS_PER_ROW), nrows=rows, height=row_height * rows, **subplot_kw)
    for ax in axes[count:]:
        fig.delaxes(ax)
    return fig, axes[:count]


def legend_below(fig, axes, ncol: int = 3) -> None:
    """One legend for the whole figure, under the panels (handles of the first axes)."""
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol)


def no_minor_labels(*axes) -> None:
    """Drop the labels of minor ticks (they crowd log axes at the column width)."""
    for ax in axes:
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())


def finish_panels(fig, axes, ylabel: str, legend_ncol: int | None = None) -> None:
    """The common ending of a row of panels: y label on the first, legend under all, no minor labels."""
    axes[0].set_ylabel(ylabel)
    if legend_ncol:
        legend_below(fig, axes, ncol=legend_ncol)
    no_minor_labels(*axes)
