"""Numbers as the chapters print them in a bound: rounded to the side the sentence claims.

A chapter that writes "at most {x}" must print a number no smaller than x, and "at least {x}" one no
larger: rounding to nearest can print 1.14 for 1.1448 and make "at most 1.14" false.  ``at_most`` and
``at_least`` format a value with a standard format spec (fixed ``".2f"``, scientific ``".1e"``, general
``".2g"`` or percent ``".0%"``) and,
where rounding went the wrong way, move it one unit in the last printed place.  ``interval`` prints an estimate
with its interval, "centre [low, high]", the ends rounded outward the same way.
"""

from __future__ import annotations

import math
import numbers
import re

from .errors import FlatbookInputError

__all__ = ["at_least", "at_most", "interval"]

#: a format spec the functions accept: an optional "+" (always print the sign), a precision, and f, e, g or %
_SPEC = re.compile(r"^(\+?)\.(\d+)([efg%])$")


def _unit(value: float, digits: int, kind: str) -> float:
    """One unit in the last place that ``format(value, f".{digits}{kind}")`` prints."""
    if kind == "f":
        return 10.0**-digits
    if kind == "%":
        return 10.0**-digits / 100.0
    if value == 0.0:
        return 0.0
    exponent = math.floor(math.log10(abs(value)))
    return 10.0 ** (exponent - (digits if kind == "e" else max(digits, 1) - 1))


def _checked(spec) -> re.Match[str]:
    """``spec`` parsed by ``_SPEC``, or a FlatbookInputError that says which specs are accepted."""
    match = _SPEC.match(spec) if isinstance(spec, str) else None
    if match is None:
        raise FlatbookInputError(
            f"a bound is printed with a fixed, scientific, general or percent spec such as '.2f', '.1e', '.2g' or "
            f"'.0%' (optionally '+' first), got {spec!r}."
        )
    return match


def _outward(value, spec: str, up: bool) -> str:
    """``value`` printed with ``spec`` on the side ``up`` asks for (see the module)."""
    match = _checked(spec)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise FlatbookInputError(f"a bound must be a finite number, got {value!r}.")
    value = float(value)
    digits, kind = int(match.group(2)), match.group(3)

    def printed(text: str) -> float:
        return float(text[:-1]) / 100.0 if kind == "%" else float(text)

    def shown(number: float) -> str:
        text = format(number, spec)
        return format(0.0, spec) if printed(text) == 0.0 else text  # no "-0.00"

    text = shown(value)
    step = _unit(value, digits, kind)
    # one step moves a number rounded to the wrong side past the value; a second covers float rounding of the sum
    for _ in range(3):
        if (printed(text) >= value) if up else (printed(text) <= value):
            return text
        text = shown(printed(text) + (step if up else -step))
    raise AssertionError(
        f"{value!r} could not be printed {'above' if up else 'below'} with {spec!r}"
    )  # pragma: no cover


def at_most(value, spec: str) -> str:
    """``value`` formatted with ``spec``, rounded up: the printed number is ≥ ``value``.

    Examples
    --------
    >>> from flatbook.prose import at_most
    >>> at_most(1.1448, ".2f"), at_most(1.15, ".2f")
    ('1.15', '1.15')
    """
    return _outward(value, spec, up=True)


def at_least(value, spec: str) -> str:
    """``value`` formatted with ``spec``, rounded down: the printed number is ≤ ``value``.

    Examples
    --------
    >>> from flatbook.prose import at_least
    >>> at_least(34.898, ".0f"), at_least(6.158e-4, ".1e")
    ('34', '6.1e-04')
    """
    return _outward(value, spec, up=False)


def interval(centre, low, high, spec: str = ".2f") -> str:
    """An estimate and its interval, ``"centre [low, high]"``, the ends rounded outward.

    Each number is printed with ``spec``: the centre rounded to nearest, ``low`` rounded down (:func:`at_least`)
    and ``high`` rounded up (:func:`at_most`), so the printed interval contains the computed one.  An end that is
    not finite (an interval open on that side, or undefined) is printed as it is.

    Examples
    --------
    >>> from flatbook.prose import interval
    >>> interval(1.2, 1.1448, 1.2512), interval(0.456, 0.3119, 0.6081, ".0%")
    ('1.20 [1.14, 1.26]', '46% [31%, 61%]')
    >>> interval(-0.02, -0.1039, float("inf"), "+.2f")
    '-0.02 [-0.11, +inf]'
    """
    _checked(spec)

    def end(value, side) -> str:
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isfinite(value):
            return format(float(value), spec)
        return side(value, spec)

    return f"{format(centre, spec)} [{end(low, at_least)}, {end(high, at_most)}]"
