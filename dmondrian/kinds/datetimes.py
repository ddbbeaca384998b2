"""Datetime QIs: datetime64 columns, naive or tz-aware, keyed by their integer time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._kernel import keys as _keys
from .._kernel import labels as _labels
from .._kernel.constants import KIND_INT
from ..errors import UnsupportedDtypeError
from .base import Domain, EncodedQI
from .ranges import RangeKind

__all__ = ["DatetimeKind"]


class DatetimeKind(RangeKind):
    """Datetimes: the key is the time since the epoch (UTC) in the column's unit.

    Published as ISO 8601 ranges with the shortest unit that loses nothing
    (tz-aware columns in their zone), or as the class midpoint or mean.
    Points of the line (NCP, population matching) are nanoseconds.
    """

    name = "datetime"
    summarizes = True
    temporal = True
    kernel_kind = KIND_INT

    def detects(self, dtype) -> bool:
        return (not isinstance(dtype, pd.CategoricalDtype)
                and pd.api.types.is_datetime64_any_dtype(dtype))

    def encode(self, series: pd.Series, hierarchy=None) -> EncodedQI:
        name = series.name
        dtype = series.dtype
        if not pd.api.types.is_datetime64_any_dtype(dtype):
            raise UnsupportedDtypeError(
                name, f"column {name!r} has dtype {dtype}, which is not a datetime64 dtype"
            )
        tz = getattr(dtype, "tz", None)
        values = series.to_numpy() if tz is None else series.dt.tz_convert("UTC").dt.tz_localize(
            None).to_numpy()
        unit = np.datetime_data(values.dtype)[0]
        keys, lo, hi = _keys.sentinel_keys(np.ascontiguousarray(values).view(np.int64),
                                           np.iinfo(np.int64).min)
        return EncodedQI(name, self.name, KIND_INT, keys, self.key_scale(lo, hi, KIND_INT),
                         value_type=unit, tz=tz, dtype=dtype)

    def plain_int_values(self, series: pd.Series):
        dtype = series.dtype
        if isinstance(dtype, np.dtype) and dtype.kind == "M":
            return series.to_numpy().view(np.int64), True
        return None

    # -- points: nanoseconds since the epoch, UTC -----------------------------------------------
    def point(self, value, context=None) -> float:
        return float(pd.Timestamp(value).as_unit("ns").value)

    def value_points(self, col: pd.Series, context=None) -> np.ndarray:
        utc = col.dt.tz_convert("UTC").dt.tz_localize(None) if col.dt.tz else col
        ns = utc.astype("datetime64[ns]").astype("int64").astype("float64")
        return np.where(col.isna().to_numpy(), np.nan, ns)

    # -- global domain --------------------------------------------------------------------------
    def domain_parts(self, col) -> tuple:
        return (col.min(), col.max())

    def domain(self, name, parts, meta, hierarchy=None) -> Domain:
        lo, hi = parts
        if pd.isna(lo):
            return Domain(self.name, 0.0)
        lo, hi = pd.Timestamp(lo), pd.Timestamp(hi)
        return Domain(self.name, self.span(self.point(lo), self.point(hi)), lo, hi)

    # -- publishing -----------------------------------------------------------------------------
    def decode_keys(self, qi: EncodedQI, keys: np.ndarray) -> np.ndarray:
        return keys.view(f"datetime64[{qi.value_type}]")

    def label_format(self, qi: EncodedQI) -> int:
        # Tz-aware stamps and units the formatter does not know are written by pandas.
        if qi.tz is None and _labels.DATETIME_UNITS.get(qi.value_type, 0):
            return _labels.FMT_DATETIME
        return _labels.FMT_TABLE

    def bound_strings(self, qi: EncodedQI, values: np.ndarray) -> list[str]:
        decoded = self.decode_keys(qi, values)
        if qi.tz is not None:
            stamps = pd.DatetimeIndex(decoded).tz_localize("UTC").tz_convert(qi.tz)
            return [t.isoformat() for t in stamps]
        return np.datetime_as_string(decoded, unit="auto").tolist()

    def summary(self, qi: EncodedQI, how: str, lo, hi, total, present) -> np.ndarray:
        """Midpoint or mean of every class as datetime64 (NaT for all-missing classes)."""
        empty = present == 0
        a = np.where(empty, 0, lo)
        if how == "midpoint":
            ns = a + (np.where(empty, 0, hi) - a) // 2
        else:
            ns = np.rint(total / np.maximum(present, 1)).astype(np.int64)
        out = ns.view(f"datetime64[{qi.value_type}]").copy()
        out[empty] = np.datetime64("NaT")
        return out

    def summary_column(self, qi: EncodedQI, values: np.ndarray):
        """Tz-aware columns publish their midpoints and means in their own zone."""
        if qi.tz is None:
            return values
        return pd.DatetimeIndex(values).tz_localize("UTC").tz_convert(qi.tz)

    def summary_dtype(self, dtype):
        return dtype

    def read_bound(self, text: str):
        return pd.Timestamp(text)
