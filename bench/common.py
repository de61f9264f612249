"""What both benchmarks share: a timer and the header that says where the numbers come from."""

from __future__ import annotations

import math
import platform
import time

import torch

from flatbook.backend import default_device


def timed(fn, *args):
    """(fn(*args), seconds)."""
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start


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


def header(extra: str = "") -> str:
    """Machine, threads, torch version and device, as a comment line for the output."""
    return (
        f"# {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, device {default_device()}" + (f", {extra}" if extra else "")
    )
