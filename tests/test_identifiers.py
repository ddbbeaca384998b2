"""Direct identifiers: ``identifiers=`` removes columns; columns that single out rows warn."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import dmondrian
from dmondrian.cli import main
from dmondrian.errors import ColumnError, IdentifyingColumnWarning, MissingColumnError

QIS = ["age", "zip"]


def _table(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 90, n), "zip": rng.integers(1000, 1100, n),
        "subject_id": rng.permutation(n) * 7 + 100,  # an id no other row shares
        "email": [f"p{i}@example.org" for i in rng.permutation(n)],
        "ward": rng.integers(0, 8, n),  # low cardinality
        "weight": rng.normal(70, 12, n),  # a continuous measurement, unique per row
        "disease": rng.choice(["flu", "cold", "acne"], n),
    })


def _warned(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [w for w in caught if issubclass(w.category, IdentifyingColumnWarning)]


def test_warns_on_each_id_column_and_nothing_else():
    out, caught = _warned(dmondrian.anonymize, _table(), QIS, 5, sensitive="disease", l=1)
    assert sorted(w.message.column for w in caught) == ["email", "subject_id"]
    assert caught[0].filename == __file__  # attributed to the caller's line
    assert "singles out rows" in str(caught[0].message)
    assert list(out.columns) == list(_table().columns)


def test_identifiers_are_removed_and_allow_unique_silences():
    df = _table()
    out, caught = _warned(dmondrian.anonymize, df, QIS, 5, identifiers=["email"],
                          allow_unique=["subject_id"])
    assert not caught
    assert "email" not in out.columns and out["subject_id"].equals(df["subject_id"])


def test_silent_on_qis_small_tables_and_floats_nullable_ids_warn():
    df = _table()
    # As QIs, ids are generalized: no warning.
    _, caught = _warned(dmondrian.anonymize, df[["age", "subject_id"]], ["age", "subject_id"], 5)
    assert not caught
    _, caught = _warned(dmondrian.anonymize, df.head(999), QIS, 5)
    assert not caught
    # Floats are measurements, whole dollars included; a nullable integer id is an id.
    ids = df[["age", "zip", "subject_id"]].assign(pay=df["weight"].round() * 1000)
    ids["subject_id"] = ids["subject_id"].astype("Int64")
    ids.loc[5, "subject_id"] = pd.NA
    _, caught = _warned(dmondrian.anonymize, ids, QIS, 5)
    assert [w.message.column for w in caught] == ["subject_id"]


def test_a_non_default_index_warns_under_its_name():
    df = _table().set_index("subject_id")
    _, caught = _warned(dmondrian.anonymize, df, QIS, 5, allow_unique=["email"])
    assert [w.message.column for w in caught] == ["subject_id"]
    assert "the index" in str(caught[0].message)
    _, caught = _warned(dmondrian.anonymize, df, QIS, 5, allow_unique=["email", "subject_id"])
    assert not caught


def test_bad_identifiers_are_refused_by_name():
    df = _table(50)
    with pytest.raises(MissingColumnError, match="'name'"):
        dmondrian.anonymize(df, QIS, 5, identifiers=["name"])
    with pytest.raises(ColumnError, match="'age' is a quasi-identifier"):
        dmondrian.anonymize(df, QIS, 5, identifiers="age")
    with pytest.raises(ColumnError, match="sensitive"):
        dmondrian.anonymize(df, QIS, 5, identifiers="disease", sensitive="disease", l=1)
    with pytest.raises(MissingColumnError, match="allow_unique names 'emial'"):
        dmondrian.anonymize(df, QIS, 5, allow_unique=["emial"])


def test_report_verify_and_estimator_list_the_risk():
    df = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifyingColumnWarning)
        out = dmondrian.anonymize(df, QIS, 5)
    rep = dmondrian.report(out, QIS, k=5, sensitive="disease")
    assert [f.column for f in rep.identifying_columns] == ["subject_id", "email"]
    assert rep.to_dict()["risk"]["identifying_columns"][0]["share"] == 1.0
    assert "singles out rows" in repr(rep)
    assert dmondrian.report(out, QIS, k=5, allow_unique=["subject_id", "email"]
                            ).identifying_columns == []
    res = dmondrian.verify(out, QIS, k=5)
    assert res.ok and [f.column for f in res.identifying_columns] == ["subject_id", "email"]
    assert "risk: column 'email'" in repr(res)
    assert res.to_dict()["risks"]["identifying_columns"][1]["column"] == "email"
    est = dmondrian.MondrianAnonymizer(k=5, identifiers=["email", "subject_id"])
    released = est.fit_transform(df.drop(columns=["weight"]))
    assert "email" not in released.columns and "email" not in est.get_feature_names_out()
    assert "email" not in est.quasi_id_


def test_cli_drop_allow_unique_and_one_warning_line(tmp_path, capsys):
    src = tmp_path / "in.csv"
    _table().to_csv(src, index=False)
    dst = tmp_path / "out.csv"
    assert main(["anonymize", str(src), str(dst), "--k", "5", "--qi", "age,zip",
                 "--drop", "email", "--no-progress"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dmondrian: warning: column 'subject_id'")
    assert "email" not in pd.read_csv(dst).columns
    manifest = json.loads((tmp_path / "out.csv.manifest.json").read_text())
    assert manifest["risks"] == {"identifying_columns": ["subject_id"]}
    assert manifest["parameters"]["identifiers"] == ["email"]
    assert main(["anonymize", str(src), str(tmp_path / "o2.csv"), "--k", "5", "--qi",
                 "age,zip", "--drop", "email", "--allow-unique", "subject_id",
                 "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    assert json.loads((tmp_path / "o2.csv.manifest.json").read_text())["risks"] == {
        "identifying_columns": []}
    assert main(["verify", str(dst), "--qi", "age,zip", "--k", "5"]) == 0
    assert "risk: column 'subject_id' singles out rows" in capsys.readouterr().out
    assert main(["report", str(dst), "--qi", "age,zip", "--allow-unique", "subject_id"]) == 0
    assert "singles out rows" not in capsys.readouterr().out


@pytest.mark.parametrize("values", [
    pd.Series(np.random.default_rng(0).integers(0, 10**12, 50_000)),
    pd.Series(["a", None, "b", "c"] * 500),
    pd.Series([f"id-{i}" for i in range(3000)], dtype="str"),  # hashed without a factorize
    pd.Series(pd.date_range("2000", periods=3000, freq="h")),
    pd.Series([0] * 10),
    pd.Series(np.arange(-1500, 1500, dtype=np.int32)),
    pd.Series(np.arange(40_000, dtype=np.uint16)),
    pd.Series(pd.array([1, None, 3, -4] * 700, dtype="Int64")),
    pd.Series(pd.to_timedelta(np.arange(2000), unit="s")),
    pd.Series([True, False, None] * 5, dtype=object),
    pd.Series([True, False] * 100),
])
@pytest.mark.parametrize("numpy_has_bitwise_count", [True, False])
def test_dask_sketch_registers_are_dasks_own(values, numpy_has_bitwise_count, monkeypatch):
    """The Dask engine's identifier sketch computes dask's HyperLogLog registers itself
    (faster); dask's estimate_count reads them, so they must be the same registers,
    with numpy's population count and without it (numpy < 2)."""
    from dask.dataframe.hyperloglog import compute_hll_array

    from dmondrian.identifiers import _HLL_BITS, _registers

    expected = compute_hll_array(values.dropna(), _HLL_BITS)
    if not numpy_has_bitwise_count:
        monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert np.array_equal(_registers(values), expected)
