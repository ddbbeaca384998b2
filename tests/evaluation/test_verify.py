"""The verifier: flags exactly the classes that break k, l or t, and agrees with a plain
group-by count of the published columns."""

from __future__ import annotations

import json
import math

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from checks import class_sizes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import verify
from dmondrian.errors import MissingColumnError, ParameterError

QIS = ["age", "zip"]


def correct_release() -> pd.DataFrame:
    """Four classes of 3 rows, each with 2 or 3 distinct diseases."""
    return pd.DataFrame({
        "age": ["[20, 29]"] * 3 + ["[30, 39]"] * 3 + ["[20, 29]"] * 3 + ["[40, 49]"] * 3,
        "zip": ["1100*"] * 3 + ["1100*"] * 3 + ["1200*"] * 3 + ["1200*"] * 3,
        "disease": ["flu", "cold", "flu", "cold", "acne", "flu", "flu", "acne", "cold",
                    "cold", "flu", "acne"],
    })


def broken_release() -> pd.DataFrame:
    """The correct release with one class cut to 2 rows and one class all "flu"."""
    t = correct_release()
    t = t.drop(index=11)  # class ([40, 49], 1200*) now holds 2 rows
    t.loc[[0, 1, 2], "disease"] = "flu"  # class ([20, 29], 1100*) has one value
    return t


def test_correct_release_passes():
    r = verify(correct_release(), QIS, k=3, sensitive="disease", l=2)
    assert r.ok and bool(r)
    assert r.n_violations == 0 and r.violations.empty
    assert (r.n_records, r.n_classes) == (12, 4)
    assert r.achieved["k"] == 3 and r.achieved["l_distinct"] == 2


def test_broken_release_is_flagged_class_by_class():
    r = verify(broken_release(), QIS, k=3, sensitive="disease", l=2)
    assert not r.ok and not bool(r)
    assert r.n_violations == 2
    failed = r.violations["failed"].to_dict()
    assert failed == {("[40, 49]", "1200*"): "k", ("[20, 29]", "1100*"): "l"}
    assert r.violations.loc[("[40, 49]", "1200*"), "size"] == 2
    assert r.violations.loc[("[20, 29]", "1100*"), "l_distinct"] == 1
    assert r.achieved["k"] == 2 and r.achieved["l_distinct"] == 1
    # k alone sees only the small class; l alone only the uniform one.
    assert verify(broken_release(), QIS, k=3).violations.index.tolist() == [("[40, 49]",
                                                                            "1200*")]
    only_l = verify(broken_release(), QIS, sensitive="disease", l=2)
    assert only_l.violations.index.tolist() == [("[20, 29]", "1100*")]


def test_entropy_l_and_t_closeness():
    t = correct_release()
    # Classes with {flu, cold, flu}: entropy exp(H) = 1.89 < 2; {cold, acne, flu}: 3.
    r = verify(t, QIS, sensitive="disease", l=2, l_kind="entropy")
    two_of_three = math.exp(-(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)))
    assert r.n_violations == 1
    assert r.violations["l_entropy"].iloc[0] == pytest.approx(two_of_three)
    assert verify(t, QIS, sensitive="disease", l=two_of_three * 0.999,
                  l_kind="entropy").ok
    # Table: flu 5/12, cold 4/12, acne 3/12. Class {flu, cold, flu}: EMD =
    # (|2/3 - 5/12| + |1/3 - 4/12| + 3/12) / 2 = 1/4; every other class 1/12.
    r = verify(t, QIS, sensitive="disease", t=0.2)
    assert r.n_violations == 1 and r.violations["t"].iloc[0] == pytest.approx(0.25)
    assert r.achieved["t"] == pytest.approx(0.25)
    assert verify(t, QIS, sensitive="disease", t=0.25).ok


def test_only_published_columns_count():
    """A bookkeeping column splitting a published class must not hide a small class."""
    t = correct_release()
    t["cls"] = np.arange(len(t)) // 2  # 6 "classes" of 2 rows in the engine's view
    assert verify(t, QIS, k=3).ok
    t2 = t.copy()
    t2.loc[0, "age"] = "[20, 21]"  # now a class of one row by its published values
    r = verify(t2, QIS, k=2)
    assert r.violations.index.tolist() == [("[20, 21]", "1100*")]


