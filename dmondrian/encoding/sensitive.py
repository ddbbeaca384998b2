"""The sensitive column's domain: its values, their order and their codes.

One definition for every reader of the sensitive column: the local engine
(:func:`encode_sensitive`), the Dask engine (which builds the same domain
from a distributed value count, :mod:`dmondrian._dask.sensitive_pass`) and
the metrics behind :func:`dmondrian.verify` (:mod:`dmondrian.metrics.per_class`).

* **Order.** Numeric and datetime values and ordered categoricals are *ordered* (t-closeness then
  uses the ordered distance); anything else, booleans included, is nominal.
* **Values.** A categorical column's domain is all its categories, in category order, used or not
  (for an ordered categorical the unused ones count in the ordered distance's ``m - 1``); any other
  column's is its present values, sorted.
* **Missing values** (``None``, ``NaN``, ``pd.NA``, ``NaT``: every kind is the same value) are one
  value of their own: one more distinct value for l-diversity, one more category for t-closeness,
  coded after every present value. In the ordered distance the missing value therefore sits one step
  beyond the largest value. That keeps the ground distance a line, as the EMD of Li, Li &
  Venkatasubramanian (2007) and the kernel's linear-time check need, changes no other pair's order,
  and follows pandas' sort order (missing last). A table whose missing values should be equally far
  from every value can cast the column to an unordered type (nominal, equal distance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InvalidValueError, UnsupportedDtypeError

__all__ = ["SensitiveValues", "is_ordered", "sensitive_values", "encode_sensitive",
           "check_known_order"]


def is_ordered(dtype) -> bool:
    """Whether sensitive values of ``dtype`` are ordered (ordered EMD distance).

    Examples
    --------
    >>> is_ordered(pd.Series([1.5]).dtype), is_ordered(pd.Series(["a"]).dtype)
    (True, False)
    >>> is_ordered(pd.Series([True]).dtype)
    False
    """
    if isinstance(dtype, pd.CategoricalDtype):
        return bool(dtype.ordered)
    if pd.api.types.is_bool_dtype(dtype):
        return False
    return bool(pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_datetime64_any_dtype(dtype))


@dataclass(frozen=True)
class SensitiveValues:
    """The sensitive column's domain.

    Attributes
    ----------
    values : pandas.Index
        The present values (or a categorical's categories), code ``i`` for ``values[i]``.
    has_missing : bool
        Whether the table has missing values; they take code ``len(values)``.
    ordered : bool
        Whether t-closeness uses the ordered distance.
    counts : ndarray
        Rows of every code (``n_codes`` of them).
    """

    values: pd.Index
    has_missing: bool
    ordered: bool
    counts: np.ndarray

    @property
    def n_codes(self) -> int:
        """Distinct codes: the values, plus one for missing if the table has any."""
        return len(self.values) + int(self.has_missing)

    def distribution(self) -> np.ndarray:
        """The share of every code in the table."""
        return self.counts / self.counts.sum()

    def codes(self, column: pd.Series) -> np.ndarray:
        """Codes of ``column``'s values (int64); missing values take the last code."""
        if isinstance(column.dtype, pd.CategoricalDtype):
            raw, found = column.cat.codes.to_numpy(), column.cat.categories
        else:
            raw, found = pd.factorize(column)
        return self._recode(np.asarray(raw), pd.Index(found), column.name)

    def _recode(self, raw: np.ndarray, found: pd.Index, name) -> np.ndarray:
        """Codes from a factorization: ``found[raw]`` are the values, -1 missing."""
        # Mapping the few distinct values, not the rows, keeps this one hash pass.
        lookup = np.append(self.values.get_indexer(found),
                           len(self.values) if self.has_missing else -1).astype(np.int64)
        codes = lookup[raw]
        if (codes < 0).any():
            raise InvalidValueError(name, f"sensitive column {name!r} has a value its domain "
                                          "does not hold")
        return codes


def _sort(present: pd.Index, ordered: bool) -> pd.Index:
    try:
        return present.sort_values()
    except TypeError:
        if ordered:
            raise
    # Nominal values of mixed types: any fixed order will do (the release does
    # not depend on it), as long as every run and engine picks the same.
    keys = [(type(v).__name__, repr(v)) for v in present]
    return present[sorted(range(len(present)), key=keys.__getitem__)]


def sensitive_values(counts: pd.Series, dtype, ordered: bool | None = None,
                     name=None) -> SensitiveValues:
    """The domain of a sensitive column from its ``value_counts(dropna=False)``.

    Parameters
    ----------
    counts : pandas.Series
        Rows of every value, missing ones included (any number of kinds).
    dtype : dtype
        The column's dtype.
    ordered : bool, optional
        Force the ordered (True) or nominal (False) reading; default :func:`is_ordered`. Forced
        ordered, values that cannot be sorted raise ``TypeError``.
    name : column name, optional
        The column, for error messages.

    Returns
    -------
    SensitiveValues

    Examples
    --------
    >>> s = pd.Series([3.0, None, 1.0, 3.0])
    >>> d = sensitive_values(s.value_counts(dropna=False), s.dtype)
    >>> d.values.tolist(), d.has_missing, d.ordered, d.counts.tolist()
    ([1.0, 3.0], True, True, [1.0, 2.0, 1.0])
    """
    index = counts.index
    missing = np.asarray(pd.isna(index), dtype=bool)
    n = counts.to_numpy(dtype=np.float64)
    present = index[~missing]
    categories = index.categories if isinstance(index, pd.CategoricalIndex) else None
    if isinstance(present, pd.CategoricalIndex):
        present = pd.Index(np.asarray(present), dtype=categories.dtype)
    return _domain(present, n[~missing], n[missing].sum(), dtype, ordered, name, categories)


def _domain(present: pd.Index, n_present, n_missing, dtype, ordered, name,
            categories=None) -> SensitiveValues:
    """The domain from the present values' counts and the missing values' count."""
    ordered = is_ordered(dtype) if ordered is None else bool(ordered)
    if categories is None and isinstance(dtype, pd.CategoricalDtype):
        categories = dtype.categories
    values = categories if categories is not None else _sort(present, ordered)
    where = values.get_indexer(present)
    if (where < 0).any():
        raise InvalidValueError(name, f"sensitive column {name!r} holds a value that is not "
                                      "one of its categories")
    has_missing = bool(n_missing > 0)
    out = np.zeros(len(values) + int(has_missing))
    np.add.at(out, where, n_present)
    if has_missing:
        out[-1] = n_missing
    return SensitiveValues(values, has_missing, ordered, out)


def encode_sensitive(series: pd.Series) -> tuple[np.ndarray, SensitiveValues]:
    """Codes of a sensitive column and its domain (the local engine's one pass).

    Examples
    --------
    >>> codes, d = encode_sensitive(pd.Series(["flu", None, "cold", "flu"], name="cause"))
    >>> codes.tolist(), d.values.tolist(), d.n_codes
    ([1, 2, 0, 1], ['cold', 'flu'], 3)
    """
    if isinstance(series.dtype, pd.CategoricalDtype):
        domain = sensitive_values(series.value_counts(dropna=False), series.dtype, name=series.name)
        return domain.codes(series), domain
    raw, found = pd.factorize(series)
    found = pd.Index(found)
    n = np.bincount(raw + 1, minlength=len(found) + 1).astype(np.float64)
    domain = _domain(found, n[1:], n[0], series.dtype, None, series.name)
    return domain._recode(raw, found, series.name), domain


def check_known_order(column, ordered: bool) -> None:
    """Refuse to order a Dask categorical column whose categories are unknown.

    Dask learns such a column's categories partition by partition, so their order, which the ordered
    distance measures, is lost. Nominal use needs no order.
    """
    dtype = getattr(column, "_meta", column).dtype
    if ordered and isinstance(dtype, pd.CategoricalDtype) and hasattr(column, "_meta") \
            and not column.cat.known:
        raise UnsupportedDtypeError(column.name, f"ordered sensitive column {column.name!r} has "
                                                 "unknown categories in this Dask table, so "
                                                 "their order is lost: cast it with .astype("
                                                 "pd.CategoricalDtype(categories, ordered=True))")
