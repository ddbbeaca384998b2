"""Table plumbing every metric shares: pandas/Dask helpers, one-pass computing, class keys.

A metric asks for group-by sizes, value counts and reductions here; a Dask
table stays lazy until :func:`run` (or :func:`compute`) materializes the
parts of several metrics together, so only summaries reach the client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ..encoding.validation import check_quasi_identifiers
from ..errors import MissingColumnError, ParameterError
from ..kinds.base import is_dask, meta_of

__all__ = ["N_COLUMN", "SIZE_COLUMN", "VALUE_COLUMN", "HIDDEN_COLUMN", "is_dask", "compute",
           "Deferred", "run", "check_table", "check_column", "class_keys", "groupby",
           "class_sizes", "meta_of", "PARAMETERS", "shared_parameters"]

# Names of the columns metrics add to a table; chosen so they cannot clash with a user's QIs.
#: Rows of a (class, value) pair.
N_COLUMN = "__dmondrian_n__"
#: Rows of a class.
SIZE_COLUMN = "__dmondrian_size__"
#: An original value joined to the release.
VALUE_COLUMN = "__dmondrian_value__"
#: Whether the release publishes a value as missing (a masked, suppressed row).
HIDDEN_COLUMN = "__dmondrian_hidden__"


#: The parameters the measures of a release share, worded once: a docstring line
#: ``{name}`` stands for the entry ``name`` (see :func:`shared_parameters`).
PARAMETERS = {
    "table": """table : pandas or Dask DataFrame
    A released table.
quasi_identifiers : list of column names
    Its published QI columns.""",
    "released": """released : pandas or Dask DataFrame
    The released table.
quasi_identifiers : list of column names
    Its published QI columns.""",
    "class_column": """class_column : str, optional
    Define classes by this column instead of the published QI values.""",
    "k_sweep": """table : pandas.DataFrame
    The original table.
quasi_identifiers : list of column names
ks : iterable of int""",
}
#: A table and how its classes are defined.
PARAMETERS["classes"] = f"{PARAMETERS['table']}\n{PARAMETERS['class_column']}"


def shared_parameters(func):
    """Write out, in ``func``'s docstring, each line ``{name}`` as the entry ``name`` of
    :data:`PARAMETERS`, at that line's indentation.

    Parameters
    ----------
    func : callable
        A function whose docstring names shared parameters.

    Returns
    -------
    callable
        ``func``, its docstring whole for ``help()``, doctest and the API pages.
    """
    if not func.__doc__:  # python -OO drops docstrings
        return func
    lines = []
    for line in func.__doc__.split("\n"):
        name = line.strip()[1:-1]
        if line.strip() == f"{{{name}}}" and name in PARAMETERS:
            indent = line[:len(line) - len(line.lstrip())]
            lines.extend(indent + entry for entry in PARAMETERS[name].split("\n"))
        else:
            lines.append(line)
    func.__doc__ = "\n".join(lines)
    return func


def compute(*objs):
    """Materialize Dask collections among ``objs`` in one pass; others pass through."""
    lazy = [i for i, o in enumerate(objs) if is_dask(o)]
    if not lazy:
        return objs
    import dask

    done = dict(zip(lazy, dask.compute(*[objs[i] for i in lazy]), strict=True))
    return tuple(done.get(i, o) for i, o in enumerate(objs))


@dataclass
class Deferred:
    """Parts to compute (Dask collections, or values already known) and how to finish them.

    :func:`run` computes the parts of several Deferreds in one Dask pass, so
    a report reads a larger-than-RAM table as few times as possible.
    """

    parts: list
    finish: Callable


def run(*deferred: Deferred) -> list:
    """Compute every Deferred's parts together and return their finished results."""
    done = iter(compute(*[p for d in deferred for p in d.parts]))
    return [d.finish([next(done) for _ in d.parts]) for d in deferred]


def check_table(table, name: str = "table"):
    """Raise :class:`ParameterError` unless ``table`` is a pandas or Dask DataFrame."""
    if isinstance(table, pd.DataFrame) or (
            is_dask(table) and hasattr(table, "columns") and hasattr(table, "groupby")):
        return table
    raise ParameterError(name, f"{name} must be a pandas or Dask DataFrame, got "
                               f"{type(table).__name__}")


def check_column(table, column, what: str):
    """Raise :class:`MissingColumnError` unless ``column`` is in ``table``."""
    if column not in list(table.columns):
        raise MissingColumnError(column, f"{what} column {column!r} is not a column of the table")
    return column


def class_keys(table, quasi_identifiers, class_column=None) -> tuple[list, list]:
    """Validated QIs and the columns that define equivalence classes."""
    check_table(table)
    qis = check_quasi_identifiers(quasi_identifiers, table.columns)
    if class_column is None:
        return qis, qis
    check_column(table, class_column, "class")
    return qis, [class_column]


def groupby(table, keys):
    """Group ``table`` by ``keys`` as classes are grouped: missing values form
    groups of their own, unused categories none."""
    return table.groupby(keys, observed=True, dropna=False)


def class_sizes(table, keys):
    """Size of every class (lazy for Dask: a partitioned Series, never collected)."""
    g = groupby(table, keys)
    return g.size(split_out=True) if is_dask(table) else g.size()

