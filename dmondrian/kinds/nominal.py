"""Nominal QIs: values without an order (strings, objects, bools, unordered Categoricals)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._kernel.constants import KIND_NOMINAL
from .base import MISSING_LABEL, Domain, EncodedQI, QIKindSpec
from .coverage import SetCoverage, set_coverage
from .keys import factorize
from .labels import parse_set

__all__ = ["NominalKind"]


class NominalKind(QIKindSpec):
    """Unordered values: the key is the category code (categories sorted), and the
    kernel cuts a node's codes in their frequency order.

    A class publishes the set of its values, ``{Private, Self-emp-inc}``;
    missing is one more value, ``<NA>``, in the set. The scale is the number
    of distinct values (missing included) - 1.
    """

    name = "nominal"
    label_shape = "set"
    missing_is_value = True
    frequency_order = True
    kernel_kind = KIND_NOMINAL

    def detects(self, dtype) -> bool:
        if isinstance(dtype, pd.CategoricalDtype):
            return not dtype.ordered
        return (pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_string_dtype(dtype)
                or pd.api.types.is_object_dtype(dtype))

    def encode(self, series: pd.Series, hierarchy=None) -> EncodedQI:
        codes, categories = factorize(series)
        missing = codes < 0
        card = len(categories) + 1  # the last code stands for missing
        keys = np.where(missing, card - 1, codes)
        distinct = int(np.count_nonzero(np.bincount(keys, minlength=card)))
        return EncodedQI(series.name, self.name, KIND_NOMINAL, keys, self.count_scale(distinct),
                         card=card, categories=[*categories, MISSING_LABEL], dtype=series.dtype)

    def region_span(self, lo: int, hi: int, n_missing: float, hist, scale: float,
                    kernel_kind: int, hierarchy=None) -> float:
        """(Distinct values in the region - 1) over the scale, as the kernel counts them."""
        if scale <= 0.0:
            return 0.0
        return (int(np.count_nonzero(hist)) - 1) / scale

    def slot_scale(self, counts: np.ndarray) -> float:
        """Distinct values (missing included) - 1, as :meth:`encode` counts them."""
        return self.count_scale(np.count_nonzero(counts))

    def kernel_card(self, slots: int) -> int:
        return int(slots)

    def categories_from_values(self, name, values: list) -> list:
        """Sorted as :meth:`encode` sorts them, so global codes keep the local order."""
        return factorize(pd.Series(list(values), dtype=object))[1]

    def global_encoding(self, meta: pd.Series, scale: float, *, categories=None, slots: int = 0,
                        hierarchy=None) -> EncodedQI:
        return EncodedQI(meta.name, self.name, KIND_NOMINAL, np.zeros(0, dtype=np.int64), scale,
                         card=int(slots), categories=[*categories, MISSING_LABEL],
                         dtype=meta.dtype)

    def domain_parts(self, col) -> tuple:
        return (col.nunique(dropna=False),)

    def domain(self, name, parts, meta, hierarchy=None) -> Domain:
        return Domain(self.name, self.count_scale(int(parts[0])))

    def parse_label(self, label) -> frozenset:
        """The set of value names a published value stands for."""
        return parse_set(label)

    def label_cost(self, text: str, domain: Domain, column=None) -> float:
        """NCP of a published set: (its values - 1) over the domain's scale."""
        return (len(parse_set(text)) - 1) / domain.scale if domain.scale > 0 else 0.0

    def coverage(self, labels: list, meta: pd.Series, hierarchy=None,
                 column=None) -> SetCoverage:
        return set_coverage(labels)
