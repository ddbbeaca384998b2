"""Privacy a table actually achieves: its k, distinct and entropy l, and t (EMD)."""

from __future__ import annotations

from dataclasses import dataclass

from ._frames import check_column, class_keys, compute
from .per_class import L_DISTINCT, L_ENTROPY, SIZE, T, class_statistics
from .sizes import size_summary

__all__ = ["Privacy", "privacy"]


@dataclass(frozen=True)
class Privacy:
    """Privacy a table actually achieves.

    Attributes
    ----------
    k : int
        Smallest class size.
    sensitive : column name or None
    l_distinct : int or None
        Fewest distinct sensitive values in a class.
    l_entropy : float or None
        ``exp`` of the smallest class entropy (natural log).
    t : float or None
        Largest EMD between a class's sensitive distribution and the table's.
    t_distance : str or None
        ``"ordered"`` or ``"equal"``.
    """

    k: int
    sensitive: object = None
    l_distinct: int | None = None
    l_entropy: float | None = None
    t: float | None = None
    t_distance: str | None = None


def privacy(table, quasi_identifiers, sensitive=None, *, class_column=None,
            t_distance="auto") -> Privacy:
    """k, l (distinct and entropy) and t a table actually achieves.

    Parameters
    ----------
    table : pandas or Dask DataFrame
        Any table: a release, or the original to see how exposed it is.
    quasi_identifiers : list of column names
        Its QI columns.
    sensitive : column name, optional
        The sensitive column for l and t.
    class_column : str, optional
        Define classes by this column instead of the QI values.
    t_distance : {"auto", "ordered", "equal"}
        EMD ground distance; "auto" orders numeric, datetime and ordered
        categorical values and treats the rest as nominal.

    Returns
    -------
    Privacy

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2,
    ...                   "disease": ["flu", "flu", "cold", "flu", "flu"]})
    >>> p = privacy(t, ["age"], "disease")
    >>> p.k, p.l_distinct, round(p.t, 3)
    (2, 1, 0.2)
    """
    _, keys = class_keys(table, quasi_identifiers, class_column)
    if sensitive is None:
        return Privacy(size_summary(table, quasi_identifiers, class_column).min_size)
    check_column(table, sensitive, "sensitive")
    frame, plan = class_statistics(table, keys, sensitive, t_distance)
    agg = (frame[SIZE].min(), frame[L_DISTINCT].min(), frame[L_ENTROPY].min(), frame[T].max())
    k, l_d, l_e, t = compute(*agg)
    return Privacy(int(k), sensitive, int(l_d), float(l_e), float(t), plan.distance)
