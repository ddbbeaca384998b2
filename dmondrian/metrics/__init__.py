"""What a release costs (information loss) and risks (re-identification, privacy).

Every function takes a released table (pandas or Dask) and its quasi-identifier
(QI) columns. Equivalence classes are the groups of rows that publish the same
QI values (what an attacker sees), or the groups of ``class_column`` when the
engine's bookkeeping column is given. A Dask table is measured with
aggregations only (group-by sizes, value counts, reductions): only per-class
or per-label summaries ever reach the client.

Definitions (``T`` the table, ``E`` its classes, ``|E|`` a class's size)
------------------------------------------------------------------------
* ``C_avg = |T| / (len(E) * k)`` (LeFevre et al. 2006); 1 is ideal.
* Discernibility ``DM = sum(|E|**2)`` (Bayardo & Agrawal 2005; nothing is
  suppressed here, so it has no suppression term).
* NCP (normalized certainty penalty, Xu et al. 2006; GCP in Ghinita et al.
  2007). A class's cost for one QI is

  - numeric, datetime: ``(hi - lo) / (global max - global min)``;
  - ordinal: ``(code(hi) - code(lo)) / (global code range)``;
  - nominal: ``(values in the set - 1) / (distinct values in the table - 1)``,
    a missing value counting as one more value (``<NA>`` is in the set);
  - hierarchy: ``(leaves under the published node - 1) / (leaves - 1)``, all
    leaves of the hierarchy counted (plus the ``<NA>`` leaf when the original
    column has missing values);
  - missing values (numeric, datetime, ordinal): a class publishing only
    ``<NA>`` costs 0, a class publishing ``"[lo, hi] or <NA>"`` costs 1.

  These are exactly the spans the engine cuts by (:mod:`dmondrian._kernel`),
  normalized by the *original* table's global domains. A QI's NCP is the
  mean cost over records; the overall NCP (GCP) is the weighted mean of the
  QIs' NCPs, equal weights by default. Both lie in [0, 1].
* Re-identification risk (El Emam & Dankar 2008; Dankar & El Emam 2010),
  with ``f_j`` the size of released class ``j``, ``F_j`` the number of
  population records matching its published values and ``n = |T|``:

  - prosecutor: record risk ``1 / f_j``; maximum ``1 / min f_j``; average
    ``len(E) / n``;
  - journalist: record risk ``1 / F_j``; maximum ``1 / min F_j``;
  - marketer: ``(1/n) * sum_j f_j / F_j``, the expected share of records an
    attacker matching everyone re-identifies (``len(E) / n`` without a
    population, when the release is the whole population);
  - at risk: the share of records whose risk exceeds ``threshold``.
* Privacy actually achieved: ``k`` = smallest class; distinct l-diversity =
  fewest distinct sensitive values in a class; entropy l-diversity =
  ``exp(min class entropy)`` (a table is entropy l-diverse for every
  ``l <= l_entropy``); t-closeness = largest Earth Mover's Distance between a
  class's sensitive distribution and the table's (Li, Li & Venkatasubramanian
  2007): ordered distance ``sum_i |cumulative difference_i| / (m - 1)`` for
  numeric or ordered values (``m`` distinct values in the table; all the
  categories of an ordered categorical, as in the engine's check), equal
  distance ``sum_i |p_i - q_i| / 2`` for nominal ones. A missing sensitive
  value is a value of its own (last in order).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .constraints import check_k
from .errors import (
    InvalidValueError,
    MissingColumnError,
    ParameterError,
    ParseError,
    UnsupportedDtypeError,
)
from .hierarchy import MISSING_LEAF, Hierarchy
from .publish import parse_range, parse_set
from .qi import MISSING_LABEL, QIKind, detect_kind
from .validation import check_mapping, check_quasi_identifiers

__all__ = [
    "Domain",
    "NCP",
    "Privacy",
    "Risk",
    "calculate_avg_equivalence_class_size",
    "c_avg",
    "class_size_distribution",
    "compute_domains",
    "discernibility",
    "ncp",
    "privacy",
    "reidentification_risk",
    "size_counts",
]

#: Prosecutor risk above which a record counts as "at risk" by default: 0.2 is
#: the common "no class smaller than 5" rule of thumb for public releases.
DEFAULT_RISK_THRESHOLD = 0.2

# The engine clamps the range of two huge floats here instead of overflowing to inf.
_FLOAT_MAX = float(np.finfo(np.float64).max)

# Internal column names; chosen so they cannot clash with a user's QI names.
_N = "__dmondrian_n__"
_SIZE = "__dmondrian_size__"
_VALUE = "__dmondrian_value__"


# -- table plumbing ---------------------------------------------------------------------------


def is_dask(obj) -> bool:
    """Whether ``obj`` is a Dask collection (checked without importing Dask)."""
    return type(obj).__module__.startswith("dask.")


def compute(*objs):
    """Materialize Dask collections among ``objs`` in one pass; others pass through."""
    lazy = [i for i, o in enumerate(objs) if is_dask(o)]
    if not lazy:
        return objs
    import dask

    done = dask.compute(*[objs[i] for i in lazy])
    out = list(objs)
    for i, value in zip(lazy, done, strict=True):
        out[i] = value
    return tuple(out)


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
    if isinstance(table, pd.DataFrame):
        return table
    if is_dask(table) and hasattr(table, "columns") and hasattr(table, "groupby"):
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


def _groupby(table, keys):
    return table.groupby(keys, observed=True, dropna=False)


def class_sizes(table, keys):
    """Size of every class (lazy for Dask: a partitioned Series, never collected)."""
    g = _groupby(table, keys)
    return g.size(split_out=True) if is_dask(table) else g.size()


def _size_counts_of(sizes):
    counts = sizes.rename(_SIZE).to_frame().groupby(_SIZE).size()
    return counts


def _finish_size_counts(counts: pd.Series) -> pd.Series:
    out = counts.sort_index().astype(np.int64)
    out.index = out.index.astype(np.int64)
    out.index.name = "size"
    out.name = "classes"
    return out


def size_counts(table, quasi_identifiers, class_column=None) -> pd.Series:
    """How many classes have each size.

    Parameters
    ----------
    table : pandas or Dask DataFrame
        A released table.
    quasi_identifiers : list of column names
        Its published QI columns.
    class_column : str, optional
        Define classes by this column instead of the published QI values.

    Returns
    -------
    pandas.Series
        Indexed by class size (ascending), the number of classes of that size.

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> size_counts(t, ["age"]).to_dict()
    {2: 1, 3: 1}
    """
    _, keys = class_keys(table, quasi_identifiers, class_column)
    (counts,) = compute(_size_counts_of(class_sizes(table, keys)))
    return _finish_size_counts(counts)


@dataclass(frozen=True)
class SizeSummary:
    """Everything that follows from the class sizes alone."""

    counts: pd.Series

    @property
    def n_records(self) -> int:
        return int((self.counts.index.to_numpy() * self.counts.to_numpy()).sum())

    @property
    def n_classes(self) -> int:
        return int(self.counts.sum())

    @property
    def min_size(self) -> int:
        return int(self.counts.index.min()) if len(self.counts) else 0

    @property
    def max_size(self) -> int:
        return int(self.counts.index.max()) if len(self.counts) else 0

    @property
    def discernibility(self) -> int:
        # Python ints: one class of 10**10 rows would overflow int64 when squared.
        return sum(int(s) * int(s) * int(c) for s, c in self.counts.items())

    def c_avg(self, k: int) -> float:
        return self.n_records / (self.n_classes * k) if self.n_classes else math.nan


def _size_summary(table, quasi_identifiers, class_column=None) -> SizeSummary:
    return SizeSummary(size_counts(table, quasi_identifiers, class_column))


# -- size-based metrics -----------------------------------------------------------------------


def c_avg(table, quasi_identifiers, k, class_column=None) -> float:
    """Average equivalence class size metric ``C_avg = |T| / (n_classes * k)``.

    Parameters
    ----------
    table : pandas or Dask DataFrame
        A released table.
    quasi_identifiers : list of column names
        Its published QI columns.
    k : int
        The k the table was released for.
    class_column : str, optional
        Define classes by this column instead of the published QI values.

    Returns
    -------
    float
        1.0 when every class has exactly ``k`` rows; larger is coarser.

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> c_avg(t, ["age"], k=2)
    1.25
    """
    k = check_k(k)
    return _size_summary(table, quasi_identifiers, class_column).c_avg(k)


def calculate_avg_equivalence_class_size(df, k, quasi_id) -> float:
    """``C_avg`` with the seed project's signature; see :func:`c_avg`.

    Parameters
    ----------
    df : pandas or Dask DataFrame
        A released table.
    k : int
        The k it was released for.
    quasi_id : list of column names
        Its published QI columns.

    Returns
    -------
    float
        ``|T| / (n_classes * k)``.

    Examples
    --------
    >>> t = pd.DataFrame({"zip": ["1100*"] * 4})
    >>> calculate_avg_equivalence_class_size(t, 2, ["zip"])
    2.0
    """
    return c_avg(df, quasi_id, k)


def discernibility(table, quasi_identifiers, class_column=None) -> int:
    """Discernibility metric: the sum of squared class sizes.

    Every record is charged the size of its class (Bayardo & Agrawal 2005);
    nothing is suppressed, so there is no suppression term.

    Parameters
    ----------
    table : pandas or Dask DataFrame
        A released table.
    quasi_identifiers : list of column names
        Its published QI columns.
    class_column : str, optional
        Define classes by this column instead of the published QI values.

    Returns
    -------
    int

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> discernibility(t, ["age"])
    13
    """
    return _size_summary(table, quasi_identifiers, class_column).discernibility


def _default_edges(max_size: int) -> list[int]:
    edges = [1, 2, 3, 5]
    base = 10
    while edges[-1] <= max_size:
        edges.extend([base, 2 * base, 5 * base])
        base *= 10
    return [e for e in edges if e <= max_size] + [next(e for e in edges if e > max_size)]


def size_distribution(counts: pd.Series, bins=None) -> pd.DataFrame:
    """Bucket a :func:`size_counts` result (see :func:`class_size_distribution`)."""
    sizes = counts.index.to_numpy(dtype=np.int64)
    n = counts.to_numpy(dtype=np.int64)
    if isinstance(bins, str) and bins == "exact":
        edges = None
    elif bins is None:
        edges = _default_edges(int(sizes.max()) if len(sizes) else 1)
    else:
        try:
            edges = sorted({int(b) for b in bins})
        except (TypeError, ValueError):
            raise ParameterError("bins", f"bins must be class sizes or 'exact', "
                                         f"got {bins!r}") from None
        if not edges or edges[0] < 1:
            raise ParameterError("bins", f"bins must be increasing class sizes >= 1, got {bins!r}")
        if len(sizes) and edges[-1] <= sizes.max():
            edges.append(int(sizes.max()) + 1)
    if edges is None:
        return pd.DataFrame({"size_min": sizes, "size_max": sizes, "classes": n,
                             "records": sizes * n})
    rows = []
    if len(sizes) and sizes.min() < edges[0]:
        edges = [int(sizes.min()), *edges]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (sizes >= lo) & (sizes < hi)
        rows.append((lo, hi - 1, int(n[inside].sum()), int((sizes * n)[inside].sum())))
    return pd.DataFrame(rows, columns=["size_min", "size_max", "classes", "records"])


def class_size_distribution(table, quasi_identifiers, bins=None, class_column=None):
    """Number of classes and records per class-size bucket.

    Parameters
    ----------
    table : pandas or Dask DataFrame
        A released table.
    quasi_identifiers : list of column names
        Its published QI columns.
    bins : sequence of int or "exact", optional
        Bucket edges (a bucket is ``[edge, next edge)``); ``"exact"`` gives one
        row per distinct size. Default: 1, 2, 3-4, 5-9, 10-19, 20-49, ...
    class_column : str, optional
        Define classes by this column instead of the published QI values.

    Returns
    -------
    pandas.DataFrame
        Columns ``size_min``, ``size_max`` (inclusive), ``classes`` and
        ``records``.

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> class_size_distribution(t, ["age"], bins=[1, 3]).values.tolist()
    [[1, 2, 1, 2], [3, 3, 1, 3]]
    """
    return size_distribution(size_counts(table, quasi_identifiers, class_column), bins)


# -- domains ----------------------------------------------------------------------------------


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


def _meta(col) -> pd.Series:
    return col._meta if is_dask(col) else col


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


# -- NCP --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NCP:
    """Normalized certainty penalty of a release.

    Attributes
    ----------
    per_attribute : dict
        ``{qi: NCP}``, each the mean cost over records, in [0, 1].
    overall : float
        The weighted mean of ``per_attribute`` (the GCP).
    weights : dict
        ``{qi: weight}``, normalized to sum to 1.
    """

    per_attribute: dict
    overall: float
    weights: dict


def _is_missing(label) -> bool:
    return label is None or (not isinstance(label, str) and pd.isna(label))


def _label_cost(label, domain: Domain, column, node_of) -> float:
    """NCP of one published value (see the module docstring)."""
    if _is_missing(label):
        return 0.0
    text = str(label)
    kind = domain.kind
    try:
        if kind == QIKind.NOMINAL:
            return (len(parse_set(text)) - 1) / domain.scale if domain.scale > 0 else 0.0
        if kind == QIKind.HIERARCHY:
            node = node_of.get(text)
            if node is None:
                raise ParseError(f"{text!r} is not a node of the hierarchy")
            return (domain.hierarchy.n_leaves_under(node) - 1) / domain.scale \
                if domain.scale > 0 else 0.0
        interval = parse_range(text, kind)
    except ParseError as exc:
        raise InvalidValueError(column, f"column {column!r} holds {text!r}, which is not a "
                                        f"published {kind} value: {exc}") from None
    if interval.lo is None:  # only missing values
        return 0.0
    if interval.missing:  # "[lo, hi] or <NA>" tells an analyst nothing
        return 1.0
    if domain.scale <= 0:
        return 0.0
    if kind == QIKind.ORDINAL:
        lo, hi = (_ordinal_code(v, domain, column) for v in (interval.lo, interval.hi))
        return (hi - lo) / domain.scale
    if kind == QIKind.DATETIME:
        return float((interval.hi - interval.lo) / pd.Timedelta(1, "ns")) / domain.scale
    with np.errstate(over="ignore"):
        return min(float(interval.hi) - float(interval.lo), _FLOAT_MAX) / domain.scale


def _ordinal_code(label: str, domain: Domain, column) -> int:
    try:
        return domain.categories.index(label)
    except ValueError:
        raise InvalidValueError(column, f"column {column!r} publishes {label!r}, which is not "
                                        f"a category of the original column") from None


def _node_index(domain: Domain) -> dict:
    if domain.hierarchy is None:
        return {}
    return {label: i for i, label in enumerate(domain.hierarchy.labels)}


def label_costs(labels, domain: Domain, column=None) -> np.ndarray:
    """NCP of each published value in ``labels`` for a QI with ``domain``.

    Examples
    --------
    >>> label_costs(["[20, 30]", "25", "<NA>", "[20, 30] or <NA>"],
    ...             Domain("numeric", 40.0, 20, 60)).tolist()
    [0.25, 0.0, 0.0, 1.0]
    """
    node_of = _node_index(domain)
    return np.fromiter((_label_cost(v, domain, column, node_of) for v in labels),
                       dtype=np.float64, count=len(labels))


def _publishes_numbers(meta: pd.Series) -> bool:
    dtype = meta.dtype
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(dtype):
        return False
    return bool(pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_datetime64_any_dtype(dtype))


def _value_cost_plan(released, original, q, keys):
    """Per-class bounds of a QI published as numbers (midpoint/mean), from the originals."""
    if original is None:
        raise ParameterError("original", f"column {q!r} is published as numbers (midpoint or "
                                         "mean), so its NCP needs the row-aligned original table")
    if not is_dask(released) and not released.index.equals(original.index):
        raise ParameterError("original", "original must be row-aligned with the released table "
                                         "(same index) to measure midpoint/mean columns")
    frame = released[keys].assign(**{_VALUE: original[q]})
    agg = _groupby(frame, keys)[_VALUE].agg(["min", "max", "count", "size"])
    return agg


def _value_costs(stats: pd.DataFrame, domain: Domain) -> float:
    """Sum over classes of size * cost, with the engine's missing-value rule."""
    lo, hi = stats["min"], stats["max"]
    if domain.kind == QIKind.DATETIME:
        span = ((hi - lo) / pd.Timedelta(1, "ns")).to_numpy(dtype=np.float64, na_value=0.0)
    else:
        span = (hi.astype("float64") - lo.astype("float64")).to_numpy(dtype=np.float64,
                                                                      na_value=0.0)
    present = stats["count"].to_numpy()
    size = stats["size"].to_numpy()
    cost = span / domain.scale if domain.scale > 0 else np.zeros(len(span))
    cost = np.where((present > 0) & (present < size), 1.0, np.where(present == 0, 0.0, cost))
    return float((cost * size).sum())


