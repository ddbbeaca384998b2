"""Check that a released table keeps its privacy promise, class by class.

:func:`verify` reads only the published columns (the QIs and, for l and t, the sensitive column): an
equivalence class is a group of rows with the same published QI values, exactly what an attacker
sees, so engine bookkeeping such as a class-id column plays no part. Definitions of k, l (distinct,
entropy and recursive (c, l)) and t (EMD) are those of :mod:`dmondrian.metrics` and of the engines'
constraints (:mod:`dmondrian.privacy.constraints`).

The per-class statistics (:mod:`dmondrian.metrics.per_class`) are computed with group-by
aggregations; on a Dask table they stay distributed (one row per class, shuffled by class) and only
the violating classes, at most ``max_listed`` of them, reach the client.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import ParameterError
from ..metrics import check_column, class_keys, compute, is_dask
from ..metrics._frames import N_COLUMN, groupby, meta_of
from ..metrics.per_class import (
    L_DISTINCT,
    L_ENTROPY,
    SIZE,
    T,
    class_statistics,
    global_distribution,
    sensitive_class_stats,
    stat_column,
    t_distance_of,
)
from ..options import ANONYMIZE
from ..privacy.constraints import check_k, check_l_options, l_variant
from ..release.identifying_check import identifying_parts

__all__ = ["VerifyResult", "verify", "class_statistics", "jsonable"]

# Relative slack for float comparisons: exp(log(2)) may come back as
# 1.9999999999999998, which must still count as 2-diverse.
_TOL = 1e-9

_PUBLIC = {SIZE: "size", L_DISTINCT: "l_distinct", L_ENTROPY: "l_entropy", T: "t"}


@dataclass
class VerifyResult:
    """Outcome of :func:`verify`.

    Attributes
    ----------
    ok : bool
        True when every class meets every requirement and no column released
        as is singles out rows (``identifying_columns`` is empty).
    requirements : dict
        What was checked (``k``, ``l``, ``l_kind``, ``c``, ``t``,
        ``t_distance``, ``sensitive``); None for what was not.
    achieved : dict
        What the table achieves: ``k`` and, with a sensitive column, ``l_distinct``, ``l_entropy``
        and ``t``; for an l variant with a statistic of its own, its worst value under the variant's
        ``column`` (its ``LVariant`` in ``dmondrian.privacy.constraints``; recursive (c,
        l)-diversity: ``recursive_ratio``, the largest ``r1 / (r_l + ... + r_m)`` of a class; the
        table holds for every ``c`` above it).
    n_records, n_classes : int
    n_violations : int
        Number of classes that fail at least one requirement.
    violations : pandas.DataFrame
        The failing classes (at most ``max_listed``, smallest first), indexed
        by their published QI values, with their ``size`` (and ``l_distinct``,
        ``l_entropy``, ``t``) and ``failed``, the requirements they break.
    identifying_columns : list of dmondrian.release.identifiers.IdentifyingColumn
        Columns released as is that single out rows (less those in ``allow_unique``): a risk k does
        not cover, which fails the verification as the engines refuse to release it.
    """

    ok: bool
    requirements: dict
    achieved: dict
    n_records: int
    n_classes: int
    n_violations: int
    violations: pd.DataFrame
    identifying_columns: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok

    def to_dict(self) -> dict:
        """Plain-Python summary (JSON-serializable), violations as a list of records."""
        listed = self.violations.reset_index()
        return {"ok": self.ok, "requirements": jsonable(self.requirements),
                "achieved": jsonable(self.achieved), "n_records": self.n_records,
                "n_classes": self.n_classes, "n_violations": self.n_violations,
                "violations": jsonable(listed.astype(object).where(listed.notna(), None)
                                     .to_dict(orient="records")),
                "risks": {"identifying_columns": [f.to_dict() for f in self.identifying_columns]}}

    def to_json(self, **kwargs) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), **kwargs)

    def _summary(self) -> str:
        req = ", ".join(f"{k}={v}" for k, v in self.requirements.items()
                        if v is not None and k not in ("l_kind", "t_distance", "sensitive"))
        failed = ([f"{self.n_violations} of {self.n_classes} classes violate"]
                  if self.n_violations else [])
        if self.identifying_columns:
            failed.append(f"{len(self.identifying_columns)} column(s) single out rows")
        verdict = "OK" if self.ok else "FAILED: " + "; ".join(failed)
        return f"verify({req}) on {self.n_records} rows, {self.n_classes} classes: {verdict}"

    def __repr__(self) -> str:
        lines = [self._summary()]
        achieved = ", ".join(f"{k}={_fmt(v)}" for k, v in self.achieved.items() if v is not None)
        lines.append(f"  achieved: {achieved}")
        if self.n_violations:
            shown = self.violations.to_string(max_rows=20)
            lines.append("  violating classes" + (f" (first {len(self.violations)})"
                                                  if len(self.violations) < self.n_violations
                                                  else "") + ":")
            lines.extend("    " + line for line in shown.splitlines())
        lines.extend(f"  risk: {f.message()}" for f in self.identifying_columns)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        colour = "#1a7f37" if self.ok else "#cf222e"
        out = [f'<div><p style="color:{colour};font-weight:bold">{html.escape(self._summary())}'
               "</p>"]
        achieved = ", ".join(f"{k}={_fmt(v)}" for k, v in self.achieved.items() if v is not None)
        out.append(f"<p>achieved: {html.escape(achieved)}</p>")
        if self.n_violations:
            out.append(self.violations.to_html(max_rows=20))
        out.extend(f"<p>risk: {html.escape(f.message())}</p>" for f in self.identifying_columns)
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


def verify(table, quasi_identifiers, k=None, sensitive=None, l=None, t=None, *,  # noqa: E741
           l_kind="distinct", c=None, t_distance="auto", max_listed=100,
           allow_unique=None, entity=None) -> VerifyResult:
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
        Every class's sensitive distribution must be within EMD ``t`` of the table's.
    l_kind : str, default "distinct"
        A name of :data:`dmondrian.options.L_KINDS`: distinct l-diversity (at least ``l`` distinct
        values), entropy l-diversity (entropy at least ``log(l)``), recursive (c, l)-diversity (``r1
        < c * (r_l + ... + r_m)``, the class's value counts sorted descending) or a registered
        variant (:class:`~dmondrian.privacy.constraints.LVariant`), checked as the engines enforce
        it.
    c : float, optional
        The ``c`` of the variants that take one (recursive), required with them.
    t_distance : {"auto", "ordered", "equal"}, default "auto"
        EMD ground distance (see :func:`dmondrian.metrics.privacy`).
    max_listed : int, default 100
        Most violating classes listed in the result (all are counted).
    allow_unique : list, optional
        Columns judged safe although they single out rows. Every other column but the QIs and the
        sensitive one is checked and, if it singles out rows, listed as a risk
        (:mod:`dmondrian.release.identifiers`) that makes the verification fail, as the engines
        refuse to release it.
    entity : array-like, optional
        The person key of each released row, in the table's row order (the release of ``entity=`` no
        longer holds it): ``k`` then counts the distinct entities of each class, and ``achieved``
        gives them as ``k_entities``; entropy and recursive ``l`` and ``t`` are checked over people
        as the engines define them (:mod:`dmondrian.privacy.entities`): a class's histogram counts
        its distinct (entity, value) pairs, and ``t`` compares it with the whole table's distinct
        pairs. Pandas tables only.

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
    >>> verify(t, ["age"], sensitive="disease", l=2, l_kind="recursive", c=3).n_violations
    1
    """
    qis, keys = class_keys(table, quasi_identifiers)
    if k is not None:
        k = check_k(k)
    l_value = check_l_options(l, l_kind, c)
    variant = l_variant(l_kind)
    t_value = ANONYMIZE["t"].check(t)
    t_value = None if t_value is None else float(t_value)
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
    # The variant's own per-class statistic, when it is not one every report has.
    extra = (None if l_value is None or variant.statistic is None
             else (stat_column(variant.column), variant.statistic, l_value))
    frame, plan = class_statistics(table[columns], keys, sensitive, t_distance, extra)
    if entity is not None:
        frame = _with_entities(table, keys, frame, entity)
        if sensitive is not None:
            frame = _over_pairs(table, keys, frame, sensitive, entity, t_distance, extra)
    fails = {}
    if k is not None:
        fails["k"] = frame[SIZE if entity is None else ENTITIES] < k
    if l_value is not None:
        fails["l"] = variant.fails(frame[stat_column(variant.column)], l_value, c)
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
    if extra is not None:
        worst = frame[extra[0]]
        aggs.append(worst.max() if variant.worst == "max" else worst.min())
    as_is = [c for c in table.columns if c not in columns]
    unique_parts, unique_finish = identifying_parts(table, as_is, allow_unique or ())
    done = compute(*aggs, *unique_parts)
    identifying = unique_finish(done[len(aggs):])
    n_records, n_classes, min_size, n_bad, listed = done[:5]
    achieved = {"k": int(min_size) if n_classes else 0}
    if entity is not None:
        achieved["k_entities"] = int(frame[ENTITIES].min()) if n_classes else 0
    if plan is not None:
        achieved.update(l_distinct=int(done[5]), l_entropy=float(done[6]), t=float(done[7]),
                        t_distance=plan.distance)
    if extra is not None:
        achieved[variant.column] = float(done[8])
    requirements = {"k": k, "l": l_value, "l_kind": l_kind if l_value is not None else None,
                    "c": c if l_value is not None and variant.uses_c else None, "t": t_value,
                    "t_distance": plan.distance if t_value is not None else None,
                    "sensitive": sensitive}
    public = _PUBLIC if extra is None else {**_PUBLIC, extra[0]: variant.column}
    listed = listed.set_index(keys).rename(columns=public)
    return VerifyResult(int(n_bad) == 0 and not identifying, requirements, achieved, int(n_records),
                        int(n_classes), int(n_bad), listed, identifying)


