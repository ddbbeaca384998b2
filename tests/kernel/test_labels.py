"""Range labels built by the compiled formatter are byte for byte the documented format.

The formatters are checked against the Python/numpy functions the format is
defined by (``repr``, ``str``, ``numpy.datetime_as_string(unit="auto")``),
floats over every kind of float64 bit pattern, the grouping against a
lexsort, and whole releases against labels built here, class by class, in
plain Python.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import _kernel as K
from dmondrian._kernel import labels as _labels
from dmondrian._kernel import set_labels as _set_labels_kernel
from dmondrian.encoding.qi import float_keys
from dmondrian.release.publish import NO_TABLE, expand_labels, group_triples

INT64_MIN, INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def strings(buf, off) -> list[str]:
    data = buf.tobytes()
    return [data[off[i]: off[i + 1]].decode() for i in range(len(off) - 1)]


def format_values(keys, fmt, per_sec=0):
    """The label of each key alone (a one-value class)."""
    keys = np.asarray(keys, dtype=np.int64)
    buf, off = _labels.format_labels(keys, keys, np.zeros(len(keys), dtype=bool), fmt, per_sec,
                                     *NO_TABLE)
    return strings(buf, off)


def raw_float_keys(values) -> np.ndarray:
    """Order-preserving keys without folding -0.0 into 0.0 (float_keys does)."""
    bits = np.asarray(values, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, bits ^ K.FLIP, bits)


def check_floats(values):
    values = np.asarray(values, dtype=np.float64)
    assert format_values(raw_float_keys(values), _labels.FMT_FLOAT) == list(
        map(repr, values.tolist()))


EDGE_FLOATS = [
    0.0, -0.0, 1.0, -1.0, 0.1, 0.2, 0.1 + 0.2, 1 / 3, 2 / 3, 123.456, -123.456, 1e-4, -1e-4,
    np.nextafter(1e-4, 0), np.nextafter(1e-4, 1), 9.999999999999999e-05, 1e-5, 1e16, -1e16,
    np.nextafter(1e16, 0), 1e15 + 0.25, 1e15 + 0.125, 1e15 + 0.75, 2.0 ** 52, 2.0 ** 52 + 0.5,
    2.0 ** 52 - 0.5, 2.0 ** 53, 2.0 ** 53 - 1, 2.0 ** 53 - 2, 2.0 ** 53 + 2, 2.0 ** 53 - 4,
    5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.5, 0.25, 0.125,
    1234567.0, 4503599627370495.5, 9007199254740991.0, 0.30000000000000004, 100.0, 1e15,
    0.000123, 0.00012345678901234, 12345678.9, 3.141592653589793, 2.718281828459045,
]


def test_float_edge_values_match_repr():
    check_floats(EDGE_FLOATS + [-v for v in EDGE_FLOATS])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=40))
def test_floats_match_repr(values):
    check_floats(values)


def finite_bits(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


# Every finite float64 is some bit pattern: uniform patterns reach every binary
# exponent alike (subnormals, huge and tiny values as often as everyday ones);
# the explicit ones are the edges of the exponent range and of each format.
float_bits = st.one_of(
    st.integers(0, 2 ** 64 - 1),
    st.tuples(st.integers(0, 2 ** 52 - 1), st.booleans()).map(  # subnormals, +-0.0
        lambda t: t[0] | t[1] << 63),
    st.sampled_from([0x7FEF_FFFF_FFFF_FFFF, 0x0010_0000_0000_0000, 0x0000_0000_0000_0001,
                     0x8000_0000_0000_0000]),
).map(finite_bits).filter(math.isfinite)


@settings(max_examples=500, deadline=None)
@given(st.lists(float_bits, min_size=1, max_size=40))
def test_float_bit_patterns_match_repr(values):
    check_floats(values)


# Where two shortest strings both read back to a float and lie equally close
# to it (a float halfway between two decimals of one digit fewer than it
# has), repr takes the one whose last digit is even: 1e15 + 0.25 is
# "1000000000000000.2", 1e15 + 0.75 "1000000000000000.8".
ties = st.tuples(st.integers(2 ** 30, 2 ** 53), st.integers(0, 12),
                 st.sampled_from([0.25, 0.75, 0.125, 0.375, 0.5, 0.0625])).map(
    lambda t: t[0] / 2 ** t[1] + t[2])


@settings(max_examples=300, deadline=None)
@given(st.lists(ties, min_size=1, max_size=40))
def test_float_ties_match_repr(values):
    check_floats(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(10 ** 15), 10 ** 15), min_size=1, max_size=40),
       st.integers(0, 20))
def test_decimal_floats_match_repr(mantissas, decimals):
    # Values with few digits (prices, measures), in fixed and scientific notation.
    check_floats([m / 10 ** decimals for m in mantissas])


def test_float_notation_switches_where_repr_does():
    # Fixed notation for 1e-4 <= |x| < 1e16, scientific outside.
    values = [1e-4, np.nextafter(1e-4, 0), 1e16, np.nextafter(1e16, 0), 1e15 + 0.25, 1e-5,
              123e-7, 1.5e300, 2.0 ** -1074]
    check_floats(values)
    assert format_values(raw_float_keys([1e16, 9.999999999999999e-05]), _labels.FMT_FLOAT) == [
        "1e+16", "9.999999999999999e-05"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(INT64_MIN, INT64_MAX - 1), min_size=1, max_size=40))
def test_ints_match_str(values):
    assert format_values(values, _labels.FMT_INT) == [str(v) for v in values]


# Datetime counts that hit every unit numpy's "auto" picks (days, minutes,
# seconds, milli/micro/nanoseconds), over the whole int64 range.
def datetime_counts(per_sec):
    steps = [86400 * per_sec, 3600 * per_sec, 60 * per_sec, per_sec]
    steps += [per_sec // d for d in (1000, 1_000_000, 1_000_000_000) if per_sec // d >= 1]
    scaled = st.tuples(st.integers(-(10 ** 12), 10 ** 12), st.sampled_from(steps)).map(
        lambda t: t[0] * t[1]).filter(lambda v: INT64_MIN < v < INT64_MAX)
    extremes = st.integers(0, 10 ** 6).flatmap(
        lambda d: st.sampled_from([INT64_MIN + 1 + d, INT64_MAX - 1 - d]))
    return st.one_of(st.integers(INT64_MIN + 1, INT64_MAX - 1), scaled, extremes)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_datetimes_match_numpy_auto_unit(unit):
    per_sec = _labels.DATETIME_UNITS[unit]

    @settings(max_examples=150, deadline=None)
    @given(st.lists(datetime_counts(per_sec), min_size=1, max_size=40))
    def check(values):
        keys = np.asarray(values, dtype=np.int64)
        expected = np.datetime_as_string(keys.view(f"datetime64[{unit}]"), unit="auto")
        assert format_values(keys, _labels.FMT_DATETIME, per_sec) == expected.tolist()

    check()


def test_datetime_edges_match_numpy():
    for unit, per_sec in _labels.DATETIME_UNITS.items():
        edges = [INT64_MIN + 1, INT64_MAX - 1, -1, 0, 1, -per_sec, 86400 * per_sec - 1,
                 -86400 * per_sec, -(719_468 * 86400 + 1) * per_sec,  # 0000-02-29T23:59:59
                 -(719_468 + 146_097) * 86400 * per_sec]  # year -400
        keys = np.array([v for v in edges if INT64_MIN < v < INT64_MAX], dtype=np.int64)
        expected = np.datetime_as_string(keys.view(f"datetime64[{unit}]"), unit="auto")
        assert format_values(keys, _labels.FMT_DATETIME, per_sec) == expected.tolist()


text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)


def table_labels(table, lo, hi, missing):
    encoded = [t.encode() for t in table]
    off = np.zeros(len(table) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(b) for b in encoded])
    # A read-only buffer, as bytes give it.
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return strings(*_labels.format_labels(
        np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64),
        np.asarray(missing, dtype=bool), _labels.FMT_TABLE, 0, buf, off))


@settings(max_examples=100, deadline=None)
@given(st.lists(text, min_size=1, max_size=10), st.data())
def test_labels_have_the_documented_forms(table, data):
    n = data.draw(st.integers(1, 8))
    index = st.integers(0, len(table) - 1)
    lo = data.draw(st.lists(st.one_of(index, st.just(K.MISSING_KEY)), min_size=n, max_size=n))
    hi = [a if a == K.MISSING_KEY or data.draw(st.booleans()) else data.draw(index)
          for a in lo]
    missing = [a == K.MISSING_KEY or data.draw(st.booleans()) for a in lo]
    labels = table_labels(table, lo, hi, missing)
    for label, a, b, m in zip(labels, lo, hi, missing):
        if a == K.MISSING_KEY:
            assert label == "<NA>"
            continue
        base = table[a] if a == b else f"[{table[a]}, {table[b]}]"
        assert label == base + (" or <NA>" if m else "")


def test_range_forms_of_numbers():
    keys = np.array([3, 3, -7, K.MISSING_KEY], dtype=np.int64)
    hi = np.array([3, 12, 5, np.iinfo(np.int64).min], dtype=np.int64)
    buf, off = _labels.format_labels(keys, hi, np.array([False, True, False, True]),
                                     _labels.FMT_INT, 0, *NO_TABLE)
    assert strings(buf, off) == ["3", "[3, 12] or <NA>", "[-7, 5]", "<NA>"]
    floats = float_keys(np.array([1.5, 1e-7, 2.0]))
    buf, off = _labels.format_labels(floats[[0, 1]], floats[[2, 2]], np.array([True, False]),
                                     _labels.FMT_FLOAT, 0, *NO_TABLE)
    assert strings(buf, off) == ["[1.5, 2.0] or <NA>", "[1e-07, 2.0]"]


def test_no_labels_and_bad_arguments():
    empty = np.zeros(0, dtype=np.int64)
    for fmt in (_labels.FMT_INT, _labels.FMT_FLOAT, _labels.FMT_DATETIME, _labels.FMT_TABLE):
        buf, off = _labels.format_labels(empty, empty, np.zeros(0, dtype=bool), fmt, 1,
                                         *NO_TABLE)
        assert len(buf) == 0 and off.tolist() == [0]
    with pytest.raises(ValueError):
        _labels.format_labels(np.zeros(2, dtype=np.int64), empty, np.zeros(2, dtype=bool),
                              _labels.FMT_INT, 0, *NO_TABLE)
    with pytest.raises(ValueError):
        _labels.format_labels(empty, empty, np.zeros(0, dtype=bool), 7, 0, *NO_TABLE)


_DAY_NS = 86_400 * 10 ** 9


def reference_groups(lo, hi, missing):
    """Distinct triples by a lexsort (the all-missing lo = MISSING_KEY sorts last)."""
    order = np.lexsort((missing, hi, lo))
    triples = list(zip(lo[order].tolist(), hi[order].tolist(), missing[order].tolist()))
    ids: dict = {}
    for t in triples:
        ids.setdefault(t, len(ids))
    inverse = np.array([ids[t] for t in zip(lo.tolist(), hi.tolist(), missing.tolist())])
    return list(ids), inverse


def group(lo, hi, missing):
    """group_triples on one column of a two-column table (the other column is noise)."""
    noise = np.arange(len(lo))[::-1]
    table = [np.column_stack([noise, a]) for a in (lo, hi)]
    return group_triples(*table, np.column_stack([noise % 2 == 0, missing]), 1)


def classes(draw_values, widths=(0, 0, 1, 3, 2 ** 40, 2 ** 61)):
    """(lo, hi, missing) arrays of classes, some all missing."""
    @st.composite
    def build(draw):
        n = draw(st.integers(1, 100))
        pool = draw(st.lists(draw_values, min_size=1, max_size=12))
        lo = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
        widths_ = draw(st.lists(st.sampled_from(widths), min_size=n, max_size=n))
        hi = np.array([min(a + w, INT64_MAX - 1) for a, w in zip(lo, widths_)], dtype=np.int64)
        lo = np.array(lo, dtype=np.int64)
        missing = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        gone = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))) & missing
        gone &= draw(st.booleans())
        lo = np.where(gone, K.MISSING_KEY, lo).astype(np.int64)
        hi = np.where(gone, INT64_MIN, hi).astype(np.int64)
        return lo, hi, missing
    return build()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(classes(st.integers(-50, 50)), classes(st.integers(INT64_MIN, INT64_MAX - 1)),
                 classes(st.integers(0, 2 ** 62)),
                 # Dates in nanoseconds: bounds on whole days, packed as days.
                 classes(st.integers(-(2 ** 16), 2 ** 16).map(lambda d: d * _DAY_NS),
                         (0, _DAY_NS, 40 * _DAY_NS, 2 ** 15 * _DAY_NS)),
                 classes(st.integers(0, 3).map(lambda d: INT64_MIN + 2 ** 62 * d + 7),
                         (0, 2 ** 61))))
def test_grouping_matches_a_lexsort(case):
    lo, hi, missing = case
    u_lo, u_hi, u_missing, inverse = group(lo, hi, missing)
    triples, expected_inverse = reference_groups(lo, hi, missing)
    assert list(zip(u_lo.tolist(), u_hi.tolist(), u_missing.tolist())) == triples
    assert np.array_equal(inverse, expected_inverse)


def test_grouping_long_ties_of_a_wide_lo_fall_back_to_lexsort():
    # Wide lo and hi do not fit one word with the row number, and 200 classes
    # share a lo: more ties than insertion is allowed to order.
    rng = np.random.default_rng(0)
    lo = np.concatenate([np.zeros(200, dtype=np.int64), [2 ** 62, -(2 ** 62)]])
    hi = np.concatenate([rng.integers(0, 2 ** 62, 200), [2 ** 62, 0]])
    missing = rng.random(202) < 0.5
    u_lo, u_hi, u_missing, inverse = group(lo, hi, missing)
    triples, expected_inverse = reference_groups(lo, hi, missing)
    assert list(zip(u_lo.tolist(), u_hi.tolist(), u_missing.tolist())) == triples
    assert np.array_equal(inverse, expected_inverse)


def test_expand_labels_is_the_categorical_pandas_builds():
    labels = pd.Index(["[1, 2]", "3", "<NA>"])
    inverse = np.array([2, 0, 1, 0])
    class_of_row = np.array([0, 1, 1, 3, 2, 0])
    got = expand_labels(labels, inverse, class_of_row)
    # The class of missing values only publishes a null, not the text "<NA>".
    codes = inverse[class_of_row]
    expected = pd.Categorical.from_codes(np.where(codes == 2, -1, codes),
                                         categories=list(labels[:2]))
    assert got.isna().tolist() == (codes == 2).tolist()
    assert got.dtype == expected.dtype
    assert got.codes.dtype == expected.codes.dtype
    assert got.tolist() == expected.tolist()
    many = pd.Index([str(i) for i in range(40_000)])
    got = expand_labels(many, np.arange(40_000), np.array([39_999, 0]))
    assert got.codes.dtype == pd.Categorical.from_codes([0], categories=many).codes.dtype
    assert got.tolist() == ["39999", "0"]


# -- whole releases against labels built here in plain Python ------------------------------


def python_label(values, kind_of):
    """The documented label of one class's original values."""
    present = [v for v in values if not pd.isna(v)]
    missing = len(present) < len(values)
    if not present:  # published as a null
        return None, (math.inf, 0, True)
    lo, hi = min(present), max(present)
    text = kind_of(lo) if lo == hi else f"[{kind_of(lo)}, {kind_of(hi)}]"
    return text + (" or <NA>" if missing else ""), (lo, hi, missing)


