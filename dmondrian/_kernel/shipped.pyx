"""Compiled passes of :mod:`dmondrian._dask.shipped_keys`: keys into their narrow shipped type
and back.

In a narrow type -1 stands for the missing key; every other value is the
key's offset above the QI's smallest key, in units of the QI's step.
"""

import numpy as np

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t

from dmondrian._kernel._bits cimport is_int_max
from dmondrian._kernel._common cimport MISSING_KEY, i64, int_t, popcount, u64

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define DM_PREFETCH(p) __builtin_prefetch(p)
    #else
    #define DM_PREFETCH(p) ((void)0)
    #endif
    """
    void prefetch "DM_PREFETCH"(const void* p) noexcept nogil

__all__ = []

# How many rows ahead a gather asks for its shipped value: the order is
# random, so without it every row waits for a cache miss.
cdef enum:
    PREFETCH_AHEAD = 32


def _narrow_into(const i64[:] row, i64 offset, i64 step, i64 top, int_t[::1] out):
    """``out[i] = (row[i] - offset) / step`` (missing: -1); False if one falls outside
    [0, top] or is no multiple of ``step`` above ``offset``."""
    cdef Py_ssize_t n = row.shape[0], i
    cdef bint ok = True
    cdef i64 v, u, m
    cdef u64 d, q, ustep = <u64>step
    if out.shape[0] < n:
        raise ValueError(f"the output holds {out.shape[0]} values, {n} are written")
    if n == 0:
        return True
    if row.strides[0] != sizeof(i64):
        row = np.ascontiguousarray(row)
    cdef const i64* src = &row[0]
    cdef int_t* dst = &out[0]
    # The top of a narrow type is 2**bits - 1.
    cdef bint all_ones = top >= 0 and (top & (top + 1)) == 0
    cdef i64 bits = popcount(<u64>top) if all_ones else 0
    cdef u64 bad = 0
    if step < 1:
        raise ValueError(f"a key step is positive, got {step}")
    with nogil:
        if step > 1:
            # Modulo 2**64: a key below ``offset`` wraps far above ``top``.
            for i in range(n):
                v = src[i]
                if v == MISSING_KEY:
                    dst[i] = -1
                else:
                    d = <u64>v - <u64>offset
                    q = d / ustep
                    ok &= (q * ustep == d) & (q <= <u64>top)
                    dst[i] = <int_t>q
        elif all_ones:
            # u lies in [0, top] when no bit from ``bits`` up is set. Branch-free:
            # the loop vectorizes.
            for i in range(n):
                v = src[i]
                m = is_int_max(v)  # 1 for the missing key
                u = v - offset
                bad |= (<u64>u >> bits) & <u64>(m - 1)
                dst[i] = <int_t>(u | -m)  # -1 when missing
            ok = bad == 0
        else:
            for i in range(n):
                v = src[i]
                if v == MISSING_KEY:
                    dst[i] = -1
                else:
                    u = v - offset
                    ok &= (u >= 0) & (u <= top)
                    dst[i] = <int_t>u
    return ok


def _gather_into(const int_t[:] shipped, const i64[:] order, i64[::1] out, bint narrow,
                 i64 offset, i64 step):
    """``out[i]`` = the int64 key of row ``order[i]`` of a shipped key column: a narrow
    value ``v`` stands for ``v * step + offset``."""
    cdef Py_ssize_t n = order.shape[0], i
    cdef i64 v
    if out.shape[0] < n:
        raise ValueError(f"the output holds {out.shape[0]} values, {n} are written")
    if n == 0:
        return
    if shipped.shape[0] and shipped.strides[0] != sizeof(int_t):
        shipped = np.ascontiguousarray(shipped)
    if order.strides[0] != sizeof(i64):
        order = np.ascontiguousarray(order)
    cdef const int_t* src = &shipped[0] if shipped.shape[0] else NULL
    cdef const i64* at = &order[0]
    cdef i64* dst = &out[0]
    cdef Py_ssize_t ahead = max(n - PREFETCH_AHEAD, 0)
    with nogil:
        if narrow:
            for i in range(ahead):
                prefetch(&src[at[i + PREFETCH_AHEAD]])
                v = src[at[i]]
                dst[i] = MISSING_KEY if v == -1 else <i64>(<u64>v * <u64>step + <u64>offset)
            for i in range(ahead, n):
                v = src[at[i]]
                dst[i] = MISSING_KEY if v == -1 else <i64>(<u64>v * <u64>step + <u64>offset)
        else:
            for i in range(ahead):
                prefetch(&src[at[i + PREFETCH_AHEAD]])
                dst[i] = src[at[i]]
            for i in range(ahead, n):
                dst[i] = src[at[i]]
