"""Compiled pass of :mod:`dmondrian.plans.batch`: route new rows down a fitted plan and lift
them to the node holding them.

:func:`place_rows` does both in one pass over the rows (callers run passes over
separate chunks of rows on threads; the pass releases the GIL): a
block of rows steps down the cut tree one level at a time (their walks are
independent, so the CPU overlaps their memory reads, and each step prefetches
the record its row reads next, a block later), then each row climbs from its
leaf to the deepest node on its path whose fitted region holds its values
(see :mod:`dmondrian.plans.batch`, whose rule this is). A block's leaves'
records are asked for when it is walked, and again a few rows ahead of its
lift, which runs after the next block's walk.

Every array is in the packed tree's order (:func:`dmondrian.plans.packed.packed_tree`,
:func:`line_order`): siblings side by side, a cache line holding the top two
levels of a subtree, the top levels, which every row visits, together. A node of the walk is an
8-byte :c:type:`Narrow` record, eight to a cache line, when the plan's cut
values fit 32-bit offsets (a block's keys are then narrowed once, before its
walk); else, and for plans whose cuts split ties, a 16-byte :c:type:`Step`. Everything the lift reads of a node
(its number, its parent, a flag byte per QI, its nominal codes and its
bounds, as 32-bit offsets when the plan's bounds allow) is one record of
``rec``, one cache line for most plans.
"""

import numpy as np

from libc.stdint cimport int32_t, uint8_t, uint64_t
from libc.string cimport memcpy

