"""Published range labels, formatted in numba into one byte buffer.

A QI's labels are built as Arrow does strings: one ``uint8`` buffer of UTF-8
bytes and int64 offsets (string ``i`` is ``buf[off[i]:off[i + 1]]``), so
70,000 labels cost a few milliseconds and no Python object each. The bytes
are exactly what :mod:`dmondrian.publish` documents:

* integers as ``str(int)``;
* floats as Python's ``repr`` (the shortest string that reads back to the
  same float). Values ``repr`` prints in fixed notation are formatted here
  (:func:`_put_float`); the rest (scientific notation, and the rare values
  whose shortest form this cannot prove) are left to ``repr`` by the caller;
* naive datetimes as ``numpy.datetime_as_string(unit="auto")``: the date, then
  only the time fields up to the last non-zero one (hours and minutes
  together, fractions in groups of three digits).

Every function compiles once (one signature each, ``cache=True``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._kernel import MISSING_KEY, _decode_float_key

# How format_keys reads a key.
FMT_INT = 0
FMT_FLOAT = 1
FMT_DATETIME = 2

# Shapes of a label (form & 3), plus OR_MISSING when the class also holds a
# missing value.
FORM_MISSING = 0  # "<NA>"
FORM_SINGLE = 1  # "v"
FORM_PAIR = 2  # "[lo, hi]"
OR_MISSING = 4  # + " or <NA>"

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
# Longest entry format_keys writes: "-2147483648-12-31T23:59:59.999999999"
# for seconds keys is 36 bytes; floats at most 1 + 16 + 1 + 22.
_ENTRY_MAX = 48

_INT64_MIN = np.iinfo(np.int64).min
_INT64_MIN_TEXT = np.frombuffer(b"-9223372036854775808", dtype=np.uint8)
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
    if v < 0:
        if v == _INT64_MIN:
            return _put_bytes(out, pos, _INT64_MIN_TEXT)
        out[pos] = 45  # '-'
        return _put_digits(out, pos + 1, -v, 1)
    return _put_digits(out, pos, v, 1)


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
    if x == 0.0:
        if math.copysign(1.0, x) < 0.0:
            out[pos] = 45
            pos += 1
        out[pos] = 48
        out[pos + 1] = 46
        out[pos + 2] = 48
        return pos + 3
    a = abs(x)
    if not (a >= 1e-4 and a < 1e16):
        return -1
    m, d = _shortest_digits(a)
    if d < 0:
        return -1
    if x < 0.0:
        out[pos] = 45
        pos += 1
    digits = np.int64(m)
    if d == 0:
        pos = _put_digits(out, pos, digits, 1)
        out[pos] = 46
        out[pos + 1] = 48
        return pos + 2
    if d <= 18:
        whole = digits // _POW10I[d]
        frac = digits - whole * _POW10I[d]
    else:
        whole = np.int64(0)
        frac = digits
    pos = _put_digits(out, pos, whole, 1)
    out[pos] = 46
    return _put_digits(out, pos + 1, frac, d)


@njit(cache=True, inline="always")
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
        pos = _put_digits(out, pos + 1, -year, 3)
    else:
        pos = _put_digits(out, pos, year, 4)
    pos = _put_two(out, pos, 45, month)
    pos = _put_two(out, pos, 45, day)
    if secs == 0 and ns == 0:
        return pos
    pos = _put_two(out, pos, 84, secs // 3600)  # 'T'
    pos = _put_two(out, pos, 58, (secs // 60) % 60)  # ':'
    if secs % 60 == 0 and ns == 0:
        return pos
    pos = _put_two(out, pos, 58, secs % 60)
    if ns == 0:
        return pos
    out[pos] = 46  # '.'
    if ns % 1000 != 0:
        return _put_digits(out, pos + 1, ns, 9)
    if ns % 1_000_000 != 0:
        return _put_digits(out, pos + 1, ns // 1000, 6)
    return _put_digits(out, pos + 1, ns // 1_000_000, 3)


@njit(cache=True)
def format_keys(keys, fmt, per_sec):
    """Format int64 keys as value strings.

    Parameters
    ----------
    keys : int64 array
        Integers (``FMT_INT``), order-preserving float keys (``FMT_FLOAT``,
        see :func:`dmondrian.qi.float_keys`) or datetime64 counts of
        ``per_sec`` units a second (``FMT_DATETIME``). ``MISSING_KEY`` gives
        an empty string.
    fmt : int
        One of ``FMT_INT``, ``FMT_FLOAT``, ``FMT_DATETIME``.
    per_sec : int
        Datetime units per second (ignored otherwise).

    Returns
    -------
    buf, off : uint8 array, int64 array
        String ``i`` is ``buf[off[i]:off[i + 1]]``.
    failed : int64 array
        Indices of floats left empty for ``repr`` (scientific notation, or a
        shortest form not proven here).
    """
    n = keys.shape[0]
    buf = np.empty(n * _ENTRY_MAX, dtype=np.uint8)
    off = np.empty(n + 1, dtype=np.int64)
    failed = np.empty(n, dtype=np.int64)
    n_failed = 0
    pos = 0
    off[0] = 0
    for i in range(n):
        k = keys[i]
        if k != MISSING_KEY:
            if fmt == FMT_INT:
                pos = _put_int(buf, pos, k)
            elif fmt == FMT_FLOAT:
                end = _put_float(buf, pos, _decode_float_key(k))
                if end < 0:
                    failed[n_failed] = i
                    n_failed += 1
                else:
                    pos = end
            else:
                pos = _put_datetime(buf, pos, k, per_sec)
        off[i + 1] = pos
    return buf[:pos], off, failed[:n_failed]


@njit(cache=True, inline="always")
def _copy(out, pos, src, s, e):
    # A byte loop: a slice assignment per string costs more than these few bytes.
    for i in range(s, e):
        out[pos + i - s] = src[i]
    return pos + e - s


@njit(cache=True)
def take_strings(buf, off, idx):
    """Strings ``idx[i]`` of ``(buf, off)`` as a new ``(buf, off)``; -1 gives ''."""
    n = idx.shape[0]
    new_off = np.empty(n + 1, dtype=np.int64)
    new_off[0] = 0
    total = 0
    for i in range(n):
        j = idx[i]
        if j >= 0:
            total += off[j + 1] - off[j]
        new_off[i + 1] = total
    new_buf = np.empty(total, dtype=np.uint8)
    for i in range(n):
        j = idx[i]
        if j >= 0:
            _copy(new_buf, new_off[i], buf, off[j], off[j + 1])
    return new_buf, new_off


@njit(cache=True)
def assemble(buf, off, form):
    """Labels from value strings: label ``i`` uses strings ``2i`` (lo) and ``2i + 1`` (hi).

    ``form[i]`` is ``FORM_MISSING``, ``FORM_SINGLE`` or ``FORM_PAIR``, plus
    ``OR_MISSING`` to append `` or <NA>``.
    """
    n = form.shape[0]
    size = off[2 * n] - off[0] + n * (4 + _OR_NA.shape[0])
    out = np.empty(size, dtype=np.uint8)
    out_off = np.empty(n + 1, dtype=np.int64)
    out_off[0] = 0
    pos = 0
    for i in range(n):
        shape = form[i] & 3
        if shape == FORM_MISSING:
            pos = _put_bytes(out, pos, _NA)
        else:
            if shape == FORM_PAIR:
                out[pos] = 91  # '['
                pos += 1
            pos = _copy(out, pos, buf, off[2 * i], off[2 * i + 1])
            if shape == FORM_PAIR:
                out[pos] = 44  # ','
                out[pos + 1] = 32
                pos = _copy(out, pos + 2, buf, off[2 * i + 1], off[2 * i + 2])
                out[pos] = 93  # ']'
                pos += 1
            if form[i] & OR_MISSING:
                pos = _put_bytes(out, pos, _OR_NA)
        out_off[i + 1] = pos
    return out[:pos], out_off


@njit(cache=True)
def group_rows(order, prefix, fix, lo, hi, missing):
    """Distinct ``(lo, hi, missing)`` triples of rows, numbered in sorted order.

    Parameters
    ----------
    order : int64 array
        The rows whose lo is not ``MISSING_KEY``, sorted by ``prefix``.
    prefix : uint64 array
        A sort key of each position of ``order``: when ``fix``, an
        order-preserving prefix of lo whose runs of equal values still need
        ordering by the whole triple; otherwise ``order`` is final.
    fix : bool
        Whether runs of equal prefix are to be ordered (by insertion).
    lo, hi, missing : arrays
        Every class's triple.

    Returns
    -------
    first : int64 array
        One row of each triple, in triple order; the rows whose lo is
        ``MISSING_KEY`` (all values missing) share the last triple.
    inverse : int64 array
        Every row's triple.
    ok : bool
        False (and nothing else meaningful) when a run of equal prefix is
        longer than ``_INSERTION_RUN``: the caller sorts another way.
    """
    n = lo.shape[0]
    m = order.shape[0]
    first = np.empty(n, dtype=np.int64)
    inverse = np.empty(n, dtype=np.int64)
    # The triples in order, side by side: the insertion and the scan below
    # then read memory in sequence rather than at random rows.
    s_lo = np.empty(m, dtype=np.int64)
    s_hi = np.empty(m, dtype=np.int64)
    s_miss = np.empty(m, dtype=np.bool_)
    for p in range(m):
        r = order[p]
        s_lo[p] = lo[r]
        s_hi[p] = hi[r]
        s_miss[p] = missing[r]
    if fix:
        s = 0
        while s < m:
            e = s + 1
            while e < m and prefix[e] == prefix[s]:
                e += 1
            if e - s > _INSERTION_RUN:
                return first[:0], inverse, False
            for p in range(s + 1, e):
                r, a, b, c = order[p], s_lo[p], s_hi[p], s_miss[p]
                q = p
                while q > s and (a < s_lo[q - 1] or (a == s_lo[q - 1] and (
                        b < s_hi[q - 1] or (b == s_hi[q - 1] and s_miss[q - 1] and not c)))):
                    order[q], s_lo[q], s_hi[q], s_miss[q] = (order[q - 1], s_lo[q - 1],
                                                             s_hi[q - 1], s_miss[q - 1])
                    q -= 1
                order[q], s_lo[q], s_hi[q], s_miss[q] = r, a, b, c
            s = e
    g = -1
    for p in range(m):
        if p == 0 or s_lo[p] != s_lo[p - 1] or s_hi[p] != s_hi[p - 1] \
                or s_miss[p] != s_miss[p - 1]:
            g += 1
            first[g] = order[p]
        inverse[order[p]] = g
    if m < n:
        g += 1
        first[g] = -1
        for r in range(n):
            if lo[r] == MISSING_KEY:
                if first[g] < 0:
                    first[g] = r
                inverse[r] = g
    return first[:g + 1], inverse, True
