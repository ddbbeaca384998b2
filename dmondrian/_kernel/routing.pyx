"""Compiled passes of :mod:`dmondrian.partition.routing`: global keys, row priorities, the cut-tree walk.

Every pass releases the GIL: in a Dask worker the event loop keeps
receiving shuffle data and answering heartbeats while a partition is
encoded or routed.
"""

import numpy as np

from libc.math cimport ceil
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t

from dmondrian._kernel._bits cimport is_int_max, is_int_min, valid_bit
from dmondrian._kernel._common cimport MISSING_KEY, i64, int_t, splitmix64_mix, u64
from dmondrian._kernel.walk cimport goes_left

__all__ = ["arrow_valid"]

# The golden ratio, added to a row's mix.
cdef u64 GOLDEN = 0x9E3779B97F4A7C15ULL

# Rows walked down the tree together: their walks are independent, so the
# CPU overlaps them instead of stalling on each unpredictable branch.
cdef enum:
    ROUTE_BLOCK = 256


cdef inline object _int64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


cdef inline void _check_out(Py_ssize_t have, Py_ssize_t need) except *:
    # The loops write unchecked: a short output would corrupt memory.
    if have < need:
        raise ValueError(f"the output holds {have} values, {need} are written")


def _int_keys_into(const int_t[:] raw, bint nat_missing, i64[::1] out):
    """``out[i] = raw[i]`` (NaT, INT64_MIN, missing when ``nat_missing``); whether a
    value is the reserved ``MISSING_KEY`` (checked for plain integers only)."""
    cdef Py_ssize_t n = raw.shape[0], i
    cdef i64 v, reserved = 0
    _check_out(out.shape[0], n)
    if n == 0:
        return False
    if raw.strides[0] != sizeof(int_t):  # a column of a Fortran-ordered block
        raw = np.ascontiguousarray(raw)
    cdef const int_t* src = &raw[0]
    cdef i64* dst = &out[0]
    with nogil:
        if nat_missing:
            for i in range(n):
                v = src[i]
                dst[i] = v - is_int_min(v)  # NaT - 1 wraps around to the missing key
        else:
            for i in range(n):
                v = src[i]
                reserved |= is_int_max(v)
                dst[i] = v
    return reserved != 0 and not nat_missing


def _remap_into(const int_t[:] codes, const i64[::1] remap, i64 missing_value, i64[::1] out):
    """``out[i] = remap[codes[i]]``, or ``missing_value`` where the code is negative."""
    cdef Py_ssize_t n = codes.shape[0], i
    cdef i64 c
    _check_out(out.shape[0], n)
    if n == 0:
        return
    if codes.strides[0] != sizeof(int_t):
        codes = np.ascontiguousarray(codes)
    cdef const int_t* src = &codes[0]
    cdef i64* dst = &out[0]
    cdef i64[::1] tv
    cdef const i64* rm
    if int_t is int8_t:
        # A table of every byte's value: a code is looked up without a branch on
        # missing values (negative codes) or a widening of the code.
        table = np.full(256, missing_value, dtype=np.int64)
        table[:min(128, remap.shape[0])] = remap[:128]
        tv = table
        rm = &tv[0]
        with nogil:
            for i in range(n):
                dst[i] = rm[<uint8_t>src[i]]
    else:
        # The missing value sits just before the table, so a missing code (-1, or
        # any negative one, raised to -1) is looked up like the others: no branch
        # to mispredict on every missing value.
        table = np.empty(remap.shape[0] + 1, dtype=np.int64)
        table[0] = missing_value
        table[1:] = remap
        tv = table
        rm = &tv[1]
        with nogil:
            for i in range(n):
                c = src[i]
                dst[i] = rm[c if c > -1 else -1]


cdef void _codes_with_bits(const int32_t* src, Py_ssize_t n, const uint8_t* b, i64 bit_offset,
                           i64 missing_value, i64* dst) noexcept nogil:
    cdef Py_ssize_t i = 0, t
    cdef uint8_t byte
    while i < n and (bit_offset + i) & 7:  # up to a byte of the bitmap
        dst[i] = src[i] if valid_bit(b, bit_offset + i) else missing_value
        i += 1
    # Then eight values per byte of the bitmap; one whose bits are all on
    # (most, when nulls are few) is a plain copy.
    while i + 8 <= n:
        byte = b[(bit_offset + i) >> 3]
        if byte == 0xFF:
            for t in range(8):
                dst[i + t] = src[i + t]
        else:
            for t in range(8):
                dst[i + t] = src[i + t] if (byte >> t) & 1 else missing_value
        i += 8
    while i < n:
        dst[i] = src[i] if valid_bit(b, bit_offset + i) else missing_value
        i += 1


