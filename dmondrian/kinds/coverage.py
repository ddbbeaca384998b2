"""Which original values a published value covers, tested many labels x many values at once.

Ordered kinds (numeric, datetime, ordinal, hierarchy) place every original value at a point of a
line and every label at an interval of it; nominal sets test membership. Both answer a (labels x
values) matrix, which the population count (:mod:`dmondrian.metrics.population`) and the painting
(:mod:`dmondrian.plot`) read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .base import MISSING_LABEL, QIKindSpec, is_missing
from .labels import parse_set

__all__ = ["IntervalCoverage", "SetCoverage", "interval_coverage", "set_coverage"]


@dataclass
class IntervalCoverage:
    """Labels as intervals ``[lo, hi]`` (plus whether they cover missing values) of
    the points :meth:`keys` gives original values; NaN is a missing value.

    ``context`` is what the kind needs to place values (category positions, a
    hierarchy); the object is picklable, so Dask can ship it.
    """

    kind: QIKindSpec
    context: object
    lo: np.ndarray
    hi: np.ndarray
    missing: np.ndarray

    def keys(self, col: pd.Series) -> np.ndarray:
        """Original values as float points (NaN = missing)."""
        return self.kind.value_points(col, self.context)

    def accepts(self, keys: np.ndarray) -> np.ndarray:
        """(labels x values) matrix: does each published label cover each value."""
        with np.errstate(invalid="ignore"):
            inside = (self.lo[:, None] <= keys[None, :]) & (keys[None, :] <= self.hi[:, None])
        return inside | (self.missing[:, None] & np.isnan(keys)[None, :])


@dataclass
class SetCoverage:
    """Labels as sets of names: a (labels x vocabulary) membership matrix."""

    member: np.ndarray
    vocab: dict

    def keys(self, col: pd.Series) -> np.ndarray:
        """Original values as vocabulary codes (-1: a value no label names)."""
        text = col.astype(object).where(col.notna(), MISSING_LABEL).map(str)
        return text.map(self.vocab).fillna(-1).to_numpy(dtype=np.int64)

    def accepts(self, keys: np.ndarray) -> np.ndarray:
        """(labels x values) matrix: does each published label cover each value."""
        out = np.zeros((self.member.shape[0], len(keys)), dtype=bool)
        known = keys >= 0
        out[:, known] = self.member[:, keys[known]]
        return out


def interval_coverage(kind: QIKindSpec, context, labels: list,
                      bounds: Callable[[str], tuple]) -> IntervalCoverage:
    """The :class:`IntervalCoverage` of ``labels``, each present one read by
    ``bounds(text) -> (lo, hi, missing)`` (``lo`` None: only missing values)."""
    lo = np.full(len(labels), np.nan)
    hi = np.full(len(labels), np.nan)
    missing = np.zeros(len(labels), dtype=bool)
    for i, label in enumerate(labels):
        if is_missing(label):
            missing[i] = True
            continue
        a, b, missing[i] = bounds(str(label))
        if a is not None:
            lo[i], hi[i] = a, b
    return IntervalCoverage(kind, context, lo, hi, missing)


def set_coverage(labels: list) -> SetCoverage:
    """The :class:`SetCoverage` of published sets (a missing label stands for ``<NA>``)."""
    sets = [parse_set(str(v)) if not is_missing(v) else frozenset([MISSING_LABEL]) for v in labels]
    vocab = {v: i for i, v in enumerate(sorted(set().union(*sets)))} if sets else {}
    member = np.zeros((len(labels), max(len(vocab), 1)), dtype=bool)
    for i, members in enumerate(sets):
        member[i, [vocab[v] for v in members]] = True
    return SetCoverage(member, vocab)

