"""Numeric QIs: ints, uints, floats and their nullable forms, keyed by their value."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .._kernel import keys as _keys
from .._kernel import labels as _labels
from .._kernel.constants import KIND_FLOAT, KIND_INT
from ..errors import InvalidValueError, UnsupportedDtypeError
from .base import Domain, EncodedQI, meta_of
from .keys import decode_float_keys
from .ranges import RangeKind

__all__ = ["NumericKind"]

_INT = re.compile(r"[+-]?\d+\Z")


class NumericKind(RangeKind):
    """Numbers: an integer is its own key, a float its IEEE bits made order-preserving.

    Published as ``[lo, hi]`` in Python's shortest round-trip form, or as the
    class midpoint or mean.
    """

    name = "numeric"
    summarizes = True

    def detects(self, dtype) -> bool:
        return (not isinstance(dtype, pd.CategoricalDtype)
                and not pd.api.types.is_bool_dtype(dtype)
                and pd.api.types.is_numeric_dtype(dtype)
                and not pd.api.types.is_complex_dtype(dtype))

    def encode(self, series: pd.Series, hierarchy=None) -> EncodedQI:
        name = series.name
        dtype = series.dtype
        if not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_complex_dtype(dtype):
            raise UnsupportedDtypeError(
                name, f"column {name!r} has dtype {dtype}, which cannot be treated as numeric"
            )
        if pd.api.types.is_bool_dtype(dtype):
            series = series.astype("float64")
            dtype = series.dtype
        if pd.api.types.is_integer_dtype(dtype):
            unsigned = pd.api.types.is_unsigned_integer_dtype(dtype)
            if isinstance(dtype, np.dtype):  # a numpy integer column has no missing values
                missing = np.zeros(0, dtype=bool)
                raw = series.to_numpy()
            else:
                missing = series.isna().to_numpy()
                raw = series.to_numpy(dtype=np.uint64 if unsigned else np.int64, na_value=0)
            if unsigned and raw.size and raw.max() > np.iinfo(np.int64).max:
                raise InvalidValueError(
                    name, f"column {name!r} holds unsigned integers above 2**63 - 1"
                )
            keys, lo, hi, reserved = _keys.int_keys(
                np.ascontiguousarray(raw, dtype=np.int64), np.ascontiguousarray(missing))
            if reserved:
                raise InvalidValueError(
                    name, f"column {name!r} holds 2**63 - 1, which is reserved for missing values"
                )
            return self._encoded(name, keys, lo, hi, KIND_INT, "int", dtype)
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        keys, lo, hi, first_inf = _keys.float_keys(np.ascontiguousarray(values))
        if first_inf >= 0:
            bad = series.index[first_inf]
            raise InvalidValueError(
                name, f"column {name!r} holds an infinite value (first at index {bad!r}); "
                "Mondrian needs finite bounds"
            )
        return self._encoded(name, keys, lo, hi, KIND_FLOAT, "float", dtype)

    def _encoded(self, name, keys, lo, hi, kernel_kind, value_type, dtype) -> EncodedQI:
        return EncodedQI(name, self.name, kernel_kind, keys,
                         self.key_scale(lo, hi, kernel_kind), value_type=value_type,
                         dtype=dtype)

    def kernel_kind_of(self, dtype) -> int:
        # Bools are encoded as floats.
        return KIND_INT if pd.api.types.is_integer_dtype(dtype) else KIND_FLOAT

    def plain_int_values(self, series: pd.Series):
        dtype = series.dtype
        if isinstance(dtype, np.dtype) and dtype.kind == "i":
            return series.to_numpy(), False
        return None

    def key_value(self, keys, kernel_kind: int):
        return decode_float_keys(keys) if kernel_kind == KIND_FLOAT else keys

    # -- global domain --------------------------------------------------------------------------
    def domain_parts(self, col) -> tuple:
        if pd.api.types.is_bool_dtype(meta_of(col).dtype):
            col = col.astype("float64")
        return (col.min(), col.max())

    def domain(self, name, parts, meta, hierarchy=None) -> Domain:
        lo, hi = parts
        if pd.isna(lo):
            return Domain(self.name, 0.0)
        return Domain(self.name, self.span(self.point(lo), self.point(hi)), lo, hi)

    # -- publishing -----------------------------------------------------------------------------
    def decode_keys(self, qi: EncodedQI, keys: np.ndarray) -> np.ndarray:
        return self.key_value(keys, qi.kernel_kind)

    def label_format(self, qi: EncodedQI) -> int:
        return _labels.FMT_FLOAT if qi.kernel_kind == KIND_FLOAT else _labels.FMT_INT

    def summary(self, qi: EncodedQI, how: str, lo, hi, total, present) -> np.ndarray:
        """Midpoint or mean of every class as float64 (NaN for all-missing classes)."""
        empty = present == 0
        if how == "midpoint":
            a = self.decode_keys(qi, np.where(empty, 0, lo)).astype(np.float64)
            b = self.decode_keys(qi, np.where(empty, 0, hi)).astype(np.float64)
            out = a + (b - a) / 2.0
        else:
            out = total / np.maximum(present, 1)
        out[empty] = np.nan
        return out

    def summary_dtype(self, dtype):
        return np.dtype(np.float64)

    def read_bound(self, text: str):
        return int(text) if _INT.match(text) else float(text)

    # -- painting -------------------------------------------------------------------------------
    def cell_width(self, dtype) -> float:
        whole = pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
        return 1.0 if whole else 0.0
