"""The "dm" objective's choice of cut sizes, as the kernel makes it (``split.pyx``).

A cut packs classes close to k rows when its sides are multiples of k: cut
that way at every level, a region ends in classes of exactly k rows but one
per region, and discernibility approaches ``n * k``.
"""

from __future__ import annotations

__all__ = ["pack_cost", "packed_left", "packs_better"]


def pack_cost(x: int, k: int) -> int:
    """Discernibility of ``x >= k`` rows cut into as many classes of ``>= k`` rows as fit, evenly.

    Examples
    --------
    >>> pack_cost(20, 10), pack_cost(29, 10), pack_cost(30, 10)
    (200, 421, 300)
    """
    m = x // k
    q, r = divmod(x, m)
    return (m - r) * q * q + r * (q + 1) * (q + 1)


def packs_better(a: int, b: int | None, n: int, k: int) -> bool:
    """Whether a left side of ``a`` rows (of ``n``) packs classes better than one of ``b``.

    Lower best-case discernibility of the two sides first, then the more
    balanced cut, then the smaller left side; ``b`` None means no candidate yet.

    Examples
    --------
    >>> packs_better(20, 25, 45, 10), packs_better(25, 20, 45, 10)
    (True, False)
    """
    if b is None:
        return True
    ca, cb = pack_cost(a, k) + pack_cost(n - a, k), pack_cost(b, k) + pack_cost(n - b, k)
    if ca != cb:
        return ca < cb
    da, db = abs(2 * a - n), abs(2 * b - n)
    return da < db if da != db else a < b


def packed_left(n: int, k: int) -> int:
    """The multiple of ``k`` nearest ``n / 2`` (the lower on a tie), for ``n >= 2k``.

    Examples
    --------
    >>> packed_left(45, 10), packed_left(30162, 50)
    (20, 15100)
    """
    m = n // k
    a, b = k * (m // 2), k * ((m + 1) // 2)
    return b if 2 * b - n < n - 2 * a else a
