"""What the benchmarks share: a timer, the header that says where the numbers come from, the d:n argument and a
fixed setting of the solver's cell ascent."""

from __future__ import annotations

import argparse
import contextlib
import math
import platform
import time

import torch

import flatbook.column_generation as column_generation
from flatbook.backend import default_device


def timed(fn, *args, clock=time.perf_counter):
    """(fn(*args), seconds on ``clock``): wall time by default, ``time.process_time`` for this process's CPU time
    (a single-threaded solve timed beside other work)."""
    start = clock()
    value = fn(*args)
    return value, clock() - start


def fastest(fn, *args, repeats: int = 5, budget: float = math.inf):
    """(fn(*args) of the first run, the fastest of up to ``repeats`` runs in seconds): the least disturbed
    measurement of a short computation.  Runs stop early once ``budget`` seconds are spent, so a long
    solve is timed once."""
    value, best = timed(fn, *args)
    spent = best
    for _ in range(repeats - 1):
        if spent >= budget:
            break
        seconds = timed(fn, *args)[1]
        best, spent = min(best, seconds), spent + seconds
    return value, best


def instance(text: str) -> tuple[int, int]:
    """A command-line instance 'd:n' as two ints, d ≥ 2 and n ≥ 1 (an argparse type)."""
    try:
        d, n = (int(part) for part in text.split(":"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"an instance is d:n, e.g. 8:64, got {text!r}") from exc
    if d < 2 or n < 1:
        raise argparse.ArgumentTypeError(f"need d >= 2 and n >= 1, got {text!r}")
    return d, n


def header(extra: str = "") -> str:
    """Machine, threads, torch version and device, as a comment line for the output."""
    return (
        f"# {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, device {default_device()}" + (f", {extra}" if extra else "")
    )


@contextlib.contextmanager
def cell_ascent_fixed(starts: int | None = None, moves: int | None = None):
    """Within the block, the pricing's cell ascent starts from ``starts`` best endpoints and as many random starts,
    ``moves`` moves each, at every effort level (``column_generation.CELL_ASCENT_STARTS`` and ``CELL_ASCENT_STEPS``,
    which by default grow with the level); None keeps the default."""
    original = column_generation.CELL_ASCENT_STARTS, column_generation.CELL_ASCENT_STEPS
    levels = len(original[0])
    try:
        if starts is not None:
            column_generation.CELL_ASCENT_STARTS = (starts,) * levels
        if moves is not None:
            column_generation.CELL_ASCENT_STEPS = (moves,) * levels
        yield
    finally:
        column_generation.CELL_ASCENT_STARTS, column_generation.CELL_ASCENT_STEPS = original
