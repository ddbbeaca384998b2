"""Datetime QIs: datetimes, dates and periods, keyed by their integer time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from .._kernel import keys as _keys
from .._kernel import labels as _labels
from .._kernel.constants import KIND_INT
from ..errors import InvalidValueError, UnsupportedDtypeError
from .base import Domain, EncodedQI, meta_of
from .ranges import RangeKind
from .types import arrow_int64, arrow_type, as_arrow, is_date, is_period

__all__ = ["DatetimeKind"]


class DatetimeKind(RangeKind):
    """Datetimes: the key is the time since the epoch (UTC) in the column's unit.

    Published as ISO 8601 ranges with the shortest unit that loses nothing (tz-aware columns in
    their zone), or as the class midpoint or mean. Dates (Arrow ``date32``/``date64``,
    ``datetime.date`` objects) are keyed by days and publish dates, ``[1977-02-11, 1977-04-21]``;
    their midpoint and mean are dates. Periods are keyed by their ordinal and publish periods,
    ``[2020-01, 2020-05]``. Points of the line (NCP, population matching) are nanoseconds (a
    period's: its start).
    """

    name = "datetime"
    summarizes = True
    temporal = True
    kernel_kind = KIND_INT
    open_edges = True

    arrow_types = (pa.types.is_date, pa.types.is_timestamp)

    def detects_pandas(self, dtype) -> bool:
        return is_period(dtype) or (not isinstance(dtype, pd.CategoricalDtype)
                                    and pd.api.types.is_datetime64_any_dtype(dtype))

    def encode(self, series: pd.Series, hierarchy=None) -> EncodedQI:
        name, source = series.name, series.dtype
        series = as_arrow(series)
        dtype = series.dtype
        t = arrow_type(dtype)
        if t is not None and self.detects(dtype):
            return self._arrow_encoded(series, t, source)
        if is_period(dtype):
            keys, lo, hi = _keys.sentinel_keys(np.ascontiguousarray(series.array.asi8),
                                               np.iinfo(np.int64).min)
            return EncodedQI(name, self.name, KIND_INT, keys, self.key_scale(lo, hi, KIND_INT),
                             value_type="period", dtype=dtype)
        if not pd.api.types.is_datetime64_any_dtype(dtype):
            raise UnsupportedDtypeError(name, f"column {name!r} has dtype {dtype}, which is not a "
                                              "datetime64 dtype")
        tz = getattr(dtype, "tz", None)
        values = series.to_numpy() if tz is None else series.dt.tz_convert("UTC").dt.tz_localize(
            None).to_numpy()
        unit = np.datetime_data(values.dtype)[0]
        keys, lo, hi = _keys.sentinel_keys(np.ascontiguousarray(values).view(np.int64),
                                           np.iinfo(np.int64).min)
        return EncodedQI(name, self.name, KIND_INT, keys, self.key_scale(lo, hi, KIND_INT),
                         value_type=unit, tz=tz, dtype=dtype)

    def _arrow_encoded(self, series: pd.Series, t, source) -> EncodedQI:
        """Arrow dates as days since the epoch, timestamps as their stored UTC integers."""
        raw, missing = arrow_int64(series)
        if is_date(series.dtype):
            if pa.types.is_date64(t):  # milliseconds of midnights
                raw = raw // 86_400_000
            unit, tz = "D", None
        else:
            unit, tz = t.unit, t.tz
        keys, lo, hi, reserved = _keys.int_keys(raw, missing)
        if reserved:
            raise InvalidValueError(series.name, f"column {series.name!r} holds the largest "
                                    "time, which is reserved for missing values")
        return EncodedQI(series.name, self.name, KIND_INT, keys, self.key_scale(lo, hi, KIND_INT),
                         value_type=unit, tz=tz, dtype=source)

    def as_fitted(self, series: pd.Series, qi: EncodedQI) -> pd.Series:
        return series if series.dtype == qi.dtype else series.astype(qi.dtype)

    def plain_int_values(self, series: pd.Series):
        dtype = series.dtype
        if isinstance(dtype, np.dtype) and dtype.kind == "M":
            return series.to_numpy().view(np.int64), True
        return None

    # -- points: nanoseconds since the epoch, UTC -----------------------------------------------
    def point(self, value, context=None) -> float:
        if isinstance(value, pd.Period):
            value = value.start_time
        return float(pd.Timestamp(value).as_unit("ns").value)

    def value_points(self, col: pd.Series, context=None) -> np.ndarray:
        col = _as_datetime64(col)
        utc = col.dt.tz_convert("UTC").dt.tz_localize(None) if col.dt.tz else col
        ns = utc.astype("datetime64[ns]").astype("int64").astype("float64")
        return np.where(col.isna().to_numpy(), np.nan, ns)

    # -- global domain --------------------------------------------------------------------------
    def domain_parts(self, col) -> tuple:
        if is_date(meta_of(col).dtype):  # Dask has no meta for a date scalar
            col = col.astype("datetime64[s]")
        return super().domain_parts(col)

    def domain(self, name, parts, meta, hierarchy=None) -> Domain:
        # A period's bounds are its first instant.
        return super().domain(name, [pd.Timestamp(b.start_time if isinstance(b, pd.Period)
                                                  else b) for b in parts], meta)

    # -- publishing -----------------------------------------------------------------------------
    def decode_keys(self, qi: EncodedQI, keys: np.ndarray) -> np.ndarray:
        if qi.value_type == "period":
            return pd.PeriodIndex.from_ordinals(keys, freq=qi.dtype.freq)
        return keys.view(f"datetime64[{qi.value_type}]")

    def label_format(self, qi: EncodedQI) -> int:
        # Tz-aware stamps and units the formatter does not know are written by pandas.
        if qi.tz is None and _labels.DATETIME_UNITS.get(qi.value_type, 0):
            return _labels.FMT_DATETIME
        return _labels.FMT_TABLE

    def bound_strings(self, qi: EncodedQI, values: np.ndarray) -> list[str]:
        decoded = self.decode_keys(qi, values)
        if qi.value_type == "period":
            return decoded.astype(str).tolist()
        if qi.tz is not None:
            stamps = pd.DatetimeIndex(decoded).tz_localize("UTC").tz_convert(qi.tz)
            return [t.isoformat() for t in stamps]
        return np.datetime_as_string(decoded, unit="auto").tolist()

    def summary(self, qi: EncodedQI, how: str, lo, hi, total, present):
        """Midpoint or mean of every class (missing for all-missing classes): datetime64,
        a date (a day count) for dates, a period for periods."""
        empty = present == 0
        a = np.where(empty, 0, lo)
        if how == "midpoint":
            ns = a + (np.where(empty, 0, hi) - a) // 2
        else:
            ns = np.rint(total / np.maximum(present, 1)).astype(np.int64)
        if qi.value_type == "period":
            return pd.PeriodIndex.from_ordinals(np.where(empty, np.iinfo(np.int64).min, ns),
                                                freq=qi.dtype.freq).array
        out = ns.view(f"datetime64[{qi.value_type}]").copy()
        out[empty] = np.datetime64("NaT")
        return out

    def summary_column(self, qi: EncodedQI, values):
        """Midpoints and means in the input's type: tz-aware in their own zone, dates
        as dates (Arrow or ``datetime.date`` objects, as the input held them)."""
        if qi.value_type == "period":
            return values
        if qi.value_type == "D":
            dates = pd.array(pa.array(values, type=pa.date32(), from_pandas=True),
                             dtype=pd.ArrowDtype(pa.date32()))
            return dates.astype(qi.dtype) if isinstance(qi.dtype, pd.ArrowDtype) else \
                dates.astype(object)
        out = values
        if qi.tz is not None:
            out = pd.DatetimeIndex(values).tz_localize("UTC").tz_convert(qi.tz)
        if isinstance(qi.dtype, pd.ArrowDtype):
            out = pd.array(out).astype(qi.dtype)
        return out

    def summary_dtype(self, dtype):
        return dtype

    def bound_points(self, texts: np.ndarray) -> np.ndarray | None:
        """Every bound as :meth:`point` reads it, nanoseconds since the epoch (UTC for a
        stamp with an offset, the wall time of a naive one); None for a bound that is
        not an ISO 8601 stamp within nanosecond range (a period's, say)."""
        try:
            stamps = pd.to_datetime(pd.Index(texts, dtype=object), format="ISO8601", utc=True)
        except (TypeError, ValueError, OverflowError):
            return None
        return None if stamps.isna().any() else stamps.as_unit("ns").asi8.astype(np.float64)

    def read_bound(self, text: str):
        """A Timestamp (a period's: its start)."""
        try:
            return pd.Timestamp(text)
        except ValueError:
            return pd.Period(text).start_time


def _as_datetime64(col: pd.Series) -> pd.Series:
    """A column of dates, Arrow timestamps or periods as pandas datetimes (a period
    at its start)."""
    col = as_arrow(col)
    if is_period(col.dtype):
        return col.dt.start_time
    t = arrow_type(col.dtype)
    if t is not None:
        if pa.types.is_date(t):
            return col.astype("datetime64[s]")
        tz = t.tz
        return col.astype(pd.DatetimeTZDtype(t.unit, tz) if tz else f"datetime64[{t.unit}]")
    return col
