"""Range labels in numba: the distinct classes of a QI, then their labels in one buffer.

:func:`pack_triples` and :func:`group_packed` find the distinct
``(lo, hi, missing)`` triples of a QI's classes in sorted order around one
``np.sort`` of packed words. :func:`format_labels` writes their labels as
Arrow stores strings: one ``uint8`` buffer of UTF-8 bytes and int64 offsets
(label ``i`` is ``buf[off[i]:off[i + 1]]``), so 70,000 labels cost a few
milliseconds and no Python object each. The bytes are exactly what
:mod:`dmondrian.publish` documents:

* integers as ``str(int)``;
* floats as Python's ``repr`` (the shortest string that reads back to the
  same float). Values ``repr`` prints in fixed notation are formatted here
  (:func:`_put_float`); the rest (scientific notation, and the rare values
  whose shortest form this cannot prove) are left to ``repr`` by the caller;
* naive datetimes as ``numpy.datetime_as_string(unit="auto")``: the date, then
  only the time fields up to the last non-zero one (hours and minutes
  together, fractions in groups of three digits);
* anything else (ordinal names, tz-aware datetimes) as strings the caller
  makes once per distinct value, copied from a table.

Every function compiles once (one signature each, ``cache=True``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._kernel import MISSING_KEY, _decode_float_key

# How format_labels reads a bound.
FMT_INT = 0
FMT_FLOAT = 1
FMT_DATETIME = 2
FMT_TABLE = 3

# Key units per second of the datetime units numba formats.
DATETIME_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}

# 10**d as floats, exact up to d = 22 (5**22 < 2**53).
_POW10F = np.array([float(10 ** d) for d in range(23)])
_POW10I = np.array([10 ** d for d in range(19)], dtype=np.int64)
_POW10U = np.array([10 ** d for d in range(20)], dtype=np.uint64)
_TEN = np.uint64(10)
# Eras of 146,097 days (400 years) added so day counts of any datetime64[s]
# are non-negative; 719,468 days go from 0000-03-01 to 1970-01-01.
_SHIFT_ERAS = 2 ** 30
_EPOCH_SHIFT = 719_468 + 146_097 * _SHIFT_ERAS
(_U146097, _U146096, _U36524, _U1460, _U365, _U153, _U100, _U5, _U4, _U2) = (
    np.uint64(v) for v in (146097, 146096, 36524, 1460, 365, 153, 100, 5, 4, 2))
_ZERO = np.uint8(48)
# m, m +- 1 and m +- 2 must be exact floats: candidates stay under 2**53.
_FLOAT_LIMIT = float(2 ** 53 - 4)
# Below this many units a float's readers are at most one integer.
_ALONE = float(2 ** 52 - 2)
# Farther than c * _NEAR from c, no integer reads back (see _shortest_digits).
_NEAR = 2.0 ** -50
# Runs of equal lo prefix up to this long are ordered by insertion.
_INSERTION_RUN = 64
# Room for one bound: the longest are datetime64[s] counts near -2**63
# ("-292277022657-01-27T08:29:53", 27 bytes), int64 (20) and fixed-notation
# floats (at most 22).
_ENTRY_MAX = 48

_INT64_MIN = np.iinfo(np.int64).min
_NA = np.frombuffer(b"<NA>", dtype=np.uint8)
_OR_NA = np.frombuffer(b" or <NA>", dtype=np.uint8)


@njit(cache=True, inline="always")
def _put_digits(out, pos, value, width):
    """Write non-negative ``value`` in decimal, zero-padded to ``width`` digits."""
    # Unsigned arithmetic: numba's signed // and % carry Python's floor rules.
    u = np.uint64(value)
    n = 1
    while n < 20 and u >= _POW10U[n]:
        n += 1
    if n < width:
        n = width
    end = pos + n
    for i in range(end - 1, pos - 1, -1):
        q = u // _TEN
        out[i] = np.uint8(u - q * _TEN) + _ZERO
        u = q
    return end


@njit(cache=True, inline="always")
def _put_bytes(out, pos, text):
    for i in range(text.shape[0]):
        out[pos + i] = text[i]
    return pos + text.shape[0]


@njit(cache=True, inline="always")
def _put_int(out, pos, v):
    """``str(v)`` of an int64."""
    u = np.uint64(v)
    if v < 0:
        out[pos] = 45  # '-'
        pos += 1
        # The unsigned negation is exact for every int64, -2**63 included.
        u = np.uint64(0) - u
    return _put_digits(out, pos, u, 1)


@njit(cache=True)
def _reads_back(m, p, a):
    # m and p are exact floats, so m / p is the correctly rounded value of the
    # decimal m * 10**-d: exactly what parsing that decimal string gives.
    return m / p == a


@njit(cache=True)
def _shortest_digits(a):
    """``(m, d)``: the only shortest decimal ``m * 10**-d`` reading back to ``a``.

    ``d = -1`` when it is not proven here. For ``d = 0, 1, ...`` the
    decimals with ``d`` digits reading back to ``a`` are the integers of one
    interval ``R`` around ``c = a * 10**d``, of width at most
    ``ulp(a) * 10**d <= c * 2**-52``, and the computed ``c`` is within
    ``c * 2**-53`` of the exact one. So:

    * an integer farther than ``c * 2**-50`` from ``c`` is not in ``R``: the
      nearest one, ``m``, decides whether there is any (no division);
    * under 2**52 ``R`` is shorter than 1, so a reader is the only one;
    * above it, ``m`` and its neighbours are tested (the readers are
      consecutive integers, so a reader between two non-readers is alone);
      ties between two shortest strings are left to ``repr``.
    """
    for d in range(23):
        p = _POW10F[d]
        c = a * p
        if c >= _FLOAT_LIMIT:
            return 0.0, -1
        m = math.floor(c)
        if c - m > 0.5:
            m += 1.0
        if abs(c - m) > c * _NEAR:
            continue
        ok = _reads_back(m, p, a)
        if ok and c < _ALONE:
            return m, d
        below = _reads_back(m - 1.0, p, a)
        above = _reads_back(m + 1.0, p, a)
        if not (ok or below or above):
            continue
        if ok and not below and not above:
            return m, d
        if below and not ok and not _reads_back(m - 2.0, p, a):
            return m - 1.0, d
        if above and not ok and not _reads_back(m + 2.0, p, a):
            return m + 1.0, d
        return 0.0, -1
    return 0.0, -1


@njit(cache=True, inline="always")
def _put_float(out, pos, x):
    """``repr(x)`` when Python writes it in fixed notation (``1e-4 <= |x| < 1e16``)
    and :func:`_shortest_digits` proves its digits; else -1, for ``repr``."""
    a = abs(x)
    if a == 0.0:
        m, d = 0.0, 0
    elif a >= 1e-4 and a < 1e16:
        m, d = _shortest_digits(a)
        if d < 0:
            return -1
    else:
        return -1
    if math.copysign(1.0, x) < 0.0:  # -0.0 included
        out[pos] = 45
        pos += 1
    # Whole part, then at least one decimal ("1.0").
    digits = np.uint64(m)
    # (No division for whole numbers: a 64-bit division costs as much as
    # writing their digits.)
    whole = digits if d == 0 else (digits // _POW10U[d] if d < 20 else np.uint64(0))
    pos = _put_digits(out, pos, whole, 1)
    out[pos] = 46
    if d == 0:
        out[pos + 1] = 48
        return pos + 2
    return _put_digits(out, pos + 1, digits - whole * _POW10U[min(d, 19)], d)


@njit(cache=True)
def _put_two(out, pos, sep, v):
    """``sep`` then ``v`` (0-99) in two digits."""
    u = np.uint64(v)
    q = u // _TEN
    out[pos] = sep
    out[pos + 1] = np.uint8(q) + _ZERO
    out[pos + 2] = np.uint8(u - q * _TEN) + _ZERO
    return pos + 3


@njit(cache=True)
def _split_datetime(v, per_sec):
    """``(days, seconds of the day, nanoseconds)`` of a datetime64 count.

    One branch per unit so every division is by a constant.
    """
    if per_sec == 1_000_000_000:
        days = v // 86_400_000_000_000
        rem = v - days * 86_400_000_000_000
        secs = rem // 1_000_000_000
        return days, secs, rem - secs * 1_000_000_000
    if per_sec == 1_000_000:
        days = v // 86_400_000_000
        rem = v - days * 86_400_000_000
        secs = rem // 1_000_000
        return days, secs, (rem - secs * 1_000_000) * 1000
    if per_sec == 1000:
        days = v // 86_400_000
        rem = v - days * 86_400_000
        secs = rem // 1000
        return days, secs, (rem - secs * 1000) * 1_000_000
    days = v // 86400
    return days, v - days * 86400, 0


@njit(cache=True, inline="always")
def _put_datetime(out, pos, v, per_sec):
    """``numpy.datetime_as_string(v, unit="auto")`` of a datetime64 count."""
    days, secs, ns = _split_datetime(v, per_sec)
    # Civil date of a day count (proleptic Gregorian, 400-year eras),
    # shifted by whole eras so every division is unsigned.
    z = np.uint64(days + _EPOCH_SHIFT)
    era = z // _U146097
    doe = z - era * _U146097
    yoe = (doe - doe // _U1460 + doe // _U36524 - doe // _U146096) // _U365
    doy = doe - (_U365 * yoe + yoe // _U4 - yoe // _U100)
    mp = (_U5 * doy + _U2) // _U153
    day = np.int64(doy - (_U153 * mp + _U2) // _U5) + 1
    month = np.int64(mp) + 3 if mp < 10 else np.int64(mp) - 9
    year = np.int64(yoe) + (np.int64(era) - _SHIFT_ERAS) * 400 + (1 if month <= 2 else 0)
    # numpy writes the year with "%04lld": the sign counts in the width.
    if year < 0:
        out[pos] = 45
        pos += 1
    pos = _put_digits(out, pos, abs(year), 3 if year < 0 else 4)
    # Then the fields up to the last non-zero one: hours come with minutes.
    pos = _put_two(out, pos, 45, month)  # '-'
    pos = _put_two(out, pos, 45, day)
    if secs == 0 and ns == 0:
        return pos
    pos = _put_two(out, pos, 84, secs // 3600)  # 'T'
    pos = _put_two(out, pos, 58, (secs // 60) % 60)  # ':'
    if secs % 60 == 0 and ns == 0:
        return pos
    pos = _put_two(out, pos, 58, secs % 60)
    if not ns:
        return pos
    out[pos] = 46  # '.'
    width = 9 if ns % 1000 else (6 if ns % 1_000_000 else 3)
    return _put_digits(out, pos + 1, ns // _POW10I[9 - width], width)


@njit(cache=True, inline="always")
def _copy(out, pos, src, s, e):
    # A byte loop: a slice assignment per string costs more than its few bytes.
    for i in range(s, e):
        out[pos + i - s] = src[i]
    return pos + e - s


@njit(cache=True, nogil=True)
def format_labels(lo, hi, missing, fmt, per_sec, t_buf, t_off):
    """Range labels, one per ``(lo, hi, missing)``.

    Parameters
    ----------
    lo, hi : int64 arrays
        Bounds: integers (``FMT_INT``), order-preserving float keys
        (``FMT_FLOAT``, see :func:`dmondrian.qi.float_keys`), datetime64
        counts of ``per_sec`` units a second (``FMT_DATETIME``) or indices of
        strings of ``(t_buf, t_off)`` (``FMT_TABLE``). ``lo = MISSING_KEY``
        marks a class whose values are all missing.
    missing : bool array
        Whether the class also holds a missing value.
    fmt, per_sec : int
        How to write a bound (``per_sec`` only for datetimes).
    t_buf, t_off : uint8 array, int64 array
        The strings ``FMT_TABLE`` bounds index (string ``i`` is
        ``t_buf[t_off[i]:t_off[i + 1]]``); ignored otherwise.

    Returns
    -------
    buf, off : uint8 array, int64 array
        Label ``i`` is ``buf[off[i]:off[i + 1]]``: ``<NA>``, ``v`` or
        ``[lo, hi]``, then `` or <NA>`` when ``missing``.
    failed : int64 array
        Labels left empty because a float bound is left to ``repr``
        (scientific notation, or a shortest form not proven here).
    """
    n = lo.shape[0]
    size = n * (2 * _ENTRY_MAX + 4 + _OR_NA.shape[0])
    if fmt == FMT_TABLE:
        # Table strings have any length: the exact size.
        size = 0
        for i in range(n):
            a, b = lo[i], hi[i]
            if a == MISSING_KEY:
                size += _NA.shape[0]
                continue
            size += t_off[a + 1] - t_off[a] + _OR_NA.shape[0] * missing[i]
            if a != b:
                size += t_off[b + 1] - t_off[b] + 4
    out = np.empty(size, dtype=np.uint8)
    off = np.empty(n + 1, dtype=np.int64)
    failed = np.empty(n, dtype=np.int64)
    n_failed = 0
    pos = 0
    off[0] = 0
    for i in range(n):
        a, b = lo[i], hi[i]
        start = pos
        if a == MISSING_KEY:
            pos = _put_bytes(out, pos, _NA)
            off[i + 1] = pos
            continue
        pair = a != b
        if pair:
            out[pos] = 91  # '['
            pos += 1
        # One call site per writer: each is inlined once (compile time grows
        # with every inlined copy).
        for side in range(2 if pair else 1):
            if side:
                out[pos] = 44  # ','
                out[pos + 1] = 32
                pos += 2
            k = b if side else a
            if fmt == FMT_INT:
                pos = _put_int(out, pos, k)
            elif fmt == FMT_FLOAT:
                pos = _put_float(out, pos, _decode_float_key(k))
                if pos < 0:
                    break
            elif fmt == FMT_DATETIME:
                pos = _put_datetime(out, pos, k, per_sec)
            else:
                pos = _copy(out, pos, t_buf, t_off[k], t_off[k + 1])
        if pos < 0:
            failed[n_failed] = i
            n_failed += 1
            pos = start
        else:
            if pair:
                out[pos] = 93  # ']'
                pos += 1
            if missing[i]:
                pos = _put_bytes(out, pos, _OR_NA)
        off[i + 1] = pos
    return out[:pos], off, failed[:n_failed]


@njit(cache=True, inline="always")
def _bit_length(u):
    bits = 0
    while bits < 64 and (u >> np.uint64(bits)) != 0:
        bits += 1
    return bits


@njit(cache=True, nogil=True)
def pack_triples(lo, hi, missing, j):
    """Sort words for the ``(lo, hi, missing)`` triples of column ``j``.

    Parameters
    ----------
    lo, hi, missing : 2-D arrays
        Per-class bounds of every QI (:func:`dmondrian._kernel.class_statistics`).
    j : int
        The QI's column.

    Returns
    -------
    triples : int64 array (m, 4)
        ``lo, hi, missing, class`` of the ``m`` classes whose lo is not
        ``MISSING_KEY`` (a row of 32 bytes: one cache line a random read).
    packed : uint64 array (m,)
        For position ``p``: a sort key shifted above ``p``, so sorting the
        words sorts the positions. The key is the whole triple (offsets from
        the minima) when it fits in the word with ``p``, else the top bits of
        lo's offset (``exact`` False).
    idx_bits : int
        Bits under the key.
    exact : bool
        Whether the key is the whole triple.
    """
    n = lo.shape[0]
    triples = np.empty((n, 4), dtype=np.int64)
    m = 0
    lo_min = hi_min = MISSING_KEY
    lo_max = hi_max = _INT64_MIN
    for r in range(n):
        a = lo[r, j]
        if a != MISSING_KEY:
            b = hi[r, j]
            triples[m, 0], triples[m, 1], triples[m, 2], triples[m, 3] = a, b, missing[r, j], r
            m += 1
            lo_min, lo_max = min(lo_min, a), max(lo_max, a)
            hi_min, hi_max = min(hi_min, b), max(hi_max, b)
    idx_bits = _bit_length(np.uint64(max(m - 1, 1)))
    lo_bits = _bit_length(np.uint64(lo_max) - np.uint64(lo_min))
    hi_bits = _bit_length(np.uint64(hi_max) - np.uint64(hi_min))
    exact = lo_bits + hi_bits + 1 + idx_bits <= 64
    shift = np.uint64(0 if exact else max(0, lo_bits + idx_bits - 64))
    packed = np.empty(m, dtype=np.uint64)
    u_idx, u_hi1, one = np.uint64(idx_bits), np.uint64(hi_bits + 1), np.uint64(1)
    for p in range(m):
        key = (np.uint64(triples[p, 0]) - np.uint64(lo_min)) >> shift
        if exact:
            key = (key << u_hi1) | ((np.uint64(triples[p, 1]) - np.uint64(hi_min)) << one)
            key |= np.uint64(triples[p, 2])
        packed[p] = (key << u_idx) | np.uint64(p)
    return triples[:m], packed, idx_bits, exact


@njit(cache=True, nogil=True)
def group_packed(n, triples, packed, idx_bits, exact):
    """Distinct triples from :func:`pack_triples`' output, its words sorted.

    Equal words of an ``exact`` key are one triple; otherwise runs of equal
    key (a prefix of lo) are ordered and split by the whole triple, by
    insertion. The ``n - len(triples)`` classes with every value missing
    share one last triple.

    Returns
    -------
    inverse : int64 array
        Every class's triple.
    u_lo, u_hi, u_missing : arrays
        The distinct triples, in sorted order.
    ok : bool
        False (nothing else meaningful) when a run of equal key is longer
        than ``_INSERTION_RUN``: the caller sorts another way.
    """
    m = triples.shape[0]
    mask = np.uint64((1 << idx_bits) - 1)
    u_idx = np.uint64(idx_bits)
    inverse = np.full(n, -1, dtype=np.int64)
    u_lo = np.empty(m + 1, dtype=np.int64)
    u_hi = np.empty(m + 1, dtype=np.int64)
    u_missing = np.empty(m + 1, dtype=np.bool_)
    run = np.empty(_INSERTION_RUN, dtype=np.int64)
    g = -1
    s = 0
    while s < m:
        key = packed[s] >> u_idx
        e = s + 1
        while e < m and packed[e] >> u_idx == key:
            e += 1
        if exact or e - s == 1:
            # One triple (an exact key, or a lone prefix).
            g += 1
            p = np.int64(packed[s] & mask)
            u_lo[g], u_hi[g], u_missing[g] = triples[p, 0], triples[p, 1], triples[p, 2]
            for t in range(s, e):
                inverse[triples[np.int64(packed[t] & mask), 3]] = g
        else:
            if e - s > _INSERTION_RUN:
                return inverse, u_lo[:0], u_hi[:0], u_missing[:0], False
            # Positions of the run in triple order, then split where it changes.
            for t in range(s, e):
                p = np.int64(packed[t] & mask)
                q = t - s
                while q > 0 and _triple_less(triples, p, run[q - 1]):
                    run[q] = run[q - 1]
                    q -= 1
                run[q] = p
            for q in range(e - s):
                p = run[q]
                if q == 0 or _triple_less(triples, run[q - 1], p):
                    g += 1
                    u_lo[g], u_hi[g], u_missing[g] = triples[p, 0], triples[p, 1], triples[p, 2]
                inverse[triples[p, 3]] = g
        s = e
    if m < n:
        g += 1
        u_lo[g], u_hi[g], u_missing[g] = MISSING_KEY, _INT64_MIN, True
        for r in range(n):
            if inverse[r] < 0:
                inverse[r] = g
    return inverse, u_lo[:g + 1], u_hi[:g + 1], u_missing[:g + 1], True


@njit(cache=True, inline="always")
def _triple_less(triples, a, b):
    """Whether the triple at position ``a`` sorts before the one at ``b``."""
    for c in range(3):
        if triples[a, c] != triples[b, c]:
            return triples[a, c] < triples[b, c]
    return False
