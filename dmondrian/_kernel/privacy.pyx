"""The entity and sensitive-attribute halves of "may this cut happen".

A cut is checked on both children's distinct entities (people, when a
person key is given) and histograms of sensitive codes, counted with the
very rule the split uses to move rows (``goes_left``), so what is checked is
what is made. Nothing here allocates: the histograms and the entity marks
live in the caller's work space.

Entities are counted exactly: one mark word per entity code (bit 1: seen on
the left, bit 2: on the right), set on a pass over the node's rows and
cleared on a second pass over the same rows, so a check costs the rows it
reads, never the number of entities. The pass stops once both sides hold k
entities, which on the large nodes near the root is after a small prefix.

With an entity, the sensitive histograms count (entity, value) pairs: a
person holding a value on many rows of a child counts once for it (the
pair codes ride along like the entity codes and are marked the same way).
"""

from libc.math cimport log, fabs

from ._common cimport i64, INT_MIN
from ._rules cimport (Cut, Privacy, WorkRows, ws_row, goes_left, cut_rank, WS_COUNTS,
                      WS_ORDER, P_K, P_L_DISTINCT, P_RC_L, P_T_ORDERED, P_N_SENS, P_LOG_L,
                      P_RC_C, P_T)

cdef extern from *:
    """
    #define DM_INT_MAX INT64_MAX
    """
    const i64 INT_MAX "DM_INT_MAX"


cdef i64 _largest_sum(const i64* h, Py_ssize_t n_codes, i64 count) noexcept nogil:
    """Sum of the ``count`` largest entries of ``h``, without reordering it."""
    cdef i64 total = 0, taken = 0, bound = INT_MAX, v, mult, x, use
    cdef Py_ssize_t c
    while taken < count:
        v = -1
        mult = 0
        for c in range(n_codes):
            x = h[c]
            if x < bound:
                if x > v:
                    v = x
                    mult = 1
                elif x == v:
                    mult += 1
        if v < 0:
            break
        use = mult if mult < count - taken else count - taken
        total += use * v
        taken += use
        bound = v
    return total


cdef bint hist_ok(const i64* h, Py_ssize_t n_codes, i64 m, const Privacy* priv) noexcept nogil:
    """Whether a class of ``m`` rows with sensitive histogram ``h`` passes."""
    cdef const i64* ip = priv.ip
    cdef const double* fp = priv.fp
    cdef Py_ssize_t c
    cdef i64 distinct, ell, nonzero, total, tail
    cdef double entropy, p, emd, acc
    if ip[P_L_DISTINCT] > 0:
        distinct = 0
        for c in range(n_codes):
            distinct += h[c] > 0
        if distinct < ip[P_L_DISTINCT]:
            return False
    if fp[P_LOG_L] >= 0.0:
        entropy = 0.0
        for c in range(n_codes):
            if h[c] > 0:
                p = <double>h[c] / <double>m
                entropy -= p * log(p)
        if entropy < fp[P_LOG_L] - 1e-12:
            return False
    if ip[P_RC_L] > 0:
        # r1 < c * (r_l + ... + r_m) over the counts sorted descending; the
        # tail is the total minus the l-1 largest, so nothing is sorted.
        ell = ip[P_RC_L]
        nonzero = 0
        total = 0
        for c in range(n_codes):
            nonzero += h[c] > 0
            total += h[c]
        if nonzero < ell:
            return False
        tail = total - _largest_sum(h, n_codes, ell - 1)
        if not <double>_largest_sum(h, n_codes, 1) < fp[P_RC_C] * <double>tail:
            return False
    if fp[P_T] >= 0.0:
        # Earth Mover's Distance to the whole table (Li, Li & Venkatasubramanian
        # 2007): ordered distance for ordered values, equal distance otherwise.
        emd = 0.0
        if ip[P_T_ORDERED] == 1:
            acc = 0.0
            for c in range(n_codes):
                acc += <double>h[c] / <double>m - priv.q[c]
                emd += fabs(acc)
            emd = emd / <double>(n_codes - 1) if n_codes > 1 else 0.0
        else:
            for c in range(n_codes):
                emd += fabs(<double>h[c] / <double>m - priv.q[c])
            emd *= 0.5
        if emd > fp[P_T] + 1e-12:
            return False
    return True


