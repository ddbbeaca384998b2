"""The Dask job watchdog on worker processes paused by their real memory monitor.

A worker is paused the way a full one is: its memory manager's pause
threshold is lowered below what the process already uses, so dask itself
pauses it and the scheduler hears of it. A job then stops after its short
``stall_timeout`` instead of waiting for ever; a job whose tasks keep
finishing, or whose running worker is busy, is never stopped.
"""

from __future__ import annotations

import time

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from distributed_helpers import SHARED_WORKER_MEMORY

from dmondrian import distributed as D
from dmondrian import errors
from dmondrian._dask.cluster import run
from dmondrian._dask.watchdog import stall_timeout

QIS = ["age", "zip"]


@pytest.fixture(scope="module")
def cluster(process_cluster):
    """The session's two worker processes (2 GiB each); left running, never paused, for
    the modules after this one whatever a test did."""
    yield process_cluster
    _pause(process_cluster, paused=False)


def _statuses(client) -> dict:
    return {a: w["status"] for a, w in client.scheduler_info()["workers"].items()}


def _pause(client, workers=None, paused=True):
    """Pause (or resume) ``workers`` through their memory monitor; wait until it took."""
    fraction = 1e-4 if paused else dask.config.get("distributed.worker.memory.pause")

    def set_pause(dask_worker=None):  # nested: travels by value to the workers
        dask_worker.memory_manager.memory_pause_fraction = fraction

    client.run(set_pause, workers=workers)
    wanted = "paused" if paused else "running"
    deadline = time.monotonic() + 30
    while any(_statuses(client)[a] != wanted for a in workers or _statuses(client)):
        assert time.monotonic() < deadline, _statuses(client)
        time.sleep(0.05)


@pytest.fixture
def paused(cluster):
    _pause(cluster)
    yield cluster
    _pause(cluster, paused=False)


def _table(n=200):
    rng = np.random.default_rng(0)
    return dd.from_pandas(pd.DataFrame({"age": rng.integers(20, 80, n),
                                        "zip": rng.integers(0, 30, n)}), npartitions=2)


def _job_tasks(client) -> int:
    return client.run_on_scheduler(lambda dask_scheduler=None: len(dask_scheduler.tasks))


@pytest.mark.parametrize("value", [0, -1, float("nan"), "60", True])
def test_stall_timeout_is_checked_before_any_pass(value):
    with pytest.raises(errors.ParameterError, match="stall_timeout"):
        D.plan(_table(), QIS, 2, client=object(), stall_timeout=value)
    with pytest.raises(errors.ParameterError, match="stall_timeout"):
        D.anonymize_to_parquet(_table(), "unused", QIS, 2, client=object(),
                               stall_timeout=value)


def test_a_pass_on_paused_workers_stops_naming_them(paused):
    with pytest.raises(errors.JobStalledError) as info:
        D.plan(_table(), QIS, 2, client=paused, stall_timeout=1.0, progress=False)
    err = info.value
    workers = paused.scheduler_info()["workers"]
    assert sorted(w.address for w in err.workers) == sorted(workers)
    for w in err.workers:
        assert w.memory_limit == SHARED_WORKER_MEMORY == 2 * 2**30
        assert w.memory > 0
        assert w.address in str(err)
    assert "2,048 MiB" in str(err) and "pass 1" in str(err)
    deadline = time.monotonic() + 30
    while _job_tasks(paused):  # the stopped job's tasks are released, not left queued
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_the_write_stalls_too(cluster, tmp_path, monkeypatch):
    real_plan = D.plan

    def plan_then_pause(*args, **kwargs):
        top = real_plan(*args, **kwargs)
        _pause(cluster)
        return top

    monkeypatch.setattr(D, "plan", plan_then_pause)
    try:
        with pytest.raises(errors.JobStalledError, match="write"):
            D.anonymize_to_parquet(_table(), tmp_path / "out", QIS, 2, client=cluster,
                                   stall_timeout=1.0, progress=False)
    finally:
        monkeypatch.undo()
        _pause(cluster, paused=False)


def _slow(x, seconds):
    time.sleep(seconds)
    return x + 1


def test_slow_jobs_beside_a_paused_worker_are_never_stopped(cluster):
    first, second = sorted(_statuses(cluster))
    _pause(cluster, [first])
    try:
        # tasks keep finishing, each sooner than the timeout, all together later
        chain = dask.delayed(0)
        for _ in range(5):
            chain = dask.delayed(_slow, pure=False)(chain, 0.3)
        with stall_timeout(0.8):
            assert run(cluster, chain, False, "chain") == 5
        # one task longer than the timeout, on the running worker
        with stall_timeout(0.3):
            assert run(cluster, dask.delayed(_slow, pure=False)(0, 1.5), False, "long") == 1
    finally:
        _pause(cluster, [first], paused=False)


def _hog(megabytes):
    """Fill a worker past its memory limit (the nanny restarts it) and hold it a while."""
    block = np.ones(megabytes * 2**20 // 8)
    time.sleep(30)
    return float(block[0])


def test_a_job_whose_workers_keep_being_restarted_stops_naming_their_memory():
    from dask import delayed

    # Without dask's own cap on a task's failures, only the watch ends the loop.
    with dask.config.set({"distributed.scheduler.allowed-failures": 100}), LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, memory_limit="400MiB",
            dashboard_address=":0") as c, Client(c, set_as_default=False) as client:
        started = time.monotonic()
        with stall_timeout(60.0), pytest.raises(errors.WorkersRestartedError) as info:
            run(client, delayed(_hog)(600), False, "pass: hog")
        assert time.monotonic() - started < 120
        err = info.value
        assert len(err.workers) >= 2 and "pass: hog" in str(err)
        assert all(w.memory_limit == 400 * 2**20 for w in err.workers)
        assert "400 MiB" in str(err) and "restarted" in str(err)


def test_a_slow_shutdown_after_the_job_only_warns():
    """A cluster that times out while closing (a loaded host) does not fail a finished job;
    any other error still does."""
    from dmondrian._dask.cluster import close_patiently, release

    class Slow:
        closed = False

        def close(self):
            Slow.closed = True
            raise TimeoutError("workers did not stop in time")

    class Broken:
        def close(self):
            raise ValueError("not a timeout")

    with pytest.warns(RuntimeWarning, match="Slow took too long to shut down"):
        release([Slow()])
    assert Slow.closed
    with pytest.raises(ValueError, match="not a timeout"):
        close_patiently(Broken())