def _check_weights(weights, qis) -> dict:
    if weights is None:
        raw = {q: 1.0 for q in qis}
    elif isinstance(weights, Mapping):
        check_mapping("weights", weights, qis)
        raw = {q: weights.get(q, 0.0) for q in qis}
    else:
        seq = list(weights)
        if len(seq) != len(qis):
            raise ParameterError("weights", f"weights has {len(seq)} entries for "
                                            f"{len(qis)} quasi-identifiers")
        raw = dict(zip(qis, seq, strict=True))
    for q, w in raw.items():
        if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w) or w < 0:
            raise ParameterError("weights", f"weight of {q!r} must be a finite number >= 0, "
                                            f"got {w!r}")
    total = float(sum(raw.values()))
    if total <= 0:
        raise ParameterError("weights", "weights must not all be zero")
    return {q: float(w) / total for q, w in raw.items()}


def _ncp_plan(released, qis, keys, original):
    plans = {}
    for q in qis:
        if _publishes_numbers(_meta(released[q])):
            plans[q] = ("values", _value_cost_plan(released, original, q, keys))
        else:
            plans[q] = ("labels", released[q].value_counts(dropna=False))
    return plans


def _ncp_finish(plans, done, qis, domains, weights, n_records) -> NCP:
    per = {}
    for q, value in zip(qis, done, strict=True):
        how = plans[q][0]
        if how == "labels":
            value = value[value > 0]  # unused categories (and Dask's placeholder)
            costs = label_costs(list(value.index), domains[q], q)
            total = float((costs * value.to_numpy(dtype=np.float64)).sum())
        else:
            total = _value_costs(value, domains[q])
        per[q] = total / n_records if n_records else 0.0
    overall = float(sum(weights[q] * per[q] for q in qis))
    return NCP(per, overall, weights)


