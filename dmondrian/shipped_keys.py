"""The QIs as the distributed engine ships them: global kernel keys, not values.

Routing already encodes every QI of a row against the global domain (see
:func:`dmondrian.routing.encode_keys`) to find its leaf. The shuffle then
carries those keys instead of the QI columns themselves, and each output
partition gathers them straight into the kernel's buffer:

1. Nothing is encoded twice: the local engine's encoding of an output
   partition (a factorization of every text column, a copy of every key into
   the kernel's buffer) cost about a tenth of the task.
2. Fewer bytes cross the network: codes of nominal, ordinal and hierarchy QIs
   travel in the narrowest signed integer type that holds them (a 2-category
   text column: 1 byte a row instead of its strings), numbers and dates as the
   int64 keys they already were.
3. The published values come out the same: the local engine publishes from
   keys and per-QI metadata only (category names, value type, hierarchy),
   which :func:`qi_encodings` derives once from the global domain and the
   input's schema. Nominal codes keep the global order, which is the order
   the local engine gives its own codes, so the kernel cuts alike.

A narrow code of -1 stands for the missing key (an ordinal QI's missing
value): every other code is non-negative.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from numba import njit

from . import _kernel as K
from .qi import MISSING_LABEL, EncodedQI, QIKind, encode_qi
from .routing import GlobalDomain

__all__ = ["key_dtypes", "narrow_keys", "gather_keys", "qi_encodings", "bin_encodings"]

_NUMBERS = (QIKind.NUMERIC, QIKind.DATETIME)


def key_dtypes(domain: GlobalDomain) -> list[np.dtype]:
    """The type each QI's keys travel in: int64 for numbers and dates, else the
    narrowest signed integer holding its codes and -1.

    Examples
    --------
    >>> dom = GlobalDomain(["a", "c"], [QIKind.NUMERIC, QIKind.NOMINAL], np.array([0, 3]),
    ...                    np.array([9.0, 1.0]), np.array([0, 3]), [None, ["x", "y"]],
    ...                    [None, None], 10)
    >>> [str(t) for t in key_dtypes(dom)]
    ['int64', 'int8']
    """
    return [np.dtype(np.int64) if kind in _NUMBERS
            else np.min_scalar_type(-max(1, int(domain.slots[j])))
            for j, kind in enumerate(domain.kinds)]


def narrow_keys(keys: np.ndarray, dtypes: list) -> list[np.ndarray]:
    """Each row of a ``(d, n)`` key matrix in its travel type (views where it is int64)."""
    out = []
    for row, dtype in zip(keys, dtypes, strict=True):
        if dtype == np.int64:
            out.append(row)
        else:
            narrow = np.empty(row.shape[0], dtype=dtype)
            _narrow_into(row, narrow)
            out.append(narrow)
    return out


@njit(cache=True, nogil=True)
def _narrow_into(row, out):
    for i in range(row.shape[0]):
        v = row[i]
        out[i] = -1 if v == K.MISSING_KEY else v


def gather_keys(shipped: np.ndarray, order: np.ndarray, out: np.ndarray) -> None:
    """``out[i]`` = the int64 key of row ``order[i]`` of a shipped key column."""
    _gather_into(shipped, order, out, shipped.dtype.itemsize < 8)


@njit(cache=True, nogil=True)
def _gather_into(shipped, order, out, narrow):
    for i in range(order.shape[0]):
        v = np.int64(shipped[order[i]])
        out[i] = K.MISSING_KEY if narrow and v == -1 else v


def qi_encodings(domain: GlobalDomain, meta: pd.DataFrame) -> list[EncodedQI]:
    """Every QI's :class:`EncodedQI` without keys: what publishing needs besides them.

    Numbers and dates take their value type (and time zone) from the input's
    schema ``meta``, codes their names from the global domain; scales are the
    global ones.
    """
    empty = np.zeros(0, dtype=np.int64)
    out = []
    for j, (name, kind) in enumerate(zip(domain.names, domain.kinds, strict=True)):
        scale = float(domain.scales[j])
        if kind in _NUMBERS:
            enc = dataclasses.replace(encode_qi(meta[name], kind=kind), keys=empty, scale=scale)
        elif kind == QIKind.HIERARCHY:
            enc = EncodedQI(name, kind, K.KIND_HIERARCHY, empty, scale,
                            hierarchy=domain.hierarchies[j], dtype=meta[name].dtype)
        elif kind == QIKind.ORDINAL:
            enc = EncodedQI(name, kind, K.KIND_ORDINAL, empty, scale,
                            categories=list(domain.categories[j]),
                            dtype=domain.ordinal_dtype(j))
        else:
            enc = EncodedQI(name, kind, K.KIND_NOMINAL, empty, scale,
                            card=int(domain.slots[j]),
                            categories=[*domain.categories[j], MISSING_LABEL],
                            dtype=meta[name].dtype)
        out.append(enc)
    return out


def bin_encodings(encodings: list[EncodedQI], key_rows: np.ndarray) -> list[EncodedQI]:
    """The encodings of one output partition whose keys fill ``key_rows`` (d, n).

    A nominal QI with more codes than the kernel keeps as a bitmask has its
    codes renumbered, in place and in the same order, to the ones present:
    as many as the local engine's own encoding of the rows would give, so the
    kernel keeps its bitmask path (and knows when the QI is constant).
    """
    out = []
    for enc, row in zip(encodings, key_rows, strict=True):
        enc = dataclasses.replace(enc, keys=row)
        if enc.kernel_kind == K.KIND_NOMINAL and enc.card > K._MASK_CARD:
            present = np.flatnonzero(np.bincount(row, minlength=enc.card))
            remap = np.zeros(enc.card, dtype=np.int64)
            remap[present] = np.arange(present.size)
            row[:] = remap[row]
            enc = dataclasses.replace(enc, card=int(present.size),
                                      categories=[enc.categories[c] for c in present])
        out.append(enc)
    return out
