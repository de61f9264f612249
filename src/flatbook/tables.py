"""Tidy tables: select, group and summarise the rows every experiment returns.

Every experiment's ``run(config)`` returns tables: lists of rows, each a dict of
plain values (str, int, float, None), one row per observation.  These few
functions are how the package and the chapters read them::

    where(runs, activation="relu", method="bad", rho=0)      # rows whose fields equal these values
    where(runs, lambda r: r["upsilon"] == r["best_upsilon"])  # or satisfy a test (both may be given)
    one(tables["solutions"], activation="relu")               # the single matching row (else an error)
    index(tables["slopes"], "activation", "rho")              # {("relu", 0.0): row, ...}, keys unique
    group(runs, "n")                                          # {40: [rows], 80: [rows], ...}
    column(rows, "upsilon"), distinct(runs, "activation")     # a field's values; its distinct values
    geomean(column(rows, lambda r: r["upsilon"] / r["best_upsilon"]))
    slope_across_seeds(rows, "n", "upsilon")                  # log-log slope per seed, mean and interval
    local_slopes(rows, "n", "upsilon")                        # the same between consecutive n, to see a bend

Why not pandas: the rows are what the sweep cache stores (JSON) and what the
chapters assert on and glue into the prose one value at a time, so a data
frame would be built only to be taken apart again; the selections the chapters
make read as well as boolean masks (``where(runs, activation="relu", rho=0)``
against ``runs[(runs.activation == "relu") & (runs.rho == 0)]``), the rows stay
the same objects in the package, the chapters and the cache, and the package
keeps one dependency fewer.  A field name that no row has is an error, not an
empty selection, so a typo cannot silently empty a figure or an assertion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .errors import FlatbookInputError
from .stats import loglog_slope, mean_interval

__all__ = ["where", "one", "column", "distinct", "group", "index", "geomean", "slope_across_seeds", "local_slopes"]

Row = dict[str, Any]
Table = list[Row]
#: a field name, or a function of a row (e.g. a ratio of two fields)
Field = str | Callable[[Row], Any]


def _check_fields(rows: Table, fields: Iterable[str]) -> None:
    for name in fields:
        if rows and not any(name in row for row in rows):
            raise FlatbookInputError(f"no row has the field {name!r}; fields: {', '.join(sorted(_fields(rows)))}.")


def _fields(rows: Table) -> set[str]:
    return {name for row in rows for name in row}


def _value(row: Row, field: Field) -> Any:
    return field(row) if callable(field) else row[field]


def where(rows: Table, predicate: Callable[[Row], bool] | None = None, /, **fields: Any) -> Table:
    """The rows whose ``fields`` equal the given values and, if given, for which ``predicate(row)`` is true.

    Values compare with ``==`` (so ``rho=0`` matches 0.0, and a NaN field matches nothing); a row without
    one of the fields does not match.  The order of ``rows`` is kept.

    Examples
    --------
    >>> from flatbook.tables import where
    >>> rows = [{"rho": 0.0, "upsilon": 2.0}, {"rho": 0.5, "upsilon": 1.5}, {"rho": 0.0, "upsilon": 3.0}]
    >>> where(rows, rho=0)
    [{'rho': 0.0, 'upsilon': 2.0}, {'rho': 0.0, 'upsilon': 3.0}]
    >>> where(rows, lambda r: r["upsilon"] < 2)
    [{'rho': 0.5, 'upsilon': 1.5}]
    """
    _check_fields(rows, fields)
    missing = object()
    return [
        row
        for row in rows
        if all(row.get(name, missing) == value for name, value in fields.items())
        and (predicate is None or predicate(row))
    ]


def one(rows: Table, predicate: Callable[[Row], bool] | None = None, /, **fields: Any) -> Row:
    """The single row :func:`where` selects; none or several is an error that says which."""
    selected = where(rows, predicate, **fields)
    if len(selected) != 1:
        raise FlatbookInputError(f"expected one row with {fields or 'the predicate'}, found {len(selected)}.")
    return selected[0]


def column(rows: Table, field: Field) -> list:
    """``[row[field] for row in rows]`` (``field`` may be a function of the row)."""
    if not callable(field):
        _check_fields(rows, [field])
    return [_value(row, field) for row in rows]


def distinct(rows: Table, field: Field, *, sort: bool = False) -> list:
    """The distinct values of ``field``, in order of first appearance (or sorted)."""
    values = list(dict.fromkeys(column(rows, field)))
    return sorted(values) if sort else values


def _key(row: Row, fields: tuple[str, ...]) -> Any:
    return row[fields[0]] if len(fields) == 1 else tuple(row[name] for name in fields)


def group(rows: Table, *fields: str, sort: bool = False) -> dict[Any, Table]:
    """Rows grouped by the value of one field (or by the tuple of several), groups in order of first
    appearance (or sorted by key); each group keeps the order of ``rows``."""
    if not fields:
        raise FlatbookInputError("group needs at least one field name.")
    _check_fields(rows, fields)
    groups: dict[Any, Table] = {}
    for row in rows:
        groups.setdefault(_key(row, fields), []).append(row)
    return dict(sorted(groups.items())) if sort else groups


def index(rows: Table, *fields: str) -> dict[Any, Row]:
    """Rows by the value of one field (or the tuple of several); a key that occurs twice is an error."""
    groups = group(rows, *fields)
    repeated = [key for key, members in groups.items() if len(members) > 1]
    if repeated:
        raise FlatbookInputError(f"{', '.join(fields)} do not identify a row: {repeated[:3]} occur more than once.")
    return {key: members[0] for key, members in groups.items()}


def geomean(values: Iterable[float]) -> float:
    """Geometric mean exp(mean log v) of positive values."""
    array = np.asarray(list(values), dtype=float)
    if array.size == 0 or (array <= 0).any():
        raise FlatbookInputError(f"a geometric mean needs positive values, got {array[:5].tolist()}.")
    return float(np.exp(np.mean(np.log(array))))


def slope_across_seeds(rows: Table, x: Field, y: Field, level: float = 0.95) -> tuple[float, float, float]:
    """Log-log slope of ``y`` against ``x`` fitted for each seed (``row["seed"]``), then the mean and
    Student-t interval of those slopes (:func:`flatbook.stats.mean_interval`): (mean, low, high)."""
    slopes = [loglog_slope(column(members, x), column(members, y)) for members in group(rows, "seed").values()]
    return mean_interval(slopes, level)


def local_slopes(rows: Table, x: str, y: Field, level: float = 0.95) -> list[Row]:
    """Log-log slopes of ``y`` against ``x`` between consecutive values of ``x``, per seed, then mean and
    Student-t interval: rows {x_from, x_to, x_mid (geometric mean), slope, low, high}, in order of ``x``."""
    by_x = group(rows, x, sort=True)
    values = list(by_x)
    out = []
    for first, second in zip(values, values[1:], strict=False):
        before, after = index(by_x[first], "seed"), index(by_x[second], "seed")
        per_seed = [
            loglog_slope([first, second], [_value(row, y), _value(after[seed], y)])
            for seed, row in before.items()
            if seed in after
        ]
        mean, low, high = mean_interval(per_seed, level)
        out.append(
            {
                "x_from": first,
                "x_to": second,
                "x_mid": geomean([first, second]),
                "slope": mean,
                "low": low,
                "high": high,
            }
        )
    return out
