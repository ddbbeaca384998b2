"""How a generalized quasi-identifier is published, and how to read it back.

Published forms (``generalization="range"``, the default)
---------------------------------------------------------
=========== ================================= ===============================
kind, type   one value in the class            several values
=========== ================================= ===============================
numeric      ``23``, ``-1.5``                  ``[-3.5, 2]`` (closed interval)
decimal      ``1895.69``                       ``[1895.69, 2628.30]`` (at its scale)
duration     ``0 days 02:00:00``               ``[0 days 02:00:00, 3 days 00:00:00]``
datetime     ``2020-01-31``                    ``[2020-01-01, 2020-03-05T10:00]``
date         ``1977-02-11``                    ``[1977-02-11, 1977-04-21]``
period       ``2020-01``                       ``[2020-01, 2020-05]``
ordinal      ``Bachelors``                     ``[Bachelors, Masters]`` (labels)
nominal      ``Private``                       ``{Private, Self-emp-inc}``
hierarchy    ``Private``                       the lowest common ancestor, ``gov``
=========== ================================= ===============================

A class whose values are all missing publishes a null (the Categorical's missing value, an empty
field in a CSV, a null in Parquet), so ``isna()`` finds it and the column keeps its other labels. A
class mixing missing and present values publishes its range followed by `` or <NA>`` (``[46, 51] or
<NA>``, ``23 or <NA>``); a nominal set simply contains ``<NA>`` (``{F, <NA>}``), and a hierarchy
publishes the ancestor of its values and the ``<NA>`` leaf. Numbers are written in Python's shortest
round-trip form, so :func:`parse_range` gives back the exact bounds, negatives and floats included.
Datetimes are ISO 8601 with the shortest unit that loses nothing.

What depends on the kind (the label's shape, how bounds are written, the midpoint and mean) is asked
of its kind object (:mod:`dmondrian.kinds`). Each class's label is built once (range labels in
compiled code, see :mod:`dmondrian._kernel.labels`) and expanded to rows as a pandas Categorical,
never formatted per row.

``generalization="midpoint"`` / ``"mean"`` publish, for numeric and datetime QIs, the midpoint of
the class range or the class mean (microaggregation with a guaranteed class size), in the input's
type where it has one (a date for a date, a decimal at its scale, a duration, a period, a timestamp
in its zone; float64 for ints and floats); other kinds keep their labels.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .. import _kernel as K
from .._compat import categorical_dtype
from .._kernel import labels as _labels
from .._kernel import set_labels as _set_labels_kernel
from ..kinds.base import MISSING_LABEL, EncodedQI
from ..kinds.labels import Interval, parse_range, parse_set

__all__ = ["Interval", "parse_range", "parse_set", "class_values", "bound_labels", "mask_labels",
           "expand_labels", "missing_as_null",
           "expand_label_columns", "group_triples", "NO_TABLE", "MISSING_LABEL"]


# -- building labels --------------------------------------------------------------------------


def _distinct_rows(*columns):
    """Distinct rows of equal-length int arrays: ``(first_of_each, inverse)``.

    A lexsort and a diff, where ``np.unique(axis=0)`` would sort the rows as opaque records.
    """
    order = np.lexsort(columns[::-1])
    changed = np.zeros(len(order), dtype=bool)
    changed[0] = True
    for col in columns:
        c = col[order]
        changed[1:] |= c[1:] != c[:-1]
    group = np.cumsum(changed) - 1
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = group
    return order[changed], inverse


def _utf8_table(strings) -> tuple[np.ndarray, np.ndarray]:
    """Python strings as one UTF-8 buffer and offsets (see :mod:`dmondrian._kernel.labels`)."""
    encoded = [s.encode("utf-8") for s in strings]
    off = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=off[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), off


def _string_index(buf: np.ndarray, off: np.ndarray) -> pd.Index:
    """An Index of the strings of ``(buf, off)``, of the dtype pandas gives Python strings."""
    arr = pa.LargeStringArray.from_buffers(len(off) - 1, pa.py_buffer(off), pa.py_buffer(buf))
    dtype = _text_dtype()
    if isinstance(dtype, pd.StringDtype):
        return pd.Index(dtype.__from_arrow__(arr))
    return pd.Index(np.asarray(arr.to_pylist(), dtype=object))


try:  # whether pandas infers its string dtype (pandas >= 2.2), read without a warning
    from pandas._config import using_string_dtype as _infers_strings
except ImportError:  # pragma: no cover
    _infers_strings = None
_TEXT_DTYPES: dict = {}


def _text_dtype():
    """The dtype pandas gives an Index of Python strings. Inferring it takes longer than
    building a column's labels: it is kept for each state of pandas' option."""
    key = None if _infers_strings is None else bool(_infers_strings())
    dtype = _TEXT_DTYPES.get(key)
    if dtype is None:
        dtype = pd.Index(np.array([""], dtype=object)).dtype
        if key is not None:
            _TEXT_DTYPES[key] = dtype
    return dtype


def group_triples(lo, hi, missing, j: int):
    """Distinct (lo, hi, missing) triples of column ``j``, in sorted order, and each class's.

    Classes with every value missing (lo = ``MISSING_KEY``) share the last triple. The sort is one
    ``np.sort`` of the words of :func:`dmondrian._kernel.labels.pack_triples` (numpy sorts plain
    words in place, without the indirection of an argsort or a lexsort); a lexsort when the words
    hold only a prefix of lo and its ties run long. Bounds sharing a step (dates) are packed as
    their count of steps (:func:`_in_units`).

    Parameters
    ----------
    lo, hi : ndarray of int64, shape (classes, QIs)
        Per-class key bounds (``MISSING_KEY`` where a class has no present value).
    missing : ndarray, shape (classes, QIs)
        Whether a class holds missing values.
    j : int
        The QI's column.

    Returns
    -------
    u_lo, u_hi, u_missing, inverse : arrays
    """
    units = _in_units(lo, hi, j)
    if units is not None:
        # The same order and the same groups (an increasing map), mapped back below.
        (lo, hi, unit, base), missing, j = units, missing[:, j:j + 1], 0
    u_lo, u_hi, u_missing, inverse = _grouped(lo, hi, missing, j)
    if units is not None:
        present = u_lo != K.MISSING_KEY
        for u in (u_lo, u_hi):
            u[present] = (u[present].view(np.uint64) * np.uint64(unit)
                          + np.uint64(base & _U64)).view(np.int64)
    return u_lo, u_hi, u_missing, inverse


_U64 = (1 << 64) - 1


def _in_units(lo, hi, j):
    """Column ``j``'s bounds as one-column ``(lo, hi, unit, base)``: each present bound
    ``base + unit * q`` as ``q``, ``unit`` the bounds' greatest common step (a day, for
    dates in nanoseconds), ``base`` the least; None when the bounds already fit
    :func:`dmondrian._kernel.labels.pack_triples`' exact words, or share no step.

    Dates in nanoseconds span ~62 bits: their triples never fit a 64-bit word
    with the class number, and their long runs of equal leading bits fell back
    to a lexsort, most of labelling a plan's release.
    """
    a, b = lo[:, j], hi[:, j]
    present = a != K.MISSING_KEY
    if not present.any():
        return None
    a, b = a[present], b[present]
    base = int(a.min())
    lo_bits = (int(a.max()) - base).bit_length()
    hi_bits = (int(b.max()) - int(b.min())).bit_length()
    if lo_bits + hi_bits + 1 + max(1, len(a) - 1).bit_length() <= 64:
        return None
    # Offsets from the least bound, below 2**64: exact in uint64 (wrapping subtraction).
    off = [x.view(np.uint64) - np.uint64(base & _U64) for x in (a, b)]
    unit = int(np.gcd.reduce(np.concatenate(off)))
    if unit <= 1:
        return None
    out = []
    for x in off:
        q = np.full(lo.shape[0], K.MISSING_KEY, dtype=np.int64)
        q[present] = (x // np.uint64(unit)).astype(np.int64)
        out.append(q.reshape(-1, 1))
    return out[0], out[1], unit, base


def _grouped(lo, hi, missing, j: int):
    """:func:`group_triples` by the compiled pack, sort and grouping."""
    triples, packed, idx_bits, exact = _labels.pack_triples(lo, hi, missing, j)
    packed.sort()
    n = len(lo)
    inverse, u_lo, u_hi, u_missing, ok = _labels.group_packed(n, triples, packed, idx_bits, exact)
    if not ok:
        triples = triples[np.lexsort(triples[:, 2::-1].T)]
        # Exact words again: each triple's rank in lexsort order.
        changed = np.zeros(len(triples), dtype=np.uint64)
        changed[1:] = (triples[1:, :3] != triples[:-1, :3]).any(axis=1)
        packed = (np.cumsum(changed) << np.uint64(idx_bits)) | np.arange(len(triples),
                                                                           dtype=np.uint64)
        inverse, u_lo, u_hi, u_missing, ok = _labels.group_packed(n, triples, packed, idx_bits,
                                                                  True)
    return u_lo, u_hi, u_missing, inverse


#: The empty string table: what the compiled formatter is given for bounds it writes itself.
NO_TABLE = (np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64))


def _format_labels(qi: EncodedQI, u_lo, u_hi, u_missing) -> tuple[np.ndarray, np.ndarray, int]:
    """Labels of distinct triples as ``(buf, off)``, written by the compiled formatter,
    and the format it wrote them in."""
    per_sec = _labels.DATETIME_UNITS.get(qi.value_type, 0)
    table = NO_TABLE
    fmt = qi.spec.label_format(qi)
    if fmt == _labels.FMT_TABLE:
        # Names, tz-aware datetimes, unusual units: the strings of the distinct
        # bounds, made in Python, and the bounds as indices into them.
        present = u_lo != K.MISSING_KEY
        values, idx = np.unique(np.concatenate([u_lo[present], u_hi[present]]), return_inverse=True)
        u_lo, u_hi = u_lo.copy(), u_hi.copy()
        u_lo[present], u_hi[present] = np.split(idx, 2)
        table = _utf8_table(qi.spec.bound_strings(qi, values))
    return (*_labels.format_labels(u_lo, u_hi, u_missing, fmt, per_sec, *table), fmt)


def _range_labels(qi: EncodedQI, j: int, stats, sorted_row) -> tuple[pd.Index, np.ndarray]:
    """Labels of the distinct (lo, hi, missing) triples of column ``j``, and each class's."""
    _, lo, hi, missing, _, _ = stats
    u_lo, u_hi, u_missing, inverse = group_triples(lo, hi, missing, j)
    buf, off, fmt = _format_labels(qi, u_lo, u_hi, u_missing)
    labels = _string_index(buf, off)
    if fmt == _labels.FMT_TABLE and not labels.is_unique:
        # Names can make two ranges read alike (the category "[a, b]" and the
        # range a..b): merge them, as one published value.
        codes, labels = pd.factorize(labels)
        inverse = codes[inverse]
    return labels, inverse


