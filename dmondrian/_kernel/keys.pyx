"""Single-pass encoders: column values to kernel keys, with their bounds.

Each function reads a column once and returns its int64 keys together with
the smallest and largest present key, which :mod:`dmondrian.encoding.qi` turns into
the global scale. Doing both in one pass (instead of numpy's mask, copy,
where, min and max, each a pass of its own) matters on tables of tens of
millions of rows, where encoding otherwise costs as much as a tree level.

Missing values get ``MISSING_KEY``; the bounds ignore them and are
``(MISSING_KEY, INT64_MIN)`` when every value is missing.
"""

import numpy as np

from libc.math cimport INFINITY
from libc.stdint cimport uint8_t
from libc.string cimport memcpy

from dmondrian._kernel._common cimport FLIP, INT_MIN, MISSING_KEY, i64

__all__ = ["int_keys", "sentinel_keys", "float_keys"]


def int_keys(const i64[::1] raw, missing):
    """Keys of int64 values, and their bounds.

    Parameters
    ----------
    raw : int64 array (n,)
        The values (C-contiguous).
    missing : bool array (n,) or (0,)
        Which values are missing; empty when none is.

    Returns
    -------
    keys : int64 array (n,)
        ``raw``, with ``MISSING_KEY`` where ``missing``.
    lo, hi : int
        Smallest and largest present key (``MISSING_KEY``, ``INT64_MIN``
        when none is present).
    reserved : bool
        True when a present value equals ``MISSING_KEY`` (2**63 - 1), which
        the caller refuses.
    """
    cdef Py_ssize_t n = raw.shape[0], i
    # numpy's bool buffers have a format memoryviews of a C type do not take.
    cdef const uint8_t[::1] miss = np.ascontiguousarray(missing).view(np.uint8)
    cdef bint masked = miss.shape[0] > 0
    if masked and miss.shape[0] < n:
        raise ValueError("missing holds fewer values than raw")
    keys = np.empty(n, dtype=np.int64)
    cdef i64[::1] kv = keys
    cdef i64 lo = MISSING_KEY, hi = INT_MIN, v
    cdef bint reserved = False
    cdef const i64* src
    cdef const uint8_t* m
    cdef i64* dst
    if n == 0:
        return keys, lo, hi, reserved
    src = &raw[0]
    dst = &kv[0]
    m = &miss[0] if masked else NULL
    with nogil:
        if masked:
            for i in range(n):
                if m[i]:
                    dst[i] = MISSING_KEY
                    continue
                v = src[i]
                reserved |= v == MISSING_KEY
                dst[i] = v
                lo = v if v < lo else lo
                hi = v if v > hi else hi
        else:
            # No mask: a loop the compiler vectorizes.
            for i in range(n):
                v = src[i]
                reserved |= v == MISSING_KEY
                dst[i] = v
                lo = v if v < lo else lo
                hi = v if v > hi else hi
    return keys, lo, hi, reserved


def sentinel_keys(const i64[::1] raw, i64 missing_at_or_below):
    """Keys of int64 values where any value ``<= missing_at_or_below`` is missing.

    Datetimes viewed as int64 mark NaT as ``INT64_MIN``; category codes mark
    missing as -1.

    Parameters
    ----------
    raw : int64 array (n,)
        The values (C-contiguous).
    missing_at_or_below : int
        The largest value that stands for missing.

    Returns
    -------
    keys : int64 array (n,)
        ``raw``, with ``MISSING_KEY`` for the missing values.
    lo, hi : int
        Smallest and largest present key (``MISSING_KEY``, ``INT64_MIN``
        when none is present).
    """
    cdef Py_ssize_t n = raw.shape[0], i
    keys = np.empty(n, dtype=np.int64)
    cdef i64[::1] kv = keys
    cdef i64 lo = MISSING_KEY, hi = INT_MIN, v
    cdef const i64* src
    cdef i64* dst
    if n == 0:
        return keys, lo, hi
    src = &raw[0]
    dst = &kv[0]
    with nogil:
        for i in range(n):
            v = src[i]
            if v <= missing_at_or_below:
                dst[i] = MISSING_KEY
                continue
            dst[i] = v
            lo = v if v < lo else lo
            hi = v if v > hi else hi
    return keys, lo, hi


def float_keys(const double[::1] values):
    """Order-preserving keys of float64 values; NaN is missing.

    The IEEE bits of a non-negative float already order like the float; a
    negative float's bits are flipped so more negative sorts lower. -0.0 and
    0.0 get the same key.

    Parameters
    ----------
    values : float64 array (n,)
        The values (C-contiguous).

    Returns
    -------
    keys : int64 array (n,)
        The keys, ``MISSING_KEY`` for NaN.
    lo, hi : int
        Smallest and largest present key (``MISSING_KEY``, ``INT64_MIN``
        when none is present).
    first_inf : int
        Position of the first infinite value, or -1.
    """
    cdef Py_ssize_t n = values.shape[0], i
    keys = np.empty(n, dtype=np.int64)
    cdef i64[::1] kv = keys
    cdef i64 lo = MISSING_KEY, hi = INT_MIN, b
    cdef Py_ssize_t first_inf = -1
    cdef double x
    cdef const double* src
    cdef i64* dst
    if n == 0:
        return keys, lo, hi, first_inf
    src = &values[0]
    dst = &kv[0]
    with nogil:
        for i in range(n):
            x = src[i]
            if x != x:
                dst[i] = MISSING_KEY
                continue
            if first_inf < 0 and (x == INFINITY or x == -INFINITY):
                first_inf = i
            memcpy(&b, &src[i], 8)
            if x == 0.0:
                b = 0
            elif b < 0:
                b = b ^ FLIP
            dst[i] = b
            lo = b if b < lo else lo
            hi = b if b > hi else hi
    return keys, lo, hi, first_inf
