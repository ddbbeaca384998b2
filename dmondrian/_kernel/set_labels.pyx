# distutils: language = c++
"""Set labels of nominal QIs: the distinct code sets of the classes, then their labels.

Three steps: :func:`distinct_masks` (or :func:`distinct_slices` past the
bitmask width) finds the distinct code sets of the classes by hashing them,
:func:`mask_members` lists each set's codes, and :func:`set_labels` writes
``{a, b, c}`` (or the one name ``a``) from a table of the category names'
UTF-8 bytes, as Arrow stores strings: one ``uint8`` buffer and int64 offsets,
the layout :mod:`dmondrian._kernel.labels` writes range labels in.
"""

import numpy as np

from libc.stdint cimport uint8_t
from libc.string cimport memcpy

from dmondrian._kernel._common cimport i64, popcount, u64

__all__ = ["distinct_masks", "distinct_slices", "mask_members", "set_labels"]

cdef extern from *:
    """
    #include <algorithm>
    #include <vector>
    #include <stdint.h>
    struct dm_word_row { int64_t word, row; };
    static void dm_sort_level(int64_t *idx, int64_t n, const int64_t *rows, int64_t words,
                              int64_t level, dm_word_row *pairs) {
        for (int64_t p = 0; p < n; p++)
            pairs[p] = dm_word_row{rows[idx[p] * words + level], idx[p]};
        std::sort(pairs, pairs + n, [](const dm_word_row &a, const dm_word_row &b) {
            return a.word < b.word;
        });
        for (int64_t p = 0; p < n; p++) idx[p] = pairs[p].row;
        if (level + 1 == words) return;
        int64_t s = 0;
        while (s < n) {
            int64_t e = s + 1;
            while (e < n && pairs[e].word == pairs[s].word) e++;
            if (e - s > 1) dm_sort_level(idx + s, e - s, rows, words, level + 1, pairs + s);
            s = e;
        }
    }
    static void dm_sort_rows(int64_t *idx, int64_t n, const int64_t *rows, int64_t words) {
        if (n < 2 || words < 1) return;
        std::vector<dm_word_row> pairs(n);
        dm_sort_level(idx, n, rows, words, 0, pairs.data());
    }
    #define DM_CTZ64(x) __builtin_ctzll(x)
    """
    void dm_sort_rows(i64* idx, i64 n, const i64* rows, i64 words) noexcept nogil
    int ctz64 "DM_CTZ64"(u64 x) noexcept nogil


cdef inline i64 put_bytes(uint8_t* out, i64 pos, const char* text, i64 n) noexcept nogil:
    memcpy(out + pos, text, n)
    return pos + n


cdef inline u64 mix(u64 h, u64 w) noexcept nogil:
    """One word into a row hash (a multiply-xorshift round)."""
    h = (h ^ w) * <u64>0x9E3779B97F4A7C15
    return h ^ (h >> 29)


cdef Py_ssize_t group_rows(const u64* data, const i64* off, Py_ssize_t m, i64* slots,
                           u64 slot_mask, i64* group, i64* rep) noexcept nogil:
    """Number rows ``data[off[r]:off[r + 1]]`` by first appearance; ``group[r]`` is
    row ``r``'s number and ``rep[g]`` the first row of number ``g``.

    An open-addressing table of (hash, number + 1) pairs (``slots``, zeroed,
    a power of two of at least twice ``m`` pairs): the hash sits beside the
    number, in the same cache line, so a row is compared word by word only
    with the rows whose hash matches. Returns the count of distinct rows.
    """
    cdef Py_ssize_t r, g, n_groups = 0
    cdef i64 s, e, length, k, ps, pe
    cdef u64 h, slot
    cdef bint same
    for r in range(m):
        s = off[r]
        e = off[r + 1]
        length = e - s
        h = <u64>length * <u64>0xC2B2AE3D27D4EB4F
        for k in range(s, e):
            h = mix(h, data[k])
        slot = h & slot_mask
        while True:
            g = slots[2 * slot + 1] - 1
            if g < 0:
                g = n_groups
                n_groups += 1
                slots[2 * slot] = <i64>h
                slots[2 * slot + 1] = g + 1
                rep[g] = r
                break
            if <u64>slots[2 * slot] == h:
                ps = off[rep[g]]
                pe = off[rep[g] + 1]
                same = pe - ps == length
                k = 0
                while same and k < length:
                    same = data[ps + k] == data[s + k]
                    k += 1
                if same:
                    break
            slot = (slot + 1) & slot_mask
        group[r] = g
    return n_groups


