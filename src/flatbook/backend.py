"""Array backend: one dtype (float64) and one device for the whole package.

The device is chosen once per call of :func:`default_device`: the environment
variable ``FLATBOOK_DEVICE`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...) if set,
else CUDA when present, else the CPU.  Every public function converts its
inputs with :func:`as_tensor`, which puts arrays and tensors alike on that
device and rejects NaN/inf and wrong shapes with a message that names the
argument.
"""

from __future__ import annotations

import functools
import numbers
import os

import numpy as np
import torch

from .errors import FlatbookInputError

__all__ = [
    "DTYPE",
    "default_device",
    "as_tensor",
    "check_data",
    "check_binary_labels",
    "is_count",
    "row_chunks",
    "lstsq_driver",
]

#: every tensor of the package is float64
DTYPE = torch.float64


def default_device() -> torch.device:
    """The device flatbook computes on: ``$FLATBOOK_DEVICE``, else CUDA if available, else CPU."""
    requested = os.environ.get("FLATBOOK_DEVICE", "").strip()
    if requested:
        return _requested_device(requested)
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


@functools.lru_cache(maxsize=8)
def _requested_device(requested: str) -> torch.device:
    """``$FLATBOOK_DEVICE`` as a torch device that can hold a tensor, or a clear error."""
    try:
        device = torch.device(requested)
    except RuntimeError as exc:
        raise FlatbookInputError(
            f"FLATBOOK_DEVICE={requested!r} is not a torch device; use e.g. 'cpu', 'cuda' or 'cuda:0'."
        ) from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise FlatbookInputError(
            f"FLATBOOK_DEVICE={requested!r} asks for CUDA but torch sees no GPU; "
            "unset FLATBOOK_DEVICE or install a CUDA build of torch (see README)."
        )
    if device.type == "meta":
        raise FlatbookInputError(f"FLATBOOK_DEVICE={requested!r} holds no data; use e.g. 'cpu' or 'cuda'.")
    try:
        torch.empty(1, dtype=DTYPE, device=device)
    except (RuntimeError, AssertionError) as exc:  # a device this build or machine lacks, e.g. 'cuda:7' or 'mps'
        raise FlatbookInputError(
            f"FLATBOOK_DEVICE={requested!r} is not available here ({str(exc).splitlines()[0]}); "
            "unset FLATBOOK_DEVICE or name a device torch can use, e.g. 'cpu' or 'cuda:0'."
        ) from exc
    return device


def as_tensor(value, name: str, *, ndim: int | None = None, device=None) -> torch.Tensor:
    """Convert ``value`` to a float64 tensor on ``device`` (default: :func:`default_device`, for tensors too),
    checking shape and finiteness.

    Raises :class:`~flatbook.errors.FlatbookInputError` naming ``name`` if ``value`` has the wrong
    number of dimensions or contains NaN or inf.
    """
    if value is None:
        raise FlatbookInputError(f"{name} is None; pass an array or tensor.")
    device = device or default_device()
    if isinstance(value, torch.Tensor):
        tensor = value.to(dtype=DTYPE, device=device)
    else:
        tensor = torch.as_tensor(np.asarray(value, dtype=np.float64), dtype=DTYPE, device=device)
    if ndim is not None and tensor.ndim != ndim:
        raise FlatbookInputError(f"{name} must have {ndim} dimension(s), got shape {tuple(tensor.shape)}.")
    if not torch.isfinite(tensor).all():
        bad = int((~torch.isfinite(tensor)).sum())
        raise FlatbookInputError(
            f"{name} contains {bad} NaN or inf entr{'y' if bad == 1 else 'ies'}; "
            "clean the input (e.g. drop those rows) before calling flatbook."
        )
    return tensor


def check_data(X, y, d: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a data set: ``X`` of shape (n, d) and ``y`` of shape (n,), finite, float64."""
    X = as_tensor(X, "X", ndim=2)
    y = as_tensor(y, "y", ndim=1, device=X.device)
    if X.shape[0] != y.shape[0]:
        raise FlatbookInputError(
            f"X has {X.shape[0]} rows but y has {y.shape[0]} entries; they must describe the same n samples."
        )
    if X.shape[0] == 0:
        raise FlatbookInputError("X and y are empty; pass at least one sample.")
    if d is not None and X.shape[1] != d:
        raise FlatbookInputError(
            f"X has {X.shape[1]} columns but the network's inner weights have d = {d}; the input dimension must match."
        )
    return X, y


def check_binary_labels(y: torch.Tensor, why: str) -> None:
    """Raise unless every label is −1 or +1; ``why`` names what needs them (e.g. "the logistic loss")."""
    if not bool(((y == 1) | (y == -1)).all()):
        raise FlatbookInputError(
            f"{why} needs labels in {{-1, +1}}; got values such as {sorted(set(y.unique().tolist()))[:5]}. "
            "Map the classes to ±1 first."
        )


def is_count(value: object, minimum: int) -> bool:
    """An integer of at least ``minimum``: a Python or NumPy integer, not a bool or a float."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= minimum


def lstsq_driver(A: torch.Tensor) -> str | None:
    """The ``driver`` for ``torch.linalg.lstsq`` on A: LAPACK's SVD-based gelsd (safe when A is rank
    deficient) on the CPU; None on a GPU, where torch offers only gels."""
    return "gelsd" if A.device.type == "cpu" else None


def row_chunks(n: int, width: int, budget: int = 2**24):
    """Yield slices of ``range(n)`` so that a chunk of shape (rows, width) has at most ``budget`` entries."""
    rows = max(1, budget // max(1, width))
    for start in range(0, n, rows):
        yield slice(start, min(n, start + rows))