def _arrow_codes_into(const int32_t[::1] codes, const uint8_t[::1] bits, i64 bit_offset,
                      i64 missing_value, i64[::1] out):
    """An Arrow int32 chunk into ``out``, ``missing_value`` where its validity bit is off."""
    cdef Py_ssize_t n = codes.shape[0], i
    _check_out(out.shape[0], n)
    if n == 0:
        return
    cdef const int32_t* src = &codes[0]
    cdef i64* dst = &out[0]
    cdef const uint8_t* b = &bits[0] if bits.shape[0] else NULL
    with nogil:
        if b == NULL:
            for i in range(n):
                dst[i] = src[i]
        else:
            _codes_with_bits(src, n, b, bit_offset, missing_value, dst)


def arrow_valid(const uint8_t[::1] bits, i64 k):
    """Whether bit ``k`` of an Arrow validity bitmap is on.

    Parameters
    ----------
    bits : uint8 array
        The bitmap; empty when the array has no nulls.
    k : int
        Bit number (the chunk's bit offset plus the value's position).

    Returns
    -------
    bool
        True for a valid (non-null) value, and for every value without a bitmap.
    """
    return valid_bit(&bits[0] if bits.shape[0] else NULL, k)


cdef inline u64 priority_bits(u64 i, u64 base) noexcept nogil:
    # splitmix64's finalizer of (row ^ base), plus the golden ratio, to 53 bits.
    return (splitmix64_mix(i ^ base) + GOLDEN) >> 11


cdef inline double priority(u64 i, u64 base) noexcept nogil:
    # The 53 bits as a number in [0, 1).
    return <double>priority_bits(i, base) * (1.0 / 9007199254740992.0)


def _priority(i64 i, u64 base):
    """The priority of row ``i`` (see :func:`_priorities`)."""
    return priority(<u64>i, base)


def _priorities(u64 base, Py_ssize_t n):
    """Priorities of rows ``0..n-1`` from one partition's ``base``."""
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] ov = out
    cdef Py_ssize_t i
    cdef double* dst = &ov[0] if n else NULL
    with nogil:
        for i in range(n):
            dst[i] = priority(<u64>i, base)
    return out


def _priorities_below(u64 base, Py_ssize_t n, double rate):
    """:func:`_priorities`, keeping only the rows below ``rate``: ``(rows, priorities)``."""
    # A priority is k / 2**53 for an integer k < 2**53, so it is below rate when k
    # is below rate * 2**53 (exact: a power of two), that is below its ceiling:
    # an integer compare, and the float of the kept rows only.
    cdef double scaled = rate * 9007199254740992.0
    cdef u64 below = (0 if not scaled > 0 else 9007199254740992ULL
                      if scaled >= 9007199254740992.0 else <u64>ceil(scaled))
    # Room for every row; pages past the kept ones are never touched.
    take = np.empty(n, dtype=np.int64)
    prio = np.empty(n, dtype=np.float64)
    cdef i64[::1] tv = take
    cdef double[::1] pv = prio
    cdef Py_ssize_t i, m = 0
    cdef u64 k
    cdef i64* t = &tv[0] if n else NULL
    cdef double* q = &pv[0] if n else NULL
    with nogil:
        for i in range(n):
            k = priority_bits(<u64>i, base)
            if k < below:
                t[m] = i
                q[m] = <double>k * (1.0 / 9007199254740992.0)
                m += 1
    return take[:m].copy(), prio[:m].copy()


def _stable_by_leaf(const i64[:] leaf, const i64[:] by_position, Py_ssize_t n_leaves):
    """Rows in ``by_position`` order, stably grouped by leaf; and each leaf's row count."""
    cdef Py_ssize_t n = leaf.shape[0], m = by_position.shape[0], i, k, b
    counts = np.zeros(n_leaves, dtype=np.int64)
    cursor_a = np.empty(n_leaves, dtype=np.int64)
    order = np.empty(m, dtype=np.int64)
    cdef i64[::1] cnt = counts, cursor = cursor_a, ov = order
    cdef i64 acc = 0
    with nogil:
        for i in range(n):
            cnt[leaf[i]] += 1
        for b in range(n_leaves):
            cursor[b] = acc
            acc += cnt[b]
        for k in range(m):
            i = by_position[k]
            b = leaf[i]
            ov[cursor[b]] = i
            cursor[b] += 1
    return order, counts


