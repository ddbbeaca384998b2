"""Compiled lookups of an Arrow string column's rows among a few known values.

A QI of text (sex, marital status, a region) has few distinct values. Arrow's
``index_in`` hashes every row's bytes against the value set; with a handful
of values, comparing a row's length and then its bytes to each of them in
turn costs a fraction of that, in one sequential pass that releases the GIL.
Callers take this path for at most :data:`MAX_VALUES` values and keep
Arrow's for more.

A chunk is read in place from its buffers: ``offsets`` (int32 for
``string``, int64 for ``large_string``), the value bytes and the validity
bits, with the chunk's own offset into the first and the last.
"""

import numpy as np

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcmp

from dmondrian._kernel._bits cimport valid_bit
from dmondrian._kernel._common cimport i64

__all__ = ["MAX_VALUES", "value_table", "string_codes_into", "string_code_counts"]

#: Most known values a lookup scans row by row.
MAX_VALUES = 16

ctypedef fused offset_t:
    int32_t
    int64_t


def value_table(values):
    """The known values as one byte string and their ``m + 1`` int64 offsets.

    Examples
    --------
    >>> data, offsets = value_table(["F", "M", ""])
    >>> bytes(data), offsets.tolist()
    (b'FM', [0, 1, 2, 2])
    """
    encoded = [str(v).encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in encoded])
    # One byte more than needed: a memoryview of an empty buffer has no address.
    data = np.frombuffer(b"".join(encoded) + b"\0", dtype=np.uint8)
    return data, offsets


cdef inline bint _same(const uint8_t* a, const uint8_t* b, i64 length) noexcept nogil:
    # Values of a few bytes: an inlined loop, where a call to memcmp costs more
    # than the comparison.
    cdef i64 i
    if length > 32:
        return memcmp(a, b, length) == 0
    for i in range(length):
        if a[i] != b[i]:
            return False
    return True


cdef inline i64 _find(const uint8_t* row, i64 length, const uint8_t* vdata,
                      const i64* voff, Py_ssize_t m) noexcept nogil:
    """The index of the known value equal to ``row[:length]``, or -1."""
    cdef Py_ssize_t j
    for j in range(m):
        if voff[j + 1] - voff[j] == length and _same(row, vdata + voff[j], length):
            return j
    return -1


def string_codes_into(const offset_t[::1] offsets, const uint8_t[::1] data,
                      const uint8_t[::1] bits, i64 bit_offset, const uint8_t[::1] vdata,
                      const i64[::1] voff, i64 missing_code, i64[::1] out):
    """Each row's index among the known values into ``out``; ``missing_code`` for nulls.

    Parameters
    ----------
    offsets : int32 or int64 array (n + 1,)
        The chunk's value offsets, from its first row (the chunk's offset applied).
    data : uint8 array
        The chunk's value bytes (at least one byte).
    bits : uint8 array
        The chunk's validity bitmap; empty when no row is null.
    bit_offset : int
        The chunk's first row in ``bits``.
    vdata, voff : arrays
        The known values, from :func:`value_table`.
    missing_code : int
        The key of a null row.
    out : int64 array (n,)
        Filled with each row's key.

    Returns
    -------
    int
        The first row whose value is not known, or -1 when every value is
        (``out`` is then complete).
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, m = voff.shape[0] - 1, i
    cdef i64 code, first_unknown = -1
    if n <= 0:
        return -1
    if out.shape[0] < n:
        raise ValueError("out holds fewer values than the chunk")
    cdef const offset_t* off = &offsets[0]
    cdef const uint8_t* src = &data[0]
    cdef const uint8_t* b = &bits[0] if bits.shape[0] else NULL
    cdef const uint8_t* vd = &vdata[0]
    cdef const i64* vo = &voff[0]
    cdef i64* dst = &out[0]
    with nogil:
        for i in range(n):
            if not valid_bit(b, bit_offset + i):
                dst[i] = missing_code
                continue
            code = _find(src + off[i], off[i + 1] - off[i], vd, vo, m)
            if code < 0:
                first_unknown = i
                break
            dst[i] = code
    return first_unknown


def string_code_counts(const offset_t[::1] offsets, const uint8_t[::1] data,
                       const uint8_t[::1] bits, i64 bit_offset, const uint8_t[::1] vdata,
                       const i64[::1] voff, i64[::1] counts):
    """Add each known value's rows to ``counts``; return the rows of other values.

    Parameters are those of :func:`string_codes_into`; ``counts`` (m,) is
    added to. Null rows are counted nowhere.
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, m = voff.shape[0] - 1, i
    cdef i64 code, unknown = 0
    if n <= 0:
        return 0
    if counts.shape[0] < m:
        raise ValueError("counts holds fewer values than the known values")
    cdef const offset_t* off = &offsets[0]
    cdef const uint8_t* src = &data[0]
    cdef const uint8_t* b = &bits[0] if bits.shape[0] else NULL
    cdef const uint8_t* vd = &vdata[0]
    cdef const i64* vo = &voff[0]
    cdef i64* cnt = &counts[0] if m else NULL
    with nogil:
        for i in range(n):
            if not valid_bit(b, bit_offset + i):
                continue
            code = _find(src + off[i], off[i + 1] - off[i], vd, vo, m)
            if code < 0:
                unknown += 1
            else:
                cnt[code] += 1
    return unknown
