"""Compiled lookups of an Arrow string column's rows among a few known values, and the
numbering of a column's distinct values while they are few.

A QI of text (sex, marital status, a region) has few distinct values. Arrow's
``index_in`` hashes every row's bytes against the value set; with a handful
of values, comparing a row's length and then its bytes to each of them in
turn costs a fraction of that, in one sequential pass that releases the GIL.
Callers take this path for at most :data:`MAX_VALUES` values and keep
Arrow's for more. The release guards ask of a text column released as is only
whether it has fewer than a hundred distinct values: :func:`number_strings`
answers that with a table of a few hundred slots that stays in the cache, and
stops at the first value beyond the limit.

A chunk is read in place from its buffers: ``offsets`` (int32 for
``string``, int64 for ``large_string``), the value bytes and the validity
bits, with the chunk's own offset into the first and the last.
"""

import numpy as np

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcmp, memcpy

from dmondrian._kernel._bits cimport valid_bit
from dmondrian._kernel._common cimport i64

__all__ = ["MAX_VALUES", "value_table", "lookup_strings", "number_strings"]

#: Most known values a lookup scans row by row.
MAX_VALUES = 16

cdef enum:
    MAX_VALUES_C = 16

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


cdef inline i64 _tally(i64 code, Py_ssize_t i, i64 first_unknown,
                       i64* cnt) noexcept nogil:
    """Count a row's ``code`` (-1: not known); return the first row not known so far.

    Nulls are not tallied: their code may fall outside ``cnt``.
    """
    if code < 0:
        if first_unknown < 0:
            first_unknown = i
    elif cnt != NULL:
        cnt[code] += 1
    return first_unknown


#: Longest known value the word lookup compares as one 8-byte word.
cdef enum:
    WORD = 8


cdef inline uint64_t _word(const uint8_t* p, i64 length, const uint8_t* end,
                           const uint64_t* masks) noexcept nogil:
    """The first ``length`` (at most 8) bytes at ``p`` as a word, the rest zero."""
    cdef uint64_t w = 0
    cdef i64 i
    if p + WORD <= end:
        memcpy(&w, p, WORD)
        return w & masks[length]
    for i in range(length):
        (<uint8_t*>&w)[i] = p[i]
    return w


def lookup_strings(const offset_t[::1] offsets, const uint8_t[::1] data,
                   const uint8_t[::1] bits, i64 bit_offset, const uint8_t[::1] vdata,
                   const i64[::1] voff, i64 missing_code, i64[::1] out, i64[::1] counts):
    """Look every row of a chunk up among the known values.

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
        The code of a null row in ``out``.
    out : int64 array (n,) or (0,)
        Unless empty, filled with each row's index among the known values,
        ``missing_code`` for a null and -1 for any other value.
    counts : int64 array (m,) or (0,)
        Unless empty, each known value's rows are added to it (nulls nowhere).

    Returns
    -------
    int
        The first row holding a value that is not known, or -1.
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, m = voff.shape[0] - 1, i
    cdef i64 code, first_unknown = -1
    if n <= 0:
        return -1
    if out.shape[0] and out.shape[0] < n:
        raise ValueError("out holds fewer values than the chunk")
    if counts.shape[0] and counts.shape[0] < m:
        raise ValueError("counts holds fewer values than the known values")
    cdef const offset_t* off = &offsets[0]
    cdef const uint8_t* src = &data[0]
    cdef const uint8_t* b = &bits[0] if bits.shape[0] else NULL
    cdef const uint8_t* vd = &vdata[0]
    cdef const i64* vo = &voff[0]
    cdef i64* dst = &out[0] if out.shape[0] else NULL
    cdef i64* cnt = &counts[0] if counts.shape[0] else NULL
    # Known values of at most 8 bytes (sex, a region's code) are compared as words,
    # every one of them for every row and without a branch: a row's value no longer
    # steers the branches it takes (with two values as common as each other, a
    # comparison in turn mispredicts every other row).
    cdef uint64_t masks[WORD + 1]
    cdef uint64_t words[MAX_VALUES_C]
    cdef i64 lengths[MAX_VALUES_C]
    cdef uint8_t ones[WORD]
    cdef uint64_t w
    cdef i64 length, j
    cdef const uint8_t* end = src + data.shape[0]
    cdef const uint8_t* vend = vd + vdata.shape[0]
    cdef bint short = m <= MAX_VALUES_C
    for j in range(m):
        short = short and vo[j + 1] - vo[j] <= WORD
    if short:
        for j in range(WORD + 1):
            for i in range(WORD):
                ones[i] = 0xFF if i < j else 0
            memcpy(&masks[j], ones, WORD)
        for j in range(m):
            lengths[j] = vo[j + 1] - vo[j]
            words[j] = _word(vd + vo[j], lengths[j], vend, masks)
    with nogil:
        if short:
            for i in range(n):
                if not valid_bit(b, bit_offset + i):
                    code = missing_code
                else:
                    length = off[i + 1] - off[i]
                    code = -1
                    if length <= WORD:
                        w = _word(src + off[i], length, end, masks)
                        for j in range(m):
                            code = j if (w == words[j]) & (length == lengths[j]) else code
                    first_unknown = _tally(code, i, first_unknown, cnt)
                if dst != NULL:
                    dst[i] = code
        else:
            for i in range(n):
                if not valid_bit(b, bit_offset + i):
                    code = missing_code
                else:
                    code = _find(src + off[i], off[i + 1] - off[i], vd, vo, m)
                    first_unknown = _tally(code, i, first_unknown, cnt)
                if dst != NULL:
                    dst[i] = code
    return first_unknown


cdef inline uint64_t _head(const uint8_t* p, i64 length, const uint8_t* end,
                           uint64_t* second, const uint64_t* masks) noexcept nogil:
    """The first 8 bytes of ``p[:length]`` as a word, and the next 8 in ``second``, the bytes
    beyond ``length`` zero; with the length they are the value itself up to 16 bytes. Both
    words are always read: a branch on the length would follow the values' order."""
    cdef i64 first = length if length < WORD else WORD
    cdef i64 rest = length - first
    second[0] = _word(p + WORD, rest if rest < WORD else WORD, end, masks)
    return _word(p, first, end, masks)


