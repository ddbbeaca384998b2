# distutils: language = c++
"""Range and set labels: the distinct classes of a QI, then their labels in one buffer.

:func:`pack_triples` and :func:`group_packed` find the distinct
``(lo, hi, missing)`` triples of a QI's classes in sorted order around one
``np.sort`` of packed words. :func:`format_labels` writes their labels as
Arrow stores strings: one ``uint8`` buffer of UTF-8 bytes and int64 offsets
(label ``i`` is ``buf[off[i]:off[i + 1]]``), with no Python object per label.
The bytes are exactly what :mod:`dmondrian.release.publish` documents:

* integers as ``str(int)``;
* floats as Python's ``repr``: the shortest digits that read back to the
  same float (the closest of them to it, ties to an even last digit), in
  fixed notation for 0 and ``1e-4 <= |x| < 1e16``, in scientific notation
  otherwise;
* naive datetimes as ``numpy.datetime_as_string(unit="auto")``: the date, then
  only the time fields up to the last non-zero one (hours and minutes
  together, fractions in groups of three digits);
* anything else (ordinal names, tz-aware datetimes) as strings the caller
  makes once per distinct value, copied from a table.

A float of a few decimals (a price, a measure) is recognised as such by
exact float arithmetic; the shortest digits of any other come from C++17
``std::to_chars`` (Ryu in libstdc++), which picks them as the ``dtoa``
behind ``repr`` does. Built against a standard library that does not
announce it (``__cpp_lib_to_chars``: libc++, which also marks it unavailable
on older macOS targets, or a compiler in C++14 mode), the module asks
CPython's ``PyOS_double_to_string`` instead, the function ``repr`` calls:
the same bytes, one call with the GIL per float, at the speed of ``repr``.

Set labels (nominal QIs) are written in the same layout by
:mod:`dmondrian._kernel.set_labels`.
"""

import numpy as np

from libc.math cimport fabs
from libc.stdint cimport uint8_t
from libc.string cimport memcpy

from dmondrian._kernel._common cimport (INT_MIN, MISSING_KEY, decode_float_key, i64, popcount,
                                        u64)

__all__ = ["FMT_INT", "FMT_FLOAT", "FMT_DATETIME", "FMT_TABLE", "DATETIME_UNITS",
           "format_labels", "pack_triples", "group_packed"]

cdef extern from *:
    """
    #include <string.h>
    #ifndef DM_NO_TO_CHARS
    #  if __cplusplus >= 201703L || (defined(_MSVC_LANG) && _MSVC_LANG >= 201703L)
    #    include <charconv>
    #  endif
    #endif
    /* The feature macro is what promises the floating-point overloads
       (integer-only <charconv> headers exist). */
    #if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    #  define DM_HAVE_TO_CHARS 1
    /* The shortest round-trip digits of x, as "-d.ddde-XX" (no '.' for one
       digit, at least two exponent digits): the bytes repr writes for a
       float it puts in scientific notation. */
    static inline int dm_scientific(double x, char *buf) {
        return (int)(std::to_chars(buf, buf + 32, x, std::chars_format::scientific).ptr - buf);
    }
    #else
    #  define DM_HAVE_TO_CHARS 0
    static inline int dm_scientific(double x, char *buf) { (void)x; (void)buf; return 0; }
    #endif
    static const double dm_pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7};

    /* repr(x) from CPython itself: written to out, its length returned
       (-1 when CPython is out of memory). Callable without the GIL. */
    static int dm_python_repr(double x, unsigned char *out) {
        PyGILState_STATE gil = PyGILState_Ensure();
        char *s = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        int n = -1;
        if (s != NULL) {
            n = (int)strlen(s);
            memcpy(out, s, n);
            PyMem_Free(s);
        } else {
            PyErr_Clear();
        }
        PyGILState_Release(gil);
        return n;
    }

    #include <algorithm>
    #include <vector>
    /* Sort the row numbers idx[0..n) by their rows of `words` words read as
       int64, word 0 first: the order np.lexsort gives the mask matrix viewed
       as int64 (rows are distinct, so no tie is left to order). One word at
       a time: each level sorts (word, row) pairs held side by side and
       recurses into runs of equal words only, so a row is read once a level
       rather than at every comparison of a sort over whole rows. */
    """
    const bint HAVE_TO_CHARS "DM_HAVE_TO_CHARS"
    const double* POW10F "dm_pow10"
    int dm_scientific(double x, char *buf) noexcept nogil
    int dm_python_repr(double x, unsigned char *out) noexcept nogil