def resolve_domains(quasi_identifiers, original=None, domains=None, hierarchies=None,
                    qi_kinds=None) -> dict:
    """Domains from ``domains`` if given, else measured on ``original``."""
    if domains is not None:
        if not isinstance(domains, Mapping):
            raise ParameterError("domains", "domains must be a mapping column -> Domain "
                                            "(see compute_domains)")
        for q in quasi_identifiers:
            if q not in domains:
                raise MissingColumnError(q, f"domains has no entry for quasi-identifier {q!r}")
            if not isinstance(domains[q], Domain):
                raise ParameterError("domains", f"domains[{q!r}] must be a Domain, "
                                                f"got {type(domains[q]).__name__}")
        return dict(domains)
    if original is None:
        raise ParameterError("original", "NCP is measured against the original table's global "
                                         "domains: pass original= or domains=")
    return compute_domains(original, quasi_identifiers, hierarchies, qi_kinds)


def ncp(released, quasi_identifiers, original=None, *, domains=None, hierarchies=None,
        qi_kinds=None, weights=None, class_column=None) -> NCP:
    """Normalized certainty penalty (NCP / GCP) of a release, per QI and overall.

    Parameters
    ----------
    released : pandas or Dask DataFrame
        The released table.
    quasi_identifiers : list of column names
        Its published QI columns.
    original : pandas or Dask DataFrame, optional
        The original table; its global domains normalize the penalty. Needed
        (row-aligned) for QIs published as numbers (midpoint/mean).
    domains : dict, optional
        Precomputed :func:`compute_domains`, instead of ``original``.
    hierarchies, qi_kinds : dict, optional
        As given to :func:`dmondrian.anonymize`.
    weights : dict or sequence, optional
        Non-negative weight per QI; equal weights by default.
    class_column : str, optional
        Class column (used for QIs published as numbers).

    Returns
    -------
    NCP

    Examples
    --------
    >>> orig = pd.DataFrame({"age": [20, 30, 40, 60], "sex": ["F", "M", "F", "M"]})
    >>> rel = pd.DataFrame({"age": ["[20, 30]", "[20, 30]", "[40, 60]", "[40, 60]"],
    ...                     "sex": ["{F, M}", "{F, M}", "{F, M}", "{F, M}"]})
    >>> r = ncp(rel, ["age", "sex"], orig)
    >>> r.per_attribute["age"], r.per_attribute["sex"], r.overall
    (0.375, 1.0, 0.6875)
    """
    qis, keys = class_keys(released, quasi_identifiers, class_column)
    doms = resolve_domains(qis, original, domains, hierarchies, qi_kinds)
    w = _check_weights(weights, qis)
    plans = _ncp_plan(released, qis, keys, original)
    n = released.shape[0]
    done = compute(n, *[p[1] for p in plans.values()])
    return _ncp_finish(plans, done[1:], qis, doms, w, int(done[0]))


