"""The library's writers publish the command line's manifest when asked (issue 38).

``manifest=True`` on every writer (``anonymize_to_parquet``, ``anonymize_to_csv``, the
lazy release's ``to_parquet``, a fitted plan's ``transform_to_parquet`` and its lazy
release's ``to_parquet``): the data and ``OUTPUT.manifest.json`` are staged together
and published with the manifest last, the files hashed as they stand, the seed
withheld; an OUTPUT that exists is refused before anything is written. Without it
(the default) no manifest is written. On a multi-process ``LocalCluster``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

from dmondrian import distributed as D  # noqa: E402
from dmondrian import report  # noqa: E402
from dmondrian.errors import OutputError  # noqa: E402
from dmondrian.evaluation.manifest import (  # noqa: E402
    COUNTED,
    NOT_MEASURED,
    WITHHELD,
    check_manifest,
)
from dmondrian.io.staging import STAGING_TAG  # noqa: E402
from dmondrian.plans import fit_plan  # noqa: E402
from dmondrian.plans.dask import transform_dask  # noqa: E402

QIS = ["age", "zip"]


def _table(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n), "zip": rng.integers(1000, 1100, n),
                         "ward": rng.integers(0, 8, n)})


@pytest.fixture(scope="module")
def cluster(process_client):
    return process_client


def test_every_writer_publishes_the_manifest_when_asked(cluster, tmp_path):
    df = _table()
    ddf = dd.from_pandas(df, npartitions=3)
    plan = fit_plan(df, QIS, 10)
    writers = {
        "to_parquet": lambda dest, **kw: D.anonymize_to_parquet(
            ddf, dest, QIS, 10, client=cluster, random_state=4, **kw),
        "to_csv": lambda dest, **kw: D.anonymize_to_csv(
            ddf, dest, QIS, 10, client=cluster, random_state=4,
            write_options={"single_file": True}, **kw),
        "lazy": lambda dest, **kw: D.anonymize(
            ddf, QIS, 10, client=cluster, random_state=4).to_parquet(dest, **kw),
        "plan": lambda dest, **kw: plan.transform_to_parquet(
            ddf, dest, client=cluster, random_state=4, **kw),
        "plan, lazy": lambda dest, **kw: transform_dask(
            plan, ddf, client=cluster).to_parquet(dest, **kw),
    }
    for name, write in writers.items():
        dest = tmp_path / (f"{name}.csv" if name == "to_csv" else name)
        manifest = tmp_path / f"{dest.name}.manifest.json"
        write(dest, manifest=True)
        assert dest.exists() and manifest.exists(), name
        m = json.loads(manifest.read_text())
        assert check_manifest(manifest) == {"missing": [], "changed": [], "extra": []}, name
        assert m["parameters"]["k"] == 10 and m["parameters"]["quasi_identifiers"] == QIS
        assert m["extra"]["writer"].startswith("dmondrian."), name
        if name == "to_parquet":
            # Counted by its write tasks (manifest-acc's ReleaseCounts), as the command
            # line's manifest on Dask: the report of the files themselves.
            read = report(dd.read_parquet(dest), QIS, original=ddf, k=10).to_dict()
            assert m["extra"]["metrics"] == COUNTED and m["achieved"]["k"] >= 10
            for key in ("rows", "classes", "achieved", "class_sizes", "discernibility"):
                assert m["metrics"][key] == read[key], key
            for key in ("overall", "per_attribute"):
                assert m["metrics"]["ncp"][key] == pytest.approx(read["ncp"][key]), key
        else:
            assert m["extra"]["metrics"] == NOT_MEASURED and m["metrics"] is None
        assert m["extra"]["row_order"]["index_written"] is False
        if name != "plan, lazy":  # seeded; the seed itself never written
            assert m["parameters"]["random_state"] == WITHHELD, name
            assert m["extra"]["row_order"]["seeded"] is True
        if name in ("to_parquet", "plan"):
            assert m["rows"] == {"input": len(df), "output": len(df)}, name
        # Published whole: no staging left beside it.
        assert not [p for p in tmp_path.iterdir() if STAGING_TAG in p.name], name
        # Asked again for the same OUTPUT: refused, the release and its manifest kept.
        before = manifest.read_text()
        with pytest.raises(OutputError, match="already exists"):
            write(dest, manifest=True)
        assert manifest.read_text() == before and check_manifest(manifest)["changed"] == []
        # By default, no manifest.
        plain = tmp_path / f"plain-{dest.name}"
        write(plain)
        assert plain.exists() and not (tmp_path / f"{plain.name}.manifest.json").exists()
