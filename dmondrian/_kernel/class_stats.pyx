"""What the published labels need from a partitioning: per-class bounds, sums and code sets.

Classes are contiguous runs of the class-ordered key matrix. Each class is
read by one thread, in position order, so every statistic (floating-point
sums included) is the same whatever the number of threads.
"""

import numpy as np

from cython.parallel cimport prange

from ._common cimport i64, u64, int_t, MISSING_KEY, INT_MIN, key_value, KIND_INT, KIND_FLOAT
from .select cimport heapsort

from .constants import PARALLEL_MIN_ROWS as _PARALLEL_MIN_ROWS_PY

cdef Py_ssize_t PARALLEL_MIN_ROWS = _PARALLEL_MIN_ROWS_PY

cdef extern from *:
    """
    /* Work is handed to threads in this many chunks, so uneven chunks even
       out. */
    #define DM_CHUNKS 64
    """
    const Py_ssize_t CHUNKS "DM_CHUNKS"

# Classes of up to this many rows have their codes sorted by insertion.
cdef enum:
    INSERTION_MAX = 32


cdef struct Classes:
    # The class-ordered (d, n) key matrix, the start of each class, and the
    # statistics class_statistics returns, (n_classes, d) each.
    const i64* keys
    Py_ssize_t d
    Py_ssize_t n
    const i64* starts
    Py_ssize_t n_classes
    const i64* kinds
    i64* class_of_pos
    i64* lo
    i64* hi
    unsigned char* missing
    double* total
    i64* present


cdef void _class_stats_range(const Classes* cs, Py_ssize_t c0, Py_ssize_t c1) noexcept nogil:
    """Fill the statistics of classes ``c0..c1-1``."""
    # Locals: the statistics' writes could otherwise alias the struct's fields.
    cdef const i64* keys = cs.keys
    cdef Py_ssize_t d = cs.d, n = cs.n, n_classes = cs.n_classes
    cdef const i64* starts = cs.starts
    cdef const i64* kinds = cs.kinds
    cdef i64* class_of_pos = cs.class_of_pos
    cdef i64* lo = cs.lo
    cdef i64* hi = cs.hi
    cdef unsigned char* missing = cs.missing
    cdef double* total = cs.total
    cdef i64* present = cs.present
    cdef Py_ssize_t c, s, e, i, j
    cdef i64 kind, c_lo, c_hi, c_present, v
    cdef double c_total
    cdef bint numeric
    cdef const i64* row
    for c in range(c0, c1):
        s = starts[c]
        e = starts[c + 1] if c + 1 < n_classes else n
        for i in range(s, e):
            class_of_pos[i] = c
        for j in range(d):
            kind = kinds[j]
            numeric = kind == KIND_INT or kind == KIND_FLOAT
            row = keys + j * n
            c_lo = MISSING_KEY
            c_hi = INT_MIN
            c_total = 0.0
            c_present = 0
            for i in range(s, e):
                v = row[i]
                if v == MISSING_KEY:
                    continue
                c_present += 1
                c_lo = v if v < c_lo else c_lo
                c_hi = v if v > c_hi else c_hi
                if numeric:
                    c_total += key_value(v, kind)
            lo[c * d + j] = c_lo
            hi[c * d + j] = c_hi
            missing[c * d + j] = c_present < e - s
            total[c * d + j] = c_total
            present[c * d + j] = c_present


