"""entity= on the Dask engine, on a real multi-process LocalCluster."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian.distributed import anonymize_to_parquet, plan
from dmondrian.entities import distinct_per_class
from dmondrian.errors import IdentifyingColumnWarning, ParameterError
from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS, make_events


@pytest.fixture(scope="module")
def cluster_client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


@st.composite
def event_tables(draw):
    n_users = draw(st.integers(20, 150))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = rng.integers(1, draw(st.sampled_from([3, 12])), n_users)
    user = np.repeat(rng.permutation(n_users), rows)
    n = len(user)
    df = pd.DataFrame({"user": user.astype(str),
                       "age": np.repeat(rng.integers(18, 80, n_users), rows),
                       "dev": rng.integers(0, draw(st.sampled_from([2, 6, 40])), n),
                       "pay": rng.random(n)})
    df = df.sample(frac=1.0, random_state=int(rng.integers(1 << 30))).reset_index(drop=True)
    k = draw(st.integers(2, max(2, n_users // 3)))
    return df, k, draw(st.integers(1, 4)), draw(st.sampled_from([2 * k, 60, 10_000]))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(event_tables())
def test_every_class_holds_k_entities_on_dask(cluster_client, case):
    df, k, parts, leaf_rows = case
    out = dmondrian.anonymize(dd.from_pandas(df, npartitions=parts), ["age", "dev"], k=k,
                              entity="user", class_column="cls", client=cluster_client,
                              leaf_rows=leaf_rows, progress=False).compute()
    assert "user" not in out.columns
    out = out.sort_index()
    assert len(out) == len(df) and out["pay"].equals(df["pay"])
    assert distinct_per_class(pd.factorize(out["cls"])[0], df["user"].to_numpy()).min() >= k


def test_parquet_writer_and_plan_count_people(cluster_client, tmp_path):
    ev = make_events(1_500, seed=11)
    ddf = dd.from_pandas(ev, npartitions=3)
    anonymize_to_parquet(ddf, tmp_path / "out", EVENT_QUASI_IDENTIFIERS, 10, entity="user_id",
                         class_column="cls", client=cluster_client, leaf_rows=2_000,
                         progress=False, write_options={"write_index": True})
    # The input's row numbers, written on request only, tie each row to its user.
    out = pd.read_parquet(tmp_path / "out").sort_index()
    assert out.index.equals(ev.index)
    assert "user_id" not in out.columns and len(out) == len(ev)
    users = ev["user_id"].to_numpy()[out.index.to_numpy()]
    assert distinct_per_class(pd.factorize(out["cls"])[0], users).min() >= 10


def test_a_top_cut_short_of_people_is_undone(cluster_client):
    # Two people with 60 rows each at ages 20-29, twenty with one row at 60:
    # the top phase's row counts allow the age cut, the entity pass undoes it.
    heavy = pd.DataFrame({"user": np.repeat([0, 1], 60), "age": np.tile(np.arange(20, 30), 12),
                          "dev": np.arange(120) % 3})
    light = pd.DataFrame({"user": np.arange(2, 22), "age": 60, "dev": np.arange(20) % 3})
    df = pd.concat([heavy, light], ignore_index=True)
    ddf = dd.from_pandas(df, npartitions=2)
    rows = plan(ddf, ["age", "dev"], 5, client=cluster_client, leaf_rows=10, progress=False)
    people = plan(ddf, ["age", "dev"], 5, entity="user", client=cluster_client, leaf_rows=10,
                  progress=False)
    assert rows.n_leaves > 1 and people.n_leaves < rows.n_leaves
    assert "entity pass" in people.timings


def test_dask_refuses_what_it_cannot_bound(cluster_client):
    ddf = dd.from_pandas(make_events(200, seed=12), npartitions=2)
    with pytest.raises(ParameterError, match="noise"):
        dmondrian.anonymize(ddf, EVENT_QUASI_IDENTIFIERS, k=5, entity="user_id",
                            noise={"amount": {"epsilon": 1.0, "bounds": (0, 100)}},
                            client=cluster_client)
    with pytest.raises(ParameterError, match="distinct"):
        dmondrian.anonymize(ddf, EVENT_QUASI_IDENTIFIERS, k=5, entity="user_id", t=0.3,
                            sensitive="event_type", client=cluster_client)


def test_dask_flags_a_person_key(cluster_client):
    ddf = dd.from_pandas(make_events(1_500, seed=14), npartitions=2)
    with pytest.warns(IdentifyingColumnWarning, match="entity='user_id'"):
        plan(ddf, EVENT_QUASI_IDENTIFIERS, 10, client=cluster_client, progress=False)