# Up to this many codes, class sets are compared as bitmasks (64 codes a word).
_MASK_CODES = 4096


def _set_labels(qi: EncodedQI, j: int, stats, sorted_row) -> tuple[pd.Index, np.ndarray]:
    """Set labels of every class, from the codes each class's rows hold.

    The distinct code sets and their members are found in compiled code and their labels written
    into one UTF-8 buffer (:func:`dmondrian._kernel.set_labels.set_labels`), with no Python string
    per set until the Index is made. Up to ``_MASK_CODES`` codes, the labels are ordered as the
    sets' bitmask words read as int64 sort; past it, by the first class holding each set.
    """
    class_of_pos, n_classes = stats[0], stats[1].shape[0]
    if qi.card <= _MASK_CODES:
        words = (qi.card + 63) // 64
        return mask_labels(qi, K.class_code_masks(sorted_row, class_of_pos, n_classes, words))
    offsets, codes = K.class_code_sets(sorted_row, class_of_pos, n_classes)
    first, inverse = _set_labels_kernel.distinct_slices(offsets, codes)
    return _named_sets(qi, *_csr_rows(offsets, codes, first), inverse)


def mask_labels(qi: EncodedQI, masks: np.ndarray) -> tuple[pd.Index, np.ndarray]:
    """Set labels of code sets given as bitmasks (one row a set): ``(labels, inverse)``.

    ``masks`` is a uint64 array ``(m, words)``, bit ``c`` marking code ``c``
    (:func:`dmondrian._kernel.class_code_masks`); the labels are those
    :func:`class_values` publishes for classes holding these sets.
    """
    first, inverse = _set_labels_kernel.distinct_masks(np.ascontiguousarray(masks))
    offsets, codes = _set_labels_kernel.mask_members(masks, first)
    return _named_sets(qi, offsets, codes, inverse)


