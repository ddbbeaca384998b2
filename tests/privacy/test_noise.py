"""Laplace noise on class means (``noise=``, ``random_state=``): both engines, CLI, errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian.cli import main
from dmondrian.errors import (
    ColumnError,
    InvalidValueError,
    MissingColumnError,
    ParameterError,
    UnsupportedDtypeError,
)

QIS = ["age", "zip"]


def _table(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n), "zip": rng.integers(1000, 1100, n),
                         "income": rng.uniform(-5_000, 120_000, n),
                         "visits": rng.integers(0, 30, n), "ward": rng.integers(0, 4, n)})


def _noise(lo=0.0, hi=100_000.0, eps=1.0, column="income"):
    return {column: {"epsilon": eps, "bounds": (lo, hi)}}


def _true_means(df, classes, column, lo, hi):
    return df[column].clip(lo, hi).groupby(classes).mean()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(20, 300), k=st.integers(2, 6), seed=st.integers(0, 2**32 - 1),
       lo=st.floats(-1e4, 5e4), width=st.floats(1.0, 2e5), eps=st.floats(0.01, 20.0))
def test_noise_in_bounds_constant_per_class_and_repeatable(n, k, seed, lo, width, eps):
    df = _table(n, seed % 1000)
    hi = lo + width
    kw = dict(noise=_noise(lo, hi, eps), random_state=seed, class_column="cls")
    out = dmondrian.anonymize(df, QIS, k, **kw)
    values = out["income"]
    assert values.dtype == np.float64
    assert values.between(lo, hi).all()
    assert (out.groupby("cls")["income"].nunique() == 1).all()
    again = dmondrian.anonymize(df, QIS, k, **kw)
    assert np.array_equal(values.to_numpy(), again["income"].to_numpy())
    # Every other column is left as it was.
    assert out["visits"].equals(df["visits"])


def test_noise_is_laplace_of_the_class_size_scale_and_independent_across_classes():
    df = _table(6000, 1)
    lo, hi, eps = -10_000.0, 130_000.0, 2.0  # wide bounds: the clamp almost never acts
    out = dmondrian.anonymize(df, QIS, 5, noise=_noise(lo, hi, eps), random_state=11,
                              class_column="cls")
    classes = out["cls"]
    published = out.groupby("cls")["income"].first()
    sizes = classes.value_counts().sort_index()
    offsets = (published - _true_means(df, classes, "income", lo, hi)).sort_index()
    standardized = offsets / ((hi - lo) / (sizes * eps))
    # Laplace(1): E|X| = 1, sd sqrt(2); hundreds of classes, each drawn apart.
    assert len(standardized) > 500
    assert abs(np.abs(standardized).mean() - 1.0) < 0.15
    assert abs(standardized.std() - np.sqrt(2)) < 0.25
    assert standardized.nunique() == len(standardized)
    assert abs(np.corrcoef(standardized[:-1], standardized[1:])[0, 1]) < 0.15
    # Another seed, other noise; the same seed as a Generator, the same noise.
    other = dmondrian.anonymize(df, QIS, 5, noise=_noise(lo, hi, eps), random_state=12)
    assert not np.array_equal(other["income"], out["income"])
    same = dmondrian.anonymize(df, QIS, 5, noise=_noise(lo, hi, eps),
                               random_state=np.random.default_rng(11))
    assert np.array_equal(same["income"], out["income"])


def test_opendp_noise_without_a_seed():
    df = _table(400, 2)
    one = dmondrian.anonymize(df, QIS, 5, noise=_noise(0, 100_000, 0.5), class_column="cls")
    two = dmondrian.anonymize(df, QIS, 5, noise=_noise(0, 100_000, 0.5))
    assert one["income"].between(0, 100_000).all()
    assert (one.groupby("cls")["income"].nunique() == 1).all()
    assert not np.array_equal(one["income"], two["income"])


def test_two_noised_columns_and_integers_clip_to_the_bounds():
    df = _table(500, 3)
    noise = {**_noise(0, 50_000, 1.0), "visits": {"epsilon": 0.5, "bounds": (0, 10)}}
    out = dmondrian.anonymize(df, QIS, 10, noise=noise, random_state=0)
    assert out["visits"].between(0, 10).all() and out["visits"].dtype == np.float64
    assert out["income"].between(0, 50_000).all()


@pytest.mark.parametrize("noise, error, words", [
    (_noise(eps=0), ParameterError, "epsilon must be a finite number > 0"),
    (_noise(eps=-1), ParameterError, "epsilon"),
    ({"income": {"epsilon": 1.0}}, ParameterError, "bounds (lo, hi) are missing"),
    (_noise(lo=10, hi=5), ParameterError, "lo < hi"),
    (_noise(lo=5, hi=5), ParameterError, "lo < hi"),
    ({"income": {"epsilon": 1.0, "bounds": (0, float("inf"))}}, ParameterError, "finite"),
    ({"income": {"epsilon": 1.0, "bounds": (0, 1), "delta": 0}}, ParameterError, "unknown key"),
    (_noise(column="name"), UnsupportedDtypeError, "numeric"),
    (_noise(column="age"), ColumnError, "quasi-identifier"),
    (_noise(column="ward"), ColumnError, "sensitive column"),
    (_noise(column="salary"), MissingColumnError, "not a column"),
    ([("income", 1.0)], ParameterError, "mapping"),
])
def test_bad_noise_is_refused_by_name(noise, error, words):
    df = _table(50).assign(name="x")
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")) as info:
        dmondrian.anonymize(df, QIS, 2, noise=noise, sensitive="ward", l=1)
    assert "noise" in str(info.value) or "noised" in str(info.value)


def test_bad_random_state_and_missing_values_are_refused():
    df = _table(50)
    with pytest.raises(ParameterError, match="random_state"):
        dmondrian.anonymize(df, QIS, 2, noise=_noise(), random_state=1.5)
    df.loc[3, "income"] = np.nan
    with pytest.raises(InvalidValueError, match="'income' holds missing values"):
        dmondrian.anonymize(df, QIS, 2, noise=_noise(), random_state=1)


def test_estimator_takes_noise(tmp_path):
    df = _table(300, 4)
    est = dmondrian.MondrianAnonymizer(k=5, quasi_id=QIS, noise=_noise(), random_state=3)
    out = est.fit_transform(df)
    assert out["income"].between(0, 100_000).all()
    assert np.array_equal(out["income"], est.fit_transform(df)["income"])
    with pytest.raises(ColumnError, match="quasi-identifier"):
        dmondrian.MondrianAnonymizer(k=5, quasi_id=QIS, noise=_noise(column="age")).fit(df)
    # Without quasi_id, the noised column is not taken as a QI.
    assert "income" not in dmondrian.MondrianAnonymizer(k=5, noise=_noise()).fit(
        df[["age", "income"]]).quasi_id_


def test_report_and_manifest_list_the_noise(tmp_path):
    df = _table(300, 5)
    out = dmondrian.anonymize(df, QIS, 5, noise=_noise(), random_state=3)
    rep = dmondrian.report(out, QIS, original=df, k=5, noise=_noise())
    assert rep.to_dict()["noise"] == {"income": {"epsilon": 1.0, "bounds": [0.0, 100000.0]}}
    assert "noise (income)" in repr(rep)
    path = tmp_path / "rel.csv"
    out.to_csv(path, index=False)
    manifest = dmondrian.write_manifest(output=path, parameters={"k": 5}, report=rep)
    assert manifest["noise"]["income"]["epsilon"] == 1.0


def test_cli_noise_and_seed(tmp_path, capsys):
    src = tmp_path / "in.csv"
    _table(600, 6).to_csv(src, index=False)
    outs = []
    for name in ("a.csv", "b.csv"):
        dst = tmp_path / name
        assert main(["anonymize", str(src), str(dst), "--k", "5", "--qi", "age,zip",
                     "--noise", "income:1.0:0:100000", "--noise", "visits:2:0:30",
                     "--seed", "7", "--no-progress"]) == 0
        outs.append(pd.read_csv(dst))
    pd.testing.assert_frame_equal(*outs)
    assert outs[0]["income"].between(0, 100_000).all()
    manifest = json.loads((tmp_path / "a.csv.manifest.json").read_text())
    assert manifest["noise"]["visits"] == {"epsilon": 2.0, "bounds": [0.0, 30.0]}
    # The seed would let a reader of the manifest subtract the noise.
    assert manifest["parameters"]["seed"] == "withheld"
    capsys.readouterr()
    assert main(["anonymize", str(src), str(tmp_path / "c.csv"), "--k", "5", "--qi", "age",
                 "--noise", "income:1.0:0"]) == 2
    assert "COLUMN:EPSILON:LO:HI" in capsys.readouterr().err
    assert main(["anonymize", str(src), str(tmp_path / "d.csv"), "--k", "5", "--qi", "age",
                 "--noise", "income:1.0:9:0"]) != 0
    assert "lo < hi" in capsys.readouterr().err


@pytest.mark.parametrize("suppressed", ["mask", "drop"])
def test_noise_with_suppression(suppressed):
    df = _table(800, 7)
    out = dmondrian.anonymize(df, QIS, 5, suppression=0.05, suppressed=suppressed,
                              noise=_noise(), random_state=2, class_column="cls")
    assert out["income"].between(0, 100_000).all()
    # Every published class, the masked one (-1) included, publishes one noisy mean.
    assert (out.groupby("cls")["income"].nunique() == 1).all()
    assert len(out) == (len(df) if suppressed == "mask" else out["cls"].ge(0).sum())
