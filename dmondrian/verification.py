"""Check that a released table keeps its privacy promise, class by class.

:func:`verify` reads only the published columns (the QIs and, for l and t,
the sensitive column): an equivalence class is a group of rows with the same
published QI values, exactly what an attacker sees, so engine bookkeeping such
as a class-id column plays no part. Definitions of k, l (distinct and
entropy) and t (EMD) are those of :mod:`dmondrian.metrics`.

The per-class statistics are computed with group-by aggregations; on a Dask
table they stay distributed (one row per class, shuffled by class) and only
the violating classes, at most ``max_listed`` of them, reach the client.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .constraints import check_k
from .errors import ParameterError, UnsupportedDtypeError
from .metrics import (
    check_column,
    class_keys,
    class_sizes,
    compute,
    is_dask,
)
from .metrics._frames import _N, _groupby, _meta

__all__ = ["VerifyResult", "verify", "class_statistics"]

T_DISTANCES = ("auto", "ordered", "equal")
L_KINDS = ("distinct", "entropy")

# Relative slack for float comparisons: exp(log(2)) may come back as
# 1.9999999999999998, which must still count as 2-diverse.
_TOL = 1e-9

# Per-class statistic columns, named so they cannot clash with a QI called "size" or "t".
SIZE, L_DISTINCT, L_ENTROPY, T = (f"__dmondrian_{c}__" for c in ("size", "l_distinct",
                                                                "l_entropy", "t"))
_PUBLIC = {SIZE: "size", L_DISTINCT: "l_distinct", L_ENTROPY: "l_entropy", T: "t"}


def t_distance_of(meta: pd.Series, t_distance: str = "auto") -> str:
    """``"ordered"`` for numeric, datetime or ordered categorical values, else ``"equal"``."""
    if t_distance not in T_DISTANCES:
        raise ParameterError("t_distance", f"t_distance must be one of {T_DISTANCES}, "
                                           f"got {t_distance!r}")
    if t_distance != "auto":
        return t_distance
    dtype = meta.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return "ordered" if dtype.ordered else "equal"
    if pd.api.types.is_bool_dtype(dtype):
        return "equal"
    if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_datetime64_any_dtype(dtype):
        return "ordered"
    return "equal"


@dataclass
class SensitivePlan:
    """Per-class sensitive statistics, lazy for Dask (see :func:`class_statistics`)."""

    per_class: object
    sensitive: object
    distance: str
    n_values: int


def global_distribution(table, sensitive, distance: str) -> pd.Series:
    """Share of every sensitive value in the table, in order for the ordered distance.

    For an ordered categorical the domain is all its categories, used or not
    (as in the engine's t-closeness check): the ordered distance between two
    categories is their distance in category order over ``categories - 1``.
    """
    (counts,) = compute(table[sensitive].value_counts(dropna=False))
    counts = counts[counts > 0]
    if distance != "ordered":
        return counts / counts.sum()
    dtype = _meta(table[sensitive]).dtype
    if isinstance(dtype, pd.CategoricalDtype):
        if is_dask(table) and not table[sensitive].cat.known:
            raise UnsupportedDtypeError(sensitive, f"ordered sensitive column {sensitive!r} has "
                                                   "unknown categories in this Dask table, so "
                                                   "their order is lost: cast it with .astype("
                                                   "pd.CategoricalDtype(categories, "
                                                   "ordered=True))")
        missing = counts[counts.index.isna()]
        present = counts[~counts.index.isna()]
        present.index = pd.Index(np.asarray(present.index, dtype=object))
        domain = pd.Index(list(dtype.categories), dtype=object)
        counts = pd.concat([present.reindex(domain, fill_value=0), missing])
    else:
        try:
            counts = counts.sort_index(na_position="last")
        except TypeError:
            raise ParameterError("t_distance", f"sensitive column {sensitive!r} mixes "
                                               "values that cannot be ordered; use "
                                               "t_distance='equal'") from None
    return counts / counts.sum()


def _ranks(index: pd.Index, values) -> np.ndarray:
    """Position of each value in ``index`` (missing values at the index's missing slot)."""
    values = pd.Series(values)
    ranks = np.asarray(index.get_indexer(values), dtype=np.int64)
    missing = values.isna().to_numpy()
    if missing.any():
        na = np.flatnonzero(pd.isna(index))
        ranks[missing] = na[0] if len(na) else -1
    if (ranks < 0).any():
        raise ParameterError("sensitive", "a sensitive value was not found in the table's "
                                          "distribution (mixed missing-value types?)")
    return ranks


def _ordered_emd(gid, rank, p, q: np.ndarray, n_classes: int) -> np.ndarray:
    """Ordered-distance EMD of every class, in O(rows * log m) without a dense matrix.

    Rows are (class, sensitive value) pairs. A class's cumulative share ``P``
    is a step function of the value rank; on each step the sum of
    ``|P - Q(i)|`` over the ranks is closed-form from prefix sums of the
    (monotone) global cumulative share ``Q``.
    """
    m = len(q)
    if m <= 1:
        return np.zeros(n_classes)
    big_q = np.cumsum(q)
    big_q[-1] = 1.0
    cq = np.concatenate([[0.0], np.cumsum(big_q)])
    order = np.lexsort((rank, gid))
    gid, rank, p = gid[order], rank[order], p[order]
    cum_p = np.empty_like(p)
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    cp = np.cumsum(p)
    offset = np.repeat(np.r_[0.0, cp[starts[1:] - 1]], np.diff(np.r_[starts, len(p)]))
    cum_p = cp - offset
    last = np.r_[gid[1:] != gid[:-1], True]
    cum_p[last] = 1.0  # exact 1 on the last step, not a rounding 0.9999...
    seg_end = np.where(last, m, np.r_[rank[1:], m])

    def steps(s, e, level):
        x = np.clip(np.searchsorted(big_q, level, side="right"), s, e)
        return level * (x - s) - (cq[x] - cq[s]) + (cq[e] - cq[x]) - level * (e - x)

    total = np.bincount(gid, weights=steps(rank, seg_end, cum_p), minlength=n_classes)
    first = rank[starts]
    total[gid[starts]] += cq[first]  # ranks before the class's first value: |0 - Q|
    return total / (m - 1)


def _equal_emd(gid, rank, p, q: np.ndarray, n_classes: int) -> np.ndarray:
    diff = np.bincount(gid, weights=np.abs(p - q[rank]), minlength=n_classes)
    covered = np.bincount(gid, weights=q[rank], minlength=n_classes)
    return (diff + (1.0 - covered)) / 2.0


def sensitive_class_stats(counts: pd.DataFrame, keys, sensitive, q: pd.Series,
                          distance: str) -> pd.DataFrame:
    """Per-class size, distinct and entropy l, and EMD from (class, value, count) rows.

    ``counts`` has the ``keys`` columns, the sensitive column and the count
    column; every class's rows must be in this frame (pandas, or one Dask
    partition after a shuffle on ``keys``).
    """
    if len(counts) == 0:
        return counts[keys].iloc[:0].assign(**{SIZE: np.int64(0), L_DISTINCT: np.int64(0),
                                               L_ENTROPY: 0.0, T: 0.0})
    gid = _groupby(counts, keys).ngroup().to_numpy()
    n_classes = int(gid.max()) + 1
    n = counts[_N].to_numpy(dtype=np.float64)
    size = np.bincount(gid, weights=n, minlength=n_classes)
    distinct = np.bincount(gid, minlength=n_classes)
    entropy = np.log(size) - np.bincount(gid, weights=n * np.log(n), minlength=n_classes) / size
    rank = _ranks(q.index, counts[sensitive])
    p = n / size[gid]
    qv = q.to_numpy(dtype=np.float64)
    emd = (_ordered_emd if distance == "ordered" else _equal_emd)(gid, rank, p, qv, n_classes)
    first = np.unique(gid, return_index=True)[1]
    out = counts.iloc[first][keys].reset_index(drop=True)
    out[SIZE] = size.astype(np.int64)
    out[L_DISTINCT] = distinct.astype(np.int64)
    out[L_ENTROPY] = np.exp(np.maximum(entropy, 0.0))
    out[T] = np.clip(emd, 0.0, 1.0)
    return out


def class_statistics(table, keys, sensitive=None, t_distance: str = "auto"):
    """Per-class statistics of a table.

    For Dask it stays lazy (one row per class, partitioned by class); the
    global sensitive distribution is computed first (one small reduction).

    Parameters
    ----------
    table : pandas or Dask DataFrame
    keys : list of column names
        The columns whose distinct values define the classes.
    sensitive : column name, optional
    t_distance : {"auto", "ordered", "equal"}

    Returns
    -------
    frame : pandas or Dask DataFrame
        One row per class: ``keys``, :data:`SIZE` and, with a sensitive
        column, :data:`L_DISTINCT`, :data:`L_ENTROPY` and :data:`T`.
    plan : SensitivePlan or None

    Examples
    --------
    >>> t = pd.DataFrame({"q": ["a", "a", "b", "b"], "s": ["x", "y", "x", "x"]})
    >>> frame, plan = class_statistics(t, ["q"], "s")
    >>> frame[L_DISTINCT].tolist(), plan.distance
    ([2, 1], 'equal')
    """
    if sensitive is None:
        sizes = class_sizes(table, keys).rename(SIZE)
        return sizes.reset_index(), None
    if sensitive in keys:
        raise ParameterError("sensitive", f"sensitive column {sensitive!r} is also a "
                                          "quasi-identifier")
    distance = t_distance_of(_meta(table[sensitive]), t_distance)
    q = global_distribution(table, sensitive, distance)
    g = _groupby(table[[*keys, sensitive]], [*keys, sensitive])
    if is_dask(table):
        counts = g.size(split_out=True).rename(_N).reset_index()
        meta = sensitive_class_stats(counts._meta, keys, sensitive, q, distance)
        frame = counts.shuffle(on=keys).map_partitions(
            sensitive_class_stats, keys, sensitive, q, distance, meta=meta)
    else:
        counts = g.size().rename(_N).reset_index()
        frame = sensitive_class_stats(counts, keys, sensitive, q, distance)
    return frame, SensitivePlan(frame, sensitive, distance, len(q))



@dataclass
class VerifyResult:
    """Outcome of :func:`verify`.

    Attributes
    ----------
    ok : bool
        True when every class meets every requirement.
    requirements : dict
        What was checked (``k``, ``l``, ``l_kind``, ``t``, ``t_distance``,
        ``sensitive``); None for what was not.
    achieved : dict
        What the table achieves: ``k`` and, with a sensitive column,
        ``l_distinct``, ``l_entropy`` and ``t``.
    n_records, n_classes : int
    n_violations : int
        Number of classes that fail at least one requirement.
    violations : pandas.DataFrame
        The failing classes (at most ``max_listed``, smallest first), indexed
        by their published QI values, with their ``size`` (and ``l_distinct``,
        ``l_entropy``, ``t``) and ``failed``, the requirements they break.
    """

    ok: bool
    requirements: dict
    achieved: dict
    n_records: int
    n_classes: int
    n_violations: int
    violations: pd.DataFrame

    def __bool__(self) -> bool:
        return self.ok

    def to_dict(self) -> dict:
        """Plain-Python summary (JSON-serializable), violations as a list of records."""
        listed = self.violations.reset_index()
        return {
            "ok": self.ok,
            "requirements": jsonable(self.requirements),
            "achieved": jsonable(self.achieved),
            "n_records": self.n_records,
            "n_classes": self.n_classes,
            "n_violations": self.n_violations,
            "violations": jsonable(listed.astype(object).where(listed.notna(), None)
                                 .to_dict(orient="records")),
        }

    def to_json(self, **kwargs) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), **kwargs)

    def _summary(self) -> str:
        req = ", ".join(f"{k}={v}" for k, v in self.requirements.items()
                        if v is not None and k not in ("l_kind", "t_distance", "sensitive"))
        verdict = "OK" if self.ok else f"FAILED: {self.n_violations} of {self.n_classes} " \
                                       "classes violate"
        return f"verify({req}) on {self.n_records} rows, {self.n_classes} classes: {verdict}"

    def __repr__(self) -> str:
        lines = [self._summary()]
        achieved = ", ".join(f"{k}={_fmt(v)}" for k, v in self.achieved.items() if v is not None)
        lines.append(f"  achieved: {achieved}")
        if not self.ok:
            shown = self.violations.to_string(max_rows=20)
            lines.append("  violating classes" + (f" (first {len(self.violations)})"
                                                  if len(self.violations) < self.n_violations
                                                  else "") + ":")
            lines.extend("    " + line for line in shown.splitlines())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        colour = "#1a7f37" if self.ok else "#cf222e"
        out = [f'<div><p style="color:{colour};font-weight:bold">{html.escape(self._summary())}'
               "</p>"]
        achieved = ", ".join(f"{k}={_fmt(v)}" for k, v in self.achieved.items() if v is not None)
        out.append(f"<p>achieved: {html.escape(achieved)}</p>")
        if not self.ok:
            out.append(self.violations.to_html(max_rows=20))
        out.append("</div>")
        return "".join(out)


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def jsonable(obj):
    """numpy scalars and containers to plain Python; non-finite floats to None (valid JSON)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, pd.Timestamp):
        return obj.isoformat()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _check_l(l_value, l_kind):
    if l_kind not in L_KINDS:
        raise ParameterError("l_kind", f"l_kind must be one of {L_KINDS}, got {l_kind!r}")
    if l_value is None:
        return None
    if isinstance(l_value, bool) or not isinstance(l_value, numbers.Real) \
            or not math.isfinite(l_value) or l_value < 1:
        raise ParameterError("l", f"l must be a number >= 1, got {l_value!r}")
    if l_kind == "distinct" and l_value != int(l_value):
        raise ParameterError("l", f"distinct l-diversity needs an integer l, got {l_value!r}")
    return l_value


def _check_t(t_value):
    if t_value is None:
        return None
    if isinstance(t_value, bool) or not isinstance(t_value, numbers.Real) \
            or not 0 <= t_value <= 1:
        raise ParameterError("t", f"t must be a number in [0, 1], got {t_value!r}")
    return float(t_value)


def verify(table, quasi_identifiers, k=None, sensitive=None, l=None, t=None, *,  # noqa: E741
           l_kind="distinct", t_distance="auto", max_listed=100) -> VerifyResult:
    """Check a released table against k-anonymity, l-diversity and t-closeness.

    Parameters
    ----------
    table : pandas or Dask DataFrame
        The released table; only its QI (and sensitive) columns are read.
    quasi_identifiers : list of column names
        The published QI columns.
    k : int, optional
        Every class must hold at least ``k`` rows.
    sensitive : column name, optional
        The sensitive column (required for ``l`` and ``t``).
    l : number, optional
        Every class must be l-diverse in ``sensitive``.
    t : float, optional
        Every class's sensitive distribution must be within EMD ``t`` of the
        table's.
    l_kind : {"distinct", "entropy"}, default "distinct"
        Distinct l-diversity (at least ``l`` distinct values) or entropy
        l-diversity (entropy at least ``log(l)``).
    t_distance : {"auto", "ordered", "equal"}, default "auto"
        EMD ground distance (see :func:`dmondrian.metrics.privacy`).
    max_listed : int, default 100
        Most violating classes listed in the result (all are counted).

    Returns
    -------
    VerifyResult
        Truthy when the table holds.

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2,
    ...                   "disease": ["flu", "cold", "flu", "flu", "flu"]})
    >>> verify(t, ["age"], k=2).ok
    True
    >>> r = verify(t, ["age"], k=2, sensitive="disease", l=2)
    >>> r.ok, r.n_violations, r.violations.index.tolist()
    (False, 1, ['[30, 39]'])
    """
    qis, keys = class_keys(table, quasi_identifiers)
    if k is not None:
        k = check_k(k)
    l_value = _check_l(l, l_kind)
    t_value = _check_t(t)
    if (l_value is not None or t_value is not None) and sensitive is None:
        raise ParameterError("sensitive", "l-diversity and t-closeness need the sensitive column: "
                                          "pass sensitive=")
    if k is None and l_value is None and t_value is None:
        raise ParameterError("k", "nothing to verify: pass at least one of k, l or t")
    if isinstance(max_listed, bool) or not isinstance(max_listed, numbers.Integral) \
            or max_listed < 0:
        raise ParameterError("max_listed", f"max_listed must be an integer >= 0, "
                                           f"got {max_listed!r}")
    columns = list(qis)
    if sensitive is not None:
        check_column(table, sensitive, "sensitive")
        columns.append(sensitive)
    frame, plan = class_statistics(table[columns], keys, sensitive, t_distance)
    fails = {}
    if k is not None:
        fails["k"] = frame[SIZE] < k
    if l_value is not None:
        column = L_DISTINCT if l_kind == "distinct" else L_ENTROPY
        fails["l"] = frame[column] < l_value * (1 - _TOL)
    if t_value is not None:
        fails["t"] = frame[T] > t_value + _TOL
    bad = None
    for mask in fails.values():
        bad = mask if bad is None else bad | mask
    labelled = frame.assign(failed=_failed_label(fails))
    viol = labelled[bad]
    aggs = [frame[SIZE].sum(), frame[SIZE].count(), frame[SIZE].min(), bad.sum(),
            viol.nsmallest(max_listed, SIZE) if is_dask(viol)
            else viol.sort_values(SIZE, kind="stable").head(max_listed)]
    if plan is not None:
        aggs += [frame[L_DISTINCT].min(), frame[L_ENTROPY].min(), frame[T].max()]
    done = compute(*aggs)
    n_records, n_classes, min_size, n_bad, listed = done[:5]
    achieved = {"k": int(min_size) if n_classes else 0}
    if plan is not None:
        achieved.update(l_distinct=int(done[5]), l_entropy=float(done[6]), t=float(done[7]),
                        t_distance=plan.distance)
    requirements = {"k": k, "l": l_value, "l_kind": l_kind if l_value is not None else None,
                    "t": t_value, "t_distance": plan.distance if t_value is not None else None,
                    "sensitive": sensitive}
    listed = listed.set_index(keys).rename(columns=_PUBLIC)
    return VerifyResult(int(n_bad) == 0, requirements, achieved, int(n_records), int(n_classes),
                        int(n_bad), listed)


def _failed_label(fails: dict):
    """A string column naming the requirements each class breaks, e.g. ``"k,l"``."""
    out = None
    for name, mask in fails.items():
        part = mask.map({True: name + ",", False: ""}, meta=(None, object)) \
            if is_dask(mask) else mask.map({True: name + ",", False: ""})
        out = part if out is None else out + part
    return out.str.rstrip(",")