from dmondrian._kernel._common cimport MISSING_KEY, i64
from dmondrian._kernel.walk cimport goes_left

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define DM_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
    #else
    #define DM_PREFETCH(p) ((void)0)
    #endif
    """
    void prefetch "DM_PREFETCH"(const void* p) noexcept nogil

# Rows walked down the tree together (as in :mod:`dmondrian._kernel.routing`).
cdef enum:
    BLOCK = 256

# Rows ahead of the one being lifted whose leaf's record is asked for again: the
# request made after the block's walk (a block earlier) is often evicted by the
# next block's walk before the lift reads it.
cdef enum:
    LIFT_AHEAD = 16

# Bytes of a ``rec`` record before its flags: the node's number in the plan and its
# parent's record (int32 each).
cdef enum:
    REC_HEAD = 8

# Flags of a node and QI in ``rec``.
cdef enum:
    F_MISS = 1      # the node's fitted rows hold a missing value
    F_OPEN_LO = 2   # the node reaches the low edge of an edge kind's fitted domain
    F_OPEN_HI = 4   # ... the high edge

cdef struct Step:
    # A row goes to ``left + 1`` (the right child, its sibling's neighbour) when
    # its value is above ``t``, else to ``left``; its value is its key of QI
    # ``meta & 255``, or ``ranks[(meta >> 8) - 1 + key]`` when ``meta >> 8`` (a
    # nominal cut). A leaf is its own left child with ``t`` the largest key.
    i64 t
    int32_t left
    int32_t meta


cdef struct Narrow:
    # ``a``: the cut value as an offset from its QI's base in its unit (a row goes
    # right when its narrowed key is above it), or, for a nominal cut, where the
    # cut's bits start in ``rbit`` (a row goes right when ``rbit[a + code]``);
    # ``meta``: ``left << 8 | nominal << 7 | qi``. A leaf is its own left child
    # with ``a`` the largest int32, above every narrowed key.
    int32_t a
    int32_t meta


cdef struct Placement:
    # One call of place_rows: the packed tree (``narrow`` NULL: walk ``steps``),
    # the lift's node records, and the rows placed, with their outputs.
    const Step* steps
    const i64* eq
    const i64* tie_before
    const i64* ranks
    Py_ssize_t height
    const Narrow* narrow
    const uint8_t* rbit
    const i64* conv
    const uint8_t* rec
    Py_ssize_t rec_w
    const int32_t* slot
    const i64* scale
    const i64* keys
    Py_ssize_t stride
    Py_ssize_t d
    const i64* pos
    bint use_tie
    const uint8_t* unseen
    i64* node
    uint8_t* outside


cdef inline void _narrow_keys(Py_ssize_t s, Py_ssize_t b_n, const i64* keys, Py_ssize_t stride,
                              Py_ssize_t d, const i64* conv, int32_t* k32) noexcept nogil:
    """Rows ``s .. s + b_n - 1``'s keys as the narrow walk compares them, into ``k32``
    (QI ``j`` at ``j * BLOCK``). ``conv[3j:3j + 3]`` is ``base, unit, top`` of QI ``j``:
    a key becomes ``ceil((key - base) / unit)``, clamped to ``-1 .. top + 1`` (a cut
    value ``base + unit * q`` is below a key exactly when ``q`` is below this);
    a unit of 0 keeps a nominal QI's code."""
    cdef Py_ssize_t j, b
    cdef i64 base, unit, top, v
    cdef uint64_t dist, span
    cdef const i64* row
    cdef int32_t* out
    for j in range(d):
        base, unit, top = conv[3 * j], conv[3 * j + 1], conv[3 * j + 2]
        row = keys + j * stride + s
        out = k32 + j * BLOCK
        if unit == 0:
            for b in range(b_n):
                out[b] = <int32_t>row[b]
            continue
        span = <uint64_t>top * <uint64_t>unit
        for b in range(b_n):
            v = row[b]
            if v < base:
                out[b] = -1
                continue
            dist = <uint64_t>v - <uint64_t>base
            if dist > span:
                out[b] = <int32_t>(top + 1)
            elif unit == 1:
                out[b] = <int32_t>dist
            else:
                out[b] = <int32_t>((dist + <uint64_t>(unit - 1)) // <uint64_t>unit)


cdef void _walk_narrow(Py_ssize_t b_n, const Narrow* steps, const uint8_t* rbit,
                       Py_ssize_t height, const int32_t* k32, i64* nd_buf) noexcept nogil:
    """The leaf of a block's rows into ``nd_buf`` (their narrowed keys in ``k32``), a
    level at a time, as :func:`_walk` with 8-byte records."""
    cdef Py_ssize_t b, level
    cdef int32_t nd, v, meta, a, nom
    cdef const Narrow* st
    cdef bint busy
    for b in range(b_n):
        nd_buf[b] = 0
    for level in range(height):
        for b in range(b_n):
            st = &steps[nd_buf[b]]
            meta = st.meta
            a = st.a
            v = k32[(meta & 127) * BLOCK + b]
            # A nominal cut reads the code's bit without a branch (index 0, whose
            # read is discarded, for the other cuts).
            nom = (meta >> 7) & 1
            nd = (meta >> 8) + (<int32_t>rbit[(a + v) & -nom] if nom else <int32_t>(v > a))
            nd_buf[b] = nd
            prefetch(&steps[nd])
        if level % 8 == 7:  # a lopsided tree: stop once every row of the block is at a leaf
            busy = False
            for b in range(b_n):
                busy = busy | ((steps[nd_buf[b]].meta >> 8) != nd_buf[b])
            if not busy:
                break


cdef inline i64 _bound(const uint8_t* at, const i64* scale, Py_ssize_t j) noexcept nogil:
    """A bound stored at ``at``: an int64, or (``scale`` not NULL) an int32 offset
    from QI ``j``'s base in its unit."""
    cdef i64 v
    cdef int32_t q
    if scale == NULL:
        memcpy(&v, at, 8)
        return v
    memcpy(&q, at, 4)
    return scale[2 * j] + scale[2 * j + 1] * <i64>q


cdef inline bint _holds(const uint8_t* rec, const i64* keys, Py_ssize_t stride, Py_ssize_t i,
                        Py_ssize_t d, const int32_t* slot, const i64* scale,
                        bint* inside) noexcept nogil:
    """Whether a node (its record) holds row ``i``, with its open edges; ``inside[0]``:
    within its fitted bounds. ``slot[j]``: the byte offset of QI ``j``'s bounds in the
    record, or ``-1 - offset`` of a nominal QI's codes after the flags."""
    cdef Py_ssize_t j, w = 4 if scale != NULL else 8
    cdef i64 v, lo, hi
    cdef int32_t at
    cdef uint8_t f
    cdef bint ins = True, h
    for j in range(d):
        v = keys[j * stride + i]
        at = slot[j]
        if at < 0:
            h = rec[REC_HEAD + d - 1 - at + v] != 0
            ins = ins and h
        else:
            f = rec[REC_HEAD + j]
            if v == MISSING_KEY:
                h = (f & (F_MISS | F_OPEN_HI)) != 0
                ins = ins and (f & F_MISS) != 0
            else:
                lo = _bound(rec + at, scale, j)
                hi = _bound(rec + at + w, scale, j)
                h = (v >= lo or (f & F_OPEN_LO) != 0) and (v <= hi or (f & F_OPEN_HI) != 0)
                ins = ins and lo <= v <= hi
        if not h:
            inside[0] = False
            return False
    inside[0] = ins
    return True


cdef void _walk(const Placement* p, Py_ssize_t s, Py_ssize_t b_n, i64* nd_buf) noexcept nogil:
    """The leaf of rows ``s .. s + b_n - 1`` into ``nd_buf``, a level at a time."""
    # Locals: the walk's writes could otherwise alias the struct's fields.
    cdef const Step* steps = p.steps
    cdef const i64* eq = p.eq
    cdef const i64* tie_before = p.tie_before
    cdef const i64* ranks = p.ranks
    cdef const i64* keys = p.keys
    cdef const i64* pos = p.pos
    cdef Py_ssize_t height = p.height, stride = p.stride
    cdef bint use_tie = p.use_tie
    cdef Py_ssize_t b, i, level
    cdef i64 nd, v, r, ro
    cdef int32_t meta
    cdef const Step* st
    cdef bint right, busy
    for b in range(b_n):
        nd_buf[b] = 0
    for level in range(height):
        for b in range(b_n):
            nd = nd_buf[b]
            st = &steps[nd]
            i = s + b
            meta = st.meta
            v = keys[(meta & 255) * stride + i]
            # A nominal cut compares the code's rank: read without a branch (the
            # index is 0 for other cuts, whose read is discarded).
            ro = meta >> 8
            r = ranks[(ro - 1 + v) * (ro != 0)]
            v = r if ro else v
            if use_tie:
                right = not goes_left(v, st.t, eq[nd], pos[i], tie_before[nd])
            else:
                right = v > st.t
            nd = st.left + right
            nd_buf[b] = nd
            # Read when the walk comes back to this row, a block later: by then
            # the record is in cache instead of a miss the step waits on.
            prefetch(&steps[nd])
        if level % 8 == 7:  # a lopsided tree: stop once every row of the block is at a leaf
            busy = False
            for b in range(b_n):
                busy = busy | (steps[nd_buf[b]].left != nd_buf[b])
            if not busy:
                break


cdef inline void _prefetch_rec(const uint8_t* r, Py_ssize_t rec_w) noexcept nogil:
    prefetch(r)
    if rec_w > 64:
        prefetch(r + 64)


cdef void _lift(const Placement* p, Py_ssize_t s, Py_ssize_t b_n, i64* nd_buf,
                i64* pending) noexcept nogil:
    """Lift rows ``s .. s + b_n - 1`` from their leaf (``nd_buf``) to the node holding
    them. Each wave checks every row still climbing and asks for the next node's
    record for the next wave, and for the record of the row ``LIFT_AHEAD`` places on."""
    # Locals: the lift's writes could otherwise alias the struct's fields.
    cdef const i64* keys = p.keys
    cdef const uint8_t* unseen = p.unseen
    cdef const uint8_t* rec = p.rec
    cdef const int32_t* slot = p.slot
    cdef const i64* scale = p.scale
    cdef i64* node = p.node
    cdef uint8_t* outside = p.outside
    cdef Py_ssize_t stride = p.stride, d = p.d, rec_w = p.rec_w
    cdef Py_ssize_t b, i, k, n_pending = b_n, kept
    cdef i64 nd
    cdef int32_t original, up
    cdef const uint8_t* r
    cdef bint held, inside
    for b in range(b_n):
        pending[b] = b
    while n_pending:
        kept = 0
        for k in range(n_pending):
            b = pending[k]
            i = s + b
            nd = nd_buf[b]
            if k + LIFT_AHEAD < n_pending:
                _prefetch_rec(rec + nd_buf[pending[k + LIFT_AHEAD]] * rec_w, rec_w)
            if unseen != NULL and unseen[i]:
                node[i] = 0
                outside[i] = 1
                continue
            r = rec + nd * rec_w
            inside = False
            held = _holds(r, keys, stride, i, d, slot, scale, &inside)
            if held or nd == 0:
                outside[i] = not (held and inside)
                memcpy(&original, r, 4)
                node[i] = original
                continue
            memcpy(&up, r + 4, 4)
            nd_buf[b] = up
            prefetch(rec + <i64>up * rec_w)
            pending[kept] = b
            kept += 1
        n_pending = kept


cdef void _place_range(const Placement* p, Py_ssize_t n, i64* buf, int32_t* k32) noexcept nogil:
    """Place rows ``0 .. n - 1``, a block at a time: each block is walked (on the
    ``narrow`` records when given), its leaves' records asked for, and the block
    before it lifted while they arrive. ``buf`` holds ``3 * BLOCK`` nodes, ``k32``
    a block's narrowed keys."""
    cdef Py_ssize_t blk, b, s, b_n, n_blocks = (n + BLOCK - 1) // BLOCK
    cdef i64* cur
    cdef i64* prev
    cdef i64* pending = buf + 2 * BLOCK
    # Locals: the walks' writes could otherwise alias the struct's fields.
    cdef const Narrow* narrow = p.narrow
    cdef const uint8_t* rbit = p.rbit
    cdef const i64* conv = p.conv
    cdef const i64* keys = p.keys
    cdef const uint8_t* rec = p.rec
    cdef Py_ssize_t height = p.height, stride = p.stride, d = p.d, rec_w = p.rec_w
    for blk in range(n_blocks + 1):
        cur = buf + (blk % 2) * BLOCK
        prev = buf + ((blk + 1) % 2) * BLOCK
        if blk < n_blocks:
            s = blk * BLOCK
            b_n = min(<Py_ssize_t>BLOCK, n - s)
            if narrow != NULL:
                _narrow_keys(s, b_n, keys, stride, d, conv, k32)
                _walk_narrow(b_n, narrow, rbit, height, k32, cur)
            else:
                _walk(p, s, b_n, cur)
            for b in range(b_n):
                _prefetch_rec(rec + cur[b] * rec_w, rec_w)
        if blk > 0:
            s = (blk - 1) * BLOCK
            b_n = min(<Py_ssize_t>BLOCK, n - s)
            _lift(p, s, b_n, prev, pending)


def place_rows(const i64[:, :] keys, tables, const i64[::1] pos, bint use_tie,
               const uint8_t[::1] unseen, i64[::1] node, uint8_t[::1] outside):
    """Route every row down the packed tree and lift it to the deepest node holding it.

    Parameters
    ----------
    keys : int64 array (QIs, rows)
        The rows' keys in the plan's encoding (rows contiguous; a slice of a
        larger matrix's columns is read in place).
    tables : tuple
        The plan's tables (:func:`dmondrian.plans.packed.lift_tables`): ``(steps,
        eq, tie_before, ranks, height, narrow, rbit, conv, rec, slot, scale)``,
        described below.
    pos : int64 array (rows,)
        Input positions (read when ``use_tie``).
    use_tie : bool
    unseen : uint8 array (rows,) or (0,)
        1 for rows holding a value the plan never saw (they go to the root).
    node : int64 array (rows,)
        Out: the node holding each row (the root when none does), in the plan's
        numbering.
    outside : uint8 array (rows,)
        Out: 1 where the row lies outside its node's fitted bounds (held through
        an open edge, or at the root without being held).

    Notes
    -----
    The tables:

    steps : int64 array (nodes, 2)
        The packed tree, one :c:type:`Step` record per node, in :func:`line_order`'s order
        (:func:`dmondrian.plans.packed.packed_tree`).
    eq, tie_before : int64 arrays (nodes,)
        Tied rows (value ``eq``) before input position ``tie_before`` go left
        (read only when ``use_tie``; may be empty otherwise).
    ranks : int64 array
        Frequency ranks of nominal cuts' codes.
    height : int
        Levels of the tree below the root.
    rec : uint8 array (nodes, width)
        A record per node, in ``steps``' order: its number in the plan (depth-first)
        and its parent's record (-1 for the root) as int32, a flag byte per QI
        (missing held, open below, open above), whether it holds each code of
        every nominal QI, and the bounds ``lo, hi`` of every ordered QI (int64,
        or int32 offsets when ``scale`` is given); rows may be padded (a
        stride of whole cache lines).
    slot : int32 array (QIs,)
        The byte offset of QI ``j``'s bounds in a record, or ``-1 - offset`` of
        its codes after the flags for a nominal QI.
    scale : int64 array (2 * QIs,) or (0,)
        ``base, unit`` of every QI: a bound is ``base + unit * offset``; empty
        when the bounds are int64.
    narrow : int32 array (nodes, 2) or (0, 2)
        The tree as :c:type:`Narrow` records, in ``steps``' order
        (:func:`dmondrian.plans.packed.narrow_tree`), walked instead of ``steps``
        unless ``use_tie``; empty: ``steps`` is walked.
    rbit : uint8 array
        Whether a nominal cut sends each code right, at ``ranks``' offsets
        (read with ``narrow``).
    conv : int64 array (3 * QIs,)
        ``base, unit, top`` of every QI, narrowing its keys (unit 0: a nominal
        code, kept); read with ``narrow``.
    """
    if len(tables) != 11:
        raise ValueError("tables must be plans.packed.lift_tables' 11 arrays")
    cdef const i64[:, ::1] steps = tables[0]
    cdef const i64[::1] eq = tables[1]
    cdef const i64[::1] tie_before = tables[2]
    cdef const i64[::1] ranks = tables[3]
    cdef Py_ssize_t height = tables[4]
    cdef const int32_t[:, ::1] narrow = tables[5]
    cdef const uint8_t[::1] rbit = tables[6]
    cdef const i64[::1] conv = tables[7]
    cdef const uint8_t[:, :] rec = tables[8]
    cdef const int32_t[::1] slot = tables[9]
    cdef const i64[::1] scale = tables[10]
    cdef Py_ssize_t d = keys.shape[0], n = keys.shape[1]
    cdef Py_ssize_t rec_w = rec.strides[0], m = rec.shape[0]
    if node.shape[0] < n or outside.shape[0] < n:
        raise ValueError("node and outside must hold a value per row")
    if unseen.shape[0] and unseen.shape[0] < n:
        raise ValueError("unseen must hold a value per row")
    if use_tie and pos.shape[0] < n:
        raise ValueError("positions hold fewer values than keys have rows")
    if (steps.shape[1] != 2 or steps.shape[0] != m
            or (use_tie and (eq.shape[0] < m or tie_before.shape[0] < m))
            or rec.shape[1] < REC_HEAD + d or slot.shape[0] != d
            or (scale.shape[0] and scale.shape[0] != 2 * d)
            or rec.strides[1] != 1 or keys.strides[1] != sizeof(i64)):
        raise ValueError("the packed tree does not match the keys")
    cdef bint use_narrow = narrow.shape[0] != 0 and not use_tie
    if use_narrow and (narrow.shape[0] != m or narrow.shape[1] != 2
                       or conv.shape[0] != 3 * d or rbit.shape[0] == 0 or d > 127):
        raise ValueError("the narrow tree does not match the keys")
    if n == 0:
        return
    if d == 0 or m == 0:
        raise ValueError("a plan has QIs and a root")
    cdef Placement p
    p.steps = <const Step*>&steps[0, 0]
    p.eq = &eq[0] if use_tie else NULL
    p.tie_before = &tie_before[0] if use_tie else NULL
    p.ranks = &ranks[0]
    p.height = height
    p.narrow = <const Narrow*>&narrow[0, 0] if use_narrow else NULL
    p.rbit = &rbit[0] if use_narrow else NULL
    p.conv = &conv[0] if use_narrow else NULL
    p.rec = &rec[0, 0]
    p.rec_w = rec_w
    p.slot = &slot[0]
    p.scale = &scale[0] if scale.shape[0] else NULL
    p.keys = &keys[0, 0]
    p.stride = keys.strides[0] // sizeof(i64)
    p.d = d
    p.pos = &pos[0] if pos.shape[0] else NULL
    p.use_tie = use_tie
    p.unseen = &unseen[0] if unseen.shape[0] else NULL
    p.node = &node[0]
    p.outside = &outside[0]
    buf_a = np.empty(3 * BLOCK, dtype=np.int64)  # two blocks' nodes, and rows climbing
    k32_a = np.empty(d * BLOCK if use_narrow else 1, dtype=np.int32)  # a block's narrowed keys
    cdef i64[::1] buf = buf_a
    cdef int32_t[::1] k32 = k32_a
    with nogil:
        _place_range(&p, n, &buf[0], &k32[0])


def line_order(const i64[::1] qi, const i64[::1] left, const i64[::1] right,
               Py_ssize_t line_pairs):
    """The walk's records in cache-line order: the root, then sibling pairs, each line
    filled from one pair down its subtree.

    Each line takes up to ``line_pairs`` pairs, breadth-first from one pair
    (the pair, its nodes' children pairs, then their children's); pairs that
    do not fit wait, in the order their parents were placed, to start lines
    of their own, and a subtree too small to fill its line leaves the rest to
    the next waiting pair.

    Parameters
    ----------
    qi, left, right : int64 arrays (nodes,)
        The cut tree (``qi < 0``: a leaf), node 0 the root.
    line_pairs : int
        Pairs in a line (4 for 8-byte records).

    Returns
    -------
    tuple
        ``(order, height)``: the node of each record (fewer than the tree's
        nodes when some are not reached from the root), and the levels below
        the root.

    Raises
    ------
    ValueError
        When a child is out of range, or the cut tree is not a tree.
    """
    cdef Py_ssize_t m = qi.shape[0], n = 0, s_head = 0, s_tail = 0, t_head, t_tail
    cdef Py_ssize_t room, x, a, b, height = 0
    if left.shape[0] != m or right.shape[0] != m or line_pairs < 1:
        raise ValueError("qi, left and right must have a value per node")
    order_a = np.empty(m, dtype=np.int64)
    if m == 0:
        return order_a, 0
    depth_a = np.zeros(m, dtype=np.int64)
    seeds_a = np.empty(m, dtype=np.int64)
    todo_a = np.empty(2 * line_pairs + 1, dtype=np.int64)
    cdef i64[::1] order = order_a, depth = depth_a, seeds = seeds_a, todo = todo_a
    cdef bint bad = False
    with nogil:
        order[0] = 0
        n = 1
        if qi[0] >= 0:
            seeds[0] = 0
            s_tail = 1
        while s_head < s_tail and not bad:
            todo[0] = seeds[s_head]
            s_head += 1
            t_head, t_tail = 0, 1
            room = line_pairs - ((n - 1) // 2) % line_pairs
            while t_head < t_tail and room > 0:
                x = todo[t_head]
                t_head += 1
                a, b = left[x], right[x]
                if a < 0 or a >= m or b < 0 or b >= m or n + 2 > m:
                    bad = True
                    break
                order[n], order[n + 1] = a, b
                n += 2
                room -= 1
                depth[a] = depth[b] = depth[x] + 1
                height = max(height, depth[a])
                # Each node is placed once, and waits only after it is placed.
                if qi[a] >= 0:
                    todo[t_tail] = a
                    t_tail += 1
                if qi[b] >= 0:
                    todo[t_tail] = b
                    t_tail += 1
            while t_head < t_tail and not bad:
                seeds[s_tail] = todo[t_head]
                s_tail += 1
                t_head += 1
    if bad:
        raise ValueError("the cut tree is not a tree of its nodes")
    return order_a[:n], height
