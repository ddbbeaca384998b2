"""The kind objects (dmondrian.kinds): each kind encodes, publishes, reads back and costs
consistently, every scale follows one capped rule, and what the Dask engine will
ask of them agrees with the compiled kernel."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import metrics
from dmondrian._kernel.constants import FLOAT_MAX, MISSING_KEY
from dmondrian._kernel.split import column_stats_py, node_span_py, workspace
from dmondrian.encoding.qi import encode_qi
from dmondrian.errors import InvalidValueError, ParseError, UnsupportedDtypeError
from dmondrian.kinds import (
    DATETIME,
    HIERARCHY,
    KINDS,
    NOMINAL,
    NUMERIC,
    ORDINAL,
    Domain,
    QIKind,
    capped_span,
    detect_kind,
    kind_spec,
    resolve_kind,
)
from dmondrian.kinds.hierarchy import Hierarchy
from dmondrian.local import kernel_rules
from dmondrian.metrics.certainty_penalty import label_cost

EDU = ["HS", "BSc", "MSc", "PhD"]
JOBS = Hierarchy.from_lines(["Private;*", "Federal-gov;gov;*", "Local-gov;gov;*",
                             "Self-emp;self;*", "Self-inc;self;*"])
STAMP0 = pd.Timestamp("2020-01-01")


# -- one column of every kind --------------------------------------------------------------------

def _column(kind: str, draw) -> pd.Series:
    n = draw(st.integers(1, 40))
    missing = st.booleans() if draw(st.booleans()) else st.just(False)

    def maybe(values):
        holes = [draw(missing) for _ in values]
        return [None if h else v for v, h in zip(values, holes)]

    if kind == "int":
        big = draw(st.sampled_from([10, 10**6, 2**62]))
        values = draw(st.lists(st.integers(-big, big), min_size=n, max_size=n))
        return pd.Series(maybe(values), dtype="Int64")
    if kind == "float":
        values = draw(st.lists(st.floats(-1e308, 1e308, allow_nan=False), min_size=n,
                               max_size=n))
        return pd.Series(maybe(values), dtype="float64")
    if kind == "datetime":
        hours = draw(st.lists(st.integers(0, 24 * 3650), min_size=n, max_size=n))
        stamps = [STAMP0 + pd.Timedelta(hours=h) for h in hours]
        return pd.Series(pd.to_datetime(maybe(stamps)))
    if kind == "ordinal":
        values = draw(st.lists(st.sampled_from(EDU), min_size=n, max_size=n))
        return pd.Series(pd.Categorical(maybe(values), categories=EDU, ordered=True))
    values = draw(st.lists(st.sampled_from(JOBS.leaves), min_size=n, max_size=n))
    return pd.Series(maybe(values), dtype=object)


@st.composite
def columns(draw):
    kind = draw(st.sampled_from(["int", "float", "datetime", "ordinal", "nominal",
                                 "hierarchy"]))
    return kind, _column(kind, draw).rename("q")


def _covers(kind, label, value) -> bool:
    """Whether a published value, read back by its kind, stands for an original value."""
    missing = value is None or (not isinstance(value, str) and pd.isna(value))
    if kind is NOMINAL:
        return ("<NA>" if missing else str(value)) in kind.parse_label(label)
    if kind is HIERARCHY:
        node = JOBS.with_missing_leaf().node_index(kind.parse_label(label))
        leaf = JOBS.with_missing_leaf().leaf_codes(["<NA>" if missing else value])[0]
        return JOBS.with_missing_leaf().node_lo[node] <= leaf <= \
            JOBS.with_missing_leaf().node_hi[node]
    interval = kind.parse_label(label)
    if kind is ORDINAL and not missing:
        lo, hi = (EDU.index(b) for b in (interval.lo, interval.hi)) if interval.lo else (0, -1)
        return interval.lo is not None and lo <= EDU.index(value) <= hi
    return interval.contains(value)


@settings(max_examples=60, deadline=None)
@given(columns(), st.integers(1, 5))
def test_every_kind_encodes_publishes_and_reads_back_what_it_published(case, k):
    name, col = case
    hierarchies = {"q": JOBS} if name == "hierarchy" else None
    df = col.to_frame()
    qi = encode_qi(col, hierarchy=JOBS if name == "hierarchy" else None)
    kind = qi.spec
    assert kind is KINDS[qi.kind] and kind.kernel_kind_of(col.dtype) == qi.kernel_kind
    if len(df) < k:
        return
    released = dmondrian.anonymize(df, ["q"], k, hierarchies=hierarchies)
    for label, value in zip(released["q"], col):
        assert _covers(kind, label, value), (label, value)
    if kind is NUMERIC:  # a range's bounds are exactly its class's smallest and largest value
        for label, group in col.groupby(released["q"].astype(str), dropna=False):
            interval = kind.parse_label(label)
            present = group.dropna()
            if len(present):
                assert (interval.lo, interval.hi) == (present.min(), present.max())
    # The costs of what was published are those the domain of the original gives.
    costs = metrics.ncp(released, ["q"], df, hierarchies=hierarchies).per_attribute["q"]
    assert 0.0 <= costs <= 1.0


def test_the_kinds_and_their_names():
    assert QIKind.ALL == tuple(KINDS) == ("numeric", "datetime", "ordinal", "nominal",
                                          "hierarchy")
    for name, kind in KINDS.items():
        assert kind.name == name and kind_spec(name) is kind and kind_spec(kind) is kind
        assert pickle.loads(pickle.dumps(kind)) is kind
    assert encode_qi(pd.Series([1.0], name="x")).spec is NUMERIC
    assert Domain("ordinal", 1.0).spec is ORDINAL


def test_detection_order():
    assert detect_kind(pd.Series(pd.Categorical(["a"], ordered=True))) is ORDINAL
    assert detect_kind(pd.Series(pd.Categorical([1, 2]))) is NOMINAL
    assert detect_kind(pd.Series([True, False])) is NOMINAL
    assert detect_kind(pd.Series([1, None], dtype="Int64")) is NUMERIC
    assert detect_kind(pd.Series(pd.to_datetime(["2020-01-01"]).tz_localize("UTC"))) is DATETIME
    with pytest.raises(UnsupportedDtypeError):
        detect_kind(pd.Series([1j]))


def test_one_resolution_for_the_engine_and_the_metrics():
    df = pd.DataFrame({"x": [1, 2, 3]})
    for bad, match in (("colour", "unknown kind 'colour'"), ("hierarchy", "no hierarchy")):
        with pytest.raises(UnsupportedDtypeError, match=match):
            resolve_kind(df["x"], bad)
        with pytest.raises(UnsupportedDtypeError, match=match):
            encode_qi(df["x"], kind=bad)
        with pytest.raises(UnsupportedDtypeError, match=match):
            metrics.compute_domains(df, ["x"], qi_kinds={"x": bad})
    assert resolve_kind(df["x"], "nominal", has_hierarchy=True) is HIERARCHY
    assert resolve_kind(df["x"], NOMINAL) is NOMINAL


# -- the one scale rule ----------------------------------------------------------------------------

def test_every_scale_of_huge_floats_is_capped_at_the_largest_float():
    col = pd.Series([-1e308, 0.0, 1e308], name="x")
    assert capped_span(-1e308, 1e308) == FLOAT_MAX
    assert capped_span(np.array([-1e308, 0.0]), np.array([1e308, 1.0])).tolist() == [FLOAT_MAX,
                                                                                       1.0]
    assert encode_qi(col).scale == FLOAT_MAX
    assert metrics.compute_domains(col.to_frame(), ["x"])["x"].scale == FLOAT_MAX
    qi = encode_qi(col)
    lo, hi = int(qi.keys.min()), int(qi.keys.max())
    assert NUMERIC.key_scale(lo, hi, qi.kernel_kind) == FLOAT_MAX
    assert NUMERIC.key_width(lo, hi, qi.kernel_kind) == FLOAT_MAX
    domain = Domain("numeric", FLOAT_MAX, -1e308, 1e308)
    assert NUMERIC.label_cost("[-1e+308, 1e+308]", domain) == 1.0
    # Class means of huge values: their NCP is measured on the same capped spans.
    df = pd.DataFrame({"x": [-1e308, 1e308, -1e308, 1e308]})
    rel = dmondrian.anonymize(df, ["x"], 4, generalization="mean")
    assert metrics.ncp(rel, ["x"], df).overall == 1.0


def test_scales_of_every_kind():
    assert encode_qi(pd.Series([3, 9, None], dtype="Int64")).scale == 6.0
    assert encode_qi(pd.Series([], dtype="float64")).scale == 0.0
    assert encode_qi(pd.Series(pd.Categorical(["MSc", "HS"], categories=EDU,
                                              ordered=True))).scale == 2.0
    assert encode_qi(pd.Series(["a", "b", None])).scale == 2.0  # <NA> is a value
    assert encode_qi(pd.Series(["Private"]), hierarchy=JOBS).scale == 4.0
    assert NOMINAL.count_scale(0) == NOMINAL.count_scale(1) == 0.0
    assert DATETIME.key_scale(MISSING_KEY, MISSING_KEY, 0) == 0.0


# -- NCP costs -------------------------------------------------------------------------------------

def test_ncp_cost_of_every_kind():
    num = Domain("numeric", 40.0, 20, 60)
    assert [label_cost(v, num) for v in ("[20, 30]", "25", "<NA>", "[20, 30] or <NA>", None)] \
        == [0.25, 0.0, 0.0, 1.0, 0.0]
    four_days = pd.Timedelta(days=4)
    dt = Domain("datetime", float(four_days.value), STAMP0, STAMP0 + four_days)
    assert label_cost("[2020-01-01, 2020-01-02]", dt) == 0.25
    edu = Domain("ordinal", 3.0, 0, 3, tuple(EDU))
    assert label_cost("[HS, MSc]", edu) == pytest.approx(2 / 3)
    with pytest.raises(InvalidValueError, match="not a category"):
        label_cost("[HS, Dr]", edu, "edu")
    sex = Domain("nominal", 2.0)
    assert [label_cost(v, sex) for v in ("F", "{F, M}", "{F, M, <NA>}")] == [0.0, 0.5, 1.0]
    jobs = Domain("hierarchy", 4.0, hierarchy=JOBS)
    assert [label_cost(v, jobs) for v in ("Private", "gov", "*")] == [0.0, 0.25, 1.0]
    with pytest.raises(InvalidValueError, match="not a published hierarchy value"):
        label_cost("army", jobs, "job")
    with pytest.raises(InvalidValueError, match="not a published numeric value"):
        label_cost("[a, b]", num, "age")
    assert label_cost("[20, 30]", Domain("numeric", 0.0)) == 0.0


def test_parse_range_reads_bounds_by_kind():
    assert dmondrian.parse_range("[1, 2.5]").lo == 1
    assert dmondrian.parse_range("[HS, MSc]", ORDINAL).hi == "MSc"
    with pytest.raises(ParseError, match="as datetime"):
        dmondrian.parse_range("[x, y]", "datetime")
    with pytest.raises(dmondrian.errors.ParameterError):
        dmondrian.parse_range("[1, 2]", "colour")


# -- what the Dask engine will ask of the kinds ----------------------------------------------------

@st.composite
def tables(draw):
    n = draw(st.integers(2, 50))
    ints = draw(st.lists(st.integers(-(2**62), 2**62) | st.none(), min_size=n, max_size=n))
    floats = draw(st.lists(st.floats(-1e308, 1e308) | st.none(), min_size=n, max_size=n))
    edu = draw(st.lists(st.sampled_from([*EDU, None]), min_size=n, max_size=n))
    nom = draw(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=n, max_size=n))
    job = draw(st.lists(st.sampled_from([*JOBS.leaves, None]), min_size=n, max_size=n))
    return pd.DataFrame({
        "int": pd.Series(ints, dtype="Int64"), "flt": pd.Series(floats, dtype="float64"),
        "edu": pd.Categorical(edu, categories=EDU, ordered=True), "nom": nom,
        "job": pd.Series(job, dtype=object)})


@settings(max_examples=60, deadline=None)
@given(tables())
def test_region_span_is_the_kernels_node_span(df):
    encoded = [encode_qi(df[q], hierarchy=JOBS if q == "job" else None) for q in df.columns]
    keys = np.ascontiguousarray(np.stack([e.keys for e in encoded]))
    n = len(df)
    rules = kernel_rules(encoded, 1)
    ws = workspace(rules.cards, (rules.ip, rules.fp, rules.q))
    for j, e in enumerate(encoded):
        lo, hi, miss = column_stats_py(keys, j, 0, n, e.kernel_kind, e.card)
        expected = node_span_py(keys, j, 0, n, (lo, hi, miss), rules, ws)
        row = keys[j]
        hist = np.bincount(row, minlength=e.card) if e.spec is NOMINAL else None
        present = row[row != MISSING_KEY]
        lo_k = int(present.min()) if present.size else MISSING_KEY
        hi_k = int(present.max()) if present.size else MISSING_KEY
        span = e.spec.region_span(lo_k, hi_k, int((row == MISSING_KEY).sum()), hist, e.scale,
                                  e.kernel_kind, e.hierarchy)
        assert span == expected, (j, span, expected)  # edges too (test_rules_once)


def test_kernel_kinds_and_plain_keys_agree_with_encoding():
    cols = {"i8": pd.Series([3, -1], dtype="int8"), "i": pd.Series([3, -1]),
            "u": pd.Series([3, 1], dtype="uint32"), "n": pd.Series([3, None], dtype="Int64"),
            "f": pd.Series([0.5, 1.0]), "b": pd.Series([True, False]),
            "t": pd.Series(pd.to_datetime(["2020-01-01", None]))}
    for name, col in cols.items():
        kind = NUMERIC if name != "t" else DATETIME
        qi = encode_qi(col, kind=kind.name)
        assert kind.kernel_kind_of(col.dtype) == qi.kernel_kind, name
        plain = kind.plain_int_values(col)
        if plain is not None:
            values, nat_missing = plain
            expected = np.where(values == np.iinfo(np.int64).min, MISSING_KEY, values) \
                if nat_missing else values
            assert (expected == qi.keys).all(), name
    assert NUMERIC.plain_int_values(cols["f"]) is None
    assert NUMERIC.plain_int_values(cols["n"]) is None


def test_slots_and_codes():
    keys = np.array([0, 2, MISSING_KEY])
    assert ORDINAL.slot_keys(keys, 4).tolist() == [0, 2, 3]
    assert ORDINAL.slot_values(4)[ORDINAL.slot_keys(keys, 4)].tolist() == keys.tolist()
    assert NOMINAL.slot_keys(keys[:2], 4).tolist() == [0, 2]
    assert [k.kernel_card(5) for k in (NUMERIC, ORDINAL, NOMINAL, HIERARCHY)] == [0, 0, 5, 0]
    assert [k.exact_counts for k in (NUMERIC, DATETIME, ORDINAL, NOMINAL, HIERARCHY)] \
        == [False, False, True, True, True]
    # Slot counts over a whole dataset give the scale and bounds encoding gives.
    edu = pd.Series(pd.Categorical(["BSc", "MSc", None], categories=EDU, ordered=True))
    nom = pd.Series(pd.Categorical(["b", None, "b", "d"], categories=list("abcd")))
    job = pd.Series(["Federal-gov", "Local-gov"])
    for kind, col, counts in ((ORDINAL, edu, [0, 1, 1, 0, 1]), (NOMINAL, nom, [0, 2, 0, 1, 1]),
                              (HIERARCHY, job, [0, 1, 1, 0, 0])):
        qi = encode_qi(col, hierarchy=JOBS if kind is HIERARCHY else None)
        assert kind.slot_scale(np.array(counts)) == qi.scale, kind
        present = qi.keys[qi.keys != MISSING_KEY]
        assert kind.slot_bounds(np.array(counts)) == (present.min(), present.max()), kind
    assert ORDINAL.slot_bounds(np.array([0, 0, 0, 0, 3])) == (MISSING_KEY, np.iinfo(np.int64).min)
    assert NOMINAL.categories_from_values("c", ["b", "a"]) == ["a", "b"]
    with pytest.raises(UnsupportedDtypeError, match="different categories"):
        ORDINAL.categories_from_values("edu", ["b", "a"])


def test_ordinal_global_keys_of_plain_values_refuse_a_value_off_the_domain():
    out = np.zeros(3, dtype=np.int64)
    ORDINAL.global_keys_into(pd.Series(["MSc", None, "BSc"]), out, categories=EDU)
    assert out.tolist() == [EDU.index("MSc"), MISSING_KEY, EDU.index("BSc")]
    # A value the domain does not hold is an error, never a missing key.
    with pytest.raises(UnsupportedDtypeError, match="PhD-x"):
        ORDINAL.global_keys_into(pd.Series(["MSc", "PhD-x", "BSc"]), out, categories=EDU)


def test_median_thresholds():
    assert NUMERIC.median_thresholds(7, 0, 9) == (6, 7)
    assert ORDINAL.median_thresholds(MISSING_KEY, 0, 3) == (MISSING_KEY - 1, MISSING_KEY - 1)
    # Leaves: Private 0, Federal-gov 1, Local-gov 2, Self-emp 3, Self-inc 4; "gov" is 1..2.
    assert HIERARCHY.median_thresholds(2, 0, 4, JOBS) == (0, 2)
    assert HIERARCHY.median_thresholds(2, 1, 2, JOBS) == (1, 2)


def test_global_encodings_publish_like_local_ones():
    df = pd.DataFrame({
        "n": [1.5, 2.0], "t": pd.to_datetime(["2020-01-01", "2020-01-02"]).tz_localize("UTC"),
        "o": pd.Categorical(["HS", "PhD"], categories=EDU, ordered=True), "c": ["x", None],
        "h": ["Private", "Self-emp"]})
    for q in df.columns:
        local = encode_qi(df[q], hierarchy=JOBS if q == "h" else None)
        kind = local.spec
        cats = [c for c in local.categories if c != "<NA>"]
        enc = kind.global_encoding(df[q].iloc[:0], local.scale, categories=cats,
                                   slots=local.card, hierarchy=local.hierarchy)
        assert (enc.kind, enc.kernel_kind, enc.scale, enc.card, enc.categories, enc.value_type,
                enc.tz, enc.hierarchy) == (local.kind, local.kernel_kind, local.scale,
                                           local.card, local.categories, local.value_type,
                                           local.tz, local.hierarchy), q
        assert len(enc.keys) == 0


def test_publishing_numbers_or_labels():
    assert [k.publishes_labels("mean") for k in KINDS.values()] == [False, False, True, True,
                                                                    True]
    assert all(k.publishes_labels("range") for k in KINDS.values())
    assert NUMERIC.summary_dtype(np.dtype("int64")) == np.float64
    assert DATETIME.summary_dtype(np.dtype("M8[ns]")) == np.dtype("M8[ns]")
    assert ORDINAL.summary_dtype(np.dtype("int64")) is None


# -- the Dask engine's global keys and slots -----------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(columns())
def test_global_keys_and_slots_agree_with_encoding(case):
    # Against a global domain measured on the column itself, the keys the Dask
    # engine writes are encoding's keys, and its slot counts give encoding's scale.
    name, col = case
    hierarchy = JOBS if name == "hierarchy" else None
    qi = encode_qi(col, hierarchy=hierarchy)
    kind = qi.spec
    present = [c for c in qi.categories if c != "<NA>"] if qi.categories else None
    cats = kind.global_categories("q", pd.Index(col.dropna().unique(), dtype=object),
                                  {tuple(col.cat.categories)} if present and name == "ordinal"
                                  else set(), col.dtype)
    assert cats == present
    tree, counts = hierarchy, None
    if kind.exact_counts:
        values = col.dropna().astype(object).value_counts(sort=False)
        counts, tree = kind.global_slots(values, int(col.isna().sum()), categories=cats,
                                         hierarchy=hierarchy)
        assert kind.slot_scale(counts) == qi.scale
        # The tree encoding used: the missing leaf added exactly when a value is missing.
        assert (tree is None) == (qi.hierarchy is None)
        assert tree is None or len(tree) == len(qi.hierarchy)
    out = np.empty(len(col), dtype=np.int64)
    kind.global_keys_into(col, out, categories=cats, hierarchy=tree)
    assert out.tolist() == qi.keys.tolist()
    if counts is not None:
        assert np.bincount(kind.slot_keys(out, len(counts)), minlength=len(counts)).tolist() \
            == counts.tolist()


def test_global_keys_map_local_codes_into_the_global_domain():
    out = np.empty(4, dtype=np.int64)
    NOMINAL.global_keys_into(pd.Series(["z", None, "a", "z"]), out, categories=["a", "b", "z"])
    assert out.tolist() == [2, 3, 0, 2]  # missing takes the code after the categories
    NOMINAL.global_keys_into(pd.Series(["z", None, "a", "z"], dtype="string[pyarrow]"), out,
                             categories=["a", "b", "z"])
    assert out.tolist() == [2, 3, 0, 2]
    local = pd.Series(pd.Categorical(["MSc", None, "HS", "MSc"], categories=["HS", "MSc"],
                                     ordered=True))
    ORDINAL.global_keys_into(local, out, categories=EDU)
    assert out.tolist() == [2, MISSING_KEY, 0, 2]
    for values in (["y"], pd.Series(["y"], dtype="string[pyarrow]")):
        with pytest.raises(UnsupportedDtypeError, match="did not see"):
            NOMINAL.global_keys_into(pd.Series(values), out[:1], categories=["a"])
    with pytest.raises(InvalidValueError, match="reserved"):
        NUMERIC.global_keys_into(pd.Series([np.iinfo(np.int64).max]), out[:1])