def class_statistics(sorted_keys, class_start, kinds, cards, int n_threads=1):
    """Per-class bounds of every QI, read from the class-ordered key matrix.

    Parameters
    ----------
    sorted_keys : int64 array (d, n), C-contiguous
        The keys in class order (from :func:`mondrian_partition`).
    class_start : bool array (n,)
        True at the first position of each class.
    kinds, cards : int64 arrays (d,)
        Kernel kind and code count of each QI.
    n_threads : int, default 1
        Threads to read classes on; the result does not depend on it.

    Returns
    -------
    class_of_pos : int64 array (n,)
        Class id of each position.
    lo, hi : int64 arrays (n_classes, d)
        Smallest and largest present key (``MISSING_KEY`` when all missing).
    missing : bool array (n_classes, d)
        Whether the class holds a missing value.
    total : float64 array (n_classes, d)
        Sum of decoded present values (numeric kinds), for mean generalization.
    present : int64 array (n_classes, d)
        Number of present (non-missing) values.
    """
    cdef const i64[:, ::1] keys = sorted_keys
    cdef const i64[::1] kv = np.ascontiguousarray(kinds, dtype=np.int64)
    cdef Py_ssize_t d = keys.shape[0], n = keys.shape[1], b, m
    starts_arr = np.flatnonzero(class_start).astype(np.int64, copy=False)
    cdef const i64[::1] starts = starts_arr
    m = starts.shape[0]
    class_of_pos = np.empty(n, dtype=np.int64)
    lo = np.empty((m, d), dtype=np.int64)
    hi = np.empty((m, d), dtype=np.int64)
    missing = np.empty((m, d), dtype=np.bool_)
    total = np.empty((m, d), dtype=np.float64)
    present = np.empty((m, d), dtype=np.int64)
    if m == 0 or d == 0:
        if m and n:
            _fill_class_of_pos(starts_arr, class_of_pos)
        return class_of_pos, lo, hi, missing, total, present
    cdef i64[::1] cp = class_of_pos
    cdef i64[:, ::1] lov = lo
    cdef i64[:, ::1] hiv = hi
    cdef unsigned char[:, ::1] mv = missing.view(np.uint8)
    cdef double[:, ::1] tv = total
    cdef i64[:, ::1] pv = present
    cdef int threads = n_threads if n_threads > 0 and n >= PARALLEL_MIN_ROWS else 1
    cdef Classes cs
    cs.keys, cs.d, cs.n, cs.kinds = &keys[0, 0], d, n, &kv[0]
    cs.starts, cs.n_classes = &starts[0], m
    cs.class_of_pos, cs.lo, cs.hi = &cp[0], &lov[0, 0], &hiv[0, 0]
    cs.missing, cs.total, cs.present = &mv[0, 0], &tv[0, 0], &pv[0, 0]
    with nogil:
        if threads == 1:
            _class_stats_range(&cs, 0, m)
        else:
            for b in prange(CHUNKS, num_threads=threads, schedule="dynamic", chunksize=1):
                _class_stats_range(&cs, b * m // CHUNKS, (b + 1) * m // CHUNKS)
    return class_of_pos, lo, hi, missing, total, present


def _fill_class_of_pos(starts, class_of_pos):
    ends = np.append(starts[1:], len(class_of_pos))
    class_of_pos[:] = np.repeat(np.arange(len(starts)), ends - starts)


def rows_to_classes(order, class_of_pos, int n_threads=1):
    """Class id of every row in input order (``order`` lists rows by position).

    Parameters
    ----------
    order : int64 array (n,)
        Row number at each position.
    class_of_pos : int64 array (n,)
        Class id at each position.
    n_threads : int, default 1

    Returns
    -------
    int64 array (n,)
    """
    cdef const i64[::1] ov = np.ascontiguousarray(order, dtype=np.int64)
    cdef const i64[::1] cv = np.ascontiguousarray(class_of_pos, dtype=np.int64)
    out = np.empty(cv.shape[0], dtype=np.int64)
    cdef i64[::1] res = out
    cdef Py_ssize_t i, n = ov.shape[0]
    cdef int threads = n_threads if n_threads > 0 and n >= PARALLEL_MIN_ROWS else 1
    if cv.shape[0] != n:
        raise ValueError("order and class_of_pos must have the same length")
    with nogil:
        if threads == 1:
            for i in range(n):
                res[ov[i]] = cv[i]
        else:
            for i in prange(n, num_threads=threads, schedule="static"):
                res[ov[i]] = cv[i]
    return out


def gather_codes(const i64[::1] class_of_row, const int_t[:, ::1] table, int_t[:, ::1] out,
                 int n_threads=1):
    """Every row's label code in several columns at once: ``out[j, i] = table[class_of_row[i], j]``.

    One read of the class ids and one cache line of ``table`` a row, where
    a gather per column would read the class ids and a random line per
    column.

    Parameters
    ----------
    class_of_row : int64 array (n,)
        Class id of every row, each below ``table.shape[0]``.
    table : int array (n_classes, m)
        Label code of every class in each of ``m`` columns.
    out : int array (m, n), same type as ``table``
        Filled with the rows' codes.
    n_threads : int, default 1
    """
    cdef Py_ssize_t n = class_of_row.shape[0], m = table.shape[1], i, j
    cdef i64 c
    cdef int threads = n_threads if n_threads > 0 and n >= PARALLEL_MIN_ROWS else 1
    if out.shape[0] != m or out.shape[1] != n:
        raise ValueError("out must have one row per column of table and one column per row")
    if m == 0 or n == 0:
        return
    if table.shape[0] == 0:
        raise ValueError("table has no class")
    with nogil:
        if threads == 1:
            for i in range(n):
                c = class_of_row[i]
                for j in range(m):
                    out[j, i] = table[c, j]
        else:
            for i in prange(n, num_threads=threads, schedule="static"):
                c = class_of_row[i]
                for j in range(m):
                    out[j, i] = table[c, j]


def class_code_sets(sorted_row, class_of_pos, Py_ssize_t n_classes):
    """Distinct codes of one nominal QI per class, as CSR ``(offsets, codes)``.

    Codes within a class are sorted, so equal sets give equal slices.

    Parameters
    ----------
    sorted_row : int64 array (n,)
        The QI's codes in class order.
    class_of_pos : int64 array (n,)
        Class id at each position (classes are contiguous runs).
    n_classes : int

    Returns
    -------
    offsets : int64 array (n_classes + 1,)
    codes : int64 array
    """
    cdef const i64[::1] row = np.ascontiguousarray(sorted_row, dtype=np.int64)
    cdef const i64[::1] cls = np.ascontiguousarray(class_of_pos, dtype=np.int64)
    cdef Py_ssize_t n = row.shape[0], i = 0, j, q, p, out = 0, start
    offsets_arr = np.zeros(n_classes + 1, dtype=np.int64)
    codes_arr = np.empty(n, dtype=np.int64)
    cdef i64[::1] offsets = offsets_arr
    cdef i64[::1] codes = codes_arr
    cdef i64 c, v
    with nogil:
        while i < n:
            c = cls[i]
            j = i
            while j < n and cls[j] == c:
                j += 1
            # Sort the class's codes where they will be stored, then keep
            # the first of each run of equal codes. Classes hold about k
            # rows: insertion sort, with no call, is cheapest at that size.
            start = out
            if j - i <= INSERTION_MAX:
                for q in range(i, j):
                    v = row[q]
                    p = start + q - i
                    while p > start and codes[p - 1] > v:
                        codes[p] = codes[p - 1]
                        p -= 1
                    codes[p] = v
            else:
                for q in range(i, j):
                    codes[start + q - i] = row[q]
                heapsort(&codes[0], start, start + j - i, NULL, False)
            out = start + 1
            for q in range(start + 1, start + j - i):
                if codes[q] != codes[out - 1]:
                    codes[out] = codes[q]
                    out += 1
            offsets[c + 1] = out
            i = j
    return offsets_arr, codes_arr[:out]


def class_code_masks(sorted_row, class_of_pos, Py_ssize_t n_classes, Py_ssize_t words):
    """Set of codes of one nominal QI per class, as a bitmask of ``words`` words.

    Bit ``c`` of row ``i`` is set when class ``i`` holds code ``c``; equal
    sets give equal rows, so distinct sets are found by comparing integers.

    Returns
    -------
    uint64 array (n_classes, words)
    """
    cdef const i64[::1] row = np.ascontiguousarray(sorted_row, dtype=np.int64)
    cdef const i64[::1] cls = np.ascontiguousarray(class_of_pos, dtype=np.int64)
    masks_arr = np.zeros((n_classes, words), dtype=np.uint64)
    if n_classes == 0 or words == 0:
        return masks_arr
    cdef u64[:, ::1] masks = masks_arr
    cdef Py_ssize_t i
    cdef i64 code
    with nogil:
        for i in range(row.shape[0]):
            code = row[i]
            masks[cls[i], code >> 6] |= (<u64>1) << (<u64>(code & 63))
    return masks_arr
