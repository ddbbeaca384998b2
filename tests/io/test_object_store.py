"""Releases written to an object store (issue 25, bug 4), against a real S3 endpoint.

moto's S3 server runs on a free loopback port for the module; every command
reaches it through s3fs with ``--storage-options``. Object stores have no
directories and no rename: a release is staged under a hidden prefix, copied
to its final keys, a directory release gets ``_SUCCESS`` last, and the
manifest comes after it (:mod:`dmondrian.io.staging`). Both engines, CSV and Parquet, the
manifest, and runs killed mid-write, which must leave nothing under the
final prefix.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("moto.server")
s3fs = pytest.importorskip("s3fs")

ROOT = Path(__file__).resolve().parents[2]
QIS = ["age", "zip", "sex"]
BUCKET = "etl"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on localhost: ``(options, fs)``, a bucket holding the day's input."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "testing",
               "secret": "testing", "client_kwargs": {"region_name": "eu-west-1"}}
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir(BUCKET)
    rng = np.random.default_rng(2)
    n = 4000
    df = pd.DataFrame({"age": rng.integers(18, 90, n),
                       "zip": rng.choice(["02134", "02139", "10001", "94110"], n),
                       "sex": rng.choice(["F", "M"], n), "income": rng.normal(5e4, 1e4, n)})
    with fs.open(f"{BUCKET}/raw/day.csv", "wb") as fh:
        df.to_csv(fh, index=False)
    try:
        yield options, fs
    finally:
        server.stop()


def _cli(options, *args) -> list[str]:
    return [*map(str, args), "--k", "10", "--qi", ",".join(QIS), "--dtype", "zip=str",
            "--no-progress", "--storage-options", json.dumps(options)]


def _env() -> dict:
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def _listing(fs, prefix: str) -> list[str]:
    fs.invalidate_cache()
    return sorted(fs.find(f"{BUCKET}/{prefix}"))


@pytest.mark.parametrize("engine", ["local", "distributed"])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_release_to_s3(s3, engine, fmt, capsys, shared_local_cluster):
    from dmondrian.cli import main

    options, fs = s3
    day = f"{engine}-{fmt}"
    dst = f"s3://{BUCKET}/anonymized/{day}" + (".csv" if fmt == "csv" else "/")
    # The session's worker processes, by address: a cluster of the command's own
    # (tests/cli/test_cli.py) would only add its start-up.
    flags = ["--local"] if engine == "local" else \
        ["--distributed", "--scheduler", shared_local_cluster.scheduler_address]
    code = main(["anonymize", *_cli(options, f"s3://{BUCKET}/raw/day.csv", dst),
                 "--output-format", fmt, "--seed", "3", *flags])
    assert code == 0, capsys.readouterr().err
    written = _listing(fs, f"anonymized/{day}")
    if fmt == "parquet":
        names = [p.rsplit("/", 1)[-1] for p in written if "/anonymized/" + day + "/" in p]
        assert "_SUCCESS" in names and any(n.endswith(".parquet") for n in names)
        released = pd.concat(pd.read_parquet(fs.open(p)) for p in written
                             if p.endswith(".parquet"))
    else:
        fs.invalidate_cache()
        released = pd.read_csv(fs.open(f"{BUCKET}/anonymized/{day}.csv"), dtype={"zip": str})
    assert len(released) == 4000
    assert released.groupby(QIS, observed=True).size().min() >= 10
    # Nothing staged is left behind, under the final prefix or beside it.
    assert not [p for p in _listing(fs, "anonymized") if ".tmp-" in p or "-staging-" in p]
    fs.invalidate_cache()
    name = f"{day}.csv" if fmt == "csv" else day
    with fs.open(f"{BUCKET}/anonymized/{name}.manifest.json") as fh:
        manifest = json.load(fh)
    assert manifest["extra"]["engine"] == engine
    assert manifest["achieved"]["k"] >= 10 and manifest["metrics"]["rows"] == 4000
    hashed = {f["path"] for f in manifest["output"]["files"]}
    assert hashed == ({p.rsplit("/", 1)[-1] for p in written if day + "/" in p}
                      if fmt == "parquet" else {f"{day}.csv"})


@pytest.mark.parametrize("action", ["kill", "kill-dask"])
def test_killed_run_leaves_no_object_under_the_final_prefix(s3, action):
    options, fs = s3
    day = f"killed-{action}"
    dst = f"s3://{BUCKET}/anonymized/{day}/"
    flags = ["--local"] if action == "kill" else ["--distributed", "--workers", "1"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "failing_write.py"), action, "anonymize",
         *_cli(options, f"s3://{BUCKET}/raw/day.csv", dst), "--output-format", "parquet",
         *flags], env=_env(), capture_output=True, text=True, timeout=300,
        start_new_session=True)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr)
    everything = _listing(fs, "anonymized")
    assert not [p for p in everything if f"/anonymized/{day}/" in p]
    assert not [p for p in everything if p.endswith(f"{day}.manifest.json")]
    staged = [p for p in everything if f"/anonymized/.{day}.dmondrian-staging-" in p]
    if action == "kill-dask":
        # The run really died mid-write: its hidden staging prefix holds one file.
        assert [p for p in staged if p.endswith(".parquet")] == [
            p for p in staged if "/data/" in p] and len([p for p in staged if "/data/" in p]) == 1
    # The same command again, without --overwrite: it clears the dead run's staging.
    code = subprocess.run([sys.executable, "-m", "dmondrian", "anonymize",
                           *_cli(options, f"s3://{BUCKET}/raw/day.csv", dst),
                           "--output-format", "parquet", *flags], env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert code.returncode == 0, code.stderr
    everything = _listing(fs, "anonymized")
    assert not [p for p in everything if f"/anonymized/.{day}." in p]
    assert [p for p in everything if p.endswith(f"{day}.manifest.json")]
    fs.rm(f"{BUCKET}/anonymized/{day}", recursive=True)
    fs.rm(f"{BUCKET}/anonymized/{day}.manifest.json")


def test_killed_between_the_copies_and_the_manifest_on_s3(s3):
    """Killed after its objects were copied, before its manifest: the next run of the
    same command removes them (they are the dead run's, its staged manifest says) and
    publishes its own release."""
    options, fs = s3
    day = "killed-moved"
    dst = f"s3://{BUCKET}/anonymized/{day}/"
    args = ["anonymize", *_cli(options, f"s3://{BUCKET}/raw/day.csv", dst),
            "--output-format", "parquet", "--local"]
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "failing_write.py"),
                           "kill-at:moved", *args], env=_env(), capture_output=True, text=True,
                          timeout=300, start_new_session=True)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr)
    everything = _listing(fs, "anonymized")
    assert [p for p in everything if f"/anonymized/{day}/" in p]
    assert not [p for p in everything if p.endswith(f"{day}.manifest.json")]
    proc = subprocess.run([sys.executable, "-m", "dmondrian", *args], env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    everything = _listing(fs, "anonymized")
    assert not [p for p in everything if f"/anonymized/.{day}." in p]
    fs.invalidate_cache()
    with fs.open(f"{BUCKET}/anonymized/{day}.manifest.json") as fh:
        manifest = json.load(fh)
    hashed = {f["path"] for f in manifest["output"]["files"]}
    assert hashed == {p.rsplit("/", 1)[-1] for p in everything if f"/anonymized/{day}/" in p}
    assert "_SUCCESS" in hashed
