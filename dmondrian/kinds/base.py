"""The kind interface (:class:`QIKindSpec`), the span rule, and what every kind hands around.

A kind object answers every question whose answer depends on the kind of a quasi-identifier; the
modules that encode, publish, measure and plot ask it instead of testing which kind they hold.
:data:`KINDS` maps each kind's name (the strings of :class:`dmondrian.encoding.qi.QIKind`, which
options, manifests and the Dask engine's domain carry) to its object.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from .._kernel.constants import FLOAT_MAX, INT_MIN, MISSING_KEY
from .._kernel.routing import _int_keys_into
from .hierarchy import Hierarchy
from .types import arrow_type

__all__ = ["QIKindSpec", "EncodedQI", "Domain", "KINDS", "kind_spec", "register", "capped_span",
           "is_dask", "is_missing", "meta_of", "MISSING_LABEL"]

# The smallest positive float: a region of two values stays cuttable even when its
# share of a huge global range underflows (the kernel's TINY, _kernel/node.pxd).
_TINY = 5e-324

#: How a missing value is written in published values.
MISSING_LABEL = "<NA>"

#: Every kind object by name, in :attr:`dmondrian.encoding.qi.QIKind.ALL` order (filled by
#: :func:`register` when :mod:`dmondrian.kinds` is imported).
KINDS: dict[str, QIKindSpec] = {}


def register(kind: QIKindSpec) -> QIKindSpec:
    """Make ``kind`` the object :func:`kind_spec` returns for its name."""
    KINDS[kind.name] = kind
    return kind


def kind_spec(kind) -> QIKindSpec:
    """The kind object of a kind name (a kind object is returned as is).

    Parameters
    ----------
    kind : str or QIKindSpec

    Returns
    -------
    QIKindSpec

    Raises
    ------
    KeyError
        For a name that is no kind (callers that take user input check the
        name first, with :func:`dmondrian.kinds.resolve_kind`).
    """
    return kind if isinstance(kind, QIKindSpec) else KINDS[kind]


def capped_span(lo, hi):
    """Distance from ``lo`` to ``hi`` on a kind's line: ``float(hi) - float(lo)``.

    The one rule behind every scale and every span: the kernel's node span, each QI's global scale
    (local and Dask engines) and the NCP of published values. A float range too wide for a float
    (``-1e308`` to ``1e308``) would be ``inf``; it is capped at the largest float instead, as the
    kernel caps it, so a scale stays finite and a span/scale ratio stays a number.

    Parameters
    ----------
    lo, hi : number or ndarray
        Points of the kind's line (values, nanoseconds, codes).

    Returns
    -------
    float or ndarray of float64

    Examples
    --------
    >>> capped_span(20, 60)
    40.0
    >>> capped_span(-1e308, 1e308)
    1.7976931348623157e+308
    """
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.asarray(hi, dtype=np.float64) - np.asarray(lo, dtype=np.float64)
        capped = np.minimum(diff, FLOAT_MAX)
    return float(capped) if capped.ndim == 0 else capped


@dataclass
class EncodedQI:
    """One quasi-identifier as the kernel sees it, plus what publishing needs."""

    name: object
    #: The kind's name (one of :attr:`dmondrian.encoding.qi.QIKind.ALL`); :attr:`spec` is its
    #: object.
    kind: str
    kernel_kind: int
    keys: np.ndarray
    #: Global span normalizing this QI's spans (see :meth:`QIKindSpec.key_scale`).
    #: 0 means the QI is constant and never cut.
    scale: float
    #: Number of codes (nominal); 0 otherwise.
    card: int = 0
    categories: list = field(default_factory=list)
    hierarchy: Hierarchy | None = None
    #: "int", "float", "decimal" or "duration" for numeric QIs; the numpy datetime
    #: unit ("D" for dates), or "period", and timezone for datetimes.
    value_type: str = "float"
    tz: object = None
    #: The input column's dtype: the published midpoints and means take it back.
    dtype: object = None
    #: Digits after the decimal point of a decimal QI (its keys are the values
    #: times ``10**decimals``).
    decimals: int = 0
    #: The unit of a duration's keys ("s", "ns"...).
    unit: str = ""

    @property
    def spec(self) -> QIKindSpec:
        """The kind object of this QI."""
        return kind_spec(self.kind)


@dataclass(frozen=True)
class Domain:
    """Global domain of one QI in the original table (what NCP normalizes by).

    Attributes
    ----------
    kind : str
        One of :attr:`dmondrian.encoding.qi.QIKind.ALL`.
    scale : float
        The normalizer: value range (numeric; nanoseconds for datetime), code
        range (ordinal), distinct values - 1 (nominal), leaves - 1 (hierarchy).
        0 means the QI is constant: every class then costs 0.
    lo, hi : object
        Smallest and largest present value (numeric, datetime, ordinal code).
    categories : tuple of str
        Category labels in order (ordinal).
    hierarchy : Hierarchy, optional
        The generalization tree (hierarchy), with a ``<NA>`` leaf if needed.
    """

    kind: str
    scale: float
    lo: object = None
    hi: object = None
    categories: tuple = ()
    hierarchy: Hierarchy | None = None

    @property
    def spec(self) -> QIKindSpec:
        """The kind object of this QI."""
        return kind_spec(self.kind)


def is_dask(obj) -> bool:
    """Whether ``obj`` is a Dask collection (checked without importing Dask)."""
    return type(obj).__module__.startswith("dask.")


def meta_of(col) -> pd.Series:
    """A column's pandas form: itself, or a Dask column's empty meta (dtype, categories)."""
    return col._meta if is_dask(col) else col


def is_missing(label) -> bool:
    """Whether a published (or original) value is missing: None, NaN, NaT, pd.NA (what a class
    of missing values only publishes); a list or an array is not."""
    return label is None or (not isinstance(label, str) and pd.api.types.is_scalar(label)
                             and bool(pd.isna(label)))


class QIKindSpec:
    """What one kind of quasi-identifier means, in every part of the package.

    Subclasses: :class:`~dmondrian.kinds.numeric.NumericKind`,
    :class:`~dmondrian.kinds.datetimes.DatetimeKind`, :class:`~dmondrian.kinds.ordinal.OrdinalKind`,
    :class:`~dmondrian.kinds.nominal.NominalKind`,
    :class:`~dmondrian.kinds.hierarchical.HierarchyKind`. One object of each is registered in
    :data:`KINDS`; they hold no state.
    """

    #: The kind's name, as options and manifests write it.
    name: str = ""
    #: How a class's values are published (``generalization="range"``):
    #: ``"range"`` (``[lo, hi]``), ``"set"`` (``{a, b}``) or ``"node"`` (a tree node).
    label_shape: str = "range"
    #: Whether midpoint/mean generalization publishes numbers for this kind.
    summarizes: bool = False
    #: Whether values lie on a line the painting can draw (numbers, dates, ordered codes).
    ordered: bool = False
    #: Whether that line is time (matplotlib draws it with date ticks).
    temporal: bool = False
    #: Whether the Dask engine keeps exact per-region counts of every value
    #: (small code spaces) rather than key bounds and a sample (numbers, dates).
    exact_counts: bool = True
    #: Whether a missing value is one more value of the kind (a nominal code, a
    #: hierarchy leaf) rather than the missing key ``MISSING_KEY`` after every value.
    missing_is_value: bool = False
    #: Whether the kernel cuts a node's codes in their frequency order (nominal)
    #: rather than in key order.
    frequency_order: bool = False
    #: The kernel kind code of every column of this kind (None: it depends on the
    #: dtype, see :meth:`kernel_kind_of`).
    kernel_kind: int | None = None
    #: Whether a fitted plan's regions stay open beyond the fitted domain's edges
    #: (values on an unbounded line: numbers, dates), so it places a value the fit
    #: never saw; codes of a closed set are looked up instead.
    open_edges: bool = False
    #: Whether integer keys (``KIND_INT``) step by one value, so a plan's cut sides
    #: can abut (``[20, 23]`` and ``[24, 33]``) rather than leave a gap.
    whole_steps: bool = False
    #: The ``pyarrow.types`` tests of the Arrow types a column of this kind may have
    #: (see :meth:`detects`).
    arrow_types: tuple = ()

    def __repr__(self) -> str:
        return f"<QI kind {self.name!r}>"

    def __reduce__(self):
        # One object per kind, in every process: a shipped kind is looked up by name.
        return kind_spec, (self.name,)

    # -- detection and encoding -----------------------------------------------------------------
    def detects(self, dtype) -> bool:
        """Whether a column of ``dtype`` is of this kind when no kind is declared: an Arrow-backed
        dtype's type passes one of :attr:`arrow_types` (a dictionary type is judged as the
        Categorical it reads as), any other dtype passes :meth:`detects_pandas`.

        :func:`dmondrian.kinds.detect_kind` asks the kinds in a fixed order.
        """
        t = arrow_type(dtype)
        if t is None:
            return self.detects_pandas(dtype)
        if pa.types.is_dictionary(t):
            return self.detects_pandas(pd.CategoricalDtype(ordered=t.ordered))
        return any(test(t) for test in self.arrow_types)

    def detects_pandas(self, dtype) -> bool:
        """Whether a column of ``dtype``, not Arrow-backed, is of this kind (:meth:`detects`)."""
        return False

    def encode(self, series: pd.Series, hierarchy: Hierarchy | None = None) -> EncodedQI:
        """Kernel keys of a column of this kind, with its global scale.

        Parameters
        ----------
        series : pandas.Series
        hierarchy : Hierarchy, optional
            The generalization tree (hierarchy kind only).

        Returns
        -------
        EncodedQI
        """
        raise NotImplementedError

    def kernel_kind_of(self, dtype) -> int:
        """The kernel kind code :meth:`encode` gives a column of ``dtype``."""
        return self.kernel_kind

    def conform_partition(self, series: pd.Series, kernel_kind: int) -> pd.Series:
        """One Dask partition's column read as its schema declares it (kernel kind
        ``kernel_kind``): the column as it is unless the kind says otherwise."""
        return series

    def as_fitted(self, series: pd.Series, qi: EncodedQI) -> pd.Series:
        """A batch's column in the type a plan was fitted on (``qi``): the column as
        it is unless the kind converts it.

        Raises
        ------
        TypeError, ValueError
            When the column's values cannot take the fitted type.
        """
        return series

    def plain_int_values(self, series: pd.Series):
        """``(values, nat_missing)`` when a column's keys are its own int64 values (numpy ints,
        datetime64 with NaT missing), so they need no encoding pass; None for any other column."""
        return None

    # -- scale ----------------------------------------------------------------------------------
    def span(self, lo, hi):
        """Width of ``[lo, hi]`` on this kind's line (:func:`capped_span`)."""
        return capped_span(lo, hi)

    def key_value(self, keys, kernel_kind: int):
        """The points of this kind's line that kernel keys stand for (the key itself
        unless a kind stores something else in it)."""
        return keys

    def key_scale(self, lo: int, hi: int, kernel_kind: int) -> float:
        """Global scale of a QI whose present keys span ``lo..hi``: the span of the
        points they stand for, 0 when every value is missing (``lo`` is ``MISSING_KEY``).

        Parameters
        ----------
        lo, hi : int
            Smallest and largest present key.
        kernel_kind : int
            The kernel kind code of the keys.

        Returns
        -------
        float
        """
        if lo == MISSING_KEY:
            return 0.0
        a, b = self.key_value(np.array([lo, hi], dtype=np.int64), kernel_kind)
        return self.span(a, b)

    def value_points(self, col: pd.Series, context=None) -> np.ndarray:
        """The points of a column's values on this kind's line, NaN for missing ones
        (the numbers themselves unless the kind says otherwise).

        Parameters
        ----------
        col : pandas.Series
        context : object, optional
            What the kind needs to place values (see
            :meth:`~dmondrian.kinds.ranges.RangeKind.coverage_context`).

        Returns
        -------
        ndarray of float64
        """
        return col.to_numpy(dtype=np.float64, na_value=np.nan)

    def key_width(self, lo: int, hi: int, kernel_kind: int, hierarchy=None) -> float:
        """Width of a region whose present keys span ``lo..hi``, as the kernel's node
        span measures it before normalizing: the span of the points they stand for."""
        a, b = self.key_value(np.array([lo, hi], dtype=np.int64), kernel_kind)
        return self.span(a, b)

    def region_span(self, lo: int, hi: int, n_missing: float, hist, scale: float,
                    kernel_kind: int, hierarchy=None) -> float:
        """Normalized span of a QI over a region, as the kernel's node span computes it.

        Parameters
        ----------
        lo, hi : int
            Smallest and largest present key of the region (``lo`` is
            ``MISSING_KEY`` when it has none).
        n_missing : float
            Its rows holding the missing key.
        hist : ndarray or None
            Its count of every slot (kinds with :attr:`exact_counts`).
        scale : float
            The QI's global scale.
        kernel_kind : int
        hierarchy : Hierarchy, optional

        Returns
        -------
        float
            0 for a constant QI or a region of missing values only, 1 for a region mixing missing
            and present values (it publishes ``"[lo, hi] or <NA>"``), else the width over the scale,
            never below the smallest positive float when the region holds two values: the rule of
            the kernel's ``ordered_span`` (``_kernel/node.pxd``), edges and all.
        """
        if scale <= 0.0 or lo == MISSING_KEY:
            return 0.0
        if n_missing > 0:
            return 1.0
        if lo == hi:
            return 0.0
        span = self.key_width(lo, hi, kernel_kind, hierarchy) / scale
        return span if span > 0.0 else _TINY

    def median_thresholds(self, med: int, lo: int, hi: int, hierarchy=None) -> tuple[int, int]:
        """Thresholds of the two cuts at a median key ``med`` of a region whose keys
        span ``lo..hi``: ``keys <= t1`` (strictly below the median) and ``keys <= t2``
        (up to it). Hierarchies cut between subtrees, so theirs bound the subtree
        under the region's common ancestor that holds the median."""
        return (MISSING_KEY - 1, MISSING_KEY - 1) if med == MISSING_KEY else (med - 1, med)

    def count_scale(self, n: int) -> float:
        """Global scale of a QI of ``n`` distinct values (or leaves): the span of
        codes ``0..n-1``, 0 for a constant (or empty) column."""
        return self.span(0, max(int(n), 1) - 1)

    # -- global domain (metrics, Dask engine) ---------------------------------------------------
    def kernel_card(self, slots: int) -> int:
        """The code cardinality the kernel is given for a QI of ``slots`` slots (0: none)."""
        return 0

    def slot_keys(self, keys: np.ndarray, slots: int) -> np.ndarray:
        """Keys of a kind with :attr:`exact_counts` as slots ``0..slots-1``."""
        return keys

    def slot_values(self, slots: int) -> np.ndarray:
        """The key each slot stands for (inverse of :meth:`slot_keys`)."""
        return np.arange(slots, dtype=np.int64)

    def slot_bounds(self, counts: np.ndarray) -> tuple[int, int]:
        """Smallest and largest present key of a QI whose slots hold ``counts``
        (``MISSING_KEY`` and ``INT64_MIN`` when no slot holds a present value)."""
        keys = self.slot_values(len(counts))[np.asarray(counts) > 0]
        keys = keys[keys != MISSING_KEY]
        return (int(keys.min()), int(keys.max())) if keys.size else (MISSING_KEY, INT_MIN)

    def slot_scale(self, counts: np.ndarray) -> float:
        """Global scale of a QI whose slots hold ``counts`` over the whole dataset
        (the key span of its present values; kinds that count values say otherwise)."""
        lo, hi = self.slot_bounds(counts)
        return self.key_scale(lo, hi, self.kernel_kind)

    def global_keys_into(self, series: pd.Series, out: np.ndarray, *, categories=None,
                         index: pd.Index | None = None, hierarchy=None) -> None:
        """Write a column's keys against a global domain (the Dask engine's) into ``out``.

        The keys :meth:`encode` gives the column, but with codes that do not
        depend on the values present in it. By default they are :meth:`encode`'s
        keys, read straight from the values where :meth:`plain_int_values` can.

        Parameters
        ----------
        series : pandas.Series
            One partition's column.
        out : ndarray of int64
            Its row of the key matrix.
        categories : list, optional
            Global categories (kinds with categories; missing not included).
        index : pandas.Index, optional
            ``categories`` as an object Index (built when not given).
        hierarchy : Hierarchy, optional
            The global tree (hierarchy).

        Raises
        ------
        UnsupportedDtypeError
            For a value the global domain does not hold.
        """
        plain = self.plain_int_values(series)
        # A column holding the reserved missing key is encoded below, which raises its typed error.
        if plain is not None and not _int_keys_into(plain[0], plain[1], out):
            return
        out[:] = self.encode(series, hierarchy).keys

    def global_categories(self, name, values: pd.Index, seen: set, meta_dtype) -> list | None:
        """Global category list of a column over a whole dataset; None for kinds without
        categories (the default).

        Parameters
        ----------
        name : object
            The column name.
        values : pandas.Index
            Every distinct present value.
        seen : set of tuple
            The category lists of the partitions that were Categoricals.
        meta_dtype : dtype
            The column's dtype in the table's schema.
        """
        return None

    def global_slots(self, values: pd.Series, n_missing: int, *, categories=None,
                     hierarchy=None) -> tuple[np.ndarray, Hierarchy | None]:
        """Count of every slot of a kind with :attr:`exact_counts` over a whole dataset.

        Parameters
        ----------
        values : pandas.Series
            Count of every distinct present value (indexed by value).
        n_missing : int
            Missing values.
        categories : list, optional
            :meth:`global_categories`.
        hierarchy : Hierarchy, optional
            The tree given for the column (hierarchy).

        Returns
        -------
        counts : ndarray of float64
            One per slot (:meth:`slot_keys`).
        hierarchy : Hierarchy or None
            The global tree, with the missing leaf when any value is missing.
        """
        raise NotImplementedError

    def categories_from_values(self, name, values: list) -> list:
        """Global categories of a column whose partitions disagree on them, from its
        distinct values (kinds with categories)."""
        raise NotImplementedError

    def global_encoding(self, meta: pd.Series, scale: float, *, categories=None, slots: int = 0,
                        hierarchy=None) -> EncodedQI:
        """What publishing needs of a QI measured over a whole dataset, without keys.

        Parameters
        ----------
        meta : pandas.Series
            The input column's schema (an empty column of its dtype).
        scale : float
            The global scale.
        categories : list, optional
            Global categories (ordinal, nominal; missing not included).
        slots : int
            Size of the exact-count space (nominal: categories + missing).
        hierarchy : Hierarchy, optional
            The global tree (hierarchy).

        Returns
        -------
        EncodedQI
            With empty keys.
        """
        raise NotImplementedError

    def check_column(self, table, column) -> None:
        """Raise when ``table[column]`` cannot be read as this kind (default: never)."""

    def domain_parts(self, col) -> tuple:
        """Reductions of a column (lazy for Dask) its :class:`Domain` is made from."""
        raise NotImplementedError

    def domain(self, name, parts, meta: pd.Series, hierarchy=None) -> Domain:
        """The :class:`Domain` of a column from its computed :meth:`domain_parts`."""
        raise NotImplementedError

    def partition_parts(self, col: pd.Series) -> tuple:
        """What :meth:`merge_parts` merges of one in-memory partition (default: its
        computed :meth:`domain_parts`)."""
        return tuple(self.domain_parts(col))

    def merge_parts(self, parts: list, meta: pd.Series | None = None) -> tuple:
        """Partitions' :meth:`partition_parts` merged into those of their union, or, given
        ``meta`` (the input's empty pandas form), into its :meth:`domain_parts`. Default:
        the smallest and the largest present value."""
        lo, hi = (pd.Series([p[i] for p in parts], dtype=object).dropna() for i in (0, 1))
        return (lo.min() if len(lo) else np.nan, hi.max() if len(hi) else np.nan)

    # -- publishing -----------------------------------------------------------------------------
    def publishes_labels(self, generalization: str) -> bool:
        """Whether this kind publishes labels (strings) under ``generalization``;
        False where it publishes numbers (midpoint, mean)."""
        return generalization == "range" or not self.summarizes

    def summary_dtype(self, dtype):
        """The dtype of a column published as numbers (midpoint, mean) whose input has
        ``dtype``; None for kinds that always publish labels."""
        return None

    def summary(self, qi: EncodedQI, how: str, lo, hi, total, present) -> np.ndarray:
        """Midpoint or mean of every class (kinds that :attr:`summarizes`)."""
        raise NotImplementedError(f"{self.name} QIs publish labels, not numbers")

    def summary_column(self, qi: EncodedQI, values: np.ndarray):
        """Row values of :meth:`summary` as the column publishes them (default: as they are)."""
        return values

    # -- reading published values back ----------------------------------------------------------
    def read_bound(self, text: str):
        """One bound of a published range, as the value it stands for (default: the text)."""
        return text

    def parse_label(self, label):
        """What a published value stands for (an :class:`~dmondrian.release.publish.Interval`,
        a set of names or a node's name, by :attr:`label_shape`)."""
        raise NotImplementedError

    def label_cost(self, text: str, domain: Domain, column=None) -> float:
        """NCP of one present published value against the original's ``domain``.

        Raises
        ------
        ParseError
            When ``text`` is not a value this kind publishes.
        """
        raise NotImplementedError

    def coverage(self, labels: list, meta: pd.Series, hierarchy=None, column=None):
        """Which original values each of ``labels`` covers: a
        :class:`~dmondrian.kinds.coverage.IntervalCoverage` or
        :class:`~dmondrian.kinds.coverage.SetCoverage`.

        Parameters
        ----------
        labels : list
            Distinct published values (missing ones as None/NaN).
        meta : pandas.Series
            The original column (or its Dask meta): dtype and categories.
        hierarchy : Hierarchy, optional
            The generalization tree (hierarchy kind).
        column : object, optional
            The column name, for error messages.
        """
        raise NotImplementedError

    # -- painting -------------------------------------------------------------------------------
    def cell_width(self, dtype) -> float:
        """Width of one value on the painting's axis: 1 for integers and codes (a
        range ``[20, 29]`` covers 19.5 to 29.5), 0 for continuous values."""
        return 0.0

    def tick_labels(self, col: pd.Series) -> list | None:
        """Names of the axis ticks of a painting (category names), or None."""
        return None
