"""Release manifests: content, per-file SHA-256, atomic replacement, re-checking."""

from __future__ import annotations

import hashlib
import json
import os

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dmondrian
from dmondrian import manifest as mf
from dmondrian.errors import ParameterError

QIS = ["age", "hours"]


@pytest.fixture
def release(tmp_path):
    """An original table, its k=5 release written as a directory of 3 Parquet files."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 90, 300), "hours": rng.integers(1, 99, 300),
                       "income": rng.choice(["<=50K", ">50K"], 300)})
    rel = dmondrian.anonymize(df, QIS, 5)
    out = tmp_path / "release.parquet"
    dd.from_pandas(rel, npartitions=3).to_parquet(out, write_index=False)
    return df, rel, out


PARAMS = {"k": 5, "quasi_identifiers": QIS, "mode": "strict", "constraints": ["k-anonymity"],
          "seed": 0}


def test_manifest_beside_a_parquet_directory(release):
    df, rel, out = release
    rep = dmondrian.report(rel, QIS, df, "income", k=5)
    m = dmondrian.write_manifest(output=out, parameters=PARAMS, input_rows=len(df), report=rep)
    path = out.parent / "release.parquet.manifest.json"
    assert json.loads(path.read_text()) == m
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert len(files) >= 3
    assert [f["path"] for f in m["output"]["files"]] == [p.name for p in files]
    for entry, p in zip(m["output"]["files"], files, strict=True):
        assert entry["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
        assert entry["bytes"] == p.stat().st_size
    assert m["output"]["path"] == "release.parquet"
    assert m["parameters"] == {**PARAMS, "seed": "withheld"}
    assert m["rows"] == {"input": 300, "output": 300}
    assert m["achieved"]["k"] >= 5 and m["achieved"]["sensitive"] == "income"
    assert m["metrics"] == rep.to_dict()
    assert m["metrics"]["ncp"]["overall"] == pytest.approx(rep.ncp.overall)
    packages = m["software"]["packages"]
    assert {"dmondrian", "numpy", "pandas", "dask", "pyarrow"} <= set(packages)
    assert packages["pandas"] == pd.__version__
    assert m["format"] == mf.FORMAT and m["created"].endswith("+00:00")
    assert mf.check_manifest(path) == {"missing": [], "changed": [], "extra": []}
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]


def test_report_built_from_the_release_read_back(release):
    df, _, out = release
    back = dd.read_parquet(out)
    m = mf.write_manifest(out.parent / "m.json", output=out, parameters=PARAMS,
                          released=back, quasi_identifiers=QIS, original=df, k=5)
    assert m["rows"]["output"] == 300 and m["metrics"]["classes"] > 0
    assert m["achieved"]["k"] >= 5


def test_without_report_rows_come_from_parquet_footers(release):
    _, _, out = release
    m = mf.write_manifest(output=out, parameters=PARAMS)
    assert m["rows"] == {"input": None, "output": 300}
    assert m["metrics"] is None and m["achieved"] is None


def test_single_file_and_manifest_inside_the_output_directory(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-0.csv").write_text("age\n[20, 29]\n")
    m = mf.write_manifest(out / "manifest.json", output=out, parameters={"k": 2},
                          extra={"note": "test"})
    # The manifest does not hash itself.
    assert [f["path"] for f in m["output"]["files"]] == ["part-0.csv"]
    assert m["extra"] == {"note": "test"} and m["output"]["path"] == "."
    single = mf.write_manifest(output=out / "part-0.csv", parameters={"k": 2},
                               output_rows=1)
    assert single["output"]["files"][0]["path"] == "part-0.csv"
    assert single["rows"]["output"] == 1


def test_check_manifest_finds_changed_missing_and_extra_files(release):
    _, _, out = release
    path = out.parent / "m.json"
    mf.write_manifest(path, output=out, parameters=PARAMS)
    files = sorted(p for p in out.iterdir() if p.is_file())
    files[0].write_bytes(files[0].read_bytes() + b"x")
    files[1].unlink()
    (out / "stray.parquet").write_bytes(b"")
    assert mf.check_manifest(path) == {"missing": [files[1].name], "changed": [files[0].name],
                                       "extra": ["stray.parquet"]}


def test_rewrite_is_atomic(release, monkeypatch):
    _, _, out = release
    path = out.parent / "m.json"
    first = mf.write_manifest(path, output=out, parameters=PARAMS)
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(mf.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        mf.write_manifest(path, output=out, parameters={**PARAMS, "k": 99})
    # The old manifest is intact and no temporary file is left behind.
    assert path.read_bytes() == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.json", "release.parquet"]
    monkeypatch.undo()
    second = mf.write_manifest(path, output=out, parameters={**PARAMS, "k": 99})
    assert second["parameters"]["k"] == 99 and first["parameters"]["k"] == 5
    assert mf.read_manifest(path)["parameters"]["k"] == 99


def test_numpy_and_path_parameters_are_stored_as_json(tmp_path):
    out = tmp_path / "o.csv"
    out.write_text("x\n")
    m = mf.write_manifest(output=out, parameters={"k": np.int64(3), "source": tmp_path,
                                                  "qis": ("a", "b"), "t": np.float32(0.5)})
    assert m["parameters"] == {"k": 3, "source": str(tmp_path), "qis": ["a", "b"], "t": 0.5}


def test_bad_calls_raise_typed_errors(tmp_path):
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(output=tmp_path / "nothing", parameters={})
    assert e.value.parameter == "output"
    out = tmp_path / "o.csv"
    out.write_text("x\n")
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(output=out, parameters=[("k", 2)])
    assert e.value.parameter == "parameters"
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(output=out, parameters={}, input_rows=-1)
    assert e.value.parameter == "input_rows"
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(tmp_path / "no" / "m.json", output=out, parameters={})
    assert e.value.parameter == "path"
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(output=out, parameters={}, released=pd.DataFrame({"x": [1]}))
    assert e.value.parameter == "quasi_identifiers"
    (tmp_path / "other.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ParameterError):
        mf.read_manifest(tmp_path / "other.json")
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