def test_result_exports():
    r = verify(broken_release(), QIS, k=3, sensitive="disease", l=2, max_listed=1)
    assert r.n_violations == 2 and len(r.violations) == 1
    assert r.violations["size"].iloc[0] == 2  # the smallest class is listed first
    d = json.loads(r.to_json())
    assert d["ok"] is False and d["n_violations"] == 2
    assert d["violations"] == [{"age": "[40, 49]", "zip": "1200*", "size": 2, "l_distinct": 2,
                                "l_entropy": pytest.approx(2.0), "t": pytest.approx(5 / 22),
                                "failed": "k"}]
    text = repr(r)
    assert "FAILED: 2 of 4 classes" in text and "first 1" in text
    assert "FAILED" in r._repr_html_()
    assert "OK" in repr(verify(correct_release(), QIS, k=3))


def test_dask_verify_equals_pandas():
    t = pd.concat([broken_release()] * 3, ignore_index=True)
    t.loc[len(t)] = ["[50, 59]", "1300*", "flu"]  # a single-row class
    d = dd.from_pandas(t, npartitions=4)
    assert d.npartitions >= 3
    for kwargs in ({"k": 4}, {"k": 7, "sensitive": "disease", "l": 2},
                   {"sensitive": "disease", "t": 0.2},
                   {"sensitive": "disease", "l": 2, "l_kind": "entropy"}):
        a, b = verify(t, QIS, **kwargs), verify(d, QIS, **kwargs)
        assert (a.ok, a.n_violations, a.n_classes, a.n_records) == \
            (b.ok, b.n_violations, b.n_classes, b.n_records)
        pd.testing.assert_frame_equal(a.violations.sort_index(), b.violations.sort_index(),
                                      check_dtype=False, check_index_type=False)