def number_strings(const offset_t[::1] offsets, const uint8_t[::1] data,
                   const uint8_t[::1] bits, i64 bit_offset, i64[::1] firsts, i64[::1] out):
    """Number a chunk's distinct values in the order they first occur, while there are at most
    ``len(firsts)`` of them.

    Parameters
    ----------
    offsets, data, bits, bit_offset
        The chunk, as :func:`lookup_strings` takes it.
    firsts : int64 array (limit,)
        Filled with the row where each value first occurs, in code order.
    out : int64 array (n,) or (0,)
        Unless empty, filled with each row's code (-1 for a null).

    Returns
    -------
    int
        The distinct values (nulls are none), or -1 as soon as there are more
        than ``limit``: ``firsts`` and ``out`` then hold the rows up to there.
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, i
    cdef i64 limit = firsts.shape[0], size = 16
    if out.shape[0] and out.shape[0] < n:
        raise ValueError("out holds fewer values than the chunk")
    if n <= 0:
        return 0
    cdef int shift = 60
    while size < 2 * limit:
        size <<= 1
        shift -= 1
    # A slot holds a code + 1 (0: empty); each code its value's first 16 bytes and length,
    # which settle a comparison but for longer values.
    cdef i64[::1] slots_ = np.zeros(size, dtype=np.int64)
    cdef uint64_t[:, ::1] heads_ = np.zeros((max(limit, 1), 3), dtype=np.uint64)
    cdef i64* slots = &slots_[0]
    cdef uint64_t* heads = &heads_[0, 0]
    cdef i64* fst = &firsts[0] if limit else NULL
    cdef i64* dst = &out[0] if out.shape[0] else NULL
    cdef const offset_t* off = &offsets[0]
    cdef const uint8_t* src = &data[0]
    cdef const uint8_t* end = src + data.shape[0]
    cdef const uint8_t* b = &bits[0] if bits.shape[0] else NULL
    cdef uint64_t masks[WORD + 1]
    cdef uint8_t ones[WORD]
    cdef uint64_t w0, w1, h, slot, mask = <uint64_t>(size - 1)
    cdef uint64_t* known
    cdef i64 count = 0, code, c, start, length, j
    for j in range(WORD + 1):
        for i in range(WORD):
            ones[i] = 0xFF if i < j else 0
        memcpy(&masks[j], ones, WORD)
    with nogil:
        for i in range(n):
            code = -1
            if valid_bit(b, bit_offset + i):
                start = off[i]
                length = off[i + 1] - start
                w0 = _head(src + start, length, end, &w1, masks)
                # Multiply-shift: the top bits of a sum of odd multiples pick the slot.
                h = ((w0 ^ (<uint64_t>length << 56)) * <uint64_t>0x9E3779B97F4A7C15ULL
                     + w1 * <uint64_t>0xBF58476D1CE4E5B9ULL)
                slot = h >> shift
                while True:
                    c = slots[slot] - 1
                    if c < 0:
                        if count < limit:
                            slots[slot] = count + 1
                            known = heads + 3 * count
                            known[0], known[1], known[2] = w0, w1, <uint64_t>length
                            fst[count] = i
                            code = count
                            count += 1
                        break
                    known = heads + 3 * c
                    if (known[0] == w0) & (known[1] == w1) & (known[2] == <uint64_t>length):
                        if length <= 2 * WORD or memcmp(src + off[fst[c]] + 2 * WORD,
                                                         src + start + 2 * WORD,
                                                         length - 2 * WORD) == 0:
                            code = c
                            break
                    slot = (slot + 1) & mask
                if code < 0:
                    count = -1
                    break
            if dst != NULL:
                dst[i] = code
    return count
