"""Exceptions raised by flatbook.

Every error says what is wrong and what to change.  They subclass the builtin
exception a caller would expect (``ValueError`` for bad input, ``RuntimeError``
for a solver that failed), so ``except ValueError`` keeps working.
"""

__all__ = [
    "FlatbookInputError",
    "InfeasibleInterpolationError",
    "UnboundedFlatnessError",
    "SolverError",
    "FlatbookWarning",
    "SolverFallbackWarning",
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
