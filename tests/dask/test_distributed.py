"""The distributed engine on an in-process cluster: equivalence, quality, balance, layouts.

Real multi-process clusters, larger-than-memory data and fault tolerance are
in test_distributed_clusters.py.
"""

from __future__ import annotations

import os

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from checks import SENSITIVE_KINDS, assert_valid_release, sensitive_with_missing
from distributed_helpers import (
    ADULT_QIS,
    CENSUS_QIS,
    JOB_HIERARCHY,
    MIXED_QIS,
    average_ncp,
    load_adult,
    make_census,
    mixed_table,
    row_ids,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import distributed as D
from dmondrian import errors, local
from dmondrian._dask import counting_write, leaves, shuffle, top_phase
from dmondrian._dask.global_domain import encode_keys
from dmondrian._dask.memory import output_row_cost
from dmondrian._dask.options import leaf_rows_for, output_partition_rows
from dmondrian._dask.plan import Recount, Verdict, pack_output_partitions
from dmondrian.partition.routing import route, row_positions

#: The writers write no index by default (dmondrian.release.row_order); these tests compare the
#: files with the lazy release row by row, by index, and allow it (``"index"`` in
#: ``allow_unique``): row numbers give the input's order back.
INDEXED = {"write_index": True}


def _collect(ddf_out) -> pd.DataFrame:
    return ddf_out.compute().sort_index()


def _assert_valid(original, out, qis, k):
    """checks.assert_valid_release, with dask's string conversion of other columns undone."""
    others = {c: out[c].dtype for c in original.columns if c not in qis}
    assert_valid_release(original.astype(others), out, qis, k, class_column="cls")


def _same_values(a: pd.DataFrame, b: pd.DataFrame):
    assert list(a.columns) == list(b.columns)
    for col in a.columns:
        assert a[col].astype(str).tolist() == b[col].astype(str).tolist(), col


def _same_classes(a, b):
    """Two class labellings of the same rows group them identically."""
    pairs = pd.DataFrame({"a": np.asarray(a), "b": np.asarray(b)})
    assert len(pairs.drop_duplicates()) == pairs["a"].nunique() == pairs["b"].nunique()


# -- equivalence -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode,generalization", [("strict", "range"), ("relaxed", "range"),
                                                 ("strict", "midpoint"), ("relaxed", "mean")])
def test_one_leaf_equals_local_engine(client, mode, generalization):
    df = mixed_table(3000, seed=1)
    options = dict(mode=mode, generalization=generalization, class_column="cls",
                   hierarchies={"job": JOB_HIERARCHY})
    expected = local.anonymize(df, MIXED_QIS, 7, **options, allow_unique=row_ids(df))
    ddf = dd.from_pandas(df, npartitions=5)
    got = _collect(D.anonymize(ddf, MIXED_QIS, 7, leaf_rows=len(df), client=client, **options,
                               allow_unique=row_ids(ddf)))
    _same_values(got, expected)
    assert got.index.equals(expected.index)


