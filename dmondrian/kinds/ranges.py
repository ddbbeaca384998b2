"""What the kinds published as ranges share: numeric, datetime and ordinal QIs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ParseError
from .base import Domain, EncodedQI, QIKindSpec
from .coverage import IntervalCoverage, interval_coverage
from .labels import MISSING_LABEL, OR_MISSING, Interval, not_published, parse_range

__all__ = ["RangeKind"]


class RangeKind(QIKindSpec):
    """A kind whose values lie on a line and whose classes publish ``[lo, hi]``.

    Missing values sort after every present value (key ``MISSING_KEY``); a
    class mixing both publishes ``"[lo, hi] or <NA>"``, which costs the full
    penalty, and a class of missing values only publishes a null and costs 0.
    """

    label_shape = "range"
    ordered = True
    exact_counts = False

    # -- points of the line ---------------------------------------------------------------------
    def coverage_context(self, meta: pd.Series, hierarchy=None):
        """What :meth:`point` and :meth:`value_points` need besides a value (none here)."""
        return None

    def point(self, value, context=None) -> float:
        """The point of one present value (a bound :meth:`read_bound` returned)."""
        return float(value)

    def cost_point(self, value, domain: Domain, column=None) -> float:
        """:meth:`point` of a published bound, measured against the original's domain."""
        return self.point(value)

    # -- global domain --------------------------------------------------------------------------
    def domain_parts(self, col) -> tuple:
        """The least and the greatest value (lazy for Dask)."""
        return (col.min(), col.max())

    def domain(self, name, parts, meta, hierarchy=None) -> Domain:
        """The span from the least to the greatest value; 0 when every value is missing."""
        lo, hi = parts
        if pd.isna(lo):
            return Domain(self.name, 0.0)
        return Domain(self.name, self.span(self.point(lo), self.point(hi)), lo, hi)

    # -- reading published values ---------------------------------------------------------------
    def parse_label(self, label) -> Interval:
        """The :class:`~dmondrian.release.publish.Interval` a published value stands for."""
        return parse_range(label, self)

    def label_cost(self, text: str, domain: Domain, column=None) -> float:
        """NCP of a published range: its span over the domain's scale, 1 for
        ``"[lo, hi] or <NA>"``, 0 for missing values alone (see :mod:`dmondrian.metrics`)."""
        interval = parse_range(text, self)
        if interval.lo is None:  # only missing values
            return 0.0
        if interval.missing:  # "[lo, hi] or <NA>" tells an analyst nothing
            return 1.0
        if domain.scale <= 0:
            return 0.0
        lo, hi = (self.cost_point(b, domain, column) for b in (interval.lo, interval.hi))
        return self.span(lo, hi) / domain.scale

    def label_costs(self, texts, domain: Domain, column=None) -> np.ndarray | None:
        """:meth:`label_cost` of many present published values (strings) at once, their
        bounds read by :meth:`bound_points`; None when a value needs reading one by one
        (a bound that kind does not read in bulk, or a value that does not parse).

        A release of a few million rows publishes hundreds of thousands of distinct
        ranges: read one by one, their prices cost more than the release. The text is
        taken apart by Arrow's string kernels, as :func:`~.labels.parse_range` does it.
        """
        s = pc.utf8_trim_whitespace(pa.array(texts, type=pa.string()))
        present = pc.not_equal(s, MISSING_LABEL).to_numpy(zero_copy_only=False)
        missing = pc.ends_with(s, OR_MISSING)
        core = pc.if_else(missing, pc.utf8_rtrim_whitespace(
            pc.utf8_slice_codeunits(s, 0, -len(OR_MISSING))), s)
        ranged = pc.and_(pc.starts_with(core, "["), pc.ends_with(core, "]"))
        # A single value v reads as the range "v, v".
        pair = pc.if_else(ranged, pc.utf8_slice_codeunits(core, 1, -1),
                          pc.binary_join_element_wise(core, core, ", "))
        parts = pc.split_pattern(pc.filter(pair, present), ", ")
        if pc.all(pc.equal(pc.list_value_length(parts), 2)).as_py() not in (True, None):
            return None
        points = [self.bound_points(pc.utf8_trim_whitespace(pc.list_element(parts, i))
                                    .to_numpy(zero_copy_only=False)) for i in (0, 1)]
        if points[0] is None or points[1] is None:
            return None
        out = np.zeros(len(present))
        cost = (self.span(points[0], points[1]) / domain.scale if domain.scale > 0
                else np.zeros(len(points[0])))
        out[present] = np.where(missing.to_numpy(zero_copy_only=False)[present], 1.0, cost)
        return out

    def bound_points(self, texts: np.ndarray) -> np.ndarray | None:
        """The points (:meth:`cost_point`) of many published bounds, or None when this kind
        reads them one by one only (the default)."""
        return None

    def coverage(self, labels: list, meta: pd.Series, hierarchy=None,
                 column=None) -> IntervalCoverage:
        context = self.coverage_context(meta, hierarchy)

        def bounds(text):
            try:
                interval = parse_range(text, self)
            except ParseError as exc:
                raise not_published(column, text, self, exc) from None
            if interval.lo is None:
                return None, None, interval.missing
            return (self.point(interval.lo, context), self.point(interval.hi, context),
                    interval.missing)

        return interval_coverage(self, context, labels, bounds)

    def global_encoding(self, meta: pd.Series, scale: float, *, categories=None, slots: int = 0,
                        hierarchy=None) -> EncodedQI:
        # Numbers and dates take their value type (and time zone) from the schema.
        return dataclasses.replace(self.encode(meta), keys=np.zeros(0, dtype=np.int64), scale=scale)

    # -- publishing -----------------------------------------------------------------------------
    def decode_keys(self, qi: EncodedQI, keys: np.ndarray) -> np.ndarray:
        """Original values of present keys (numbers, datetime64 or codes)."""
        return keys

    def label_format(self, qi: EncodedQI) -> int:
        """How the compiled formatter writes this QI's bounds
        (``dmondrian._kernel.labels.FMT_*``; ``FMT_TABLE``: copied from :meth:`bound_strings`)."""
        raise NotImplementedError

    def bound_strings(self, qi: EncodedQI, values: np.ndarray) -> list[str]:
        """Strings of distinct present keys, for bounds written from a table."""
        raise NotImplementedError
