"""A fitted plan's release on Dask, end to end (issue 38): every check that can refuse
runs before anything is visible, and a partition too large for a worker is a typed
refusal that names it."""

from __future__ import annotations

import json
import os

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from hypothesis import given, settings
from hypothesis import strategies as st

from dmondrian.cli import main
from dmondrian.cli._anonymize_dask import with_plan_categories
from dmondrian.errors import MemoryLimitError
from dmondrian.plans import fit_plan
from dmondrian.plans.dask import transform_dask, transform_to_parquet
from dmondrian.synthetic import write_census_parquet

QIS = "age,zip,education,sex"


def test_plan_on_dask_reads_ordinal_categories_in_the_plans_order(tmp_path, monkeypatch,
                                                                 shared_local_cluster):
    """``education`` comes back from Parquet on Dask as a Categorical of unknown
    categories: the manifest's report takes the plan's order, and its figures are
    those of the same release made in memory. The command line runs in this process
    (the same code as ``dmondrian`` run as a command), on the session's worker
    processes by address: a subprocess and a cluster of its own only add start-ups."""
    write_census_parquet(tmp_path / "census", 20_000, seed=4, rows_per_partition=5_000)
    assert not dd.read_parquet(tmp_path / "census")["education"].cat.known
    monkeypatch.chdir(tmp_path)
    common = ["--qi", QIS, "--drop", "person_id", "--seed", "1", "--no-progress"]
    assert main(["anonymize", "census", "fit.parquet", "--k", "10", "--local",
                 "--save-plan", "plan.json", *common]) == 0
    runs = {"local": ["--local"],
            "dask": ["--distributed", "--scheduler", shared_local_cluster.scheduler_address]}
    for name, flags in runs.items():
        assert main(["anonymize", "census", f"{name}/", "--plan", "plan.json", *flags,
                     *common]) == 0
    ncp = {name: json.loads((tmp_path / f"{name}.manifest.json").read_text())["metrics"]["ncp"]
           for name in runs}
    assert ncp["dask"]["per_attribute"]["education"] > 0
    for column, value in ncp["local"]["per_attribute"].items():
        assert ncp["dask"]["per_attribute"][column] == pytest.approx(value, rel=1e-9)
    assert not [p for p in os.listdir(tmp_path) if ".dmondrian-staging-" in p]


def test_plan_categories_come_first_then_the_unseen_ones():
    fitted = pd.DataFrame({"edu": pd.Categorical(["low", "mid", "high"] * 10,
                                                 categories=["low", "mid", "high"],
                                                 ordered=True),
                           "age": np.arange(30)})
    plan = fit_plan(fitted, ["edu", "age"], 5)
    new = pd.DataFrame({"edu": ["mid", "top", "low", "aaa"] * 5, "age": np.arange(20)})
    ddf = dd.from_pandas(new, npartitions=2)
    ddf["edu"] = ddf["edu"].astype("category")  # unknown categories, as from Parquet
    assert not ddf["edu"].cat.known
    out = with_plan_categories(ddf, plan)
    dtype = out["edu"].dtype
    assert list(dtype.categories) == ["low", "mid", "high", "aaa", "top"] and dtype.ordered
    assert out.compute()["edu"].astype(str).tolist() == new["edu"].tolist()


@pytest.fixture(scope="module")
def one_wide_partition():
    """One partition of 400,000 rows x 20 float columns (64 MB), and a plan for it."""
    rng = np.random.default_rng(0)
    n = 400_000
    df = pd.DataFrame({"age": rng.integers(17, 90, n), "zip": rng.integers(10_000, 99_999, n),
                       **{f"x{i}": rng.integers(0, 50, n).astype(np.float64)
                          for i in range(18)}})
    plan = fit_plan(df.iloc[:20_000], ["age", "zip"], 10)
    return dd.from_pandas(df, npartitions=1), plan


