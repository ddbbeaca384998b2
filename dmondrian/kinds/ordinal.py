"""Ordinal QIs: ordered pandas Categoricals, keyed by category code."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._kernel import keys as _keys
from .._kernel import labels as _labels
from .._kernel.constants import KIND_ORDINAL, MISSING_KEY
from .._kernel.routing import _remap_into
from ..errors import InvalidValueError, UnsupportedDtypeError
from .base import Domain, EncodedQI, is_dask, is_missing, meta_of
from .keys import CategoryKind, global_codes
from .ranges import RangeKind
from .types import dictionary_as_categorical

__all__ = ["OrdinalKind"]


class OrdinalKind(CategoryKind, RangeKind):
    """Ordered categories: the key is the category code, so "between" is category order.

    Published as ``[lo, hi]`` of category names. Points of the line are codes.
    """

    name = "ordinal"
    kernel_kind = KIND_ORDINAL
    exact_counts = True

    def detects_pandas(self, dtype) -> bool:
        return isinstance(dtype, pd.CategoricalDtype) and bool(dtype.ordered)

    def encode(self, series: pd.Series, hierarchy=None) -> EncodedQI:
        name = series.name
        series = dictionary_as_categorical(series)
        if not isinstance(series.dtype, pd.CategoricalDtype):
            raise UnsupportedDtypeError(name, f"column {name!r} must be a pandas Categorical to be "
                                              f"ordinal, not {series.dtype}")
        keys, lo, hi = _keys.sentinel_keys(series.cat.codes.to_numpy().astype(np.int64), -1)
        return EncodedQI(name, self.name, KIND_ORDINAL, keys, self.key_scale(lo, hi, KIND_ORDINAL),
                         categories=list(series.cat.categories), dtype=series.dtype)

    # -- points: category codes -----------------------------------------------------------------
    def coverage_context(self, meta: pd.Series, hierarchy=None) -> dict:
        """Code of every category name."""
        return {str(c): i for i, c in enumerate(meta.cat.categories)}

    def point(self, value, context=None) -> float:
        return context.get(value, np.nan)

    def value_points(self, col: pd.Series, context=None) -> np.ndarray:
        text = col.astype(object).map(lambda v: None if is_missing(v) else str(v))
        return text.map(context).to_numpy(dtype=np.float64, na_value=np.nan)

    def cost_point(self, value, domain: Domain, column=None) -> float:
        try:
            return domain.categories.index(value)
        except ValueError:
            raise InvalidValueError(column, f"column {column!r} publishes {value!r}, which is "
                                            f"not a category of the original column") from None

    # -- global domain --------------------------------------------------------------------------
    def slot_keys(self, keys: np.ndarray, slots: int) -> np.ndarray:
        """Codes as slots; the missing key takes the last slot."""
        return np.where(keys == MISSING_KEY, slots - 1, keys)

    def slot_values(self, slots: int) -> np.ndarray:
        values = np.arange(slots, dtype=np.int64)
        values[-1] = MISSING_KEY
        return values

    def categories_from_values(self, name, values: list) -> list:
        """Never: sorting the values would make up an order the data does not give."""
        raise UnsupportedDtypeError(
            name, f"ordinal column {name!r} has different categories in different partitions; "
            "give it one ordered CategoricalDtype (e.g. ddf[col].astype(dtype))")

    def global_keys_into(self, series: pd.Series, out: np.ndarray, *, categories=None,
                         index: pd.Index | None = None, hierarchy=None) -> None:
        """Global codes: a partition's own categories, when they differ, remapped."""
        series = dictionary_as_categorical(series)
        if not isinstance(series.dtype, pd.CategoricalDtype):
            # Its own categories, remapped below: cast to the domain's, a value
            # outside them would silently become missing instead of refused.
            series = series.astype("category")
        local = list(series.cat.categories)
        if local != list(categories):
            if index is None:
                index = pd.Index(categories, dtype=object)
            remap = global_codes(series.name, local, index, -1)
        else:
            remap = np.arange(len(local) + 1, dtype=np.int64)
        _remap_into(series.cat.codes.to_numpy(), remap, MISSING_KEY, out)

    def global_encoding(self, meta: pd.Series, scale: float, *, categories=None, slots: int = 0,
                        hierarchy=None) -> EncodedQI:
        return EncodedQI(meta.name, self.name, KIND_ORDINAL, np.zeros(0, dtype=np.int64), scale,
                         categories=list(categories),
                         dtype=pd.CategoricalDtype(categories, ordered=True))

    def check_column(self, table, column) -> None:
        """Refuse a Dask column whose categories are unknown: they give the order.

        ``cat.as_known()`` would rebuild them from the data in sorted order,
        silently changing what "between" means.
        """
        col = table[column]
        if is_dask(col) and isinstance(col._meta.dtype, pd.CategoricalDtype) and not col.cat.known:
            raise UnsupportedDtypeError(column, f"ordinal column {column!r} has unknown "
                                                "categories in this Dask table, so their order "
                                                "is lost: cast it with .astype("
                                                "pd.CategoricalDtype(categories, ordered=True))")

    def domain_parts(self, col) -> tuple:
        dtype = meta_of(col).dtype
        if not isinstance(dtype, pd.CategoricalDtype):
            raise UnsupportedDtypeError(col.name, f"column {col.name!r} must be a pandas "
                                                  f"Categorical to be ordinal, not {dtype}")
        codes = col.cat.codes
        present = codes[codes >= 0]
        return (present.min(), present.max())

    def domain(self, name, parts, meta, hierarchy=None) -> Domain:
        lo, hi = parts
        cats = tuple(str(c) for c in meta.cat.categories)
        if pd.isna(lo):
            return Domain(self.name, 0.0, categories=cats)
        return Domain(self.name, self.span(lo, hi), int(lo), int(hi), cats)

    # -- publishing -----------------------------------------------------------------------------
    def label_format(self, qi: EncodedQI) -> int:
        return _labels.FMT_TABLE

    def bound_strings(self, qi: EncodedQI, values: np.ndarray) -> list[str]:
        return [str(qi.categories[v]) for v in values]

    # -- painting -------------------------------------------------------------------------------
    def cell_width(self, dtype) -> float:
        return 1.0

    def tick_labels(self, col: pd.Series) -> list:
        return [str(c) for c in col.cat.categories]
