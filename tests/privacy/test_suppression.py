"""Suppression (dmondrian.privacy.suppression) in the local engine, the estimator, verify
and NCP."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from checks import assert_valid_release, class_sizes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_local_properties import JOB_TREE, tables

import dmondrian
from dmondrian.errors import ParameterError
from dmondrian.metrics import compute_domains, ncp
from dmondrian.privacy.suppression import MASK_LABEL, MASKED_CLASS


def _is_masked(out: pd.DataFrame, qis) -> pd.Series:
    """Rows whose every QI is hidden: ``"*"`` or, for numbers, missing."""
    hidden = [out[q].astype(object).map(lambda v: v == MASK_LABEL or
                                        (not isinstance(v, str) and pd.isna(v)))
              for q in qis]
    return pd.concat(hidden, axis=1).all(axis=1)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(min_rows=2), st.sampled_from([0.0, 0.05, 0.2, 0.5, 0.9]),
       st.sampled_from(["range", "midpoint"]))
def test_budget_classes_and_rows(case, fraction, generalization):
    df, qis, k, mode = case
    hierarchies = {"h": JOB_TREE} if "h" in qis else None
    kw = dict(mode=mode, hierarchies=hierarchies, class_column="cls", suppression=fraction,
              generalization=generalization)
    masked = dmondrian.anonymize(df, qis, k, **kw)
    dropped = dmondrian.anonymize(df, qis, k, suppressed="drop", **kw)
    hidden = masked["cls"] == MASKED_CLASS
    n_hidden = int(hidden.sum())
    # the budget, and never fewer than k rows generalized
    assert n_hidden <= math.floor(fraction * len(df))
    assert len(df) - n_hidden >= min(k, len(df))
    # mask: rows in = rows out, every other column untouched
    assert masked.index.equals(df.index)
    for col in ("payload", "text"):
        pd.testing.assert_series_equal(masked[col], df[col])
    # the masked rows are exactly the ones publishing every QI hidden, and one class >= k
    if n_hidden:
        assert _is_masked(masked, qis)[hidden].all()
        assert n_hidden >= k
    assert class_sizes(masked, qis).min() >= k
    # drop removes exactly the suppressed rows, and publishes the others alike
    assert dropped.index.equals(df.index[~hidden.to_numpy()])
    pd.testing.assert_frame_equal(dropped, masked[~hidden], check_categorical=False)
    if len(dropped):
        assert class_sizes(dropped, qis).min() >= k
    # kept rows hold every invariant of a release without suppression
    kept = ~hidden.to_numpy()
    if kept.any() and generalization == "range":
        assert_valid_release(df[kept], masked[kept], qis, k, hierarchies=hierarchies,
                             class_column="cls")
        for q in qis:
            # no label of a suppressed class lingers among the categories
            if isinstance(masked[q].dtype, pd.CategoricalDtype):
                # (a class of missing values only publishes a null, no category)
                used = set(masked.loc[kept, q].dropna().astype(str)) | (
                    {MASK_LABEL} if n_hidden else set())
                assert set(map(str, masked[q].cat.categories)) == used


def _outlier_table(n=400, seed=3):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(20, 60, n), "zip": rng.integers(1000, 1100, n),
                       "job": rng.choice(["a", "b", "c"], n),
                       "income": rng.choice(["low", "mid", "high"], n)})
    df.loc[:9, "age"] = rng.integers(95, 120, 10)  # outliers stretch their classes
    return df


def test_suppression_narrows_the_published_rows():
    df = _outlier_table()
    qis = ["age", "zip", "job"]
    base = dmondrian.anonymize(df, qis, 5)
    out = dmondrian.anonymize(df, qis, 5, suppression=0.05)
    kept = out["age"] != MASK_LABEL
    assert 5 <= (~kept).sum() <= 20
    # the suppressed rows paid more than the mean row, so the rest pay less
    domains = compute_domains(df, qis)
    published = ncp(out[kept], qis, domains=domains).overall
    assert published < ncp(base, qis, df).overall
    # NCP counts a masked row, or a row the release lacks, as full loss on every QI
    full = ncp(out, qis, df)
    assert all(v >= (~kept).mean() for v in full.per_attribute.values())
    expected = (published * kept.sum() + (~kept).sum()) / len(df)
    assert full.overall == pytest.approx(expected)
    assert ncp(out[kept], qis, df).overall == pytest.approx(expected)


def test_masked_rows_cost_full_loss_when_published_as_numbers():
    df = _outlier_table()
    out = dmondrian.anonymize(df, ["age", "zip"], 5, suppression=0.05,
                              generalization="midpoint")
    hidden = out["age"].isna()
    assert hidden.sum() >= 5 and out.loc[hidden, "zip"].isna().all()
    by_rows = ncp(out, ["age", "zip"], df)
    by_class = ncp(out.assign(cls=np.where(hidden, -1, 0)), ["age", "zip"], df)
    assert by_rows.overall >= hidden.mean()
    assert by_class.per_attribute["age"] >= hidden.mean()


def test_masked_class_keeps_l_diversity_and_verifies():
    df = _outlier_table()
    out = dmondrian.anonymize(df, ["age", "zip", "job"], 5, l=2, sensitive="income",
                              suppression=0.05)
    assert (out["age"] == MASK_LABEL).sum() >= 5
    result = dmondrian.verify(out, ["age", "zip", "job"], k=5, sensitive="income", l=2)
    assert result.ok
    # the masked class is checked like any other: fewer than k masked rows fail
    bad = out[out["age"] != MASK_LABEL].copy()
    for q in ("age", "zip", "job"):
        bad[q] = bad[q].astype(object)
    bad.loc[bad.index[:2], ["age", "zip", "job"]] = MASK_LABEL
    r = dmondrian.verify(bad, ["age", "zip", "job"], k=5)
    assert not r.ok and (MASK_LABEL, MASK_LABEL, MASK_LABEL) in r.violations.index


def test_too_few_rows_to_suppress_suppresses_none():
    df = _outlier_table(n=60)
    # floor(0.05 * 60) = 3 rows: no class of 5 fits in the budget
    out = dmondrian.anonymize(df, ["age", "zip"], 5, suppression=0.05)
    pd.testing.assert_frame_equal(out, dmondrian.anonymize(df, ["age", "zip"], 5))


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, float("nan"), True, "0.1", None])
def test_bad_suppression_is_a_parameter_error(value):
    df = _outlier_table(n=20)
    with pytest.raises(ParameterError, match="suppression") as err:
        dmondrian.anonymize(df, ["age"], 2, suppression=value)
    assert err.value.parameter == "suppression"


def test_bad_suppressed_is_a_parameter_error():
    df = _outlier_table(n=20)
    with pytest.raises(ParameterError, match="suppressed must be one of") as err:
        dmondrian.anonymize(df, ["age"], 2, suppression=0.1, suppressed="hide")
    assert err.value.parameter == "suppressed"


def test_estimator_takes_suppression():
    df = _outlier_table()
    est = dmondrian.MondrianAnonymizer(k=5, quasi_id=["age", "zip"], suppression=0.05,
                                       suppressed="drop")
    out = est.fit_transform(df)
    assert len(df) - 20 <= len(out) < len(df)
    assert est.get_params()["suppression"] == 0.05
    with pytest.raises(ParameterError):
        dmondrian.MondrianAnonymizer(k=5, suppression=2.0).fit(df)


@pytest.mark.parametrize("how", ["mask", "drop"])
def test_cli_flags_and_manifest(tmp_path, how, capsys):
    from dmondrian.cli import main

    df = _outlier_table()
    df.to_csv(tmp_path / "in.csv", index=False)
    out = tmp_path / "out.csv"
    assert main(["anonymize", str(tmp_path / "in.csv"), str(out), "--k", "5", "--qi",
                 "age,zip,job", "--suppression", "0.05", "--suppressed", how, "--local",
                 "--no-progress"]) == 0
    released = pd.read_csv(out, dtype=str)
    manifest = json.loads((tmp_path / "out.csv.manifest.json").read_text())
    suppressed = manifest["suppressed"]
    if how == "mask":
        n = suppressed["rows"]
        assert 5 <= n <= 20 and suppressed["share"] == n / len(df)
        assert manifest["metrics"]["suppressed"]["masked"] == n
        assert manifest["rows"] == {"input": len(df), "output": len(df)}
    else:
        # The rows left out do not show in the release: nor does their count, nor the
        # input's (nothing exact in metadata beyond the release).
        assert suppressed == {"rows": "withheld", "share": "withheld", "masked": 0,
                              "dropped": "withheld"}
        assert manifest["metrics"]["suppressed"] == suppressed
        assert manifest["rows"]["input"] == "withheld"
        n = len(df) - manifest["rows"]["output"]
        assert 5 <= n <= 20
    assert manifest["parameters"]["suppression"] == 0.05
    assert manifest["parameters"]["suppressed"] == how
    assert len(released) == (len(df) if how == "mask" else len(df) - n)
    assert (released["age"] == MASK_LABEL).sum() == (n if how == "mask" else 0)
    assert class_sizes(released, ["age", "zip", "job"]).min() >= 5
    capsys.readouterr()
    assert main(["anonymize", str(tmp_path / "in.csv"), str(tmp_path / "bad.csv"), "--k", "5",
                 "--qi", "age", "--suppression", "1", "--local", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "suppression" in err[0]


def test_journalist_risk_reads_masked_rows_as_covering_everyone():
    df = _outlier_table()
    qis = ["age", "zip", "job"]
    out = dmondrian.anonymize(df, qis, 5, suppression=0.05)
    n_masked = int((out["age"] == MASK_LABEL).sum())
    r = dmondrian.report(out, qis, original=df, population=df, k=5)
    assert r.risk.journalist_max <= 1 / 5
    assert r.suppressed.masked == n_masked and r.suppressed.dropped == 0
    assert r.to_dict()["suppressed"]["share"] == n_masked / len(df)


def test_painting_draws_no_box_for_masked_rows():
    from dmondrian.plot import partition_painting

    df = _outlier_table()
    out = dmondrian.anonymize(df, ["age", "zip"], 5, suppression=0.05)
    assert (out["age"] == MASK_LABEL).any()
    fig = partition_painting(df, out, ["age", "zip"])
    assert len(fig.axes[0].patches) == out[out["age"] != MASK_LABEL].groupby(
        ["age", "zip"], observed=True).ngroups
