"""A table means the same thing on every path (issue 38).

A CSV's ISO dates and timestamps are dates, and its integers with gaps
integers, for the local reader, the Dask reader and ``report``; the report
of a release reads its original with the types the manifest records; a
class of missing values only publishes a null on every engine and plan; a
text QI with nearly one value per row is named in a warning.
"""

from __future__ import annotations

import json
import warnings

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from cli_helpers import in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import distributed as D
from dmondrian.errors import TextQuasiIdentifierWarning
from dmondrian.io import files as io
from dmondrian.io.csv_tables import CsvDialect, column_types, read_csv, read_csv_dask
from dmondrian.kinds.labels import parse_range, parse_set
from dmondrian.plans import fit_plan
from dmondrian.plans.dask import transform_dask
from dmondrian.synthetic import make_census


def _stops(n: int = 4_000, seed: int = 1) -> pd.DataFrame:
    """A police-stops-like table: ISO timestamps to the second, ISO dates, an age
    with gaps, a text column."""
    rng = np.random.default_rng(seed)
    when = pd.Timestamp("2017-01-01") + pd.to_timedelta(rng.integers(0, 10 ** 7, n), unit="s")
    age = pd.array(rng.integers(16, 90, n), dtype="Int64")
    age[rng.random(n) < 0.2] = pd.NA
    return pd.DataFrame({"age": age, "zip": rng.integers(10_000, 10_100, n),
                         "stop_time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "day": when.strftime("%Y-%m-%d"),
                         "race": rng.choice(list("abcde"), n)})


@pytest.fixture(scope="module")
def stops_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("same") / "stops.csv"
    _stops().to_csv(path, index=False)
    return str(path)