cdef tuple hash_groups(const u64* data, const i64* off, Py_ssize_t m):
    """:func:`group_rows` with its tables: ``(group, rep[:n_groups])``."""
    cdef u64 size = 16
    while size < <u64>(2 * m):
        size <<= 1
    slots_arr = np.zeros(2 * size, dtype=np.int64)
    group_arr = np.empty(m, dtype=np.int64)
    rep_arr = np.empty(max(m, 1), dtype=np.int64)
    cdef i64[::1] slots = slots_arr, group = group_arr, rep = rep_arr
    cdef Py_ssize_t n_groups = 0
    if m:
        with nogil:
            n_groups = group_rows(data, off, m, &slots[0], size - 1, &group[0], &rep[0])
    return group_arr, rep_arr[:n_groups]


def distinct_masks(masks):
    """Distinct rows of a bitmask matrix, in the order of their words as int64.

    Equal rows are found by hashing; only the distinct rows are then sorted,
    word 0 first, each word read as a signed int64: the order a lexsort of
    the matrix viewed as int64 gives, without sorting every row.

    Parameters
    ----------
    masks : uint64 array (m, words)
        One code set a row (:func:`dmondrian._kernel.class_code_masks`).

    Returns
    -------
    first : int64 array (g,)
        The first row of each distinct row, distinct rows in sorted order.
    inverse : int64 array (m,)
        Every row's position in ``first``.

    Examples
    --------
    >>> import numpy as np
    >>> masks = np.array([[5, 0], [1, 2], [5, 0], [1, 0]], dtype=np.uint64)
    >>> first, inverse = distinct_masks(masks)
    >>> first.tolist(), inverse.tolist()
    ([3, 1, 0], [2, 1, 2, 0])
    """
    cdef const u64[:, ::1] mv = np.ascontiguousarray(masks, dtype=np.uint64)
    cdef Py_ssize_t m = mv.shape[0], words = mv.shape[1], g, n_groups
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if words == 0:
        return np.zeros(1, dtype=np.int64), np.zeros(m, dtype=np.int64)
    off_arr = np.arange(m + 1, dtype=np.int64) * words
    cdef const i64[::1] off = off_arr
    group_arr, rep_arr = hash_groups(&mv[0, 0], &off[0], m)
    n_groups = len(rep_arr)
    order_arr = np.arange(n_groups, dtype=np.int64)
    rank_arr = np.empty(n_groups, dtype=np.int64)
    first_arr = np.empty(n_groups, dtype=np.int64)
    inverse_arr = np.empty(m, dtype=np.int64)
    cdef i64[::1] group = group_arr, rep = rep_arr, order = order_arr, rank = rank_arr
    cdef i64[::1] first = first_arr, inverse = inverse_arr
    cdef Py_ssize_t r
    with nogil:
        # Sort the distinct rows' first row numbers, then rank each number.
        for g in range(n_groups):
            order[g] = rep[g]
        dm_sort_rows(&order[0], n_groups, <const i64*>&mv[0, 0], words)
        for g in range(n_groups):
            first[g] = order[g]
            rank[group[order[g]]] = g
        for r in range(m):
            inverse[r] = rank[group[r]]
    return first_arr, inverse_arr