def _uneven_partitions(df):
    """A tiny, a one-row, an empty and two large partitions: positions span partitions."""
    from dask import delayed

    n = len(df)
    cuts = [0, 10, 11, n // 2, n // 2, n]
    pieces = [delayed(lambda f: f, pure=True)(df.iloc[a:b])
              for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    return dd.from_delayed(pieces, meta=df.iloc[:0], verify_meta=False)


@pytest.mark.parametrize("mode", ["strict", "relaxed"])
def test_small_leaves_equal_local_engine_when_samples_are_complete(client, mode):
    # A table this small is planned from a complete sample, and relaxed cuts
    # send left the very tied rows the kernel would (the first in input order):
    # the top phase makes the local engine's cuts, so many small leaves give
    # the local release, on every QI kind, with missing values and duplicates.
    df = mixed_table(3000, seed=21)
    options = dict(mode=mode, class_column="cls", hierarchies={"job": JOB_HIERARCHY})
    expected = local.anonymize(df, MIXED_QIS, 4, **options, allow_unique=row_ids(df))
    top = D.plan(_uneven_partitions(df), MIXED_QIS, 4, leaf_rows=250, client=client, **options,
                 allow_unique=row_ids(df))
    got = _collect(D.apply_plan(_uneven_partitions(df), top))
    assert top.n_leaves >= 12
    if mode == "relaxed":
        assert top.tree.has_ties  # some top-phase cut split the rows tied at its median
    assert got.index.equals(expected.index)
    _same_values(got.drop(columns="cls"), expected.drop(columns="cls"))
    _same_classes(got["cls"], expected["cls"])


def test_dispatch_and_estimator_accept_dask(client):
    df = mixed_table(400, seed=2)
    ddf = dd.from_pandas(df, npartitions=2)
    out = dmondrian.anonymize(ddf, ["age", "zip"], 5, leaf_rows=1000, client=client)
    assert isinstance(out, dd.DataFrame)
    _same_values(out.compute().sort_index(), local.anonymize(df, ["age", "zip"], 5))
    est = dmondrian.MondrianAnonymizer(k=5, quasi_id=["age", "zip"]).fit(df)
    assert isinstance(est.transform(ddf), dd.DataFrame)


def test_output_meta_matches_partitions(client):
    df = mixed_table(2000, seed=3)
    out = D.anonymize(dd.from_pandas(df, npartitions=3), MIXED_QIS, 5, leaf_rows=300,
                      client=client, class_column="cls", generalization="midpoint",
                      allow_unique=row_ids(df))
    got = out.compute()
    labels = ["grade", "color", "job"]  # midpoint publishes numbers and dates as such
    assert got.drop(columns=labels).dtypes.to_dict() == out.drop(columns=labels).dtypes.to_dict()
    assert got["age"].dtype == np.float64 and got["when"].dtype == out["when"].dtype
    for q in labels:
        # Labels are Categoricals of text, each partition with its own categories.
        assert isinstance(got[q].dtype, pd.CategoricalDtype), q
        assert got[q].cat.categories.dtype == leaves.TEXT and not out[q].cat.known, q


def test_lazy_labels_are_the_local_engines_categoricals(client):
    df = mixed_table(1500, seed=4)
    qis = ["age", "when", "color", "job"]
    got = D.anonymize(dd.from_pandas(df, npartitions=3), qis, 5, leaf_rows=len(df),
                      client=client, allow_unique=row_ids(df)).compute().sort_index()
    ref = local.anonymize(df, qis, 5, allow_unique=row_ids(df))
    for q in qis:
        assert isinstance(got[q].dtype, pd.CategoricalDtype), q
        assert got[q].tolist() == ref[q].tolist(), q
        assert set(got[q].cat.categories) == set(ref[q].cat.categories), q


def test_lazy_result_writes_parquet_of_many_labels_per_partition(client, tmp_path):
    # dask takes every file's schema from the meta: more than 127 labels in a
    # partition need the 32-bit codes it declares (dask issue 11830).
    df = mixed_table(4000, seed=5)
    out = D.anonymize(dd.from_pandas(df, npartitions=2), ["age", "zip", "income"], 5,
                      leaf_rows=2500, client=client, class_column="cls",
                      allow_unique=[*row_ids(df), "index"])  # its row numbers are written
    parts = out.to_delayed()
    assert max(len(p.compute()["income"].cat.categories) for p in parts) > 127
    out.to_parquet(tmp_path / "release", write_index=True)  # compared by index below
    import pyarrow.parquet as pq

    schema = pq.read_schema(sorted((tmp_path / "release").glob("*.parquet"))[0])
    assert str(schema.field("income").type) == \
        "dictionary<values=string, indices=int32, ordered=0>"
    back = dd.read_parquet(tmp_path / "release").compute().sort_index()
    got = out.compute().sort_index()
    assert isinstance(back["income"].dtype, pd.CategoricalDtype)
    pd.testing.assert_index_equal(back.index, got.index, exact=False)
    for col in got.columns:
        assert back[col].tolist() == got[col].tolist(), col


def test_text_labels_convert_categories_not_rows():
    s = pd.Series(pd.Categorical([1, "1", 2, None], categories=[1, "1", 2]), index=[5, 6, 7, 8])
    out = leaves.text_labels(s)
    assert out.cat.categories.tolist() == ["1", "2"] and out.cat.categories.dtype == leaves.TEXT
    assert out.tolist()[:3] == ["1", "1", "2"] and pd.isna(out.iloc[3])
    assert out.index.tolist() == [5, 6, 7, 8]
    text = pd.Series(pd.Categorical(["a", "b"]))
    assert leaves.text_labels(text) is text


# -- quality, balance, validity ----------------------------------------------------------------


def _release_and_ncp(client, df, qis, k, leaf_rows, npartitions=8, ddf=None, **options):
    ddf = dd.from_pandas(df, npartitions=npartitions) if ddf is None else ddf
    options.setdefault("allow_unique", row_ids(ddf))
    top = D.plan(ddf, qis, k, leaf_rows=leaf_rows, client=client, class_column="cls",
                 **options)
    out = _collect(D.apply_plan(ddf, top))
    return top, out, average_ncp(df.loc[out.index], out["cls"].to_numpy(), qis)


def _local_ncp(df, qis, k, **options):
    ref = local.anonymize(df, qis, k, class_column="cls", **options, allow_unique=row_ids(df))
    return average_ncp(df, ref["cls"].to_numpy(), qis)


@pytest.mark.parametrize("sample_rows", [D.SAMPLE_ROWS, 64])
def test_quality_and_balance_on_census(client, sample_rows):
    df = make_census(30_000, seed=4)
    k, leaf_rows = 10, 2000
    top, out, ncp = _release_and_ncp(client, df, CENSUS_QIS, k, leaf_rows,
                                     sample_rows=sample_rows)
    reference = _local_ncp(df, CENSUS_QIS, k)
    assert ncp <= reference * 1.02, (ncp, reference)
    assert top.n_leaves > 8 and top.leaf_counts.sum() == len(df)
    assert top.leaf_counts.max() <= leaf_rows
    # Output partitions pack leaves up to the input's mean partition (8 here).
    assert top.output_partition_rows == -(-len(df) // 8)
    assert all(top.leaf_counts[p].sum() <= top.output_partition_rows
               for p in top.output_partitions if len(p) > 1)
    assert len(top.output_partitions) < top.n_leaves
    _assert_valid(df, out, CENSUS_QIS, k)


def test_output_partitions_pack_an_input_partition_within_memory():
    """Output partitions hold about an input partition's rows, within half a thread's
    budget, never fewer rows than a leaf; consecutive leaves are packed up to that size."""
    assert output_partition_rows(2000, 30_000, 8, 2e9, 100.0, 5) == 3750
    # A small worker caps them (half its budget at a row's output-partition cost)...
    cap = leaf_rows_for(4e8, 100.0, 5, share=0.5)
    assert cap < 1_000_000 and output_partition_rows(1000, 10**8, 100, 4e8, 100.0, 5) == cap
    assert cap == int(0.5 * 4e8 / output_row_cost(100.0, 5))
    # ... but one leaf always fits.
    assert output_partition_rows(400_000, 10**6, 10, 1e8, 100.0, 5) == 400_000
    assert pack_output_partitions(np.array([3, 3, 3, 7, 1]), 6) == [[0, 1], [2], [3], [4]]


@given(st.lists(st.integers(1, 50), min_size=1, max_size=30), st.integers(1, 120),
       st.integers(1, 4))
@settings(max_examples=200, deadline=None)
def test_balanced_partitions_run_in_whole_rounds(counts, rows, threads):
    # Consecutive leaves, every one once; as many partitions as the packing's, else the
    # next multiple of the threads (or one a leaf), none over the rows in several leaves.
    from dmondrian._dask.shuffle_sizes import balanced_partitions

    counts = np.asarray(counts)
    packed = pack_output_partitions(counts, rows)
    out = balanced_partitions(counts, rows, threads)
    assert [i for p in out for i in p] == list(range(len(counts)))
    assert all(p for p in out)
    assert all(counts[p].sum() <= rows or len(p) == 1 for p in out)
    assert out == packed or (len(out) > len(packed) and (
        len(out) % threads == 0 or len(out) == len(counts)))


def test_one_input_partition_is_written_by_every_thread(client):
    # One input partition of several leaves: as many write tasks as the cluster's threads,
    # not one task doing every leaf while the other threads wait.
    df = make_census(20_000, seed=4)
    ddf = dd.from_pandas(df, npartitions=1)
    top = D.plan(ddf, CENSUS_QIS, 10, client=client, leaf_rows=3_000, class_column="cls",
                 allow_unique=row_ids(ddf))
    threads = sum(client.nthreads().values())
    assert threads == 2 and top.n_leaves >= 4
    assert len(top.output_partitions) % threads == 0
    _assert_valid(df, _collect(D.apply_plan(ddf, top)), CENSUS_QIS, 10)


@pytest.mark.parametrize("k,mode", [(5, "strict"), (50, "strict"), (5, "relaxed"),
                                    (10, "relaxed")])
def test_quality_on_adult(client, k, mode):
    # Issue #3: with leaves far smaller than the table, NCP within +2 % of the
    # local engine's. Relaxed mode holds it only if the top phase splits median
    # ties in the kernel's order (a hash of the QI values cost +2.4 % at k=5).
    df = load_adult()
    if df is None:
        pytest.skip("set DMONDRIAN_ADULT_DIR to the UCI Adult directory to run this test")
    assert len(df) == 30162
    top, out, ncp = _release_and_ncp(client, df, ADULT_QIS, k, 2000, mode=mode)
    reference = _local_ncp(df, ADULT_QIS, k, mode=mode)
    assert top.n_leaves >= 16
    assert ncp <= reference * 1.02, (ncp, reference)
    assert out.groupby("cls").size().min() >= k
    _assert_valid(df, out, ADULT_QIS, k)


@pytest.mark.parametrize("sample_rows", [D.SAMPLE_ROWS, 32])
def test_relaxed_top_phase_splits_median_ties(client, sample_rows):
    rng = np.random.default_rng(5)
    n = 8000
    df = pd.DataFrame({"a": rng.choice([0, 1, 2], n, p=[.1, .8, .1]),
                       "b": rng.integers(0, 1000, n), "x": np.arange(n)})
    # x, a row number, is released as is: the releases are compared by it.
    top, out, ncp = _release_and_ncp(client, df, ["a", "b"], 4, 1000, mode="relaxed",
                                     sample_rows=sample_rows, allow_unique=["x"])
    assert top.tree.has_ties  # some top-phase cut split a tie
    assert top.leaf_counts.max() <= 1000
    assert out.groupby("cls").size().min() >= 4
    _assert_valid(df, out, ["a", "b"], 4)
    # 80 % of the rows share a = 1: every cut on a splits that tie. Ties go left
    # in input order, as in the kernel, so with a complete sample (8,000 rows)
    # the classes are the local engine's.
    reference = local.anonymize(df, ["a", "b"], 4, mode="relaxed", class_column="cls",
                                allow_unique=["x"])
    if sample_rows == D.SAMPLE_ROWS:
        _same_classes(out["cls"], reference.loc[out.index, "cls"])
    # A sparse sample (2,048 rows at the root) only estimates the medians and
    # where a tie's split lies: leaves of 430-580 rows instead of 500 cost this
    # toy table (NCP 0.004) about 12 %, with either tie rule.
    assert ncp <= average_ncp(df, reference["cls"].to_numpy(), ["a", "b"]) * 1.15


# -- adversarial partition layouts -------------------------------------------------------------


def _layouts(df, key):
    n = len(df)
    by_qi = df.sort_values(key, kind="stable")
    yield "sorted by a QI", dd.from_pandas(by_qi, npartitions=10, sort=False), by_qi
    const = df.sort_values("sex", kind="stable")
    yield "one QI constant per partition", dd.from_pandas(const, npartitions=2, sort=False), const
    cuts = [0, 10, 11, n // 2, n - 5, n]
    pieces = [df.iloc[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    yield "wildly different sizes", dd.from_delayed(
        [_delayed(p) for p in pieces], meta=df.iloc[:0], verify_meta=False), df
    empty = [df.iloc[:0], df.iloc[: n // 3], df.iloc[:0], df.iloc[n // 3:], df.iloc[:0]]
    yield "empty partitions", dd.from_delayed([_delayed(p) for p in empty], meta=df.iloc[:0],
                                              verify_meta=False), df


def _delayed(frame):
    from dask import delayed

    return delayed(lambda f: f, pure=True)(frame)


def _assert_release_file(path, labels, class_column):
    """A release file as the writers make it: labels dictionaries of 32-bit codes and
    no statistics; numbers with statistics and no dictionary, class ids with one."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    for q in labels:
        assert str(pf.schema_arrow.field(q).type) == \
            "dictionary<values=string, indices=int32, ordered=0>", q
    meta = pf.metadata.row_group(0)
    names = [meta.column(i).path_in_schema for i in range(meta.num_columns)]
    stats = {n: meta.column(i).statistics for i, n in enumerate(names)}
    encodings = {n: meta.column(i).encodings for i, n in enumerate(names)}
    for q in labels:
        assert stats[q] is None or not stats[q].has_min_max, q
        assert any("DICTIONARY" in e for e in encodings[q]), q
    assert stats["person_id"].has_min_max
    # Dictionaries for labels and class ids, not for the input's distinct numbers.
    assert any("DICTIONARY" in e for e in encodings[class_column])
    assert not any("DICTIONARY" in e for e in encodings["person_id"])


def test_lazy_release_writes_parquet_as_the_sink_does(client, tmp_path):
    """The lazy release's to_parquet runs the writers' graph (one task anonymizes and
    writes each output partition); an option only dask's writer has runs dask's, with
    the sink's defaults; a caller's own write_statistics wins either way."""
    import dask
    import pyarrow.parquet as pq

    df = make_census(3000, seed=2)
    out = D.anonymize(dd.from_pandas(df, npartitions=2), CENSUS_QIS, 5, leaf_rows=1000,
                      class_column="cls", client=client,
                      allow_unique=[*row_ids(df), "index"])  # its row numbers are written
    assert isinstance(out, dd.DataFrame)
    expected = out.compute().sort_index()
    with dask.config.set({"optimization.fuse.active": False}):
        keys = [str(k) for k in out.to_parquet(tmp_path / "unused", compute=False)
                .__dask_graph__()]
    # (Output partitions written on the whole-row path, input partitions on the keys path.)
    assert any("write_output_partition" in k or "write_input_partition" in k for k in keys)
    assert not any("toparquetdata" in k for k in keys)
    # The index is asked for: the files are compared with the lazy release by index.
    assert out.to_parquet(tmp_path / "own", write_index=True) is None
    assert out.to_parquet(tmp_path / "dasks", name_function=lambda i: f"p{i}.parquet",
                          write_index=True) is None
    assert sorted(f.name for f in (tmp_path / "dasks").glob("*.parquet"))[0] == "p0.parquet"
    for folder in ("own", "dasks"):
        files = sorted((tmp_path / folder).glob("*.parquet"))
        assert files, folder
        for f in files:
            _assert_release_file(f, CENSUS_QIS, "cls")
        back = pd.read_parquet(tmp_path / folder).sort_index()
        _same_values(back[list(expected.columns)], expected)
    out.to_parquet(tmp_path / "asked", write_statistics=True)
    meta = pq.ParquetFile(sorted((tmp_path / "asked").glob("*.parquet"))[0]).metadata
    ages = [i for i in range(meta.num_columns)
            if meta.row_group(0).column(i).path_in_schema == "age"]
    assert meta.row_group(0).column(ages[0]).statistics.has_min_max


def test_parquet_release_equals_the_lazy_release(client, tmp_path):
    """anonymize_to_parquet writes what anonymize computes, labels as Parquet dictionaries."""
    import pyarrow.parquet as pq

    df = make_census(6000, seed=9)
    # A non-QI Categorical with more codes than int8 holds, in uneven partitions.
    df["ward"] = pd.Categorical([f"w{i % 300}" for i in range(len(df))])
    ddf = dd.from_pandas(df, npartitions=4)
    options = dict(leaf_rows=400, mode="relaxed", class_column="cls", client=client)
    lazy = _collect(D.anonymize(ddf, CENSUS_QIS, 5, **options, allow_unique=row_ids(ddf)))
    top = D.anonymize_to_parquet(ddf, tmp_path / "out", CENSUS_QIS, 5, **options,
                                 write_options=INDEXED, allow_unique=[*row_ids(ddf), "index"])
    assert max(len(p) for p in top.output_partitions) > 1  # several leaves share one
    files = sorted((tmp_path / "out").glob("part.*.parquet"))
    assert len(files) == len(top.output_partitions)
    for f in files:
        _assert_release_file(f, CENSUS_QIS, "cls")
        assert pq.read_schema(f).field("ward").type.index_type == "int32"
    back = pd.read_parquet(tmp_path / "out").sort_index()
    assert isinstance(back["age"].dtype, pd.CategoricalDtype)
    _same_values(back[list(lazy.columns)], lazy)
    assert len(dd.read_parquet(tmp_path / "out").compute()) == len(df)


@pytest.mark.parametrize("method", ["tasks", "disk"])
def test_every_shuffle_sends_rows_to_the_planned_partition(client, method):
    """The task and disk shuffles read the routed partition numbers as p2p does."""
    import dask

    ddf = dd.from_pandas(make_census(8000, seed=21), npartitions=4)
    top = D.plan(ddf, CENSUS_QIS, 5, leaf_rows=500, client=client, class_column="cls",
                 allow_unique=row_ids(ddf))
    assert len(top.output_partitions) > 4
    expected = _collect(D.apply_plan(ddf, top, "p2p"))
    with dask.config.set(scheduler="sync"):
        got = _collect(D.apply_plan(ddf, top, method))
    pd.testing.assert_frame_equal(got, expected)


def _log_routing(monkeypatch, calls):
    """Append an "x" to the file ``calls`` each time an input partition is routed
    (from any worker thread); returns ``calls``."""
    attach = shuffle.attach_leaf

    def logged(*args, **kwargs):
        with open(calls, "a") as fh:
            fh.write("x")
        return attach(*args, **kwargs)

    monkeypatch.setattr(shuffle, "attach_leaf", logged)
    return calls


def test_parquet_writer_counts_leaves_in_the_shuffle_pass(client, tmp_path, monkeypatch):
    """One top pass: the leaves are counted exactly while the rows are routed, once."""
    df = make_census(20000, seed=23)
    ddf = dd.from_pandas(df, npartitions=5)
    options = dict(leaf_rows=1500, class_column="cls", client=client)
    counted = D.plan(ddf, CENSUS_QIS, 10, **options, allow_unique=row_ids(ddf))
    lazy = _collect(D.apply_plan(ddf, counted))
    calls = _log_routing(monkeypatch, tmp_path / "calls")
    top = D.anonymize_to_parquet(ddf, tmp_path / "out", CENSUS_QIS, 10, **options,
                                 write_options=INDEXED, allow_unique=[*row_ids(ddf), "index"])
    assert counted.passes == 2 and top.passes == 1
    assert calls.read_text() == "x" * ddf.npartitions  # routed once, counted and shuffled
    assert top.counted and top.undone_cuts == 0
    np.testing.assert_array_equal(top.leaf_counts, counted.leaf_counts)
    back = pd.read_parquet(tmp_path / "out").sort_index()
    _same_values(back[list(lazy.columns)], lazy)


def test_lazy_result_counts_leaves_in_the_shuffle_pass(client, tmp_path, monkeypatch):
    """With a cluster that outlives the call, the lazy path makes one pass before the shuffle."""
    df = make_census(20000, seed=23)
    ddf = dd.from_pandas(df, npartitions=5)
    options = dict(leaf_rows=1500, class_column="cls", client=client)
    counted = _collect(D.apply_plan(ddf, D.plan(ddf, CENSUS_QIS, 10, **options,
                                                allow_unique=row_ids(ddf))))
    def no_pass(*args, **kwargs):
        raise AssertionError("a counting pass ran")

    calls = _log_routing(monkeypatch, tmp_path / "calls")
    monkeypatch.setattr(top_phase, "region_pass", no_pass)
    out = D.anonymize(ddf, CENSUS_QIS, 10, **options,
                      allow_unique=[*row_ids(ddf), "index"])  # its row numbers are written
    got = _collect(out)
    assert calls.read_text() == "x" * ddf.npartitions  # routed once, counted and shuffled
    _same_values(got, counted)
    assert (got["cls"].to_numpy() == counted["cls"].to_numpy()).all()
    out.to_parquet(tmp_path / "release", write_index=True)
    back = dd.read_parquet(tmp_path / "release").compute().sort_index()
    _same_values(back[list(got.columns)], got)


def test_cuts_certain_reads_the_sample_as_a_lower_bound():
    from types import SimpleNamespace

    from dmondrian.partition.cut_tree import CutTree

    # One cut: keys <= 4 go left.
    tree = CutTree(qi=np.array([0, -1, -1]), t=np.array([4, 0, 0]), eq=np.array([5, 0, 0]),
                   tie_before=np.array([0, 0, 0]), rank_off=np.array([-1, -1, -1]),
                   ranks=np.zeros(1, dtype=np.int64), left=np.array([1, -1, -1]),
                   right=np.array([2, -1, -1]), leaf=np.array([-1, 0, 1]))
    root = SimpleNamespace(sample_keys=np.array([[3, 3, 9, 9, 9]]),
                           sample_pos=row_positions(0, 5))
    apart, together = np.array([0, 1]), np.array([0, 0])
    # Two sample rows on the left: at least two rows there, whatever the counts.
    assert counting_write.cuts_certain(tree, apart, root, 2)
    assert not counting_write.cuts_certain(tree, apart, root, 3)
    # Inside one output partition the exact counts may undo the cut: no need to be sure.
    assert counting_write.cuts_certain(tree, together, root, 3)


def test_lazy_result_counts_apart_without_a_lasting_cluster(client, monkeypatch):
    """A cluster closed when anonymize returns (embedded, or from the environment) cannot
    count in a shuffle that runs later: the plan is counted by a pass of its own."""
    from dmondrian._dask import cluster

    assert cluster.lasting_client(client) and cluster.lasting_client(None)  # the default
    monkeypatch.setattr(cluster, "_default_client", lambda: None)
    assert not cluster.lasting_client(None)
    seen, plan = [], D.plan

    def spy(*args, **kwargs):
        seen.append(kwargs.get("_defer_counts"))
        return plan(*args, **kwargs)

    monkeypatch.setattr(D, "plan", spy)
    monkeypatch.setattr(D, "lasting_client", lambda given: False)
    df = make_census(3000, seed=27)
    out = D.anonymize(dd.from_pandas(df, npartitions=2), CENSUS_QIS, 5, leaf_rows=700,
                      client=client, allow_unique=row_ids(df)).compute()
    assert seen == [False] and len(out) == len(df)


def test_uncounted_plan_cannot_be_applied_lazily(client):
    ddf = dd.from_pandas(make_census(6000, seed=24), npartitions=3)
    for exchange in ("rows", "keys"):
        top = D.plan(ddf, CENSUS_QIS, 5, leaf_rows=800, client=client, _defer_counts=True,
                     exchange=exchange, allow_unique=row_ids(ddf))
        assert not top.counted
        with pytest.raises(errors.ParameterError, match="not exact"):
            D.apply_plan(ddf, top)


def _uncounted(client, one_partition):
    ddf = dd.from_pandas(make_census(6000, seed=25), npartitions=3)
    # The whole-row path: the tests read its output partitions' frames.
    top = D.plan(ddf, CENSUS_QIS, 5, leaf_rows=800, client=client, _defer_counts=True,
                 exchange="rows", allow_unique=row_ids(ddf))
    if one_partition:
        top.output_partitions, top.leaf_rows = [list(range(top.n_leaves))], 10**9
    return ddf, top


def _sibling_leaves(tree):
    """A cut whose two sides are single leaves: (node, left leaf, right leaf)."""
    for i in range(len(tree.qi)):
        lt, rt = tree.left[i], tree.right[i]
        if tree.qi[i] >= 0 and tree.qi[lt] < 0 and tree.qi[rt] < 0:
            return i, int(tree.leaf[lt]), int(tree.leaf[rt])
    raise AssertionError("no such cut")


def test_exact_counts_undo_a_cut_inside_an_output_partition(client):
    ddf, top = _uncounted(client, one_partition=True)
    assert counting_write.settle(top.leaf_counts, top).undone == 0
    _, a, b = _sibling_leaves(top.tree)
    counts = top.leaf_counts.copy()
    counts[b] = top.options.k - 1  # the sample misjudged this side
    verdict = counting_write.settle(counts, top)
    assert verdict.undone == 1
    assert verdict.root[a] == verdict.root[b] == a
    assert verdict.depth[a] == top.leaf_depths[a] - 1
    others = np.setdiff1d(np.arange(top.n_leaves), [a, b])
    np.testing.assert_array_equal(verdict.root[others], others)


def test_exact_counts_refuse_what_one_partition_cannot_undo(client):
    ddf, top = _uncounted(client, one_partition=False)
    _, a, b = _sibling_leaves(top.tree)
    top.output_partitions = [[i] for i in range(top.n_leaves)]
    counts = top.leaf_counts.copy()
    counts[b] = 0
    with pytest.raises(Recount, match="spans output partitions"):
        counting_write.settle(counts, top)
    counts = top.leaf_counts.copy()
    counts[a] = 3 * max(top.output_partition_rows, top.leaf_rows)
    with pytest.raises(Recount, match="over twice the"):
        counting_write.settle(counts, top)


def test_merged_leaves_are_cut_again_as_one(client):
    """A partition given a verdict that undid a cut runs the kernel on the union."""
    ddf, top = _uncounted(client, one_partition=True)
    df = ddf.compute()
    routed = pd.concat([shuffle.attach_leaf(p, top, {"number": i})
                        for i, p in enumerate(ddf.partitions[j].compute()
                                              for j in range(ddf.npartitions))])
    counts = np.bincount(routed["__dm_leaf"].to_numpy(dtype=np.int64), minlength=top.n_leaves)
    node, a, b = _sibling_leaves(top.tree)
    top.options = top.options.__class__(**{**top.options.__dict__, "class_column": "cls"})
    k = top.options.k
    verdict = counting_write.settle(counts, top)
    forced = Verdict(counts, verdict.root.copy(), verdict.depth.copy(), 1)
    forced.root[[a, b]], forced.depth[[a, b]] = a, top.leaf_depths[a] - 1
    out = leaves.output_partition_frame(routed, top, {"number": 0}, forced)
    assert len(out) == len(df)
    sizes = out.groupby("cls").size()
    assert sizes.min() >= k
    leaf_of_row = pd.Series(routed["__dm_leaf"].to_numpy(),
                            index=routed["__dm_index"].to_numpy()).loc[out.index].to_numpy()
    merged = np.isin(leaf_of_row, [a, b])
    assert merged.sum() == counts[a] + counts[b]
    # The union is one leaf, whose classes carry the first leaf's id.
    assert set(out["cls"].to_numpy()[merged] >> 32) == {a}
    assert set(out["cls"].to_numpy()[~merged] >> 32) == set(leaf_of_row[~merged])
    _assert_valid(df, out.sort_index(), CENSUS_QIS, k)


def test_a_candidate_leaf_without_rows_is_not_awaited(client):
    """A leaf the exact counts find empty is merged, and its partition does not wait for it."""
    ddf, top = _uncounted(client, one_partition=True)
    routed = pd.concat([shuffle.attach_leaf(ddf.partitions[j].compute(), top, {"number": j})
                        for j in range(ddf.npartitions)])
    _, a, b = _sibling_leaves(top.tree)
    routed = routed[routed["__dm_leaf"] != b]  # as if the sample had misjudged leaf b
    counts = np.bincount(routed["__dm_leaf"].to_numpy(dtype=np.int64), minlength=top.n_leaves)
    verdict = counting_write.settle(counts, top)
    assert counts[b] == 0 and verdict.root[b] == verdict.root[a]
    out = leaves.output_partition_frame(routed, top, {"number": 0}, verdict)
    assert len(out) == len(routed)
    assert out.groupby(out["age"].astype(str) + out["zip"].astype(str)
                       + out["birth_date"].astype(str) + out["sex"].astype(str)
                       + out["education"].astype(str)).size().min() >= top.options.k


def test_writer_falls_back_to_a_counting_pass(client, tmp_path, monkeypatch):
    ddf = dd.from_pandas(make_census(8000, seed=26), npartitions=4)
    options = dict(leaf_rows=900, class_column="cls", client=client)
    lazy = _collect(D.anonymize(ddf, CENSUS_QIS, 5, **options, allow_unique=row_ids(ddf)))

    def refuse(counts, top, *args):
        raise Recount("forced by the test")

    monkeypatch.setattr(counting_write, "settle", refuse)
    top = D.anonymize_to_parquet(ddf, tmp_path / "out", CENSUS_QIS, 5, **options,
                                 write_options=INDEXED, allow_unique=[*row_ids(ddf), "index"])
    assert top.passes == 2 and top.counted
    # The attempt the counts undid is timed apart from the pass that wrote.
    assert top.timings["first attempt (undone: a count disallowed a cut)"] > 0
    assert "route, shuffle, anonymize, write" in top.timings
    back = pd.read_parquet(tmp_path / "out").sort_index()
    _same_values(back[list(lazy.columns)], lazy)


def test_adversarial_partition_layouts(client):
    df = make_census(12_000, seed=6)
    k, leaf_rows = 8, 1500
    reference = _local_ncp(df, CENSUS_QIS, k)
    for name, ddf, original in _layouts(df, "age"):
        # Reordered rows: their index, released as is, is no longer the row positions.
        top = D.plan(ddf, CENSUS_QIS, k, leaf_rows=leaf_rows, client=client,
                     class_column="cls", sample_rows=128,
                     allow_unique=[*row_ids(ddf), "index"])
        out = D.apply_plan(ddf, top).compute()
        assert len(out) == len(df), name
        assert out.groupby("cls").size().min() >= k, name
        assert top.leaf_counts.max() <= leaf_rows, name
        out = out.loc[original.index]
        ncp = average_ncp(original, out["cls"].to_numpy(), CENSUS_QIS)
        assert ncp <= reference * 1.02, (name, ncp, reference)


# -- determinism, guards, errors ---------------------------------------------------------------


def test_repeated_runs_are_identical(client):
    df = make_census(6000, seed=7)
    ddf = dd.from_pandas(df, npartitions=6)
    runs = [D.anonymize(ddf, CENSUS_QIS, 5, leaf_rows=700, client=client, mode="relaxed",
                        class_column="cls", allow_unique=row_ids(ddf)).compute() for _ in range(2)]
    pd.testing.assert_frame_equal(runs[0], runs[1])


def test_kernel_thread_count_does_not_change_the_output(client):
    df = make_census(6000, seed=11)
    ddf = dd.from_pandas(df, npartitions=4)
    top = D.plan(ddf, CENSUS_QIS, 5, leaf_rows=900, client=client, class_column="cls",
                 allow_unique=row_ids(ddf))
    assert 1 <= top.kernel_threads <= os.cpu_count()
    runs = []
    for threads in (1, None):
        top.kernel_threads = threads
        runs.append(D.apply_plan(ddf, top).compute())
    pd.testing.assert_frame_equal(runs[0], runs[1])


def test_leaf_ids_travel_as_the_narrowest_integer_index(client):
    df = mixed_table(3000, seed=12)
    top = D.plan(dd.from_pandas(df, npartitions=3), ["age", "zip"], 5, leaf_rows=200,
                 client=client, allow_unique=row_ids(df), exchange="keys")
    routed = shuffle.attach_leaf(df, top, {"number": 0})
    assert top.n_leaves > 1
    assert routed["__dm_leaf"].dtype == np.min_scalar_type(-top.n_leaves)
    assert routed["__dm_leaf"].tolist() == route(encode_keys(df, top.domain),
                                                 top.tree).tolist()
    # Each output partition is a run of consecutive leaves; the shuffle reads it
    # from "_partitions". The input positions travel as the index on the whole-row
    # path; the keys path sends the piece's number (2 bytes), the shuffle the order.
    assert [i for ids in top.output_partitions for i in ids] == list(range(top.n_leaves))
    assert (routed["_partitions"].tolist()
            == top.partition_of_leaf[routed["__dm_leaf"]].tolist())
    assert top.exchange == "keys"
    assert routed.index.dtype == np.int8 and (routed.index == 0).all()
    top.exchange = "rows"
    assert shuffle.attach_leaf(df, top, {"number": 0}).index.tolist() == list(range(len(df)))


def test_routing_carries_any_input_index_as_a_column(client):
    # Routed columns are added without copies; an input index of any kind still
    # rides along as one column, by position, and the rest is routed as before.
    df = mixed_table(1500, seed=14)
    top = D.plan(dd.from_pandas(df, npartitions=2), ["age", "zip"], 5, leaf_rows=300,
                 client=client, exchange="rows",
                 allow_unique=row_ids(df))  # the whole-row path carries the index
    top.positional_index = False
    plain = shuffle.attach_leaf(df.reset_index(drop=True), top, {"number": 3})
    n = len(df)
    for index in (pd.date_range("2020", periods=n, freq="h", tz="UTC"),
                  pd.Index([f"r{i}" for i in range(n)], dtype="str"),
                  pd.MultiIndex.from_arrays([np.arange(n), np.arange(n) % 7])):
        routed = shuffle.attach_leaf(df.set_axis(index), top, {"number": 3})
        assert routed.index.tolist() == row_positions(3, n).tolist()
        assert routed["__dm_index"].tolist() == list(index)
        pd.testing.assert_frame_equal(routed.drop(columns="__dm_index"),
                                      plain.drop(columns="__dm_index"))


def test_positional_partition_index_is_restored_without_shipping_it(client):
    df = make_census(4000, seed=13)
    ddf = dd.from_pandas(df, npartitions=3)
    starts = {p: int(ddf.divisions[p]) for p in range(ddf.npartitions)}
    # As read_parquet gives it: every partition indexed 0..n-1.
    positional = ddf.map_partitions(lambda p: p.reset_index(drop=True))
    labelled = positional.map_partitions(lambda p: p.set_axis(pd.Index(p.index.to_numpy())))
    outs = []
    for frame in (positional, labelled):
        # The whole-row path, which ships rows away from their partition: the
        # keys path never moves the index (auto may pick either for these rows).
        top = D.plan(frame, CENSUS_QIS, 5, leaf_rows=600, client=client, exchange="rows",
                     allow_unique=row_ids(frame))
        outs.append((top, D.apply_plan(frame, top).compute()))
    (top_pos, out_pos), (top_lab, out_lab) = outs
    assert top_pos.positional_index and not top_lab.positional_index
    pd.testing.assert_frame_equal(out_pos, out_lab)
    bounds = np.asarray(list(starts.values()) + [len(df)])
    part = np.searchsorted(bounds, out_pos["person_id"].to_numpy(), side="right") - 1
    assert (out_pos.index.to_numpy() == out_pos["person_id"].to_numpy() - bounds[part]).all()


def test_partition_refuses_a_leaf_with_unexpected_rows(client):
    df = mixed_table(1200, seed=8)
    ddf = dd.from_pandas(df, npartitions=3)
    top = D.plan(ddf, ["age", "zip"], 5, leaf_rows=300, client=client, exchange="rows",
                 allow_unique=row_ids(ddf))
    routed = shuffle.attach_leaf(df, top, {"number": 0})
    part = routed[routed["_partitions"] == 0]
    meta = leaves.output_meta(df.iloc[:0], top)
    assert len(leaves.anonymize_output_partition(part, top, meta, {"number": 0})) == len(part)
    with pytest.raises(RuntimeError, match="Refusing to publish"):
        leaves.anonymize_output_partition(part.iloc[1:], top, meta, {"number": 0})


def test_max_depth_counts_top_phase_levels(client):
    df = make_census(5000, seed=9)
    ddf = dd.from_pandas(df, npartitions=4)
    out = D.anonymize(ddf, CENSUS_QIS, 2, leaf_rows=400, max_depth=3, client=client,
                      class_column="cls", allow_unique=row_ids(ddf)).compute()
    expected = local.anonymize(df, CENSUS_QIS, 2, max_depth=3, class_column="cls",
                               allow_unique=row_ids(df))
    assert out["cls"].nunique() <= 8
    assert out["cls"].nunique() == expected["cls"].nunique()


@pytest.mark.parametrize("call,error", [
    (lambda ddf: D.anonymize(ddf.compute(), ["age"], 2), errors.ParameterError),
    (lambda ddf: D.anonymize(ddf, ["nope"], 2), errors.MissingColumnError),
    (lambda ddf: D.anonymize(ddf, ["age"], 0), errors.ParameterError),
    (lambda ddf: D.anonymize(ddf, ["age"], 2, leaf_rows=0), errors.ParameterError),
    (lambda ddf: D.anonymize(ddf, ["age"], 2, mode="loose"), errors.ParameterError),
    (lambda ddf: D.anonymize(ddf, ["age"], 2, class_column="zip"), errors.ParameterError),
    (lambda ddf: D.anonymize(ddf, ["age"], 2, qi_kinds={"age": "weird"}),
     errors.UnsupportedDtypeError),
    (lambda ddf: D.anonymize(ddf, ["age"], 2, l=2), errors.ParameterError),
    (lambda ddf: D.anonymize_to_parquet(ddf, "never-written", ["age"], 2, t=0.2,
                                        sensitive="nope"), errors.MissingColumnError),
    # Parquet stores only text column names.
    (lambda ddf: D.anonymize_to_parquet(ddf.rename(columns={"payload": 5}), "never-written",
                                        ["age"], 2), errors.ColumnError),
    (lambda ddf: D.anonymize_to_parquet(ddf, "never-written", ["age"], 2, class_column=7),
     errors.ColumnError),
    (lambda ddf: D.anonymize_to_parquet(ddf.rename_axis(0), "never-written", ["age"], 2,
                                        write_options=INDEXED), errors.ColumnError),
])
def test_bad_options_raise_typed_errors_before_any_pass(call, error):
    ddf = dd.from_pandas(mixed_table(50), npartitions=2)
    with pytest.raises(error):
        call(ddf)


def test_data_errors_surface_typed(client):
    df = mixed_table(200)
    with pytest.raises(errors.InfeasibleError):
        D.anonymize(dd.from_pandas(df, npartitions=2), ["age"], 500, client=client)
    with pytest.raises(errors.HierarchyError):
        D.anonymize(dd.from_pandas(df, npartitions=2), ["job"], 2, client=client,
                    hierarchies={"job": {"Private": ["*"]}})
    bad = df.assign(income=df["income"].where(df.index != 7, np.inf))
    with pytest.raises(errors.InvalidValueError):
        D.anonymize(dd.from_pandas(bad, npartitions=2), ["income"], 2, client=client)


# -- l-diversity and t-closeness -----------------------------------------------------------


@pytest.mark.parametrize("options", [{"l": 3}, {"l": 2, "l_kind": "entropy"}, {"t": 0.3}])
def test_sensitive_constraints_hold_with_small_leaves(client, options):
    from dmondrian.synthetic import make_census

    df = make_census(20_000, seed=5).drop(columns=["person_id"])
    qis = ["age", "zip", "birth_date"]
    ddf = dd.from_pandas(df, npartitions=5)
    top = D.plan(ddf, qis, 10, leaf_rows=2_000, client=client, sensitive="diagnosis",
                 **options)
    assert top.n_leaves > 1  # the top phase really cut, and kept cuts that hold
    out = _collect(D.anonymize(ddf, qis, 10, leaf_rows=2_000, client=client,
                               sensitive="diagnosis", class_column="cls", **options))
    assert len(out) == len(df)
    # judged by the verifier from the published columns alone
    verdict = dmondrian.verify(out, qis, k=10, sensitive="diagnosis",
                               l=options.get("l"), l_kind=options.get("l_kind", "distinct"),
                               t=options.get("t"))
    assert verdict.ok, verdict
    per_class = out.groupby("cls")["diagnosis"]
    assert per_class.size().min() >= 10
    if options.get("l_kind", "distinct") == "distinct" and "l" in options:
        assert per_class.nunique().min() >= options["l"]


@pytest.mark.parametrize("kind", SENSITIVE_KINDS)
@pytest.mark.parametrize("options", [{"l": 3}, {"t": 0.2}])
def test_missing_sensitive_values_one_leaf_equals_local_engine(client, kind, options):
    rng = np.random.default_rng(8)
    df = mixed_table(1500, seed=8).assign(
        cause=sensitive_with_missing(kind, 1500, rng, p_missing=0.3))
    common = dict(sensitive="cause", class_column="cls", **options)
    expected = local.anonymize(df, MIXED_QIS, 5, **common, allow_unique=row_ids(df))
    got = _collect(D.anonymize(dd.from_pandas(df, npartitions=3), MIXED_QIS, 5,
                               leaf_rows=len(df), client=client, **common,
                               allow_unique=row_ids(df)))
    unconstrained = local.anonymize(df, MIXED_QIS, 5, class_column="cls", allow_unique=row_ids(df))
    assert 10 < expected["cls"].nunique() < unconstrained["cls"].nunique()
    _same_values(got.drop(columns="cause"), expected.drop(columns="cause"))


@pytest.mark.parametrize("kind", ["object", "ordered"])
def test_missing_sensitive_values_hold_with_small_leaves(client, kind):
    rng = np.random.default_rng(9)
    df = mixed_table(6000, seed=9).assign(
        cause=sensitive_with_missing(kind, 6000, rng, p_missing=0.5))
    ddf = dd.from_pandas(df, npartitions=4)
    options = dict(sensitive="cause", l=4, t=0.3, leaf_rows=1000, client=client)
    top = D.plan(ddf, ["age", "zip", "income"], 5, **options, allow_unique=row_ids(ddf))
    assert top.n_leaves > 1
    out = _collect(D.anonymize(ddf, ["age", "zip", "income"], 5, **options,
                               allow_unique=row_ids(ddf)))
    verdict = dmondrian.verify(out, ["age", "zip", "income"], k=5, sensitive="cause", l=4,
                               t=0.3, allow_unique=row_ids(out))
    assert verdict.ok, verdict
    assert verdict.achieved["l_distinct"] >= 4  # three causes and missing


def test_ordered_sensitive_of_unknown_categories_is_refused_before_any_pass(client):
    df = mixed_table(100).assign(cause=sensitive_with_missing("ordered", 100,
                                                              np.random.default_rng(0)))
    ddf = dd.from_pandas(df, npartitions=2)
    ddf["cause"] = ddf["cause"].cat.as_unknown()
    with pytest.raises(errors.UnsupportedDtypeError, match="cause"):
        D.plan(ddf, ["age"], 2, t=0.3, sensitive="cause", client=object())


def test_infeasible_sensitive_request_fails_before_the_shuffle(client):
    df = mixed_table(400).assign(flag=["a", "b"] * 200)
    with pytest.raises(errors.InfeasibleError, match="only 2 distinct"):
        D.anonymize(dd.from_pandas(df, npartitions=2), ["age"], 2, l=3, sensitive="flag",
                    client=client)
