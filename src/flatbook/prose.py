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

__all__ = ["at_least", "at_most", "bracket", "counted", "grouped", "interval"]

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


def bracket(low, high, spec: str = ".2f") -> str:
    """An interval without a centre, ``"[low, high]"``, its ends rounded outward.

    ``low`` is rounded down (:func:`at_least`) and ``high`` up (:func:`at_most`), so the printed interval contains
    the computed one: a proven lower end never prints above what was proven.  An end that is not zero but would
    print as zero gets up to four more digits (a fixed or percent spec), else one significant digit in scientific
    form, so that an interval clear of 0 never reads as touching it.  An infinite end (an interval open on that
    side) is printed as it is; NaN, a non-number or ``low > high`` raise.

    Examples
    --------
    >>> from flatbook.prose import bracket
    >>> bracket(1.1448, 1.2512), bracket(-0.0102, -0.0004, ".3f"), bracket(0.5, float("inf"), ".1f")
    ('[1.14, 1.26]', '[-0.011, -0.0004]', '[0.5, inf]')
    """
    sign, digits, kind = _checked(spec).groups()
    _check_interval(low, high)

    def end(value, side) -> str:
        if not math.isfinite(value):
            return format(float(value), spec)
        text = side(value, spec)
        finer = [f"{sign}.{int(digits) + extra}{kind}" for extra in range(1, 5)] if kind in "f%" else []
        for candidate in [*finer, f"{sign}.1e"]:
            if value == 0 or float(text.rstrip("%")) != 0:
                break
            text = side(value, candidate)
        return text

    return f"[{end(low, at_least)}, {end(high, at_most)}]"


def interval(centre, low, high, spec: str = ".2f") -> str:
    """An estimate and its interval, ``"centre [low, high]"``: the centre rounded to nearest with ``spec``, the
    interval as :func:`bracket` prints it (ends rounded outward, never a non-zero end printed as zero).

    Examples
    --------
    >>> from flatbook.prose import interval
    >>> interval(1.2, 1.1448, 1.2512), interval(0.456, 0.3119, 0.6081, ".0%")
    ('1.20 [1.14, 1.26]', '46% [31%, 61%]')
    >>> interval(-0.02, -0.1039, float("inf"), "+.2f"), interval(-0.005, -0.0102, -0.0004, ".3f")
    ('-0.02 [-0.11, +inf]', '-0.005 [-0.011, -0.0004]')
    """
    _checked(spec)
    _check_interval(low, high, centre)
    return f"{format(centre, spec)} {bracket(low, high, spec)}"


def _check_interval(low, high, *others) -> None:
    values = (*others, low, high)
    if any(isinstance(v, bool) or not isinstance(v, numbers.Real) or math.isnan(v) for v in values):
        raise FlatbookInputError(f"an interval needs numbers, not NaN or another type; got {values!r}.")
    if low > high:
        raise FlatbookInputError(f"an interval's low end {low!r} lies above its high end {high!r}.")


def grouped(count: int) -> str:
    """An integer with a space between groups of three digits, as the book prints counts.

    Examples
    --------
    >>> from flatbook.prose import grouped
    >>> grouped(30000), grouped(300)
    ('30 000', '300')
    """
    if isinstance(count, bool) or not isinstance(count, numbers.Integral):
        raise FlatbookInputError(f"grouped prints an integer, got {count!r}.")
    return f"{count:,}".replace(",", " ")


def counted(count: int, noun: str) -> str:
    """A count and its noun, plural unless the count is one (an "s" added), the count :func:`grouped`.

    Examples
    --------
    >>> from flatbook.prose import counted
    >>> counted(1, "point"), counted(1200, "seed")
    ('1 point', '1 200 seeds')
    """
    if isinstance(count, numbers.Integral) and count < 0:
        raise FlatbookInputError(f"a count is not negative, got {count!r}.")
    if not (isinstance(noun, str) and noun):
        raise FlatbookInputError(f"counted needs a noun to count, got {noun!r}.")
    return f"{grouped(count)} {noun}{'' if count == 1 else 's'}"
