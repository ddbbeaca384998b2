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

Each class's label is built once and expanded to rows as a pandas
Categorical, never formatted per row.

``generalization="midpoint"`` / ``"mean"`` publish, for numeric and datetime
QIs, the midpoint of the class range or the class mean (microaggregation with a
guaranteed class size); other kinds keep their labels.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pandas as pd

from . import _kernel as K
from .errors import ParseError
from .qi import MISSING_LABEL, EncodedQI, QIKind, decode_float_keys

__all__ = ["Interval", "parse_range", "parse_set", "class_values", "MISSING_LABEL"]

_STR = np.dtypes.StringDType()
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


def _value_strings(qi: EncodedQI, keys: np.ndarray) -> np.ndarray:
    """Labels of present keys, formatting each distinct value once."""
    values, inverse = np.unique(keys, return_inverse=True)
    if qi.kind == QIKind.ORDINAL:
        cats = np.asarray([str(c) for c in qi.categories], dtype=_STR)
        return cats[values][inverse]
    decoded = _decode(qi, values)
    if qi.kind == QIKind.DATETIME:
        if qi.tz is not None:
            stamps = pd.DatetimeIndex(decoded).tz_localize("UTC").tz_convert(qi.tz)
            text = np.asarray([t.isoformat() for t in stamps], dtype=_STR)
        else:
            text = np.datetime_as_string(decoded, unit="auto").astype(_STR)
    elif decoded.dtype.kind == "f":
        # Python's repr is the shortest string that reads back to the same
        # float, and is faster here than numpy's Dragon4 cast.
        text = np.asarray(list(map(repr, decoded.tolist())), dtype=_STR)
    else:
        text = decoded.astype(_STR)
    return text[inverse]


def _range_labels(qi: EncodedQI, lo, hi, missing) -> tuple[np.ndarray, np.ndarray]:
    """Labels of the distinct (lo, hi, missing) triples and each class's label index."""
    first, inverse = _distinct_rows(lo, hi, missing.astype(np.int64))
    u_lo, u_hi, u_missing = lo[first], hi[first], missing[first]
    all_missing = u_lo == K.MISSING_KEY
    lo_s = np.full(len(first), MISSING_LABEL, dtype=_STR)
    hi_s = lo_s.copy()
    both = _value_strings(qi, np.concatenate([u_lo[~all_missing], u_hi[~all_missing]]))
    lo_s[~all_missing] = both[: len(both) // 2]
    hi_s[~all_missing] = both[len(both) // 2:]
    pair = np.strings.add(np.strings.add(np.strings.add(np.strings.add("[", lo_s), ", "), hi_s),
                          "]")
    labels = np.where(u_lo == u_hi, lo_s, pair)
    labels = np.where(u_missing & ~all_missing, np.strings.add(labels, _OR_MISSING), labels)
    labels = np.where(all_missing, MISSING_LABEL, labels)
    return labels.astype(object), inverse


def _set_label(categories, codes) -> str:
    if len(codes) == 1:
        return str(categories[codes[0]])
    return "{" + ", ".join(str(categories[c]) for c in codes) + "}"


# Up to this many codes, class sets are compared as bitmasks (64 codes a word).
_MASK_CODES = 4096


def _nominal_labels(qi: EncodedQI, sorted_row, class_of_pos, n_classes):
    if qi.card <= _MASK_CODES:
        words = (qi.card + 63) // 64
        masks = K.class_code_masks(sorted_row, class_of_pos, n_classes, words).view(np.int64)
        first, inverse = _distinct_rows(*masks.T)
        bits = np.unpackbits(masks[first].view(np.uint8), axis=1, bitorder="little")
        labels = [_set_label(qi.categories, np.flatnonzero(row)) for row in bits]
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
            labels.append(_set_label(qi.categories, members))
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


def class_values(qi: EncodedQI, j: int, generalization: str, stats, sorted_row) -> tuple:
    """Published value of every class for one QI.

    ``j`` is the QI's row in the key matrix and ``stats`` the output of
    :func:`dmondrian._kernel.class_statistics`. Returns ``(values, inverse)``
    where ``values[inverse[c]]`` is class ``c``'s published value.
    ``values`` holds distinct labels (strings) or, for midpoint/mean, one
    number per class with ``inverse`` the identity.
    """
    class_of_pos, lo, hi, missing, total, present = stats
    n_classes = lo.shape[0]
    if generalization != "range" and qi.kind in (QIKind.NUMERIC, QIKind.DATETIME):
        return (_numeric_summary(qi, generalization, lo[:, j], hi[:, j], total[:, j],
                                 present[:, j]), np.arange(n_classes))
    if qi.kind == QIKind.NOMINAL:
        return _nominal_labels(qi, sorted_row, class_of_pos, n_classes)
    if qi.kind == QIKind.HIERARCHY:
        return _hierarchy_labels(qi, lo[:, j], hi[:, j])
    return _range_labels(qi, lo[:, j], hi[:, j], missing[:, j])
