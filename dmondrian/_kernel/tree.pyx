"""The Mondrian tree over a whole table: breadth-first top levels, then subtrees.

A node's position range never changes once it exists, so independent nodes
and subtrees are split in parallel (OpenMP) and the result does not depend on
the number of threads or their scheduling: class ids come from a prefix sum
over "a class starts here" flags in position order (see class_stats).

Each thread finishes its subtrees depth-first with an explicit stack (depth
can reach n / k on skewed data) and its own work space. The entry point
releases the GIL: in a Dask worker the event loop (which receives shuffle
data and answers heartbeats) keeps running while a leaf is partitioned.
"""

import numpy as np

from cython.parallel cimport prange
from libc.stdlib cimport malloc, calloc, realloc, free

from ._common cimport i64
from ._rules cimport (Buffers, Node, Rules, WorkRows, is_class, WS_ROWS, P_N_SENS, P_N_SEEN,
                      P_ENT_ROW, OBJ_NCP)
from .ncp cimport ncp_words
from .split cimport RuleArrays, column_stats, split_node, make_class, workspace_width

from .constants import PARALLEL_MIN_ROWS as _PARALLEL_MIN_ROWS_PY

cdef extern from *:
    """
    /* How many nodes the breadth-first top phase makes before handing whole
       subtrees to threads: enough that two cores stay busy when subtrees
       differ in size, few enough that the top phase's per-level overhead
       stays negligible. */
    #define DM_PARALLEL_FRONTIER 64
    """
    const Py_ssize_t PARALLEL_FRONTIER "DM_PARALLEL_FRONTIER"

cdef Py_ssize_t PARALLEL_MIN_ROWS = _PARALLEL_MIN_ROWS_PY


cdef struct Frontier:
    # m nodes: (start, end, depth, buffer) each, and their per-QI statistics.
    Py_ssize_t m
    i64* node      # (m, 4)
    i64* lo        # (m, d)
    i64* hi
    i64* miss


cdef void _free_frontier(Frontier* f) noexcept nogil:
    free(f.node)
    free(f.lo)
    free(f.hi)
    free(f.miss)
    f.node = f.lo = f.hi = f.miss = NULL


cdef bint _alloc_frontier(Frontier* f, Py_ssize_t m, Py_ssize_t d) noexcept nogil:
    f.m = m
    f.node = <i64*>malloc((4 * m + 1) * sizeof(i64))
    f.lo = <i64*>malloc((m * d + 1) * sizeof(i64))
    f.hi = <i64*>malloc((m * d + 1) * sizeof(i64))
    f.miss = <i64*>malloc((m * d + 1) * sizeof(i64))
    return f.node != NULL and f.lo != NULL and f.hi != NULL and f.miss != NULL


cdef struct Work:
    # One thread's memory for splitting nodes: the work space rows, the
    # spans, and the two children's statistics.
    WorkRows rows
    double* spans
    i64* child   # (3, 2, d): lo, hi, miss of the left then right child


cdef bint _alloc_work(Work* w, const Rules* rules, const Buffers* bufs) noexcept nogil:
    cdef Py_ssize_t d = rules.qi.d
    w.rows.width = workspace_width(rules.qi.card, d, rules.priv.ip[P_N_SENS], bufs.rows)
    # Zeroed: the row of codes seen in a node must start (and stay) all zeros.
    w.rows.data = <i64*>calloc(WS_ROWS * w.rows.width, sizeof(i64))
    w.spans = <double*>malloc((d + 1) * sizeof(double))
    w.child = <i64*>malloc((6 * d + 1) * sizeof(i64))
    w.rows.ncp = NULL
    w.rows.seen = NULL
    w.rows.ent = NULL
    w.rows.pair = NULL
    if rules.priv.ip[P_ENT_ROW] >= 0:
        # Zeroed: the entity marks start (and stay) all zeros between checks.
        w.rows.seen = <i64*>calloc(rules.priv.ip[P_N_SEEN] + 1, sizeof(i64))
        if w.rows.seen == NULL:
            return False
    if rules.objective == OBJ_NCP:
        w.rows.ncp = <i64*>malloc(ncp_words(d) * sizeof(i64))
        if w.rows.ncp == NULL:
            return False
    return w.rows.data != NULL and w.spans != NULL and w.child != NULL


