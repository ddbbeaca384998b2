"""dmondrian: k-anonymity with the Mondrian multidimensional algorithm.

From a pandas DataFrame in a notebook to Parquet datasets larger than RAM on a
Dask cluster. See :func:`anonymize` and :class:`MondrianAnonymizer`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from . import errors
from .constraints import (
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)
from .estimator import MondrianAnonymizer
from .hierarchy import Hierarchy
from .manifest import write_manifest
from .metrics import calculate_avg_equivalence_class_size
from .publish import Interval, parse_range, parse_set
from .reporting import Report, report
from .verify import VerifyResult, verify

try:
    __version__ = version("dmondrian")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "anonymize",
    "calculate_avg_equivalence_class_size",
    "errors",
    "Hierarchy",
    "Interval",
    "KAnonymity",
    "DistinctLDiversity",
    "EntropyLDiversity",
    "RecursiveCLDiversity",
    "TCloseness",
    "MondrianAnonymizer",
    "parse_range",
    "parse_set",
    "report",
    "Report",
    "verify",
    "VerifyResult",
    "write_manifest",
    "__version__",
]


def anonymize(df, quasi_identifiers, k, **options):
    """k-anonymize a table with Mondrian.

    Dispatches on the table's type: a pandas DataFrame goes to
    :func:`dmondrian.local.anonymize` (in memory), a dask DataFrame to
    :func:`dmondrian.distributed.anonymize` (lazy result; extra options
    ``leaf_rows``, ``client``, ``progress``). See them for the parameters.
    """
    if type(df).__module__.split(".")[0] == "dask":
        from .distributed import anonymize as distributed_anonymize

        return distributed_anonymize(df, quasi_identifiers, k, **options)
    from .local import anonymize as local_anonymize

    return local_anonymize(df, quasi_identifiers, k, **options)
