"""Suppression on the Dask engine: each leaf within its share of the budget."""

from __future__ import annotations

import math

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from checks import class_sizes
from distributed_helpers import CENSUS_QIS, make_census, row_ids

import dmondrian
from dmondrian import distributed as D
from dmondrian.privacy.suppression import MASK_LABEL, MASKED_CLASS

N, K, F = 4000, 5, 0.05


@pytest.fixture(scope="module")
def census():
    df = make_census(N, seed=5)
    df.loc[df.index[:30], "age"] = 120  # outliers that stretch their classes
    return df


def _run(client, df, **options):
    ddf = dd.from_pandas(df, npartitions=4)
    return D.anonymize(ddf, CENSUS_QIS, K, leaf_rows=400, class_column="cls", client=client,
                       suppression=F, **options, allow_unique=row_ids(ddf)).compute().sort_index()


def test_budget_and_classes_on_dask(client, census):
    masked = _run(client, census)
    dropped = _run(client, census, suppressed="drop")
    hidden = (masked["cls"] == MASKED_CLASS).to_numpy()
    assert K <= hidden.sum() <= math.floor(F * N)
    assert masked.index.equals(census.index)  # rows in = rows out
    for q in CENSUS_QIS:
        assert (masked.loc[hidden, q].astype(str) == MASK_LABEL).all()
    assert class_sizes(masked, CENSUS_QIS).min() >= K
    assert masked.loc[~hidden].groupby("cls").size().min() >= K
    # drop removes exactly the suppressed rows
    assert dropped.index.equals(census.index[~hidden])
    assert class_sizes(dropped, CENSUS_QIS).min() >= K
    assert dmondrian.verify(dd.from_pandas(masked, npartitions=3), CENSUS_QIS, k=K,
                            allow_unique=row_ids(masked)).ok


def test_parquet_writer_drops_within_the_budget(client, census, tmp_path):
    ddf = dd.from_pandas(census, npartitions=4)
    D.anonymize_to_parquet(ddf, tmp_path / "out", CENSUS_QIS, K, leaf_rows=400, client=client,
                           suppression=F, suppressed="drop", allow_unique=row_ids(ddf))
    back = pd.read_parquet(tmp_path / "out")
    assert N - math.floor(F * N) <= len(back) <= N - K
    assert class_sizes(back, CENSUS_QIS).min() >= K
    assert not (back["age"].astype(str) == MASK_LABEL).any()
    assert np.isin(back.index, census.index).all()


def test_cli_on_dask_counts_the_suppressed_rows(client, census, tmp_path):
    import json

    from dmondrian.cli import main

    census[["age", "zip", "sex"]].to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "out.parquet"
    assert main(["anonymize", str(tmp_path / "in.parquet"), str(out), "--k", str(K), "--qi",
                 "age,zip,sex", "--suppression", str(F), "--scheduler",
                 client.scheduler.address, "--leaf-rows", "400", "--no-progress"]) == 0
    back = pd.read_parquet(out)
    manifest = json.loads((tmp_path / "out.parquet.manifest.json").read_text())
    masked = int((back["age"].astype(str) == MASK_LABEL).sum())
    assert K <= masked <= math.floor(F * N) and len(back) == N
    assert manifest["suppressed"] == {"rows": masked, "share": masked / N, "masked": masked,
                                      "dropped": 0}
    assert manifest["rows"] == {"input": N, "output": N}