cdef void _free_work(Work* w) noexcept nogil:
    free(w.rows.data)
    free(w.spans)
    free(w.child)
    free(w.rows.ncp)
    free(w.rows.seen)
    w.rows.data = NULL
    w.rows.ncp = NULL
    w.rows.seen = NULL
    w.spans = NULL
    w.child = NULL


cdef inline void _copy(i64* dst, const i64* src, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t q
    for q in range(d):
        dst[q] = src[q]


cdef int _run_subtree(const Buffers* bufs, const Rules* rules, const i64* node, const i64* lo0,
                      const i64* hi0, const i64* miss0, unsigned char* class_start,
                      i64* depth_at) noexcept nogil:
    """Finish one subtree depth-first; -1 when memory runs out."""
    cdef Py_ssize_t d = rules.qi.d, cap = 64, top = 1, nd = d if d > 0 else 1
    cdef i64 s, e, depth, buf, n_left, mid
    cdef Node at
    cdef Work w
    # Explicit stack: each entry is a node (s, e, depth, buf) and its bounds.
    cdef i64* st = <i64*>malloc(cap * 4 * sizeof(i64))
    cdef i64* st_stats = <i64*>malloc(cap * 3 * nd * sizeof(i64))
    cdef i64* grown
    cdef i64* stats
    cdef i64* child
    if st == NULL or st_stats == NULL or not _alloc_work(&w, rules, bufs):
        free(st)
        free(st_stats)
        _free_work(&w)
        return -1
    child = w.child
    _copy(st, node, 4)
    _copy(st_stats, lo0, d)
    _copy(st_stats + d, hi0, d)
    _copy(st_stats + 2 * d, miss0, d)
    while top > 0:
        top -= 1
        s, e, depth, buf = st[4 * top], st[4 * top + 1], st[4 * top + 2], st[4 * top + 3]
        stats = st_stats + 3 * d * top
        at.s, at.e, at.depth, at.buf = s, e, depth, buf
        at.lo, at.hi, at.miss = stats, stats + d, stats + 2 * d
        if is_class(e - s, depth, rules):
            # Most nodes near the leaves: skip the split call.
            make_class(bufs, &at, class_start, rules)
            if depth_at != NULL:
                depth_at[s] = depth
            continue
        n_left = split_node(bufs, &at, child, rules, class_start, w.spans, &w.rows)
        if n_left == 0:
            if depth_at != NULL:
                depth_at[s] = depth
            continue
        if top + 2 > cap:
            cap *= 2
            grown = <i64*>realloc(st, cap * 4 * sizeof(i64))
            if grown != NULL:
                st = grown
                grown = <i64*>realloc(st_stats, cap * 3 * nd * sizeof(i64))
            if grown == NULL:
                free(st_stats)
                free(st)
                _free_work(&w)
                return -1
            st_stats = grown
            stats = st_stats + 3 * d * top
        mid = s + n_left
        # Right child below the left one, so the left is finished first.
        st[4 * top], st[4 * top + 1], st[4 * top + 2], st[4 * top + 3] = mid, e, depth + 1, 1 - buf
        st[4 * top + 4], st[4 * top + 5], st[4 * top + 6], st[4 * top + 7] = (
            s, mid, depth + 1, 1 - buf)
        # child holds lo (left, right), hi (left, right), miss (left, right).
        _copy(stats, child + d, d)
        _copy(stats + d, child + 3 * d, d)
        _copy(stats + 2 * d, child + 5 * d, d)
        _copy(stats + 3 * d, child, d)
        _copy(stats + 4 * d, child + 2 * d, d)
        _copy(stats + 5 * d, child + 4 * d, d)
        top += 2
    free(st)
    free(st_stats)
    _free_work(&w)
    return 0


cdef int _split_level(const Buffers* bufs, const Rules* rules, Frontier* fr,
                      unsigned char* class_start, i64* depth_at, int n_threads) noexcept nogil:
    """Split every node of one breadth-first level in parallel; ``fr`` becomes the next.

    -1 when memory runs out.
    """
    cdef Py_ssize_t d = rules.qi.d, m = fr.m, i, q, side, n_split = 0, k
    cdef i64* lefts = <i64*>calloc(m + 1, sizeof(i64))
    cdef i64* child = <i64*>malloc((m * 6 * d + 1) * sizeof(i64))
    cdef int failed = 0
    cdef Frontier nxt
    cdef i64 mid
    if lefts == NULL or child == NULL:
        free(lefts)
        free(child)
        return -1
    for i in prange(m, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        # A sum, which prange reduces (a plain assignment would be lastprivate).
        failed += _split_one(bufs, rules, fr, i, child + i * 6 * d, lefts, class_start) < 0
    if failed:
        free(lefts)
        free(child)
        return -1
    for i in range(m):
        n_split += lefts[i] > 0
        if lefts[i] == 0 and depth_at != NULL:
            depth_at[fr.node[4 * i]] = fr.node[4 * i + 2]
    if not _alloc_frontier(&nxt, 2 * n_split, d):
        _free_frontier(&nxt)
        free(lefts)
        free(child)
        return -1
    k = 0
    for i in range(m):
        if lefts[i] == 0:
            continue
        mid = fr.node[4 * i] + lefts[i]
        for side in range(2):
            nxt.node[4 * k] = fr.node[4 * i] if side == 0 else mid
            nxt.node[4 * k + 1] = mid if side == 0 else fr.node[4 * i + 1]
            nxt.node[4 * k + 2] = fr.node[4 * i + 2] + 1
            nxt.node[4 * k + 3] = 1 - fr.node[4 * i + 3]
            for q in range(d):
                nxt.lo[k * d + q] = child[i * 6 * d + side * d + q]
                nxt.hi[k * d + q] = child[i * 6 * d + 2 * d + side * d + q]
                nxt.miss[k * d + q] = child[i * 6 * d + 4 * d + side * d + q]
            k += 1
    _free_frontier(fr)
    fr[0] = nxt
    free(lefts)
    free(child)
    return 0


cdef int _split_one(const Buffers* bufs, const Rules* rules, const Frontier* fr, Py_ssize_t i,
                    i64* child, i64* lefts, unsigned char* class_start) noexcept nogil:
    cdef Py_ssize_t d = rules.qi.d
    cdef Work w
    cdef Node nd
    if not _alloc_work(&w, rules, bufs):
        _free_work(&w)
        return -1
    nd.s, nd.e, nd.depth, nd.buf = (fr.node[4 * i], fr.node[4 * i + 1], fr.node[4 * i + 2],
                                    fr.node[4 * i + 3])
    nd.lo, nd.hi, nd.miss = fr.lo + i * d, fr.hi + i * d, fr.miss + i * d
    lefts[i] = split_node(bufs, &nd, child, rules, class_start, w.spans, &w.rows)
    _free_work(&w)
    return 0


cdef int _partition_all(const Buffers* bufs, const Rules* rules, const i64* leaves,
                        Py_ssize_t n_leaves, unsigned char* class_start, i64* depth_at,
                        int n_threads) noexcept nogil:
    cdef Py_ssize_t d = rules.qi.d, n = bufs.n, i, j, ij
    cdef Frontier fr
    cdef int failed = 0
    cdef bint serial = n < PARALLEL_MIN_ROWS or n_threads <= 1
    if not _alloc_frontier(&fr, n_leaves, d):
        _free_frontier(&fr)
        return -1
    for i in range(n_leaves):
        fr.node[4 * i] = leaves[2 * i]
        fr.node[4 * i + 1] = leaves[2 * i + 2] if i + 1 < n_leaves else n
        fr.node[4 * i + 2] = leaves[2 * i + 1]
        fr.node[4 * i + 3] = 0
    # Every key is read once here: one (leaf, QI) pair per thread at a time.
    for ij in prange(n_leaves * d, nogil=True, num_threads=1 if serial else n_threads,
                     schedule="dynamic", chunksize=1):
        i = ij // d
        j = ij % d
        column_stats(bufs.data + j * n, fr.node[4 * i], fr.node[4 * i + 1],
                     rules.qi.kind[j], rules.qi.card[j], &fr.lo[i * d + j],
                     &fr.hi[i * d + j], &fr.miss[i * d + j])
    if serial:
        for i in range(n_leaves):
            if _run_subtree(bufs, rules, fr.node + 4 * i, fr.lo + i * d, fr.hi + i * d,
                            fr.miss + i * d, class_start, depth_at) < 0:
                failed = 1
                break
        _free_frontier(&fr)
        return -failed
    # Breadth-first top levels, each level's nodes split in parallel, until
    # there are enough independent subtrees to keep every thread busy.
    while 0 < fr.m < PARALLEL_FRONTIER:
        if _split_level(bufs, rules, &fr, class_start, depth_at, n_threads) < 0:
            _free_frontier(&fr)
            return -1
    for i in prange(fr.m, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        failed += _run_subtree(bufs, rules, fr.node + 4 * i, fr.lo + i * d, fr.hi + i * d,
                               fr.miss + i * d, class_start, depth_at) < 0
    _free_frontier(&fr)
    return -1 if failed else 0


def mondrian_partition(bufs_keys, rules, leaves, int n_threads=1, depths=None):
    """Run Mondrian over a key matrix of ``d`` QIs and ``n`` rows.

    Parameters
    ----------
    bufs_keys : int64 array (2, r, n), C-contiguous
        The kernel's double buffer (see :func:`dmondrian._kernel.double_buffer`).
        ``bufs_keys[0]`` holds, one row each, the ``d`` QIs' order-preserving
        keys (see :mod:`dmondrian.encoding.qi`), then any rows that only ride along
        (the sensitive codes, the entity codes and the (entity, sensitive
        value) pair codes, at the rows ``rules.ip`` names), and last the row
        numbers ``0..n-1``.
    rules : dmondrian._kernel.rules.KernelRules
        The QIs' kinds, scales and trees, the privacy constraint (with the
        buffer rows of the codes riding along), the mode, depth limit and
        objective.
    leaves : int64 array (m, 2)
        Independent root nodes, as ``(start, depth)`` rows in increasing
        ``start`` order, the first at 0: root ``i`` holds positions
        ``start[i]`` to ``start[i + 1]`` (the last, to ``n``) and counts its
        depth from ``depth[i]`` against ``max_depth``. One root ``(0, 0)`` is
        plain Mondrian; the distributed engine passes an output partition's
        leaves, each already ``depth`` cuts below the table's root, so one
        call does them all and numbers their classes in position order.
    n_threads : int, default 1
        Threads to split independent nodes on. The result does not depend
        on it.
    depths : int64 array (n,), optional
        Filled at each class's first position with its depth in the tree
        (its root's ``depth`` plus the cuts below it); other positions are
        left as they are. :func:`~dmondrian._kernel.refine.refine_partition`
        groups its blocks by the subtrees these describe.

    Returns
    -------
    order : int64 array (n,)
        Row numbers in class order (a view of ``bufs_keys[0, -1]``).
    class_start : bool array (n,)
        True at the first position of each class in ``order``.
    sorted_keys : int64 array (d, n)
        The keys in class order (a view of ``bufs_keys[0, :d]``).
    """
    cdef i64[:, :, ::1] bv = bufs_keys
    cdef RuleArrays config = RuleArrays(rules)
    cdef const i64[:, ::1] rv = np.ascontiguousarray(leaves, dtype=np.int64)
    cdef Py_ssize_t d = config.rules.qi.d, n = bv.shape[2]
    cdef Buffers bufs
    cdef int status
    cdef i64[::1] dv
    cdef i64* depth_at = NULL
    if bv.shape[0] != 2 or bv.shape[1] != rules.buffer_rows:
        raise ValueError("bufs_keys must be a (2, rules.buffer_rows, n) double buffer: "
                         "keys, riding codes, row ids")
    class_start = np.zeros(n, dtype=np.bool_)
    cdef unsigned char[::1] ls = class_start.view(np.uint8)
    if n == 0:
        return bufs_keys[0, -1], class_start, bufs_keys[0, :d]
    if depths is not None:
        dv = depths
        if dv.shape[0] != n:
            raise ValueError("depths must hold one entry per row")
        depth_at = &dv[0]
    bufs.data = &bv[0, 0, 0]
    bufs.rows = bv.shape[1]
    bufs.n = n
    with nogil:
        status = _partition_all(&bufs, &config.rules, &rv[0, 0], rv.shape[0], &ls[0], depth_at,
                                n_threads if n_threads > 0 else 1)
    if status < 0:
        raise MemoryError("not enough memory for the kernel's work space")
    return bufs_keys[0, -1], class_start, bufs_keys[0, :d]


def subtree_blocks(depths, class_start, roots, Py_ssize_t max_rows):
    """The largest subtrees of the cuts of at most ``max_rows`` rows.

    The tree is rebuilt from its classes' depths in position order: two
    adjacent nodes of one depth are siblings, each root starting afresh. A
    subtree is a block when its parent holds more than ``max_rows`` rows.

    Parameters
    ----------
    depths : int64 array (n,)
        Each class's depth at its first position, as :func:`mondrian_partition`
        fills it.
    class_start : bool array (n,)
        True at the first position of each class.
    roots : int64 array
        The positions where a root starts (0 among them).
    max_rows : int
        Most rows of a block.

    Returns
    -------
    int64 array (m, 2)
        The blocks' ``(start, end)`` positions in order; a single class of more
        than ``max_rows`` rows is left out.

    Examples
    --------
    >>> d = np.array([2, 2, 1, 0, 0, 0], dtype=np.int64)  # classes of 1, 1 and 4 rows
    >>> cs = np.array([1, 1, 1, 0, 0, 0], dtype=bool)
    >>> subtree_blocks(d, cs, np.array([0]), 2).tolist()
    [[0, 2]]
    """
    cdef const i64[::1] depth = np.ascontiguousarray(depths, dtype=np.int64)
    cdef const i64[::1] starts = np.flatnonzero(class_start).astype(np.int64)
    cdef Py_ssize_t nc = starts.shape[0], n = depth.shape[0], c, top = 0
    is_root = np.zeros(n + 1, dtype=np.uint8)
    is_root[np.asarray(roots, dtype=np.int64)] = 1
    is_root[0] = 1
    unit_arr = is_root[:n].copy()
    cdef const unsigned char[::1] root = is_root
    cdef unsigned char[::1] unit = unit_arr
    # The stack of nodes still waiting for their right sibling: depth, start, size.
    cdef i64[:, ::1] st = np.empty((nc + 1, 3), dtype=np.int64)
    with nogil:
        for c in range(nc):
            if root[starts[c]]:
                top = 0
            st[top, 0] = depth[starts[c]]
            st[top, 1] = starts[c]
            st[top, 2] = (starts[c + 1] if c + 1 < nc else n) - starts[c]
            top += 1
            while top >= 2 and st[top - 1, 0] == st[top - 2, 0]:
                if st[top - 1, 2] + st[top - 2, 2] > max_rows:
                    unit[st[top - 1, 1]] = 1
                    unit[st[top - 2, 1]] = 1
                st[top - 2, 2] += st[top - 1, 2]
                st[top - 2, 0] -= 1
                top -= 1
    first = np.flatnonzero(unit_arr)
    bounds = np.stack([first, np.append(first[1:], n)], axis=1).astype(np.int64)
    return np.ascontiguousarray(bounds[bounds[:, 1] - bounds[:, 0] <= max_rows])
