"""Privacy constraints: the rule that decides whether a cut may happen.

Mondrian is greedy: a node is cut only if *both* children satisfy the privacy
model. Each model is an object here; the engines ask it two things:

* :meth:`Constraint.check_table` before any work, so a table that cannot
  satisfy the model even as a single class fails with a clear error instead of
  producing a meaningless release;
* the kernel parameters (:meth:`Constraint.min_size`), which the numba split
  check (:func:`dmondrian._kernel._allowed`) evaluates on candidate children.
"""

from __future__ import annotations

import numbers

from .errors import InfeasibleError, ParameterError

__all__ = ["Constraint", "KAnonymity", "check_k"]


def check_k(k, n_rows: int | None = None) -> int:
    """Validate ``k``: an integer >= 1, and at most the number of rows if given."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ParameterError("k", f"k must be an integer >= 1, got {k!r}")
    if k < 1:
        raise ParameterError("k", f"k must be >= 1, got {k}")
    if n_rows is not None and k > n_rows:
        raise InfeasibleError(
            f"k={k} is larger than the table's {n_rows} rows: no release of this table "
            "can be k-anonymous"
        )
    return int(k)


class Constraint:
    """A privacy model a class must satisfy."""

    def min_size(self) -> int:
        """The smallest class size the model allows (1 if it does not bound size)."""
        return 1

    def check_table(self, n_rows: int) -> None:
        """Raise :class:`~dmondrian.errors.InfeasibleError` if even one class is impossible."""


class KAnonymity(Constraint):
    """Every equivalence class holds at least ``k`` rows.

    Parameters
    ----------
    k : int
        Minimum class size, ``k >= 1``.

    Examples
    --------
    >>> KAnonymity(5).min_size()
    5
    """

    def __init__(self, k: int):
        self.k = check_k(k)

    def min_size(self) -> int:
        return self.k

    def check_table(self, n_rows: int) -> None:
        check_k(self.k, n_rows)

    def __repr__(self) -> str:
        return f"KAnonymity(k={self.k})"
