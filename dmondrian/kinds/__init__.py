"""Kinds of quasi-identifier: one object per kind, owning everything the kind decides.

========== ============================== ============================ =======================
kind        detected from                  key                          published (range)
========== ============================== ============================ =======================
numeric     int, uint, float, nullable     the integer itself; floats   ``[-3.5, 2]``
            Int/Float, Arrow ints and      as their IEEE bits made      ``[1895.69, 2628.32]``
            floats; decimal128/256 and     order-preserving; decimals   ``[1 days, 3 days]``
            Decimal objects; timedelta64   times 10**scale; durations
            and duration                   in their unit
datetime    datetime64 (naive or tz-aware) time since the epoch (UTC)   ``[2020-01-01, 2020-03-05]``
            Arrow date32/date64/timestamp, in the column's unit (days   ``[2020-01, 2020-05]``
            datetime.date objects, period  for dates); period ordinal
ordinal     ordered pandas Categorical,    category code                ``[Bachelors, Masters]``
            ordered Arrow dictionary
nominal     object, string, bool,          category code (categories    ``{Private, Self-emp-inc}``
            unordered Categorical, Arrow   sorted); cut by frequency
            string/bool/dictionary         order per node
hierarchy   nominal + a hierarchy given    depth-first leaf code        the lowest common ancestor
========== ============================== ============================ =======================

Arrow-backed columns and object columns of dates and decimals are read by
:mod:`dmondrian.kinds.types`.

Each kind is an object of a :class:`QIKindSpec` subclass (one module each) and owns: detecting a
column's kind from its dtype, encoding it to kernel keys, its global scale (every scale and span
follows one rule, :func:`capped_span`), its global domain for NCP, publishing (range labels' format,
midpoint and mean), reading a published value back, its NCP cost, which original values a published
value covers, and how the painting draws it. The kernel keeps integer kind codes
(``EncodedQI.kernel_kind``).

Missing values
--------------
A missing value (NaN, None, NaT, pd.NA) is a value of its own; it is never
dropped and never silently imputed, so it cannot break k-anonymity (the trap
sdcMicro#225 fell into, where NA rows escaped the class count).

A class whose values are all missing publishes a null, whatever its kind
(:func:`dmondrian.release.publish.missing_as_null`).

* numeric, datetime and ordinal: missing sorts after every present value (key
  ``MISSING_KEY``). A class mixing both publishes ``"[lo, hi] or <NA>"``.
* nominal: missing is one more category, ``<NA>``, and appears in the set.
* hierarchy: missing is a leaf ``<NA>`` under the root unless the hierarchy
  names it, so a class mixing it with other values generalizes to the root.

Adding a kind: a module with a subclass of :class:`QIKindSpec` (or of
:class:`~dmondrian.kinds.ranges.RangeKind` for values on a line), registered
below; nothing else in the package names a kind (docs/design.md, "Adding a
QI kind / an l variant", and ``tests/test_extension.py``).
"""

from __future__ import annotations

import pandas as pd

from ..errors import UnsupportedDtypeError
from .base import KINDS, Domain, EncodedQI, QIKindSpec, capped_span, kind_spec, register
from .datetimes import DatetimeKind
from .hierarchical import HierarchyKind
from .nominal import NominalKind
from .numeric import NumericKind
from .ordinal import OrdinalKind
from .ranges import RangeKind
from .types import detection_dtype, unsupported

__all__ = ["QIKind", "QIKindSpec", "RangeKind", "EncodedQI", "Domain", "KINDS", "NUMERIC",
           "DATETIME", "ORDINAL", "NOMINAL", "HIERARCHY", "kind_spec", "resolve_kind",
           "detect_kind", "capped_span"]

NUMERIC = register(NumericKind())
DATETIME = register(DatetimeKind())
ORDINAL = register(OrdinalKind())
NOMINAL = register(NominalKind())
HIERARCHY = register(HierarchyKind())

# The order dtypes are recognized in: an ordered Categorical is ordinal before
# anything else, and nominal takes what no other kind claims (strings, objects, bools).
_DETECTION_ORDER = (ORDINAL, DATETIME, NUMERIC, NOMINAL)


class QIKind:
    """Names of the quasi-identifier kinds (plain strings, for easy overriding)."""

    NUMERIC = NUMERIC.name
    DATETIME = DATETIME.name
    ORDINAL = ORDINAL.name
    NOMINAL = NOMINAL.name
    HIERARCHY = HIERARCHY.name
    ALL = tuple(KINDS)


def detect_kind(series: pd.Series) -> QIKindSpec:
    """The kind a column's dtype implies (never hierarchy: that needs a tree).

    Parameters
    ----------
    series : pandas.Series
        The column (or a Dask column's meta).

    Returns
    -------
    QIKindSpec

    Raises
    ------
    UnsupportedDtypeError
        For a dtype no kind takes (complex numbers, intervals, times of day,
        nested Arrow types...), naming the column and what to do.

    Examples
    --------
    >>> detect_kind(pd.Series([1.5, 2.0])).name
    'numeric'
    >>> detect_kind(pd.Series(["a", "b"])).name
    'nominal'
    >>> import datetime
    >>> detect_kind(pd.Series([datetime.date(2020, 1, 2), None])).name
    'datetime'
    """
    dtype = detection_dtype(series)
    for kind in _DETECTION_ORDER:
        if kind.detects(dtype):
            return kind
    raise unsupported(series, dtype)


def resolve_kind(series: pd.Series, kind=None, has_hierarchy: bool = False) -> QIKindSpec:
    """The kind a QI column is treated as: declared, implied by a hierarchy, or detected.

    The one place where a user's ``qi_kinds`` / ``hierarchies`` become a kind,
    for the engines and the metrics alike.

    Parameters
    ----------
    series : pandas.Series
        The column (or a Dask column's meta); its name is used in errors.
    kind : str, optional
        A declared kind name (one of :attr:`QIKind.ALL`); detected if None.
    has_hierarchy : bool
        Whether a hierarchy is given for the column (it implies ``"hierarchy"``).

    Returns
    -------
    QIKindSpec
        The declared kind, the hierarchy kind, or the one :func:`detect_kind` finds.

    Raises
    ------
    UnsupportedDtypeError
        For an unknown kind name, kind ``"hierarchy"`` without a hierarchy,
        or a dtype no kind takes.

    Examples
    --------
    >>> resolve_kind(pd.Series([1, 2], name="x"), "nominal").name
    'nominal'
    >>> resolve_kind(pd.Series(["a"], name="x"), has_hierarchy=True).name
    'hierarchy'
    """
    name = series.name
    if has_hierarchy:
        return HIERARCHY
    if kind is None:
        return detect_kind(series)
    if isinstance(kind, QIKindSpec):
        kind = kind.name
    if kind not in QIKind.ALL:
        raise UnsupportedDtypeError(name, f"unknown kind {kind!r} for column {name!r}; use one of "
                                          f"{QIKind.ALL}")
    if kind == QIKind.HIERARCHY:
        raise UnsupportedDtypeError(name, f"column {name!r} is declared kind 'hierarchy' but no "
                                          "hierarchy was given")
    return KINDS[kind]
