"""Quasi-identifier kinds, and their encoding into order-preserving int64 keys.

The kernel only ever sees int64 keys: comparing two keys must give the same
answer as comparing the two original values in the order Mondrian cuts along.

========== ============================== ===================================
kind        detected from                  key
========== ============================== ===================================
numeric     int, uint, float, nullable     the integer itself; floats as their
            Int/Float                      IEEE bits made order-preserving
datetime    datetime64 (naive or tz-aware) nanoseconds since the epoch (UTC)
ordinal     ordered pandas Categorical     category code
nominal     object, string, bool,          category code (categories sorted);
            unordered Categorical          cut by frequency order per node
hierarchy   nominal + a hierarchy given    depth-first leaf code in the tree
========== ============================== ===================================

Missing values
--------------
A missing value (NaN, None, NaT, pd.NA) is a value of its own; it is never
dropped and never silently imputed, so it cannot break k-anonymity (the trap
sdcMicro#225 fell into, where NA rows escaped the class count).

* numeric, datetime and ordinal: missing sorts after every present value (key
  ``MISSING_KEY``). A class mixing both publishes ``"[lo, hi] or <NA>"``.
* nominal: missing is one more category, ``<NA>``, and appears in the set.
* hierarchy: missing is a leaf ``<NA>`` under the root unless the hierarchy
  names it, so a class mixing it with other values generalizes to the root.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._kernel import keys as _keys
from ._kernel.constants import (
    FLIP,
    FLOAT_MAX,
    KIND_FLOAT,
    KIND_HIERARCHY,
    KIND_INT,
    KIND_NOMINAL,
    KIND_ORDINAL,
    MISSING_KEY,
)
from .errors import InvalidValueError, UnsupportedDtypeError
from .hierarchy import MISSING_LEAF, Hierarchy

__all__ = ["QIKind", "EncodedQI", "encode_qi", "detect_kind", "float_keys", "decode_float_keys",
           "MISSING_LABEL"]

#: How a missing value is written in published values.
MISSING_LABEL = "<NA>"


class QIKind:
    """Names of the quasi-identifier kinds (plain strings, for easy overriding)."""

    NUMERIC = "numeric"
    DATETIME = "datetime"
    ORDINAL = "ordinal"
    NOMINAL = "nominal"
    HIERARCHY = "hierarchy"
    ALL = (NUMERIC, DATETIME, ORDINAL, NOMINAL, HIERARCHY)


@dataclass
class EncodedQI:
    """One quasi-identifier as the kernel sees it, plus what publishing needs."""

    name: object
    kind: str
    kernel_kind: int
    keys: np.ndarray
    #: Global span normalizing this QI's spans: value range (numeric,
    #: datetime), code range (ordinal), distinct values - 1 (nominal), leaves
    #: - 1 (hierarchy). 0 means the QI is constant and never cut.
    scale: float
    #: Number of codes (nominal); 0 otherwise.
    card: int = 0
    categories: list = field(default_factory=list)
    hierarchy: Hierarchy | None = None
    #: "int", "float" or "bool" for numeric QIs; the numpy datetime unit and
    #: timezone for datetimes.
    value_type: str = "float"
    tz: object = None
    dtype: object = None


def float_keys(values: np.ndarray) -> np.ndarray:
    """Order-preserving int64 keys of float64 values; NaN maps to ``MISSING_KEY``.

    Examples
    --------
    >>> k = float_keys(np.array([-2.0, -0.5, 0.0, -0.0, 1.5, np.nan]))
    >>> bool(np.all(np.diff(k[[0, 1, 2, 4]]) > 0)), bool(k[2] == k[3])
    (True, True)
    """
    return _keys.float_keys(np.ascontiguousarray(values, dtype=np.float64))[0]


def decode_float_keys(keys: np.ndarray) -> np.ndarray:
    """Inverse of :func:`float_keys` for present (non-missing) keys."""
    keys = np.asarray(keys, dtype=np.int64)
    return np.where(keys < 0, keys ^ FLIP, keys).view(np.float64)


def detect_kind(series: pd.Series, has_hierarchy: bool = False) -> str:
    """The quasi-identifier kind a column's dtype implies."""
    dtype = series.dtype
    if has_hierarchy:
        return QIKind.HIERARCHY
    if isinstance(dtype, pd.CategoricalDtype):
        return QIKind.ORDINAL if dtype.ordered else QIKind.NOMINAL
    if pd.api.types.is_bool_dtype(dtype):
        return QIKind.NOMINAL
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return QIKind.DATETIME
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
        return QIKind.NUMERIC
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        return QIKind.NOMINAL
    raise UnsupportedDtypeError(
        series.name,
        f"column {series.name!r} has dtype {dtype}, which cannot be a quasi-identifier "
        "(supported: numeric, datetime64, categorical, string/object, bool)",
    )


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
    """
    name = series.name
    if hierarchy is not None:
        kind = QIKind.HIERARCHY
    if kind is None:
        kind = detect_kind(series)
    if kind not in QIKind.ALL:
        raise UnsupportedDtypeError(
            name, f"unknown kind {kind!r} for column {name!r}; use one of {QIKind.ALL}"
        )
    if kind == QIKind.NUMERIC:
        return _encode_numeric(series)
    if kind == QIKind.DATETIME:
        return _encode_datetime(series)
    if kind == QIKind.ORDINAL:
        return _encode_ordinal(series)
    if kind == QIKind.NOMINAL:
        return _encode_nominal(series)
    if hierarchy is None:
        raise UnsupportedDtypeError(
            name, f"column {name!r} is declared kind 'hierarchy' but no hierarchy was given"
        )
    return _encode_hierarchy(series, Hierarchy.coerce(hierarchy, name=name))


def _encode_numeric(series: pd.Series) -> EncodedQI:
    name = series.name
    dtype = series.dtype
    if not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_complex_dtype(dtype):
        raise UnsupportedDtypeError(
            name, f"column {name!r} has dtype {dtype}, which cannot be treated as numeric"
        )
    if pd.api.types.is_bool_dtype(dtype):
        series = series.astype("float64")
        dtype = series.dtype
    if pd.api.types.is_integer_dtype(dtype):
        unsigned = pd.api.types.is_unsigned_integer_dtype(dtype)
        if isinstance(dtype, np.dtype):  # a numpy integer column has no missing values
            missing = np.zeros(0, dtype=bool)
            raw = series.to_numpy()
        else:
            missing = series.isna().to_numpy()
            raw = series.to_numpy(dtype=np.uint64 if unsigned else np.int64, na_value=0)
        if unsigned and raw.size and raw.max() > np.iinfo(np.int64).max:
            raise InvalidValueError(
                name, f"column {name!r} holds unsigned integers above 2**63 - 1"
            )
        keys, lo, hi, reserved = _keys.int_keys(
            np.ascontiguousarray(raw, dtype=np.int64), np.ascontiguousarray(missing))
        if reserved:
            raise InvalidValueError(
                name, f"column {name!r} holds 2**63 - 1, which is reserved for missing values"
            )
        return _numeric_result(name, keys, lo, hi, KIND_INT, "int", dtype)
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    keys, lo, hi, first_inf = _keys.float_keys(np.ascontiguousarray(values))
    if first_inf >= 0:
        bad = series.index[first_inf]
        raise InvalidValueError(
            name, f"column {name!r} holds an infinite value (first at index {bad!r}); "
            "Mondrian needs finite bounds"
        )
    return _numeric_result(name, keys, lo, hi, KIND_FLOAT, "float", dtype)


def _key_span(lo, hi) -> float:
    """Global scale of a QI whose value is its key: ``hi - lo``, 0 when all are missing."""
    return 0.0 if lo == MISSING_KEY else float(hi) - float(lo)


def _numeric_result(name, keys, lo, hi, kernel_kind, value_type, dtype) -> EncodedQI:
    if kernel_kind == KIND_FLOAT and lo != MISSING_KEY:
        # min() keeps the scale finite when the range of huge floats overflows.
        lo_v, hi_v = decode_float_keys(np.array([lo, hi]))
        with np.errstate(over="ignore"):
            scale = min(float(hi_v - lo_v), FLOAT_MAX)
    else:
        scale = _key_span(lo, hi)
    return EncodedQI(name, QIKind.NUMERIC, kernel_kind, keys, scale, value_type=value_type,
                     dtype=dtype)


def _encode_datetime(series: pd.Series) -> EncodedQI:
    name = series.name
    dtype = series.dtype
    if not pd.api.types.is_datetime64_any_dtype(dtype):
        raise UnsupportedDtypeError(
            name, f"column {name!r} has dtype {dtype}, which is not a datetime64 dtype"
        )
    tz = getattr(dtype, "tz", None)
    values = series.to_numpy() if tz is None else series.dt.tz_convert("UTC").dt.tz_localize(
        None).to_numpy()
    unit = np.datetime_data(values.dtype)[0]
    keys, lo, hi = _keys.sentinel_keys(np.ascontiguousarray(values).view(np.int64),
                                       np.iinfo(np.int64).min)
    scale = _key_span(lo, hi)
    return EncodedQI(name, QIKind.DATETIME, KIND_INT, keys, scale, value_type=unit, tz=tz,
                     dtype=dtype)


def _encode_ordinal(series: pd.Series) -> EncodedQI:
    name = series.name
    if not isinstance(series.dtype, pd.CategoricalDtype):
        raise UnsupportedDtypeError(
            name, f"column {name!r} must be a pandas Categorical to be ordinal, not {series.dtype}"
        )
    keys, lo, hi = _keys.sentinel_keys(series.cat.codes.to_numpy().astype(np.int64), -1)
    scale = _key_span(lo, hi)
    return EncodedQI(name, QIKind.ORDINAL, KIND_ORDINAL, keys, scale,
                     categories=list(series.cat.categories), dtype=series.dtype)


def _factorize(series: pd.Series) -> tuple[np.ndarray, list]:
    """Codes and categories of a nominal column; missing gets code -1."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy().astype(np.int64), list(series.cat.categories)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    uniques = list(uniques)
    # Sorted categories make published sets independent of row order.
    try:
        order = sorted(range(len(uniques)), key=lambda i: uniques[i])
    except TypeError:
        order = sorted(range(len(uniques)), key=lambda i: (type(uniques[i]).__name__,
                                                           str(uniques[i])))
    remap = np.empty(len(uniques), dtype=np.int64)
    remap[order] = np.arange(len(uniques))
    codes = codes.astype(np.int64)
    out = np.where(codes < 0, -1, remap[np.maximum(codes, 0)] if len(uniques) else -1)
    return out, [uniques[i] for i in order]


