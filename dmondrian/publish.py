"""How a generalized quasi-identifier is published, and how to read it back.

Published forms (``generalization="range"``, the default)
---------------------------------------------------------
=========== ================================= ===============================
kind         one value in the class            several values
=========== ================================= ===============================
numeric      ``23``, ``-1.5``                  ``[-3.5, 2]`` (closed interval)
datetime     ``2020-01-31``                    ``[2020-01-01, 2020-03-05T10:00]``
ordinal      ``Bachelors``                     ``[Bachelors, Masters]`` (labels)
nominal      ``Private``                       ``{Private, Self-emp-inc}``
hierarchy    ``Private``                       the lowest common ancestor, ``gov``
=========== ================================= ===============================

A class holding missing values publishes ``<NA>`` alone when every value is
missing, and appends `` or <NA>`` to the range otherwise (nominal sets simply
contain ``<NA>``). Numbers are written in Python's shortest round-trip form,
so :func:`parse_range` gives back the exact bounds, negatives and floats
included. Datetimes are ISO 8601 with the shortest unit that loses nothing.

Each class's label is built once (range labels in compiled code, see
:mod:`dmondrian._kernel.labels`) and expanded to rows as a pandas Categorical,
never formatted per row.

``generalization="midpoint"`` / ``"mean"`` publish, for numeric and datetime
QIs, the midpoint of the class range or the class mean (microaggregation with a
guaranteed class size); other kinds keep their labels.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from . import _kernel as K
from ._kernel import labels as _labels
from .errors import ParseError
from .qi import MISSING_LABEL, EncodedQI, QIKind, decode_float_keys

__all__ = ["Interval", "parse_range", "parse_set", "class_values", "expand_labels",
           "MISSING_LABEL"]

_OR_MISSING = " or " + MISSING_LABEL


class Interval(NamedTuple):
    """Bounds of a published value: ``lo <= original <= hi``, or missing."""

    lo: object
    hi: object
    missing: bool

    def contains(self, value) -> bool:
        """Whether an original value is covered by this published value."""
        if value is None or (not isinstance(value, str) and pd.isna(value)):
            return self.missing
        if self.lo is None:
            return False
        return self.lo <= value <= self.hi


_INT = re.compile(r"[+-]?\d+\Z")


def _parse_scalar(text: str, kind: str, label: str):
    text = text.strip()
    try:
        if kind == QIKind.NUMERIC:
            return int(text) if _INT.match(text) else float(text)
        if kind == QIKind.DATETIME:
            return pd.Timestamp(text)
        return text
    except ValueError:
        raise ParseError(f"cannot read {text!r} in published value {label!r} as {kind}") from None


def parse_range(label, kind: str = QIKind.NUMERIC) -> Interval:
    """Parse a published range back into its bounds.

    Parameters
    ----------
    label : str
        A value published by :func:`dmondrian.anonymize` for a numeric,
        datetime or ordinal quasi-identifier.
    kind : {"numeric", "datetime", "ordinal"}
        How to read the bounds: numbers (int when written as one), pandas
        Timestamps, or category labels.

    Returns
    -------
    Interval
        ``(lo, hi, missing)``; ``lo`` and ``hi`` are None when the class holds
        only missing values.

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
    if not isinstance(label, str):
        raise ParseError(f"published value {label!r} is not a string")
    text = label.strip()
    missing = False
    if text == MISSING_LABEL:
        return Interval(None, None, True)
    if text.endswith(_OR_MISSING):
        missing = True
        text = text[: -len(_OR_MISSING)].rstrip()
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        parts = inner.split(", ")
        if len(parts) != 2:
            raise ParseError(f"published range {label!r} must look like '[lo, hi]'")
        lo = _parse_scalar(parts[0], kind, label)
        hi = _parse_scalar(parts[1], kind, label)
        return Interval(lo, hi, missing)
    value = _parse_scalar(text, kind, label)
    return Interval(value, value, missing)


def parse_set(label) -> frozenset:
    """Parse a published nominal value into the set of values it stands for.

    Examples
    --------
    >>> sorted(parse_set("{Private, Self-emp-inc}"))
    ['Private', 'Self-emp-inc']
    >>> parse_set("Private")
    frozenset({'Private'})
    """
    if not isinstance(label, str):
        raise ParseError(f"published value {label!r} is not a string")
    text = label.strip()
    if text.startswith("{") and text.endswith("}"):
        return frozenset(text[1:-1].split(", "))
    return frozenset([text])


# -- building labels --------------------------------------------------------------------------


