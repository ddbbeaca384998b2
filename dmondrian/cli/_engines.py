"""The engines and Dask clusters the commands run on, imported from here only.

The Dask engine's modules may move inside the package: every import of them
by the command line is in this module, so such a move changes one line here.
Imports happen on first use, so that ``dmondrian --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import logging

from ._common import UsageError


def local_anonymize():
    """The in-memory engine's ``anonymize`` (:func:`dmondrian.local.anonymize`).

    Returns
    -------
    callable
    """
    from ..local import anonymize

    return anonymize


def dask_engine():
    """The Dask engine's module: ``anonymize``, ``anonymize_to_parquet``, ``anonymize_to_csv``.

    Returns
    -------
    module
    """
    from .. import distributed

    return distributed


def has_dask_engine() -> bool:
    """Whether the Dask engine can be imported (Dask and distributed are installed).

    Returns
    -------
    bool
    """
    try:
        dask_engine()
    except ModuleNotFoundError:
        return False
    return True


@contextlib.contextmanager
def scheduler_client(address: str):
    """A client connected to the Dask scheduler at ``address``, closed on exit.

    Parameters
    ----------
    address : str
        E.g. ``tcp://host:8786``.

    Yields
    ------
    distributed.Client
    """
    from distributed import Client

    try:
        client = Client(address, timeout="10s")
    except OSError as exc:
        raise UsageError(f"cannot connect to the Dask scheduler at {address}: "
                         f"{' '.join(str(exc).split())}") from exc
    with client:
        yield client


@contextlib.contextmanager
def local_client(n_workers: int, memory_limit: int | None = None):
    """A client on a LocalCluster of single-threaded worker processes, closed on exit.

    Parameters
    ----------
    n_workers : int
        Worker processes.
    memory_limit : int, optional
        Bytes per worker; Dask's default share of the host's memory otherwise.

    Yields
    ------
    distributed.Client
    """
    from distributed import Client, LocalCluster

    from .._dask.cluster import close_patiently

    kwargs = {"n_workers": n_workers, "threads_per_worker": 1, "processes": True,
              "dashboard_address": None, "silence_logs": logging.ERROR}
    if memory_limit:
        kwargs["memory_limit"] = memory_limit
    cluster = LocalCluster(**kwargs)
    try:
        client = Client(cluster)
        try:
            yield client
        finally:
            close_patiently(client)
    finally:
        close_patiently(cluster)
