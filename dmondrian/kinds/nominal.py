"""Nominal QIs: values without an order (strings, objects, bools, unordered Categoricals)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._kernel.constants import KIND_NOMINAL
from .._kernel.routing import _arrow_codes_into, _remap_into
from .._kernel.strings import MAX_VALUES, lookup_strings, value_table
from .base import MISSING_LABEL, Domain, EncodedQI, QIKindSpec
from .coverage import SetCoverage, set_coverage
from .keys import CategoryKind, arrow_int32_chunks, arrow_string_chunks, factorize, global_codes
from .labels import parse_set
from .types import dictionary_as_categorical

__all__ = ["NominalKind"]


class NominalKind(CategoryKind, QIKindSpec):
    """Unordered values: the key is the category code (categories sorted), and the
    kernel cuts a node's codes in their frequency order.

    A class publishes the set of its values, ``{Private, Self-emp-inc}``; missing is one more value,
    ``<NA>``, in the set. The scale is the number of distinct values (missing included) - 1.
    """

    name = "nominal"
    label_shape = "set"
    missing_is_value = True
    frequency_order = True
    kernel_kind = KIND_NOMINAL

    arrow_types = (pa.types.is_boolean, pa.types.is_string, pa.types.is_large_string,
                   pa.types.is_null, pa.types.is_binary, pa.types.is_large_binary)

    def detects_pandas(self, dtype) -> bool:
        if isinstance(dtype, pd.CategoricalDtype):
            return not dtype.ordered
        return (pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_string_dtype(dtype)
                or pd.api.types.is_object_dtype(dtype))

    def encode(self, series: pd.Series, hierarchy=None) -> EncodedQI:
        codes, categories = factorize(dictionary_as_categorical(series))
        missing = codes < 0
        card = len(categories) + 1  # the last code stands for missing
        keys = np.where(missing, card - 1, codes)
        distinct = int(np.count_nonzero(np.bincount(keys, minlength=card)))
        return EncodedQI(series.name, self.name, KIND_NOMINAL, keys, self.count_scale(distinct),
                         card=card, categories=[*categories, MISSING_LABEL], dtype=series.dtype)

    def region_span(self, lo: int, hi: int, n_missing: float, hist, scale: float,
                    kernel_kind: int, hierarchy=None) -> float:
        """(Distinct values in the region - 1) over the scale, as the kernel counts them."""
        return 0.0 if scale <= 0.0 else (int(np.count_nonzero(hist)) - 1) / scale

    def slot_scale(self, counts: np.ndarray) -> float:
        """Distinct values (missing included) - 1, as :meth:`encode` counts them."""
        return self.count_scale(np.count_nonzero(counts))

    def kernel_card(self, slots: int) -> int:
        return int(slots)

    def categories_from_values(self, name, values: list) -> list:
        """Sorted as :meth:`encode` sorts them, so global codes keep the local order."""
        return factorize(pd.Series(list(values), dtype=object))[1]

    def global_keys_into(self, series: pd.Series, out: np.ndarray, *, categories=None,
                         index: pd.Index | None = None, hierarchy=None) -> None:
        """Global codes, missing last: a local factorize, then one lookup per distinct value.

        Same codes as :meth:`encode` and a remap of its sorted categories,
        without sorting them or counting distinct keys.
        """
        if index is None:
            index = pd.Index(categories, dtype=object)
        missing_code = len(index)
        series = dictionary_as_categorical(series)
        if isinstance(series.dtype, pd.CategoricalDtype):
            codes, uniques = series.cat.codes.to_numpy(), list(series.cat.categories)
        else:
            if _arrow_keys_into(series, index, missing_code, out):
                return
            codes, uniques = pd.factorize(series, use_na_sentinel=True)
            uniques = list(uniques)
        remap = global_codes(series.name, uniques, index, missing_code)
        # Missing (-1) takes the last entry of remap: the missing code.
        _remap_into(codes, remap, remap[-1], out)

    def global_encoding(self, meta: pd.Series, scale: float, *, categories=None, slots: int = 0,
                        hierarchy=None) -> EncodedQI:
        return EncodedQI(meta.name, self.name, KIND_NOMINAL, np.zeros(0, dtype=np.int64), scale,
                         card=int(slots), categories=[*categories, MISSING_LABEL], dtype=meta.dtype)

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

    def coverage(self, labels: list, meta: pd.Series, hierarchy=None, column=None) -> SetCoverage:
        return set_coverage(labels)


_NO_COUNTS = np.zeros(0, dtype=np.int64)


def _few_strings_into(name, values, index: pd.Index, missing_code, out) -> bool:
    """:func:`_arrow_keys_into` for a few text categories: each row compared to each
    (:mod:`dmondrian._kernel.strings`); False when the column or the categories do not qualify."""
    if (len(index) > MAX_VALUES or not all(isinstance(v, str) for v in index)
            or not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type))):
        return False
    vdata, voff = value_table(index)
    missing_code = np.int64(missing_code)
    at = 0
    for offsets, data, bits, bit_offset, chunk in arrow_string_chunks(values):
        first = lookup_strings(offsets, data, bits, bit_offset, vdata, voff, missing_code,
                               out[at:at + len(chunk)], _NO_COUNTS)
        if first >= 0:
            global_codes(name, [chunk[int(first)].as_py()], index, missing_code)  # the typed error
        at += len(chunk)
    return True


def _arrow_keys_into(s: pd.Series, index: pd.Index, missing_code, out) -> bool:
    """Global codes of an Arrow-backed string column by one hash lookup per row in
    Arrow (no factorization, no remap); False for any other column."""
    dtype = s.dtype
    arrow = (isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow") or (
        isinstance(dtype, pd.ArrowDtype) and dtype.kind in "OU")
    if not arrow:
        return False
    values = s.array.__arrow_array__()
    if _few_strings_into(s.name, values, index, missing_code, out):
        return True
    try:
        value_set = pa.array(list(index), type=values.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # categories that are not strings
        return False
    codes = pc.index_in(values, value_set=value_set)
    if codes.null_count != values.null_count:
        unseen = pc.and_(codes.is_null(), values.is_valid())
        bad = pc.filter(values, unseen)[0].as_py()
        global_codes(s.name, [bad], index, missing_code)  # raises the typed error
    at = 0
    for raw, bits, offset in arrow_int32_chunks(codes):
        _arrow_codes_into(raw, bits, offset, np.int64(missing_code), out[at:at + len(raw)])
        at += len(raw)
    return True
