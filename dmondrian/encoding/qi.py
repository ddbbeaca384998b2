"""Quasi-identifiers as the kernel sees them: a column's kind, and its int64 keys.

The kernel only ever sees int64 keys: comparing two keys must give the same answer as comparing the
two original values in the order Mondrian cuts along. What a key, a scale and a missing value are
for each kind is the kind object's business (:mod:`dmondrian.kinds`, where the table of kinds is);
this module is the entry point: :func:`encode_qi` resolves a column's kind (with
:func:`dmondrian.kinds.resolve_kind`, the one detection every path uses) and lets it encode.
"""

from __future__ import annotations

import pandas as pd

from ..kinds import QIKind, resolve_kind
from ..kinds.base import MISSING_LABEL, EncodedQI
from ..kinds.hierarchy import Hierarchy
from ..kinds.keys import decode_float_keys, factorize, float_keys

__all__ = ["QIKind", "EncodedQI", "encode_qi", "float_keys", "decode_float_keys", "factorize",
           "MISSING_LABEL", "warn_unique_text", "warn_unique_text_qis", "UNIQUE_TEXT_SHARE"]

#: Distinct values over rows from which a text QI is said to hold nearly one value per row.
UNIQUE_TEXT_SHARE = 0.9
#: Rows a table has at least before the share means anything.
UNIQUE_TEXT_MIN_ROWS = 20

# The Dask engine's domain pass imports it by this name until it is converted.
_factorize = factorize


def encode_qi(series: pd.Series, kind: str | None = None, hierarchy=None) -> EncodedQI:
    """Encode one column as kernel keys.

    Parameters
    ----------
    series : pandas.Series
        The column.
    kind : str, optional
        Force a kind (one of :attr:`QIKind.ALL`); detected from the dtype if None.
    hierarchy : Hierarchy, path, lines or mapping, optional
        A generalization tree; implies kind ``"hierarchy"``.

    Returns
    -------
    EncodedQI

    Examples
    --------
    >>> q = encode_qi(pd.Series([20, 35, 60], name="age"))
    >>> q.kind, q.keys.tolist(), q.scale
    ('numeric', [20, 35, 60], 40.0)
    """
    spec = resolve_kind(series, kind, has_hierarchy=hierarchy is not None)
    if hierarchy is not None:
        hierarchy = Hierarchy.coerce(hierarchy, name=series.name)
    return spec.encode(series, hierarchy)


def warn_unique_text(name, distinct: int, rows: int) -> None:
    """Warn, once for the column, that a text QI holds nearly one value per row.

    Every class of such a column publishes the set of its exact values
    (``{1983-03-19, 1985-04-05, ...}``): a range would say more and give
    less away. It is nearly always a date or a number read as text, so the
    message names the fix on both sides: the dtype in pandas, ``--dtype`` on
    the command line. Every engine and plan calls it once, after the QIs'
    domain is known.

    Parameters
    ----------
    name : object
        The column.
    distinct : int
        Its distinct present values.
    rows : int
        The table's rows.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_unique_text("day", 95, 100)
    >>> "--dtype day=datetime" in str(caught[0].message)
    True
    """
    if rows < UNIQUE_TEXT_MIN_ROWS or distinct < UNIQUE_TEXT_SHARE * rows:
        return
    import warnings

    from ..errors import TextQuasiIdentifierWarning
    from ..release.identifiers import _caller_level

    message = (f"quasi-identifier {name!r} is text with nearly one value per row ({distinct:,} "
               f"distinct values in {rows:,} rows): each class publishes the set of its exact "
               f"values. If it holds dates or numbers, give it that type (pandas: df[{name!r}] = "
               f"pd.to_datetime(df[{name!r}]) or pd.to_numeric; command line: --dtype "
               f"{name}=datetime or --dtype {name}=float)")
    warnings.warn(TextQuasiIdentifierWarning(name, message), stacklevel=_caller_level())


def warn_unique_text_qis(encoded: list, rows: int) -> None:
    """:func:`warn_unique_text` for every nominal QI of ``encoded`` (EncodedQI, in memory)."""
    for qi in encoded:
        if qi.spec.label_shape == "set":
            warn_unique_text(qi.name, len(qi.categories) - 1, rows)  # less the missing slot
