"""The Dask engine's keys path: only keys cross the network, the release is unchanged.

Every comparison runs both paths on one plan's inputs: the keys path must give
the same classes, labels and values as the whole-row path, keep each input
partition's rows in its own output partition, and refuse an input that changed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from distributed_helpers import JOB_HIERARCHY, MIXED_QIS, mixed_table, row_ids  # noqa: E402

from dmondrian import distributed as D  # noqa: E402
from dmondrian._dask.exchange import check_exchange, merge_input_partition  # noqa: E402
from dmondrian.errors import IdentifyingColumnError, ParameterError  # noqa: E402

NOISE = {"payload": {"epsilon": 1.0, "bounds": (0.0, 5000.0)}}


@pytest.fixture(scope="module")
def cluster(process_cluster):
    """Two worker processes: the shuffles cross process boundaries."""
    return process_cluster


def _both(ddf, client, qis, k, **options):
    """The lazy release on each path, computed, rows in index order (the row ids kept:
    the paths are compared row by row)."""
    out = {}
    for exchange in ("rows", "keys"):
        lazy = D.anonymize(ddf, qis, k, client=client, exchange=exchange,
                           allow_unique=row_ids(ddf), **options)
        out[exchange] = client.compute(lazy).result().sort_index()
    return out["rows"], out["keys"]


def _assert_same_release(rows: pd.DataFrame, keys: pd.DataFrame):
    assert list(rows.columns) == list(keys.columns)
    assert rows.index.equals(keys.index)
    for col in rows.columns:
        assert rows[col].dtype == keys[col].dtype or (
            isinstance(rows[col].dtype, pd.CategoricalDtype)
            and isinstance(keys[col].dtype, pd.CategoricalDtype)), col
        missing = rows[col].isna().to_numpy()
        assert (missing == keys[col].isna().to_numpy()).all(), col
        a = rows[col].astype(object).to_numpy()[~missing]
        b = keys[col].astype(object).to_numpy()[~missing]
        same = a == b
        assert same.all(), f"{col}: {a[~same][:5]} vs {b[~same][:5]}"


@pytest.mark.parametrize("options", [
    dict(class_column="cls", mode="relaxed", generalization="midpoint"),
    dict(sensitive="color", l=2, class_column="cls"),
    dict(noise=NOISE, random_state=3, suppression=0.05, class_column="cls"),
    dict(suppression=0.05, suppressed="drop"),
], ids=["relaxed-midpoint", "l-diversity", "noise-suppression", "drop"])
def test_keys_path_publishes_the_rows_path_release(cluster, options):
    df = mixed_table(6000, seed=4)
    ddf = dd.from_pandas(df, npartitions=4)
    qis = [q for q in MIXED_QIS if q != options.get("sensitive")]
    rows, keys = _both(ddf, cluster, qis, 8, leaf_rows=1200,
                       hierarchies={"job": JOB_HIERARCHY}, **options)
    _assert_same_release(rows, keys)
    if "cls" in keys:
        assert keys.groupby("cls").size().min() >= 8


def test_keys_path_carries_the_entity(cluster):
    from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS, make_events

    ev = make_events(1_500, seed=11)
    ddf = dd.from_pandas(ev, npartitions=3)
    rows, keys = _both(ddf, cluster, EVENT_QUASI_IDENTIFIERS, 5, entity="user_id",
                       class_column="cls", leaf_rows=2_000)
    _assert_same_release(rows, keys)
    assert "user_id" not in keys.columns and len(keys) == len(ev)


def test_keys_path_keeps_the_input_partitioning(cluster):
    df = mixed_table(5000, seed=5)
    ddf = dd.from_pandas(df, npartitions=5)
    lazy = D.anonymize(ddf, MIXED_QIS, 10, client=cluster, leaf_rows=1000,
                       exchange="keys", hierarchies={"job": JOB_HIERARCHY},
                       allow_unique=row_ids(ddf))  # compared below
    assert lazy.npartitions == ddf.npartitions
    for i in range(ddf.npartitions):
        got = cluster.compute(lazy.get_partition(i)).result()
        assert got.index.equals(ddf.get_partition(i).compute().index)
        assert got["payload"].equals(df.loc[got.index, "payload"])  # untouched, in place


def test_writers_and_cli_on_the_keys_path(cluster, tmp_path):
    from dmondrian.cli import main

    df = mixed_table(4000, seed=6)
    src = tmp_path / "in"
    src.mkdir()
    for i in range(4):
        df.iloc[i * 1000:(i + 1) * 1000].to_parquet(src / f"part.{i}.parquet", index=False)
    ddf = dd.read_parquet(src)
    qis = ["age", "zip", "income", "when", "grade"]
    written = {}
    for exchange in ("rows", "keys"):
        top = D.anonymize_to_parquet(ddf, tmp_path / exchange, qis, 10, client=cluster,
                                     leaf_rows=800, class_column="cls", exchange=exchange,
                                     allow_unique=["payload"])  # the rows are matched by it
        assert top.exchange == exchange
        # The write tasks check (the domain pass read only the QIs); payload is allowed.
        assert top.written_check is not None and top.identifying == []
        written[exchange] = pd.read_parquet(tmp_path / exchange).set_index("payload")
    _assert_same_release(written["rows"].sort_index(), written["keys"].sort_index())
    # Output file i holds input file i's rows.
    for i in range(4):
        part = pd.read_parquet(tmp_path / "keys" / f"part.{i}.parquet")
        assert sorted(part["payload"]) == list(range(i * 1000, (i + 1) * 1000))
    csv = tmp_path / "keys.csv"
    assert main(["anonymize", str(src), str(csv), "--format", "parquet", "--output-format",
                 "csv", "--k", "10", "--qi", ",".join(qis[:4]),  # no ordinal from Parquet
                 "--scheduler", cluster.scheduler.address, "--exchange", "keys", "--no-progress",
                 "--leaf-rows", "800", "--allow-unique", "payload"]) == 0
    cli = pd.read_csv(csv).set_index("payload").sort_index()
    assert len(cli) == len(df)
    assert cli.groupby(qis[:4]).size().min() >= 10


def test_an_identifying_column_refused_by_the_writer_leaves_no_file(cluster, tmp_path):
    ddf = dd.from_pandas(mixed_table(3000, seed=8), npartitions=3)
    for exchange in ("rows", "keys"):
        with pytest.raises(IdentifyingColumnError, match="payload"):
            D.anonymize_to_parquet(ddf, tmp_path / exchange, ["age", "zip"], 10,
                                   client=cluster, leaf_rows=800, exchange=exchange)
        assert not (tmp_path / exchange).exists()


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(n=st.integers(60, 400), parts=st.integers(1, 4), k=st.integers(2, 6),
       seed=st.integers(0, 10_000))
def test_keys_and_rows_paths_agree_on_random_tables(client, n, parts, k, seed):
    df = mixed_table(n, seed=seed).drop(columns=["job"])
    ddf = dd.from_pandas(df, npartitions=parts)
    rows, keys = _both(ddf, client, ["age", "zip", "when", "color"], k, leaf_rows=2 * k + 20,
                       class_column="cls")
    _assert_same_release(rows, keys)
    assert len(keys) == n and keys.groupby("cls").size().min() >= k


def test_a_partition_that_changed_is_refused(client):
    from dmondrian._dask.exchange import _published
    from dmondrian._dask.leaves import output_meta
    from dmondrian._dask.shuffle import distributed_shuffle_method

    df = mixed_table(600, seed=7)
    ddf = dd.from_pandas(df, npartitions=2)
    top = D.plan(ddf, ["age", "zip"], 5, client=client, exchange="keys", leaf_rows=60)
    meta = output_meta(ddf._meta, top)
    back, _, _ = _published(ddf, top, meta, distributed_shuffle_method(), True)
    backs = [client.compute(back.get_partition(i)).result() for i in range(2)]
    parts = [ddf.get_partition(i).compute() for i in range(2)]
    assert merge_input_partition(parts[0], backs[0], top, meta, 0).index.equals(parts[0].index)
    # Another partition's codes, or this one's rows changed: refused, not misplaced.
    changed = parts[0].assign(age=parts[0]["age"].to_numpy()[::-1])
    for rows, came, number in ((parts[1], backs[0], 1), (changed, backs[0], 0),
                               (parts[0].iloc[:-1], backs[0], 0)):
        with pytest.raises(RuntimeError, match="Refusing to publish"):
            merge_input_partition(rows, came, top, meta, number)


def test_exchange_option_is_checked():
    assert check_exchange("auto") is None and check_exchange("keys") == "keys"
    with pytest.raises(ParameterError, match="exchange"):
        check_exchange("columns")


def test_hive_partitioned_input_is_written_back_with_its_partition_on(client, tmp_path):
    df = mixed_table(3000, seed=9).drop(columns=["job"])
    df["dt"] = np.repeat(["2024-06-01", "2024-06-02", "2024-06-03"], 1000)
    df.to_parquet(tmp_path / "in", partition_cols=["dt"], index=False)
    ddf = dd.read_parquet(tmp_path / "in")
    lazy = D.anonymize(ddf, ["age", "zip", "when"], 10, client=client, leaf_rows=600,
                       exchange="keys", allow_unique=row_ids(ddf))  # compared below
    lazy.to_parquet(tmp_path / "out", partition_on=["dt"])
    for day in ("2024-06-01", "2024-06-02", "2024-06-03"):
        files = [pd.read_parquet(f) for f in (tmp_path / "out" / f"dt={day}").glob("*.parquet")]
        # Input partition i is output partition i: each day's rows stay in one file.
        files = [f for f in files if len(f)]
        assert len(files) == len(list((tmp_path / "in" / f"dt={day}").glob("*.parquet")))
        assert sorted(files[0]["payload"]) == sorted(df.loc[df["dt"] == day, "payload"])


def test_the_estimate_counts_each_labels_bounds_in_its_own_key_type():
    from types import SimpleNamespace

    from dmondrian._dask.exchange import BACK_ROUTING_BYTES, KEYS_ROUTING_BYTES, exchanged_bytes

    opts = SimpleNamespace(qis=["birth", "sex"], kinds=["datetime", "nominal"],
                           generalization="range", sensitive=None, entity=None, noise=[],
                           class_column=None)
    meta = pd.DataFrame({"birth": pd.Series([], dtype="datetime64[ns]"),
                         "sex": pd.Series([], dtype=object)})
    # A date in days (2 bytes) comes back as two 2-byte bounds, a sex's code set as
    # one byte: what back_codes ships.
    _, keys = exchanged_bytes(meta, 40.0, opts, [2, 1])
    assert keys == 3 + KEYS_ROUTING_BYTES + (2 * 2 + 1) + BACK_ROUTING_BYTES
    _, even = exchanged_bytes(meta, 40.0, opts, 3.0)  # types unknown: spread evenly
    assert even == 3 + KEYS_ROUTING_BYTES + (2 * 1.5 + 1.5) + BACK_ROUTING_BYTES


def test_a_categorical_of_unknown_categories_keeps_its_values(cluster, tmp_path):
    # Read from Parquet, a dictionary column is a Categorical whose categories dask
    # does not know (one placeholder category): released as is, it must keep its
    # values on both paths, lazily and written.
    df = mixed_table(3000, seed=9).assign(
        tint=lambda t: pd.Categorical(np.where(t["payload"] % 3 == 0, "warm", "cold")))
    df.to_parquet(tmp_path / "in.parquet")
    ddf = dd.read_parquet(tmp_path / "in.parquet")
    assert ddf["tint"].cat.known is False
    qis = ["age", "zip", "when"]
    for released in [*_both(ddf, cluster, qis, 8, leaf_rows=800)]:
        assert released["tint"].astype(object).equals(df["tint"].astype(object))
    for exchange in ("rows", "keys"):
        D.anonymize_to_parquet(ddf, tmp_path / exchange, qis, 8, client=cluster,
                               leaf_rows=800, exchange=exchange, allow_unique=["payload"])
        written = pd.read_parquet(tmp_path / exchange).set_index("payload").sort_index()
        assert written["tint"].astype(object).equals(df["tint"].astype(object)), exchange