# -- re-identification risk -------------------------------------------------------------------


@dataclass(frozen=True)
class Risk:
    """Re-identification risk of a release (El Emam's prosecutor/journalist/marketer models).

    Journalist fields are None when no population table was given.
    """

    threshold: float
    prosecutor_max: float
    prosecutor_avg: float
    prosecutor_at_risk: float
    marketer: float
    journalist_max: float | None = None
    journalist_at_risk: float | None = None
    population_rows: int | None = None


def _check_threshold(threshold) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) \
            or not 0 <= threshold <= 1:
        raise ParameterError("threshold", f"threshold must be a risk in [0, 1], got {threshold!r}")
    return float(threshold)


def _prosecutor(summary: SizeSummary, threshold: float) -> dict:
    n = summary.n_records
    sizes = summary.counts.index.to_numpy(dtype=np.float64)
    at_risk = (sizes * summary.counts.to_numpy())[1.0 / sizes > threshold].sum() if n else 0
    return {
        "prosecutor_max": 1.0 / summary.min_size if n else 0.0,
        "prosecutor_avg": summary.n_classes / n if n else 0.0,
        "prosecutor_at_risk": float(at_risk) / n if n else 0.0,
        "marketer": summary.n_classes / n if n else 0.0,
    }


def reidentification_risk(released, quasi_identifiers, population=None, *,
                          threshold=DEFAULT_RISK_THRESHOLD, class_column=None,
                          hierarchies=None, qi_kinds=None) -> Risk:
    """Prosecutor, journalist and marketer re-identification risk of a release.

    Parameters
    ----------
    released : pandas or Dask DataFrame
        The released table.
    quasi_identifiers : list of column names
        Its published QI columns.
    population : pandas or Dask DataFrame, optional
        The population the release was sampled from, with *original* QI values.
        ``F_j`` is the number of its records a class's published values cover
        (the release's own records must be among them). Without it, the
        release is taken to be the whole population (``F_j = f_j``).
    threshold : float, default 0.2
        A record is at risk when its risk exceeds this.
    class_column : str, optional
        Define classes by this column instead of the published QI values
        (prosecutor and marketer risk only).
    hierarchies, qi_kinds : dict, optional
        How to read the population's QIs, as given to :func:`dmondrian.anonymize`.

    Returns
    -------
    Risk

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> r = reidentification_risk(t, ["age"], threshold=0.4)
    >>> r.prosecutor_max, r.prosecutor_avg, r.prosecutor_at_risk
    (0.5, 0.4, 0.4)
    """
    threshold = _check_threshold(threshold)
    qis, _ = class_keys(released, quasi_identifiers, class_column)
    summary = _size_summary(released, quasi_identifiers, class_column)
    out = _prosecutor(summary, threshold)
    if population is None:
        return Risk(threshold, **out)
    sample, big_f, n_pop = population_counts(released, qis, population, hierarchies, qi_kinds)
    return Risk(threshold, **journalist(sample, big_f, n_pop, threshold, out))


