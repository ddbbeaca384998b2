"""Warehouse types: Arrow-backed columns, dates, decimals, durations and periods.

Parquet written by Spark, BigQuery, Snowflake or pyarrow holds a DATE as ``date32`` and a NUMERIC as
``decimal128``; pandas reads them as Python ``date`` and ``Decimal`` objects (or, with
``dtype_backend="pyarrow"``, as Arrow-backed columns) and Dask as ``date32[day][pyarrow]``. This
module says what such a column is, so every path (both engines, the metrics, ``verify``, the CLI)
gives it the same kind, and reads its values as int64 keys:

=============================== ========= ===================================
column                           kind      key
=============================== ========= ===================================
``date32``, ``date64``, object   datetime  days since 1970-01-01
of ``datetime.date``
``timestamp[unit, tz]``          datetime  the time in its unit, UTC
``period[freq]``                 datetime  the period's ordinal
``decimal128``/``decimal256``,   numeric   the value times ``10**scale``, an
object of ``Decimal``                      exact integer
``timedelta64``, ``duration``    numeric   the length in its unit
Arrow ints, floats               numeric   as their numpy twins
Arrow bool, string, dictionary   nominal   (ordinal: an ordered dictionary)
=============================== ========= ===================================
"""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidValueError, UnsupportedDtypeError

__all__ = ["arrow_type", "object_values", "detection_dtype", "as_arrow", "arrow_int64",
           "dictionary_as_categorical", "is_date", "is_decimal", "is_duration", "is_period",
           "is_float32", "decimal_keys", "decimal_strings", "unsupported"]


def arrow_type(dtype):
    """The pyarrow type of an Arrow-backed dtype (``int32[pyarrow]``...), else None."""
    return dtype.pyarrow_dtype if isinstance(dtype, pd.ArrowDtype) else None


def object_values(series: pd.Series) -> str | None:
    """``"date"`` or ``"decimal"`` for an object column of ``datetime.date`` or
    ``Decimal`` values (missing values allowed), else None.

    Examples
    --------
    >>> import datetime, decimal
    >>> object_values(pd.Series([datetime.date(2020, 1, 2), None]))
    'date'
    >>> object_values(pd.Series([decimal.Decimal("1.50"), None]))
    'decimal'
    >>> object_values(pd.Series(["a"], dtype=object)) is None
    True
    """
    if not (isinstance(series.dtype, np.dtype) and series.dtype.kind == "O"):
        return None
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    return inferred if inferred in ("date", "decimal") else None


def detection_dtype(series: pd.Series):
    """The dtype a column's kind is detected from: its own, or for an object column of
    dates or decimals the Arrow type it holds."""
    values = object_values(series)
    if values is None:
        return series.dtype
    return pd.ArrowDtype(pa.date32() if values == "date" else pa.decimal128(38, 0))