# How format_labels reads a bound.
FMT_INT = 0
FMT_FLOAT = 1
FMT_DATETIME = 2
FMT_TABLE = 3

cdef enum:
    C_FMT_INT = 0
    C_FMT_FLOAT = 1
    C_FMT_DATETIME = 2
    C_FMT_TABLE = 3

# Key units per second of the datetime units written here.
DATETIME_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}

# Eras of 146,097 days (400 years) added so day counts of any datetime64[s]
# are non-negative; 719,468 days go from 0000-03-01 to 1970-01-01.
cdef enum:
    SHIFT_ERAS = 1 << 30
cdef i64 EPOCH_SHIFT = 719_468 + 146_097 * <i64>SHIFT_ERAS

# Room for one bound: the longest are datetime64[s] counts near -2**63
# ("-292277022657-01-27T08:29:53", 27 bytes), floats (24, as in
# "-2.2250738585072014e-308") and int64 (20).
cdef enum:
    ENTRY_MAX = 48
    # Runs of equal lo prefix up to this long are ordered by insertion.
    INSERTION_RUN = 64

# Floats with up to this many decimals (prices, measures) skip to_chars.
cdef enum:
    FEW_DECIMALS = 7
cdef double TWO_50 = 2.0 ** 50, TWO_M50 = 2.0 ** -50

cdef const char* NA = b"<NA>"
cdef const char* OR_NA = b" or <NA>"
cdef enum:
    NA_LEN = 4
    OR_NA_LEN = 8


cdef inline i64 put_digits(uint8_t* out, i64 pos, u64 u, int width) noexcept nogil:
    """Write ``u`` in decimal, zero-padded to ``width`` digits."""
    cdef int n = 1
    cdef u64 limit = 10
    while n < 20 and u >= limit:
        n += 1
        limit *= 10  # wraps past 10**19, after the last comparison that needs it
    if n < width:
        n = width
    cdef i64 i = pos + n - 1
    while i >= pos:
        out[i] = <uint8_t>(48 + u % 10)
        u //= 10
        i -= 1
    return pos + n


cdef inline i64 put_bytes(uint8_t* out, i64 pos, const char* text, i64 n) noexcept nogil:
    memcpy(out + pos, text, n)
    return pos + n


cdef inline i64 put_int(uint8_t* out, i64 pos, i64 v) noexcept nogil:
    """``str(v)`` of an int64."""
    cdef u64 u = <u64>v
    if v < 0:
        out[pos] = 45  # '-'
        pos += 1
        # The unsigned negation is exact for every int64, -2**63 included.
        u = 0 - u
    return put_digits(out, pos, u, 1)


cdef inline int few_decimals(double a, u64* digits) noexcept nogil:
    """``d`` when ``a`` (at least 1e-4) is the float of a decimal ``m * 10**-d``
    with ``d <= FEW_DECIMALS`` and ``m * 10**-d < 2**50``, the smallest such
    ``d``, ``m`` into ``digits``; else -1.

    That decimal is then repr's: for ``c = a * 10**d < 2**50`` the decimals
    with ``d`` digits reading back to ``a`` are the integers within
    ``ulp(a) / 2 * 10**d <= c * 2**-53`` of ``c``, and ``c`` is computed
    within ``c * 2**-53``: at most one integer, the nearest to the computed
    ``c``, and only if it lies within ``c * 2**-50`` of it (a test without a
    division). Fewer decimals means fewer significant digits, so the first
    ``d`` with a reader is the shortest; its one reader is the closest.
    """
    cdef int d
    cdef double p, c, m
    # A reader with d decimals is, times 10**(FEW_DECIMALS - d), an integer as
    # near c at FEW_DECIMALS: one test there rules out most floats (values
    # of 17 significant digits) at once.
    c = a * POW10F[FEW_DECIMALS]
    if c < TWO_50:
        m = <double><i64>(c + 0.5)
        if fabs(c - m) > c * TWO_M50:
            return -1
    for d in range(FEW_DECIMALS + 1):
        p = POW10F[d]
        c = a * p
        if c >= TWO_50:
            return -1
        # (A conversion rounds: libm's floor is a call without SSE4.1.)
        m = <double><i64>(c + 0.5)
        # m and p are exact, so m / p is the correctly rounded value of the
        # decimal: the float reading it gives.
        if fabs(c - m) <= c * TWO_M50 and m / p == a:
            digits[0] = <u64>m
            return d
    return -1