def expected_column(original: pd.Series, class_of_row, kind_of, sort_key):
    """Labels per row and the categories in the engine's order (sorted classes)."""
    per_class = {c: python_label(original[class_of_row == c].tolist(), kind_of)
                 for c in np.unique(class_of_row)}
    rows = [per_class[c][0] for c in class_of_row]
    ordered = sorted(per_class.values(), key=lambda lt: sort_key(lt[1]))
    return rows, list(dict.fromkeys(label for label, _ in ordered if label is not None))


def numeric_sort(t):
    lo, hi, missing = t
    return (lo == math.inf, lo, hi, missing)


def check_release(df, column, k, kind_of, sort_key=numeric_sort):
    out = dmondrian.anonymize(df, [column], k, class_column="_class")
    rows, categories = expected_column(df[column], out["_class"].to_numpy(), kind_of, sort_key)
    published = out[column]
    assert [None if pd.isna(v) else v for v in published.astype(object)] == rows
    assert list(published.cat.categories) == categories
    public = pd.Categorical.from_codes(published.cat.codes.to_numpy(np.int64),
                                       categories=pd.Index(categories, dtype=str))
    assert published.dtype == public.dtype
    assert published.cat.codes.dtype == public.codes.dtype


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False,
                                    min_value=-1e20, max_value=1e20),
                          st.integers(-10 ** 6, 10 ** 6).map(lambda m: m / 100),
                          st.just(float("nan"))), min_size=2, max_size=60),
       st.integers(1, 4))