def journalist(f: np.ndarray, big_f: np.ndarray, n_pop: int, threshold: float,
               prosecutor: dict) -> dict:
    """Journalist and marketer risk from class sizes ``f`` and population matches ``F``."""
    n = int(f.sum())
    if (big_f < f).any():
        raise ParameterError("population", "the population covers fewer records than a released "
                                           "class holds: it must contain the released records")
    out = dict(prosecutor)
    out["journalist_max"] = float(1.0 / big_f.min()) if n else 0.0
    out["journalist_at_risk"] = float(f[1.0 / big_f > threshold].sum() / n) if n else 0.0
    out["marketer"] = float((f / big_f).sum() / n) if n else 0.0
    out["population_rows"] = int(n_pop)
    return out


# -- matching a population against published classes -----------------------------------------


@dataclass
class _Matcher:
    """How one QI's published labels accept original values.

    Interval kinds (numeric, datetime, ordinal, hierarchy) test
    ``lo <= key <= hi`` or ``missing and key is missing`` on a numeric key;
    nominal sets test membership through a (label x vocabulary) matrix.
    """

    kind: str
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    missing: np.ndarray | None = None
    member: np.ndarray | None = None
    vocab: dict | None = None
    categories: dict | None = None
    hierarchy: Hierarchy | None = None

    def keys(self, col: pd.Series) -> np.ndarray:
        """Population values as float keys (NaN = missing) or vocabulary codes."""
        if self.kind == QIKind.NOMINAL:
            text = col.astype(object).where(col.notna(), MISSING_LABEL).map(str)
            return text.map(self.vocab).fillna(-1).to_numpy(dtype=np.int64)
        if self.kind == QIKind.DATETIME:
            utc = col.dt.tz_convert("UTC").dt.tz_localize(None) if col.dt.tz else col
            ns = utc.astype("datetime64[ns]").astype("int64").astype("float64")
            return np.where(col.isna().to_numpy(), np.nan, ns)
        if self.kind == QIKind.ORDINAL:
            text = col.astype(object).map(lambda v: None if _is_missing(v) else str(v))
            return text.map(self.categories).to_numpy(dtype=np.float64, na_value=np.nan)
        if self.kind == QIKind.HIERARCHY:
            text = col.astype(object).where(col.notna(), MISSING_LEAF).map(str)
            return self.hierarchy.leaf_codes(text).astype(np.float64)
        return col.to_numpy(dtype=np.float64, na_value=np.nan)

    def accepts(self, keys: np.ndarray) -> np.ndarray:
        """(labels x values) matrix: does each published label cover each value."""
        if self.kind == QIKind.NOMINAL:
            out = np.zeros((self.member.shape[0], len(keys)), dtype=bool)
            known = keys >= 0
            out[:, known] = self.member[:, keys[known]]
            return out
        with np.errstate(invalid="ignore"):
            inside = (self.lo[:, None] <= keys[None, :]) & (keys[None, :] <= self.hi[:, None])
        return inside | (self.missing[:, None] & np.isnan(keys)[None, :])


