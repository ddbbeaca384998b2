"""l-diversity and t-closeness in the local engine, checked independently."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from checks import assert_valid_release
from hypothesis import given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import errors
from dmondrian.privacy.constraints import DistinctLDiversity, EntropyLDiversity, TCloseness


def emd(class_values: pd.Series, population: pd.Series, ordered: bool) -> float:
    """Earth Mover's Distance of Li, Li & Venkatasubramanian (2007), written from the paper."""
    domain = np.sort(population.unique())
    p = class_values.value_counts(normalize=True).reindex(domain, fill_value=0).to_numpy()
    q = population.value_counts(normalize=True).reindex(domain, fill_value=0).to_numpy()
    if ordered:
        return float(np.abs(np.cumsum(p - q)).sum() / max(len(domain) - 1, 1))
    return float(0.5 * np.abs(p - q).sum())


def holds(classes: pd.Series, values: pd.Series, *, l=None, l_kind="distinct", c=None,  # noqa: E741
          t=None, ordered=False) -> bool:
    for _, group in values.groupby(classes):
        counts = group.value_counts().to_numpy()
        if l is not None and l_kind == "distinct" and len(counts) < l:
            return False
        if l is not None and l_kind == "entropy":
            p = counts / counts.sum()
            if -(p * np.log(p)).sum() < math.log(l) - 1e-9:
                return False
        if l is not None and l_kind == "recursive":
            r = np.sort(counts)[::-1]
            if len(r) < l or not r[0] < c * r[l - 1:].sum():
                return False
        if t is not None and emd(group, values, ordered) > t + 1e-9:
            return False
    return True


@st.composite
def cases(draw):
    n = draw(st.integers(6, 150))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_sens = draw(st.integers(2, 6))
    skew = rng.dirichlet(np.ones(n_sens) * draw(st.sampled_from([0.3, 1.0, 5.0])))
    df = pd.DataFrame({
        "age": rng.integers(20, 60, n),
        "zip": rng.choice(["a", "b", "c", "d"], n),
        "score": np.round(rng.normal(0, 1, n), 1),
        "diag": rng.choice([f"d{i}" for i in range(n_sens)], n, p=skew),
        "level": rng.integers(0, n_sens, n),
    })
    sensitive = draw(st.sampled_from(["diag", "level"]))
    kind = draw(st.sampled_from(["distinct", "entropy", "recursive", "t"]))
    k = draw(st.integers(1, 8))
    mode = draw(st.sampled_from(["strict", "relaxed"]))
    if kind == "t":
        options = {"t": draw(st.sampled_from([0.1, 0.3, 0.6]))}
    else:
        options = {"l": draw(st.integers(1, 3)), "l_kind": kind}
        if kind == "recursive":
            options["c"] = draw(st.sampled_from([1.0, 2.0, 4.0]))
    return df, sensitive, k, mode, options


@settings(max_examples=120, deadline=None)
@given(cases())
def test_every_class_satisfies_every_requested_constraint(case):
    df, sensitive, k, mode, options = case
    qis = ["age", "zip", "score"]
    try:
        out = dmondrian.anonymize(df, qis, k, mode=mode, sensitive=sensitive,
                                  class_column="cls", **options)
    except errors.InfeasibleError:
        # only allowed when the whole table fails the constraint
        assert not holds(pd.Series(0, index=df.index), df[sensitive],
                         ordered=sensitive == "level", **options) or k > len(df)
        return
    assert_valid_release(df, out, qis, k, class_column="cls")
    assert holds(out["cls"], df[sensitive], ordered=sensitive == "level", **options)


def test_impossible_constraint_fails_before_any_work():
    df = pd.DataFrame({"age": range(10), "income": ["<=50K"] * 5 + [">50K"] * 5})
    with pytest.raises(errors.InfeasibleError, match="only 2 distinct"):
        dmondrian.anonymize(df, ["age"], 2, l=3, sensitive="income")
    with pytest.raises(errors.InfeasibleError, match="entropy"):
        dmondrian.anonymize(df.assign(income=["a"] * 9 + ["b"]), ["age"], 2, l=2,
                            l_kind="entropy", sensitive="income")


@pytest.mark.parametrize("kwargs, words", [
    ({"l": 2}, ["sensitive"]),
    ({"l": 2, "sensitive": "nope"}, ["nope"]),
    ({"l": 2, "sensitive": "age"}, ["quasi-identifier"]),
    ({"l": 0, "sensitive": "income"}, ["l"]),
    ({"t": 1.5, "sensitive": "income"}, ["t"]),
    ({"l": 2, "l_kind": "fancy", "sensitive": "income"}, ["l_kind"]),
    ({"l": 2, "l_kind": "recursive", "sensitive": "income"}, ["c"]),
    ({"sensitive": "income"}, ["no constraint"]),
    ({"constraints": ["l=2"]}, ["Constraint"]),
    ({"constraints": [DistinctLDiversity(2, "income"), TCloseness(0.3, "other")]},
     ["several"]),
])
def test_bad_constraint_arguments(kwargs, words):
    df = pd.DataFrame({"age": range(10), "income": ["lo", "hi"] * 5, "other": [1, 2] * 5})
    with pytest.raises(errors.DMondrianError) as info:
        dmondrian.anonymize(df, ["age"], 2, **kwargs)
    for word in words:
        assert word in str(info.value)


def test_constraint_objects_compose():
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"age": rng.integers(20, 70, 500),
                       "diag": rng.choice(list("abcdef"), 500)})
    out = dmondrian.anonymize(df, ["age"], 5, class_column="c", constraints=[
        EntropyLDiversity(2.5, sensitive="diag"), TCloseness(0.4, sensitive="diag")])
    assert holds(out["c"], df["diag"], l=2.5, l_kind="entropy")
    assert holds(out["c"], df["diag"], t=0.4)


def test_estimator_passes_the_constraints_on():
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"age": rng.integers(20, 70, 300), "diag": rng.choice(list("abc"), 300)})
    est = dmondrian.MondrianAnonymizer(k=4, quasi_id=["age"], l=3, sensitive="diag")
    out = est.fit_transform(df)
    assert out.groupby("age", observed=True)["diag"].nunique().min() >= 3


ADULT_QIS_NO_OCC = ["age", "workclass", "education-num", "marital-status", "race", "sex",
                    "native-country"]


def test_adult_income_distinct_2_diversity(adult):
    from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS

    out = dmondrian.anonymize(adult, ADULT_QUASI_IDENTIFIERS, 10, l=2, sensitive="income",
                              class_column="c")
    assert holds(out["c"], adult["income"], l=2)
    assert out.groupby("c").size().min() >= 10


@pytest.mark.parametrize("options", [{"l": 2}, {"l": 3}, {"l": 5}, {"t": 0.2}, {"t": 0.35}])
def test_adult_occupation_as_sensitive(adult, options):
    out = dmondrian.anonymize(adult, ADULT_QIS_NO_OCC, 10, sensitive="occupation",
                              class_column="c", **options)
    assert holds(out["c"], adult["occupation"], **options)
    assert out.groupby("c").size().min() >= 10
    plain = dmondrian.anonymize(adult, ADULT_QIS_NO_OCC, 10, class_column="c")
    # The stronger model can only merge classes, never split them finer.
    assert out["c"].nunique() <= plain["c"].nunique()
