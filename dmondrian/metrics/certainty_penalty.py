"""Normalized certainty penalty (NCP / GCP): how much a release generalizes each QI."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..encoding.validation import check_mapping
from ..errors import MissingColumnError, ParameterError, ParseError, UnsupportedDtypeError
from ..kinds import detect_kind
from ..kinds.base import is_missing
from ..kinds.labels import not_published
from ..privacy.suppression import MASK_LABEL
from ._frames import (
    HIDDEN_COLUMN,
    VALUE_COLUMN,
    class_keys,
    compute,
    groupby,
    is_dask,
    meta_of,
    shared_parameters,
)
from .domains import Domain, compute_domains

__all__ = ["NCP", "ncp", "label_cost", "label_costs", "resolve_domains", "check_weights",
           "ncp_plan", "ncp_finish", "released_domains"]


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


def label_cost(label, domain: Domain, column=None) -> float:
    """NCP of one published value (see the :mod:`dmondrian.metrics` docstring).

    Parameters
    ----------
    label : str or missing
        A published value of the QI.
    domain : Domain
        The QI's global domain in the original table.
    column : object, optional
        The column name, for error messages.

    Returns
    -------
    float
        In [0, 1]; 0 for a missing value, 1 for a suppressed one (``"*"``).
    """
    if is_missing(label):
        return 0.0
    text = str(label)
    if text == MASK_LABEL:
        return 1.0
    kind = domain.spec
    try:
        return kind.label_cost(text, domain, column)
    except ParseError as exc:
        raise not_published(column, text, kind, exc) from None


def label_costs(labels, domain: Domain, column=None) -> np.ndarray:
    """NCP of each published value in ``labels`` for a QI with ``domain``.

    Examples
    --------
    >>> label_costs(["[20, 30]", "25", "<NA>", "[20, 30] or <NA>"],
    ...             Domain("numeric", 40.0, 20, 60)).tolist()
    [0.25, 0.0, 0.0, 1.0]
    """
    labels = list(labels)
    costs = _bulk_costs(labels, domain, column)
    if costs is not None:
        return costs
    return np.fromiter((label_cost(v, domain, column) for v in labels),
                       dtype=np.float64, count=len(labels))


def _bulk_costs(labels: list, domain: Domain, column) -> np.ndarray | None:
    """:func:`label_cost` of every label at once, where the kind reads its labels in bulk
    (:meth:`~dmondrian.kinds.ranges.RangeKind.label_costs`); None otherwise."""
    bulk = getattr(domain.spec, "label_costs", None)
    if bulk is None or not labels:
        return None
    text = pd.Series(labels, dtype=object)
    null = text.isna().to_numpy()
    if not text[~null].map(type).eq(str).all():
        return None
    mask = (text == MASK_LABEL).to_numpy()
    shown = ~null & ~mask
    priced = bulk(text[shown].to_numpy(), domain, column)
    if priced is None:
        return None
    out = np.where(mask, 1.0, 0.0)
    out[shown] = priced
    return out


def _publishes_numbers(meta: pd.Series) -> bool:
    """Whether a released column holds values (midpoints, means) rather than labels: a
    column of a kind that publishes summaries (numbers, dates, decimals, durations)."""
    try:
        return detect_kind(meta).summarizes
    except UnsupportedDtypeError:
        return False


def _value_cost_plan(released, original, q, keys):
    """Per-class bounds of a QI published as numbers (midpoint/mean), from the originals."""
    if original is None:
        raise ParameterError("original", f"column {q!r} is published as numbers (midpoint or "
                                         "mean), so its NCP needs the row-aligned original table")
    if not is_dask(released) and not released.index.equals(original.index):
        raise ParameterError("original", "original must be row-aligned with the released table "
                                         "(same index) to measure midpoint/mean columns")
    frame = released[keys].assign(**{VALUE_COLUMN: original[q], HIDDEN_COLUMN: released[q].isna()})
    return groupby(frame, keys).agg(**{name: (VALUE_COLUMN, name)
                                       for name in ("min", "max", "count", "size")},
                                    hidden=(HIDDEN_COLUMN, "sum"))


def _value_costs(stats: pd.DataFrame, domain: Domain) -> float:
    """Sum over classes of size * cost, with the engine's missing-value rule."""
    kind = domain.spec
    span = kind.span(kind.value_points(stats["min"]), kind.value_points(stats["max"]))
    present = stats["count"].to_numpy()
    size = stats["size"].to_numpy()
    cost = span / domain.scale if domain.scale > 0 else np.zeros(len(span))
    cost = np.where((present > 0) & (present < size), 1.0, np.where(present == 0, 0.0, cost))
    # Published missing where the original holds values: a suppressed (masked) row.
    cost = np.where((present > 0) & (stats["hidden"].to_numpy() > 0), 1.0, cost)
    return float((cost * size).sum())


def check_weights(weights, qis) -> dict:
    """QI weights of the overall NCP, checked and normalized to sum to 1.

    Parameters
    ----------
    weights : dict, sequence or None
        Non-negative weight per QI (None: equal weights).
    qis : list

    Returns
    -------
    dict
        ``{qi: weight}``.
    """
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


