"""Single-pass numba encoders: column values to kernel keys, with their bounds.

Each function reads a column once and returns its int64 keys together with
the smallest and largest present key, which :mod:`dmondrian.qi` turns into
the global scale. Doing both in one pass (instead of numpy's mask, copy,
where, min and max, each a pass of its own) matters on tables of tens of
millions of rows, where encoding otherwise costs as much as a tree level.

Missing values get ``MISSING_KEY``; the bounds ignore them and are
``(MISSING_KEY, INT64_MIN)`` when every value is missing.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._kernel import _FLIP, _INT_MIN, MISSING_KEY


@njit(cache=True, nogil=True)
def int_keys(raw, missing):
    """Keys of int64 values; ``missing`` is a bool mask, or empty when none is.

    Returns ``(keys, lo, hi, reserved)``; ``reserved`` is True when a present
    value equals ``MISSING_KEY`` (2**63 - 1), which the caller refuses.
    """
    n = raw.shape[0]
    masked = missing.shape[0] > 0
    keys = np.empty(n, dtype=np.int64)
    lo = MISSING_KEY
    hi = _INT_MIN
    reserved = False
    for i in range(n):
        if masked and missing[i]:
            keys[i] = MISSING_KEY
            continue
        v = raw[i]
        reserved |= v == MISSING_KEY
        keys[i] = v
        lo = min(lo, v)
        hi = max(hi, v)
    return keys, lo, hi, reserved


@njit(cache=True, nogil=True)
def sentinel_keys(raw, missing_at_or_below):
    """Keys of int64 values where any value ``<= missing_at_or_below`` is missing.

    Datetimes viewed as int64 mark NaT as ``INT64_MIN``; category codes mark
    missing as -1. Returns ``(keys, lo, hi)``.
    """
    n = raw.shape[0]
    keys = np.empty(n, dtype=np.int64)
    lo = MISSING_KEY
    hi = _INT_MIN
    for i in range(n):
        v = raw[i]
        if v <= missing_at_or_below:
            keys[i] = MISSING_KEY
            continue
        keys[i] = v
        lo = min(lo, v)
        hi = max(hi, v)
    return keys, lo, hi


@njit(cache=True, nogil=True)
def float_keys(values):
    """Order-preserving keys of float64 values; NaN is missing.

    The IEEE bits of a non-negative float already order like the float; a
    negative float's bits are flipped so more negative sorts lower. -0.0 and
    0.0 get the same key. Returns ``(keys, lo, hi, first_inf)`` where
    ``first_inf`` is the position of the first infinite value, or -1.
    """
    n = values.shape[0]
    bits = values.view(np.int64)
    keys = np.empty(n, dtype=np.int64)
    lo = MISSING_KEY
    hi = _INT_MIN
    first_inf = -1
    for i in range(n):
        x = values[i]
        if np.isnan(x):
            keys[i] = MISSING_KEY
            continue
        if np.isinf(x) and first_inf < 0:
            first_inf = i
        b = bits[i]
        if x == 0.0:
            b = 0
        elif b < 0:
            b = b ^ _FLIP
        keys[i] = b
        lo = min(lo, b)
        hi = max(hi, b)
    return keys, lo, hi, first_inf

