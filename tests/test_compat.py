"""dmondrian._compat: each private API of dask and pandas, and its public fallback."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed_helpers import CENSUS_QIS, make_census, row_ids

from dmondrian import _compat
from dmondrian import distributed as D


def _routed(n=40, parts=4, targets=3, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.integers(0, 100, n), "s": [f"v{i}" for i in range(n)],
                       "_partitions": rng.integers(0, targets, n)},
                      index=pd.Index(np.arange(1000, 1000 + n), dtype=np.int64))
    return df, dd.from_pandas(df, npartitions=parts, sort=False)


def _partitions(ddf) -> list:
    with dask.config.set(scheduler="sync"):
        return [ddf.partitions[i].compute() for i in range(ddf.npartitions)]


def _without_private_shuffle(monkeypatch, error=ImportError):
    """As if dask's private Shuffle were gone (or refused the call, for a TypeError).

    dask's own module is left alone: its public set_index uses the same class.
    """
    def private(*args):
        raise error("dask.dataframe.dask_expr._shuffle.Shuffle")

    monkeypatch.setattr(_compat, "_private_shuffle", private)


@pytest.mark.parametrize("targets", [1, 3, 5])
def test_shuffle_private_path_and_fallback_place_rows_alike(monkeypatch, targets):
    _, ddf = _routed(targets=targets)
    with dask.config.set(scheduler="sync"):
        df = ddf.compute()  # with dask's dtypes (strings as pyarrow strings)
    private = _compat.shuffle_to_partitions(ddf, "_partitions", targets, "tasks")
    _without_private_shuffle(monkeypatch)
    fallback = _compat.shuffle_to_partitions(ddf, "_partitions", targets, "tasks")
    assert private.npartitions == fallback.npartitions == targets
    pd.testing.assert_frame_equal(private._meta, fallback._meta)
    for number, (a, b) in enumerate(zip(_partitions(private), _partitions(fallback),
                                        strict=True)):
        expected = df[df["_partitions"] == number]
        pd.testing.assert_frame_equal(a.sort_index(), expected, check_freq=False)
        pd.testing.assert_frame_equal(b.sort_index(), expected, check_freq=False)


def test_shuffle_falls_back_when_the_private_call_fails(monkeypatch):
    calls = []
    fallback = _compat._shuffle_by_set_index
    _without_private_shuffle(monkeypatch, TypeError)
    monkeypatch.setattr(_compat, "_shuffle_by_set_index",
                        lambda *a: calls.append(a) or fallback(*a))
    df, ddf = _routed(targets=2)
    out = _compat.shuffle_to_partitions(ddf, "_partitions", 2, "tasks")
    assert len(calls) == 1
    assert sorted(pd.concat(_partitions(out)).index) == sorted(df.index)


def test_the_engine_gives_the_same_release_on_the_fallback_shuffle(client, monkeypatch, tmp_path):
    df = make_census(6000, seed=31)
    ddf = dd.from_pandas(df, npartitions=3)
    # Seeded: the writers' row shuffles (dmondrian.release.row_order) repeat.
    options = dict(leaf_rows=700, class_column="cls", client=client, mode="relaxed",
                   random_state=0)
    top = D.plan(ddf, CENSUS_QIS, 5, **options, allow_unique=row_ids(ddf))
    private = D.apply_plan(ddf, top, "p2p").compute()
    D.anonymize_to_parquet(ddf, tmp_path / "private", CENSUS_QIS, 5, **options,
                           allow_unique=row_ids(ddf))
    _without_private_shuffle(monkeypatch)
    fallback = D.apply_plan(ddf, top, "p2p").compute()
    pd.testing.assert_frame_equal(private, fallback)
    D.anonymize_to_parquet(ddf, tmp_path / "fallback", CENSUS_QIS, 5, **options,
                           allow_unique=row_ids(ddf))
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "private"),
                                  pd.read_parquet(tmp_path / "fallback"))


def test_known_lengths_private_path_and_fallback(tmp_path, monkeypatch):
    from dask.dataframe.dask_expr import _expr

    df = pd.DataFrame({"a": np.arange(30)})
    df.iloc[:12].to_parquet(tmp_path / "p0.parquet")
    df.iloc[12:].to_parquet(tmp_path / "p1.parquet")
    ddf = dd.read_parquet(tmp_path)
    assert _compat.known_partition_lengths(ddf) == (12, 18)
    monkeypatch.delattr(_expr, "Lengths")
    # No public way to ask: the caller reads the first partition instead.
    assert _compat.known_partition_lengths(ddf) is None


@pytest.mark.parametrize("labels", [["[1, 2]", "3", "x"], [], [0.5, 1.5]])
def test_categorical_dtype_private_path_and_fallback(monkeypatch, labels):
    index = pd.Index(labels, dtype=object if not labels else None)
    public = pd.CategoricalDtype(index)
    assert _compat.categorical_dtype(index) == public
    monkeypatch.delattr(pd.CategoricalDtype, "_from_fastpath")
    assert _compat.categorical_dtype(index) == public


def test_categorical_dtype_falls_back_when_the_fast_path_refuses(monkeypatch):
    def changed(*args):
        raise TypeError("a changed signature")

    monkeypatch.setattr(pd.CategoricalDtype, "_from_fastpath", changed, raising=False)
    index = pd.Index(["b", "a"])
    got = _compat.categorical_dtype(index)
    assert got == pd.CategoricalDtype(index) and list(got.categories) == ["b", "a"]


def test_hll_estimate_private_path_and_fallback(monkeypatch):
    from dask.dataframe import hyperloglog

    rng = np.random.default_rng(5)
    cases = [np.zeros(2**12, np.uint8), rng.integers(0, 6, 2**12).astype(np.uint8),
             rng.integers(8, 20, 2**12).astype(np.uint8)]
    private = [_compat.hll_estimate_count(regs, 12) for regs in cases]
    monkeypatch.delattr(hyperloglog, "estimate_count")
    fallback = [_compat.hll_estimate_count(regs, 12) for regs in cases]
    assert fallback == pytest.approx(private, rel=1e-12)


def test_nonempty_meta_and_unknown_categories_fallbacks(monkeypatch):
    from dask.dataframe import utils

    meta = pd.DataFrame({"a": pd.Series([], dtype=object), "n": pd.Series([], dtype="int64"),
                         "c": pd.Categorical([]), "t": pd.Series([], dtype="datetime64[ns]")},
                        index=pd.Index([], dtype="int64", name="ix"))
    private = _compat.nonempty_meta(meta)
    marker = _compat.unknown_categories()
    monkeypatch.delattr(utils, "meta_nonempty")
    monkeypatch.delattr(utils, "UNKNOWN_CATEGORIES")
    fallback = _compat.nonempty_meta(meta)
    assert len(fallback) > 0 and dict(fallback.dtypes) == dict(private.dtypes) == \
        dict(meta.dtypes)
    assert fallback.index.name == "ix" and fallback.index.dtype == meta.index.dtype
    assert _compat.unknown_categories() == marker
    assert _compat.has_unknown_categories(pd.CategoricalDtype([marker]))


def test_scheduler_workers_private_path_and_fallback(client):
    workers = _compat.scheduler_workers(client)
    assert len(workers) == len(client.scheduler_info()["workers"]) >= 1

    class Older:  # a distributed release without n_workers
        def scheduler_info(self):
            return client.scheduler_info()

    assert set(_compat.scheduler_workers(Older())) == set(workers)


@pytest.mark.parametrize("method", ["tasks", "fallback", "p2p"])
def test_ordered_shuffle_keeps_each_input_partitions_rows_in_order(client, monkeypatch, method):
    # The keys path's exchanges send no position: a leaf finds its rows in order, by
    # the number they are indexed by (the input piece, or the leaf) and their shard.
    rng = np.random.default_rng(5)
    parts, n, targets = 5, 3000, 4
    source = np.repeat(np.arange(parts), n // parts)
    df = pd.DataFrame({"seq": np.arange(n), "_partitions": rng.integers(0, targets, n)},
                      index=pd.Index(source.astype(np.int16)))
    ddf = dd.from_pandas(df, npartitions=parts, sort=False)
    if method == "fallback":
        _without_private_shuffle(monkeypatch)
    out = _compat.shuffle_to_partitions(ddf, "_partitions", targets,
                                        "tasks" if method == "fallback" else method,
                                        ordered=True)
    got = client.compute(out).result() if method == "p2p" else pd.concat(_partitions(out))
    assert len(got) == n
    target = df["_partitions"].to_numpy()[got["seq"].to_numpy()]  # p2p drops the column
    for _, rows in got.assign(target=target).groupby(level=0, sort=False):
        for _, same_target in rows.groupby("target"):
            assert (np.diff(same_target["seq"].to_numpy()) > 0).all()


def _labelled_parts(offset):
    labels = pd.Index([f"[{i}, {i + 1}]" for i in range(2000)], dtype="str")
    frames = [pd.DataFrame({"age": pd.Categorical.from_codes(np.arange(i, i + 5) + offset, labels),
                            "pay": np.arange(5.0) + i}, index=pd.RangeIndex(5 * i, 5 * i + 5))
              for i in range(3)]
    return frames, [dask.delayed(f.copy, pure=True)() for f in frames]


@pytest.mark.parametrize("private", [True, False])
def test_from_delayed_named_is_from_delayed_named_by_its_tasks(monkeypatch, private):
    if not private:
        def refused(*args):
            raise AttributeError("a private API of dask changed")

        monkeypatch.setattr(_compat, "_private_from_delayed", refused)
    frames, parts = _labelled_parts(0)
    meta = frames[0].iloc[:0]
    out = _compat.from_delayed_named(parts, meta, (0, 5, 10, 14))
    assert out.divisions == (0, 5, 10, 14)
    assert out.npartitions == 3
    pd.testing.assert_frame_equal(out._meta, meta)
    pd.testing.assert_frame_equal(out.compute(scheduler="sync"), pd.concat(frames))
    # Named by the tasks: the same tasks, the same name; other tasks, another.
    assert _compat.from_delayed_named(parts, meta)._name == \
        _compat.from_delayed_named(parts, meta)._name
    other = _compat.from_delayed_named(_labelled_parts(7)[1], meta)
    assert other._name != _compat.from_delayed_named(parts, meta)._name
    with pytest.raises(ValueError, match="divisions"):
        _compat.from_delayed_named(parts, meta, (0, 5))
