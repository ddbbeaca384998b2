"""A missing sensitive value is a value of its own: engine, verify() and metrics agree.

The oracle: a release with missing sensitive values is the release of the
same table with each missing value replaced by one new value placed after
every present one (a new category for nominal columns), and every per-class
statistic counts missing as that one value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from checks import SENSITIVE_KINDS, sensitive_with_missing
from hypothesis import given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import errors
from dmondrian.encoding.sensitive import encode_sensitive
from dmondrian.metrics import privacy

QIS = ["age", "zip"]


def _filled(s: pd.Series) -> pd.Series:
    """``s`` with missing values as one new value after every present one."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s.cat.add_categories("~missing").fillna("~missing")
    present = s.notna().any()
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        return s.fillna((s.max() if present else pd.Timestamp(0)) + pd.Timedelta(days=1))
    if pd.api.types.is_numeric_dtype(s.dtype):
        return s.fillna((s.max() if present else 0) + 1)
    return s.astype(object).where(s.notna(), "~missing")


def _table(kind: str, n: int, seed: int, p_missing=0.3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(20, 80, n), "zip": rng.integers(1000, 1020, n),
                         "cause": sensitive_with_missing(kind, n, rng, p_missing)})


KINDS = SENSITIVE_KINDS


def test_the_death_cause_example_runs():
    # A missing cause means "alive": one more value, so two causes make l=3.
    df = pd.DataFrame({"age": [30, 31, 32, 33, 60, 61, 62, 63],
                       "zip": [1, 1, 2, 2, 3, 3, 4, 4],
                       "death_cause": ["heart", None, "cancer", None,
                                       None, "heart", None, "cancer"]})
    out = dmondrian.anonymize(df, QIS, 2, l=3, sensitive="death_cause", class_column="cls")
    per_class = out.groupby("cls")["death_cause"].nunique(dropna=False)
    assert per_class.min() >= 3
    assert out["death_cause"].isna().sum() == 4  # the sensitive column is published as is
    with pytest.raises(errors.InfeasibleError, match="only 3 distinct"):
        dmondrian.anonymize(df, QIS, 2, l=4, sensitive="death_cause")


@pytest.mark.parametrize("kind", KINDS)
def test_every_missing_kind_is_one_value_coded_last(kind):
    s = sensitive_with_missing(kind, 200, np.random.default_rng(1)).rename("cause")
    codes, domain = encode_sensitive(s)
    assert domain.has_missing
    assert (codes[s.isna().to_numpy()] == domain.n_codes - 1).all()
    assert (codes[s.notna().to_numpy()] < domain.n_codes - 1).all()
    filled_codes, filled = encode_sensitive(_filled(s).rename("cause"))
    np.testing.assert_array_equal(codes, filled_codes)
    np.testing.assert_array_equal(domain.counts, filled.counts)
    assert domain.ordered == (kind in ("float", "Int64", "ordered", "datetime"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("options", [{"l": 3}, {"l": 2, "l_kind": "entropy"}, {"t": 0.25}])
def test_release_equals_the_release_with_missing_as_a_last_value(kind, options):
    df = _table(kind, 300, seed=2)
    out = dmondrian.anonymize(df, QIS, 4, sensitive="cause", class_column="cls", **options)
    filled = dmondrian.anonymize(df.assign(cause=_filled(df["cause"])), QIS, 4,
                                 sensitive="cause", class_column="cls", **options)
    pd.testing.assert_frame_equal(out.drop(columns="cause"), filled.drop(columns="cause"))
    assert out["cls"].nunique() > 1
    check = dmondrian.verify(out, QIS, k=4, sensitive="cause", l=options.get("l"),
                             l_kind=options.get("l_kind", "distinct"), t=options.get("t"))
    assert check.ok, check
    # verify() and the metrics measure the table as they measure the filled one
    achieved = privacy(out, QIS, "cause")
    assert achieved == privacy(filled, QIS, "cause")


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(KINDS), n=st.integers(8, 120), seed=st.integers(0, 2**16),
       p_missing=st.sampled_from([0.05, 0.3, 0.8]), k=st.integers(1, 5), l=st.integers(1, 4))
def test_l_diversity_counts_missing_as_one_value(kind, n, seed, p_missing, k, l):  # noqa: E741
    df = _table(kind, n, seed, p_missing)
    try:
        out = dmondrian.anonymize(df, QIS, k, l=l, sensitive="cause", class_column="cls")
    except errors.InfeasibleError:
        assert _filled(df["cause"]).nunique() < l or k > n
        return
    # pandas' nunique(dropna=False) would count None, NaN and pd.NA apart
    values = _filled(out["cause"])
    assert values.groupby(out["cls"]).nunique().min() >= l
    assert dmondrian.verify(out, QIS, k=k, sensitive="cause", l=l).ok
    # the achieved l counts the missing value once, class by class
    by_published = values.groupby([out[q] for q in QIS]).nunique()
    assert privacy(out, QIS, "cause").l_distinct == by_published.min()


@pytest.mark.parametrize("kind", ["float", "ordered", "object"])
def test_t_closeness_with_missing_is_judged_alike_by_verify(kind):
    df = _table(kind, 400, seed=3, p_missing=0.4)
    for t in (0.1, 0.2):
        out = dmondrian.anonymize(df, QIS, 3, t=t, sensitive="cause")
        result = dmondrian.verify(out, QIS, sensitive="cause", t=t)
        assert result.ok, result
        assert result.achieved["t"] <= t + 1e-9
