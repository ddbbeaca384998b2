"""dmondrian: k-anonymity with the Mondrian multidimensional algorithm.

From a pandas DataFrame in a notebook to Parquet datasets larger than RAM on a
Dask cluster. See :func:`anonymize` and :class:`MondrianAnonymizer`.
"""

from __future__ import annotations

import importlib

from . import errors
from ._version import __version__

# Public names and the module each lives in. They are imported on first use:
# ``import dmondrian`` (and so every CLI call, even ``--help``) stays fast,
# and the compiled kernel is only loaded when the engine is.
_LAZY = {name: module for module, names in {
    "privacy.constraints": ("DistinctLDiversity", "EntropyLDiversity", "KAnonymity",
                            "RecursiveCLDiversity", "TCloseness"),
    "estimator": ("MondrianAnonymizer",),
    "kinds.hierarchy": ("Hierarchy",),
    "evaluation.manifest": ("write_manifest",),
    "metrics": ("calculate_avg_equivalence_class_size",),
    "release.publish": ("Interval", "parse_range", "parse_set"),
    "evaluation.reporting": ("Report", "report"),
    "evaluation.verification": ("VerifyResult", "verify"),
}.items() for name in names}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dmondrian' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["anonymize", "calculate_avg_equivalence_class_size", "errors", "Hierarchy", "Interval",
           "KAnonymity", "DistinctLDiversity", "EntropyLDiversity", "RecursiveCLDiversity",
           "TCloseness", "MondrianAnonymizer", "parse_range", "parse_set", "report", "Report",
           "verify", "VerifyResult", "write_manifest", "__version__"]


def anonymize(df, quasi_identifiers, k, **options):
    """k-anonymize a table with Mondrian.

    Dispatches on the table's type: a pandas DataFrame goes to :func:`dmondrian.local.anonymize` (in
    memory), a dask DataFrame to :func:`dmondrian.distributed.anonymize` (lazy result; extra options
    ``leaf_rows``, ``client``, ``progress``). See them for the parameters.

    Parameters
    ----------
    df : pandas.DataFrame or dask.dataframe.DataFrame
        The table.
    quasi_identifiers : list of str
        The columns an attacker could link to other data; they are generalized.
    k : int
        Every released equivalence class holds at least ``k`` rows.
    **options
        The options of the engine the table goes to: ``mode``, ``objective``, ``generalization``,
        ``l``, ``t``, ``sensitive``, ``suppression``, ``noise``, ``identifiers``, ...

    Returns
    -------
    pandas.DataFrame or dask.dataframe.DataFrame
        The release, of the same type as ``df``; the columns that are not QIs are unchanged.

    See Also
    --------
    dmondrian.verify : check a release against k (and l, t).
    dmondrian.report : what a release costs and risks.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [23, 24, 50, 51], "salary": [10, 20, 30, 40]})
    >>> anonymize(df, ["age"], k=2)["age"].tolist()
    ['[23, 24]', '[23, 24]', '[50, 51]', '[50, 51]']
    """
    if type(df).__module__.split(".")[0] == "dask":
        from .distributed import anonymize as distributed_anonymize

        return distributed_anonymize(df, quasi_identifiers, k, **options)
    from .local import anonymize as local_anonymize

    return local_anonymize(df, quasi_identifiers, k, **options)