def test_float_release_labels(values, k):
    assume(len(values) >= k)
    # The engine publishes 0.0 for -0.0 (equal values share a key).
    check_release(pd.DataFrame({"x": values}), "x", k, lambda v: repr(v + 0.0))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(st.integers(INT64_MIN, INT64_MAX - 1), st.none()), min_size=2,
                max_size=60), st.integers(1, 4))
def test_int_release_labels(values, k):
    assume(len(values) >= k)
    check_release(pd.DataFrame({"x": pd.array(values, dtype="Int64")}), "x", k, str)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_datetime_release_labels(unit):
    rng = np.random.default_rng(1)
    per_sec = _labels.DATETIME_UNITS[unit]
    # Any day over +-110 years, at a time of day rounded to the hour, minute,
    # second, millisecond, microsecond or not at all.
    day = 86400 * per_sec
    steps = [s for s in (day, 3600 * per_sec, 60 * per_sec, per_sec, per_sec // 1000,
                         per_sec // 10 ** 6, 1) if s >= 1]
    within = rng.integers(0, day, 300)
    rounding = rng.choice(steps, 300)
    counts = rng.integers(-40_000, 40_000, 300) * day + within // rounding * rounding
    values = pd.Series(counts.astype(f"datetime64[{unit}]")).where(rng.random(300) > 0.1)
    df = pd.DataFrame({"t": values})
    assert df["t"].dtype == f"datetime64[{unit}]"

    def as_numpy(ts):
        return str(np.datetime_as_string(np.datetime64(ts.to_datetime64(), unit), unit="auto"))

    check_release(df, "t", 3, as_numpy)


def test_timezone_aware_release_labels():
    rng = np.random.default_rng(2)
    values = pd.Series(pd.to_datetime(rng.integers(0, 2 ** 60, 200))).dt.tz_localize(
        "UTC").dt.tz_convert("America/New_York")
    check_release(pd.DataFrame({"t": values}), "t", 3, lambda ts: ts.isoformat())


def test_ordinal_names_that_read_like_ranges_merge_into_one_value():
    # The range from "a" to "b" and the category named "[a, b]" publish alike.
    cats = ["a", "b", "[a, b]", "c or <NA>", "<NA>x"]
    values = ["a", "b", "[a, b]", "[a, b]", "c or <NA>", "c or <NA>", "<NA>x", None, "<NA>x"]
    df = pd.DataFrame({"o": pd.Categorical(values, categories=cats, ordered=True)})
    code = {c: i for i, c in enumerate(cats)}

    def sort_key(t):
        lo, hi, missing = t
        return (lo == math.inf, code.get(lo, 0), code.get(hi, 0), missing)

    out = dmondrian.anonymize(df, ["o"], 2, class_column="_class")
    class_of_row = out["_class"].to_numpy()
    per_class = {}
    for c in np.unique(class_of_row):
        members = df["o"][class_of_row == c]
        present = [v for v in members if not pd.isna(v)]
        codes = sorted(code[v] for v in present)
        missing = len(present) < len(members)
        if not present:
            per_class[c] = (None, (math.inf, 0, True))  # published as a null
            continue
        lo, hi = cats[codes[0]], cats[codes[-1]]
        label = lo if lo == hi else f"[{lo}, {hi}]"
        per_class[c] = (label + (" or <NA>" if missing else ""), (lo, hi, missing))
    assert [None if pd.isna(v) else v for v in out["o"].astype(object)] == [
        per_class[c][0] for c in class_of_row]
    ordered = sorted(per_class.values(), key=lambda lt: sort_key(lt[1]))
    assert list(out["o"].cat.categories) == list(dict.fromkeys(lb for lb, _ in ordered
                                                               if lb is not None))
    assert out["o"].cat.categories.is_unique


def test_continuous_and_census_like_floats_match_repr():
    # Measures of 17 significant digits, whole-unit incomes and cents.
    rng = np.random.default_rng(3)
    for values in (rng.normal(50_000, 20_000, 2000), rng.lognormal(10, 1, 2000),
                   np.round(rng.lognormal(10, 1, 2000), 2), rng.lognormal(0, 30, 2000)):
        assert format_values(float_keys(values), _labels.FMT_FLOAT) == list(
            map(repr, values.tolist()))


# -- categories are distinct even when two classes publish alike ---------------------------
# (pandas is not asked to check: expand_labels builds the dtype on the fast path)

TREE = ["Private;*", "Self-emp-not-inc;Self-employ;*", "Self-emp-inc;Self-employ;*",
        "Federal-gov;gov;*", "Local-gov;gov;*", "State-gov;gov;*"]
ANCESTORS = {line.split(";")[0]: line.split(";") for line in TREE}


def lowest_common_ancestor(leaves) -> str:
    paths = [ANCESTORS[leaf][::-1] for leaf in leaves]  # root first
    common = [level[0] for level in zip(*paths) if len(set(level)) == 1]
    return common[-1]


def assert_distinct_categories(published):
    categories = list(published.cat.categories)
    assert len(set(categories)) == len(categories)
    assert published.dtype == pd.CategoricalDtype(categories)  # pandas' own checks


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(sorted(ANCESTORS))), min_size=2,
                max_size=40), st.integers(1, 3))
