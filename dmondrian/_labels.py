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
# m, m +- 1 and m +- 2 must be exact floats: candidates stay under 2**53.
_FLOAT_LIMIT = float(2 ** 53 - 4)
# Longest entry format_keys writes: "-2147483648-12-31T23:59:59.999999999"
# for seconds keys is 36 bytes; floats at most 1 + 16 + 1 + 22.
_ENTRY_MAX = 48

_INT64_MIN = np.iinfo(np.int64).min
_INT64_MIN_TEXT = np.frombuffer(b"-9223372036854775808", dtype=np.uint8)
_NA = np.frombuffer(b"<NA>", dtype=np.uint8)
_OR_NA = np.frombuffer(b" or <NA>", dtype=np.uint8)


@njit(cache=True)
def _put_digits(out, pos, u, width):
    """Write non-negative ``u`` in decimal, zero-padded to ``width`` digits."""
    n = 1
    t = u
    while t >= 10:
        t //= 10
        n += 1
    if n < width:
        n = width
    end = pos + n
    for i in range(end - 1, pos - 1, -1):
        out[i] = 48 + u % 10
        u //= 10
    return end


@njit(cache=True)
def _put_bytes(out, pos, text):
    for i in range(text.shape[0]):
        out[pos + i] = text[i]
    return pos + text.shape[0]


@njit(cache=True)
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
def _put_float(out, pos, x):
    """``repr(x)`` when Python writes it in fixed notation, else -1.

    ``repr`` prints the shortest digit string that reads back to ``x``
    (ties: the closest), in fixed notation when ``1e-4 <= |x| < 1e16``. For
    ``d = 0, 1, ...`` decimals the strings that read back to ``x`` are the
    integers ``m`` of one interval around ``x * 10**d`` (the reals rounding
    to ``x``, scaled). The computed ``x * 10**d`` is within 1 of the exact one
    while it stays under 2**53, so if none of its rounding and that
    rounding's two neighbours reads back, no integer does; the first ``d``
    with a reader is the shortest form, and when it is the only one (its
    neighbours do not read back) it is ``repr``'s digits. Anything else
    (ties between two shortest strings, values needing more than 2**53
    units) returns -1 for ``repr`` to handle.
    """
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
    for d in range(23):
        p = _POW10F[d]
        c = a * p
        if c >= _FLOAT_LIMIT:
            return -1
        m = math.floor(c)
        if c - m > 0.5:
            m += 1.0
        ok = _reads_back(m, p, a)
        below = _reads_back(m - 1.0, p, a)
        above = _reads_back(m + 1.0, p, a)
        if not (ok or below or above):
            continue
        # The readers are consecutive integers: one reader with two
        # non-readers around it is the only one.
        if ok and not below and not above:
            pass
        elif below and not ok and not _reads_back(m - 2.0, p, a):
            m -= 1.0
        elif above and not ok and not _reads_back(m + 2.0, p, a):
            m += 1.0
        else:
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
    return -1


@njit(cache=True)
def _put_two(out, pos, sep, v):
    out[pos] = sep
    out[pos + 1] = 48 + v // 10
    out[pos + 2] = 48 + v % 10
    return pos + 3


@njit(cache=True)
def _put_datetime(out, pos, v, per_sec):
    """``numpy.datetime_as_string(v, unit="auto")`` of a datetime64 count."""
    per_day = 86400 * per_sec
    days = v // per_day
    rem = v - days * per_day
    # Civil date of a day count (proleptic Gregorian, 400-year eras).
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    # numpy writes the year with "%04lld": the sign counts in the width.
    if year < 0:
        out[pos] = 45
        pos = _put_digits(out, pos + 1, -year, 3)
    else:
        pos = _put_digits(out, pos, year, 4)
    pos = _put_two(out, pos, 45, month)
    pos = _put_two(out, pos, 45, day)
    if rem == 0:
        return pos
    secs = rem // per_sec
    ns = (rem - secs * per_sec) * (1_000_000_000 // per_sec)
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
            new_buf[new_off[i]: new_off[i + 1]] = buf[off[j]: off[j + 1]]
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
            s, e = off[2 * i], off[2 * i + 1]
            out[pos: pos + e - s] = buf[s:e]
            pos += e - s
            if shape == FORM_PAIR:
                out[pos] = 44  # ','
                out[pos + 1] = 32
                pos += 2
                s, e = off[2 * i + 1], off[2 * i + 2]
                out[pos: pos + e - s] = buf[s:e]
                pos += e - s
                out[pos] = 93  # ']'
                pos += 1
            if form[i] & OR_MISSING:
                pos = _put_bytes(out, pos, _OR_NA)
        out_off[i + 1] = pos
    return out[:pos], out_off


@njit(cache=True)
def group_sorted(order, lo, hi, missing):
    """Distinct ``(lo, hi, missing)`` triples, numbered in sorted order.

    ``order`` sorts ``lo`` (any order among ties). Returns ``first`` (one
    row of each triple, in triple order) and ``inverse`` (each row's triple).
    """
    n = order.shape[0]
    # Order every run of equal lo by (hi, missing).
    s = 0
    while s < n:
        e = s + 1
        while e < n and lo[order[e]] == lo[order[s]]:
            e += 1
        if e - s > 1:
            run = order[s:e]
            by_hi = run[np.argsort(hi[run])]
            # Within equal hi, rows without a missing value first.
            t = 0
            while t < by_hi.shape[0]:
                u = t + 1
                while u < by_hi.shape[0] and hi[by_hi[u]] == hi[by_hi[t]]:
                    u += 1
                w = s + t
                for q in range(t, u):
                    if not missing[by_hi[q]]:
                        order[w] = by_hi[q]
                        w += 1
                for q in range(t, u):
                    if missing[by_hi[q]]:
                        order[w] = by_hi[q]
                        w += 1
                t = u
        s = e
    first = np.empty(n, dtype=np.int64)
    inverse = np.empty(n, dtype=np.int64)
    g = -1
    for p in range(n):
        r = order[p]
        if p == 0 or lo[r] != lo[order[p - 1]] or hi[r] != hi[order[p - 1]] \
                or missing[r] != missing[order[p - 1]]:
            g += 1
            first[g] = r
        inverse[r] = g
    return first[:g + 1], inverse
