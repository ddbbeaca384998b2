"""Stop a Dask job that waits for ever on workers paused for lack of memory.

A worker whose process memory passes dask's pause threshold (``distributed.worker.memory.pause``, 80
% of its limit by default) starts no new task until its memory falls; memory dask cannot spill (a
task's own buffers, the interpreter) may never fall, and the job then waits for ever with nothing in
its log but "Unmanaged memory use is high". Every blocking wait of the Dask engine goes through
:func:`dmondrian._dask.cluster.run`, which waits here. When, for ``stall_timeout`` seconds, no task
of the job has finished, some worker is paused and no task of the job is assigned to a worker that
is not paused, the job's tasks are cancelled and :class:`~dmondrian.errors.JobStalledError` names
the paused workers, their memory and their limits. A job whose tasks keep finishing, however slowly,
is never stopped; nor is one with a task on a running worker, however long it takes, nor one without
a paused worker. ``stall_timeout`` should exceed the longest task a paused worker may still finish.

The same watch stops a restart loop: dask's nanny restarts a worker whose process passes 95 % of its
limit, and a job whose tasks fill it again each time would restart it for ever. The nanny logs each
such restart on the scheduler (:data:`RESTART_TOPIC`, with the process memory it saw); after
:data:`RESTARTS_MAX` of them during one wait (polled as above), the job's tasks are cancelled and
:class:`~dmondrian.errors.WorkersRestartedError` names the workers, the memory they held and their
limits. A worker lost for any other reason (a crash, a scale-down) is not counted: dask retries its
tasks elsewhere.

The timeout is set for a block of waits with :func:`stall_timeout` (the engine's entry points do it
from their ``stall_timeout`` option) and read by :func:`wait_for`. The lazy result of
:func:`dmondrian.distributed.anonymize` is computed by the caller, outside this watch.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .._compat import job_progress_probe, scheduler_workers
from ..errors import JobStalledError, WorkersRestartedError
from ..options import DASK_PLAN

__all__ = ["check_stall_timeout", "stall_timeout", "wait_for", "PausedWorker",
           "RESTARTS_MAX", "RESTART_TOPIC"]

#: Restarts for memory during one wait that stop the job.
RESTARTS_MAX = 2
#: The scheduler's event topic under which dask's nanny logs a restart for memory.
RESTART_TOPIC = "worker-restart-memory"

_TIMEOUT: ContextVar[float | None] = ContextVar("dmondrian_stall_timeout", default=None)


def check_stall_timeout(value) -> float | None:
    """``value`` as seconds (a positive number), or None (never stop).

    Examples
    --------
    >>> check_stall_timeout(30), check_stall_timeout(None)
    (30.0, None)
    >>> check_stall_timeout(0)
    Traceback (most recent call last):
    ...
    dmondrian.errors.ParameterError: stall_timeout must be None or a number of seconds > 0, got 0
    """
    value = DASK_PLAN["stall_timeout"].check(value)
    return None if value is None else float(value)


@contextmanager
def stall_timeout(seconds):
    """Watch every :func:`wait_for` inside the block with ``seconds`` (None: no watch)."""
    token = _TIMEOUT.set(check_stall_timeout(seconds))
    try:
        yield
    finally:
        _TIMEOUT.reset(token)


@dataclass(frozen=True)
class PausedWorker:
    """A paused worker as the scheduler last heard of it (bytes)."""

    address: str
    name: object
    memory: int | None
    memory_limit: int | None

    def describe(self) -> str:
        used = "unknown memory" if self.memory is None else _mb(self.memory)
        limit = "no limit" if not self.memory_limit else f"limit {_mb(self.memory_limit)}"
        return f"{self.address} (name {self.name!r}): {used} of process memory, {limit}"


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


class _Watch:
    """The state of one watched wait: the last progress seen and when."""

    def __init__(self, client, keys, timeout: float):
        self.client, self.keys, self.timeout = client, keys, timeout
        self.probe = job_progress_probe()
        self.remaining = None
        self.since = time.monotonic()
        #: Every worker's name and limit as last heard of, by address, and the
        #: restarts for memory logged before this wait.
        self.limits: dict = {}
        try:
            self.events_before = len(client.get_events(RESTART_TOPIC))
            self._remember(scheduler_workers(client))
        except Exception:  # noqa: BLE001 - a scheduler that keeps no events: unwatched
            self.events_before = None

    def restarted(self, workers: dict) -> list[PausedWorker] | None:
        """The workers restarted for memory during this wait, once there are enough to stop.

        The nanny logs every such restart on the scheduler (topic :data:`RESTART_TOPIC`) with the
        process memory it saw; the limit is the one the scheduler last heard from that worker.
        """
        self._remember(workers)
        if self.events_before is None:
            return None
        events = self.client.get_events(RESTART_TOPIC)[self.events_before:]
        if len(events) < RESTARTS_MAX:
            return None
        # A worker restarted before any poll saw it: the smallest limit known.
        known = [limit for _, limit in self.limits.values() if limit]
        out = []
        for _, event in events:
            name, limit = self.limits.get(event.get("worker"), (None, None))
            out.append(PausedWorker(event.get("worker"), name, event.get("rss"),
                                    limit or (min(known) if known else None)))
        return out

    def _remember(self, workers: dict) -> None:
        for address, info in workers.items():
            self.limits[address] = (info.get("name"), info.get("memory_limit"))

    def stalled(self) -> list[PausedWorker] | None:
        """The paused workers if the job has stalled for ``timeout`` seconds, else None.

        Raises
        ------
        WorkersRestartedError
            When workers keep being restarted for memory (:meth:`restarted`).
        """
        remaining, movable = self.client.run_on_scheduler(self.probe, self.keys)
        workers = scheduler_workers(self.client)
        restarted = self.restarted(workers)
        if restarted:
            raise WorkersRestartedError("", restarted, self.timeout)
        paused = [PausedWorker(address, info.get("name"), info.get("metrics", {}).get("memory"),
                               info.get("memory_limit"))
                  for address, info in workers.items() if info.get("status") == "paused"]
        now = time.monotonic()
        if remaining != self.remaining or movable or not paused:
            self.remaining, self.since = remaining, now
            return None
        return paused if now - self.since >= self.timeout else None


def wait_for(client, futures, label: str = "the job"):
    """``client.gather(futures)``, stopped by :class:`JobStalledError` if the job stalls.

    Parameters
    ----------
    client : distributed.Client
    futures : Future or list of Future
    label : str
        What the job is, for the error message.

    Returns
    -------
    The gathered results.
    """
    timeout = _TIMEOUT.get()
    if timeout is None:
        return client.gather(futures)
    flat = futures if isinstance(futures, (list, tuple)) else [futures]
    watch = _Watch(client, [f.key for f in flat], timeout)
    # A poll walks the job's unfinished tasks on the scheduler: rarely enough to
    # cost it nothing, often enough to stop within a fifth past the timeout.
    poll = min(5.0, timeout / 5)
    while True:
        pending = [f for f in flat if not f.done()]
        if not pending:
            break
        try:
            # Wakes as soon as the result is in (distributed.wait would use
            # the default client, not this one).
            pending[0].result(timeout=poll)
            continue
        except TimeoutError:
            if pending[0].done():  # the task itself raised TimeoutError
                continue
        except Exception:  # noqa: BLE001 - a failed task: gather raises its error
            break
        try:
            paused = watch.stalled()
        except WorkersRestartedError as e:
            for future in flat:
                future.release()
            raise WorkersRestartedError(label, e.workers, timeout) from None
        except Exception:  # noqa: BLE001 - a scheduler we cannot probe: wait unwatched
            return client.gather(futures)
        if paused:
            # Releasing the job's results cancels every task they wait for (client.cancel trips an
            # assertion of the scheduler when a result is also an input of another).
            for future in flat:
                future.release()
            raise JobStalledError(label, paused, timeout)
    return client.gather(futures)
