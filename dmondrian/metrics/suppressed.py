"""How many rows a release suppressed: masked rows it publishes, rows it left out.

A masked row (:mod:`dmondrian.privacy.suppression`) publishes every QI hidden: the label ``"*"``, or
a missing value for QIs published as numbers, with at least one ``"*"`` (a release whose QIs are all
numbers cannot tell a masked row from a row of missing values, and counts none). Dropped rows are
the rows of the original table the release lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..privacy.suppression import MASK_LABEL
from ._frames import Deferred

__all__ = ["Suppressed", "masked_count", "suppressed_deferred"]


@dataclass(frozen=True)
class Suppressed:
    """Rows suppressed by a release.

    Attributes
    ----------
    masked : int
        Rows published with every QI hidden.
    dropped : int or None
        Rows of the original the release leaves out (None without the original).
    input_rows : int
        Rows of the original table (the release's rows without it).
    """

    masked: int
    dropped: int | None
    input_rows: int

    @property
    def rows(self) -> int:
        """Masked and dropped rows."""
        return self.masked + (self.dropped or 0)

    @property
    def share(self) -> float:
        """Suppressed rows over the original's rows."""
        return self.rows / self.input_rows if self.input_rows else 0.0

    def to_dict(self) -> dict:
        return {"rows": self.rows, "share": self.share, "masked": self.masked,
                "dropped": self.dropped}


def masked_count(released, quasi_identifiers, n=None):
    """Rows of ``released`` publishing every QI hidden (lazy for Dask); ``n``: the rows
    each row stands for (default one each).

    Examples
    --------
    >>> import pandas as pd
    >>> rel = pd.DataFrame({"age": ["*", "[20, 30]", "*"], "zip": [None, 1.5, None]})
    >>> int(masked_count(rel, ["age", "zip"]))
    2
    """
    hidden = star = None
    for q in quasi_identifiers:
        col = released[q]
        kind = getattr(getattr(col, "dtype", None), "kind", "O")
        is_star = (col == MASK_LABEL) if kind not in "iufcbmM" else None
        h = col.isna() if is_star is None else (is_star | col.isna())
        hidden = h if hidden is None else hidden & h
        if is_star is not None:
            star = is_star if star is None else star | is_star
    if star is None:
        return hidden.sum() * 0
    return (hidden & star).sum() if n is None else ((hidden & star) * n).sum()


def suppressed_deferred(released, quasi_identifiers, n_released, original=None) -> Deferred:
    """:class:`Suppressed` as a :class:`Deferred` (shares a report's pass).

    ``n_released`` is the release's row count (a number or a lazy one).
    """
    parts = [masked_count(released, quasi_identifiers), n_released]
    if original is not None:
        parts.append(original.shape[0])

    def finish(done):
        masked, n = int(done[0]), int(done[1])
        if len(done) == 2:
            return Suppressed(masked, None, n)
        n_input = int(done[2])
        return Suppressed(masked, max(0, n_input - n), n_input)

    return Deferred(parts, finish)