def _route_rows(const i64[:, :] keys, tree, const i64[::1] pos, bint use_tie, int_t[::1] out,
                i64[::1] out_partition, const i64[::1] partition_of_leaf):
    """Leaf of every row (column of ``keys``) into ``out`` down ``tree`` (a
    :class:`dmondrian.partition.cut_tree.CutTree`), and its output partition into
    ``out_partition`` unless that is empty."""
    cdef const i64[::1] qi = _int64(tree.qi)
    cdef const i64[::1] t = _int64(tree.t)
    cdef const i64[::1] eq = _int64(tree.eq)
    cdef const i64[::1] tie_before = _int64(tree.tie_before)
    cdef const i64[::1] rank_off = _int64(tree.rank_off)
    cdef const i64[::1] ranks = _int64(tree.ranks)
    cdef const i64[::1] left = _int64(tree.left)
    cdef const i64[::1] right = _int64(tree.right)
    cdef const i64[::1] leaf = _int64(tree.leaf)
    # A block of rows steps down one level at a time with branch-free steps
    # (a leaf steps to itself), faster than one row's walk to its leaf after
    # another, whose every cut is a mispredicted branch.
    cdef Py_ssize_t m = qi.shape[0], n = keys.shape[1], d = keys.shape[0]
    cdef Py_ssize_t j, blk, s, b, b_n, i, level, top, height
    cdef bint with_partition = out_partition.shape[0] > 0, busy
    _check_out(out.shape[0], n)
    if with_partition:
        _check_out(out_partition.shape[0], n)
    if use_tie and pos.shape[0] < n:
        raise ValueError("positions hold fewer values than keys have rows")
    if d and n and keys.strides[1] != sizeof(i64):
        keys = np.ascontiguousarray(keys)
    cdef Py_ssize_t row_stride = keys.strides[0] // sizeof(i64)
    # Leaves become nodes that send every row to themselves: QI 0, t = max.
    child_a = np.empty(2 * m, dtype=np.int64)
    step_a = np.empty((3, m), dtype=np.int64)
    depth_a = np.zeros(m, dtype=np.int64)
    stack_a = np.empty(m, dtype=np.int64)
    partition_a = np.zeros(m, dtype=np.int64)
    node_a = np.empty(ROUTE_BLOCK, dtype=np.int64)
    cdef i64[::1] child = child_a, depth = depth_a, stack = stack_a, partition_of_node = partition_a
    cdef i64[::1] node = node_a
    cdef i64[:, ::1] step = step_a
    cdef i64[::1] step_qi = step[0], step_t = step[1], step_rank = step[2]
    cdef const i64* kp = &keys[0, 0] if d and n else NULL
    cdef i64 nd, v, ro
    cdef bint go_left
    with nogil:
        for j in range(m):
            if qi[j] >= 0:
                child[2 * j], child[2 * j + 1] = left[j], right[j]
                step_qi[j], step_t[j], step_rank[j] = qi[j], t[j], rank_off[j]
            else:
                child[2 * j] = child[2 * j + 1] = j
                step_qi[j], step_t[j], step_rank[j] = 0, MISSING_KEY, -1
        # Levels to step: the tree's height (parents may follow their children).
        stack[0], top, height = 0, 1, 0
        while top > 0:
            top -= 1
            j = stack[top]
            height = max(height, depth[j])
            if qi[j] >= 0:
                depth[left[j]] = depth[right[j]] = depth[j] + 1
                stack[top] = left[j]
                stack[top + 1] = right[j]
                top += 2
        # Each node's output partition (only when out_partition is wanted).
        if with_partition:
            for j in range(m):
                if qi[j] < 0:
                    partition_of_node[j] = partition_of_leaf[leaf[j]]
        for blk in range((n + ROUTE_BLOCK - 1) // ROUTE_BLOCK):
            s = blk * ROUTE_BLOCK
            b_n = min(ROUTE_BLOCK, n - s)
            for b in range(b_n):
                node[b] = 0
            for level in range(height):
                for b in range(b_n):
                    nd = node[b]
                    i = s + b
                    v = kp[step_qi[nd] * row_stride + i]
                    ro = step_rank[nd]
                    if ro >= 0:
                        v = ranks[ro + v]
                    if use_tie:
                        go_left = goes_left(v, step_t[nd], eq[nd], pos[i], tie_before[nd])
                    else:
                        go_left = v <= step_t[nd]
                    node[b] = child[2 * nd + 1 - go_left]
                if level % 8 == 7:  # a lopsided tree: stop once the block is done
                    busy = False
                    for b in range(b_n):
                        busy = busy | (qi[node[b]] >= 0)
                    if not busy:
                        break
            for b in range(b_n):
                out[s + b] = <int_t>leaf[node[b]]
            if with_partition:
                for b in range(b_n):
                    out_partition[s + b] = partition_of_node[node[b]]