def _encode_nominal(series: pd.Series) -> EncodedQI:
    codes, categories = _factorize(series)
    missing = codes < 0
    card = len(categories) + 1  # the last code stands for missing
    keys = np.where(missing, card - 1, codes)
    distinct = int(np.count_nonzero(np.bincount(keys, minlength=card)))
    return EncodedQI(series.name, QIKind.NOMINAL, KIND_NOMINAL, keys, float(distinct - 1),
                     card=card, categories=[*categories, MISSING_LABEL], dtype=series.dtype)


def _encode_hierarchy(series: pd.Series, hierarchy: Hierarchy) -> EncodedQI:
    codes, categories = _factorize(series)
    missing = codes < 0
    if missing.any():
        hierarchy = hierarchy.with_missing_leaf()
    labels = [str(c) for c in categories]
    cat_leaf = hierarchy.leaf_codes(labels) if labels else np.empty(0, dtype=np.int64)
    keys = np.empty(len(codes), dtype=np.int64)
    keys[~missing] = cat_leaf[codes[~missing]]
    if missing.any():
        keys[missing] = hierarchy.leaf_codes([MISSING_LEAF])[0]
    return EncodedQI(series.name, QIKind.HIERARCHY, KIND_HIERARCHY, keys,
                     float(len(hierarchy) - 1), hierarchy=hierarchy, dtype=series.dtype)