def _distinct_rows(*columns):
    """Distinct rows of equal-length int arrays: ``(first_of_each, inverse)``.

    A lexsort and a diff: much faster than ``np.unique(axis=0)``, which sorts
    rows as opaque records.
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


def _decode(qi: EncodedQI, keys: np.ndarray) -> np.ndarray:
    """Original values (numeric: int64/float64; datetime: datetime64) of present keys."""
    if qi.kernel_kind == K.KIND_FLOAT:
        return decode_float_keys(keys)
    if qi.kind == QIKind.DATETIME:
        return keys.view(f"datetime64[{qi.value_type}]")
    return keys


def _utf8_table(strings) -> tuple[np.ndarray, np.ndarray]:
    """Python strings as one UTF-8 buffer and offsets (see :mod:`dmondrian._kernel.labels`)."""
    encoded = [s.encode("utf-8") for s in strings]
    off = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=off[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), off


def _python_strings(qi: EncodedQI, values: np.ndarray) -> list[str]:
    """Strings of distinct present keys of an ordinal or datetime QI whose
    bounds the compiled formatter copies from a table."""
    if qi.kind == QIKind.ORDINAL:
        return [str(qi.categories[v]) for v in values]
    decoded = _decode(qi, values)
    if qi.tz is not None:
        stamps = pd.DatetimeIndex(decoded).tz_localize("UTC").tz_convert(qi.tz)
        return [t.isoformat() for t in stamps]
    return np.datetime_as_string(decoded, unit="auto").tolist()


def _string_index(buf: np.ndarray, off: np.ndarray) -> pd.Index:
    """An Index of the strings of ``(buf, off)``, of the dtype pandas gives Python strings."""
    arr = pa.LargeStringArray.from_buffers(len(off) - 1, pa.py_buffer(off), pa.py_buffer(buf))
    dtype = pd.Index(np.array([""], dtype=object)).dtype
    if isinstance(dtype, pd.StringDtype):
        return pd.Index(pd.array(arr, dtype=dtype))
    return pd.Index(np.asarray(arr.to_pylist(), dtype=object))


def _group_triples(lo, hi, missing, j: int):
    """Distinct (lo, hi, missing) triples of column ``j``, in sorted order, and each class's.

    Classes with every value missing (lo = ``MISSING_KEY``) share the last
    triple. The sort is one ``np.sort`` of the words of
    :func:`dmondrian._kernel.labels.pack_triples` (numpy's vectorized sort of plain
    words is several times faster than an argsort or a lexsort); a lexsort
    when the words hold only a prefix of lo and its ties run long.

    Returns
    -------
    u_lo, u_hi, u_missing, inverse : arrays
    """
    triples, packed, idx_bits, exact = _labels.pack_triples(lo, hi, missing, j)
    packed.sort()
    n = len(lo)
    inverse, u_lo, u_hi, u_missing, ok = _labels.group_packed(n, triples, packed, idx_bits,
                                                              exact)
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


_NO_TABLE = (np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64))


def _format_labels(qi: EncodedQI, u_lo, u_hi, u_missing) -> tuple[np.ndarray, np.ndarray]:
    """Labels of distinct triples as ``(buf, off)``, written by the compiled formatter."""
    per_sec = _labels.DATETIME_UNITS.get(qi.value_type, 0)
    table = _NO_TABLE
    if qi.kind == QIKind.NUMERIC:
        fmt = _labels.FMT_FLOAT if qi.kernel_kind == K.KIND_FLOAT else _labels.FMT_INT
    elif qi.kind == QIKind.DATETIME and qi.tz is None and per_sec:
        fmt = _labels.FMT_DATETIME
    else:
        # Ordinal names, tz-aware datetimes, unusual units: the strings of the
        # distinct bounds, made in Python, and the bounds as indices into them.
        fmt = _labels.FMT_TABLE
        present = u_lo != K.MISSING_KEY
        values, idx = np.unique(np.concatenate([u_lo[present], u_hi[present]]),
                                return_inverse=True)
        u_lo, u_hi = u_lo.copy(), u_hi.copy()
        u_lo[present], u_hi[present] = np.split(idx, 2)
        table = _utf8_table(_python_strings(qi, values))
    return _labels.format_labels(u_lo, u_hi, u_missing, fmt, per_sec, *table)


def _range_labels(qi: EncodedQI, lo, hi, missing, j: int) -> tuple[pd.Index, np.ndarray]:
    """Labels of the distinct (lo, hi, missing) triples of column ``j``, and each class's."""
    u_lo, u_hi, u_missing, inverse = _group_triples(lo, hi, missing, j)
    labels = _string_index(*_format_labels(qi, u_lo, u_hi, u_missing))
    if qi.kind == QIKind.ORDINAL and not labels.is_unique:
        # Category names can make two ranges read alike ("[a, b]" the name
        # and the range a..b): merge them, as one published value.
        codes, labels = pd.factorize(labels)
        inverse = codes[inverse]
    return labels, inverse


def _set_label(names: list[str]) -> str:
    return names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"


# Up to this many codes, class sets are compared as bitmasks (64 codes a word).
_MASK_CODES = 4096


