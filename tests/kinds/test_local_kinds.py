"""Each quasi-identifier kind is cut and published as documented."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from checks import assert_valid_release
from hypothesis import given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import Hierarchy, parse_range, parse_set


def test_umbra_k_example_verbatim():
    df = pd.DataFrame({"age": [23, 23, 24, 25, 50, 51, 52, 54],
                       "zip": [11000, 11000, 11001, 11002, 12000, 12000, 12001, 12002],
                       "salary": [10, 20, 30, 40, 50, 60, 70, 80]})
    out = dmondrian.MondrianAnonymizer(k=2, quasi_id=["age", "zip"]).fit_transform(df)
    groups = out.groupby(["age", "zip"], observed=True).apply(
        lambda g: sorted(df.loc[g.index, "age"]), include_groups=False)
    assert sorted(groups.tolist()) == [[23, 23], [24, 25], [50, 51], [52, 54]]
    assert out["salary"].equals(df["salary"])


def test_published_range_is_the_class_own_tight_range():
    df = pd.DataFrame({"x": [1.25, -3.5, 2.0, 7.0, 7.5, 100.0]})
    out = dmondrian.anonymize(df, ["x"], 3, class_column="c")
    for _, g in df.join(out.add_suffix("_pub")).groupby("c_pub"):
        iv = parse_range(g["x_pub"].iloc[0])
        assert iv.lo == g["x"].min() and iv.hi == g["x"].max()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=2,
                max_size=30))
def test_float_ranges_parse_back_exactly(values):
    df = pd.DataFrame({"x": values})
    out = dmondrian.anonymize(df, ["x"], 1, class_column="c")
    for label, orig in zip(out["x"].astype(str), df["x"]):
        iv = parse_range(label)
        assert iv.lo <= orig <= iv.hi
    # k=1 with distinct values: every class is a single value, published exactly
    distinct = df["x"].nunique() == len(df)
    if distinct:
        assert all(parse_range(lbl).lo == v for lbl, v in zip(out["x"].astype(str), df["x"]))


def test_negative_and_float_ranges_are_unambiguous():
    df = pd.DataFrame({"x": [-10.5, -10.25, -1e-7, 3e20, -2.0, -3.0]})
    out = dmondrian.anonymize(df, ["x"], 2, class_column="c")
    for label, orig in zip(out["x"].astype(str), df["x"]):
        assert parse_range(label).contains(orig)


def test_missing_numeric_values_are_a_value_of_their_own():
    df = pd.DataFrame({"x": [1.0, 2.0, np.nan, np.nan, 3.0, 4.0, np.nan]})
    out = dmondrian.anonymize(df, ["x"], 3, class_column="c")
    assert_valid_release(df, out, ["x"], 3, class_column="c")
    # The three missing rows form their own class, published as a null
    # (not the text "<NA>"), and the column keeps the other classes' labels.
    assert out.loc[df["x"].isna(), "x"].isna().all()
    assert out.loc[df["x"].notna(), "x"].notna().all()
    assert "<NA>" not in set(out["x"].cat.categories)


def test_mixed_missing_class_says_so():
    df = pd.DataFrame({"x": [1.0, np.nan, 2.0]})
    out = dmondrian.anonymize(df, ["x"], 3)
    assert out["x"].astype(str).unique().tolist() == ["[1.0, 2.0] or <NA>"]
    assert parse_range("[1.0, 2.0] or <NA>").contains(np.nan)


def test_nullable_integers_keep_exact_values():
    big = 2**60 + 1
    df = pd.DataFrame({"x": pd.array([big, big + 2, None, 5, 6, None], dtype="Int64")})
    out = dmondrian.anonymize(df, ["x"], 2)
    labels = set(out["x"].astype(str))
    assert labels == {f"[5, {big}]", f"{big + 2} or <NA>"}
    assert parse_range(f"{big + 2} or <NA>").hi == big + 2  # no float rounding


def test_datetimes_publish_iso_ranges():
    dates = pd.to_datetime(["2020-01-01", "2020-01-05", "2020-03-01", "2020-03-02 10:30"],
                           format="ISO8601")
    df = pd.DataFrame({"d": dates})
    out = dmondrian.anonymize(df, ["d"], 2)
    assert out["d"].astype(str).tolist() == ["[2020-01-01, 2020-01-05]"] * 2 + [
        "[2020-03-01, 2020-03-02T10:30]"] * 2


def test_timezone_aware_datetimes():
    dates = pd.date_range("2021-06-01", periods=6, freq="7h", tz="Europe/Paris")
    df = pd.DataFrame({"d": dates})
    out = dmondrian.anonymize(df, ["d"], 3, class_column="c")
    for label, orig in zip(out["d"].astype(str), df["d"]):
        iv = parse_range(label, kind="datetime")
        assert iv.lo <= orig <= iv.hi
    mid = dmondrian.anonymize(df, ["d"], 3, generalization="midpoint")
    assert str(mid["d"].dt.tz) == "Europe/Paris"


def test_ordinal_is_cut_in_category_order_and_published_as_labels():
    order = ["low", "mid", "high", "top"]
    edu = pd.Categorical(["top", "low", "high", "mid", "low", "top"], categories=order,
                         ordered=True)
    df = pd.DataFrame({"e": edu})
    out = dmondrian.anonymize(df, ["e"], 2, class_column="c")
    labels = set(out["e"].astype(str))
    assert labels <= {"low", "[low, mid]", "[high, top]", "top", "[mid, high]", "[mid, top]"}
    assert_valid_release(df, out, ["e"], 2, class_column="c")


def test_nominal_publishes_the_set_of_values_present():
    df = pd.DataFrame({"w": ["Private"] * 4 + ["Self-emp-inc", "Federal-gov", "Local-gov",
                                                "Local-gov"]})
    out = dmondrian.anonymize(df, ["w"], 4, class_column="c")
    labels = set(out["w"].astype(str))
    assert "Private" in labels  # the frequent value is cut away on its own
    assert "{Federal-gov, Local-gov, Self-emp-inc}" in labels
    assert parse_set("{Federal-gov, Local-gov, Self-emp-inc}") == {
        "Federal-gov", "Local-gov", "Self-emp-inc"}


def test_nominal_missing_is_a_member_of_the_set():
    df = pd.DataFrame({"w": ["a", None, "b", None]})
    out = dmondrian.anonymize(df, ["w"], 4)
    assert out["w"].astype(str).iloc[0] == "{a, b, <NA>}"


TREE = ["Private;*", "Self-emp-not-inc;Self-employ;*", "Self-emp-inc;Self-employ;*",
        "Federal-gov;gov;*", "Local-gov;gov;*", "State-gov;gov;*"]


def test_hierarchy_is_cut_along_the_tree_and_publishes_the_ancestor():
    values = (["Federal-gov"] * 3 + ["Local-gov"] * 3 + ["Self-emp-inc"] * 3
              + ["Self-emp-not-inc"] * 3)
    df = pd.DataFrame({"w": values})
    out = dmondrian.anonymize(df, ["w"], 6, hierarchies={"w": TREE}, class_column="c")
    assert out["w"].astype(str).tolist() == ["gov"] * 6 + ["Self-employ"] * 6
    leaf = dmondrian.anonymize(df, ["w"], 3, hierarchies={"w": Hierarchy.from_lines(TREE)})
    assert leaf["w"].astype(str).tolist() == values


def test_hierarchy_from_file_and_missing_leaf(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("\n".join(TREE) + "\n")
    df = pd.DataFrame({"w": ["Private", None, "Local-gov", "State-gov"]})
    out = dmondrian.anonymize(df, ["w"], 2, hierarchies={"w": path})
    assert set(out["w"].astype(str)) <= {"*", "gov"}
    assert_valid_release(df, out, ["w"], 2, hierarchies={"w": path})


def test_qi_kinds_override_detection():
    df = pd.DataFrame({"zip": [10001, 10001, 90210, 90210, 10002, 10002]})
    out = dmondrian.anonymize(df, ["zip"], 2, qi_kinds={"zip": "nominal"})
    assert set(out["zip"].astype(str)) == {"10001", "90210", "10002"}


def test_strict_classes_never_overlap_relaxed_classes_are_balanced():
    df = pd.DataFrame({"x": [1] * 5 + [2] * 5 + [3] * 2})
    strict = dmondrian.anonymize(df, ["x"], 4, class_column="c")
    bounds = [parse_range(lbl) for lbl in strict["x"].astype(str).unique()]
    for a in bounds:
        for b in bounds:
            assert a == b or a.hi < b.lo or b.hi < a.lo
    relaxed = dmondrian.anonymize(df, ["x"], 6, mode="relaxed", class_column="c")
    assert relaxed.groupby("c").size().tolist() == [6, 6]


def test_max_depth_limits_the_number_of_cuts():
    df = pd.DataFrame({"x": np.arange(64)})
    assert dmondrian.anonymize(df, ["x"], 1, max_depth=0)["x"].nunique() == 1
    assert dmondrian.anonymize(df, ["x"], 1, max_depth=3)["x"].nunique() == 8
    assert dmondrian.anonymize(df, ["x"], 1)["x"].nunique() == 64


def test_widest_normalized_span_is_cut_first():
    # At the root both QIs span their whole domain and x (listed first) is cut.
    # In each half x then spans 1/3 of its global domain and y all of it, so y
    # is cut next: cutting x again would publish y as [0, 30].
    df = pd.DataFrame({"x": [0, 0, 1, 1, 2, 2, 3, 3], "y": [0, 30] * 4})
    out = dmondrian.anonymize(df, ["x", "y"], 2)
    assert set(out["x"].astype(str)) == {"[0, 1]", "[2, 3]"}
    assert set(out["y"].astype(str)) == {"0", "30"}


@pytest.mark.parametrize("how", ["midpoint", "mean"])
def test_numeric_summaries(how):
    df = pd.DataFrame({"x": [1, 2, 3, 10, 20, 60], "s": list("abcdef")})
    out = dmondrian.anonymize(df, ["x"], 3, generalization=how)
    expected = [2.0] * 3 + ([35.0] * 3 if how == "midpoint" else [30.0] * 3)
    assert out["x"].tolist() == expected
    assert out["x"].dtype == np.float64


def test_columns_index_and_order_are_kept():
    df = pd.DataFrame({"b": [1, 2, 3, 4], "a": [4, 3, 2, 1], "z": ["p", "q", "r", "s"]},
                      index=pd.Index(["w", "x", "y", "z"], name="id"))
    out = dmondrian.anonymize(df, ["a"], 2, class_column="cls")
    assert list(out.columns) == ["b", "a", "z", "cls"]
    assert out.index.equals(df.index)
    assert out["cls"].dtype == np.int64


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 200), st.integers(0, 2**32 - 1), st.integers(1, 8))
def test_nominal_distinct_counts_agree_for_few_and_many_codes(n_codes, seed, k):
    # Up to 64 codes a node's distinct count comes from a bitmask measured while
    # its rows move; above, from a pass of its own. Both must give the same cuts
    # as the same column with its codes spread over a larger alphabet.
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_codes, size=300)
    few = pd.DataFrame({"x": [f"v{c:03d}" for c in codes],
                        "y": rng.integers(0, 50, size=300)})
    padded = few.copy()
    # The same values, declared among 100 extra unused categories: more codes
    # than a bitmask holds, same data, so the release must be identical.
    unused = [f"w{i:03d}" for i in range(100)]
    padded["x"] = pd.Categorical(few["x"], categories=sorted(set(few["x"])) + unused)
    few["x"] = pd.Categorical(few["x"], categories=sorted(set(few["x"])))
    a = dmondrian.anonymize(few, ["x", "y"], k, class_column="c")
    b = dmondrian.anonymize(padded, ["x", "y"], k, class_column="c")
    assert a["c"].tolist() == b["c"].tolist()
    assert a["x"].astype(str).tolist() == b["x"].astype(str).tolist()
    assert_valid_release(few, a.drop(columns="c"), ["x", "y"], k)
