"""Quasi-identifiers as the kernel sees them: a column's kind, and its int64 keys.

The kernel only ever sees int64 keys: comparing two keys must give the same
answer as comparing the two original values in the order Mondrian cuts along.
What a key, a scale and a missing value are for each kind is the kind
object's business (:mod:`dmondrian.kinds`, where the table of kinds is);
this module is the entry point: :func:`encode_qi` resolves a column's kind
(with :func:`dmondrian.kinds.resolve_kind`, the one detection every path
uses) and lets it encode.
"""

from __future__ import annotations

import pandas as pd

from .hierarchy import Hierarchy
from .kinds import QIKind, resolve_kind
from .kinds.base import MISSING_LABEL, EncodedQI
from .kinds.keys import decode_float_keys, factorize, float_keys

__all__ = ["QIKind", "EncodedQI", "encode_qi", "float_keys", "decode_float_keys",
           "factorize", "MISSING_LABEL"]

# The Dask engine's domain pass imports it by this name until it is converted.
_factorize = factorize


def encode_qi(series: pd.Series, kind: str | None = None, hierarchy=None) -> EncodedQI:
    """Encode one column as kernel keys.

    Parameters
    ----------
    series : pandas.Series
        The column.
    kind : str, optional
        Force a kind (one of :attr:`QIKind.ALL`); detected from the dtype if None.
    hierarchy : Hierarchy, path, lines or mapping, optional
        A generalization tree; implies kind ``"hierarchy"``.

    Returns
    -------
    EncodedQI

    Examples
    --------
    >>> q = encode_qi(pd.Series([20, 35, 60], name="age"))
    >>> q.kind, q.keys.tolist(), q.scale
    ('numeric', [20, 35, 60], 40.0)
    """
    spec = resolve_kind(series, kind, has_hierarchy=hierarchy is not None)
    if hierarchy is not None:
        hierarchy = Hierarchy.coerce(hierarchy, name=series.name)
    return spec.encode(series, hierarchy)
