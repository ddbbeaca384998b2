"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from distributed_helpers import SHARED_WORKER_MEMORY

from dmondrian.datasets import ADULT_ENV_VAR, load_adult


@pytest.fixture(scope="session")
def adult_dir() -> Path:
    """The folder of the UCI Adult files, from ``$DMONDRIAN_ADULT_DIR`` (skips without it)."""
    value = os.environ.get(ADULT_ENV_VAR)
    if not value:
        pytest.skip(
            f"Adult data not available: set {ADULT_ENV_VAR} to the folder holding adult.data"
        )
    path = Path(value)
    if not (path / "adult.data").is_file():
        pytest.skip(f"Adult data not available: {ADULT_ENV_VAR}={value!r} holds no adult.data")
    return path


@pytest.fixture(scope="session")
def adult(adult_dir):
    """The Adult table as the literature uses it (30,162 rows without '?').

    Shared by every test of the session: copy it before changing it.
    """
    return load_adult(adult_dir, download=False)


@pytest.fixture(scope="session")
def shared_thread_cluster():
    """An in-process ``LocalCluster`` (one worker, two threads), started once for the
    session; each module connects its own :func:`client`."""
    from distributed import LocalCluster

    with LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                      dashboard_address=":0") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(shared_thread_cluster):
    """A client of the session's in-process cluster, the default client of a module's
    tests; closing it at the module's end releases whatever the module left there."""
    from distributed import Client

    with Client(shared_thread_cluster) as c:
        yield c


@pytest.fixture(scope="session")
def shared_local_cluster():
    """A ``LocalCluster`` of two worker processes (one thread each, 2 GiB each), started
    once for the session: the workers import dmondrian anew, as on a real cluster.
    Modules connect their own client (:func:`process_cluster`, :func:`process_client`).
    The limit is one tests can name (test_watchdog asserts it), far above what the
    tests' tables need."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      memory_limit=SHARED_WORKER_MEMORY, dashboard_address=":0") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def process_cluster(shared_local_cluster):
    """A client of the session's two worker processes, shared by a module's tests."""
    from distributed import Client

    with Client(shared_local_cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)  # a test may have killed one
        yield client


@pytest.fixture(scope="module")
def process_client(shared_local_cluster):
    """:func:`process_cluster` as the default client: a bare ``.compute()`` runs there."""
    from distributed import Client

    with Client(shared_local_cluster) as client:
        client.wait_for_workers(2, timeout=60)
        yield client
