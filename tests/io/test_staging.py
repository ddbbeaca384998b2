"""The commit step (dmondrian.io.staging): nothing at OUTPUT before every check passed, a
release never left without its manifest by a run that finished, and a killed run
followed by the same command, without --overwrite, succeeding (issue 38).

Real processes are killed (SIGKILL to their whole process group) at each step of the
commit (tests/failing_write.py, ``kill-at:STEP``) and mid-write on Dask
(``kill-dask``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pytest

from dmondrian.errors import OutputError
from dmondrian.evaluation.manifest import check_manifest
from dmondrian.io import files as io
from dmondrian.io.staging import STAGING_TAG, staged_release

ROOT = Path(__file__).resolve().parents[2]
QIS = "age,zip,sex"


def _env() -> dict:
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def _people(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n),
                         "zip": rng.choice(["02134", "02139", "10001", "94110"], n),
                         "sex": rng.choice(["F", "M"], n),
                         "income": rng.integers(10, 1_000, n) * 100})


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("staging")
    _people(3000).to_csv(d / "people.csv", index=False)
    (d / "ds").mkdir()
    for i in range(3):
        _people(1000, seed=i).to_parquet(d / "ds" / f"part.{i}.parquet", index=False)
    return d


def _command(src, dst, *flags) -> list[str]:
    return ["anonymize", str(src), str(dst), "--k", "10", "--qi", QIS, "--dtype", "zip=str",
            "--no-progress", "--seed", "1", *flags]


def _run(action, args, cwd) -> subprocess.CompletedProcess:
    """``dmondrian ARGS`` in a session of its own, through tests/failing_write.py when
    ``action`` is given."""
    head = ([sys.executable, str(ROOT / "tests" / "failing_write.py"), action] if action
            else [sys.executable, "-m", "dmondrian"])
    return subprocess.run([*head, *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=300, start_new_session=True)


def _staging(folder: Path, name: str) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith(f".{name}{STAGING_TAG}")]


def _assert_committed(folder: Path, name: str, rows: int) -> None:
    out = folder / name.rstrip("/")
    manifest = Path(f"{out}.manifest.json")
    assert out.exists() and manifest.exists()
    assert check_manifest(manifest) == {"missing": [], "changed": [], "extra": []}
    assert json.loads(manifest.read_text())["rows"]["output"] == rows
    released = io.read_table(str(out), dtypes={"zip": "str"})
    assert len(released) == rows
    assert released.groupby(QIS.split(","), observed=True).size().min() >= 10
    assert not _staging(folder, out.name)


@pytest.mark.parametrize("step, dst", [
    ("staged", "killed.csv"), ("moved", "killed.csv"), ("committed", "killed.csv"),
    ("moved", "killed.parquet"), ("moved", "killed_ds/"), ("staged", "killed_ds/")])
def test_killed_at_each_commit_step_then_the_same_command_runs(work, step, dst):
    dst = f"{step}_{dst}"
    name = dst.rstrip("/")
    out = work / name
    args = _command("people.csv", dst, "--local")
    proc = _run(f"kill-at:{step}", args, work)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr)
    manifest = Path(f"{out}.manifest.json")
    # What a reader sees: nothing, or (between the data's move and the manifest) the
    # data without a manifest, which is not a release; or the whole release.
    assert out.exists() == (step != "staged")
    assert manifest.exists() == (step == "committed")
    assert len(_staging(work, name)) == 1  # what the dead run left, hidden
    proc = _run(None, args, work)
    if step == "committed":
        # That run did finish: its release stands, and is not replaced unasked.
        assert proc.returncode == 2 and "already exists" in proc.stderr
        assert check_manifest(manifest) == {"missing": [], "changed": [], "extra": []}
        assert not _staging(work, name)
    else:
        assert proc.returncode == 0, proc.stderr
        _assert_committed(work, dst, 3000)


def test_killed_mid_write_on_dask_then_the_same_command_runs(work):
    args = _command("ds", "dask_out/", "--distributed", "--workers", "1")
    proc = _run("kill-dask", args, work)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr)
    assert not (work / "dask_out").exists() and not (work / "dask_out.manifest.json").exists()
    staged = _staging(work, "dask_out")
    assert len(staged) == 1
    # The engine's writer writes into the command line's staging: staged once, not twice.
    assert [p.name for p in staged[0].rglob("*") if p.suffix == ".parquet"]
    assert not [p for p in staged[0].rglob("*") if STAGING_TAG in p.name]
    proc = _run(None, args, work)
    assert proc.returncode == 0, proc.stderr
    _assert_committed(work, "dask_out", 3000)


def test_foreign_data_without_a_manifest_is_never_removed(work, tmp_path):
    """OUTPUT without a manifest that no dead run of ours claims is the user's."""
    (tmp_path / "people.csv").write_bytes((work / "people.csv").read_bytes())
    out = tmp_path / "theirs.csv"
    out.write_text("their,data\n1,2\n")
    # A dead run's staging whose manifest lists other files does not make it ours.
    stale = tmp_path / f".theirs.csv{STAGING_TAG}0123456789ab"
    stale.mkdir()
    (stale / "committing").write_bytes(b"")
    (stale / "manifest.json").write_text(json.dumps(
        {"output": {"files": [{"path": "theirs.csv", "bytes": 5, "sha256": "0"}]}}))
    args = _command("people.csv", "theirs.csv", "--local")
    proc = _run(None, args, tmp_path)
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert out.read_text() == "their,data\n1,2\n"
    assert not stale.exists()  # the dead run's staging is gone all the same
    proc = _run(None, [*args, "--overwrite"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    _assert_committed(tmp_path, "theirs.csv", 3000)


def test_a_live_run_is_not_disturbed(tmp_path):
    """A staging folder whose run still lives (its lock held) stops a second run."""
    url = str(tmp_path / "out.csv")
    with staged_release(url) as first:
        with pytest.raises(OutputError, match="another dmondrian run is writing"), \
                staged_release(url):
            pass
        assert os.path.isdir(first.root)  # untouched
        with fsspec.open(first.data_url, "w") as fh:
            fh.write("age\n[20, 29]\n")
        first.stage_manifest({"output": {"files": []}})
        first.commit()
    assert (tmp_path / "out.csv").exists() and (tmp_path / "out.csv.manifest.json").exists()
    assert sorted(os.listdir(tmp_path)) == ["out.csv", "out.csv.manifest.json"]


def test_a_check_refusing_after_the_write_leaves_nothing(work, monkeypatch, capsys):
    """The manifest's report runs on the staged release: its refusal publishes nothing."""
    from dmondrian.cli import anonymize as cli_anonymize
    from dmondrian.cli import main
    from dmondrian.errors import ParameterError

    def refusing(*args, **kwargs):
        raise ParameterError("education", "refused by the report")

    monkeypatch.setattr(cli_anonymize, "release_report", refusing)
    code = main(_command(work / "people.csv", work / "refused.csv", "--local"))
    assert code == 2 and "refused by the report" in capsys.readouterr().err
    assert not (work / "refused.csv").exists()
    assert not (work / "refused.csv.manifest.json").exists()
    assert not _staging(work, "refused.csv")


def test_overwrite_replaces_a_release_and_its_manifest(work):
    args = _command("people.csv", "again.parquet", "--local")
    assert _run(None, args, work).returncode == 0
    first = json.loads((work / "again.parquet.manifest.json").read_text())
    proc = _run(None, [*args, "--seed", "2", "--overwrite"], work)
    assert proc.returncode == 0, proc.stderr
    second = json.loads((work / "again.parquet.manifest.json").read_text())
    assert first["output"]["files"] != second["output"]["files"]
    _assert_committed(work, "again.parquet", 3000)


@pytest.mark.parametrize("writer", ["anonymize_to_parquet", "lazy to_parquet",
                                    "transform_to_parquet"])
def test_the_librarys_writers_write_nothing_at_path_before_they_finish(client, tmp_path,
                                                                        monkeypatch, writer):
    """Every file is written into the hidden staging and moved to ``path`` at the end,
    into a folder that is there already (its other files kept)."""
    import dask.dataframe as dd

    from dmondrian import distributed as D
    from dmondrian.io.parquet_sink import ParquetSink
    from dmondrian.plans import fit_plan
    from dmondrian.plans.dask import transform_to_parquet

    df = _people(3000)
    ddf = dd.from_pandas(df, npartitions=3)
    final = tmp_path / "release"
    final.mkdir()
    (final / "_mine").write_text("mine")
    seen = []
    write = ParquetSink.write

    def spying(self, frame, number, distinct=None):
        seen.append((self.root, sorted(p.name for p in final.iterdir())))
        return write(self, frame, number, distinct)

    monkeypatch.setattr(ParquetSink, "write", spying)
    qis = QIS.split(",")
    if writer == "anonymize_to_parquet":
        D.anonymize_to_parquet(ddf, final, qis, 10, client=client)
    elif writer == "lazy to_parquet":
        D.anonymize(ddf, qis, 10, client=client).to_parquet(final)
    else:
        transform_to_parquet(fit_plan(df, qis, 10), ddf, final, client=client)
    assert seen and all(STAGING_TAG in root and names == ["_mine"] for root, names in seen)
    assert "_mine" in os.listdir(final)
    released = pd.read_parquet(final)
    assert len(released) == 3000
    assert released.groupby(qis, observed=True).size().min() >= 10
    assert not _staging(tmp_path, "release")