def as_arrow(series: pd.Series) -> pd.Series:
    """An object column of dates or decimals as the Arrow-backed column it stands for (``date32``,
    ``decimal128`` of the values' precision and largest scale); any other column as it is."""
    values = object_values(series)
    if values is None:
        return series
    raw = series.to_numpy()
    try:
        arr = pa.array(raw, type=pa.date32() if values == "date" else _decimal_type(raw),
                       from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = None  # a later decimal has more digits than the first ones: infer them all
    try:
        if arr is None:
            arr = pa.array(raw, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidValueError(series.name, f"column {series.name!r} holds {values} values "
                                f"that cannot be read as one {values} type ({exc}); convert "
                                "them to finite values of one type first") from None
    return pd.Series(pd.arrays.ArrowExtensionArray(arr), index=series.index, name=series.name)


def dictionary_as_categorical(series: pd.Series) -> pd.Series:
    """An Arrow ``dictionary`` column as the pandas Categorical it stands for (ordered
    when the dictionary is); any other column as it is."""
    t = arrow_type(series.dtype)
    if t is None or not pa.types.is_dictionary(t):
        return series
    values = series.array.__arrow_array__().to_pandas()  # unifies the chunks' dictionaries
    return pd.Series(values.array if isinstance(values, pd.Series) else values,
                     index=series.index, name=series.name)


#: Decimals whose digits after the point the scale of an object column is guessed from.
_SCALE_SAMPLE = 1000


def _decimal_type(raw: np.ndarray):
    """``decimal128(38, scale)`` with the largest scale of the first present Decimals:
    pyarrow converts Decimal objects to a given type several times faster than it
    infers one (it then rescales each value, refusing any that would lose a digit)."""
    scale = 0
    seen = 0
    for v in raw:
        if v is None or not isinstance(v, decimal.Decimal) or not v.is_finite():
            continue
        scale = max(scale, -v.as_tuple().exponent)
        seen += 1
        if seen == _SCALE_SAMPLE:
            break
    return pa.decimal128(38, min(scale, 38))


def is_date(dtype) -> bool:
    """Whether ``dtype`` is an Arrow ``date32`` or ``date64``."""
    t = arrow_type(dtype)
    return t is not None and pa.types.is_date(t)


def is_decimal(dtype) -> bool:
    """Whether ``dtype`` is an Arrow ``decimal128`` or ``decimal256``."""
    t = arrow_type(dtype)
    return t is not None and pa.types.is_decimal(t)


def is_duration(dtype) -> bool:
    """Whether ``dtype`` is a length of time: ``timedelta64`` or Arrow ``duration``."""
    t = arrow_type(dtype)
    return pa.types.is_duration(t) if t is not None else (
        isinstance(dtype, np.dtype) and dtype.kind == "m")


def is_period(dtype) -> bool:
    """Whether ``dtype`` is a pandas ``period[freq]``."""
    return isinstance(dtype, pd.PeriodDtype)


def is_float32(dtype) -> bool:
    """Whether ``dtype`` holds single-precision floats (numpy, nullable or Arrow)."""
    t = arrow_type(dtype)
    return pa.types.is_float32(t) if t is not None else (
        getattr(dtype, "numpy_dtype", dtype) == np.float32)


def _chunks(series: pd.Series):
    arr = series.array.__arrow_array__()
    return arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]


def arrow_int64(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(values, missing)`` of an Arrow-backed temporal or integer column: its stored
    integers as int64 (0 where missing) and which rows are missing."""
    values, missing = [], []
    for chunk in _chunks(series):
        t = chunk.type
        if pa.types.is_date32(t):
            chunk = chunk.view(pa.int32())
        elif pa.types.is_temporal(t):
            chunk = chunk.view(pa.int64())
        missing.append(chunk.is_null().to_numpy(zero_copy_only=False))
        values.append(pc.fill_null(chunk.cast(pa.int64()), 0).to_numpy(zero_copy_only=False))
    if not values:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    return (np.ascontiguousarray(np.concatenate(values), dtype=np.int64),
            np.ascontiguousarray(np.concatenate(missing)))


def decimal_keys(series: pd.Series) -> tuple[np.ndarray, np.ndarray, int]:
    """``(keys, missing, scale)`` of an Arrow decimal column: each value times
    ``10**scale`` as an exact int64 (0 where missing).

    The unscaled integers are read from Arrow's buffer (16 or 32 little-endian
    bytes a value) without a Python object per value.

    Raises
    ------
    InvalidValueError
        For a value whose unscaled integer does not fit in 63 bits (more than
        18 digits): a key would round it.

    Examples
    --------
    >>> import decimal, pyarrow as pa
    >>> s = pd.Series(pd.array([decimal.Decimal("-1.25"), None, decimal.Decimal("3.00")],
    ...                        dtype=pd.ArrowDtype(pa.decimal128(5, 2))), name="amount")
    >>> keys, missing, scale = decimal_keys(s)
    >>> keys.tolist(), missing.tolist(), scale
    ([-125, 0, 300], [False, True, False], 2)
    """
    t = arrow_type(series.dtype)
    words = t.byte_width // 8
    keys, missing = [], []
    for chunk in _chunks(series):
        m = len(chunk)
        data = chunk.buffers()[1]
        raw = (np.frombuffer(data, dtype=np.int64).reshape(-1, words)[chunk.offset:chunk.offset + m]
               if m else np.zeros((0, words), np.int64))
        null = chunk.is_null().to_numpy(zero_copy_only=False)
        low = raw[:, 0]
        # Fits when every higher word is the sign extension of the lowest.
        fits = (raw[:, 1:] == (low >> 63)[:, None]).all(axis=1) | null
        if not fits.all():
            bad = chunk[int(np.flatnonzero(~fits)[0])].as_py()
            raise InvalidValueError(series.name, f"column {series.name!r} holds {bad}, whose "
                                    f"{t.precision}-digit decimal does not fit an exact 64-bit "
                                    "key; round it to fewer digits (e.g. .astype("
                                    "pd.ArrowDtype(pa.decimal128(18, scale))))")
        keys.append(np.where(null, 0, low))
        missing.append(null)
    if not keys:
        return np.zeros(0, np.int64), np.zeros(0, bool), t.scale
    return (np.ascontiguousarray(np.concatenate(keys), dtype=np.int64),
            np.ascontiguousarray(np.concatenate(missing)), t.scale)


def decimal_strings(keys: np.ndarray, scale: int) -> list[str]:
    """Exact decimal text of scaled integer keys, with ``scale`` digits after the point.

    Examples
    --------
    >>> decimal_strings(np.array([-125, 0, 300, 7]), 2)
    ['-1.25', '0.00', '3.00', '0.07']
    >>> decimal_strings(np.array([12]), 0)
    ['12']
    """
    if scale <= 0:
        return [str(int(k) * 10 ** -scale) for k in keys]
    digits = [(k < 0, str(abs(k)).rjust(scale + 1, "0")) for k in keys.tolist()]
    return [("-" if neg else "") + d[:-scale] + "." + d[-scale:] for neg, d in digits]


def unsupported(series: pd.Series, dtype=None) -> UnsupportedDtypeError:
    """The typed error of a column no kind takes, naming it and saying what to do."""
    name = series.name
    dtype = series.dtype if dtype is None else dtype
    t = arrow_type(dtype)
    hint = "convert it to numbers, dates or strings first (e.g. .astype(str) to treat it as " \
           "categories)"
    if t is not None:
        if pa.types.is_time(t):
            hint = ("convert it to a duration since midnight (pd.to_timedelta(col.astype(str))) "
                    "or to strings (.astype(str))")
        elif pa.types.is_nested(t):
            hint = "give each nested field its own column, or convert the values to strings"
    elif isinstance(dtype, pd.IntervalDtype):
        hint = "publish one bound (e.g. col.array.left) or convert it to strings"
    return UnsupportedDtypeError(
        name, f"column {name!r} has dtype {dtype}, which cannot be a quasi-identifier "
              "(supported: numbers, decimals, dates, datetimes, durations, periods, "
              f"categoricals, strings, bools): {hint}")
