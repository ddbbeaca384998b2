"""Numeric QIs: ints, uints, floats, decimals and durations, keyed by their value."""

from __future__ import annotations

import decimal
import re

import numpy as np
import pandas as pd
import pyarrow as pa

from .._kernel import keys as _keys
from .._kernel import labels as _labels
from .._kernel.constants import KIND_FLOAT, KIND_INT
from ..errors import InvalidValueError, UnsupportedDtypeError
from .base import EncodedQI, meta_of
from .keys import decode_float_keys
from .ranges import RangeKind
from .types import (
    arrow_int64,
    arrow_type,
    as_arrow,
    decimal_keys,
    decimal_strings,
    is_decimal,
    is_duration,
    is_float32,
)

__all__ = ["NumericKind"]

_INT = re.compile(r"[+-]?\d+\Z")


class NumericKind(RangeKind):
    """Numbers: an integer is its own key, a float its IEEE bits made order-preserving.

    Published as ``[lo, hi]`` in Python's shortest round-trip form (float32 columns in float32's),
    or as the class midpoint or mean. Decimals (Arrow ``decimal128``/``decimal256``, ``Decimal``
    objects) are keyed by their exact scaled integer and published at their scale, ``[1895.69,
    2628.32]``; their midpoint and mean keep the scale. Durations (``timedelta64``, Arrow
    ``duration``) are keyed by their length in their unit and published as pandas writes a
    Timedelta, ``[0 days 02:00:00, 3 days 00:00:00]``.
    """

    name = "numeric"
    summarizes = True
    open_edges = True
    whole_steps = True

    arrow_types = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal,
                   pa.types.is_duration)

    def detects_pandas(self, dtype) -> bool:
        return is_duration(dtype) or (
            not isinstance(dtype, pd.CategoricalDtype)
            and not pd.api.types.is_bool_dtype(dtype)
            and pd.api.types.is_numeric_dtype(dtype)
            and not pd.api.types.is_complex_dtype(dtype))

    def encode(self, series: pd.Series, hierarchy=None) -> EncodedQI:
        name, source = series.name, series.dtype
        series = as_arrow(series)
        dtype = series.dtype
        if is_decimal(dtype):
            raw, missing, scale = decimal_keys(series)
            return self._int_encoded(name, raw, missing, "decimal", source, decimals=scale)
        if is_duration(dtype):
            if arrow_type(dtype) is not None:
                raw, missing = arrow_int64(series)
                unit = arrow_type(dtype).unit
            else:
                raw = series.to_numpy().view(np.int64)
                missing = raw == np.iinfo(np.int64).min
                unit = np.datetime_data(dtype)[0]
            return self._int_encoded(name, raw, missing, "duration", dtype, unit=unit)
        if not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_complex_dtype(dtype):
            raise UnsupportedDtypeError(name, f"column {name!r} has dtype {dtype}, which cannot be "
                                              "treated as numeric")
        if pd.api.types.is_bool_dtype(dtype):
            series = pd.Series(series.to_numpy(dtype=np.float64, na_value=np.nan),
                               index=series.index, name=name)
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
                raise InvalidValueError(name,
                                        f"column {name!r} holds unsigned integers above 2**63 - 1")
            return self._int_encoded(name, raw, missing, "int", dtype)
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        keys, lo, hi, first_inf = _keys.float_keys(np.ascontiguousarray(values))
        if first_inf >= 0:
            bad = series.index[first_inf]
            raise InvalidValueError(name, f"column {name!r} holds an infinite value (first at "
                                          f"index {bad!r}); Mondrian needs finite bounds")
        return self._encoded(name, keys, lo, hi, KIND_FLOAT, "float", dtype)

    def _int_encoded(self, name, raw, missing, value_type, dtype, **fields) -> EncodedQI:
        keys, lo, hi, reserved = _keys.int_keys(
            np.ascontiguousarray(raw, dtype=np.int64), np.ascontiguousarray(missing))
        if reserved:
            raise InvalidValueError(name, f"column {name!r} holds 2**63 - 1, which is reserved for "
                                          "missing values")
        return self._encoded(name, keys, lo, hi, KIND_INT, value_type, dtype, **fields)

    def _encoded(self, name, keys, lo, hi, kernel_kind, value_type, dtype, **fields) -> EncodedQI:
        return EncodedQI(name, self.name, kernel_kind, keys, self.key_scale(lo, hi, kernel_kind),
                         value_type=value_type, dtype=dtype, **fields)

    def as_fitted(self, series: pd.Series, qi: EncodedQI) -> pd.Series:
        if qi.value_type == "int" and not pd.api.types.is_integer_dtype(series.dtype):
            return series.astype("Int64")  # NaN stays missing; 1.5 raises
        if qi.value_type == "float" and not pd.api.types.is_float_dtype(series.dtype):
            return series.astype("float64")
        return series

    def kernel_kind_of(self, dtype) -> int:
        # Bools are encoded as floats; decimals and durations by their integers.
        whole = (pd.api.types.is_integer_dtype(dtype) or is_decimal(dtype) or is_duration(dtype))
        return KIND_INT if whole else KIND_FLOAT

    def conform_partition(self, series: pd.Series, kernel_kind: int) -> pd.Series:
        """A float partition of a column the schema declares integer, as nullable ints.

        Dask reads a Parquet ``int32`` column holding nulls with an ``int32``
        schema but float64 partitions (NaN for null): keyed as floats, their
        keys would mean other numbers than the integers' keys of the schema.
        """
        if kernel_kind != KIND_INT or not (isinstance(series.dtype, np.dtype)
                                           and series.dtype.kind == "f"):
            return series
        try:
            return series.astype("Int64")
        except (TypeError, ValueError):
            raise InvalidValueError(series.name, f"column {series.name!r} is declared an "
                                    "integer column but holds fractional numbers: give the "
                                    "Dask frame a float dtype for it") from None

    def plain_int_values(self, series: pd.Series):
        dtype = series.dtype
        if isinstance(dtype, np.dtype) and dtype.kind == "i":
            return series.to_numpy(), False
        return None

    def key_value(self, keys, kernel_kind: int):
        return decode_float_keys(keys) if kernel_kind == KIND_FLOAT else keys

    # -- points: the numbers themselves, durations in nanoseconds -------------------------------
    def coverage_context(self, meta: pd.Series, hierarchy=None):
        """A float32 column's values and published bounds are compared as float32."""
        return np.float32 if is_float32(meta.dtype) else None

    def point(self, value, context=None) -> float:
        if isinstance(value, pd.Timedelta | np.timedelta64):
            return float(pd.Timedelta(value).as_unit("ns").value)
        return float(np.float32(value)) if context is np.float32 else float(value)

    def value_points(self, col: pd.Series, context=None) -> np.ndarray:
        if is_duration(col.dtype):
            if arrow_type(col.dtype) is not None:
                col = col.astype(f"timedelta64[{arrow_type(col.dtype).unit}]")
            ns = col.astype("timedelta64[ns]").to_numpy().view(np.int64).astype(np.float64)
            return np.where(col.isna().to_numpy(), np.nan, ns)
        return super().value_points(col, context)

    # -- global domain --------------------------------------------------------------------------
    def domain_parts(self, col) -> tuple:
        dtype = meta_of(col).dtype
        # NCP is measured in floats: a decimal's bounds need not be exact here (and
        # Dask has no meta for a Decimal scalar).
        if pd.api.types.is_bool_dtype(dtype) or is_decimal(dtype):
            col = col.astype("float64")
        return super().domain_parts(col)

    # -- publishing -----------------------------------------------------------------------------
    def decode_keys(self, qi: EncodedQI, keys: np.ndarray) -> np.ndarray:
        return self.key_value(keys, qi.kernel_kind)

    def label_format(self, qi: EncodedQI) -> int:
        # Decimals, durations and float32s are written from their distinct bounds' strings.
        if qi.value_type in ("decimal", "duration") or (qi.kernel_kind == KIND_FLOAT
                                                         and is_float32(qi.dtype)):
            return _labels.FMT_TABLE
        return _labels.FMT_FLOAT if qi.kernel_kind == KIND_FLOAT else _labels.FMT_INT

    def bound_strings(self, qi: EncodedQI, values: np.ndarray) -> list[str]:
        """Decimals at their scale, durations as pandas writes them, float32s at float32's
        shortest round-trip digits (written as :func:`repr` writes a float)."""
        if qi.value_type == "decimal":
            return decimal_strings(values, qi.decimals)
        if qi.value_type == "duration":
            return [str(t) for t in pd.to_timedelta(values, unit=qi.unit)]
        # A float32 in the fewest digits that read back to it as a float32, written as repr
        # writes a float (2.0, 1e-05).
        return [repr(float(str(x))) for x in self.decode_keys(qi, values).astype(np.float32)]

    def summary(self, qi: EncodedQI, how: str, lo, hi, total, present):
        """Midpoint or mean of every class (missing for all-missing classes): float64,
        or for decimals and durations the column's own type (decimals rounded half
        to even at their scale)."""
        empty = present == 0
        if qi.value_type in ("decimal", "duration"):
            return self._exact_summary(qi, how, lo, hi, total, present)
        if how == "midpoint":
            a = self.decode_keys(qi, np.where(empty, 0, lo)).astype(np.float64)
            b = self.decode_keys(qi, np.where(empty, 0, hi)).astype(np.float64)
            out = a + (b - a) / 2.0
        else:
            out = total / np.maximum(present, 1)
        out[empty] = np.nan
        return out

    def _exact_summary(self, qi: EncodedQI, how: str, lo, hi, total, present):
        empty = present == 0
        a = np.where(empty, 0, lo)
        if how == "midpoint":
            # Half the sum in integers (the sum of two 63-bit keys could overflow),
            # rounded half to even.
            b = np.where(empty, 0, hi)
            half = a // 2 + b // 2
            odd = a % 2 + b % 2  # 0, 1 or 2
            keys = half + odd // 2 + ((odd == 1) & (half % 2 == 1))
        else:
            keys = np.rint(total / np.maximum(present, 1)).astype(np.int64)
        if qi.value_type == "duration":
            out = keys.view(f"timedelta64[{qi.unit}]").copy()
            out[empty] = np.timedelta64("NaT")
            return out
        values = [None if e else decimal.Decimal(k).scaleb(-qi.decimals)
                  for k, e in zip(keys.tolist(), empty.tolist(), strict=True)]
        return pd.arrays.ArrowExtensionArray(
            pa.array(values, type=pa.decimal128(38, max(qi.decimals, 0))))

    def summary_column(self, qi: EncodedQI, values):
        """Decimals and durations publish their midpoints and means in their input's type."""
        if qi.value_type not in ("decimal", "duration") or qi.dtype is None:
            return values
        if arrow_type(qi.dtype) is None and qi.value_type == "decimal":
            return values.astype(object)  # Decimal objects, as the input held
        return pd.array(values).astype(qi.dtype)

    def summary_dtype(self, dtype):
        if is_decimal(dtype) or is_duration(dtype) or (
                isinstance(dtype, np.dtype) and dtype.kind == "O"):
            return dtype
        return np.dtype(np.float64)

    def bound_points(self, texts: np.ndarray) -> np.ndarray | None:
        """Every bound as :meth:`point` reads it, ``float(text)`` (an int's or a Decimal's
        nearest float, as float() rounds it); None for a bound that is not a finite
        number (a duration's, say)."""
        try:
            points = texts.astype(np.float64)
        except (TypeError, ValueError):
            return None
        return points if np.isfinite(points).all() else None

    def read_bound(self, text: str):
        """An int, a float, a Decimal (a decimal's bound no float writes this way) or a
        Timedelta (a duration's)."""
        if _INT.match(text):
            return int(text)
        try:
            value = float(text)
        except ValueError:
            return pd.Timedelta(text)
        return value if repr(value) == text else decimal.Decimal(text)

    # -- painting -------------------------------------------------------------------------------
    def cell_width(self, dtype) -> float:
        whole = pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
        return 1.0 if whole else 0.0