def _named_sets(qi: EncodedQI, offsets, codes, inverse) -> tuple[pd.Index, np.ndarray]:
    """Labels of the distinct code sets ``(offsets, codes)`` and each class's set."""
    names = [str(c) for c in qi.categories]
    labels = _string_index(*_set_labels_kernel.set_labels(offsets, codes, *_utf8_table(names)))
    if _sets_read_apart(names):
        return labels, inverse
    return _distinct_labels(labels, inverse)


def _csr_rows(offsets: np.ndarray, codes: np.ndarray, rows: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The slices ``rows`` of a CSR ``(offsets, codes)``, as a CSR of their own."""
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    # Position p of the new codes reads old position p + (start - new start) of its slice.
    shift = np.repeat(starts - new_offsets[:-1], lengths)
    return new_offsets, codes[np.arange(new_offsets[-1], dtype=np.int64) + shift]


def _sets_read_apart(names: list[str]) -> bool:
    """Whether distinct sets of these names always get distinct labels.

    They do when the names are distinct and none contains ``", "``: a label of several names then
    contains ``", "`` and a single name does not, and splitting ``"{...}"`` at every ``", "`` gives
    back its names (a name's ``","`` or ``" "`` cannot join the separator into another ``", "``).
    Otherwise the labels are compared (the set ``{a, b}`` and the category ``"{a, b}"`` read alike).
    """
    return len(set(names)) == len(names) and not any(", " in name for name in names)


def bound_labels(qi: EncodedQI, lo: np.ndarray, hi: np.ndarray, missing: np.ndarray
                 ) -> tuple[pd.Index, np.ndarray]:
    """Labels of a range or hierarchy QI given each class's key bounds: ``(labels, inverse)``.

    ``lo``, ``hi`` (int64) and ``missing`` (bool) hold one class (or one
    row, with its class's bounds) each, as :func:`dmondrian._kernel.class_statistics`
    gives them; the labels are those :func:`class_values` publishes.

    Examples
    --------
    >>> from dmondrian.encoding.qi import encode_qi
    >>> qi = encode_qi(pd.Series([20, 30, 40]))
    >>> labels, inverse = bound_labels(qi, np.array([20, 30, 20]), np.array([30, 30, 30]),
    ...                                np.zeros(3, dtype=bool))
    >>> labels[inverse].tolist()
    ['[20, 30]', '30', '[20, 30]']
    """
    stats = (None, *(np.ascontiguousarray(np.asarray(a).reshape(-1, 1), dtype=t) for a,
                     t in ((lo, np.int64), (hi, np.int64), (missing, np.bool_))), None, None)
    return _LABELLERS[qi.spec.label_shape](qi, 0, stats, None)


def _node_labels(qi: EncodedQI, j: int, stats, sorted_row) -> tuple[pd.Index, np.ndarray]:
    """Every class's lowest common ancestor in the QI's hierarchy."""
    lo, hi = stats[1][:, j], stats[2][:, j]
    first, inverse = _distinct_rows(lo, hi)
    h = qi.hierarchy
    labels = np.asarray([h.labels[h.lca_node(int(lo[i]), int(hi[i]))] for i in first], dtype=object)
    return _distinct_labels(labels, inverse)


def _distinct_labels(values: np.ndarray, inverse: np.ndarray) -> tuple[pd.Index, np.ndarray]:
    """Merge classes whose labels coincide (two code ranges with the same common
    ancestor, set members whose names contain ", "): one published value each."""
    codes, uniques = pd.factorize(values)
    return pd.Index(uniques, tupleize_cols=False), codes[inverse]


def class_values(qi: EncodedQI, j: int, generalization: str, stats, sorted_row) -> tuple:
    """Published value of every class for one QI.

    ``j`` is the QI's row in the key matrix and ``stats`` the output of
    :func:`dmondrian._kernel.class_statistics`. Returns ``(values, inverse)`` where
    ``values[inverse[c]]`` is class ``c``'s published value. ``values`` is a pandas Index of
    distinct labels (strings) or, for midpoint/mean, an array of one number per class with
    ``inverse`` the identity.
    """
    spec = qi.spec
    if not spec.publishes_labels(generalization):
        _, lo, hi, _, total, present = stats
        return (spec.summary(qi, generalization, lo[:, j], hi[:, j], total[:, j], present[:, j]),
                np.arange(lo.shape[0]))
    return _LABELLERS[spec.label_shape](qi, j, stats, sorted_row)


# How each label shape (:attr:`dmondrian.kinds.QIKindSpec.label_shape`) is built.
_LABELLERS = {"range": _range_labels, "set": _set_labels, "node": _node_labels}


# Largest category counts pandas keeps in int8, int16 and int32 codes.
_CODE_DTYPES = [(np.iinfo(t).max, t) for t in (np.int8, np.int16, np.int32)]


def _code_dtype(n_labels: int):
    """The code dtype pandas gives a Categorical of ``n_labels`` categories."""
    for bound, dtype in _CODE_DTYPES:
        if n_labels < bound:
            return dtype
    return np.int64


def missing_as_null(labels: pd.Index, inverse: np.ndarray) -> tuple[pd.Index, np.ndarray]:
    """``(labels, inverse)`` with the label of the all-missing classes, ``<NA>``, taken out:
    their ``inverse`` becomes -1, the Categorical's missing value.

    Examples
    --------
    >>> labels, inverse = missing_as_null(pd.Index(["[1, 2]", "<NA>", "3"]), np.array([1, 0, 2]))
    >>> labels.tolist(), inverse.tolist()
    (['[1, 2]', '3'], [-1, 0, 1])
    """
    data = getattr(labels.array, "_pa_array", None)
    if data is not None and (pa.types.is_large_string(data.type) or pa.types.is_string(data.type)):
        # Arrow text: Arrow's own search, without pandas' comparison around it.
        at = pc.index(data, MISSING_LABEL).as_py()
    else:  # A comparison, not get_indexer: that builds a hash table of every label first.
        hits = np.flatnonzero(np.asarray(labels == MISSING_LABEL, dtype=bool))
        at = int(hits[0]) if len(hits) else -1
    if at < 0:
        return labels, inverse
    inverse = np.asarray(inverse)
    return labels.delete(at), np.where(inverse == at, -1, inverse - (inverse > at))


def expand_labels(labels: pd.Index, inverse: np.ndarray, class_of_row: np.ndarray
                  ) -> pd.Categorical:
    """Row-aligned Categorical of class labels.

    Parameters
    ----------
    labels : pandas.Index
        Distinct labels, as :func:`class_values` returns them.
    inverse : ndarray of int
        Label index of every class.
    class_of_row : ndarray of int
        Class of every row.

    Returns
    -------
    pandas.Categorical
        Row ``i`` is ``labels[inverse[class_of_row[i]]]``; missing where that
        label is ``<NA>`` (:func:`missing_as_null`).

    Examples
    --------
    >>> expand_labels(pd.Index(["[1, 2]", "3"]), np.array([1, 0]), np.array([0, 1, 1])).tolist()
    ['3', '[1, 2]', '[1, 2]']
    """
    labels, inverse = missing_as_null(labels, inverse)
    codes = np.take(np.asarray(inverse).astype(_code_dtype(len(labels))), class_of_row)
    return pd.Categorical.from_codes(codes, dtype=categorical_dtype(labels), validate=False)


def expand_label_columns(columns: list, class_of_row: np.ndarray) -> list:
    """Row-aligned Categoricals of several columns' class labels, in one pass over the rows.

    Parameters
    ----------
    columns : list of (labels, inverse)
        Each column's distinct labels (a pandas Index) and label index of every class, as
        :func:`class_values` returns them; every ``inverse`` has one entry per class.
    class_of_row : ndarray of int64
        Class of every row.

    Returns
    -------
    list of pandas.Categorical
        Column ``j`` equals ``expand_labels(*columns[j], class_of_row)``.

    Examples
    --------
    >>> cols = [(pd.Index(["a", "b"]), np.array([1, 0])), (pd.Index(["x"]), np.array([0, 0]))]
    >>> [c.tolist() for c in expand_label_columns(cols, np.array([0, 1, 1]))]
    [['b', 'a', 'a'], ['x', 'x', 'x']]
    """
    class_of_row = np.ascontiguousarray(class_of_row, dtype=np.int64)
    columns = [missing_as_null(*column) for column in columns]
    out = [None] * len(columns)
    by_dtype = {}
    for j, (labels, _) in enumerate(columns):
        by_dtype.setdefault(np.dtype(_code_dtype(len(labels))), []).append(j)
    for dtype, group in by_dtype.items():
        # Columns whose codes share a type are gathered together: the class
        # ids are read once and each row reads one line of the table.
        table = np.ascontiguousarray(
            np.stack([np.asarray(columns[j][1]) for j in group], axis=1), dtype=dtype)
        codes = np.empty((len(group), len(class_of_row)), dtype=dtype)
        K.gather_codes(class_of_row, table, codes)
        for row, j in enumerate(group):
            out[j] = pd.Categorical.from_codes(codes[row], dtype=categorical_dtype(columns[j][0]),
                                               validate=False)
    return out
