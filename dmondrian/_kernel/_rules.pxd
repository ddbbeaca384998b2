# What every level of the split needs to know, bundled once per kernel call:
# the QIs' kinds and scales, the hierarchy trees, the privacy constraint and
# the mode. Passed down as one pointer instead of a dozen arrays.
from ._common cimport i64

# Defined in codes.pxd, shared with Python; cimported from here by most modules.
from .codes cimport (WS_SCRATCH, WS_COUNTS, WS_ORDER, WS_RANK, WS_CUM, WS_SEEN, WS_ROWS, P_K,
                     P_SENS_ROW, P_N_SENS, P_L_DISTINCT, P_RC_L, P_T_ORDERED, P_ENT_ROW,
                     P_N_SEEN, P_PAIR_ROW, N_IP, P_LOG_L, P_RC_C, P_T, N_FP, MASK_CARD,
                     OBJ_BALANCED, OBJ_DM, OBJ_NCP)

# Buckets of the histogram median select: 16 KiB of counters stay in L1.
cdef enum:
    BUCKETS = 2048
    # Segments up to this size are selected by copying into the scratch row.
    SMALL = 1024


cdef struct QIRules:
    Py_ssize_t d           # number of QIs
    const i64* kind        # kernel kind of each QI
    const double* scale    # global scale normalizing its spans
    const i64* card        # codes of a nominal or ordinal QI
    const i64* h_parent    # hierarchy trees, concatenated
    const i64* h_lo
    const i64* h_hi
    const i64* h_leafnode
    const i64* hoff        # each QI's offset into the trees' nodes
    const i64* loff        # and into their leaves


cdef struct Privacy:
    const i64* ip
    const double* fp
    const double* q        # the whole table's sensitive distribution
    Py_ssize_t n_q


cdef struct Rules:
    QIRules qi
    Privacy priv
    bint relaxed
    i64 max_depth          # -1: no limit
    i64 objective          # OBJ_*


cdef struct Buffers:
    # The double buffer (2, rows, n): key rows of the QIs, the rows riding
    # along (sensitive codes), then the row ids.
    i64* data
    Py_ssize_t rows
    Py_ssize_t n


cdef struct WorkRows:
    # A thread's work space: WS_ROWS rows of ``width`` int64, and the "ncp"
    # objective's scoring memory (ncp.ncp_words; NULL for other objectives).
    i64* data
    Py_ssize_t width
    i64* ncp
    # With an entity (a person key): one mark word per entity code (or per
    # (entity, sensitive value) pair), all zeros between uses, and the entity
    # and pair code rows of the buffer the node being split lives in (NULL
    # when off; see bind_entities).
    i64* seen
    const i64* ent
    const i64* pair


cdef struct Node:
    # A node of the tree: rows [s, e) of buffer ``buf``, at ``depth``, and its
    # per-QI statistics (split.column_stats), d values each.
    Py_ssize_t s
    Py_ssize_t e
    i64 depth
    i64 buf
    const i64* lo
    const i64* hi
    const i64* miss


cdef struct Cut:
    # A row goes left when its key (its frequency rank, in the work space's
    # WS_RANK row, when ``ranked``) is <= t, or equals eq_value while fewer
    # than need_eq such rows went left. n_left == 0: no allowed cut.
    i64 n_left
    i64 t
    i64 eq_value
    i64 need_eq
    bint ranked


cdef inline i64* buf_row(const Buffers* b, Py_ssize_t which, Py_ssize_t r) noexcept nogil:
    return b.data + (which * b.rows + r) * b.n


cdef inline i64* ws_row(const WorkRows* ws, Py_ssize_t r) noexcept nogil:
    return ws.data + r * ws.width


cdef inline const i64* cut_rank(const Cut* cut, const WorkRows* ws) noexcept nogil:
    """The frequency ranks a cut compares (NULL: it compares keys)."""
    return ws_row(ws, WS_RANK) if cut.ranked else NULL


cdef inline void bind_entities(const WorkRows* ws, const Buffers* bufs, i64 buf,
                               const Privacy* priv) noexcept nogil:
    """Point the work space at the entity and pair rows of buffer ``buf``.

    The node's rows alternate between the two buffers with depth, so the rows
    the privacy check reads are bound per node; every other field of the work
    space is fixed for the thread, which is why it is passed as const.
    """
    cdef WorkRows* w = <WorkRows*>ws
    w.ent = buf_row(bufs, buf, priv.ip[P_ENT_ROW]) if priv.ip[P_ENT_ROW] >= 0 else NULL
    w.pair = buf_row(bufs, buf, priv.ip[P_PAIR_ROW]) if priv.ip[P_PAIR_ROW] >= 0 else NULL


cdef inline bint is_class(i64 n, i64 depth, const Rules* rules) noexcept nogil:
    """Whether a node of ``n`` rows at ``depth`` can only be a class (no split tried)."""
    return n < 2 * rules.priv.ip[P_K] or (rules.max_depth >= 0 and depth >= rules.max_depth)


cdef inline bint goes_left(i64 key, const i64* rank, i64 t, i64 eq_value, i64 need_eq,
                           i64* taken) noexcept nogil:
    """The side rule of a cut, shared by the check and the move so they agree.

    A row goes left when its key (its frequency rank when ``rank`` is not
    NULL) is ``<= t``, or equals ``eq_value`` while fewer than ``need_eq``
    such rows went left (``taken`` counts them).
    """
    cdef i64 v = rank[key] if rank != NULL else key
    if v <= t:
        return True
    if v == eq_value and taken[0] < need_eq:
        taken[0] += 1
        return True
    return False
