"""Independent checks of a released table, shared by the engine tests.

They read only the published columns and the original table, never the
engine's bookkeeping, so a bug in the engine cannot hide itself.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dmondrian import parse_range, parse_set
from dmondrian.encoding.qi import MISSING_LABEL
from dmondrian.kinds import detect_kind as _detect_kind
from dmondrian.kinds.hierarchy import MISSING_LEAF, Hierarchy


def detect_kind(series: pd.Series) -> str:
    """The name of the kind dmondrian detects for a column."""
    return _detect_kind(series).name


def class_sizes(released: pd.DataFrame, qis) -> pd.Series:
    """Size of every group of rows sharing all published QI values."""
    keys = [released[q].astype(str) for q in qis]
    return released.groupby(keys, dropna=False, observed=True).size()


def _missing(v) -> bool:
    return v is None or (not isinstance(v, str) and pd.isna(v))


def covers(label: str, original, kind: str, categories=None, hierarchy: Hierarchy | None = None):
    """Whether a published label covers an original value."""
    if kind == "numeric":
        return parse_range(label).contains(None if _missing(original) else original)
    if kind == "datetime":
        value = None if _missing(original) else pd.Timestamp(original)
        iv = parse_range(label, kind="datetime")
        if value is not None and value.tzinfo is not None and iv.lo is not None:
            return iv.lo <= value <= iv.hi
        return iv.contains(value)
    if kind == "ordinal":
        iv = parse_range(label, kind="ordinal")
        if _missing(original):
            return iv.missing
        if iv.lo is None:
            return False
        pos = {str(c): i for i, c in enumerate(categories)}
        return pos[iv.lo] <= pos[str(original)] <= pos[iv.hi]
    if kind == "nominal":
        members = parse_set(label)
        return (MISSING_LABEL if _missing(original) else str(original)) in members
    if kind == "hierarchy":
        if _missing(label):  # a class of missing values only publishes a null
            return _missing(original)
        leaf = MISSING_LEAF if _missing(original) else str(original)
        return label == leaf or label in hierarchy.ancestors(leaf)
    raise AssertionError(kind)


def assert_valid_release(original: pd.DataFrame, released: pd.DataFrame, qis, k: int,
                         hierarchies=None, class_column=None, generalization="range"):
    """Every invariant a release must hold; raises AssertionError naming the broken one."""
    hierarchies = hierarchies or {}
    # rows in = rows out, same index and columns, non-QI columns untouched
    assert len(released) == len(original)
    assert released.index.equals(original.index)
    expected_cols = list(original.columns) + ([class_column] if class_column else [])
    assert list(released.columns) == expected_cols
    for col in original.columns:
        if col not in qis:
            pd.testing.assert_series_equal(released[col], original[col])
    # every class >= k, judged from the published values alone
    sizes = class_sizes(released, qis)
    assert sizes.min() >= k, f"a class of {sizes.min()} rows < k={k}"
    if class_column:
        per_class = released.groupby(class_column).size()
        assert per_class.min() >= k
        # all rows of a class publish the same values
        for q in qis:
            assert (released.groupby(class_column)[q].nunique(dropna=False) == 1).all(), q
    # each row's published value covers its original value
    if generalization == "range":
        for q in qis:
            kind = "hierarchy" if q in hierarchies else detect_kind(original[q])
            cats = list(original[q].cat.categories) if kind == "ordinal" else None
            h = hierarchies.get(q)
            if h is not None and not isinstance(h, Hierarchy):
                h = Hierarchy.coerce(h, name=q)
            pairs = pd.DataFrame({"label": released[q].astype(str).to_numpy(),
                                  "orig": original[q].astype(object).to_numpy()})
            for label, orig in pairs.drop_duplicates().itertuples(index=False):
                if h is not None and _missing(orig):
                    h = h.with_missing_leaf()
                assert covers(label, orig, kind, cats, h), (q, label, orig)
    else:
        for q in qis:
            kind = detect_kind(original[q])
            if kind not in ("numeric", "datetime") or not class_column:
                continue
            grouped = pd.DataFrame({"c": released[class_column], "o": original[q],
                                    "p": released[q]}).groupby("c")
            lo, hi, pub = grouped["o"].min(), grouped["o"].max(), grouped["p"].first()
            present = pub.notna()
            assert ((lo[present] <= pub[present]) & (pub[present] <= hi[present])).all(), q
    return sizes


#: Sensitive column kinds :func:`sensitive_with_missing` makes.
SENSITIVE_KINDS = ["object", "float", "Int64", "category", "ordered", "datetime"]
CAUSES = ["cancer", "heart", "stroke"]


def sensitive_with_missing(kind: str, n: int, rng, p_missing=0.3) -> pd.Series:
    """A sensitive column of ``kind`` with about ``p_missing`` of it missing."""
    miss = rng.random(n) < p_missing
    raw = rng.integers(0, 3, n)
    if kind == "object":  # every kind of missing at once: still one value
        values = np.array(CAUSES, dtype=object)[raw]
        values[miss] = np.array([None, np.nan, pd.NA], dtype=object)[rng.integers(0, 3, n)][miss]
        return pd.Series(values, dtype=object)
    if kind == "float":
        return pd.Series(np.where(miss, np.nan, raw * 1.5))
    if kind == "Int64":
        return pd.Series(pd.array(raw, dtype="Int64")).mask(miss)
    if kind == "category":
        return pd.Series(pd.Categorical(np.array(CAUSES)[raw])).mask(miss)
    if kind == "ordered":
        dtype = pd.CategoricalDtype(["low", "unused", "mid", "high"], ordered=True)
        return pd.Series(pd.Categorical(np.array(["low", "mid", "high"])[raw], dtype=dtype)
                         ).mask(miss)
    if kind == "datetime":
        days = pd.Timestamp("2020-01-01") + pd.to_timedelta(raw * 40, unit="D")
        return pd.Series(days).mask(miss)
    raise AssertionError(kind)