@st.composite
def releases(draw):
    n = draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    return pd.DataFrame({
        "age": rng.choice(["[20, 29]", "30", "[31, 40] or <NA>", "<NA>"], n),
        "zip": pd.Categorical(rng.choice(["1100*", "{a, b}", "gov"], n)),
        "s": rng.choice(["x", "y", "z", None], n),
    }), draw(st.integers(1, 8)), draw(st.integers(1, 3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(releases())
def test_agrees_with_an_independent_group_by(case):
    t, k, l_value = case
    r = verify(t, QIS, k=k, sensitive="s", l=l_value, max_listed=10 ** 6)
    sizes = class_sizes(t, QIS)
    distinct = t.groupby([t[q].astype(str) for q in QIS])["s"].nunique(dropna=False)
    bad = set(sizes[sizes < k].index) | set(distinct[distinct < l_value].index)
    assert set(r.violations.index) == bad
    assert r.n_violations == len(bad) and r.ok == (not bad)
    assert r.n_classes == len(sizes) and r.achieved["k"] == sizes.min()


@pytest.mark.parametrize("k", [5, 10, 50])
def test_adult_release_verifies(adult, k):
    from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS as qis

    rel = dmondrian.anonymize(adult, qis, k)
    r = verify(rel, qis, k=k)
    sizes = class_sizes(rel, qis)
    assert r.ok and r.n_classes == len(sizes) and r.achieved["k"] == sizes.min() >= k
    # Ask for one more than the smallest class: exactly the classes of that size fail.
    tight = verify(rel, qis, k=int(sizes.min()) + 1)
    assert tight.n_violations == int((sizes == sizes.min()).sum())


def test_bad_requests_raise_typed_errors():
    t = correct_release()
    with pytest.raises(ParameterError) as e:
        verify(t, QIS)
    assert e.value.parameter == "k"
    with pytest.raises(ParameterError) as e:
        verify(t, QIS, l=2)
    assert e.value.parameter == "sensitive"
    with pytest.raises(ParameterError) as e:
        verify(t, QIS, sensitive="disease", l=2, l_kind="recursive")
    assert e.value.parameter == "c"
    with pytest.raises(ParameterError) as e:
        verify(t, QIS, sensitive="disease", l=2, l_kind="alpha")
    assert e.value.parameter == "l_kind"
    with pytest.raises(ParameterError) as e:
        verify(t, QIS, sensitive="disease", l=2, c=2)
    assert e.value.parameter == "c"
    with pytest.raises(ParameterError) as e:
        verify(t, QIS, sensitive="disease", l=1.5)
    assert e.value.parameter == "l"
    with pytest.raises(ParameterError) as e:
        verify(t, QIS, sensitive="disease", t=2)
    assert e.value.parameter == "t"
    with pytest.raises(ParameterError) as e:
        verify(t, QIS, sensitive="disease", t=0.1, t_distance="euclid")
    assert e.value.parameter == "t_distance"
    with pytest.raises(MissingColumnError) as e:
        verify(t, QIS, k=2, sensitive="diagnosis", l=2)
    assert e.value.column == "diagnosis"
    with pytest.raises(ParameterError):
        verify(t, QIS, k=2, max_listed=-1)
    with pytest.raises(ParameterError) as e:
        verify(t, QIS, sensitive="age", l=2)
    assert e.value.parameter == "sensitive"


@st.composite
def constrained(draw):
    n = draw(st.integers(30, 150))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    grades = ["F", "D", "C", "B", "A", "A+"]  # A+ never occurs: an unused category
    df = pd.DataFrame({
        "age": rng.integers(18, 80, n),
        "zip": rng.choice(["a", "b", "c", "d"], n),
        "salary": rng.integers(0, 8, n),
        "grade": pd.Categorical(rng.choice(grades[:5], n), categories=grades, ordered=True),
        "disease": rng.choice(["flu", "cold", "acne", "none"], n),
    })
    sensitive = draw(st.sampled_from(["salary", "grade", "disease"]))
    k = draw(st.integers(1, 6))
    t = draw(st.sampled_from([None, 0.2, 0.35, 0.5]))
    l_value = draw(st.sampled_from([None, 2]))
    return df, sensitive, k, l_value, t


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constrained())
def test_engine_releases_under_l_and_t_pass_verification(case):
    """The engine's split check and the verifier compute l and EMD independently."""
    df, sensitive, k, l_value, t = case
    try:
        rel = dmondrian.anonymize(df, QIS, k, sensitive=sensitive, l=l_value, t=t,
                                  l_kind="entropy") if (l_value or t) else \
            dmondrian.anonymize(df, QIS, k)
    except dmondrian.errors.InfeasibleError:
        return  # the whole table cannot satisfy l: nothing was released
    r = verify(rel, QIS, k=k, sensitive=sensitive if (l_value or t) else None, l=l_value,
               t=t, l_kind="entropy")
    assert r.ok, r


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(releases(), st.sampled_from([0.5, 1, 1.5, 2, 3]))
def test_recursive_l_agrees_with_the_engines_constraint(case, c):
    """verify's recursive (c, l) verdict is the engines' own test, class by class."""
    from dmondrian.privacy.constraints import RecursiveCLDiversity

    t, _, l_value = case
    r = verify(t, QIS, sensitive="s", l=l_value, l_kind="recursive", c=c, max_listed=10 ** 6)
    rule = RecursiveCLDiversity(c, l_value, "s")
    keys = [t[q].astype(str) for q in QIS]
    bad = {name for name, s in t.groupby(keys)["s"]
           if rule._fails(s.value_counts(dropna=False).to_numpy().astype(float))}
    assert set(r.violations.index) == bad and r.ok == (not bad)
    assert r.requirements["c"] == c and r.requirements["l_kind"] == "recursive"
    assert math.isinf(r.achieved["recursive_ratio"]) or \
        (r.achieved["recursive_ratio"] < c) == (not bad)


def test_engine_release_under_recursive_l_verifies_on_pandas_and_dask():
    rng = np.random.default_rng(7)
    n = 400
    df = pd.DataFrame({"age": rng.integers(18, 80, n), "zip": rng.choice(list("abcdef"), n),
                       "disease": rng.choice(["flu", "cold", "acne", "none"], n)})
    rel = dmondrian.anonymize(df, QIS, 5, sensitive="disease", l=2, l_kind="recursive", c=3)
    for table in (rel, dd.from_pandas(rel, npartitions=3)):
        r = verify(table, QIS, k=5, sensitive="disease", l=2, l_kind="recursive", c=3)
        assert r.ok, r
        assert r.achieved["recursive_ratio"] < 3
    # The original table is not: one row per (age, zip) class, so no tail.
    assert not verify(df, QIS, sensitive="disease", l=2, l_kind="recursive", c=3).ok


def test_cli_verifies_recursive_l(tmp_path, capsys):
    from dmondrian.cli import main

    rng = np.random.default_rng(3)
    df = pd.DataFrame({"age": rng.integers(18, 80, 300), "zip": rng.choice(list("abcd"), 300),
                       "disease": rng.choice(["flu", "cold", "acne"], 300)})
    rel = dmondrian.anonymize(df, QIS, 5, sensitive="disease", l=2, l_kind="recursive", c=2)
    rel.to_csv(tmp_path / "rel.csv", index=False)
    base = ["verify", str(tmp_path / "rel.csv"), "--qi", "age,zip", "--k", "5",
            "--sensitive", "disease", "--l", "2", "--l-kind", "recursive"]
    assert main([*base, "--c", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["requirements"]["c"] == 2 and out["achieved"]["recursive_ratio"] < 2
    # At c equal to the largest ratio, the class holding it fails (r1 < c * tail is strict).
    tight = out["achieved"]["recursive_ratio"]
    assert main([*base, "--c", repr(tight), "--json"]) == 1
    capsys.readouterr()
    assert main(base) == 2  # recursive without --c: one error line
    assert "needs c" in capsys.readouterr().err
