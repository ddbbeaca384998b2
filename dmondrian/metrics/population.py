"""How many population records each released class covers (the ``F_j`` of journalist risk)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InvalidValueError, ParseError
from ..hierarchy import MISSING_LEAF, Hierarchy
from ..publish import parse_range, parse_set
from ..qi import MISSING_LABEL, QIKind
from ..validation import check_mapping, check_quasi_identifiers
from ._frames import _groupby, _meta, check_table, class_sizes, compute, is_dask
from .certainty_penalty import _is_missing
from .domains import _check_known_categories, _column_kind


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