cdef i64 put_float(uint8_t* out, i64 pos, double x) noexcept nogil:
    """``repr(x)``; -1 when CPython, asked instead of ``to_chars``, fails."""
    cdef char sci[32]
    cdef char* digits
    cdef int n, i, e, exp10, nd, decpt, k
    cdef u64 m, scale, whole
    cdef double a = fabs(x)
    if a >= 1e-4:
        k = few_decimals(a, &m)
        if k >= 0:
            if x < 0:
                out[pos] = 45
                pos += 1
            if k == 0:
                pos = put_digits(out, pos, m, 1)
                out[pos] = 46
                out[pos + 1] = 48
                return pos + 2
            scale = <u64>POW10F[k]
            whole = m // scale
            pos = put_digits(out, pos, whole, 1)
            out[pos] = 46
            return put_digits(out, pos + 1, m - whole * scale, k)
    if not HAVE_TO_CHARS:
        n = dm_python_repr(x, out + pos)
        return -1 if n < 0 else pos + n
    n = dm_scientific(x, sci)
    i = 0
    if sci[0] == 45:  # '-', of -0.0 too
        out[pos] = 45
        pos += 1
        i = 1
    e = n - 1
    while sci[e] != 101:  # 'e'
        e -= 1
    exp10 = 0
    for k in range(e + 2, n):
        exp10 = exp10 * 10 + (sci[k] - 48)
    if sci[e + 1] == 45:
        exp10 = -exp10
    # The decimal point goes after digit decpt (before the first when <= 0).
    decpt = exp10 + 1
    if decpt <= -4 or decpt > 16:
        # repr's scientific notation is to_chars' byte for byte.
        return put_bytes(out, pos, sci + i, n - i)
    # The digits in one run: the first moved onto the '.' after it.
    digits = sci + i
    nd = e - i - 1 if e > i + 1 else 1
    if nd > 1:
        sci[i + 1] = sci[i]
        digits += 1
    if decpt <= 0:
        out[pos] = 48
        out[pos + 1] = 46
        pos += 2
        for k in range(-decpt):
            out[pos + k] = 48
        pos -= decpt
        return put_bytes(out, pos, digits, nd)
    if decpt >= nd:
        # Whole numbers: the digits, their zeros, and ".0".
        pos = put_bytes(out, pos, digits, nd)
        for k in range(decpt - nd):
            out[pos + k] = 48
        pos += decpt - nd
        out[pos] = 46
        out[pos + 1] = 48
        return pos + 2
    pos = put_bytes(out, pos, digits, decpt)
    out[pos] = 46
    return put_bytes(out, pos + 1, digits + decpt, nd - decpt)


