# The refinement's work space, the cost of a class with a row changed and the
# heap of free rows: the helpers every phase of dmondrian._kernel.refine
# (refine.pyx) evaluates.

from ._common cimport i64, MISSING_KEY, INT_MIN, KIND_NOMINAL
from ._rules cimport QIRules, Privacy, P_K, P_SENS_ROW, P_N_SENS, P_ENT_ROW, P_PAIR_ROW
from .split cimport RuleArrays
from .node cimport ordered_span
from .privacy cimport hist_ok

cdef extern from *:
    """
    /* A change must lower the block's cost by this share of it. */
    #define DM_REFINE_TOL 1e-9
    /* A k-member clustering is refined only below this many times the cost of
       Mondrian's classes: the moves and swaps lower it by a few percent,
       rarely by a fifth (benchmarks/README.md, "Least loss"). */
    #define DM_KMEMBER_REACH 1.3
    /* Mondrian's classes are not refined where the refined k-member clustering
       costs this share less than they do before their moves and swaps, which
       rarely gain that much: such blocks skip half of the refinement's work
       (benchmarks/README.md, "Least loss"). */
    #define DM_KMEMBER_MARGIN 0.1
    /* Set bits, inline: without -mpopcnt __builtin_popcountll is a libgcc call. */
    static inline int dm_popcount(unsigned long long x) {
        x -= (x >> 1) & 0x5555555555555555ULL;
        x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
        x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
        return (int)((x * 0x0101010101010101ULL) >> 56);
    }
    """
    const double TOL "DM_REFINE_TOL"
    const double KMEMBER_REACH "DM_KMEMBER_REACH"
    const double KMEMBER_MARGIN "DM_KMEMBER_MARGIN"
    int popcount "dm_popcount" (unsigned long long) nogil

cdef enum:
    # Nominal QIs with more codes are counted by scanning a class's rows.
    DENSE_CODES = 4096
    # A row is moved or swapped only into its class's nearest classes: the
    # passes cost the block's rows times this many classes, not its rows squared.
    NEIGHBOURS = 8
    # Each class keeps this many candidates for its nearest classes, with their
    # distances, instead of every class's distance: memory in the classes, not
    # their square, and a class scans every other one again only when fewer than
    # NEIGHBOURS candidates are known to be nearer than any class left out.
    CANDIDATES = 32


cdef struct Bound:
    double lb             # a lower bound of a class's spans with the row
    i64 row


cdef struct Block:
    Py_ssize_t m          # rows of the block
    Py_ssize_t d          # QIs
    Py_ssize_t ncl        # classes of the block
    Py_ssize_t cap        # most classes a block may hold
    i64* x                # (d, m) keys, block-local
    i64* sens             # (m,) sensitive codes or NULL
    i64* ent              # (m,) entity codes or NULL
    i64* pair             # (m,) pair codes or NULL
    i64* cl               # class of each row
    i64* slot             # index of each row in its class's member list
    i64* mem              # (cap, m) member lists
    i64* size             # (cap,)
    i64* lo               # (cap, d) smallest present key
    i64* lo_n             # its multiplicity
    i64* lo2              # the next present key up (MISSING_KEY if none)
    i64* hi
    i64* hi_n
    i64* hi2              # the next present key down (INT_MIN if none)
    i64* nmiss            # (cap, d) missing keys (ordered kinds)
    i64* ndist            # (cap, d) distinct codes (nominal kinds)
    i64* cnt              # (cap, nom) per-code counts of the dense nominal QIs
    unsigned long long* codes  # (cap, d) the codes present, nominal QIs of up to 64 codes
    double* cost          # (cap,)
    double* spans         # (cap,) the sum of the class's spans, for the distances
    double* red           # (m,) each row's _reduction
    double* maxred        # (cap,) the largest red of each class's rows
    i64* keep             # (m,) the refined Mondrian classes, while k-member is tried
    i64* nb               # (cap, NEIGHBOURS) each class's nearest classes
    i64* nbn              # (cap,) how many
    i64* free             # (m,) rows no k-member class holds yet
    double* lb            # (m,) a lower bound of the spans of a class with each free row
    i64* fresh            # (m,) the k-member step lb was computed at
    Bound* heap           # (m,) the free rows and their lb, a binary heap on (lb, row)
    double* ecc           # (m,) how far each row lies from the block's middle (seeds)
    i64* cand             # (cap, CANDIDATES) each class's candidates, by (distance, id)
    double* cand_d        # their distances, current
    i64* ncand            # (cap,) how many
    double* thr           # (cap,) no class left out of the candidates is nearer than this
    i64* dirty            # (cap,) classes changed since their distances were computed
    i64* dlist            # (cap,) those classes, for _neighbours
    i64 clock             # _improve's count of changes, for the three stamps below
    i64* changed_at       # (cap,) when each class last changed
    i64* nb_changed_at    # (cap,) when its nearest classes last changed
    i64* seen_at          # (m,) when each row was last found to have no change that pays
    # checks with an entity or a sensitive constraint
    i64* ent_l           # (m,) block-local entity and pair codes
    i64* pair_l
    i64* seen_ent         # (m,) marks of the checks
    i64* seen_pair
    i64 stamp
    i64* hist