def _matcher(labels: list, kind: str, meta: pd.Series, hierarchy, column) -> _Matcher:
    if kind == QIKind.NOMINAL:
        sets = [parse_set(str(v)) if not _is_missing(v) else frozenset([MISSING_LABEL])
                for v in labels]
        vocab = {v: i for i, v in enumerate(sorted(set().union(*sets)))} if sets else {}
        member = np.zeros((len(labels), max(len(vocab), 1)), dtype=bool)
        for i, members in enumerate(sets):
            member[i, [vocab[v] for v in members]] = True
        return _Matcher(kind, member=member, vocab=vocab)
    lo = np.full(len(labels), np.nan)
    hi = np.full(len(labels), np.nan)
    missing = np.zeros(len(labels), dtype=bool)
    m = _Matcher(kind)
    if kind == QIKind.HIERARCHY:
        m.hierarchy = Hierarchy.coerce(hierarchy, name=column).with_missing_leaf()
        node_of = {label: i for i, label in enumerate(m.hierarchy.labels)}
    if kind == QIKind.ORDINAL:
        m.categories = {str(c): i for i, c in enumerate(meta.cat.categories)}
    for i, label in enumerate(labels):
        if _is_missing(label):
            missing[i] = True
            continue
        text = str(label)
        if kind == QIKind.HIERARCHY:
            node = node_of.get(text)
            if node is None:
                raise InvalidValueError(column, f"column {column!r} publishes {text!r}, which is "
                                                "not a node of its hierarchy")
            lo[i], hi[i] = m.hierarchy.node_lo[node], m.hierarchy.node_hi[node]
            continue
        try:
            interval = parse_range(text, kind)
        except ParseError as exc:
            raise InvalidValueError(column, f"column {column!r} holds {text!r}, which is not a "
                                            f"published {kind} value: {exc}") from None
        missing[i] = interval.missing
        if interval.lo is None:
            continue
        if kind == QIKind.DATETIME:
            lo[i], hi[i] = (float(pd.Timestamp(b).as_unit("ns").value)
                            for b in (interval.lo, interval.hi))
        elif kind == QIKind.ORDINAL:
            lo[i], hi[i] = (m.categories.get(b, np.nan) for b in (interval.lo, interval.hi))
        else:
            lo[i], hi[i] = float(interval.lo), float(interval.hi)
    m.lo, m.hi, m.missing = lo, hi, missing
    return m


