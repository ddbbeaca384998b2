"""Order statistics for the kernel: the median of a node's keys, never a sort.

:func:`select_kth` finds the ``kth`` smallest present key of a segment
without reordering it: small segments are copied into scratch memory and
quickselected; large ones are histogrammed into 2048 buckets of the node's
known key range (one read-only pass), then the one bucket holding rank
``kth`` is selected. Two streaming passes instead of a copy, a select and two
counting passes, and the counts of smaller and equal keys come free.
"""

from ._common cimport i64, u64, MISSING_KEY
from ._rules cimport BUCKETS, SMALL, WS_COUNTS, WS_SCRATCH

import numpy as np


cdef inline i64 _median3(i64 x, i64 y, i64 z) noexcept nogil:
    cdef i64 lo = x if x < y else y
    cdef i64 hi = y if x < y else x
    cdef i64 m = hi if hi < z else z
    return lo if lo > m else m


cdef inline bint _precedes(i64 x, i64 y, const i64* counts, bint by_count) noexcept nogil:
    """The heapsort's order: ``x < y``, or more rows first then the smaller code."""
    if by_count:
        return counts[x] > counts[y] or (counts[x] == counts[y] and x < y)
    return x < y


cdef inline void _sift_down(i64* a, Py_ssize_t lo, Py_ssize_t root, Py_ssize_t end,
                            const i64* counts, bint by_count) noexcept nogil:
    cdef Py_ssize_t child
    cdef i64 tmp
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and _precedes(a[lo + child], a[lo + child + 1], counts, by_count):
            child += 1
        if not _precedes(a[lo + root], a[lo + child], counts, by_count):
            return
        tmp = a[lo + root]
        a[lo + root] = a[lo + child]
        a[lo + child] = tmp
        root = child


cdef void heapsort(i64* a, Py_ssize_t lo, Py_ssize_t hi, const i64* counts,
                   bint by_count) noexcept nogil:
    """Sort ``a[lo:hi]`` in place in O(n log n) whatever the input.

    Ascending values, or with ``by_count`` codes in frequency order.
    """
    # Sift-down builds a heap whose root comes *last* in the order, so popping
    # roots to the back leaves the range sorted front to back.
    cdef Py_ssize_t n = hi - lo, start, end
    cdef i64 tmp
    for start in range(n // 2 - 1, -1, -1):
        _sift_down(a, lo, start, n, counts, by_count)
    for end in range(n - 1, 0, -1):
        tmp = a[lo]
        a[lo] = a[lo + end]
        a[lo + end] = tmp
        _sift_down(a, lo, 0, end, counts, by_count)


cdef i64 quickselect(i64* a, Py_ssize_t n, Py_ssize_t kth, i64 rounds) noexcept nogil:
    """The ``kth`` smallest of ``a[:n]``, reordering it, in at most ``rounds`` partitions.

    Three-way partitions around a median-of-three pivot, written without
    data-dependent branches: on the small random segments near the leaves a
    mispredicted branch per element costs more than the comparisons.
    ``rounds`` -1 is the usual budget.
    """
    cdef Py_ssize_t lo = 0, hi = n, m, i, lt, le, step, mid, size
    cdef i64 budget = rounds, pivot, v
    # Introselect's guard: inputs that defeat the pivot choice would make the
    # loop quadratic; past a logarithmic budget, heapsort the rest.
    if budget < 0:
        budget = 8
        m = hi
        while m > 0:
            budget += 2
            m >>= 1
    while hi - lo > 1:
        budget -= 1
        if budget < 0:
            heapsort(a, lo, hi, NULL, False)
            return a[kth]
        size = hi - lo
        if size < 48:
            pivot = _median3(a[lo], a[lo + size // 2], a[hi - 1])
        else:
            # Tukey's ninther: sorted and reversed runs (a column with its
            # missing keys at one end, say) stay linear.
            step = size // 8
            mid = lo + size // 2
            pivot = _median3(_median3(a[lo], a[lo + step], a[lo + 2 * step]),
                             _median3(a[mid - step], a[mid], a[mid + step]),
                             _median3(a[hi - 1 - 2 * step], a[hi - 1 - step], a[hi - 1]))
        # [lo, lt) < pivot, then [lt, le) == pivot, the rest > pivot.
        lt = lo
        for i in range(lo, hi):
            v = a[i]
            a[i] = a[lt]
            a[lt] = v
            lt += v < pivot
        le = lt
        for i in range(lt, hi):
            v = a[i]
            a[i] = a[le]
            a[le] = v
            le += v == pivot
        if kth < lt:
            hi = lt
        elif kth < le:
            return pivot
        else:
            lo = le
    return a[kth]


cdef Selected select_kth(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 lo, i64 hi,
                         i64 kth, i64* scratch, i64* counts, i64* spare) noexcept nogil:
    """The ``kth`` smallest present key of ``row[s:e]``, without reordering it.

    Present keys lie in ``[lo, hi]``. ``scratch`` holds ``SMALL`` keys and
    ``counts`` ``BUCKETS`` counters; ``spare[s:e]`` is free (the other
    buffer's row, which the split overwrites anyway).
    """
    cdef Selected out
    cdef Py_ssize_t n = e - s, i, q, b
    cdef i64 v, below
    cdef u64 span, ulo, ub
    cdef int shift
    cdef i64* inside
    if n <= SMALL:
        for i in range(n):
            scratch[i] = row[s + i]
        out.value = quickselect(scratch, n, kth, -1)
        out.less = 0
        out.equal = 0
        for i in range(n):
            out.less += scratch[i] < out.value
            out.equal += scratch[i] == out.value
        return out
    span = <u64>hi - <u64>lo  # wraps correctly: the true range is < 2**64
    shift = 0
    while (span >> shift) >= <u64>BUCKETS:
        shift += 1
    ulo = <u64>lo
    for b in range(BUCKETS):
        counts[b] = 0
    for i in range(s, e):
        v = row[i]
        if v != MISSING_KEY:
            counts[(<u64>v - ulo) >> shift] += 1
    below = 0
    b = 0
    while below + counts[b] <= kth:
        below += counts[b]
        b += 1
    if shift == 0:  # one key per bucket: the histogram is exact
        out.value = <i64>(ulo + <u64>b)
        out.less = below
        out.equal = counts[b]
        return out
    inside = spare + s
    q = 0
    ub = <u64>b
    for i in range(s, e):
        v = row[i]
        if v != MISSING_KEY and ((<u64>v - ulo) >> shift) == ub:
            inside[q] = v
            q += 1
    out.value = quickselect(inside, q, kth - below, -1)
    out.less = below
    out.equal = 0
    for i in range(q):
        out.less += inside[i] < out.value
        out.equal += inside[i] == out.value
    return out


# Python entry points, for the tests.

def quickselect_py(i64[::1] a, Py_ssize_t kth, i64 rounds=-1):
    """The ``kth`` smallest element of ``a`` (reordered in place), as the kernel finds it."""
    if not 0 <= kth < a.shape[0]:
        raise IndexError("kth out of range")
    return quickselect(&a[0], a.shape[0], kth, rounds)


def select_py(const i64[::1] row, Py_ssize_t s, Py_ssize_t e, i64 lo, i64 hi, i64 kth,
              i64[:, ::1] ws, i64[::1] spare):
    """``(value, n_less, n_equal)`` of the ``kth`` smallest present key of ``row[s:e]``."""
    cdef Selected r = select_kth(&row[0], s, e, lo, hi, kth, &ws[WS_SCRATCH, 0],
                                 &ws[WS_COUNTS, 0], &spare[0])
    return r.value, r.less, r.equal