cdef bint sensitive_cut_ok(const i64* row, const i64* sens, Py_ssize_t s, Py_ssize_t e,
                           const Cut* cut, const Privacy* priv, const WorkRows* ws) noexcept nogil:
    """Whether both children of a cut of ``row[s:e]`` satisfy the sensitive constraint."""
    cdef Py_ssize_t n_codes = priv.ip[P_N_SENS], c, i
    cdef i64 n = e - s, taken = 0, n_left = cut.n_left
    # Locals: the loops' histogram writes could otherwise alias the cut's fields.
    cdef i64 t = cut.t, eq_value = cut.eq_value, need_eq = cut.need_eq
    cdef const i64* rank = cut_rank(cut, ws)
    # Rows the cut search no longer needs once it asks (rank and cum stay).
    cdef i64* left = ws_row(ws, WS_COUNTS)
    cdef i64* right = ws_row(ws, WS_ORDER)
    cdef i64* seen = ws.seen
    cdef const i64* pair = ws.pair
    cdef i64 bit, m_left = n_left, m_right = n - n_left
    for c in range(n_codes):
        left[c] = 0
        right[c] = 0
    if pair == NULL:
        for i in range(s, e):
            if goes_left(row[i], rank, t, eq_value, need_eq, &taken):
                left[sens[i]] += 1
            else:
                right[sens[i]] += 1
    else:
        m_left = 0
        m_right = 0
        for i in range(s, e):
            bit = 1 if goes_left(row[i], rank, t, eq_value, need_eq, &taken) else 2
            if seen[pair[i]] & bit == 0:
                seen[pair[i]] |= bit
                if bit == 1:
                    left[sens[i]] += 1
                    m_left += 1
                else:
                    right[sens[i]] += 1
                    m_right += 1
        for i in range(s, e):
            seen[pair[i]] = 0
    return hist_ok(left, n_codes, m_left, priv) and hist_ok(right, n_codes, m_right, priv)


cdef bint entity_cut_ok(const i64* row, Py_ssize_t s, Py_ssize_t e, const Cut* cut,
                        const Privacy* priv, const WorkRows* ws) noexcept nogil:
    """Whether both children of a cut of ``row[s:e]`` hold at least k distinct entities."""
    cdef i64 t = cut.t, eq_value = cut.eq_value, need_eq = cut.need_eq
    cdef const i64* rank = cut_rank(cut, ws)
    cdef i64* seen = ws.seen
    cdef const i64* ent = ws.ent
    cdef i64 k = priv.ip[P_K], n_left = 0, n_right = 0, taken = 0, bit
    cdef Py_ssize_t i, stop = e
    for i in range(s, e):
        bit = 1 if goes_left(row[i], rank, t, eq_value, need_eq, &taken) else 2
        if seen[ent[i]] & bit == 0:
            seen[ent[i]] |= bit
            if bit == 1:
                n_left += 1
            else:
                n_right += 1
            if n_left >= k and n_right >= k:
                stop = i + 1
                break
    for i in range(s, stop):
        seen[ent[i]] = 0
    return n_left >= k and n_right >= k


def hist_ok_py(const i64[::1] h, i64 m, const i64[::1] ip, const double[::1] fp,
               const double[::1] q):
    """Whether a class of ``m`` rows with sensitive histogram ``h`` passes ``(ip, fp, q)``.

    Parameters
    ----------
    h : int64 array
        Rows of the class per sensitive code.
    m : int
        Rows of the class.
    ip, fp, q : arrays
        The constraint in kernel form (see :mod:`dmondrian._kernel.constants`).

    Returns
    -------
    bool
    """
    cdef Privacy priv
    priv.ip = &ip[0]
    priv.fp = &fp[0]
    priv.q = &q[0] if q.shape[0] else NULL
    priv.n_q = q.shape[0]
    return bool(hist_ok(&h[0] if h.shape[0] else NULL, h.shape[0], m, &priv))
