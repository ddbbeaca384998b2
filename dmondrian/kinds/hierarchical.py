"""Hierarchy QIs: nominal values generalized along a tree (a :class:`~dmondrian.Hierarchy`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._kernel.constants import KIND_HIERARCHY
from ..errors import InvalidValueError, ParseError
from .base import Domain, EncodedQI, QIKindSpec, is_missing
from .coverage import IntervalCoverage, interval_coverage
from .hierarchy import MISSING_LEAF, Hierarchy
from .keys import factorize

__all__ = ["HierarchyKind"]


class HierarchyKind(QIKindSpec):
    """Leaves of a tree: the key is the leaf's depth-first code, so every subtree is
    a code range and a class publishes the lowest common ancestor of its values.

    Missing is a leaf ``<NA>`` under the root unless the tree names it, so a class mixing it with
    other values generalizes to the root. The scale is the number of leaves - 1. Never detected: a
    column is this kind when a hierarchy is given for it.
    """

    name = "hierarchy"
    label_shape = "node"
    missing_is_value = True
    kernel_kind = KIND_HIERARCHY

    def encode(self, series: pd.Series, hierarchy: Hierarchy | None = None) -> EncodedQI:
        codes, categories = factorize(series)
        missing = codes < 0
        if missing.any():
            hierarchy = hierarchy.with_missing_leaf()
        labels = [str(c) for c in categories]
        cat_leaf = hierarchy.leaf_codes(labels) if labels else np.empty(0, dtype=np.int64)
        keys = np.empty(len(codes), dtype=np.int64)
        keys[~missing] = cat_leaf[codes[~missing]]
        if missing.any():
            keys[missing] = hierarchy.leaf_codes([MISSING_LEAF])[0]
        return EncodedQI(series.name, self.name, KIND_HIERARCHY, keys,
                         self.count_scale(len(hierarchy)), hierarchy=hierarchy, dtype=series.dtype)

    def key_width(self, lo: int, hi: int, kernel_kind: int, hierarchy=None) -> float:
        """Leaves under the region's lowest common ancestor - 1."""
        node = hierarchy.lca_node(lo, hi)
        return float(hierarchy.node_hi[node] - hierarchy.node_lo[node])

    def median_thresholds(self, med: int, lo: int, hi: int, hierarchy=None) -> tuple[int, int]:
        """The leaf codes of the subtree holding the median, under the region's common
        ancestor: a hierarchy is only ever cut between subtrees."""
        lca = hierarchy.lca_node(lo, hi)
        child = int(hierarchy.leaf_node[med])
        while hierarchy.parent[child] != lca:
            child = int(hierarchy.parent[child])
        return int(hierarchy.node_lo[child]) - 1, int(hierarchy.node_hi[child])

    def slot_scale(self, counts: np.ndarray) -> float:
        """Leaves - 1: every leaf of the tree counts, present or not."""
        return self.count_scale(len(counts))

    def global_slots(self, values: pd.Series, n_missing: int, *, categories=None,
                     hierarchy=None) -> tuple[np.ndarray, Hierarchy]:
        """One slot per leaf of the tree (with the missing leaf when a value is missing)."""
        if n_missing:
            hierarchy = hierarchy.with_missing_leaf()
        codes = hierarchy.leaf_codes([str(v) for v in values.index])
        counts = np.bincount(codes, weights=values.to_numpy(), minlength=len(hierarchy))
        if n_missing:
            counts[hierarchy.leaf_codes([MISSING_LEAF])[0]] += n_missing
        return counts, hierarchy

    def global_encoding(self, meta: pd.Series, scale: float, *, categories=None, slots: int = 0,
                        hierarchy=None) -> EncodedQI:
        return EncodedQI(meta.name, self.name, KIND_HIERARCHY, np.zeros(0, dtype=np.int64),
                         scale, hierarchy=hierarchy, dtype=meta.dtype)

    def domain_parts(self, col) -> tuple:
        return (col.isna().any(),)

    def merge_parts(self, parts: list, meta=None) -> tuple:
        return (any(bool(p[0]) for p in parts),)

    def domain(self, name, parts, meta, hierarchy=None) -> Domain:
        h = Hierarchy.coerce(hierarchy, name=name)
        if bool(parts[0]):
            h = h.with_missing_leaf()
        return Domain(self.name, self.count_scale(len(h)), hierarchy=h)

    def parse_label(self, label) -> str:
        """The name of the tree node a published value is (a null: the missing leaf)."""
        return MISSING_LEAF if is_missing(label) else str(label)

    def label_cost(self, text: str, domain: Domain, column=None) -> float:
        """NCP of a published node: (leaves under it - 1) over the domain's scale."""
        node = domain.hierarchy.node_index(text)
        if node is None:
            raise ParseError(f"{text!r} is not a node of the hierarchy")
        return (domain.hierarchy.n_leaves_under(node) - 1) / domain.scale \
            if domain.scale > 0 else 0.0

    # -- points: leaf codes ---------------------------------------------------------------------
    def value_points(self, col: pd.Series, context: Hierarchy = None) -> np.ndarray:
        text = col.astype(object).where(col.notna(), MISSING_LEAF).map(str)
        return context.leaf_codes(text).astype(np.float64)

    def coverage(self, labels: list, meta: pd.Series, hierarchy=None,
                 column=None) -> IntervalCoverage:
        h = Hierarchy.coerce(hierarchy, name=column).with_missing_leaf()

        def bounds(text):
            node = h.node_index(text)
            if node is None:
                raise InvalidValueError(column, f"column {column!r} publishes {text!r}, which "
                                                "is not a node of its hierarchy")
            return h.node_lo[node], h.node_hi[node], False

        # A null label (a class of missing values only) is the missing leaf.
        labels = [MISSING_LEAF if is_missing(v) else v for v in labels]
        return interval_coverage(self, h, labels, bounds)
