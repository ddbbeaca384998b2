"""Compiled bound and count passes of the domain pass and the region sketches.

Each reads its keys or codes once, sequentially, and releases the GIL.
"""

import numpy as np

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t

from dmondrian._kernel._bits cimport is_int_max, valid_bit
from dmondrian._kernel._common cimport INT_MIN, MISSING_KEY, i64, int_t, u64

__all__ = []

# Independent running minima and maxima: one chain of compare-and-select per
# lane instead of one for the whole column, whose latency bounded the loop.
cdef enum:
    LANES = 4


def _int_bounds(const int_t[:] raw, bint nat_missing):
    """``(lo, hi, n_missing, reserved)`` of a column whose keys are its values.

    In datetimes (``nat_missing``) NaT (INT64_MIN) is missing, and so is
    Timestamp.max, whose value is the missing key; ``reserved`` says a plain
    integer equals the missing key.
    """
    cdef Py_ssize_t n = raw.shape[0], i, k, u
    cdef i64 v, n_missing = 0
    cdef i64 lo[LANES]
    cdef i64 hi[LANES]
    for u in range(LANES):
        lo[u], hi[u] = MISSING_KEY, INT_MIN
    if n == 0:
        return MISSING_KEY, INT_MIN, n_missing, False
    if raw.strides[0] != sizeof(int_t):  # a column of a Fortran-ordered block
        raw = np.ascontiguousarray(raw)
    cdef const int_t* src = &raw[0]
    cdef Py_ssize_t whole = n - n % LANES
    with nogil:
        if nat_missing:
            for k in range(whole // LANES):
                for u in range(LANES):
                    v = src[k * LANES + u]
                    if v == INT_MIN or v == MISSING_KEY:
                        n_missing += 1
                        continue
                    lo[u] = min(lo[u], v)
                    hi[u] = max(hi[u], v)
            for i in range(whole, n):
                v = src[i]
                if v == INT_MIN or v == MISSING_KEY:
                    n_missing += 1
                    continue
                lo[0] = min(lo[0], v)
                hi[0] = max(hi[0], v)
        else:
            for k in range(whole // LANES):
                for u in range(LANES):
                    v = src[k * LANES + u]
                    lo[u] = min(lo[u], v)
                    hi[u] = max(hi[u], v)
            for i in range(whole, n):
                v = src[i]
                lo[0] = min(lo[0], v)
                hi[0] = max(hi[0], v)
        for u in range(1, LANES):
            lo[0] = min(lo[0], lo[u])
            hi[0] = max(hi[0], hi[u])
    # The missing key is the largest int64: a column holds it when it is the largest.
    return lo[0], hi[0], n_missing, not nat_missing and hi[0] == MISSING_KEY


def _key_step(const int_t[:] raw, i64 lo, bint nat_missing):
    """The gcd of ``key - lo`` over the present keys of a column (0 when all equal ``lo``).

    ``lo`` is the column's smallest present key. The missing key is skipped,
    and so is INT64_MIN with ``nat_missing`` (NaT). Stops at 1: a column of
    consecutive values costs a few rows. Differences are taken modulo 2**64, which
    is exact since every present key is at least ``lo``.
    """
    cdef Py_ssize_t n = raw.shape[0], i
    cdef i64 v
    cdef u64 g = 0, r, t
    if n == 0:
        return 0
    if raw.strides[0] != sizeof(int_t):
        raw = np.ascontiguousarray(raw)
    cdef const int_t* src = &raw[0]
    with nogil:
        for i in range(n):
            v = src[i]
            if v == MISSING_KEY or (nat_missing and v == INT_MIN):
                continue
            r = <u64>v - <u64>lo
            if g == 0:
                g = r
                continue
            # Most rows are a multiple of the step found so far: one remainder each.
            r = r % g
            if r == 0:
                continue
            while r:
                t = g % r
                g = r
                r = t
            if g == 1:
                break
    return g

cdef void _count_with_bits(const int32_t* src, Py_ssize_t n, const uint8_t* b, i64 bit_offset,
                           i64* cnt) noexcept nogil:
    cdef Py_ssize_t i = 0, t
    cdef uint8_t byte
    while i < n and (bit_offset + i) & 7:  # up to a byte of the bitmap
        if valid_bit(b, bit_offset + i):
            cnt[src[i]] += 1
        i += 1
    # Then eight codes per byte of the bitmap, with no test per code when all
    # eight are valid. A null's code is arbitrary: never counted.
    while i + 8 <= n:
        byte = b[(bit_offset + i) >> 3]
        if byte == 0xFF:
            for t in range(8):
                cnt[src[i + t]] += 1
        elif byte:
            for t in range(8):
                if (byte >> t) & 1:
                    cnt[src[i + t]] += 1
        i += 8
    while i < n:
        if valid_bit(b, bit_offset + i):
            cnt[src[i]] += 1
        i += 1


def _count_codes(const int32_t[::1] codes, const uint8_t[::1] bits, i64 bit_offset,
                 i64[::1] counts):
    """Count the codes of an Arrow int32 chunk whose validity bit is on (no bits: all)."""
    cdef Py_ssize_t n = codes.shape[0], i
    if n == 0:
        return
    cdef const int32_t* src = &codes[0]
    cdef const uint8_t* b = &bits[0] if bits.shape[0] else NULL
    cdef i64* cnt = &counts[0] if counts.shape[0] else NULL
    with nogil:
        if b == NULL:
            for i in range(n):
                cnt[src[i]] += 1
        else:
            _count_with_bits(src, n, b, bit_offset, cnt)


def _code_counts(const int_t[:] codes, Py_ssize_t n_categories):
    """``(counts, n_missing)``: the count of every category code, and of negative codes."""
    cdef Py_ssize_t n = codes.shape[0], i, k, u
    counts = np.zeros(n_categories, dtype=np.int64)
    if n == 0:
        return counts, 0
    if codes.strides[0] != sizeof(int_t):
        codes = np.ascontiguousarray(codes)
    # A table per lane: a code repeated in the next rows (few categories) adds
    # to another lane's count instead of waiting for its own last store. Byte
    # codes index a table of every byte (negative ones past 127: missing);
    # wider ones put missing in a last slot.
    cdef Py_ssize_t width = 256 if int_t is int8_t else n_categories + 1
    tables = np.zeros((LANES, width), dtype=np.int64)
    cdef i64[:, ::1] tv = tables
    cdef i64* cnt = &tv[0, 0]
    cdef const int_t* src = &codes[0]
    cdef Py_ssize_t whole = n - n % LANES
    cdef int_t c
    with nogil:
        if int_t is int8_t:
            for k in range(whole // LANES):
                for u in range(LANES):
                    cnt[u * width + <uint8_t>src[k * LANES + u]] += 1
            for i in range(whole, n):
                cnt[<uint8_t>src[i]] += 1
        else:
            for k in range(whole // LANES):
                for u in range(LANES):
                    c = src[k * LANES + u]
                    cnt[u * width + (c if c >= 0 else n_categories)] += 1
            for i in range(whole, n):
                c = src[i]
                cnt[c if c >= 0 else n_categories] += 1
    total = tables.sum(axis=0)
    if int_t is int8_t:
        present = min(n_categories, 128)
        counts[:present] = total[:present]
        n_missing = int(total[128:].sum())
    else:
        counts[:] = total[:n_categories]
        n_missing = int(total[n_categories])
    return counts, n_missing


cdef inline void _fold(i64 v, i64 r, i64 missing_key, i64* lo, i64* hi,
                       i64* missing) noexcept nogil:
    # A branch on missing keys beats computing without one: the bounds' stores
    # are then rare and predictable.
    if v == missing_key:
        missing[r] += 1
    else:
        if v < lo[r]:
            lo[r] = v
        if v > hi[r]:
            hi[r] = v


def _region_bounds(const i64[:, :] keys, const i64[::1] region, Py_ssize_t n_regions,
                   i64 missing_key):
    """Rows, smallest and largest present key, and missing keys, per region and QI.

    Returns
    -------
    count : int64 array (n_regions,)
    lo, hi, missing : int64 arrays (n_regions, d)
        ``missing_key`` and INT64_MIN where a region holds no present key.
    """
    cdef Py_ssize_t d = keys.shape[0], n = keys.shape[1], i, j
    if region.shape[0] < n:
        raise ValueError("region holds fewer values than keys have rows")
    count = np.zeros(n_regions, dtype=np.int64)
    lo_a = np.full((n_regions, d), missing_key, dtype=np.int64)
    hi_a = np.full((n_regions, d), INT_MIN, dtype=np.int64)
    missing_a = np.zeros((n_regions, d), dtype=np.int64)
    if n == 0 or d == 0:
        if n:
            np.add.at(count, np.asarray(region[:n]), 1)
        return count, lo_a, hi_a, missing_a
    if keys.strides[1] != sizeof(i64):
        keys = np.ascontiguousarray(keys)
    cdef i64[::1] cnt = count
    cdef i64[:, ::1] lo = lo_a, hi = hi_a, missing = missing_a
    cdef const i64* reg = &region[0]
    cdef const i64* row
    cdef i64* lo_p = &lo[0, 0] if n_regions else NULL
    cdef i64* hi_p = &hi[0, 0] if n_regions else NULL
    cdef i64* miss_p = &missing[0, 0] if n_regions else NULL
    cdef i64 v, r
    with nogil:
        for j in range(d):  # one key row at a time: sequential reads
            row = &keys[j, 0]
            if j == 0:  # the rows per region too: one pass less over the regions
                for i in range(n):
                    v, r = row[i], reg[i]  # read before the stores, which may alias them
                    cnt[r] += 1
                    _fold(v, r * d, missing_key, lo_p, hi_p, miss_p)
            else:
                for i in range(n):
                    _fold(row[i], reg[i] * d + j, missing_key, lo_p, hi_p, miss_p)
    return count, lo_a, hi_a, missing_a


def _key_bounds(const i64[:, :] keys, i64 missing_key, i64[:] lo, i64[:] hi):
    """Smallest and largest present key of every row of ``keys`` (into ``lo``, ``hi``,
    which they only lower and raise); returns the number of missing keys per row."""
    cdef Py_ssize_t d = keys.shape[0], m_rows = keys.shape[1], i, j
    if lo.shape[0] < d or hi.shape[0] < d:
        raise ValueError("lo and hi need a value per row of keys")
    n_missing_a = np.zeros(d, dtype=np.int64)
    if m_rows == 0 or d == 0:
        return n_missing_a
    if keys.strides[1] != sizeof(i64):
        keys = np.ascontiguousarray(keys)
    cdef i64[::1] n_missing = n_missing_a
    cdef const i64* row
    cdef i64 v, m, k
    cdef i64 a[LANES]
    cdef i64 b[LANES]
    cdef Py_ssize_t q, u, whole = m_rows - m_rows % LANES
    with nogil:
        for j in range(d):
            row = &keys[j, 0]
            for u in range(LANES):
                a[u], b[u] = lo[j], hi[j]
            k = 0
            if missing_key == MISSING_KEY:
                # The missing key is the largest int64: it never lowers the
                # smallest key, and + 1 wraps it to INT64_MIN, which never
                # raises the largest. No branch on it.
                for q in range(whole // LANES):
                    for u in range(LANES):
                        v = row[q * LANES + u]
                        m = is_int_max(v)
                        k += m
                        a[u] = min(a[u], v)
                        b[u] = max(b[u], v + m)
                for i in range(whole, m_rows):
                    v = row[i]
                    m = is_int_max(v)
                    k += m
                    a[0] = min(a[0], v)
                    b[0] = max(b[0], v + m)
            else:
                for i in range(m_rows):
                    v = row[i]
                    if v == missing_key:
                        k += 1
                    else:
                        a[0] = min(a[0], v)
                        b[0] = max(b[0], v)
            for u in range(1, LANES):
                a[0] = min(a[0], a[u])
                b[0] = max(b[0], b[u])
            lo[j], hi[j], n_missing[j] = a[0], b[0], k
    return n_missing_a