def test_hierarchy_classes_sharing_an_ancestor_share_one_category(rows, k):
    # Classes cut apart by x can hold different leaves under the same ancestor.
    df = pd.DataFrame(rows, columns=["x", "w"])
    assume(len(df) >= k)
    out = dmondrian.anonymize(df, ["x", "w"], k, hierarchies={"w": TREE}, class_column="_c")
    assert_distinct_categories(out["w"])
    for _, members in df.groupby(out["_c"]):
        published = set(out.loc[members.index, "w"].astype(str))
        assert published == {lowest_common_ancestor(members["w"])}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["a", "a, b", "b", "b, c", "c"])),
                min_size=2, max_size=40), st.integers(1, 3))
def test_nominal_sets_that_read_alike_share_one_category(rows, k):
    # {"a, b", "c"} and {"a", "b, c"} both publish "{a, b, c}".
    df = pd.DataFrame(rows, columns=["x", "w"])
    assume(len(df) >= k)
    out = dmondrian.anonymize(df, ["x", "w"], k, class_column="_c")
    assert_distinct_categories(out["w"])
    for _, members in df.groupby(out["_c"]):
        names = sorted(set(members["w"]))
        label = names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"
        assert set(out.loc[members.index, "w"].astype(str)) == {label}


def test_two_classes_with_sets_that_read_alike():
    df = pd.DataFrame({"x": [0, 0, 0, 0, 9, 9, 9, 9],
                       "w": ["a, b", "c", "a, b", "c", "a", "b, c", "a", "b, c"]})
    out = dmondrian.anonymize(df, ["x", "w"], 4, class_column="_c")
    assert out["_c"].nunique() == 2
    assert out["w"].astype(str).tolist() == ["{a, b, c}"] * 8
    assert_distinct_categories(out["w"])


