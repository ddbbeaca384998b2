"""Order-preserving int64 keys: the primitives every kind's encoding is built from.

The kernel only ever sees int64 keys: comparing two keys must give the same
answer as comparing the two original values in the order Mondrian cuts along.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from .._compat import has_unknown_categories
from .._kernel import keys as _keys
from .._kernel import strings as _strings
from .._kernel.constants import FLIP
from ..errors import UnsupportedDtypeError

__all__ = ["float_keys", "decode_float_keys", "factorize", "global_codes", "arrow_int32_chunks",
           "arrow_string_chunks", "CategoryKind", "category_slot_counts", "number_text"]


def float_keys(values: np.ndarray) -> np.ndarray:
    """Order-preserving int64 keys of float64 values; NaN maps to ``MISSING_KEY``.

    Parameters
    ----------
    values : ndarray
        Values convertible to float64.

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> k = float_keys(np.array([-2.0, -0.5, 0.0, -0.0, 1.5, np.nan]))
    >>> bool(np.all(np.diff(k[[0, 1, 2, 4]]) > 0)), bool(k[2] == k[3])
    (True, True)
    """
    return _keys.float_keys(np.ascontiguousarray(values, dtype=np.float64))[0]


def decode_float_keys(keys: np.ndarray) -> np.ndarray:
    """Inverse of :func:`float_keys` for present (non-missing) keys.

    Parameters
    ----------
    keys : ndarray of int64

    Returns
    -------
    ndarray of float64

    Examples
    --------
    >>> decode_float_keys(float_keys(np.array([-1.5, 2.0]))).tolist()
    [-1.5, 2.0]
    """
    keys = np.asarray(keys, dtype=np.int64)
    return np.where(keys < 0, keys ^ FLIP, keys).view(np.float64)


def factorize(series: pd.Series) -> tuple[np.ndarray, list]:
    """Codes and categories of a nominal column; missing gets code -1.

    A Categorical keeps its categories; other columns get their distinct
    values sorted, so codes (and published sets) do not depend on row order.

    Parameters
    ----------
    series : pandas.Series

    Returns
    -------
    codes : ndarray of int64
    categories : list

    Examples
    --------
    >>> codes, cats = factorize(pd.Series(["b", None, "a", "b"]))
    >>> codes.tolist(), cats
    ([1, -1, 0, 1], ['a', 'b'])
    """
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy().astype(np.int64), list(series.cat.categories)
    numbered = number_text(series, FEW_TEXT_VALUES)
    try:
        codes, uniques = numbered or pd.factorize(series, use_na_sentinel=True)
    except TypeError as exc:
        raise unhashable_error(series) from exc
    uniques = list(uniques)
    try:
        order = sorted(range(len(uniques)), key=lambda i: uniques[i])
    except TypeError:
        order = sorted(range(len(uniques)), key=lambda i: (type(uniques[i]).__name__,
                                                           str(uniques[i])))
    # One gather: a missing value's -1 reads the last entry, -1.
    remap = np.full(len(uniques) + 1, -1, dtype=np.int64)
    remap[order] = np.arange(len(uniques))
    return remap[codes], [uniques[i] for i in order]


#: Most distinct values :func:`number_text` numbers for :func:`factorize`.
FEW_TEXT_VALUES = 1024


def number_text(values: pd.Series, limit: int, codes: bool = True) -> tuple | None:
    """``(codes, distinct values)`` of Arrow text holding at most ``limit`` distinct values,
    numbered in the order they first occur as :func:`pandas.factorize` numbers them (-1 for a
    null; no codes, an empty array, unless ``codes``), in compiled code
    (:func:`dmondrian._kernel.strings.number_strings`, a small table that stops at the limit,
    where pandas' Arrow factorize hashes every row into one that grows); None for any other
    column, or more values.

    Examples
    --------
    >>> codes, values = number_text(pd.Series(["b", None, "a", "b"], dtype="string[pyarrow]"), 4)
    >>> codes.tolist(), values
    ([0, -1, 1, 0], ['b', 'a'])
    """
    data = getattr(values.array, "_pa_array", None)
    if data is None or not (pa.types.is_string(data.type) or pa.types.is_large_string(data.type)):
        return None
    out = np.empty(len(values) if codes else 0, dtype=np.int64)
    known: dict = {}
    at = 0
    for offsets, raw, bits, bit_offset, chunk in arrow_string_chunks(data):
        firsts = np.zeros(limit, dtype=np.int64)
        rows = out[at:at + len(chunk)] if codes else out
        count = _strings.number_strings(offsets, raw, bits, bit_offset, firsts, rows)
        if count < 0:
            return None
        # A later chunk numbers its values afresh: the values seen before keep their codes.
        remap = np.array([known.setdefault(v, len(known))
                          for v in chunk.take(firsts[:count]).to_pylist()] + [-1], dtype=np.int64)
        if codes and at:
            rows[:] = remap[rows]
        at += len(chunk)
    return (out, list(known)) if len(known) <= limit else None


def unhashable_error(series: pd.Series) -> UnsupportedDtypeError:
    """The typed error for a column of values that cannot be compared for equality.

    JSON read from Parquet or a database gives columns of dicts or lists: they have no category to
    generalize to, so the column is refused by name with its first offending value's type, instead
    of pandas' bare ``TypeError: unhashable type``.

    Examples
    --------
    >>> str(unhashable_error(pd.Series([{"a": 1}], name="meta")))  # doctest: +ELLIPSIS
    "column 'meta' holds dict values, which cannot be a quasi-identifier's values: ..."
    """
    kind = "unhashable"
    for value in series:
        try:
            hash(value)
        except TypeError:
            kind = type(value).__name__
            break
    return UnsupportedDtypeError(
        series.name, f"column {series.name!r} holds {kind} values, which cannot be a "
                     "quasi-identifier's values: convert them to scalars first (numbers, "
                     "dates or strings, e.g. with .astype(str))")


def global_codes(name, local_categories: list, index: pd.Index, missing_code) -> np.ndarray:
    """Global code of each local category, then ``missing_code`` (for local code -1).

    Parameters
    ----------
    name : object
        The column name, for the error.
    local_categories : list
        A partition's categories (or distinct values) in local code order.
    index : pandas.Index
        The global categories, as an object Index.
    missing_code : int
        What local code -1 (missing) becomes.

    Returns
    -------
    ndarray of int64
        ``len(local_categories) + 1`` codes.

    Raises
    ------
    UnsupportedDtypeError
        For a value the global domain does not hold: the input changed
        between the Dask engine's passes.

    Examples
    --------
    >>> global_codes("c", ["z", "a"], pd.Index(["a", "b", "z"], dtype=object), 3).tolist()
    [2, 0, 3]
    """
    codes = index.get_indexer(pd.Index(local_categories, dtype=object))
    if (codes < 0).any():
        bad = [c for c, g in zip(local_categories, codes, strict=True) if g < 0][0]
        raise UnsupportedDtypeError(
            name, f"column {name!r} holds {bad!r}, which the global domain pass did not see; "
            "the input changed between passes (it must be deterministic)")
    return np.append(codes, missing_code).astype(np.int64)


def arrow_int32_chunks(codes):
    """``(values, validity bits, bit offset)`` of every non-empty chunk of an Arrow int32
    (chunked) array, read in place: ``fill_null``, ``to_numpy`` and a cast would each
    write the whole column once more. The bits are empty when no value is null."""
    for chunk in (codes.chunks if isinstance(codes, pa.ChunkedArray) else [codes]):
        m = len(chunk)
        if m:
            validity, data = chunk.buffers()[:2]
            raw = np.frombuffer(data, dtype=np.int32)[chunk.offset:chunk.offset + m]
            bits = (np.zeros(0, np.uint8) if validity is None or chunk.null_count == 0
                    else np.frombuffer(validity, dtype=np.uint8))
            yield raw, bits, chunk.offset


def arrow_string_chunks(values):
    """``(offsets, value bytes, validity bits, bit offset, chunk)`` of every non-empty chunk of an
    Arrow ``string`` or ``large_string`` (chunked) array, read in place, as
    :mod:`dmondrian._kernel.strings` takes them. The bits are empty when no value is null.

    Examples
    --------
    >>> import pyarrow as pa
    >>> [(o.tolist(), bytes(d[:o[-1]])) for o, d, *_ in arrow_string_chunks(
    ...     pa.array(["ab", None, "c"]).slice(1))]
    [([2, 2, 3], b'abc')]
    """
    for chunk in (values.chunks if isinstance(values, pa.ChunkedArray) else [values]):
        m = len(chunk)
        if not m:
            continue
        validity, offsets, data = chunk.buffers()[:3]
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(offsets, dtype=width)[chunk.offset:chunk.offset + m + 1]
        # An all-empty chunk may have no data buffer: one zero byte stands for it.
        data = (np.frombuffer(data, dtype=np.uint8) if data is not None and data.size
                else np.zeros(1, np.uint8))
        bits = (np.zeros(0, np.uint8) if validity is None or chunk.null_count == 0
                else np.frombuffer(validity, dtype=np.uint8))
        yield offsets, data, bits, chunk.offset, chunk




class CategoryKind:
    """The whole-dataset pass of a kind with categories (nominal, ordinal), mixed in
    before :class:`~dmondrian.kinds.base.QIKindSpec`: one global category list, and a
    count slot per category, missing last."""

    def global_categories(self, name, values: pd.Index, seen: set, meta_dtype) -> list:
        """The schema's categories when it knows them, else the one category list every partition
        had, else ``categories_from_values`` (which may refuse: an ordinal order cannot be made up).
        The parameters are :meth:`~dmondrian.kinds.QIKindSpec.global_categories`'."""
        if isinstance(meta_dtype, pd.CategoricalDtype) and not has_unknown_categories(meta_dtype):
            return list(meta_dtype.categories)
        if len(seen) == 1:
            return list(next(iter(seen)))
        return self.categories_from_values(name, list(values))

    def global_slots(self, values: pd.Series, n_missing: int, *, categories=None,
                     hierarchy=None) -> tuple[np.ndarray, None]:
        """One slot per category, in the global category order, and the last for missing."""
        return category_slot_counts(values, n_missing, categories), None

    def partition_parts(self, col: pd.Series) -> tuple:
        """A partition's distinct present values and whether a value is missing: partitions
        may hold other categories. The values are taken first (Arrow text and codes as they
        are), then as objects: partitions may hold other types of the same values."""
        return np.asarray(col.dropna().unique(), dtype=object), bool(col.isna().any())

    def merge_parts(self, parts: list, meta: pd.Series | None = None) -> tuple:
        """Partitions' distinct values and missing flags merged; given ``meta``, the
        :meth:`~dmondrian.kinds.QIKindSpec.domain_parts` of a column of them (ordered kinds:
        coded in ``meta``'s category order)."""
        values = pd.unique(np.concatenate([v for v, _ in parts]))
        missing = any(m for _, m in parts)
        if meta is None:
            return values, missing
        column = pd.Series([*values, None] if missing else values, dtype=object)
        return tuple(self.domain_parts(column.astype(meta.dtype) if self.ordered else column))


def category_slot_counts(values: pd.Series, n_missing: int, categories: list) -> np.ndarray:
    """Count of every slot of a kind with categories: one per category (global code
    order), missing last.

    Examples
    --------
    >>> vc = pd.Series([2, 5], index=pd.Index(["z", "a"], dtype=object))
    >>> category_slot_counts(vc, 1, ["a", "b", "z"]).tolist()
    [5.0, 0.0, 2.0, 1.0]
    """
    codes = pd.Index(categories, dtype=object).get_indexer(values.index)
    counts = np.bincount(codes, weights=values.to_numpy(), minlength=len(categories) + 1)
    counts[-1] = n_missing
    return counts