def run_cli(args, cwd):
    """``(exit code, stdout, stderr)`` of a ``dmondrian`` command run in this process."""
    done = in_process(*args, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


# -- 1. CSV types ---------------------------------------------------------------------------


def test_local_reader_reads_iso_dates_and_integers_with_gaps(stops_csv):
    df = read_csv(stops_csv)
    assert df["age"].dtype == "Int64" and df["age"].isna().any()
    assert str(df["stop_time"].dtype) == "datetime64[ns, UTC]"
    assert str(df["day"].dtype) == "datetime64[ns]"
    assert pd.api.types.is_string_dtype(df["race"].dtype)
    assert df["stop_time"].iloc[0] == pd.Timestamp(_stops()["stop_time"].iloc[0])
    # --dtype keeps a column of dates as text, or parses it as before.
    assert pd.api.types.is_string_dtype(
        io.read_table(stops_csv, dtypes={"day": "str"})["day"].dtype)
    assert str(io.read_table(stops_csv, dtypes={"day": "datetime"})["day"].dtype
               ).startswith("datetime64")


def test_dates_mixed_with_text_stay_text(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text("day,n\n2017-01-01,1\nsoon,2\n2017-01-03,\n")
    df = read_csv(str(path))
    assert pd.api.types.is_string_dtype(df["day"].dtype)
    assert df["n"].dtype == "Int64"


def test_dask_reader_gives_the_local_types_on_a_cluster(stops_csv, process_client):
    local = read_csv(stops_csv)
    lazy = read_csv_dask(stops_csv, CsvDialect(","), blocksize=40_000)
    assert lazy.npartitions > 1
    back = lazy.compute().reset_index(drop=True)
    for col in ("age", "zip", "stop_time", "day"):
        assert back[col].dtype == local[col].dtype, col
        pd.testing.assert_series_equal(back[col], local[col])
    assert column_types(back, back.columns) == column_types(local, local.columns)


def test_dask_reader_finds_text_after_dates_in_a_later_block(tmp_path):
    n = 5_000
    days = pd.Series(pd.date_range("2020-01-01", periods=n, freq="h").strftime("%Y-%m-%d"))
    days.iloc[n - 2] = "not a date"
    path = str(tmp_path / "late.csv")
    pd.DataFrame({"day": days, "x": np.arange(n)}).to_csv(path, index=False)
    with dask.config.set(scheduler="sync"):
        back = read_csv_dask(path, CsvDialect(","), blocksize=20_000).compute()
    assert pd.api.types.is_string_dtype(back["day"].dtype)
    assert pd.api.types.is_string_dtype(read_csv(path)["day"].dtype)


def test_getting_started_command_publishes_ranges_for_birth_date(tmp_path):
    src, out = tmp_path / "people.csv", tmp_path / "released.parquet"
    make_census(2000).to_csv(src, index=False)
    code, _, err = run_cli(["anonymize", str(src), str(out), "--k", "10", "--qi",
                            "age,zip,sex,birth_date", "--drop", "person_id", "--no-progress"],
                           tmp_path)
    assert code == 0, err
    released = pd.read_parquet(out)
    labels = released["birth_date"].astype(str)
    assert labels.str.startswith("[").all(), labels.head()
    assert not labels.str.contains("{").any()
    manifest = json.loads((tmp_path / "released.parquet.manifest.json").read_text())
    assert manifest["column_types"]["birth_date"] == "datetime"


def test_a_qi_of_dates_read_as_text_is_refused_with_the_fix(tmp_path):
    days = pd.date_range("2020-01-01", periods=3000, freq="D").strftime("%Y-%m-%d").tolist()
    days[2500] = "soon"
    src = tmp_path / "late.csv"
    pd.DataFrame({"day": days, "n": range(3000)}).to_csv(src, index=False)
    for engine in (["--local"], ["--distributed", "--workers", "1"]):
        code, _, err = run_cli(["anonymize", str(src), str(tmp_path / "out.csv"), "--k", "10",
                                "--qi", "day,n", *engine, "--no-progress"], tmp_path)
        assert code == 2
        assert "'day'" in err and "--dtype day=datetime" in err and "--dtype day=str" in err
        assert not (tmp_path / "out.csv").exists()
        if engine == ["--local"]:
            assert "'soon'" in err  # the value that is not a date
    code, _, err = run_cli(["anonymize", str(src), str(tmp_path / "out.csv"), "--k", "10",
                            "--qi", "day,n", "--dtype", "day=datetime", "--local",
                            "--no-progress"], tmp_path)
    assert code == 2 and "'day'" in err and "soon" in err
    code, _, err = run_cli(["anonymize", str(src), str(tmp_path / "out.csv"), "--k", "10",
                            "--qi", "day,n", "--dtype", "day=str", "--local", "--no-progress"],
                           tmp_path)
    assert code == 0, err


# -- 2. a text QI with nearly one value per row --------------------------------------------


def test_text_qi_with_one_value_per_row_is_named_once():
    df = make_census(1000)
    df["birth_date"] = df["birth_date"].dt.strftime("%Y-%m-%d")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dmondrian.anonymize(df, ["age", "zip", "birth_date", "sex"], 10,
                            allow_unique=["person_id"])
    found = [w for w in caught if issubclass(w.category, TextQuasiIdentifierWarning)]
    assert len(found) == 1
    assert found[0].message.column == "birth_date"
    assert "--dtype birth_date=datetime" in str(found[0].message)
    assert "pd.to_datetime" in str(found[0].message)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dmondrian.anonymize(make_census(1000), ["age", "zip", "birth_date", "sex"], 10,
                            allow_unique=["person_id"])
    assert not [w for w in caught if issubclass(w.category, TextQuasiIdentifierWarning)]


def test_dask_engine_names_a_unique_text_qi_once(process_client):
    df = make_census(2000)
    df["birth_date"] = df["birth_date"].dt.strftime("%Y-%m-%d")
    ddf = dd.from_pandas(df, npartitions=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        D.anonymize(ddf, ["age", "birth_date"], 10, allow_unique=["person_id"]).compute()
    found = [w for w in caught if issubclass(w.category, TextQuasiIdentifierWarning)]
    assert [w.message.column for w in found] == ["birth_date"]


# -- 3. the report reads the original as the release was made ------------------------------


def test_report_of_a_release_made_with_dtype_matches_its_manifest(tmp_path):
    rng = np.random.default_rng(2)
    n = 3000
    when = pd.Timestamp("1990-01-01") + pd.to_timedelta(rng.integers(0, 10 ** 9, n), unit="s")
    src, out = tmp_path / "stops.csv", tmp_path / "rel.csv"
    # Months, which pyarrow does not infer as dates: only --dtype reads them as dates.
    pd.DataFrame({"age": rng.integers(16, 90, n), "zip": rng.integers(10_000, 10_100, n),
                  "date": when.strftime("%Y-%m")}).to_csv(src, index=False)
    assert pd.api.types.is_string_dtype(read_csv(str(src))["date"].dtype)
    qis = "age,zip,date"
    code, _, err = run_cli(["anonymize", str(src), str(out), "--k", "10", "--qi", qis,
                            "--dtype", "date=datetime", "--local", "--no-progress"], tmp_path)
    assert code == 0, err
    manifest = json.loads((tmp_path / "rel.csv.manifest.json").read_text())
    assert manifest["column_types"]["date"] == "datetime"
    expected = manifest["metrics"]["ncp"]
    assert expected["per_attribute"]["date"] > 0
    for extra in ([], ["--dtype", "date=datetime"]):
        code, text, err = run_cli(["report", str(out), "--qi", qis, "--original", str(src),
                                   "--json", *extra], tmp_path)
        assert code == 0, err
        got = json.loads(text)["ncp"]
        assert got["overall"] == pytest.approx(expected["overall"], abs=1e-12)
        assert got["per_attribute"] == pytest.approx(expected["per_attribute"], abs=1e-12)


# -- 4. missing values ---------------------------------------------------------------------


def _with_missing(n: int = 3000, share: float = 0.3, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = make_census(n, seed=seed)[["age", "zip", "sex", "income"]].copy()
    df["age"] = df["age"].astype(float)
    df.loc[rng.random(n) < share, "age"] = np.nan
    df.loc[rng.random(n) < 0.02, "sex"] = None
    return df


def _check_missing_published_as_null(df, out):
    for q in ("age", "sex"):
        assert isinstance(out[q].dtype, pd.CategoricalDtype)
        assert "<NA>" not in set(out[q].cat.categories)
    # The rows whose class is missing only are nulls; every row's label covers its value.
    assert out["age"].isna().sum() > 0
    assert out.loc[out["age"].isna(), "age"].index.isin(df.index[df["age"].isna()]).all()
    for label, value in zip(out["age"], df.loc[out.index, "age"], strict=True):
        assert parse_range(label).contains(None if pd.isna(value) else value)


def test_local_engine_and_plan_publish_null_for_a_class_of_missing_values():
    df = _with_missing()
    out = dmondrian.anonymize(df, ["age", "zip", "sex"], 10)
    assert out["age"].isna().sum() == df["age"].isna().sum()  # never mixed here
    _check_missing_published_as_null(df, out)
    planned = fit_plan(df, ["age", "zip", "sex"], 10).transform(df)
    _check_missing_published_as_null(df, planned)


def test_dask_engine_and_plan_publish_null_for_a_class_of_missing_values(process_client, tmp_path):
    df = _with_missing()
    ddf = dd.from_pandas(df, npartitions=3)
    out = D.anonymize(ddf, ["age", "zip", "sex"], 10).compute().loc[df.index]
    _check_missing_published_as_null(df, out)
    plan = fit_plan(df, ["age", "zip", "sex"], 10)
    planned = transform_dask(plan, ddf).compute().loc[df.index]
    _check_missing_published_as_null(df, planned)
    D.anonymize_to_parquet(ddf, str(tmp_path / "rel"), ["age", "zip", "sex"], 10,
                           random_state=0)
    written = pd.read_parquet(tmp_path / "rel")
    assert written["age"].isna().sum() == df["age"].isna().sum()
    assert not written["age"].astype(str).eq("<NA>").any()


def test_a_class_mixing_missing_and_present_values_says_so():
    df = pd.DataFrame({"x": [1.0, np.nan, 2.0], "s": ["a", None, "b"]})
    out = dmondrian.anonymize(df, ["x", "s"], 3)
    assert out["x"].tolist() == ["[1.0, 2.0] or <NA>"] * 3
    assert out["s"].tolist() == ["{a, b, <NA>}"] * 3


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.integers(-50, 50).map(float), st.just(np.nan)), min_size=3,
                max_size=40),
       st.lists(st.one_of(st.sampled_from(["a", "b", "c"]), st.none()), min_size=40,
                max_size=40),
       st.integers(1, 4))
def test_each_row_label_contains_its_value_missing_included(xs, ss, k):
    df = pd.DataFrame({"x": xs, "s": ss[:len(xs)]})
    if len(df) < k:
        return
    out = dmondrian.anonymize(df, ["x", "s"], k)
    for label, value in zip(out["x"], df["x"], strict=True):
        if pd.isna(label):  # a class of missing values only
            assert pd.isna(value)
        assert parse_range(label).contains(None if pd.isna(value) else value)
    for label, value in zip(out["s"], df["s"], strict=True):
        assert ("<NA>" if pd.isna(value) else value) in parse_set(label)
    assert "<NA>" not in set(out["x"].cat.categories) | set(out["s"].cat.categories)
