"""Suppression: publish a bounded share of rows fully hidden so the rest generalize less.

``anonymize(..., suppression=f)`` may suppress up to ``floor(f * n)`` rows
(``0 <= f < 1``), never leaving fewer than ``k`` rows generalized. The rule:

1. Partition at k as usual.
2. Rank the classes by their cost: the mean over the QIs of the class's
   normalized span, i.e. the NCP its rows pay.
3. Suppress whole classes from the costliest down, each that still fits in what is left of the
   budget (on equal costs the smaller class first); classes that cost no more than the mean row are
   never suppressed, since hiding them could only add loss.

The other rows keep their classes. Partitioning them again without the suppressed rows, or
suppressing the rows with the rarest values before partitioning, were measured against this rule and
did worse on Adult (see ``benchmarks/README.md``, "Suppression").

Suppressed rows are published with every QI hidden (``suppressed="mask"``: the label ``"*"``,
NaN/NaT for QIs published as numbers) or left out (``"drop"``). The masked rows form one class of
their own. It is a union of whole classes that each met the privacy constraints, so it meets them
too (k-anonymity; distinct, entropy and recursive l-diversity and t-closeness all hold for a union
of classes that each hold them); it is checked anyway, and were it to fail its rows would be dropped
rather than published. The release never holds a class below k.

The Dask engine applies the rule inside each leaf, with the leaf's share ``floor(f * n_leaf)`` of
the budget, so the total never exceeds ``floor(f * n)``; a leaf suppresses whole classes, hence none
or at least ``k`` rows, and the masked rows of all leaves together form one class of at least ``k``
rows.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from .. import _kernel as K
from ..kinds.base import EncodedQI
from ..options import ANONYMIZE

__all__ = ["MASK_LABEL", "MASKED_CLASS", "check_suppression", "budget", "most_dropped",
           "class_costs", "choose_classes", "suppressed_rows", "suppress", "publish_suppressed",
           "masked_column", "release", "SuppressionResult"]

#: How a masked row publishes a QI that is published as a label.
MASK_LABEL = "*"
#: The class id of masked rows in ``class_column``.
MASKED_CLASS = -1


def check_suppression(suppression) -> float:
    """The checked share of rows that may be suppressed.

    Examples
    --------
    >>> check_suppression(0.02)
    0.02
    >>> check_suppression(1.0)
    Traceback (most recent call last):
    ...
    dmondrian.errors.ParameterError: suppression must be a fraction of the rows in [0, 1), got 1.0
    """
    return float(ANONYMIZE["suppression"].check(suppression))


def budget(n_rows: int, fraction: float, k: int) -> int:
    """Most rows a table (or a Dask leaf) of ``n_rows`` may suppress.

    ``floor(fraction * n_rows)``, and never so many that fewer than ``k``
    rows would be left to generalize.

    Examples
    --------
    >>> budget(1000, 0.02, 5), budget(12, 0.5, 10), budget(99, 0.0, 5)
    (20, 2, 0)
    """
    return max(0, min(math.floor(fraction * n_rows), n_rows - k))


def most_dropped(n_rows: int, options) -> int:
    """Most rows a release of ``n_rows`` rows may leave out under ``options``
    (:class:`dmondrian.encoding.validation.Options`): the budget with ``suppressed="drop"``
    (or when masked rows would fail the constraints), else 0 with no suppression."""
    return math.floor(options.suppression * n_rows) if options.suppression > 0 else 0


def class_costs(encoded: list[EncodedQI], part, scales=None) -> np.ndarray:
    """Every class's cost: the mean over the QIs of its normalized span.

    The span is the one NCP charges a published class: value range over the global range (numeric,
    datetime, ordinal), distinct values - 1 over the global count - 1 (nominal), leaves under the
    common ancestor - 1 over the leaves - 1 (hierarchy); 1 for a class mixing missing and present
    values of a range QI, 0 for a constant QI.

    Parameters
    ----------
    encoded : list of EncodedQI
        The QIs (their kinds, scales and hierarchies; their keys are not read).
    part : Partitioning
        The partition (:func:`dmondrian.local.partition`); its class-ordered
        keys and statistics are read.
    scales : sequence of float, optional
        Global scales (default: the encoded ones).

    Returns
    -------
    ndarray of float64, one per class
    """
    total = np.zeros(part.n_classes)
    for j, qi in enumerate(encoded):
        scale = float(qi.scale if scales is None else scales[j])
        if scale > 0:
            total += _spans(qi, j, scale, part)
    return total / max(len(encoded), 1)


def _spans(qi: EncodedQI, j: int, scale: float, part) -> np.ndarray:
    """Normalized span of QI ``j`` in every class."""
    class_of_pos, lo, hi, missing, _, present = part.stats
    spec = qi.spec
    if spec.label_shape == "set":
        # Distinct codes per class, missing counted as a value.
        card = np.int64(max(qi.card, 1))
        pairs = np.unique(class_of_pos * card + part.sorted_keys[j])
        distinct = np.bincount(pairs // card, minlength=part.n_classes)
        return np.maximum(distinct - 1, 0) / scale
    a, b = lo[:, j], hi[:, j]
    if spec.label_shape == "node":
        pairs, inverse = np.unique(np.column_stack([a, b]), axis=0, return_inverse=True)
        width = np.array([spec.key_width(int(x), int(y), qi.kernel_kind, qi.hierarchy)
                          for x, y in pairs])
        return width[inverse.reshape(-1)] / scale
    empty = present[:, j] == 0
    a, b = np.where(empty, 0, a), np.where(empty, 0, b)
    width = spec.span(spec.key_value(a, qi.kernel_kind), spec.key_value(b, qi.kernel_kind))
    width = np.where(empty, 0.0, width / scale)
    # A class mixing missing and present values publishes "[lo, hi] or <NA>": full loss.
    return np.where(missing[:, j] & ~empty, 1.0, width)


def choose_classes(costs: np.ndarray, sizes: np.ndarray, class_leaf: np.ndarray,
                   budgets: np.ndarray) -> np.ndarray:
    """Which classes to suppress: per run, the costliest that fit its budget.

    Classes that cost less than the mean row are never suppressed: hiding one only adds loss.

    Parameters
    ----------
    costs, sizes : ndarray, one per class
    class_leaf : ndarray of int
        The run (table, or Dask leaf) each class belongs to.
    budgets : ndarray of int, one per run
        Rows each run may suppress.

    Returns
    -------
    ndarray of bool, one per class

    Examples
    --------
    >>> choose_classes(np.array([0.9, 0.1, 0.8, 0.7]), np.array([3, 3, 4, 3]),
    ...                np.zeros(4, dtype=int), np.array([7])).tolist()
    [True, False, True, False]
    """
    chosen = np.zeros(len(costs), dtype=bool)
    if len(costs) == 0:
        return chosen
    costs = np.minimum(costs, 1.0)
    mean = float(np.dot(costs, sizes) / max(sizes.sum(), 1))
    left = np.asarray(budgets, dtype=np.int64).copy()
    # Costliest first; among equal costs, the smaller class (more rows left for others).
    for c in np.lexsort((sizes, -costs)):
        if costs[c] <= mean:
            break
        r = class_leaf[c]
        if sizes[c] <= left[r]:
            chosen[c] = True
            left[r] -= sizes[c]
    return chosen


def suppressed_rows(encoded: list[EncodedQI], part, starts: np.ndarray, budgets: np.ndarray,
                    scales=None) -> np.ndarray:
    """Rows to suppress (a boolean per row) given leaves starting at ``starts``."""
    n = len(part.class_of_row)
    if n == 0 or not np.any(budgets > 0):
        return np.zeros(n, dtype=bool)
    sizes = np.bincount(part.class_of_row, minlength=part.n_classes)
    costs = class_costs(encoded, part, scales)
    leaf_of_row = np.searchsorted(starts, np.arange(n), side="right") - 1
    class_leaf = np.zeros(part.n_classes, dtype=np.int64)
    class_leaf[part.class_of_row] = leaf_of_row
    chosen = choose_classes(costs, sizes, class_leaf, budgets)
    return chosen[part.class_of_row]


@dataclasses.dataclass
class SuppressionResult:
    """A partition and the rows it suppresses.

    Attributes
    ----------
    part : Partitioning
        The partition of every row.
    hidden : ndarray of bool
        Whether each row is suppressed (whole classes of ``part``).
    masked : bool
        Whether the suppressed rows are published masked (else dropped).
    """

    part: object
    hidden: np.ndarray
    masked: bool


def suppress(encoded: list[EncodedQI], part, fraction: float, suppressed: str, *, starts=None,
             privacy=None, scales=None) -> SuppressionResult:
    """Choose the rows of a partition to suppress (the rule of this module).

    Parameters
    ----------
    encoded : list of EncodedQI
        The QIs the partition was cut on.
    part : Partitioning
        The partition (:func:`dmondrian.local.partition`).
    fraction : float
        Share of the rows each run may suppress.
    suppressed : {"mask", "drop"}
    starts : ndarray of int64, optional
        First row of each run (Dask leaf) cut as its own root (default: one
        run, the whole table); each run suppresses within its own budget.
    privacy : KernelPrivacy, optional
        The constraints, which the masked class must meet too.
    scales : sequence of float, optional
        Global scales (default: the encoded ones).

    Returns
    -------
    SuppressionResult
    """
    n = len(part.class_of_row)
    starts = np.zeros(1, dtype=np.int64) if starts is None else np.asarray(starts, np.int64)
    k = 1 if privacy is None else privacy.min_size
    run_rows = np.diff(np.append(starts, n))
    budgets = np.array([budget(int(m), fraction, k) for m in run_rows], dtype=np.int64)
    hidden = suppressed_rows(encoded, part, starts, budgets, scales)
    masked = suppressed == "mask" and _masked_class_ok(np.flatnonzero(hidden), privacy)
    return SuppressionResult(part, hidden, masked)


def _masked_class_ok(rows: np.ndarray, privacy) -> bool:
    """Whether the masked rows, as one class, meet the constraints (k, l, t)."""
    if len(rows) == 0:
        return False
    if privacy is None:
        return True
    if privacy.entity_codes is not None:
        # Every class holds k entities, so a union of classes does; checked
        # all the same, as the kernel checks a cut.
        if len(np.unique(privacy.entity_codes[rows])) < privacy.min_size:
            return False
    if privacy.sensitive_codes is None:
        return len(rows) >= privacy.min_size
    if privacy.pair_codes is not None:
        # l and t over people: one count per (entity, sensitive value) pair.
        _, first = np.unique(privacy.pair_codes[rows], return_index=True)
        rows = rows[first]
    hist = np.bincount(privacy.sensitive_codes[rows], minlength=int(privacy.ip[K.P_N_SENS]))
    return bool(K.hist_ok(hist.astype(np.int64), len(rows), privacy.ip, privacy.fp, privacy.q))


def publish_suppressed(index: pd.Index, encoded: list[EncodedQI], result: SuppressionResult,
                       generalization: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """Published QI columns of a partition with suppression.

    Parameters
    ----------
    index : pandas.Index
        The index of every row (in the partition's row order).
    encoded : list of EncodedQI
    result : SuppressionResult
    generalization : str

    Returns
    -------
    columns : dict
        ``{qi name: column}`` of the published rows: every row when the suppressed ones are masked
        (every QI ``"*"``, or NaN/NaT for QIs published as numbers), else the kept rows only.
    rows : ndarray of int64
        Positions of the published rows.
    class_of_row : ndarray of int64
        Class id of each published row, ``0..m-1`` over the kept classes,
        :data:`MASKED_CLASS` for masked rows.
    """
    from ..release.publish import class_values, expand_labels

    part, hidden = result.part, result.hidden
    chosen = np.zeros(part.n_classes, dtype=bool)
    chosen[part.class_of_row[hidden]] = True
    # Kept classes renumbered 0..m-1; the suppressed ones all become class m.
    renumber = np.cumsum(~chosen) - 1
    m = int((~chosen).sum())
    renumber[chosen] = m
    rows = np.arange(len(hidden), dtype=np.int64) if result.masked else np.flatnonzero(~hidden)
    class_of_row = renumber[part.class_of_row[rows]]
    columns = {}
    for j, qi in enumerate(encoded):
        values, inverse = class_values(qi, j, generalization, part.stats, part.sorted_keys[j])
        inverse = np.asarray(inverse)[~chosen]
        if isinstance(values, pd.Index):
            # Labels of suppressed classes must not linger as unused categories.
            used = np.unique(inverse)
            values, inverse = values[used], np.searchsorted(used, inverse)
        if result.masked:
            column = masked_column(qi, values, inverse, class_of_row, m)
        elif isinstance(values, pd.Index):
            column = expand_labels(values, inverse, class_of_row)
        else:
            column = qi.spec.summary_column(qi, values[inverse][class_of_row])
        columns[qi.name] = pd.Series(column, index=index[rows], copy=False)
    return columns, rows, np.where(class_of_row == m, MASKED_CLASS, class_of_row)


def masked_column(qi: EncodedQI, values, inverse: np.ndarray, class_of_row: np.ndarray,
                  n_classes: int):
    """A published column in which the rows of class ``n_classes`` are masked.

    ``values, inverse`` are :func:`dmondrian.release.publish.class_values` of the
    other classes: labels get the label ``"*"``, numbers NaN (NaT).
    """
    from ..release.publish import expand_labels

    if isinstance(values, pd.Index):
        at = values.get_indexer([MASK_LABEL])[0]
        if at < 0:
            at = len(values)
            values = values.append(pd.Index([MASK_LABEL], dtype=values.dtype))
        return expand_labels(values, np.append(inverse, at), class_of_row)
    # -1 takes the missing value of the values' type (NaN, NaT, NA).
    full = pd.api.extensions.take(values, np.append(inverse, -1), allow_fill=True)
    return qi.spec.summary_column(qi, full[class_of_row])


def release(df: pd.DataFrame, encoded: list[EncodedQI], result: SuppressionResult,
            generalization: str, class_column=None) -> pd.DataFrame:
    """The local engine's release: ``df`` with its QIs published, suppression applied."""
    columns, rows, class_of_row = publish_suppressed(df.index, encoded, result, generalization)
    out = df.copy(deep=False) if result.masked else df.iloc[rows].copy(deep=False)
    for name, column in columns.items():
        out[name] = column
    if class_column is not None:
        out[class_column] = class_of_row
    return out
