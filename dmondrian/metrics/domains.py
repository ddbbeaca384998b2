"""Global domain of each QI in the original table: what NCP normalizes a class's cost by.

What a domain holds and how its scale is measured is each kind's
(:meth:`dmondrian.kinds.QIKindSpec.domain`); this module reads a table's QIs in one pass.
"""

from __future__ import annotations

from ..encoding.validation import check_mapping, check_quasi_identifiers
from ..kinds import Domain, resolve_kind
from ._frames import Deferred, check_table, meta_of, run

__all__ = ["Domain", "compute_domains", "domains_deferred", "column_kinds"]


def column_kinds(table, qis, hierarchies: dict, qi_kinds: dict) -> dict:
    """The kind object of every QI of ``table``, each checked readable as its kind.

    Parameters
    ----------
    table : pandas or Dask DataFrame
    qis : list
        Validated QI names.
    hierarchies, qi_kinds : dict
        Validated per-QI options, as given to :func:`dmondrian.anonymize`.

    Returns
    -------
    dict
        ``{column: QIKindSpec}``.
    """
    kinds = {q: resolve_kind(meta_of(table[q]), qi_kinds.get(q), q in hierarchies) for q in qis}
    for q in qis:
        kinds[q].check_column(table, q)
    return kinds


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
    >>> import pandas as pd
    >>> d = compute_domains(pd.DataFrame({"age": [20, 35, 60]}), ["age"])
    >>> d["age"].kind, d["age"].scale
    ('numeric', 40.0)
    """
    return run(domains_deferred(original, quasi_identifiers, hierarchies, qi_kinds))[0]


def domains_deferred(original, quasi_identifiers, hierarchies=None, qi_kinds=None) -> Deferred:
    """:func:`compute_domains` as a :class:`Deferred` (to share one Dask pass).

    Parameters
    ----------
    original : pandas or Dask DataFrame
    quasi_identifiers : list of column names
    hierarchies, qi_kinds : dict, optional

    Returns
    -------
    Deferred
        Finishes to ``{column: Domain}``.
    """
    check_table(original, "original")
    qis = check_quasi_identifiers(quasi_identifiers, original.columns)
    hierarchies = check_mapping("hierarchies", hierarchies, qis)
    qi_kinds = check_mapping("qi_kinds", qi_kinds, qis)
    kinds = column_kinds(original, qis, hierarchies, qi_kinds)
    plans = {q: kinds[q].domain_parts(original[q]) for q in qis}
    metas = {q: meta_of(original[q]) for q in qis}

    def finish(done):
        it = iter(done)
        return {q: kinds[q].domain(q, [next(it) for _ in plans[q]], metas[q],
                                   hierarchies.get(q)) for q in qis}

    return Deferred([p for q in qis for p in plans[q]], finish)
