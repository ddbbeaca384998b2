"""The distinct rows of integer columns, each row packed into one int64 key.

Where a million rows hold a few thousand distinct tuples (the class bounds of a file on the Dask
engine's keys path, a batch's ``(node, entity, value)`` triples of an entity plan), packing each row
into one number and deduplicating those numbers is far cheaper than a sort of the rows or a hash of
tuples.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["distinct_rows"]

_INT64_MAX = int(np.iinfo(np.int64).max)


def _offsets(column: np.ndarray, lo: int) -> np.ndarray:
    """``column - lo`` as int64 (values known to lie within an int64 span of ``lo``).

    Unsigned 64-bit words (bitmasks) are shifted in their own type, where they do
    not wrap; every other integer type first widens to int64.
    """
    if column.dtype.kind == "u" and column.dtype.itemsize == 8:
        return (column - np.uint64(lo)).astype(np.int64)
    return column.astype(np.int64, copy=False) - lo


def _restored(offsets: np.ndarray, lo: int, dtype: np.dtype) -> np.ndarray:
    """The values whose :func:`_offsets` above ``lo`` are ``offsets``, in ``dtype``."""
    if dtype.kind == "u" and dtype.itemsize == 8:
        return offsets.astype(np.uint64) + np.uint64(lo)
    return (offsets + lo).astype(dtype)


def distinct_rows(*columns, first_seen: bool = False, inverse: bool = True
                  ) -> tuple[list, np.ndarray | None]:
    """The distinct rows of equal-length integer (or boolean) columns.

    Each row is packed into one int64: every column contributes its offset above its smallest value,
    in a radix of its span (a column whose span is wider than the table below, as nanosecond dates,
    is numbered by its distinct values first). When the packed keys' range is small (at most ``max(8
    n, 65536)``) the distinct keys are marked in a table as large as that range, no sort and no
    hash; otherwise they are hashed.

    Parameters
    ----------
    *columns : array-like
        Integer or boolean columns of equal length (unsigned 64-bit words too).
    first_seen : bool, default False
        Give the distinct rows in order of first appearance (always hashed); otherwise in any order.
    inverse : bool, default True
        Also return each row's distinct row.

    Returns
    -------
    uniques : list of ndarray
        Each column's values in the distinct rows, in the column's dtype.
    inverse : int64 ndarray or None
        Each row's position among the distinct rows (None unless ``inverse``).

    Raises
    ------
    ValueError
        When the columns' spans multiply past int64 (a row would not pack).

    Examples
    --------
    >>> uniques, inv = distinct_rows(np.array([3, 1, 3, 1]), np.array([0, 5, 0, 6]))
    >>> [u.tolist() for u in uniques], inv.tolist()
    ([[1, 1, 3], [5, 6, 0]], [2, 0, 2, 1])
    >>> uniques, _ = distinct_rows(np.array([3, 1, 3]), np.array([0, 5, 0]), first_seen=True)
    >>> [u.tolist() for u in uniques]
    [[3, 1], [0, 5]]
    >>> words = np.array([2**63 + 5, 1, 2**63 + 5], dtype=np.uint64)
    >>> sorted(distinct_rows(words)[0][0].tolist())
    [1, 9223372036854775813]
    >>> distinct_rows(np.array([True, True]))[0][0].tolist()
    [True]
    """
    arrays = [np.asarray(c) for c in columns]
    dtypes = [a.dtype for a in arrays]
    arrays = [a.view(np.uint8) if a.dtype == bool else a for a in arrays]
    n = len(arrays[0])
    table = max(8 * n, 1 << 16)
    codes, lows, spans, values = [], [], [], []
    for a in arrays:
        lo = int(a.min()) if n else 0
        span = int(a.max()) - lo + 1 if n else 1
        if span > table:
            # A wide range (nanosecond dates): its distinct values, numbered.
            code, seen = pd.factorize(a)
            codes.append(code.astype(np.int64, copy=False))
            lows.append(0)
            spans.append(max(len(seen), 1))
            values.append(np.asarray(seen))
        else:
            codes.append(_offsets(a, lo))
            lows.append(lo)
            spans.append(span)
            values.append(None)
    total = 1
    for span in spans:
        total *= span
    if total > _INT64_MAX:
        raise ValueError(f"{len(arrays)} columns spanning {spans} do not pack into an int64")
    key = np.zeros(n, dtype=np.int64)
    for code, span in zip(codes, spans, strict=True):
        key *= span
        key += code
    if total <= table and not first_seen:
        mark = np.zeros(total, dtype=bool)
        mark[key] = True
        unique = np.flatnonzero(mark)
        rows = None
        if inverse:
            rank = np.cumsum(mark, dtype=np.int64) - 1
            rows = rank[key]
    elif inverse:
        rows, unique = pd.factorize(key)
        rows = rows.astype(np.int64, copy=False)
    else:
        unique, rows = pd.unique(key), None
    out = [None] * len(arrays)
    for i in range(len(arrays) - 1, -1, -1):
        code = unique % spans[i]
        unique = unique // spans[i]
        if values[i] is not None:
            out[i] = values[i][code].astype(dtypes[i], copy=False)
        elif dtypes[i].kind == "b":
            out[i] = _restored(code, lows[i], np.dtype(np.uint8)).astype(bool)
        else:
            out[i] = _restored(code, lows[i], dtypes[i])
    return out, rows