# -- nominal set labels against the documented format, class by class ---------------------

# Name pieces that test the format: the separator and braces inside names, the
# missing value's own label, unicode of 2, 3 and 4 UTF-8 bytes, and "".
NAME_PIECES = st.sampled_from(["a", "b", ",", " ", ", ", "{", "}", "é", "日", "😀", "<NA>"])


def signed_words(codes: set, words: int) -> tuple:
    """A code set's bitmask words (bit ``c % 64`` of word ``c // 64``) read as int64."""
    out = []
    for w in range(words):
        u = sum(1 << (c - 64 * w) for c in codes if c // 64 == w)
        out.append(u - (1 << 64) if u >= 1 << 63 else u)
    return tuple(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.integers(1, 8), st.integers(1, 70), st.integers(4090, 5000)),
       st.lists(st.one_of(st.sampled_from(["a", "b", "c", "a, b", "b, c", "{a, b}"]),
                          st.lists(NAME_PIECES, max_size=4).map("".join)),
                max_size=8, unique=True),
       st.integers(0, 2 ** 32 - 1), st.integers(1, 300), st.integers(1, 300),
       st.floats(0.0, 0.3))
# Small classes of three names, two of them in the third's reading: merges for sure.
@example(3, ["a", "b", "{a, b}"], 0, 300, 300, 0.0)
def test_nominal_set_labels_match_the_documented_format(n_cats, special, seed, n_rows,
                                                        n_classes, p_missing):
    from dmondrian.kinds import NOMINAL
    from dmondrian.release.publish import class_values

    rng = np.random.default_rng(seed)
    names = list(dict.fromkeys([*special, *(f"n{i}" for i in range(n_cats))]))[:n_cats]
    names = [names[i] for i in rng.permutation(len(names))]
    # Few codes per column or codes from the whole range (sets over many words).
    high = n_cats if rng.random() < 0.5 else min(n_cats, 12)
    codes = np.where(rng.random(n_rows) < p_missing, -1, rng.integers(0, high, n_rows))
    qi = NOMINAL.encode(pd.Series(pd.Categorical.from_codes(codes, categories=names), name="w"))
    class_of_row = rng.integers(0, min(n_classes, n_rows), n_rows)
    order = np.argsort(class_of_row, kind="stable")
    sorted_keys = qi.keys[order].reshape(1, -1).astype(np.int64)
    class_start = np.r_[True, class_of_row[order][1:] != class_of_row[order][:-1]]
    stats = K.class_statistics(sorted_keys, class_start, np.array([qi.kernel_kind]),
                               np.array([qi.card]))
    labels, inverse = class_values(qi, 0, "range", stats, sorted_keys[0])

    # The documented label: the one name, or the names in code order in braces.
    class_of_pos = stats[0]
    sets = [sorted(set(sorted_keys[0][class_of_pos == c].tolist()))
            for c in range(len(stats[1]))]
    cats = [str(c) for c in qi.categories]
    expected = [cats[s[0]] if len(s) == 1 else "{" + ", ".join(cats[c] for c in s) + "}"
                for s in sets]
    assert [labels[i] for i in inverse] == expected
    assert labels.is_unique
    # Categories in the release's order: sets by their bitmask words as int64 up
    # to 4,096 codes, by first class past it; sets that read alike share one.
    if qi.card <= 4096:
        words = (qi.card + 63) // 64
        by = sorted(range(len(sets)), key=lambda c: signed_words(set(sets[c]), words))
    else:
        by = range(len(sets))
    assert list(labels) == list(dict.fromkeys(expected[c] for c in by))


