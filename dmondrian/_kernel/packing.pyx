"""The "dm" objective's cut sizes: sides that pack classes close to k rows.

A cut whose left side is a multiple of k, made at every level, leaves a
node's remainder ``n mod k`` to one class: in the limit every class has
exactly k rows but one, and discernibility approaches ``n * k``. Strict cuts
can only fall between distinct keys, so they score the boundaries they may
use by the best discernibility their two sides could still reach.
:func:`packed_left` and :func:`packs_better` are also Python functions: the
Dask engine's planner makes the same choices with them on a region's counts.
"""

from ._common cimport i64
from .select cimport heapsort


cdef inline i64 _pack_cost(i64 x, i64 k) noexcept nogil:
    """Discernibility of ``x >= k`` rows cut into as many classes of ``>= k`` rows as fit, evenly."""
    cdef i64 m = x // k, q, r
    q = x // m
    r = x % m
    return (m - r) * q * q + r * (q + 1) * (q + 1)


cpdef bint packs_better(i64 a, i64 b, i64 n, i64 k) noexcept nogil:
    """Whether a left side of ``a`` rows (of ``n``) packs classes better than one of ``b``.

    Lower best-case discernibility of the two sides first (what a side holds
    beyond a multiple of k ends up enlarging its classes), then the more
    balanced cut, then the smaller left side, so the choice is
    deterministic. ``b`` 0 means no candidate yet; both sides of ``a`` must
    hold at least k rows.

    Examples
    --------
    >>> packs_better(20, 25, 45, 10), packs_better(25, 20, 45, 10)
    (True, False)
    """
    cdef i64 ca, cb, da, db
    if b == 0:
        return True
    ca = _pack_cost(a, k) + _pack_cost(n - a, k)
    cb = _pack_cost(b, k) + _pack_cost(n - b, k)
    if ca != cb:
        return ca < cb
    da = 2 * a - n if 2 * a >= n else n - 2 * a
    db = 2 * b - n if 2 * b >= n else n - 2 * b
    if da != db:
        return da < db
    return a < b


cpdef i64 packed_left(i64 n, i64 k) noexcept nogil:
    """The multiple of ``k`` nearest ``n / 2`` (the lower on a tie), for ``n >= 2k``.

    Examples
    --------
    >>> packed_left(45, 10), packed_left(30162, 50)
    (20, 15100)
    """
    cdef i64 m = n // k, a = k * (m // 2), b = k * ((m + 1) // 2)
    return b if 2 * b - n < n - 2 * a else a


cdef i64 best_sorted_boundary(i64* a, i64 n, i64 k, i64* t) noexcept nogil:
    """Sort the keys ``a[:n]`` and return the left size of the best boundary (0: none).

    A boundary falls between two distinct keys and leaves k rows or more on
    each side; ``t`` gets the last key on its left.
    """
    cdef i64 best = 0, i
    heapsort(a, 0, n, NULL, False)
    for i in range(k, n - k + 1):
        if a[i - 1] != a[i] and packs_better(i, best, n, k):
            best = i
            t[0] = a[i - 1]
    return best


cdef i64 best_ranked_boundary(const i64* cum, i64 card, i64 n, i64 k, i64* r) noexcept nogil:
    """Left size of the best boundary between frequency ranks (0: none); ``r`` its last rank.

    ``cum`` is the cumulative row count by rank (see split._nominal_ranks).
    """
    cdef i64 best = 0, q
    for q in range(card):
        if cum[q] > n - k:
            break
        if cum[q] >= k and (q == 0 or cum[q] != cum[q - 1]) and packs_better(cum[q], best, n, k):
            best = cum[q]
            r[0] = q
    return best