#: The column of distinct entities per class, with ``entity=``.
ENTITIES = "entities"


def _with_entities(table, keys, frame, entity):
    """``frame`` (one row per class) with the distinct entities of each class."""
    if is_dask(table):
        raise ParameterError("entity", "verify with entity= takes a pandas table")
    values = entity.to_numpy() if isinstance(entity, pd.Series) else np.asarray(entity)
    if values.ndim != 1 or len(values) != len(table):
        raise ParameterError("entity", f"entity must hold one value per row of the table "
                                       f"({len(table)}), got {values.shape}")
    rows = table[keys].reset_index(drop=True).assign(**{ENTITIES: values})
    people = rows.groupby(keys, observed=True, dropna=False)[ENTITIES].nunique()
    return frame.merge(people.reset_index(), on=keys, how="left")


def _over_pairs(table, keys, frame, sensitive, entity, t_distance, extra):
    """``frame`` with each class's l and t over its distinct (entity, value) pairs."""
    values = entity.to_numpy() if isinstance(entity, pd.Series) else np.asarray(entity)
    rows = table[[*keys, sensitive]].reset_index(drop=True).assign(**{ENTITIES: values})
    distance = t_distance_of(meta_of(table[sensitive]), t_distance)
    # The whole table's pairs, as the engines' t compares with (each person once per value).
    q = global_distribution(rows.drop_duplicates([ENTITIES, sensitive]), sensitive, distance)
    pairs = rows.drop_duplicates([*keys, ENTITIES, sensitive])
    counts = groupby(pairs[[*keys, sensitive]], [*keys, sensitive]).size()
    stats = sensitive_class_stats(counts.rename(N_COLUMN).reset_index(), keys, sensitive, q,
                                  distance, extra)
    own = (extra[0],) if extra else ()
    over = [c for c in (L_DISTINCT, L_ENTROPY, T, *own) if c in stats.columns]
    return frame.drop(columns=over).merge(stats[[*keys, *over]], on=keys, how="left")


def fewest_entities(table, keys, entity) -> int:
    """The fewest distinct ``entity`` values of a class of ``table`` (classes by ``keys``)."""
    people = _with_entities(table, keys, table[keys].drop_duplicates(), entity)
    return int(people[ENTITIES].min()) if len(people) else 0


def _failed_label(fails: dict):
    """A string column naming the requirements each class breaks, e.g. ``"k,l"``."""
    out = None
    for name, mask in fails.items():
        part = mask.map({True: name + ",", False: ""}, meta=(None, object)) \
            if is_dask(mask) else mask.map({True: name + ",", False: ""})
        out = part if out is None else out + part
    return out.str.rstrip(",")