def test_set_label_writer_reads_names_from_the_table():
    names = ["", "a, b", "日本", "😀"]
    encoded = [n.encode() for n in names]
    t_off = np.cumsum([0, *map(len, encoded)])
    t_buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    buf, off = _set_labels_kernel.set_labels(np.array([0, 1, 3, 7]),
                                             np.array([2, 0, 3, 0, 1, 2, 3]), t_buf, t_off)
    assert strings(buf, off) == ["日本", "{, 😀}", "{, a, b, 日本, 😀}"]
    with pytest.raises(ValueError):
        _set_labels_kernel.set_labels(np.array([0, 0]), np.zeros(0, np.int64), t_buf, t_off)
    with pytest.raises(IndexError):
        _set_labels_kernel.set_labels(np.array([0, 1]), np.array([4]), t_buf, t_off)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.lists(st.lists(st.integers(0, 191), max_size=6), min_size=1,
                                   max_size=40))
def test_distinct_masks_and_members_match_a_lexsort(words, sets):
    masks = np.zeros((len(sets), words), dtype=np.uint64)
    for r, s in enumerate(sets):
        for c in s:
            if c < 64 * words:
                masks[r, c // 64] |= np.uint64(1) << np.uint64(c % 64)
    first, inverse = _set_labels_kernel.distinct_masks(masks)
    signed = masks.view(np.int64)
    order = np.lexsort(signed.T[::-1])
    keys = [tuple(row) for row in signed[order].tolist()]
    starts = [i for i in range(len(keys)) if i == 0 or keys[i] != keys[i - 1]]
    assert first.tolist() == order[starts].tolist()
    assert (masks[first][inverse] == masks).all()
    off, codes = _set_labels_kernel.mask_members(masks, first)
    for i, r in enumerate(first.tolist()):
        expected = sorted({c for c in sets[r] if c < 64 * words})
        assert codes[off[i]: off[i + 1]].tolist() == expected


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_expand_label_columns_matches_one_column_at_a_time(data):
    # Columns of few and of many labels (int8 and int16 codes) are gathered
    # together by code type; each must equal its own expansion.
    from dmondrian.release.publish import expand_label_columns

    n_classes = data.draw(st.integers(1, 40))
    n_rows = data.draw(st.integers(0, 300))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    columns = []
    for n_labels in data.draw(st.lists(st.sampled_from([1, 3, 200, 300]), min_size=1,
                                       max_size=5)):
        labels = pd.Index([f"l{i}" for i in range(n_labels)])
        columns.append((labels, rng.integers(0, n_labels, n_classes)))
    class_of_row = rng.integers(0, n_classes, n_rows)
    got = expand_label_columns(columns, class_of_row)
    for (labels, inverse), column in zip(columns, got, strict=True):
        want = expand_labels(labels, inverse, class_of_row)
        assert column.codes.dtype == want.codes.dtype
        assert column.equals(want) and list(column.categories) == list(want.categories)