cdef inline i64 put_two(uint8_t* out, i64 pos, uint8_t sep, i64 v) noexcept nogil:
    """``sep`` then ``v`` (0-99) in two digits."""
    out[pos] = sep
    out[pos + 1] = <uint8_t>(48 + v // 10)
    out[pos + 2] = <uint8_t>(48 + v % 10)
    return pos + 3


cdef inline i64 floor_div(i64 a, i64 b) noexcept nogil:
    """``a // b`` rounded down, as Python does, for ``b > 0`` (C truncates)."""
    cdef i64 q = a / b
    if q * b > a:
        q -= 1
    return q


cdef inline i64 put_datetime(uint8_t* out, i64 pos, i64 v, i64 per_sec) noexcept nogil:
    """``numpy.datetime_as_string(v, unit="auto")`` of a datetime64 count."""
    cdef i64 days, secs, ns, rem, day, month, year
    cdef u64 z, era, doe, yoe, doy, mp
    # One branch per unit so every division is by a constant.
    if per_sec == 1_000_000_000:
        days = floor_div(v, 86_400_000_000_000LL)
        rem = v - days * 86_400_000_000_000LL
        secs = rem // 1_000_000_000
        ns = rem - secs * 1_000_000_000
    elif per_sec == 1_000_000:
        days = floor_div(v, 86_400_000_000LL)
        rem = v - days * 86_400_000_000LL
        secs = rem // 1_000_000
        ns = (rem - secs * 1_000_000) * 1000
    elif per_sec == 1000:
        days = floor_div(v, 86_400_000LL)
        rem = v - days * 86_400_000LL
        secs = rem // 1000
        ns = (rem - secs * 1000) * 1_000_000
    else:
        days = floor_div(v, 86400)
        secs = v - days * 86400
        ns = 0
    # Civil date of a day count (proleptic Gregorian, 400-year eras),
    # shifted by whole eras so every division is unsigned.
    z = <u64>(days + EPOCH_SHIFT)
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = <i64>(doy - (153 * mp + 2) // 5) + 1
    month = <i64>mp + 3 if mp < 10 else <i64>mp - 9
    year = <i64>yoe + (<i64>era - SHIFT_ERAS) * 400 + (1 if month <= 2 else 0)
    # numpy writes the year with "%04lld": the sign counts in the width.
    if year < 0:
        out[pos] = 45
        pos = put_digits(out, pos + 1, <u64>(-year), 3)
    else:
        pos = put_digits(out, pos, <u64>year, 4)
    # Then the fields up to the last non-zero one: hours come with minutes.
    pos = put_two(out, pos, 45, month)  # '-'
    pos = put_two(out, pos, 45, day)
    if secs == 0 and ns == 0:
        return pos
    pos = put_two(out, pos, 84, secs // 3600)  # 'T'
    pos = put_two(out, pos, 58, (secs // 60) % 60)  # ':'
    if secs % 60 == 0 and ns == 0:
        return pos
    pos = put_two(out, pos, 58, secs % 60)
    if ns == 0:
        return pos
    out[pos] = 46  # '.'
    if ns % 1000:
        return put_digits(out, pos + 1, <u64>ns, 9)
    if ns % 1_000_000:
        return put_digits(out, pos + 1, <u64>(ns // 1000), 6)
    return put_digits(out, pos + 1, <u64>(ns // 1_000_000), 3)


cdef i64 write_labels(uint8_t* out, i64* off, const i64[::1] lo, const i64[::1] hi,
                      const uint8_t[::1] missing, int fmt, i64 per_sec,
                      const uint8_t[::1] t_buf, const i64[::1] t_off) noexcept nogil:
    """The labels' bytes into ``out`` and their ends into ``off[1:]``; the
    length written, or -1 when a float could not be written."""
    cdef Py_ssize_t n = lo.shape[0], i
    cdef i64 pos = 0, a, b, k, s, e
    cdef int side
    cdef bint pair
    off[0] = 0
    for i in range(n):
        a = lo[i]
        b = hi[i]
        if a == MISSING_KEY:
            pos = put_bytes(out, pos, NA, NA_LEN)
            off[i + 1] = pos
            continue
        pair = a != b
        if pair:
            out[pos] = 91  # '['
            pos += 1
        for side in range(2 if pair else 1):
            if side:
                out[pos] = 44  # ','
                out[pos + 1] = 32
                pos += 2
            k = b if side else a
            if fmt == C_FMT_INT:
                pos = put_int(out, pos, k)
            elif fmt == C_FMT_FLOAT:
                pos = put_float(out, pos, decode_float_key(k))
                if pos < 0:
                    return -1
            elif fmt == C_FMT_DATETIME:
                pos = put_datetime(out, pos, k, per_sec)
            else:
                s = t_off[k]
                e = t_off[k + 1]
                if e > s:
                    pos = put_bytes(out, pos, <const char*>&t_buf[s], e - s)
        if pair:
            out[pos] = 93  # ']'
            pos += 1
        if missing[i]:
            pos = put_bytes(out, pos, OR_NA, OR_NA_LEN)
        off[i + 1] = pos
    return pos


def format_labels(const i64[::1] lo, const i64[::1] hi, missing, int fmt, i64 per_sec,
                  const uint8_t[::1] t_buf, const i64[::1] t_off):
    """Range labels, one per ``(lo, hi, missing)``.

    Parameters
    ----------
    lo, hi : int64 array (n,)
        Bounds: integers (``FMT_INT``), order-preserving float keys
        (``FMT_FLOAT``, see :func:`dmondrian.encoding.qi.float_keys`), datetime64
        counts of ``per_sec`` units a second (``FMT_DATETIME``) or indices of
        strings of ``(t_buf, t_off)`` (``FMT_TABLE``). ``lo = MISSING_KEY``
        marks a class whose values are all missing.
    missing : bool array (n,)
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

    Examples
    --------
    >>> import numpy as np
    >>> lo, hi = np.array([3, -7]), np.array([12, -7])
    >>> buf, off = format_labels(lo, hi, np.array([True, False]), FMT_INT, 0,
    ...                          np.zeros(0, np.uint8), np.zeros(1, np.int64))
    >>> bytes(buf), off.tolist()
    (b'[3, 12] or <NA>-7', [0, 15, 17])
    """
    cdef Py_ssize_t n = lo.shape[0], i
    # numpy's bool buffers have a format memoryviews of a C type do not take.
    cdef const uint8_t[::1] miss = np.ascontiguousarray(missing, dtype=np.bool_).view(np.uint8)
    if hi.shape[0] != n or miss.shape[0] != n:
        raise ValueError("lo, hi and missing must have the same length")
    if fmt not in (C_FMT_INT, C_FMT_FLOAT, C_FMT_DATETIME, C_FMT_TABLE):
        raise ValueError(f"unknown label format {fmt}")
    cdef i64 size = n * (2 * ENTRY_MAX + 4 + OR_NA_LEN), a, b
    if fmt == C_FMT_TABLE:
        # Table strings have any length: the exact size.
        size = 0
        for i in range(n):
            a = lo[i]
            b = hi[i]
            if a == MISSING_KEY:
                size += NA_LEN
                continue
            size += t_off[a + 1] - t_off[a] + OR_NA_LEN * miss[i]
            if a != b:
                size += t_off[b + 1] - t_off[b] + 4
    # One spare byte: a pointer to the start of an empty buffer.
    out = np.empty(size + 1, dtype=np.uint8)
    off = np.empty(n + 1, dtype=np.int64)
    cdef uint8_t[::1] ov = out
    cdef i64[::1] fv = off
    cdef i64 end
    with nogil:
        end = write_labels(&ov[0], &fv[0], lo, hi, miss, fmt, per_sec, t_buf, t_off)
    if end < 0:
        raise MemoryError("CPython could not write a float")
    return out[:end], off


cdef inline int bit_length(u64 u) noexcept nogil:
    cdef int bits = 0
    while bits < 64 and (u >> bits) != 0:
        bits += 1
    return bits


def pack_triples(const i64[:, :] lo, const i64[:, :] hi, missing, Py_ssize_t j):
    """Sort words for the ``(lo, hi, missing)`` triples of column ``j``.

    Parameters
    ----------
    lo, hi : int64 arrays (n_classes, n_qi)
        Per-class bounds of every QI (:func:`dmondrian._kernel.class_statistics`).
    missing : bool array (n_classes, n_qi)
        Whether each class holds a missing value of each QI.
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
    cdef Py_ssize_t n = lo.shape[0], r, p
    missing = np.asarray(missing, dtype=np.bool_)
    cdef const uint8_t[:, :] miss = missing.view(np.uint8)
    if hi.shape[0] != n or miss.shape[0] != n:
        raise ValueError("lo, hi and missing must have the same number of rows")
    if not (0 <= j < lo.shape[1] and j < hi.shape[1] and j < miss.shape[1]):
        raise IndexError(f"column {j} is out of range")
    triples = np.empty((n, 4), dtype=np.int64)
    cdef i64[:, ::1] t = triples
    cdef Py_ssize_t m = 0
    cdef i64 a, b, lo_min = MISSING_KEY, hi_min = MISSING_KEY, lo_max = INT_MIN
    cdef i64 hi_max = INT_MIN
    cdef int idx_bits, lo_bits, hi_bits
    cdef bint exact
    cdef u64 shift, key
    with nogil:
        for r in range(n):
            a = lo[r, j]
            if a != MISSING_KEY:
                b = hi[r, j]
                t[m, 0] = a
                t[m, 1] = b
                t[m, 2] = miss[r, j] != 0
                t[m, 3] = r
                m += 1
                lo_min = a if a < lo_min else lo_min
                lo_max = a if a > lo_max else lo_max
                hi_min = b if b < hi_min else hi_min
                hi_max = b if b > hi_max else hi_max
        idx_bits = bit_length(<u64>(m - 1 if m - 1 > 1 else 1))
        lo_bits = bit_length(<u64>lo_max - <u64>lo_min)
        hi_bits = bit_length(<u64>hi_max - <u64>hi_min)
        exact = lo_bits + hi_bits + 1 + idx_bits <= 64
        shift = 0 if exact else <u64>max(0, lo_bits + idx_bits - 64)
    packed = np.empty(m, dtype=np.uint64)
    cdef u64[::1] pv = packed
    with nogil:
        for p in range(m):
            key = (<u64>t[p, 0] - <u64>lo_min) >> shift
            if exact:
                key = (key << (hi_bits + 1)) | ((<u64>t[p, 1] - <u64>hi_min) << 1)
                key |= <u64>t[p, 2]
            pv[p] = (key << idx_bits) | <u64>p
    return triples[:m], packed, idx_bits, bool(exact)


cdef inline bint triple_less(const i64[:, :] t, i64 a, i64 b) noexcept nogil:
    """Whether the triple at position ``a`` sorts before the one at ``b``."""
    cdef int c
    for c in range(3):
        if t[a, c] != t[b, c]:
            return t[a, c] < t[b, c]
    return False


def group_packed(Py_ssize_t n, const i64[:, :] triples, const u64[::1] packed, int idx_bits,
                 exact):
    """Distinct triples from :func:`pack_triples`' output, its words sorted.

    Equal words of an ``exact`` key are one triple; otherwise runs of equal
    key (a prefix of lo) are ordered and split by the whole triple, by
    insertion. The ``n - len(triples)`` classes with every value missing
    share one last triple.

    Parameters
    ----------
    n : int
        Number of classes.
    triples, packed, idx_bits, exact
        :func:`pack_triples`' output, ``packed`` sorted.

    Returns
    -------
    inverse : int64 array (n,)
        Every class's triple.
    u_lo, u_hi, u_missing : arrays
        The distinct triples, in sorted order.
    ok : bool
        False (nothing else meaningful) when a run of equal key is longer
        than ``INSERTION_RUN`` (64): the caller sorts another way.
    """
    cdef Py_ssize_t m = triples.shape[0], r
    if packed.shape[0] != m or triples.shape[1] < 4:
        raise ValueError("triples and packed do not match")
    if not 0 <= idx_bits < 64:
        raise ValueError(f"idx_bits {idx_bits} is out of range")
    cdef bint is_exact = exact
    cdef u64 mask = (<u64>1 << idx_bits) - 1, key
    inverse = np.full(n, -1, dtype=np.int64)
    u_lo = np.empty(m + 1, dtype=np.int64)
    u_hi = np.empty(m + 1, dtype=np.int64)
    u_missing = np.empty(m + 1, dtype=np.bool_)
    cdef i64[::1] inv = inverse, ulo = u_lo, uhi = u_hi
    cdef uint8_t[::1] umiss = u_missing.view(np.uint8)
    cdef i64 run[INSERTION_RUN]
    cdef i64 g = -1, s = 0, e, t, p, q
    cdef bint ok = True
    with nogil:
        while s < m:
            key = packed[s] >> idx_bits
            e = s + 1
            while e < m and packed[e] >> idx_bits == key:
                e += 1
            if is_exact or e - s == 1:
                # One triple (an exact key, or a lone prefix).
                g += 1
                p = <i64>(packed[s] & mask)
                ulo[g] = triples[p, 0]
                uhi[g] = triples[p, 1]
                umiss[g] = triples[p, 2] != 0
                for t in range(s, e):
                    inv[triples[<i64>(packed[t] & mask), 3]] = g
            else:
                if e - s > INSERTION_RUN:
                    ok = False
                    break
                # Positions of the run in triple order, then split where it changes.
                for t in range(s, e):
                    p = <i64>(packed[t] & mask)
                    q = t - s
                    while q > 0 and triple_less(triples, p, run[q - 1]):
                        run[q] = run[q - 1]
                        q -= 1
                    run[q] = p
                for q in range(e - s):
                    p = run[q]
                    if q == 0 or triple_less(triples, run[q - 1], p):
                        g += 1
                        ulo[g] = triples[p, 0]
                        uhi[g] = triples[p, 1]
                        umiss[g] = triples[p, 2] != 0
                    inv[triples[p, 3]] = g
            s = e
        if ok and m < n:
            g += 1
            ulo[g] = MISSING_KEY
            uhi[g] = INT_MIN
            umiss[g] = True
            for r in range(n):
                if inv[r] < 0:
                    inv[r] = g
    if not ok:
        return inverse, u_lo[:0], u_hi[:0], u_missing[:0], False
    return inverse, u_lo[:g + 1], u_hi[:g + 1], u_missing[:g + 1], True
