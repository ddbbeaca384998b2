"""The exact count of rows whose value no other row has, as a pass on the engine's cluster.

The counts are built engine-neutrally (:mod:`dmondrian.release.unique_count`,
which :func:`dmondrian.verify` and :func:`dmondrian.report` run on the default
scheduler); here they run on the engine's client, watched and with progress.
"""

from __future__ import annotations

from ..release import unique_count
from .cluster import run

__all__ = ["unique_rows"]


def unique_rows(ddf, columns, client=None, progress: bool | None = False) -> dict:
    """For each of ``columns`` of the dask DataFrame ``ddf`` (or the index's name, for
    its index), the count of rows whose value no other row has (missing values
    count as no value).

    Computed on ``client``, or the default scheduler when None.
    """
    if client is None:
        return unique_count.unique_rows(ddf, columns)
    result = run(client, unique_count.unique_counts(ddf, columns), progress,
                 "pass: rows of their own in columns a sketch cannot judge")
    return {c: int(n) for c, n in zip(columns, result, strict=True)}
