"""Bad input gets a typed error naming the column or parameter."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dmondrian
from dmondrian import errors


@pytest.fixture
def df():
    return pd.DataFrame({"age": [30, 31, 40, 41], "city": ["a", "b", "a", "b"],
                         "pay": [1.0, 2.0, 3.0, 4.0]})


@pytest.mark.parametrize("qis, k, exc, words", [
    (["age", "zipcode"], 2, errors.MissingColumnError, ["zipcode", "not a column"]),
    (["age", "age"], 2, errors.DuplicateColumnError, ["age", "twice"]),
    ([], 2, errors.ParameterError, ["quasi_identifiers", "empty"]),
    (None, 2, errors.ParameterError, ["quasi_identifiers"]),
    (["age"], 0, errors.ParameterError, ["k", ">= 1"]),
    (["age"], -3, errors.ParameterError, ["k"]),
    (["age"], 2.5, errors.ParameterError, ["k", "integer"]),
    (["age"], True, errors.ParameterError, ["k", "integer"]),
    (["age"], "2", errors.ParameterError, ["k"]),
    (["age"], 5, errors.InfeasibleError, ["k=5", "4 rows"]),
])
def test_bad_parameters(df, qis, k, exc, words):
    with pytest.raises(exc) as info:
        dmondrian.anonymize(df, qis, k)
    assert isinstance(info.value, errors.DMondrianError)
    for word in words:
        assert word in str(info.value)


def test_missing_column_error_carries_the_column(df):
    with pytest.raises(errors.MissingColumnError) as info:
        dmondrian.anonymize(df, ["nope"], 2)
    assert info.value.column == "nope"


@pytest.mark.parametrize("option, value, words", [
    ("mode", "loose", ["mode", "'strict'", "'relaxed'"]),
    ("generalization", "median", ["generalization"]),
    ("max_depth", -1, ["max_depth"]),
    ("max_depth", 1.5, ["max_depth"]),
    ("class_column", "pay", ["class_column", "already exists"]),
    ("hierarchies", {"pay": {}}, ["hierarchies", "pay"]),
    ("hierarchies", ["x"], ["hierarchies", "mapping"]),
    ("qi_kinds", {"age": "fuzzy"}, ["fuzzy", "age"]),
])
def test_bad_options(df, option, value, words):
    with pytest.raises(errors.DMondrianError) as info:
        dmondrian.anonymize(df, ["age", "city"], 2, **{option: value})
    for word in words:
        assert word in str(info.value)


def test_empty_table():
    with pytest.raises(errors.InfeasibleError, match="empty"):
        dmondrian.anonymize(pd.DataFrame({"a": pd.Series([], dtype=float)}), ["a"], 1)


def test_not_a_dataframe():
    with pytest.raises(errors.ParameterError, match="DataFrame"):
        dmondrian.anonymize(np.zeros((3, 2)), [0], 1)


@pytest.mark.parametrize("values, exc, words", [
    ([1.0, np.inf, 2.0, 3.0], errors.InvalidValueError, ["x", "infinite"]),
    ([1.0, -np.inf, 2.0, 3.0], errors.InvalidValueError, ["x", "infinite"]),
    ([1 + 2j, 2j, 3j, 4j], errors.UnsupportedDtypeError, ["x", "complex"]),
    (pd.arrays.IntervalArray.from_breaks([0, 1, 2, 3, 4]), errors.UnsupportedDtypeError,
     ["x", "interval"]),
    (pd.Series([np.iinfo(np.int64).max, 1, 2, None], dtype="Int64"), errors.InvalidValueError,
     ["x", "reserved"]),
    (np.array([2**64 - 1, 1, 2, 3], dtype=np.uint64), errors.InvalidValueError, ["x", "2**63"]),
])
def test_bad_values(values, exc, words):
    df = pd.DataFrame({"x": values, "y": [1, 2, 3, 4]})
    with pytest.raises(exc) as info:
        dmondrian.anonymize(df, ["x", "y"], 2)
    assert info.value.column == "x"
    for word in words:
        assert word in str(info.value)


def test_hierarchy_must_cover_every_value():
    df = pd.DataFrame({"job": ["Sales", "Tech", "Chef", "Sales"]})
    tree = {"Sales": ["White", "*"], "Tech": ["Skilled", "*"]}
    with pytest.raises(errors.HierarchyError) as info:
        dmondrian.anonymize(df, ["job"], 2, hierarchies={"job": tree})
    assert info.value.column == "job" and "'Chef'" in str(info.value)


@pytest.mark.parametrize("lines, words", [
    (["a;x;*", "b;y;root"], ["several roots"]),
    (["a;x;*", "x2;a;y;*", "a;z;*"], ["twice"]),
    (["a;;*"], ["empty field"]),
    ([], ["empty"]),
])
def test_malformed_hierarchies(lines, words):
    with pytest.raises(errors.HierarchyError) as info:
        dmondrian.Hierarchy.from_lines(lines, name="job")
    for word in words:
        assert word in str(info.value)


def test_hierarchy_file_that_does_not_exist(tmp_path):
    df = pd.DataFrame({"job": ["a", "b"]})
    with pytest.raises(errors.HierarchyError, match="cannot read hierarchy file"):
        dmondrian.anonymize(df, ["job"], 1, hierarchies={"job": tmp_path / "none.txt"})


def test_parse_errors():
    with pytest.raises(errors.ParseError):
        dmondrian.parse_range("[1, 2, 3]")
    with pytest.raises(errors.ParseError):
        dmondrian.parse_range("[a, b]")
    with pytest.raises(errors.ParseError):
        dmondrian.parse_range(3)


@pytest.mark.parametrize("values, kind", [([{"x": 1}, {"y": 2}, {"x": 1}, {"y": 2}], "dict"),
                                          ([[1], [2], [1], [2]], "list")])
def test_a_column_of_dicts_or_lists_is_refused_by_name(values, kind):
    # JSON read from Parquet or a database: pandas alone says "unhashable type".
    df = pd.DataFrame({"meta": values, "age": [30, 31, 32, 33]})
    with pytest.raises(errors.UnsupportedDtypeError, match=f"column 'meta' holds {kind}") as info:
        dmondrian.anonymize(df, ["meta", "age"], 2)
    assert info.value.column == "meta"
    with pytest.raises(errors.UnsupportedDtypeError, match="'meta'"):
        dmondrian.anonymize(df, ["meta", "age"], 2, hierarchies={"meta": {"a": ["*"]}})
