"""Which Dask cluster the Dask engine runs on, and how it reports progress.

:func:`resolve_client` finds it: the ``client`` passed in, else the default client, else
``$DASK_SCHEDULER_ADDRESS``, else an embedded ``LocalCluster`` that dmondrian starts and must close;
:func:`session` owns that lifetime. See docs/design.md, section "Cluster".
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from contextlib import contextmanager

from .._compat import scheduler_workers
from .watchdog import wait_for

__all__ = ["resolve_client", "session", "run", "on_client", "worker_memory_per_thread",
           "cores_per_worker", "lasting_client", "close_patiently"]

_ANNOUNCED: set = set()


def _default_client():
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def resolve_client(client=None, **cluster_options):
    """Find the client to use; start an embedded LocalCluster if there is none.

    Returns
    -------
    client : distributed.Client
    owned : list
        What this call created (a connection, or a LocalCluster and its client),
        for :func:`release`. Empty when the client came from the caller.
    """
    if client is not None:
        return client, []
    found = _default_client()
    if found is not None:
        return found, []
    from distributed import Client, LocalCluster

    address = os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        c = Client(address)
        return c, [c]
    cluster = LocalCluster(**cluster_options)
    c = Client(cluster)
    return c, [c, cluster]


def lasting_client(client=None) -> bool:
    """Whether the cluster :func:`resolve_client` finds outlives the call: one passed in, or
    the default client (not one it would connect to or start, and then close)."""
    return client is not None or _default_client() is not None


def release(owned) -> None:
    """Close what :func:`resolve_client` created."""
    for obj in owned:
        close_patiently(obj)


def close_patiently(obj) -> None:
    """Close a client or a cluster; a shutdown that times out only warns.

    Closing comes after the job: its results are computed and its files written and checked. On a
    loaded host an embedded LocalCluster's workers can take longer to stop than dask waits, and
    failing the finished job for it would tell the user their release is lost when it is not. The
    worker processes are daemons, so they end with this process at the latest.
    """
    try:
        obj.close()
    except TimeoutError:
        warnings.warn(f"dmondrian: the {type(obj).__name__} took too long to shut down; "
                      "the work it did is complete", RuntimeWarning, stacklevel=3)


@contextmanager
def session(client=None, **cluster_options):
    """Context manager yielding a client; closes whatever it had to create.

    Examples
    --------
    >>> from distributed import Client
    >>> with Client(processes=False, n_workers=1, dashboard_address=":0") as c:
    ...     with session() as s:
    ...         s is c
    True
    """
    c, owned = resolve_client(client, **cluster_options)
    try:
        yield c
    finally:
        release(owned)


def interactive() -> bool:
    """Whether a human is watching: a terminal on stderr or a notebook kernel."""
    if "ipykernel" in sys.modules:
        return True
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def announce(client) -> None:
    """Print the dashboard link once per scheduler."""
    address = getattr(client.scheduler, "address", None) or id(client)
    if address in _ANNOUNCED:
        return
    _ANNOUNCED.add(address)
    link = getattr(client, "dashboard_link", None)
    if link:
        print(f"dmondrian: Dask dashboard at {link}", file=sys.stderr)


def run(client, collection, progress: bool | None, label: str, keep=()):
    """Compute a dask collection on ``client``, with a progress bar when watched.

    The wait is watched for stalls (:mod:`dmondrian._dask.watchdog`).
    ``keep``: more collections computed in the same job and left on the
    workers; their futures are returned beside the result, ``(result, futures)``.
    """
    show = interactive() if progress is None else progress
    kept = []
    if keep:
        # One job: the tasks both share run once.
        futures, *kept = client.compute([collection, *keep])
    else:
        futures = client.compute(collection)
    bar = None
    if show:
        from distributed import progress as dask_progress

        announce(client)
        print(f"dmondrian: {label}", file=sys.stderr)
        if "ipykernel" in sys.modules:  # a widget: it returns at once
            dask_progress(futures, scheduler=client.scheduler.address)
        else:
            # The text bar blocks until the job ends: on a thread of its own,
            # so that this one can watch the job and stop it.
            bar = threading.Thread(target=dask_progress, args=(futures,),
                                   kwargs={"scheduler": client.scheduler.address}, daemon=True)
            bar.start()
    result = wait_for(client, futures, label)
    if bar is not None:
        bar.join(timeout=5)  # let it print its last line before anything else
    return (result, kept) if keep else result


def on_client(client, progress: bool | None):
    """``compute(collections, label) -> results``: :func:`run` on ``client``, watched; None without
    a client (the caller computes on the default scheduler). For the engine-neutral passes that take
    a ``compute`` (:func:`dmondrian.release.unique_count.unique_rows`)."""
    if client is None:
        return None
    return lambda collections, label: run(client, collections, progress, label)


def worker_memory_per_thread(client) -> float | None:
    """A worker thread's memory budget (bytes) after its worker's baseline, None if unknown.

    See :class:`dmondrian._dask.memory.WorkerMemory`.
    """
    from .memory import measure_workers

    mem = measure_workers(client)
    return None if mem is None else mem.per_thread


def cores_per_worker(client) -> int | None:
    """Cores each worker process may use without oversubscribing its host, None if unknown.

    Workers on one host share its cores: with two workers on two cores, a task that starts its own
    thread pool (the OpenMP kernel, one call at a time per worker) should use one core, not two. The
    smallest share over the hosts.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    int or None

    Examples
    --------
    >>> from distributed import Client
    >>> with Client(processes=False, n_workers=1, dashboard_address=":0") as c:
    ...     cores_per_worker(c) >= 1
    True
    """
    from urllib.parse import urlsplit

    try:
        cores = client.run(_usable_cores)
        workers = scheduler_workers(client)
    except Exception:  # noqa: BLE001 - an unknown layout keeps OpenMP's default
        return None
    # In-process workers (inproc:// addresses) share this process's host.
    count, host_cores = {}, {}
    for address in workers:
        host = urlsplit(address).hostname or "localhost"
        count[host] = count.get(host, 0) + 1
        if cores.get(address):
            host_cores[host] = max(host_cores.get(host, 0), int(cores[address]))
    shares = [max(1, host_cores[h] // count[h]) for h in count if h in host_cores]
    return min(shares) if shares else None


def _usable_cores() -> int:
    """Cores this process may run on (CPU affinity and cgroup quotas counted)."""
    from dask.system import CPU_COUNT

    return CPU_COUNT
