"""A column that singles out rows is refused on every Dask path, leaving nothing behind.

The lazy release and the CSV writer judge in the domain pass (nothing is
computed or written), the Parquet writer in the pass that writes (its files
are removed), a fitted plan's transform in its counting pass; the command
line's ``--distributed`` run exits with one line and no output.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

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
    # The index, when not row positions, is a column like any other (sorted
    # consecutive ids would count as positions: these have gaps).
    indexed = dd.from_pandas(df.assign(person_id=df["person_id"] * 7).set_index("person_id"),
                             npartitions=3)
    with pytest.raises(IdentifyingColumnError, match=r"the index \('person_id'\)"):
        D_transform(plan, indexed, cluster)


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
