"""The distributed engine on real clusters: worker processes, the dask CLI over TCP,
and a worker killed mid-run (data larger than the workers' memory: benchmarks/over_memory.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client
from distributed_helpers import CENSUS_QIS, average_ncp, make_census, row_ids

from dmondrian import distributed as D
from dmondrian import local

ROOT = Path(__file__).resolve().parents[2]
DASK = Path(sys.executable).with_name("dask")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _check_release(out: pd.DataFrame, original: pd.DataFrame, k: int):
    assert len(out) == len(original)
    assert out.groupby("cls").size().min() >= k
    assert out.index.sort_values().equals(original.index)


def test_local_cluster_with_processes_matches_in_process_run(process_cluster,
                                                             shared_thread_cluster):
    df = make_census(20_000, seed=11)
    ddf = dd.from_pandas(df, npartitions=6)
    options = dict(leaf_rows=2500, class_column="cls", mode="relaxed")
    got = D.anonymize(ddf, CENSUS_QIS, 5, client=process_cluster, **options,
                      allow_unique=row_ids(ddf))
    got = process_cluster.compute(got).result().sort_index()
    _check_release(got, df, 5)
    # The session's in-process cluster (worker threads), the default client for this run.
    with Client(shared_thread_cluster) as threads:
        again = D.anonymize(ddf, CENSUS_QIS, 5, client=threads, **options,
                            allow_unique=row_ids(ddf)).compute()
    pd.testing.assert_frame_equal(got, again.sort_index())


@pytest.fixture
def cli_cluster(tmp_path):
    """`dask scheduler` and two `dask worker` processes over TCP on 127.0.0.1."""
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        for _ in range(2):
            procs.append(subprocess.Popen(
                [str(DASK), "worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
                 "--memory-limit", "1GB", "--no-dashboard", "--host", "127.0.0.1"],
                env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(scheduler_file=str(sched_file), set_as_default=False) as probe:
            probe.wait_for_workers(2, timeout=90)
            address = probe.scheduler.address
        yield address
        # Asked to, the scheduler closes the workers and itself at once; each
        # process would take seconds to shut down on SIGTERM alone.
        with Client(address, set_as_default=False) as closer:
            closer.shutdown()
        # Left alone they exit within seconds; a SIGTERM meanwhile races a nanny's
        # own close, and the nanny then waits 8 s before it kills its worker.
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_cli_scheduler_and_workers_found_through_environment(cli_cluster, tmp_path,
                                                            monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cli_cluster)
    df = make_census(15_000, seed=12)
    ddf = dd.from_pandas(df, npartitions=5)
    # The index is asked for, and allowed (it numbers the rows): the release is
    # matched to the input row by row below.
    top = D.anonymize_to_parquet(ddf, tmp_path / "out", CENSUS_QIS, 10, leaf_rows=2000,
                                 class_column="cls", write_options={"write_index": True},
                                 allow_unique=[*row_ids(ddf), "index"])
    assert top.n_leaves > 4
    out = pd.read_parquet(tmp_path / "out")
    _check_release(out, df, 10)
    ncp = average_ncp(df, out.loc[df.index, "cls"].to_numpy(), CENSUS_QIS)
    ref = local.anonymize(df, CENSUS_QIS, 10, class_column="cls", allow_unique=row_ids(df))
    assert ncp <= average_ncp(df, ref["cls"].to_numpy(), CENSUS_QIS) * 1.02


# -- fault tolerance ---------------------------------------------------------------------------


def test_worker_killed_mid_run_gives_identical_output(process_cluster, tmp_path):
    client = process_cluster
    df = make_census(100_000, seed=13)
    ddf = dd.from_pandas(df, npartitions=12)
    # Relaxed: a retried task must also split median ties exactly as before
    # (by input position, fixed by the partitioning).
    # Seeded: the files' row shuffles (dmondrian.release.row_order) repeat too.
    options = dict(leaf_rows=10_000, class_column="cls", mode="relaxed", random_state=0)
    top = D.anonymize_to_parquet(ddf, tmp_path / "calm", CENSUS_QIS, 5, client=client,
                                 **options, allow_unique=row_ids(ddf))
    assert top.tree.has_ties

    killed = {}

    def kill_when_shuffling():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            busy = client.processing()
            for worker, keys in busy.items():
                if any("shuffle" in str(key) or "anonymize_output_partition" in str(key)
                       for key in keys):
                    pid = client.run(os.getpid, workers=[worker])[worker]
                    os.kill(pid, signal.SIGKILL)
                    killed["pid"] = pid
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_shuffling)
    killer.start()
    D.anonymize_to_parquet(ddf, tmp_path / "hurt", CENSUS_QIS, 5, client=client, **options,
                           allow_unique=row_ids(ddf))
    killer.join()
    assert killed, "the run finished before a worker could be killed"
    client.wait_for_workers(2, timeout=60)
    calm = pd.read_parquet(tmp_path / "calm")
    hurt = pd.read_parquet(tmp_path / "hurt")
    pd.testing.assert_frame_equal(calm, hurt)