def _nominal_labels(qi: EncodedQI, sorted_row, class_of_pos, n_classes):
    names = [str(c) for c in qi.categories]
    if qi.card <= _MASK_CODES:
        words = (qi.card + 63) // 64
        masks = K.class_code_masks(sorted_row, class_of_pos, n_classes, words).view(np.int64)
        first, inverse = _distinct_rows(*masks.T)
        bits = np.unpackbits(masks[first].view(np.uint8), axis=1, bitorder="little")
        # Every member of every set in one nonzero (row-major: sets in order,
        # codes ascending), then one slice of names per set.
        set_of, codes = np.nonzero(bits)
        members = [names[c] for c in codes.tolist()]
        ends = np.cumsum(np.bincount(set_of, minlength=len(first))).tolist()
        labels = [_set_label(members[a:b]) for a, b in zip([0, *ends[:-1]], ends)]
        return np.asarray(labels, dtype=object), inverse
    offsets, codes = K.class_code_sets(sorted_row, class_of_pos, n_classes)
    cache: dict[bytes, int] = {}
    labels: list[str] = []
    inverse = np.empty(n_classes, dtype=np.int64)
    for c in range(n_classes):
        members = codes[offsets[c]: offsets[c + 1]]
        key = members.tobytes()
        idx = cache.get(key)
        if idx is None:
            idx = len(labels)
            cache[key] = idx
            labels.append(_set_label([names[m] for m in members.tolist()]))
        inverse[c] = idx
    return np.asarray(labels, dtype=object), inverse


def _hierarchy_labels(qi: EncodedQI, lo, hi):
    first, inverse = _distinct_rows(lo, hi)
    h = qi.hierarchy
    labels = np.asarray([h.labels[h.lca_node(int(lo[i]), int(hi[i]))] for i in first],
                        dtype=object)
    return labels, inverse


def _numeric_summary(qi: EncodedQI, how: str, lo, hi, total, present) -> np.ndarray:
    """Midpoint or mean of every class (NaN / NaT for all-missing classes)."""
    empty = present == 0
    if qi.kind == QIKind.DATETIME:
        a = np.where(empty, 0, lo)
        if how == "midpoint":
            ns = a + (np.where(empty, 0, hi) - a) // 2
        else:
            ns = np.rint(total / np.maximum(present, 1)).astype(np.int64)
        out = ns.view(f"datetime64[{qi.value_type}]").copy()
        out[empty] = np.datetime64("NaT")
        return out
    if how == "midpoint":
        a = _decode(qi, np.where(empty, 0, lo)).astype(np.float64)
        b = _decode(qi, np.where(empty, 0, hi)).astype(np.float64)
        out = a + (b - a) / 2.0
    else:
        out = total / np.maximum(present, 1)
    out[empty] = np.nan
    return out


def _distinct_labels(values: np.ndarray, inverse: np.ndarray) -> tuple[pd.Index, np.ndarray]:
    """Merge classes whose labels coincide (two code ranges with the same common
    ancestor, set members whose names contain ", "): one published value each."""
    codes, uniques = pd.factorize(values)
    return pd.Index(uniques, tupleize_cols=False), codes[inverse]


def class_values(qi: EncodedQI, j: int, generalization: str, stats, sorted_row) -> tuple:
    """Published value of every class for one QI.

    ``j`` is the QI's row in the key matrix and ``stats`` the output of
    :func:`dmondrian._kernel.class_statistics`. Returns ``(values, inverse)``
    where ``values[inverse[c]]`` is class ``c``'s published value.
    ``values`` is a pandas Index of distinct labels (strings) or, for
    midpoint/mean, an array of one number per class with ``inverse`` the
    identity.
    """
    class_of_pos, lo, hi, missing, total, present = stats
    n_classes = lo.shape[0]
    if generalization != "range" and qi.kind in (QIKind.NUMERIC, QIKind.DATETIME):
        return (_numeric_summary(qi, generalization, lo[:, j], hi[:, j], total[:, j],
                                 present[:, j]), np.arange(n_classes))
    if qi.kind == QIKind.NOMINAL:
        return _distinct_labels(*_nominal_labels(qi, sorted_row, class_of_pos, n_classes))
    if qi.kind == QIKind.HIERARCHY:
        return _distinct_labels(*_hierarchy_labels(qi, lo[:, j], hi[:, j]))
    return _range_labels(qi, lo, hi, missing, j)


# Largest category counts pandas keeps in int8, int16 and int32 codes.
_CODE_DTYPES = [(np.iinfo(t).max, t) for t in (np.int8, np.int16, np.int32)]


def _code_dtype(n_labels: int):
    """The code dtype pandas gives a Categorical of ``n_labels`` categories."""
    for bound, dtype in _CODE_DTYPES:
        if n_labels < bound:
            return dtype
    return np.int64


def _label_dtype(labels: pd.Index) -> pd.CategoricalDtype:
    # The labels are distinct and never missing by construction; pandas'
    # public constructor would check that again by hashing every label as a
    # Python string, which costs more than building them.
    fastpath = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    if fastpath is None:  # pragma: no cover - pandas without the fast path
        return pd.CategoricalDtype(labels)
    return fastpath(labels, False)


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
        Row ``i`` is ``labels[inverse[class_of_row[i]]]``.

    Examples
    --------
    >>> expand_labels(pd.Index(["[1, 2]", "3"]), np.array([1, 0]), np.array([0, 1, 1])).tolist()
    ['3', '[1, 2]', '[1, 2]']
    """
    codes = np.take(np.asarray(inverse).astype(_code_dtype(len(labels))), class_of_row)
    return pd.Categorical.from_codes(codes, dtype=_label_dtype(labels), validate=False)
