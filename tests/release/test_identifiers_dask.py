"""A column that singles out rows is refused on every Dask path, leaving nothing behind.

The lazy release and the CSV writer judge in the domain pass (nothing is
computed or written), the Parquet writer in the pass that writes (its files
are removed), a fitted plan's transform in its counting pass and its Parquet
writer in the pass that writes; the command
line's ``--distributed`` run exits with one line and no output.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

import dmondrian  # noqa: E402
from dmondrian import distributed as D  # noqa: E402
from dmondrian.cli import main  # noqa: E402
from dmondrian.errors import IdentifyingColumnError  # noqa: E402
from dmondrian.plans import fit_plan  # noqa: E402

QIS = ["age", "zip"]


def _table(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 90, n), "zip": rng.integers(1000, 1100, n),
        "person_id": rng.permutation(n) + 10_000,  # one value per row
        "ward": rng.integers(0, 8, n),
    })


@pytest.fixture(scope="module")
def cluster(process_client):
    """Two worker processes (the session's shared cluster), the default client: the
    estimator and fitted plans find it."""
    return process_client


@pytest.fixture(scope="module")
def ddf():
    return dd.from_pandas(_table(), npartitions=3)


def _refused(info, column="person_id"):
    assert info.value.columns == [column]
    text = str(info.value)
    assert "\n" not in text and "estimated" in text
    assert f"identifiers=['{column}']" in text and f"allow_unique=['{column}']" in text


@pytest.mark.parametrize("exchange", ["rows", "keys"])
def test_the_lazy_release_is_refused_before_it_exists(cluster, ddf, exchange):
    with pytest.raises(IdentifyingColumnError) as info:
        D.anonymize(ddf, QIS, 10, client=cluster, leaf_rows=800, exchange=exchange)
    _refused(info)
    out = cluster.compute(D.anonymize(ddf, QIS, 10, client=cluster, leaf_rows=800,
                                      exchange=exchange, allow_unique=["person_id"])).result()
    assert sorted(out["person_id"]) == sorted(ddf["person_id"].compute())
    out = cluster.compute(D.anonymize(ddf, QIS, 10, client=cluster, leaf_rows=800,
                                      exchange=exchange, identifiers=["person_id"])).result()
    assert "person_id" not in out.columns and len(out) == 3000


@pytest.mark.parametrize("exchange", ["rows", "keys"])
def test_the_parquet_writer_leaves_nothing_at_the_destination(cluster, ddf, tmp_path, exchange):
    dest = tmp_path / "release"
    with pytest.raises(IdentifyingColumnError) as info:
        D.anonymize_to_parquet(ddf, dest, QIS, 10, client=cluster, leaf_rows=800,
                               exchange=exchange)
    _refused(info)
    assert not dest.exists()  # the files written, and the folder the run made, are gone
    # A folder that was there stays, without a file of the refused release.
    kept = tmp_path / "existing"
    kept.mkdir()
    (kept / "README").write_text("mine")
    with pytest.raises(IdentifyingColumnError):
        D.anonymize_to_parquet(ddf, kept, QIS, 10, client=cluster, leaf_rows=800,
                               exchange=exchange)
    assert [p.name for p in kept.iterdir()] == ["README"]
    top = D.anonymize_to_parquet(ddf, dest, QIS, 10, client=cluster, leaf_rows=800,
                                 exchange=exchange, allow_unique=["person_id"])
    assert top.identifying == [] and len(pd.read_parquet(dest)) == 3000
    D.anonymize_to_parquet(ddf, tmp_path / "dropped", QIS, 10, client=cluster, leaf_rows=800,
                           exchange=exchange, identifiers=["person_id"])
    assert "person_id" not in pd.read_parquet(tmp_path / "dropped").columns


def test_the_csv_writer_and_the_lazy_frames_writer_write_nothing(cluster, ddf, tmp_path):
    with pytest.raises(IdentifyingColumnError) as info:
        D.anonymize_to_csv(ddf, tmp_path / "csv" / "part-*.csv", QIS, 10, client=cluster,
                           leaf_rows=800)
    _refused(info)
    assert not (tmp_path / "csv").exists()
    D.anonymize_to_csv(ddf, tmp_path / "csv" / "part-*.csv", QIS, 10, client=cluster,
                       leaf_rows=800, allow_unique=["person_id"])
    assert len(pd.concat(pd.read_csv(p) for p in (tmp_path / "csv").glob("*.csv"))) == 3000


def test_a_plan_refuses_a_dask_table_in_its_counting_pass(cluster, ddf):
    df = _table()
    plan = fit_plan(df, QIS, 10)  # fitting releases nothing
    with pytest.raises(IdentifyingColumnError) as info:
        D_transform(plan, ddf, cluster)
    _refused(info)
    allowed = fit_plan(df, QIS, 10, allow_unique=["person_id"])
    out = D_transform(allowed, ddf, cluster).compute()
    assert out["person_id"].equals(df["person_id"])
    # A plan fitted on Dask fits without judging; its transform judges.
    fitted = fit_plan(ddf, QIS, 10, client=cluster)
    with pytest.raises(IdentifyingColumnError):
        D_transform(fitted, ddf, cluster)
    # The index is the caller's, not released: the lazy release keeps it.
    indexed = dd.from_pandas(df.assign(person_id=df["person_id"] * 7).set_index("person_id"),
                             npartitions=3)
    out = D_transform(plan, indexed, cluster).compute()
    assert sorted(out.index) == sorted(df["person_id"] * 7)


def test_a_plans_parquet_writer_leaves_nothing_at_the_destination(cluster, ddf, tmp_path):
    from dmondrian.plans.dask import transform_to_parquet

    df = _table()
    plan = fit_plan(df, QIS, 10)
    dest = tmp_path / "release"
    with pytest.raises(IdentifyingColumnError) as info:
        transform_to_parquet(plan, ddf, dest, client=cluster)
    _refused(info)
    assert not dest.exists()
    kept = tmp_path / "existing"
    kept.mkdir()
    (kept / "README").write_text("mine")
    with pytest.raises(IdentifyingColumnError):
        transform_to_parquet(plan, ddf, kept, client=cluster)
    assert [p.name for p in kept.iterdir()] == ["README"]
    # Sorted consecutive ids would count as positions: these have gaps.
    indexed = dd.from_pandas(df.assign(person_id=df["person_id"] * 7).set_index("person_id"),
                             npartitions=3)
    # No index is written unless asked; asked, a unique one is refused before any write.
    assert transform_to_parquet(plan, indexed, tmp_path / "plain", client=cluster) == 3000
    assert "person_id" not in pd.read_parquet(tmp_path / "plain").columns
    with pytest.raises(IdentifyingColumnError, match=r"the index \('person_id'\)") as info:
        transform_to_parquet(plan, indexed, tmp_path / "indexed", client=cluster,
                             write_options={"write_index": True})
    assert "write_index=False" in str(info.value)
    assert not (tmp_path / "indexed").exists()
    asked = fit_plan(df, QIS, 10, allow_unique=["index"])
    transform_to_parquet(asked, indexed, tmp_path / "indexed", client=cluster,
                         write_options={"write_index": True})
    assert sorted(pd.read_parquet(tmp_path / "indexed").index) == sorted(df["person_id"] * 7)
    allowed = fit_plan(df, QIS, 10, allow_unique=["person_id"])
    assert transform_to_parquet(allowed, ddf, dest, client=cluster) == 3000
    assert sorted(pd.read_parquet(dest)["person_id"]) == sorted(df["person_id"])
    dropped = fit_plan(df, QIS, 10, identifiers=["person_id"])
    transform_to_parquet(dropped, ddf, tmp_path / "dropped", client=cluster)
    assert "person_id" not in pd.read_parquet(tmp_path / "dropped").columns


def D_transform(plan, ddf, client):
    from dmondrian.plans.dask import transform_dask

    return transform_dask(plan, ddf, client=client)


def test_the_estimator_refuses_on_dask(cluster, ddf):
    with pytest.raises(IdentifyingColumnError):
        dmondrian.MondrianAnonymizer(k=10, quasi_id=QIS).fit_transform(ddf)
    est = dmondrian.MondrianAnonymizer(k=10, quasi_id=QIS, identifiers=["person_id"])
    assert "person_id" not in est.fit_transform(ddf).compute().columns


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_the_cli_on_dask_exits_with_one_line_and_no_output(cluster, tmp_path, capsys, fmt):
    src = tmp_path / "in.parquet"
    _table().to_parquet(src, index=False)
    dst = tmp_path / f"out.{fmt}"
    args = ["anonymize", str(src), str(dst), "--k", "10", "--qi", "age,zip", "--scheduler",
            cluster.scheduler.address, "--no-progress", "--leaf-rows", "800"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "dmondrian: error: refusing to release column 'person_id' unchanged")
    assert "--drop person_id" in err[0] and "--allow-unique person_id" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]  # not even a temp
    assert main([*args, "--drop", "person_id"]) == 0
    assert (tmp_path / f"out.{fmt}.manifest.json").exists()


# -- one verdict on every engine --------------------------------------------------------------
# The Dask engine's sketch settles a column whose distinct values are under half
# the rows (u <= d) or at least three quarters (u >= 2d - n), beyond the estimate's
# error; in between it counts the unique rows exactly. Either way its verdict is the
# local engine's, on every table; these sit around the lines.


def _column(kind: str, n: int = 2000, seed: int = 1) -> pd.Series:
    rng = np.random.default_rng(seed)

    def of(unique: int, pairs: int = 0, missing: int = 0) -> pd.Series:
        values = np.concatenate([np.arange(unique), np.repeat(np.arange(pairs) + unique, 2)])
        out = pd.array(rng.permutation(values), dtype="Int64")
        return pd.Series(pd.array([*out, *([pd.NA] * missing)], dtype="Int64")).sample(
            frac=1, random_state=seed, ignore_index=True)

    return {
        # 1,000 draws of 1,000 values: 63 % distinct, 37 % of the rows unique.
        "draws": lambda: pd.Series(rng.integers(0, 1000, 1000)),
        "draws-text": lambda: pd.Series(rng.integers(0, 1000, 1000)).map("v{}".format),
        "draws-category": lambda: pd.Series(rng.integers(0, 1000, 1000)).astype(
            "string").astype("category"),
        "all-unique": lambda: pd.Series(rng.permutation(n) * 3),
        "ties": lambda: of(0, n // 2),  # every value twice: 50 % distinct, no row unique
        "half-unique": lambda: of(n // 2, n // 4),  # 75 % distinct, 50 % unique: refused
        "just-under-half": lambda: of(n // 2 - 2, n // 4 + 1),  # 49.9 % unique
        "missing-half": lambda: of(n // 2, 0, n // 2),  # 50 % unique, the rest missing
        "missing-over-half": lambda: of(n // 2 - 1, 0, n // 2 + 1),
        "one-value": lambda: pd.Series(np.full(n, 7)),
        "all-missing": lambda: of(0, 0, n),
    }[kind]()


def _judged(values: pd.Series, index: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    n = len(values)
    df = pd.DataFrame({"age": rng.integers(18, 90, n), "zip": rng.integers(1000, 1010, n),
                       "c": values.array})
    if index:
        df = df.set_index("c")
    return df


def _local_refuses(df) -> bool:
    return bool(dmondrian.release.identifiers.identifying_columns(df, [c for c in df.columns
                                                               if c not in QIS]))


VERDICTS = {"draws": False, "draws-text": False, "draws-category": False, "all-unique": True,
            "ties": False, "half-unique": True, "just-under-half": False,
            "missing-half": True, "missing-over-half": False, "one-value": False,
            "all-missing": False}


@pytest.mark.parametrize("kind", list(VERDICTS))
def test_the_dask_engines_judge_as_the_local_one(cluster, kind, tmp_path):
    df = _judged(_column(kind))
    assert _local_refuses(df) is VERDICTS[kind]
    ddf = dd.from_pandas(df, npartitions=3)

    def refused(fn, *args, **kwargs) -> bool:
        try:
            fn(*args, **kwargs)
        except IdentifyingColumnError as e:
            assert e.columns == ["c"]
            return True
        return False

    plan = fit_plan(df, QIS, 10)
    assert [refused(D.anonymize, ddf, QIS, 10, client=cluster),  # the domain pass
            refused(D.anonymize_to_parquet, ddf, tmp_path / "out", QIS, 10,
                    client=cluster),  # the pass that writes
            refused(D_transform, plan, ddf, cluster),  # a plan's counting pass
            ] == [VERDICTS[kind]] * 3


def test_a_written_index_is_judged_as_the_local_engine_judges_a_column(cluster, tmp_path):
    for kind in ("draws", "half-unique"):
        df = _judged(_column(kind), index=True)
        ddf = dd.from_pandas(df, npartitions=3, sort=False)
        assert _local_refuses(df.reset_index()) is VERDICTS[kind]
        # In memory and lazily, the index is the caller's: never refused.
        assert len(D.anonymize(ddf, QIS, 10, client=cluster).compute()) == len(df)
        dest = tmp_path / kind
        write = {"write_options": {"write_index": True}, "client": cluster}
        if VERDICTS[kind]:
            with pytest.raises(IdentifyingColumnError, match=r"the index \('c'\)"):
                D.anonymize_to_parquet(ddf, dest, QIS, 10, **write)
            assert not dest.exists()
            with pytest.raises(IdentifyingColumnError, match=r"the index \('c'\)"):
                D.anonymize(ddf, QIS, 10, client=cluster).to_parquet(dest, write_index=True)
            D.anonymize_to_parquet(ddf, dest, QIS, 10, allow_unique=["c"], **write)
        else:
            D.anonymize_to_parquet(ddf, dest, QIS, 10, **write)
        assert len(pd.read_parquet(dest)) == len(df)


def test_the_exact_count_runs_only_for_columns_the_sketch_cannot_settle(cluster, monkeypatch):
    from dmondrian.release import unique_count
    from dmondrian.release.identifying_check import identifying_parts

    asked = []
    real = unique_count.unique_rows

    def spy(ddf, columns, *args, **kwargs):
        asked.append(list(columns))
        return real(ddf, columns, *args, **kwargs)

    monkeypatch.setattr(unique_count, "unique_rows", spy)
    rng = np.random.default_rng(3)
    n = 3000
    df = pd.DataFrame({"id": rng.permutation(n), "ward": rng.integers(0, 8, n),
                       "draws3": rng.integers(0, 1000, n),  # 32 % distinct: settled
                       "pairs": np.repeat(np.arange(n // 2), 2),  # 50 %: counted
                       "label": pd.Series(rng.permutation(n)).map("p{}".format)})
    parts, finish = identifying_parts(dd.from_pandas(df, npartitions=4), list(df.columns))
    found = finish(parts)
    assert [(f.column, f.exact) for f in found] == [("id", False), ("label", False)]
    assert asked == [["pairs"]]
    identifiers = dmondrian.release.identifiers
    assert [f.column for f in identifiers.identifying_columns(df, list(df.columns))
            ] == ["id", "label"]


@st.composite
def _tables(draw):
    """A column of some values held by one row, some by two or three, some missing."""
    unique = draw(st.integers(0, 1200))
    pairs = draw(st.integers(0, 500))
    triples = draw(st.integers(0, 200))
    missing = draw(st.integers(0, 300))
    values = np.concatenate([np.arange(unique), np.repeat(np.arange(pairs) + unique, 2),
                             np.repeat(np.arange(triples) + unique + pairs, 3)])
    rows = len(values) + missing
    assume(rows >= 1000)
    text = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    col = pd.Series([*values, *([None] * missing)],
                    dtype="string" if text else "Int64").sample(frac=1, random_state=seed,
                                                                ignore_index=True)
    return pd.DataFrame({"c": col}), draw(st.integers(1, 4))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.filter_too_much])
@given(_tables())
def test_any_column_is_judged_alike(cluster, table):
    from dmondrian.release.identifiers import identifying_columns
    from dmondrian.release.identifying_check import identifying_parts

    df, npartitions = table
    parts, finish = identifying_parts(dd.from_pandas(df, npartitions=npartitions), ["c"])
    on_dask = finish(parts)
    local = identifying_columns(df, ["c"])
    assert [f.column for f in on_dask] == [f.column for f in local]
    for f in on_dask:  # a counted share is the local engine's
        assert not f.exact or f.share == local[0].share


def test_the_local_cli_reads_a_folder_written_by_dask(tmp_path, capsys):
    # dd.to_parquet stores the row numbers as __null_dask_index__; pandas reads part.10
    # before part.2, so they come back out of order: an input's index, not a release column.
    src = tmp_path / "in.parquet"
    dd.from_pandas(_table(), npartitions=12).to_parquet(src)
    assert pd.read_parquet(src).index.name == "__null_dask_index__"
    assert not pd.read_parquet(src).index.is_monotonic_increasing
    out = tmp_path / "out.parquet"
    args = ["anonymize", str(src), str(out), "--local", "--k", "10", "--qi", "age,zip"]
    assert main([*args, "--drop", "person_id"]) == 0
    back = pd.read_parquet(out)
    assert len(back) == 3000 and "__null_dask_index__" not in back.columns
    assert back.index.name is None  # the writer wrote no index
    assert back.groupby(["age", "zip"]).size().min() >= 10
    # A unique column is still refused.
    capsys.readouterr()
    assert main([*args[:2], str(tmp_path / "again.parquet"), *args[3:]]) == 2
    assert "person_id" in capsys.readouterr().err


def test_a_person_key_in_small_partitions_is_warned_as_the_local_engine_does(cluster):
    import warnings

    from dmondrian.errors import IdentifyingColumnWarning
    from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS, make_events

    ev = make_events(2_000, seed=10)  # about 13k rows
    # Partitions smaller than dmondrian.release.identifiers.MIN_ROWS: the first alone says nothing.
    ddf = dd.from_pandas(ev, npartitions=30, sort=False)
    assert len(ddf.partitions[0].compute()) < 1000

    def warned(fn, *args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(*args, **kwargs)
        return sorted(str(w.message.column) for w in caught
                      if issubclass(w.category, IdentifyingColumnWarning))

    local = warned(dmondrian.anonymize, ev, EVENT_QUASI_IDENTIFIERS, 10)
    assert local == ["user_id"]
    assert warned(D.anonymize, ddf, EVENT_QUASI_IDENTIFIERS, 10, client=cluster) == local


def _row_numbers_refused(info):
    text = str(info.value)
    assert info.value.columns == ["index"] and info.value.found[0].is_index
    assert "input's order" in text and "\n" not in text
    assert "write_index=False" in text and "allow_unique=['index']" in text


@pytest.mark.parametrize("how", ["range", "per file", "concatenated"])
def test_every_writer_refuses_to_write_row_numbers(cluster, tmp_path, how):
    # Row numbers, asked to be written beside rows each file shuffles, give the input's
    # order back; on a table too small for any column to be judged identifying.
    from dmondrian.plans.dask import transform_to_parquet

    df = _table(600).drop(columns="person_id")
    if how == "range":
        ddf = dd.from_pandas(df, npartitions=3)
    elif how == "per file":  # dask's read of files written without an index
        dd.from_pandas(df, npartitions=3).to_parquet(tmp_path / "in", write_index=False)
        ddf = dd.read_parquet(tmp_path / "in")
    else:  # an int64 index numbering each part (not a RangeIndex)
        frame = pd.concat([df.iloc[:300].reset_index(drop=True),
                           df.iloc[300:].reset_index(drop=True)])
        assert not isinstance(frame.index, pd.RangeIndex)
        ddf = dd.from_pandas(frame, npartitions=2, sort=False)
    plan = fit_plan(df, QIS, 10)
    writers = {
        "to_parquet": lambda dest, **kw: D.anonymize_to_parquet(
            ddf, dest, QIS, 10, client=cluster, write_options={"write_index": True}, **kw),
        "to_csv": lambda dest, **kw: D.anonymize_to_csv(
            ddf, dest / "part-*.csv", QIS, 10, client=cluster, write_options={"index": True},
            **kw),
        "lazy": lambda dest, **kw: D.anonymize(ddf, QIS, 10, client=cluster, **kw).to_parquet(
            dest, write_index=True),
        "lazy, dask's writer": lambda dest, **kw: D.anonymize(
            ddf, QIS, 10, client=cluster, **kw).to_parquet(dest, write_index=True,
                                                          partition_on=["ward"]),
        "plan": lambda dest, **kw: transform_to_parquet(
            fit_plan(df, QIS, 10, **kw) if kw else plan, ddf, dest, client=cluster,
            write_options={"write_index": True}),
        "plan, lazy": lambda dest, **kw: D_transform(
            fit_plan(df, QIS, 10, **kw) if kw else plan, ddf, cluster).to_parquet(
            dest, write_index=True),
    }
    if how != "range":  # the same check: the two that are not the writers' own
        writers = {name: writers[name] for name in ("to_csv", "plan, lazy")}
    for name, write in writers.items():
        dest = tmp_path / name
        with pytest.raises(IdentifyingColumnError) as info:
            write(dest)
        _row_numbers_refused(info)
        assert not dest.exists(), name
        write(dest, allow_unique=["index"])  # the order judged safe: written
        assert dest.exists(), name
    # Not asked, no index is written, and nothing is refused.
    D.anonymize_to_parquet(ddf, tmp_path / "plain", QIS, 10, client=cluster)
    assert pd.read_parquet(tmp_path / "plain").index.name is None
