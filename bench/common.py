"""What both benchmarks share: a timer and the header that says where the numbers come from."""

from __future__ import annotations

import platform
import time

import torch

from flatbook.backend import default_device


def timed(fn, *args):
    """(fn(*args), seconds)."""
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start


def header(extra: str = "") -> str:
    """Machine, threads, torch version and device, as a comment line for the output."""
    return (f"# {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
            f"torch {torch.__version__}, device {default_device()}" + (f", {extra}" if extra else ""))
