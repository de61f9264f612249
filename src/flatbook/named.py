"""Objects known by a registry name and constructor parameters (activations, mirror potentials).

Two such objects are equal when name and parameters agree, and ``repr`` is the
call that makes them again, e.g. ``get_potential('hyperbolic_entropy', beta=0.1)``.
"""

from __future__ import annotations

__all__ = ["Named"]


class Named:
    """Mixin: equality, hashing and ``repr`` from ``name`` and :meth:`params`."""

    name: str = ""
    #: the function that builds the object from its name, for ``repr``
    factory: str = ""

    def params(self) -> dict:
        """Constructor parameters, for provenance and ``repr``."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{self.factory}({self.name!r}{', ' if args else ''}{args})"

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Named)
            and self.factory == other.factory
            and self.name == other.name
            and self.params() == other.params()
        )

    def __hash__(self) -> int:
        return hash((self.factory, self.name, tuple(sorted(self.params().items()))))
