"""The Dask engine's memory: sizes from a worker's budget after its baseline, the
smallest limit that works, the typed refusal of a cluster too small, input
partitions routed in pieces."""

from __future__ import annotations

import dataclasses

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from distributed_helpers import CENSUS_QIS, make_census, row_ids
from hypothesis import given, settings
from hypothesis import strategies as st

from dmondrian import distributed as D
from dmondrian._dask import memory as M
from dmondrian._dask import shuffle_sizes
from dmondrian._dask.graph import constant
from dmondrian._dask.shuffle import routed_partitions
from dmondrian._dask.shuffle_sizes import piece_bounds
from dmondrian.errors import DMondrianError, MemoryLimitError

MB = 1e6


# -- the sizing rules (pure) -------------------------------------------------------------------


def test_budget_is_the_limit_at_the_pause_fraction_less_baseline_and_p2p():
    mem = M.WorkerMemory(1000 * MB, 2, 300 * MB, 0.8, 100 * MB)
    assert mem.per_thread == pytest.approx((800 - 300 - 100) * MB / 2)
    # dask's default 1 GiB p2p send buffer counts for at most a quarter of the limit.
    big_buffers = dataclasses.replace(mem, p2p_buffers=2**30 + 100 * 2**20)
    assert big_buffers.p2p_reserve == pytest.approx(250 * MB)
    # A heavier baseline leaves less.
    assert dataclasses.replace(mem, baseline=500 * MB).per_thread < mem.per_thread


def test_sizes_shrink_with_the_budget_and_stay_in_bounds():
    row, d = 60.0, 5
    budgets = [1 * MB, 50 * MB, 200 * MB, 1e9, 1e12]
    leaves = [M.leaf_rows_for(b, row, d) for b in budgets]
    outputs = [M.output_partition_cap(b, row, d) for b in budgets]
    assert leaves == sorted(leaves) and outputs == sorted(outputs)
    assert leaves[0] == M.LEAF_ROWS_MIN and leaves[-1] == M.LEAF_ROWS_MAX
    assert all(o >= leaf for o, leaf in zip(outputs, leaves, strict=True))
    # In between, a share of the budget at a row's output-partition cost.
    assert leaves[2] == int(M.LEAF_SHARE * 200 * MB / M.output_row_cost(row, d))
    assert outputs[2] * M.output_row_cost(row, d) <= M.OUTPUT_SHARE * 200 * MB


def test_input_pieces_fit_what_the_partition_leaves():
    row, d = 54.0, 5
    # A partition that fits is routed whole.
    assert M.input_piece_rows(500 * MB, 250_000, row, d) == 250_000
    piece = M.input_piece_rows(150 * MB, 1_000_000, row, d)
    assert M.PIECE_ROWS_MIN <= piece < 1_000_000
    assert 1_000_000 * row + piece * M.input_row_cost(row, d) <= 150 * MB
    # Less memory, smaller pieces, never below the floor; unknown memory: whole.
    assert M.input_piece_rows(80 * MB, 1_000_000, row, d) < piece
    assert M.input_piece_rows(1 * MB, 1_000_000, row, d) == M.PIECE_ROWS_MIN
    assert M.input_piece_rows(None, 1_000_000, row, d) == 1_000_000


@settings(max_examples=60, deadline=None)
@given(limit=st.floats(100 * MB, 64e9), baseline=st.floats(50 * MB, 2e9),
       threads=st.integers(1, 8), p2p=st.floats(0, 2e9), pause=st.floats(0.5, 0.95),
       row=st.floats(8, 4000), d=st.integers(1, 12), partition=st.integers(1, 5_000_000),
       leaf=st.integers(1_000, 100_000))
def test_smallest_limit_is_where_the_check_starts_to_pass(limit, baseline, threads, p2p,
                                                           pause, row, d, partition, leaf):
    mem = M.WorkerMemory(limit, threads, baseline, pause, p2p)
    smallest = M.smallest_limit(mem, row, d, partition, leaf)
    at = dataclasses.replace(mem, limit=smallest * 1.0001)
    below = dataclasses.replace(mem, limit=smallest * 0.999)
    M.check_fits(at, row, d, partition, leaf)
    with pytest.raises(MemoryLimitError) as err:
        M.check_fits(below, row, d, partition, leaf)
    assert err.value.smallest == pytest.approx(smallest)
    assert err.value.memory_limit == below.limit
    # At the smallest limit the sizes the same rules give fit the budget: a
    # partition read, and one leaf in an output partition.
    budget = at.per_thread
    assert M.READ_COPIES * partition * row <= budget * 1.001
    assert leaf * M.output_row_cost(row, d) <= M.OUTPUT_SHARE * budget * 1.001
    # More baseline or larger partitions need more memory.
    more = dataclasses.replace(mem, baseline=baseline + 100 * MB)
    assert M.smallest_limit(more, row, d, partition, leaf) > smallest
    assert M.smallest_limit(mem, row, d, partition * 2, leaf) >= smallest