cdef struct Config:
    const QIRules* qi
    const Privacy* priv
    const i64* noff       # offset of each dense nominal QI into a class's counts, -1 otherwise
    const i64* small      # whether each QI is nominal with up to 64 codes (a bit set per class)
    const i64* toff       # offset of each dense nominal QI into tab, -1 otherwise
    const double* tab     # (ndist - 1) / scale for ndist = 0..codes: the same span, no division
    Py_ssize_t nom        # counts per class
    i64 k
    bint general          # an entity or a sensitive constraint: check rows, not sizes
    Py_ssize_t passes
    Py_ssize_t cap        # most classes a block may hold
    Py_ssize_t n_sens     # sensitive codes (the checks' histogram)


cdef inline double _span(const Config* cf, Py_ssize_t q, i64 size, i64 lo, i64 hi, i64 nmiss,
                  i64 ndist) noexcept nogil:
    """Normalized span of QI ``q`` of a class with these statistics (as node_span; ordered
    QIs: node.pxd's ordered_span, the one rule)."""
    cdef const QIRules* qr = cf.qi
    cdef i64 kind = qr.kind[q]
    cdef double scale = qr.scale[q]
    if scale <= 0.0 or size <= 0:
        return 0.0
    if kind == KIND_NOMINAL:
        if cf.toff[q] >= 0:
            return cf.tab[cf.toff[q] + ndist]
        return <double>(ndist - 1) / scale
    if nmiss >= size:  # only missing values (lo, hi hold no key then)
        return 0.0
    return ordered_span(lo, hi, nmiss, kind, scale, qr.hoff[q], qr.loff[q], qr)


cdef inline i64 _count(const Block* b, const Config* cf, Py_ssize_t c, Py_ssize_t q,
                i64 code) noexcept nogil:
    """Rows of class ``c`` whose nominal QI ``q`` holds ``code``."""
    cdef Py_ssize_t j
    cdef i64 n = 0
    cdef const i64* row
    if cf.noff[q] >= 0:
        return b.cnt[c * cf.nom + cf.noff[q] + code]
    row = b.x + q * b.m
    for j in range(b.size[c]):
        n += row[b.mem[c * b.m + j]] == code
    return n


cdef inline double _cost_changed(const Block* b, const Config* cf, Py_ssize_t c, i64 out,
                          i64 inn) noexcept nogil:
    """Cost of class ``c`` without row ``out`` and with row ``inn`` (-1: none)."""
    cdef Py_ssize_t q, d = b.d, at
    cdef i64 size = b.size[c] + (inn >= 0) - (out >= 0)
    cdef i64 lo, hi, nmiss, ndist, vo, vi, n
    cdef double total = 0.0
    if size <= 0:
        return 0.0
    for q in range(d):
        at = c * d + q
        vo = b.x[q * b.m + out] if out >= 0 else INT_MIN
        vi = b.x[q * b.m + inn] if inn >= 0 else INT_MIN
        if cf.qi.kind[q] == KIND_NOMINAL:
            ndist = b.ndist[at]
            if out >= 0 and _count(b, cf, c, q, vo) == 1:
                ndist -= 1
            if inn >= 0:
                n = _count(b, cf, c, q, vi) - (out >= 0 and vo == vi)
                if n == 0:
                    ndist += 1
            total += _span(cf, q, size, 0, 0, 0, ndist)
            continue
        lo = b.lo[at]
        hi = b.hi[at]
        nmiss = b.nmiss[at]
        if out >= 0:
            if vo == MISSING_KEY:
                nmiss -= 1
            else:
                if vo == lo and b.lo_n[at] == 1:
                    lo = b.lo2[at]
                if vo == hi and b.hi_n[at] == 1:
                    hi = b.hi2[at]
        if inn >= 0:
            if vi == MISSING_KEY:
                nmiss += 1
            else:
                if vi < lo:
                    lo = vi
                if vi > hi:
                    hi = vi
        total += _span(cf, q, size, lo, hi, nmiss, 0)
    return total * <double>size


