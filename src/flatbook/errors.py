"""Exceptions raised by flatbook.

Every error says what is wrong and what to change.  They subclass the builtin
exception a caller would expect (``ValueError`` for bad input, ``RuntimeError``
for a solver that failed), so ``except ValueError`` keeps working;
:func:`did_you_mean` adds the closest valid names to a message about an unknown one.
"""

import difflib

__all__ = [
    "FlatbookInputError",
    "InfeasibleInterpolationError",
    "UnboundedFlatnessError",
    "SolverError",
    "FlatbookWarning",
    "SolverFallbackWarning",
    "did_you_mean",
]


class FlatbookInputError(ValueError):
    """An argument has the wrong shape, type, sign or contains NaN/inf."""


class InfeasibleInterpolationError(ValueError):
    """No outer weights make the network interpolate the data (Φ a = y has no solution)."""


class UnboundedFlatnessError(ValueError):
    """The infimum of the Hessian trace over rescalings is -inf or is not attained."""


class SolverError(RuntimeError):
    """A convex solver did not reach an optimal, certified solution."""


class FlatbookWarning(UserWarning):
    """Base class of flatbook's warnings: filter them all with ``warnings.filterwarnings(..., FlatbookWarning)``."""


class SolverFallbackWarning(FlatbookWarning):
    """The fast solver could not certify its answer and a slower reference solver (Clarabel) took over."""


def did_you_mean(name: str, choices) -> str:
    """`` (did you mean X, Y?)`` with the choices closest to ``name`` (case ignored), or ``""`` if none is close."""
    by_case = {str(choice).lower(): str(choice) for choice in choices}
    close = difflib.get_close_matches(str(name).lower(), list(by_case), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(by_case[c] for c in close)}?)" if close else ""
