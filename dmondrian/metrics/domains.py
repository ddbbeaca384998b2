"""Global domain of each QI in the original table: what NCP normalizes a class's cost by."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import UnsupportedDtypeError
from ..hierarchy import Hierarchy
from ..qi import QIKind, detect_kind
from ..validation import check_mapping, check_quasi_identifiers
from ._frames import Deferred, _meta, check_table, is_dask, run

# The engine clamps the range of two huge floats here instead of overflowing to inf.
_FLOAT_MAX = float(np.finfo(np.float64).max)


@dataclass(frozen=True)
class Domain:
    """Global domain of one QI in the original table (what NCP normalizes by).

    Attributes
    ----------
    kind : str
        One of :attr:`dmondrian.qi.QIKind.ALL`.
    scale : float
        The normalizer: value range (numeric; nanoseconds for datetime), code
        range (ordinal), distinct values - 1 (nominal), leaves - 1 (hierarchy).
        0 means the QI is constant: every class then costs 0.
    lo, hi : object
        Smallest and largest present value (numeric, datetime, ordinal code).
    categories : tuple of str
        Category labels in order (ordinal).
    hierarchy : Hierarchy, optional
        The generalization tree (hierarchy), with a ``<NA>`` leaf if needed.
    """

    kind: str
    scale: float
    lo: object = None
    hi: object = None
    categories: tuple = ()
    hierarchy: Hierarchy | None = None


def _column_kind(meta: pd.Series, name, hierarchies, qi_kinds) -> str:
    if name in hierarchies:
        return QIKind.HIERARCHY
    kind = qi_kinds.get(name)
    if kind is None:
        return detect_kind(meta)
    if kind not in QIKind.ALL:
        raise UnsupportedDtypeError(name, f"unknown kind {kind!r} for column {name!r}; use one "
                                          f"of {QIKind.ALL}")
    if kind == QIKind.HIERARCHY:
        raise UnsupportedDtypeError(name, f"column {name!r} is declared kind 'hierarchy' but no "
                                          "hierarchy was given")
    return kind


def _check_known_categories(table, column):
    """Check that an ordinal Dask column knows its categories: they give the order.

    ``cat.as_known()`` would rebuild them from the data in sorted order, silently
    changing what "between" means, so unknown categories are an error instead.
    """
    col = table[column]
    if is_dask(col) and isinstance(col._meta.dtype, pd.CategoricalDtype) and not col.cat.known:
        raise UnsupportedDtypeError(column, f"ordinal column {column!r} has unknown categories "
                                            "in this Dask table, so their order is lost: cast it "
                                            "with .astype(pd.CategoricalDtype(categories, "
                                            "ordered=True))")


def _domain_plan(col, kind):
    """Lazy (or eager, for pandas) reductions a QI's domain needs."""
    if kind in (QIKind.NUMERIC, QIKind.DATETIME):
        if pd.api.types.is_bool_dtype(_meta(col).dtype):
            col = col.astype("float64")
        return (col.min(), col.max())
    if kind == QIKind.ORDINAL:
        if not isinstance(_meta(col).dtype, pd.CategoricalDtype):
            raise UnsupportedDtypeError(col.name, f"column {col.name!r} must be a pandas "
                                                  f"Categorical to be ordinal, not "
                                                  f"{_meta(col).dtype}")
        codes = col.cat.codes
        present = codes[codes >= 0]
        return (present.min(), present.max())
    if kind == QIKind.NOMINAL:
        return (col.nunique(dropna=False),)
    return (col.isna().any(),)


def _finish_domain(name, kind, parts, meta: pd.Series, hierarchy) -> Domain:
    if kind == QIKind.NUMERIC:
        lo, hi = parts
        if pd.isna(lo):
            return Domain(kind, 0.0)
        with np.errstate(over="ignore"):
            return Domain(kind, min(float(hi) - float(lo), _FLOAT_MAX), lo, hi)
    if kind == QIKind.DATETIME:
        lo, hi = parts
        if pd.isna(lo):
            return Domain(kind, 0.0)
        lo, hi = pd.Timestamp(lo), pd.Timestamp(hi)
        return Domain(kind, float((hi - lo) / pd.Timedelta(1, "ns")), lo, hi)
    if kind == QIKind.ORDINAL:
        lo, hi = parts
        cats = tuple(str(c) for c in meta.cat.categories)
        if pd.isna(lo):
            return Domain(kind, 0.0, categories=cats)
        return Domain(kind, float(hi - lo), int(lo), int(hi), cats)
    if kind == QIKind.NOMINAL:
        return Domain(kind, float(max(int(parts[0]) - 1, 0)))
    h = Hierarchy.coerce(hierarchy, name=name)
    if bool(parts[0]):
        h = h.with_missing_leaf()
    return Domain(kind, float(len(h) - 1), hierarchy=h)


def compute_domains(original, quasi_identifiers, hierarchies=None, qi_kinds=None) -> dict:
    """Global domain of every QI in the original table.

    Parameters
    ----------
    original : pandas or Dask DataFrame
        The table before anonymization (Dask: measured with reductions).
    quasi_identifiers : list of column names
        The QIs.
    hierarchies : dict, optional
        ``{column: hierarchy}`` as given to :func:`dmondrian.anonymize`.
    qi_kinds : dict, optional
        ``{column: kind}`` overriding the kind detected from the dtype.

    Returns
    -------
    dict
        ``{column: Domain}``.

    Examples
    --------
    >>> d = compute_domains(pd.DataFrame({"age": [20, 35, 60]}), ["age"])
    >>> d["age"].kind, d["age"].scale
    ('numeric', 40.0)
    """
    return run(domains_deferred(original, quasi_identifiers, hierarchies, qi_kinds))[0]


def domains_deferred(original, quasi_identifiers, hierarchies=None, qi_kinds=None) -> Deferred:
    """:func:`compute_domains` as a :class:`Deferred` (to share one Dask pass)."""
    check_table(original, "original")
    qis = check_quasi_identifiers(quasi_identifiers, original.columns)
    hierarchies = check_mapping("hierarchies", hierarchies, qis)
    qi_kinds = check_mapping("qi_kinds", qi_kinds, qis)
    kinds = {q: _column_kind(_meta(original[q]), q, hierarchies, qi_kinds) for q in qis}
    for q in qis:
        if kinds[q] == QIKind.ORDINAL:
            _check_known_categories(original, q)
    plans = {q: _domain_plan(original[q], kinds[q]) for q in qis}
    metas = {q: _meta(original[q]) for q in qis}

    def finish(done):
        it = iter(done)
        return {q: _finish_domain(q, kinds[q], [next(it) for _ in plans[q]], metas[q],
                                  hierarchies.get(q)) for q in qis}

    return Deferred([p for q in qis for p in plans[q]], finish)