def _coverage(part: pd.DataFrame, qis, matchers, label_idx, n_classes: int,
              budget: int = 1 << 22) -> np.ndarray:
    """How many rows of ``part`` each class's published values cover; last entry: its rows."""
    if len(part) == 0:
        return np.zeros(n_classes + 1, dtype=np.int64)
    distinct = _groupby(part[qis], qis).size()
    weights = distinct.to_numpy(dtype=np.int64)
    values = distinct.index.to_frame(index=False)
    keys = [matchers[j].keys(values[q]) for j, q in enumerate(qis)]
    out = np.zeros(n_classes + 1, dtype=np.int64)
    out[-1] = len(part)
    step = max(1, budget // max(n_classes, 1))
    for s in range(0, len(values), step):
        covered = np.ones((n_classes, min(step, len(values) - s)), dtype=bool)
        for j in range(len(qis)):
            covered &= matchers[j].accepts(keys[j][s: s + step])[label_idx[j]]
        out[:-1] += covered.astype(np.int64) @ weights[s: s + step]
    return out


def population_counts(released, qis, population, hierarchies=None, qi_kinds=None):
    """Class sizes ``f``, population matches ``F`` and population size.

    Collects the release's class table (one row per class) and streams the
    population: a Dask population is reduced partition by partition.
    """
    check_table(population, "population")
    check_quasi_identifiers(qis, population.columns)
    hierarchies = check_mapping("hierarchies", hierarchies, qis)
    qi_kinds = check_mapping("qi_kinds", qi_kinds, qis)
    (sizes,) = compute(class_sizes(released, qis))
    classes = sizes.index.to_frame(index=False)
    f = sizes.to_numpy(dtype=np.int64)
    matchers, label_idx = [], []
    for q in qis:
        codes, labels = pd.factorize(classes[q].astype(object), use_na_sentinel=False)
        meta = _meta(population[q])
        kind = _column_kind(meta, q, hierarchies, qi_kinds)
        if kind == QIKind.ORDINAL:
            _check_known_categories(population, q)
        matchers.append(_matcher(list(labels), kind, meta, hierarchies.get(q), q))
        label_idx.append(codes)
    if is_dask(population):
        import dask

        parts = [dask.delayed(_coverage)(p, qis, matchers, label_idx, len(f))
                 for p in population[qis].to_delayed()]
        (total,) = dask.compute(dask.delayed(sum)(parts))
    else:
        total = _coverage(population, qis, matchers, label_idx, len(f))
    total = np.asarray(total, dtype=np.int64)
    return f, total[:-1], int(total[-1])


# -- privacy achieved -------------------------------------------------------------------------


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
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2,
    ...                   "disease": ["flu", "flu", "cold", "flu", "flu"]})
    >>> p = privacy(t, ["age"], "disease")
    >>> p.k, p.l_distinct, round(p.t, 3)
    (2, 1, 0.2)
    """
    _, keys = class_keys(table, quasi_identifiers, class_column)
    if sensitive is None:
        return Privacy(_size_summary(table, quasi_identifiers, class_column).min_size)
    check_column(table, sensitive, "sensitive")
    from .verification import L_DISTINCT, L_ENTROPY, SIZE, T, class_statistics

    frame, plan = class_statistics(table, keys, sensitive, t_distance)
    agg = (frame[SIZE].min(), frame[L_DISTINCT].min(), frame[L_ENTROPY].min(), frame[T].max())
    k, l_d, l_e, t = compute(*agg)
    return Privacy(int(k), sensitive, int(l_d), float(l_e), float(t), plan.distance)

