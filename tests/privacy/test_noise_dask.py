"""Noise and direct identifiers on the Dask engine: one small cluster, a few runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import dmondrian  # noqa: E402
from dmondrian import distributed as engine  # noqa: E402
from dmondrian.errors import IdentifyingColumnError, UnsupportedDtypeError  # noqa: E402

QIS = ["age", "zip"]
NOISE = {"income": {"epsilon": 1.0, "bounds": (0.0, 100_000.0)}}


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 3000
    df = pd.DataFrame({"age": rng.integers(18, 90, n), "zip": rng.integers(1000, 1100, n),
                       "income": rng.uniform(-1000, 120_000, n),
                       "record": rng.permutation(n), "name": [f"n{i}" for i in range(n)],
                       "ward": rng.integers(0, 5, n), "weight": rng.normal(70, 10, n)})
    return df, dd.from_pandas(df, npartitions=3)


def _run(ddf, client, **kw):
    return engine.anonymize(ddf, QIS, 10, leaf_rows=1000, client=client, noise=NOISE,
                            identifiers=["name"], **kw).compute().sort_index()


def test_noise_per_class_repeatable_and_identifiers_on_dask(table, client):
    df, ddf = table
    with pytest.raises(IdentifyingColumnError, match="'record'") as info:
        _run(ddf, client, random_state=7, class_column="cls")
    assert "estimated" in str(info.value)
    one = _run(ddf, client, random_state=7, class_column="cls", allow_unique=["record"])
    assert "name" not in one.columns and len(one) == len(df)
    assert one["income"].between(0, 100_000).all() and one["income"].dtype == np.float64
    assert (one.groupby("cls")["income"].nunique() == 1).all()
    assert one["cls"].nunique() > 100
    truth = df["income"].clip(0, 100_000).groupby(one["cls"]).mean()
    assert not np.allclose(one.groupby("cls")["income"].first(), truth)
    two = _run(ddf, client, random_state=7, allow_unique=["record"])
    assert np.array_equal(one["income"].to_numpy(), two["income"].to_numpy())
    # The release's report and verification list the id column as a risk.
    released = dd.from_pandas(two, npartitions=2)  # index: row positions, not a risk
    rep = dmondrian.report(released, QIS, k=10, noise=NOISE)
    assert [f.column for f in rep.identifying_columns] == ["record"]
    checked = dmondrian.verify(released, QIS, k=10)
    assert [f.column for f in checked.identifying_columns] == ["record"] and not checked.ok


def test_opendp_noise_and_parquet_writer_on_dask(table, client, tmp_path):
    df, ddf = table
    engine.anonymize_to_parquet(ddf, str(tmp_path / "out"), QIS, 10, leaf_rows=1000,
                                client=client, noise=NOISE, identifiers="name",
                                allow_unique=["record"], class_column="cls")
    out = pd.read_parquet(tmp_path / "out")
    assert "name" not in out.columns and len(out) == len(df)
    assert out["income"].between(0, 100_000).all()
    assert (out.groupby("cls")["income"].nunique() == 1).all()
    with pytest.raises(UnsupportedDtypeError, match="'name'"):
        engine.anonymize(ddf, QIS, 10, noise={"name": NOISE["income"]}, client=client)


def test_noise_with_suppression_on_dask(table, client):
    df, ddf = table
    out = engine.anonymize(ddf, QIS, 10, leaf_rows=1000, client=client, noise=NOISE,
                           random_state=1, suppression=0.05, allow_unique=["record", "name"],
                           class_column="cls").compute()
    assert len(out) == len(df) and out["income"].between(0, 100_000).all()
    kept = out[out["cls"] >= 0]
    assert (kept.groupby("cls")["income"].nunique() == 1).all()