def test_the_refusal_names_both_limits():
    mem = M.WorkerMemory(300 * MB, 1, 230 * MB, 0.8, 56 * MB)
    with pytest.raises(MemoryLimitError) as err:
        M.check_fits(mem, 54.0, 5, 1_000_000, 2_000)
    message = str(err.value)
    assert "300 MB" in message and f"{err.value.smallest / MB:,.0f} MB" in message
    assert isinstance(err.value, DMondrianError)
    M.check_fits(None, 54.0, 5, 1_000_000, 2_000)  # no limit: nothing to check


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 5_000), min_size=1, max_size=6), st.integers(1, 3_000))
def test_pieces_cover_every_row_once(rows, piece):
    bounds = piece_bounds(piece, tuple(rows))
    for p, n in enumerate(rows):
        mine = [(a, b) for q, a, b in bounds if q == p]
        covered = np.concatenate([np.arange(n)[a:b] for a, b in mine])
        assert covered.tolist() == list(range(n))
        assert all((n if b is None else b) - a <= piece for a, b in mine) or len(mine) == 1
        assert mine[-1][1] is None


# -- on clusters -------------------------------------------------------------------------------


def test_a_cluster_too_small_for_any_plan_is_refused_before_any_pass(tmp_path):
    df = make_census(20_000, seed=3)
    ddf = dd.from_pandas(df, npartitions=2)
    # A worker process holds about 175 MB once the engine's libraries are
    # loaded: at 250 MB, pausing at 80 % and dask's p2p buffers, nothing fits.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      memory_limit="250MB", dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        with pytest.raises(MemoryLimitError) as err:
            D.anonymize_to_parquet(ddf, tmp_path / "out", CENSUS_QIS, 10, client=client,
                                   allow_unique=row_ids(ddf))
        assert not any(client.run(_tasks_ran).values())
    assert err.value.memory_limit == 250e6 and err.value.smallest > 250e6
    assert "250 MB" in str(err.value) and not (tmp_path / "out").exists()


def test_leaf_rows_beyond_the_table_sizes_by_the_table(process_cluster, tmp_path):
    """leaf_rows=10**9 keeps everything in one leaf; the memory a leaf needs is that of
    the table's 4,000 rows, not of 10**9 (issue 25, bug 2: 361,692 MB were asked, far
    over the shared workers' 2 GiB limit)."""
    df = make_census(4000, seed=5)
    ddf = dd.from_pandas(df, npartitions=2)
    top = D.anonymize_to_parquet(ddf, tmp_path / "out", CENSUS_QIS, 10, client=process_cluster,
                                 leaf_rows=10**9, allow_unique=row_ids(ddf))
    assert top.n_leaves == 1
    released = pd.read_parquet(tmp_path / "out")
    assert len(released) == 4000
    assert released.groupby(CENSUS_QIS, observed=True).size().min() >= 10


def _tasks_ran(dask_worker=None) -> bool:
    return bool(dask_worker.state.log)


@pytest.fixture(scope="module")
def one_big_file(tmp_path_factory):
    """One Parquet file of 12,000 rows: one input partition."""
    path = tmp_path_factory.mktemp("big") / "one.parquet"
    df = make_census(12_000, seed=8)
    df.to_parquet(path)
    return path, df


def test_one_big_file_is_routed_in_bounded_pieces_with_the_same_release(client, one_big_file):
    path, df = one_big_file
    ddf = dd.read_parquet(path)
    assert ddf.npartitions == 1
    top = D.plan(ddf, CENSUS_QIS, 10, client=client, leaf_rows=1_500, mode="relaxed",
                 class_column="cls", allow_unique=row_ids(ddf))
    assert top.input_piece_rows == 0  # the in-process cluster's memory holds it whole
    pieces = dataclasses.replace(top, input_piece_rows=5_000)
    routed = routed_partitions(ddf, pieces, constant(pieces, "plan"))
    sizes = [len(r) for r in client.compute(routed, sync=True)]
    assert sizes == [4_000, 4_000, 4_000]
    whole = D.apply_plan(ddf, top, "p2p").compute().sort_index()
    cut = D.apply_plan(ddf, pieces, "p2p").compute().sort_index()
    pd.testing.assert_frame_equal(whole, cut)
    assert cut["cls"].value_counts().min() >= 10


def test_the_plan_cuts_input_partitions_its_workers_cannot_route_whole(client, one_big_file,
                                                                       tmp_path, monkeypatch):
    path, df = one_big_file
    row = dd.read_parquet(path).partitions[0].compute().memory_usage(deep=True).sum() / len(df)
    # Workers whose budget holds the partition but routes only a part of it at once.
    budget = 12_000 * row + 2 * 4_000 * M.input_row_cost(row, 5)
    small = M.WorkerMemory(4e9, 1, 0.8 * 4e9 - budget, 0.8, 0.0)
    monkeypatch.setattr(shuffle_sizes, "measure_workers", lambda c: small)
    monkeypatch.setattr(M, "PIECE_ROWS_MIN", 1_000)
    top = D.anonymize_to_parquet(dd.read_parquet(path), tmp_path / "out", CENSUS_QIS, 10,
                                 client=client, leaf_rows=1_500, class_column="cls",
                                 allow_unique=["person_id"])  # compared below
    assert 1_000 <= top.input_piece_rows < 12_000 and top.input_rows == (12_000,)
    out = pd.read_parquet(tmp_path / "out")
    assert len(out) == len(df) and out["cls"].value_counts().min() >= 10
    assert sorted(out["person_id"]) == sorted(df["person_id"])