cdef inline double _spans_with(const Block* b, const Config* cf, Py_ssize_t c,
                               i64 inn) noexcept nogil:
    """The spans of class ``c`` with row ``inn`` added (its cost over its new size): the
    common case of _cost_changed, the codes of small nominal QIs read from the bit set."""
    cdef Py_ssize_t q, d = b.d, at
    cdef i64 size = b.size[c] + 1, lo, hi, vi, ndist
    cdef double total = 0.0
    for q in range(d):
        at = c * d + q
        vi = b.x[q * b.m + inn]
        if cf.qi.kind[q] == KIND_NOMINAL:
            ndist = b.ndist[at]
            if cf.small[q]:
                ndist += ((b.codes[at] >> vi) & 1) == 0
            elif _count(b, cf, c, q, vi) == 0:
                ndist += 1
            total += _span(cf, q, size, 0, 0, 0, ndist)
            continue
        lo = b.lo[at]
        hi = b.hi[at]
        if vi == MISSING_KEY:
            total += _span(cf, q, size, lo, hi, b.nmiss[at] + 1, 0)
            continue
        if vi < lo:
            lo = vi
        if vi > hi:
            hi = vi
        total += _span(cf, q, size, lo, hi, b.nmiss[at], 0)
    return total


cdef inline bint _before(const Bound* x, const Bound* y) noexcept nogil:
    return x.lb < y.lb or (x.lb == y.lb and x.row < y.row)


cdef inline void _sift_down(Block* b, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """Restore k-member's heap of free rows (on lb, then row) below position ``i``.

    The bounds ride in the heap: a comparison reads the entries, not an array
    they index."""
    cdef Py_ssize_t child
    cdef Bound* h = b.heap
    cdef Bound x = h[i]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _before(&h[child + 1], &h[child]):
            child += 1
        if not _before(&h[child], &x):
            break
        h[i] = h[child]
        i = child
    h[i] = x


cdef inline i64* _take(i64* arena, Py_ssize_t* at, Py_ssize_t words) noexcept nogil:
    """The next ``words`` of the arena."""
    cdef i64* out = arena + at[0]
    at[0] += words + 1
    return out


cdef inline void _local_codes(const i64* codes, Py_ssize_t m, i64* out) noexcept nogil:
    """``out[i]``: the position of the first row holding ``codes[i]``."""
    cdef Py_ssize_t i, j
    for i in range(m):
        out[i] = i
        for j in range(i):
            if codes[j] == codes[i]:
                out[i] = j
                break


cdef inline void _extend(Block* b, Py_ssize_t at, i64 v) noexcept nogil:
    """Take key ``v`` into the ordered statistics at ``at``: the smallest and largest
    present keys, their multiplicities, the next keys inward, the missing count."""
    if v == MISSING_KEY:
        b.nmiss[at] += 1
        return
    if v < b.lo[at]:
        b.lo2[at] = b.lo[at]
        b.lo[at] = v
        b.lo_n[at] = 1
    elif v == b.lo[at]:
        b.lo_n[at] += 1
    elif v < b.lo2[at]:
        b.lo2[at] = v
    if v > b.hi[at]:
        b.hi2[at] = b.hi[at]
        b.hi[at] = v
        b.hi_n[at] = 1
    elif v == b.hi[at]:
        b.hi_n[at] += 1
    elif v > b.hi2[at]:
        b.hi2[at] = v


cdef inline void _eccentricity(Block* b, const Config* cf) noexcept nogil:
    """``b.ecc``: how far each row lies from the block's middle, the squares over the
    ordered QIs of (span to the block's top - span to its bottom) / the block's span."""
    cdef Py_ssize_t q, i
    cdef i64 lo, hi, v
    cdef double whole, g
    for i in range(b.m):
        b.ecc[i] = 0.0
    for q in range(b.d):
        if cf.qi.kind[q] == KIND_NOMINAL:
            continue
        lo, hi = MISSING_KEY, INT_MIN
        for i in range(b.m):
            v = b.x[q * b.m + i]
            if v != MISSING_KEY:
                lo = v if v < lo else lo
                hi = v if v > hi else hi
        whole = _span(cf, q, 2, lo, hi, 0, 0) if lo <= hi else 0.0
        if whole <= 0.0:
            continue
        for i in range(b.m):
            v = b.x[q * b.m + i]
            if v != MISSING_KEY:
                g = (_span(cf, q, 2, v, hi, 0, 0) - _span(cf, q, 2, lo, v, 0, 0)) / whole
                b.ecc[i] += g * g


cdef inline void _new_class(Block* b, const Config* cf) noexcept nogil:
    """Open an empty class."""
    cdef Py_ssize_t c = b.ncl, q, j
    b.ncl += 1
    b.size[c] = 0
    for q in range(b.d):
        b.ndist[c * b.d + q] = 0
    for j in range(cf.nom):
        b.cnt[c * cf.nom + j] = 0


cdef inline double _total(const Block* b) noexcept nogil:
    cdef double total = 0.0
    cdef Py_ssize_t c
    for c in range(b.ncl):
        total += b.cost[c]
    return total