def distinct_slices(offsets, codes):
    """Distinct slices of a CSR ``(offsets, codes)``, in order of first appearance.

    Parameters
    ----------
    offsets : int64 array (m + 1,)
        Slice ``r`` is ``codes[offsets[r]:offsets[r + 1]]``.
    codes : int64 array

    Returns
    -------
    first : int64 array (g,)
        The first slice of each distinct slice, in order of appearance.
    inverse : int64 array (m,)
        Every slice's position in ``first``.

    Examples
    --------
    >>> import numpy as np
    >>> first, inverse = distinct_slices(np.array([0, 2, 3, 5]), np.array([1, 4, 2, 1, 4]))
    >>> first.tolist(), inverse.tolist()
    ([0, 1], [0, 1, 0])
    """
    cdef const i64[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
    codes_arr = np.ascontiguousarray(codes, dtype=np.int64)
    cdef Py_ssize_t m = off.shape[0] - 1
    if m < 0 or off[0] < 0 or off[m] > codes_arr.shape[0]:
        raise ValueError("offsets do not fit codes")
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # One spare word: a pointer to the start of an empty codes array.
    cdef const u64[::1] data = np.append(codes_arr, 0).view(np.uint64)
    inverse, first = hash_groups(&data[0], &off[0], m)
    return first, inverse


def mask_members(masks, rows=None):
    """The codes of each bitmask row, ascending, as CSR ``(offsets, codes)``.

    Parameters
    ----------
    masks : uint64 array (m, words)
        Bit ``c`` of a row (bit ``c % 64`` of word ``c // 64``) marks code ``c``.
    rows : int64 array, optional
        The rows to list, in this order (default: every row).

    Returns
    -------
    offsets : int64 array (len(rows) + 1,)
    codes : int64 array
        The members of ``rows[i]`` are ``codes[offsets[i]:offsets[i + 1]]``.

    Examples
    --------
    >>> import numpy as np
    >>> off, codes = mask_members(np.array([[6, 1], [1, 0]], dtype=np.uint64))
    >>> off.tolist(), codes.tolist()
    ([0, 3, 4], [1, 2, 64, 0])
    """
    cdef const u64[:, ::1] mv = np.ascontiguousarray(masks, dtype=np.uint64)
    cdef Py_ssize_t m = mv.shape[0], words = mv.shape[1], i, k
    rows_arr = (np.arange(m, dtype=np.int64) if rows is None
                else np.ascontiguousarray(rows, dtype=np.int64))
    cdef const i64[::1] rv = rows_arr
    cdef Py_ssize_t n = rv.shape[0]
    for i in range(n):
        if not 0 <= rv[i] < m:
            raise IndexError(f"row {rv[i]} is out of range")
    offsets_arr = np.empty(n + 1, dtype=np.int64)
    counts_arr = np.zeros(m, dtype=np.int64)
    cdef i64[::1] offsets = offsets_arr, counts = counts_arr
    cdef i64 total = 0
    cdef u64 w
    offsets[0] = 0
    with nogil:
        # Every row's count in one pass in memory order, then read per row
        # listed: the rows' words are read out of order only once, below.
        for i in range(m):
            for k in range(words):
                counts[i] += popcount(mv[i, k])
        for i in range(n):
            total += counts[rv[i]]
            offsets[i + 1] = total
    codes_arr = np.empty(total, dtype=np.int64)
    if total == 0:
        return offsets_arr, codes_arr
    cdef i64[::1] codes = codes_arr
    cdef i64 pos = 0
    with nogil:
        for i in range(n):
            for k in range(words):
                w = mv[rv[i], k]
                while w:
                    codes[pos] = k * 64 + ctz64(w)
                    pos += 1
                    w &= w - 1  # clear the lowest set bit
    return offsets_arr, codes_arr


def set_labels(offsets, codes, const uint8_t[::1] t_buf, const i64[::1] t_off):
    """Set labels of CSR code sets: the one name, or ``{a, b, c}``.

    Parameters
    ----------
    offsets : int64 array (m + 1,)
        Set ``i`` is ``codes[offsets[i]:offsets[i + 1]]``, codes in the order
        they are written (ascending for the published labels), never empty.
    codes : int64 array
        Indices of strings of ``(t_buf, t_off)``.
    t_buf, t_off : uint8 array, int64 array
        The names (name ``c`` is ``t_buf[t_off[c]:t_off[c + 1]]``).

    Returns
    -------
    buf, off : uint8 array, int64 array
        Label ``i`` is ``buf[off[i]:off[i + 1]]``: the name of a one-code
        set, else ``"{" + ", ".join(names) + "}"``.

    Examples
    --------
    >>> import numpy as np
    >>> buf, off = set_labels(np.array([0, 1, 3]), np.array([1, 0, 1]),
    ...                       np.frombuffer(b"ab, c", np.uint8), np.array([0, 1, 5]))
    >>> bytes(buf), off.tolist()
    (b'b, c{a, b, c}', [0, 4, 13])
    """
    cdef const i64[::1] so = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef const i64[::1] sc = np.ascontiguousarray(codes, dtype=np.int64)
    cdef Py_ssize_t m = so.shape[0] - 1, i, n_names = t_off.shape[0] - 1
    cdef i64 q, c, cnt, s, e, size = 0, pos = 0
    if m < 0 or so[0] < 0 or so[m] > sc.shape[0]:
        raise ValueError("offsets do not fit codes")
    # The exact size, checking every code and set as it goes.
    for i in range(m):
        cnt = so[i + 1] - so[i]
        if cnt <= 0:
            raise ValueError(f"set {i} is empty")
        if cnt > 1:
            size += 2 * cnt  # braces and the separators
        for q in range(so[i], so[i + 1]):
            c = sc[q]
            if not 0 <= c < n_names:
                raise IndexError(f"code {c} has no name")
            size += t_off[c + 1] - t_off[c]
    # One spare byte: a pointer to the start of an empty buffer.
    out = np.empty(size + 1, dtype=np.uint8)
    off = np.empty(m + 1, dtype=np.int64)
    cdef uint8_t[::1] ov = out
    cdef i64[::1] fv = off
    cdef uint8_t* o = &ov[0]
    fv[0] = 0
    with nogil:
        for i in range(m):
            cnt = so[i + 1] - so[i]
            if cnt > 1:
                o[pos] = 123  # '{'
                pos += 1
            for q in range(so[i], so[i + 1]):
                if q > so[i]:
                    o[pos] = 44  # ','
                    o[pos + 1] = 32
                    pos += 2
                c = sc[q]
                s = t_off[c]
                e = t_off[c + 1]
                if e > s:
                    pos = put_bytes(o, pos, <const char*>&t_buf[s], e - s)
            if cnt > 1:
                o[pos] = 125  # '}'
                pos += 1
            fv[i + 1] = pos
    return out[:pos], off
