"""Reading published values back: ranges (``[lo, hi] or <NA>``) and sets (``{a, b}``).

The grammar is the same for every kind; what a bound means (a number, a
timestamp, a category name) is the kind's :meth:`~dmondrian.kinds.QIKindSpec.read_bound`.
:mod:`dmondrian.release.publish` re-exports these as the public API.
"""

from __future__ import annotations

import datetime
import decimal
from typing import NamedTuple

import pandas as pd

from ..errors import InvalidValueError, ParameterError, ParseError
from .base import KINDS, MISSING_LABEL, is_missing, kind_spec

__all__ = ["Interval", "parse_range", "parse_set", "not_published", "OR_MISSING"]

#: What a range covering missing values ends with.
OR_MISSING = " or " + MISSING_LABEL


class Interval(NamedTuple):
    """Bounds of a published value: ``lo <= original <= hi``, or missing."""

    lo: object
    hi: object
    missing: bool

    def contains(self, value) -> bool:
        """Whether an original value is covered by this published value."""
        if is_missing(value):
            return self.missing
        if self.lo is None:
            return False
        lo, hi = self.lo, self.hi
        if isinstance(value, decimal.Decimal):
            # A float bound as the exact decimal it was written as (1895.69 the float is not
            # 1895.69 the decimal).
            lo, hi = (decimal.Decimal(repr(b)) if isinstance(b, float) else b for b in (lo, hi))
        # A date or a period as the Timestamp published bounds are read as (a period's start).
        if isinstance(value, pd.Period):
            value = value.start_time
        elif isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            value = pd.Timestamp(value)
        return lo <= value <= hi


def _bound(text: str, kind, label: str):
    try:
        return kind.read_bound(text.strip())
    except ValueError:
        raise ParseError(f"cannot read {text.strip()!r} in published value {label!r} as "
                         f"{kind.name}") from None


def parse_range(label, kind="numeric") -> Interval:
    """Parse a published range back into its bounds.

    Parameters
    ----------
    label : str
        A value published by :func:`dmondrian.anonymize` for a numeric,
        datetime or ordinal quasi-identifier.
    kind : {"numeric", "datetime", "ordinal"} or QIKindSpec
        How to read the bounds: numbers (int when written as one), pandas
        Timestamps, or category labels.

    Returns
    -------
    Interval
        ``(lo, hi, missing)``; ``lo`` and ``hi`` are None when the class holds only missing values.

    Examples
    --------
    >>> parse_range("[-3.5, 2]")
    Interval(lo=-3.5, hi=2, missing=False)
    >>> parse_range("23")
    Interval(lo=23, hi=23, missing=False)
    >>> parse_range("[1e-05, 0.25] or <NA>")
    Interval(lo=1e-05, hi=0.25, missing=True)
    >>> parse_range("[2020-01-01, 2020-03-05]", kind="datetime").hi
    Timestamp('2020-03-05 00:00:00')
    """
    try:
        kind = kind_spec(kind)
    except (KeyError, TypeError):
        raise ParameterError("kind", f"kind must be one of {tuple(KINDS)}, got {kind!r}") from None
    if is_missing(label):  # a class of missing values only publishes a null
        return Interval(None, None, True)
    if not isinstance(label, str):
        raise ParseError(f"published value {label!r} is not a string")
    text = label.strip()
    missing = False
    if text == MISSING_LABEL:
        return Interval(None, None, True)
    if text.endswith(OR_MISSING):
        missing = True
        text = text[: -len(OR_MISSING)].rstrip()
    if text.startswith("[") and text.endswith("]"):
        parts = text[1:-1].split(", ")
        if len(parts) != 2:
            raise ParseError(f"published range {label!r} must look like '[lo, hi]'")
        return Interval(_bound(parts[0], kind, label), _bound(parts[1], kind, label), missing)
    value = _bound(text, kind, label)
    return Interval(value, value, missing)


def parse_set(label) -> frozenset:
    """Parse a published nominal value into the set of values it stands for.

    Parameters
    ----------
    label : str

    Returns
    -------
    frozenset of str

    Examples
    --------
    >>> sorted(parse_set("{Private, Self-emp-inc}"))
    ['Private', 'Self-emp-inc']
    >>> parse_set("Private")
    frozenset({'Private'})
    >>> parse_set(None)
    frozenset({'<NA>'})
    """
    if is_missing(label):  # a class of missing values only publishes a null
        return frozenset([MISSING_LABEL])
    if not isinstance(label, str):
        raise ParseError(f"published value {label!r} is not a string")
    text = label.strip()
    if text.startswith("{") and text.endswith("}"):
        return frozenset(text[1:-1].split(", "))
    return frozenset([text])


def not_published(column, text: str, kind, exc: Exception) -> InvalidValueError:
    """The error of a released ``column`` holding ``text``, which ``kind`` does not
    publish (``exc`` says why it could not be read)."""
    return InvalidValueError(column, f"column {column!r} holds {text!r}, which is not a "
                                     f"published {kind.name} value: {exc}")