@pytest.mark.parametrize("path", ["transform_dask", "transform_to_parquet"])
def test_a_partition_too_large_for_a_worker_is_refused_by_name(one_wide_partition, tmp_path,
                                                                path):
    ddf, plan = one_wide_partition
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      memory_limit="300MB", dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        with pytest.raises(MemoryLimitError) as err:
            if path == "transform_dask":
                transform_dask(plan, ddf, client=client).compute()
            else:
                transform_to_parquet(plan, ddf, tmp_path / "out", client=client)
    message = str(err.value)
    assert "input partition 0 holds 400,000 rows" in message
    assert "smaller row groups or files" in message and "more memory" in message
    assert err.value.memory_limit == 300e6 and err.value.smallest > 300e6
    assert not (tmp_path / "out").exists()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=8))
def test_a_rows_input_position_has_one_definition(lengths):
    # The Dask engine numbers a row by its partition and its place in it; a fitted plan by
    # its row number over the table (its fitted ties are in those numbers). One function
    # owns both (routing.row_positions), and they agree: the same order (the input's)
    # and the same place of each row in its partition.
    from dmondrian.partition.routing import row_offsets, row_positions

    firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int)
    engine = np.concatenate([row_positions(i, n) for i, n in enumerate(lengths)])
    plans = np.concatenate([row_positions(i, n, first=int(f))
                            for i, (n, f) in enumerate(zip(lengths, firsts))])
    assert plans.tolist() == list(range(sum(lengths)))  # the table's row numbers
    assert (np.argsort(engine, kind="stable") == np.argsort(plans, kind="stable")).all()
    assert (np.diff(engine) > 0).all() and (np.diff(plans) > 0).all()
    assert (row_offsets(engine) == plans - np.repeat(firsts, lengths)).all()
    rows = np.arange(max(lengths))[::2]
    for i, (n, f) in enumerate(zip(lengths, firsts)):
        few = rows[rows < n]
        assert (row_positions(i, n, few, first=int(f)) == f + few).all()


def test_the_plans_number_rows_with_the_one_definition(monkeypatch):
    # A plan's counting and publishing tasks and its in-memory placing take a row's
    # position from routing.row_positions, not from a definition of their own.
    from dmondrian.partition import routing
    from dmondrian.plans import dask as plans_dask

    asked = []
    real = routing.row_positions

    def spy(partition, n, rows=None, *, first=None):
        asked.append((partition, n, first))
        return real(partition, n, rows, first=first)

    monkeypatch.setattr(routing, "row_positions", spy)
    rng = np.random.default_rng(3)
    fit = pd.DataFrame({"age": rng.integers(0, 4, 400), "b": rng.integers(0, 3, 400)})
    plan = fit_plan(fit, ["age", "b"], 5, mode="relaxed")
    assert plan.tree.cuts.has_ties
    part = fit.iloc[100:160]
    placer = plans_dask._Placer(plan)
    plans_dask._count(part, placer, 100)
    plan.place(part)
    assert asked == [(0, 60, 100), (0, 60, 0)]


@pytest.mark.parametrize("qis", [["age", "education"], ["education"]])
def test_class_counts_equal_the_rows_counted(qis):
    """The manifest's counts of a plan's release made from its classes (no write task
    counts a row) equal the rows' own counts, classes publishing ``*`` (a new ordinal
    value at the root; every QI hidden with ``education`` alone) included."""
    from dmondrian.metrics.accumulator import ReleaseCounts
    from dmondrian.plans.batch import summarize_batch
    from dmondrian.plans.dask import _class_counts
    from dmondrian.plans.release import decide, publish_rows
    from dmondrian.synthetic import make_census

    plan = fit_plan(make_census(3_000, 1), qis, 10)
    df = make_census(2_000, 2)[qis]
    df["education"] = df["education"].astype(object)
    df.loc[::50, "education"] = "postdoc"
    placed = plan.place(df)
    release = decide(plan, summarize_batch(plan, placed, None, None))
    rows = publish_rows(df, release, placed.node)
    assert (rows["education"] == "*").any()
    got = _class_counts(release, ReleaseCounts(qis))
    want = ReleaseCounts(qis).add(rows)
    assert (got.rows, got.masked) == (len(df), want.masked)
    assert want.masked > 0 or len(qis) > 1
    assert sorted(got.class_sizes()) == sorted(want.class_sizes())
    for q in qis:
        assert got.label_counts(q).sort_index().equals(want.label_counts(q).sort_index())
    assert _class_counts(release, ReleaseCounts(qis, "sex")) is None