def ncp_plan(released, qis, keys, original) -> dict:
    """What the NCP of each QI needs computed (lazy for Dask): label counts, or
    per-class bounds of the originals for QIs published as numbers.

    Returns
    -------
    dict
        ``{qi: (how, part)}``; :func:`ncp_finish` takes the computed parts.
    """
    return {q: ("values", _value_cost_plan(released, original, q, keys))
            if _publishes_numbers(meta_of(released[q]))
            else ("labels", released[q].value_counts(dropna=False)) for q in qis}


def ncp_finish(plans, done, qis, domains, weights, n_records, n_dropped: int = 0) -> NCP:
    """The :class:`NCP` from the computed parts of :func:`ncp_plan`.

    ``n_dropped`` rows of the original that the release leaves out
    (suppressed, ``suppressed="drop"``) count as full loss on every QI.
    """
    per = {}
    for q, value in zip(qis, done, strict=True):
        how = plans[q][0]
        if how == "labels":
            value = value[value > 0]  # unused categories (and Dask's placeholder)
            costs = label_costs(list(value.index), domains[q], q)
            total = float((costs * value.to_numpy(dtype=np.float64)).sum())
        else:
            total = _value_costs(value, domains[q])
        rows = n_records + n_dropped
        per[q] = (total + n_dropped) / rows if rows else 0.0
    overall = float(sum(weights[q] * per[q] for q in qis))
    return NCP(per, overall, weights)


def _label_domain(labels, domain: Domain, column) -> Domain:
    """``domain`` rescaled to what the published ``labels`` cover: the span of their
    outer bounds (ranges) or the values their sets name (nominal)."""
    kind = domain.spec
    shown = [str(v) for v in labels if not is_missing(v) and str(v) != MASK_LABEL]
    # The labels were priced (label_costs) before, so they all parse.
    if kind.label_shape == "range":
        bounds = [kind.parse_label(t) for t in shown]
        points = [kind.cost_point(b, domain, column)
                  for i in bounds if i.lo is not None for b in (i.lo, i.hi)]
        scale = kind.span(min(points), max(points)) if points else 0.0
        return replace(domain, scale=float(scale), lo=None, hi=None)
    if kind.label_shape == "set":
        names = set().union(*(kind.parse_label(t) for t in shown))
        # A missing value is one more value of a nominal QI (as in its domain).
        names |= {"<NA>"} if any(is_missing(v) for v in labels) else set()
        return replace(domain, scale=float(kind.count_scale(len(names))))
    # A hierarchy's tree is given, not measured: its scale says nothing of the rows.
    return domain


def released_domains(plans, done, qis, domains) -> dict:
    """The domains of :func:`ncp_plan`'s QIs as the released rows alone span them.

    What a release leaves out (``suppressed="drop"``) may hold a QI's extremes: an NCP normalized by
    the original's domains lets whoever prices the release's labels solve for that range. Normalized
    by these, it depends on the released rows only. Numeric, datetime and ordinal QIs span their
    labels' outer bounds (the released originals' for QIs published as numbers); nominal ones count
    the values their labels name; hierarchies keep their tree.

    Parameters
    ----------
    plans : dict
        :func:`ncp_plan`.
    done : list
        Its computed parts, in ``qis`` order.
    qis : list
    domains : dict
        ``{qi: Domain}`` of the original (kinds, categories, trees).

    Returns
    -------
    dict
        ``{qi: Domain}``.
    """
    out = {}
    for q, value in zip(qis, done, strict=True):
        if plans[q][0] == "labels":
            out[q] = _label_domain(list(value[value > 0].index), domains[q], q)
            continue
        kind = domains[q].spec
        shown = value[value["count"] > 0]
        if len(shown) == 0:
            out[q] = replace(domains[q], scale=0.0, lo=None, hi=None)
            continue
        lo = np.nanmin(kind.value_points(shown["min"]))
        hi = np.nanmax(kind.value_points(shown["max"]))
        out[q] = replace(domains[q], scale=float(kind.span(lo, hi)), lo=None, hi=None)
    return out


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


@shared_parameters
def ncp(released, quasi_identifiers, original=None, *, domains=None, hierarchies=None,
        qi_kinds=None, weights=None, class_column=None) -> NCP:
    """Normalized certainty penalty (NCP / GCP) of a release, per QI and overall.

    Parameters
    ----------
    {released}
    original : pandas or Dask DataFrame, optional
        The original table; its global domains normalize the penalty. Needed (row-aligned) for QIs
        published as numbers (midpoint/mean). Rows it has beyond the release's count as suppressed
        (dropped) rows, at full loss on every QI, as masked rows (``"*"``) are.
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
    w = check_weights(weights, qis)
    plans = ncp_plan(released, qis, keys, original)
    n_original = original.shape[0] if original is not None else released.shape[0]
    done = compute(released.shape[0], n_original, *[p[1] for p in plans.values()])
    n = int(done[0])
    return ncp_finish(plans, done[2:], qis, doms, w, n, max(0, int(done[1]) - n))
