"""dmondrian.io.files: formats, fsspec URLs, typed errors and atomic output (in process)."""

from __future__ import annotations

import json
import os
import uuid

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from failing_write import failing_write_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmondrian.errors import ColumnError, DMondrianError, MissingColumnError, OutputError
from dmondrian.io import files as io
from dmondrian.io.staging import STAGING_TAG, atomic_output


@pytest.fixture
def mem():
    """A fresh memory:// folder, removed afterwards."""
    root = f"memory://io-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root[len("memory://"):]):
        fs.rm(root[len("memory://"):], recursive=True)


def _people(n=10):
    return pd.DataFrame({
        "zip": [f"{i:05d}" for i in range(n)],
        "age": np.arange(20, 20 + n, dtype=np.int64),
        "score": np.linspace(0.5, 9.5, n),
        "sex": ["F", "M"] * (n // 2) + ["F"] * (n % 2),
    })


# -- formats ------------------------------------------------------------------------------------


@pytest.mark.parametrize("url, fmt", [
    ("a.csv", "csv"), ("a.CSV", "csv"), ("dir/a.csv.gz", "csv"), ("s3://b/a.csv.zst", "csv"),
    ("a.parquet", "parquet"), ("a.pq", "parquet"), ("memory://x/a.parq", "parquet"),
    ("gs://bucket/dataset/", "parquet"),
])
def test_detect_format_from_name(url, fmt):
    assert io.detect_format(url) == fmt


def test_detect_format_explicit_and_directory(tmp_path):
    assert io.detect_format("table.dat", "CSV") == "csv"
    (tmp_path / "ds").mkdir()
    assert io.detect_format(str(tmp_path / "ds")) == "parquet"
    with pytest.raises(io.UnknownFormatError, match="table.dat"):
        io.detect_format("table.dat")
    with pytest.raises(io.UnknownFormatError, match="xml"):
        io.detect_format("a.csv", "xml")


# -- reading ------------------------------------------------------------------------------------


def test_csv_keeps_strings_and_types(tmp_path):
    path = tmp_path / "people.csv"
    _people().to_csv(path, index=False)
    df = io.read_table(str(path), dtypes={"zip": "str"})
    assert df["zip"].tolist()[:3] == ["00000", "00001", "00002"]  # leading zeros survive
    assert pd.api.types.is_string_dtype(df["sex"]) and df["sex"].iloc[1] == "M"
    assert df["age"].dtype == np.int64 and df["score"].dtype == np.float64
    # without the dtype a ZIP column of digits is numeric: that is what --dtype is for
    assert io.read_table(str(path))["zip"].dtype == np.int64


def test_dtypes_datetime_category_and_errors(mem):
    url = f"{mem}/d.csv"
    pd.DataFrame({"d": ["2020-01-02", "2021-03-04"], "c": ["x", "y"], "n": ["1", "2"]}).to_csv(
        url, index=False)
    df = io.read_table(url, dtypes={"d": "datetime", "c": "category", "n": "float"})
    assert pd.api.types.is_datetime64_any_dtype(df["d"])
    assert isinstance(df["c"].dtype, pd.CategoricalDtype) and df["n"].dtype == np.float64
    with pytest.raises(MissingColumnError, match="'nope'"):
        io.read_table(url, dtypes={"nope": "str"})
    with pytest.raises(ColumnError, match="'c'.*datetime"):
        io.read_table(url, dtypes={"c": "datetime"})


def test_parquet_roundtrip_keeps_dtypes(tmp_path):
    df = _people()
    df["sex"] = df["sex"].astype("category")
    df["when"] = pd.date_range("2020-01-01", periods=len(df), freq="D")
    url = str(tmp_path / "p.parquet")
    assert io.write_table(df, url, chunk_rows=3) == "parquet"
    back = io.read_table(url)
    pd.testing.assert_frame_equal(back, df, check_dtype=False, check_categorical=False)
    assert isinstance(back["sex"].dtype, pd.CategoricalDtype)
    assert pq.ParquetFile(url).num_row_groups == 4  # 10 rows in chunks of 3


def test_parquet_directory_skips_hidden_temporaries(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    df = _people(6)
    pq.write_table(pa.Table.from_pandas(df.iloc[:3], preserve_index=False), ds / "part.0.parquet")
    pq.write_table(pa.Table.from_pandas(df.iloc[3:], preserve_index=False), ds / "part.1.parquet")
    (ds / ".part.2.parquet.tmp-abc").write_bytes(b"half-written garbage")
    back = io.read_table(str(ds)).sort_values("age", ignore_index=True)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    assert io.input_size(str(ds)) == sum(p.stat().st_size for p in ds.iterdir())


@pytest.mark.parametrize("content, fmt, match", [
    (b'a,b\n1,2,3,4\n"open quote\n', "csv", "as CSV"),
    (b"", "csv", "as CSV"),
    (b"\xff\xfe\x00garbage", "csv", "as CSV"),
    (b"not parquet at all", "parquet", "as PARQUET"),
])
def test_unreadable_input_is_a_read_error(tmp_path, content, fmt, match):
    path = tmp_path / f"bad.{fmt}"
    path.write_bytes(content)
    with pytest.raises(io.ReadError, match=match) as info:
        io.read_table(str(path))
    assert info.value.path == str(path) and isinstance(info.value, DMondrianError)


def test_missing_input_and_wrong_kinds(tmp_path):
    with pytest.raises(io.InputNotFoundError, match="does not exist") as info:
        io.read_table(str(tmp_path / "nope.csv"))
    assert isinstance(info.value, FileNotFoundError)
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(io.ReadError, match="is a directory"):
        io.read_table(str(tmp_path / "d.csv"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hi")
    with pytest.raises(io.ReadError, match="no Parquet files"):
        io.read_table(str(tmp_path / "empty"))


def test_read_lines(mem):
    with fsspec.open(f"{mem}/h.txt", "w") as fh:
        fh.write("F;*\nM;*\n")
    assert io.read_lines(f"{mem}/h.txt") == ["F;*", "M;*"]
    with pytest.raises(io.InputNotFoundError, match="hierarchy file"):
        io.read_lines(f"{mem}/none.txt", "hierarchy file")


# -- writing ------------------------------------------------------------------------------------


def test_memory_url_roundtrip_csv(mem):
    df = _people()
    io.write_table(df, f"{mem}/out.csv", chunk_rows=4)
    back = io.read_table(f"{mem}/out.csv", dtypes={"zip": "str"})
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    fs = fsspec.filesystem("memory")
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(mem[len("memory://"):], detail=False)] == \
        ["out.csv"]  # no temporary left behind


def test_directory_output_is_a_parquet_dataset(tmp_path):
    url = str(tmp_path / "released") + "/"
    io.write_table(_people(), url)
    assert sorted(os.listdir(tmp_path / "released")) == ["part.0.parquet"]
    assert len(io.read_table(url)) == 10
    with pytest.raises(OutputError, match="CSV to directory"):
        io.write_table(_people(), str(tmp_path / "x") + "/", "csv")


def test_output_errors(tmp_path):
    df = _people()
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="not a directory"):
        io.write_table(df, str(tmp_path / "file" / "out.csv"))
    with pytest.raises(OutputError, match="not a directory"):
        io.write_table(df, str(tmp_path / "file" / "deeper" / "out.csv"))
    assert (tmp_path / "file").read_text() == "x"
    target = tmp_path / "out.csv"
    target.write_text("old")
    with pytest.raises(OutputError, match="already exists"):
        io.write_table(df, str(target))
    assert target.read_text() == "old"
    io.write_table(df, str(target), overwrite=True)
    assert len(pd.read_csv(target)) == 10


def test_overwrite_replaces_a_dataset_directory(tmp_path):
    url = str(tmp_path / "ds") + "/"
    io.write_table(_people(4), url)
    io.write_table(_people(6), url, overwrite=True)
    assert len(io.read_table(url)) == 6
    assert sorted(os.listdir(tmp_path)) == ["ds"]


@pytest.mark.parametrize("directory", [False, True])
def test_atomic_output_failure_leaves_nothing(tmp_path, directory):
    url = str(tmp_path / ("out" if directory else "out.bin"))
    with pytest.raises(RuntimeError, match="boom"), \
            atomic_output(url, directory=directory) as (fs, tmp):
        with fs.open(f"{tmp}/part.0" if directory else tmp, "wb") as fh:
            fh.write(b"partial")
        assert STAGING_TAG in tmp and os.path.basename(os.path.dirname(os.path.dirname(tmp))
                                               ).startswith(".out")
        raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_atomic_output_stages_as_a_release_does(tmp_path):
    # One staging for every writer (dmondrian.io.staging): a dead write's leftovers are
    # cleared by the next write to the same output, and a live one is not overrun.
    out = tmp_path / "out.csv"
    dead = tmp_path / f".out.csv{STAGING_TAG}0123456789ab"
    (dead / "data").mkdir(parents=True)
    (dead / "data" / "out.csv").write_text("half a file")
    (dead / "lock").write_text("")  # no process holds it: its run died
    io.write_table(_people(4), str(out))
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]
    with atomic_output(str(tmp_path / "busy.csv")) as (fs, tmp):
        with pytest.raises(OutputError, match="another dmondrian run is writing"):
            io.write_table(_people(4), str(tmp_path / "busy.csv"))
        with fs.open(tmp, "w") as fh:
            fh.write("mine\n")
    assert (tmp_path / "busy.csv").read_text() == "mine\n"
    # Replacing an output takes the stale manifest beside it away with it.
    (tmp_path / "out.csv.manifest.json").write_text("{}")
    io.write_table(_people(6), str(out), overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["busy.csv", "out.csv"]


def test_injected_failure_mid_write(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "write_table", failing_write_table("raise"))
    target = tmp_path / "old.csv"
    target.write_text("previous release\n")
    with pytest.raises(OutputError, match="injected write failure"):
        io.write_table(_people(), str(target), chunk_rows=2, overwrite=True)
    assert target.read_text() == "previous release\n"  # the old output is untouched
    assert os.listdir(tmp_path) == ["old.csv"]


def test_progress_reports_every_chunk(mem):
    calls = []
    io.write_table(_people(), f"{mem}/p.csv", chunk_rows=4, progress=lambda d, t: calls.append(
        (d, t)))
    assert calls == [(4, 10), (8, 10), (10, 10)]
    calls.clear()
    io.write_table(_people(0), f"{mem}/e.parquet", progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 0)]
    assert list(io.read_table(f"{mem}/e.parquet").columns) == ["zip", "age", "score", "sex"]


def test_write_json_and_manifest_path(tmp_path):
    url = io.manifest_path(str(tmp_path / "out.csv"))
    assert url.endswith("out.csv.manifest.json")
    io.write_json({"k": 5, "qis": ["age"]}, url)
    io.write_json({"k": 10}, url)  # manifests are replaced with their release
    assert json.loads(open(url).read()) == {"k": 10}
    assert os.listdir(tmp_path) == ["out.csv.manifest.json"]


# -- properties -----------------------------------------------------------------------------------

_frames = st.integers(0, 40).flatmap(lambda n: st.fixed_dictionaries({
    "i": st.lists(st.integers(-2**62, 2**62), min_size=n, max_size=n),
    "f": st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=n,
                  max_size=n),
    "s": st.lists(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8),
                  min_size=n, max_size=n),
}))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_frames, chunk=st.integers(1, 50))
def test_chunked_writes_equal_one_shot(data, chunk):
    """Chunking (for progress and the kill test) never changes what is written."""
    df = pd.DataFrame({"i": pd.Series(data["i"], dtype="int64"),
                       "f": pd.Series(data["f"], dtype="float64"),
                       "s": pd.Series(data["s"], dtype="str")})
    root = f"memory://prop-{uuid.uuid4().hex[:8]}"
    io.write_table(df, f"{root}/t.csv", chunk_rows=chunk)
    with fsspec.open(f"{root}/t.csv", "r", newline="") as fh:
        assert fh.read() == df.to_csv(index=False)
    io.write_table(df, f"{root}/t.parquet", chunk_rows=chunk)
    back = io.read_table(f"{root}/t.parquet")
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    fsspec.filesystem("memory").rm(root[len("memory://"):], recursive=True)


@pytest.mark.parametrize("name", ["anon/2024-06-01/", "anon/2024-06-02/day.csv"])
def test_missing_parent_folders_are_made(tmp_path, name):
    """A daily job writes to a new dated folder (issue 25, bug 8)."""
    df = _people()
    url = f"{tmp_path}/{name}"
    io.write_table(df, url)
    assert len(io.read_table(url)) == len(df)
    mem = f"memory://parents-{uuid.uuid4().hex[:8]}/anon/{name.rsplit('/', 2)[-2]}/x.csv"
    io.write_table(df, mem)  # fsspec filesystems too
    assert len(io.read_table(mem)) == len(df)
