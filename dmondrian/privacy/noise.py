"""Laplace noise on class means: the ``noise=`` option of every engine.

What is published
-----------------
For each noised column (numeric, neither a QI nor the sensitive column), every row's value is
replaced by its equivalence class's mean of the values clipped to ``bounds = (lo, hi)``, plus
Laplace noise of scale ``(hi - lo) / (n_c * epsilon)``, clamped to the bounds. One draw per class:
all the rows of a class publish the same number. This is the microaggregation-plus-noise of
Soria-Comas, Domingo-Ferrer, Sánchez & Martínez (VLDB J. 2014): a class mean of a bounded attribute
has sensitivity ``(hi - lo) / n_c``, so the k rows of a class cut the noise needed by k.

What is guaranteed, and what is not
-----------------------------------
* **Given the partition**, the published means of one column are ``epsilon``-differentially private
  with respect to that column's values: changing one row's value (any value; it is clipped) moves
  one class mean by at most ``(hi - lo) / n_c``, and that mean gets Laplace noise of that
  sensitivity over ``epsilon``. Several noised columns compose: the release of all of them is
  ``sum(epsilon)``-DP in those columns.
* **The partition is not differentially private.** The classes are cut on the quasi-identifiers (and
  the sensitive column, under l or t); which rows share a class, the class sizes and the generalized
  QIs depend on the data without noise, and are protected by k-anonymity only. The noised columns
  must not be QIs (they are refused), so the partition never looks at them.
* The clamp to the bounds and the spread of a class's value to its rows are
  post-processing: they cost no privacy.

Where the noise comes from
--------------------------
Textbook Laplace sampling on floating-point numbers (``np.random.laplace``)
leaks the input through the low-order bits of its output (Mironov, CCS 2012),
so the noise comes from a maintained differential-privacy library:

* ``random_state=None`` (the default): OpenDP's Laplace mechanism
  (``opendp.measurements.make_laplace`` on a vector of floats), which rounds to a grid and samples
  exactly from OS entropy, so it is floating-point safe. It cannot be seeded. Exact sampling costs
  far more per draw than numpy's (see benchmarks/README.md, "Noise and direct identifiers"), so
  draws are made per class, never per row, in one call per distinct class size (classes of one size
  share a scale).
* ``random_state`` given (an int or a ``numpy.random.Generator``): the release is repeatable, which
  OpenDP cannot do. The noise is then the discrete Laplace on a power-of-two grid (far finer than
  the scale), drawn as the difference of two geometric variables from numpy's generator, and added
  to the class mean rounded to that grid: the construction OpenDP's float mechanism uses, with
  numpy's (floating-point, non-exact) geometric sampler and a seedable, non-cryptographic generator
  in place of the exact sampler and OS entropy. Use it for tests, audits and reproducible research;
  anyone who learns the seed can subtract the noise, so a real release either keeps the seed secret
  or uses the default. (IBM's diffprivlib takes a ``random_state``, but 0.6.6, its latest, fails to
  import with scikit-learn 1.8 and later.)

On the Dask engine the noise is drawn inside each leaf's task; with a seed,
each leaf draws from its own generator, seeded by the seed and the leaf id,
so the release does not depend on which task finished first.

Per person: ``entity=`` (event tables)
--------------------------------------
A class mean's sensitivity ``(hi - lo) / n_c`` assumes one row per person; a person with ``r`` rows
in a class moves its mean ``r`` times as far, and a person with rows in several classes moves
several means. With an entity column, each entity's contribution is bounded first, as differentially
private aggregation libraries do (PipelineDP's contribution bounding: a cap on the partitions a
privacy unit contributes to, and on its contributions to each), by sampling:

* ``max_classes`` (default 1): each entity's rows count in at most this many of the classes it has
  rows in, chosen at random; in its other classes its rows are left out of the means;
* ``max_contributions`` (default 1): in each of those, at most this many of
  its rows, chosen at random, count.

The published values are still one per class, for every row of the class.
A class's mean is taken over its kept rows, ``n'_c`` of them, and gets
Laplace noise of scale ``max_classes * max_contributions * (hi - lo) /
(n'_c * epsilon)``. **Guarantee**: given the partition (which rows are in
which class, and whose rows they are), the published means of a column are
``epsilon``-differentially private with respect to any one entity's values
in that column: changing all of them moves the means of at most
``max_classes`` classes, each by at most ``max_contributions * (hi - lo) /
n'_c``, and the noise of each is scaled so the privacy losses sum to at most
``epsilon``. A class none of whose rows are kept publishes the bounds'
midpoint plus the noise of ``n'_c = 1`` (nothing of its values). The
sampling uses ``random_state`` when given, else fresh OS entropy; it looks
at who holds which rows, never at the values.

With suppression (``suppression=``), the masked rows are noised as one group (the masked class) by
the local engine, and as one group per leaf by the Dask engine, which finishes leaves apart: there
the masked class may publish a few values, each the noisy mean of its group with the noise its
group's size calls for. Dropped rows are not published.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import (
    ColumnError,
    InvalidValueError,
    MissingColumnError,
    MissingDependencyError,
    ParameterError,
    UnsupportedDtypeError,
)
from ..options import ANONYMIZE

__all__ = ["NoisedColumn", "check_noise", "check_noise_dtypes", "check_random_state",
           "noise_seed", "noisy_columns", "noise_groups", "noise_summary", "laplace_sampler",
           "bound_contributions"]


@dataclass(frozen=True)
class NoisedColumn:
    """The noise of one column: its ``epsilon`` and ``bounds = (lo, hi)``."""

    column: object
    epsilon: float
    lo: float
    hi: float

    def scale(self, class_size, contributions: int = 1) -> float:
        """The Laplace scale of a class of ``class_size`` rows: ``(hi - lo) / (n_c * eps)``.

        ``contributions`` is the most rows one person may have in the
        published means (``max_classes * max_contributions`` with an entity),
        which multiplies the sensitivity.

        Examples
        --------
        >>> NoisedColumn("income", 1.0, 0.0, 100.0).scale(10)
        10.0
        >>> NoisedColumn("income", 1.0, 0.0, 100.0).scale(10, contributions=3)
        30.0
        """
        return contributions * (self.hi - self.lo) / (class_size * self.epsilon)


def _finite_real(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, numbers.Real)
            and math.isfinite(value))


def _noised_column(column, entry) -> NoisedColumn:
    def refuse(problem):
        return ParameterError("noise", f"noise[{column!r}]{problem}")

    if not isinstance(entry, Mapping):
        raise refuse(f" must be a mapping with 'epsilon' and 'bounds', got {type(entry).__name__}")
    unknown = set(entry) - {"epsilon", "bounds"}
    if unknown:
        raise refuse(f" has unknown key {sorted(map(str, unknown))[0]!r}; it takes 'epsilon' "
                     "and 'bounds'")
    epsilon = entry.get("epsilon")
    if not _finite_real(epsilon) or epsilon <= 0:
        raise refuse(f": epsilon must be a finite number > 0, got {epsilon!r}")
    bounds = entry.get("bounds")
    if bounds is None:
        raise refuse(": bounds (lo, hi) are missing; the noise scale is (hi - lo) / "
                     "(class size * epsilon)")
    if isinstance(bounds, (str, bytes)) or not hasattr(bounds, "__len__") or len(bounds) != 2:
        raise refuse(f": bounds must be a pair (lo, hi), got {bounds!r}")
    lo, hi = bounds
    if not (_finite_real(lo) and _finite_real(hi)):
        raise refuse(f": bounds must be finite numbers, got {bounds!r}")
    if not lo < hi:
        raise refuse(f": bounds must be (lo, hi) with lo < hi, got {bounds!r}")
    return NoisedColumn(column, float(epsilon), float(lo), float(hi))


def check_noise(noise, columns, qis, sensitive=None) -> list[NoisedColumn]:
    """Check the ``noise`` option against the table's columns.

    Parameters
    ----------
    noise : mapping or None
        ``{column: {"epsilon": eps, "bounds": (lo, hi)}}``.
    columns : sequence
        The table's columns.
    qis : list
        The quasi-identifiers (a noised column must not be one).
    sensitive : column name, optional
        The sensitive column (it must not be noised either).

    Returns
    -------
    list of NoisedColumn

    Examples
    --------
    >>> check_noise({"pay": {"epsilon": 1, "bounds": (0, 10)}}, ["age", "pay"], ["age"])
    [NoisedColumn(column='pay', epsilon=1.0, lo=0.0, hi=10.0)]
    >>> check_noise({"pay": {"epsilon": 0, "bounds": (0, 10)}}, ["age", "pay"], ["age"])
    Traceback (most recent call last):
    ...
    dmondrian.errors.ParameterError: noise['pay']: epsilon must be a finite number > 0, got 0
    """
    if noise is None:
        return []
    if not isinstance(noise, Mapping):
        raise ParameterError("noise", "noise must be a mapping column -> {'epsilon': ..., "
                                      f"'bounds': (lo, hi)}}, got {type(noise).__name__}")
    cols = list(columns)
    noised = []
    for column, entry in noise.items():
        if column not in cols:
            raise MissingColumnError(column, f"noise names column {column!r}, which is not a "
                                             "column of the table")
        if column in qis:
            raise ColumnError(column, f"noised column {column!r} is a quasi-identifier: the "
                                      "partition would depend on the values the noise protects")
        if sensitive is not None and column == sensitive:
            raise ColumnError(column, f"noised column {column!r} is the sensitive column, "
                                      "whose values l-diversity and t-closeness are about")
        noised.append(_noised_column(column, entry))
    return noised


def check_noise_dtypes(noised: list[NoisedColumn], dtypes) -> None:
    """Refuse a noised column that is not numeric (bool and complex included).

    ``dtypes`` maps each column to its dtype (``df.dtypes``).

    Examples
    --------
    >>> check_noise_dtypes([NoisedColumn("name", 1.0, 0.0, 1.0)],
    ...                    pd.Series({"name": np.dtype(object)}))
    Traceback (most recent call last):
    ...
    dmondrian.errors.UnsupportedDtypeError: noised column 'name' has dtype object; noise needs a \
numeric column
    """
    for nc in noised:
        dtype = dtypes[nc.column]
        if (not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
                or pd.api.types.is_complex_dtype(dtype)):
            raise UnsupportedDtypeError(nc.column, f"noised column {nc.column!r} has dtype "
                                                     f"{dtype}; noise needs a numeric column")


def check_random_state(random_state):
    """``random_state`` if it is None, an int >= 0 or a ``numpy.random.Generator``.

    Examples
    --------
    >>> check_random_state(7)
    7
    >>> check_random_state("7")
    Traceback (most recent call last):
    ...
    dmondrian.errors.ParameterError: random_state must be None, an integer >= 0 or a \
numpy.random.Generator, got '7'
    """
    return ANONYMIZE["random_state"].check(random_state)


def noise_seed(random_state) -> int | None:
    """An int seed standing for ``random_state`` (a Generator gives one draw of it).

    The Dask engine seeds each leaf from this seed and the leaf id.
    """
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    return random_state


# -- the samplers ---------------------------------------------------------------------------------


# OpenDP's grid: this many binary digits finer than the scale.
_GRID_BITS = 40


def _opendp_sampler():
    try:
        # Not opendp.prelude: it imports OpenDP's scikit-learn extras, seconds
        # of start-up in every worker.
        from opendp import domains, measurements, metrics, mod
    except ImportError as exc:
        raise MissingDependencyError(
            "opendp", "noise= without random_state draws its Laplace noise with OpenDP, which "
                      "is not installed: pip install 'dmondrian[noise]' (or opendp)") from exc
    # OpenDP keeps its not-yet-vetted constructors behind this flag; the
    # Laplace mechanism on floats is one of them.
    mod.enable_features("contrib")
    atom = domains.atom_domain(T=float, nan=False)
    metric = metrics.l1_distance(T=float)

    def draw(values: np.ndarray, scale: float) -> np.ndarray:
        # OpenDP rounds to a grid of 2**k and samples exactly on it. Its default grid is slower per
        # draw than one 2**40 times finer than the scale (benchmarks/README.md); a grid of our
        # choosing needs the vector's size, and OpenDP's privacy map then counts the rounding of
        # each value, by which the scale is widened so that a sensitivity of `scale` still costs
        # epsilon 1.
        domain = domains.vector_domain(atom, size=len(values))
        k = math.frexp(scale)[1] - _GRID_BITS
        measurement = measurements.make_laplace(domain, metric, scale=float(scale), k=k)
        spent = measurement.map(float(scale))
        if spent > 1.0:
            measurement = measurements.make_laplace(
                domain, metric, scale=float(scale) * spent * (1 + 2.0**-40), k=k)
        return np.asarray(measurement(values.tolist()), dtype=np.float64)

    return draw


def _seeded_sampler(rng: np.random.Generator):
    def draw(values: np.ndarray, scale: float) -> np.ndarray:
        # A grid 2**20 times finer than the scale, but no finer than the
        # values' own precision allows (so value / grid stays an exact integer).
        largest = float(np.max(np.abs(values))) if len(values) else 0.0
        exponent = max(math.frexp(scale)[1] - 21, math.frexp(largest)[1] - 50)
        grid = math.ldexp(1.0, exponent)
        p = -math.expm1(-grid / scale)
        steps = rng.geometric(p, len(values)) - rng.geometric(p, len(values))
        return np.round(values / grid) * grid + steps.astype(np.float64) * grid

    return draw


def laplace_sampler(random_state=None):
    """A function ``draw(values, scale)``: ``values`` plus Laplace noise of ``scale``.

    OpenDP's exact sampler without ``random_state``, else a seeded discrete
    Laplace from numpy's generator (see the module docstring).

    Examples
    --------
    >>> draw = laplace_sampler(7)
    >>> np.array_equal(draw(np.zeros(3), 1.0), laplace_sampler(7)(np.zeros(3), 1.0))
    True
    """
    return _opendp_sampler() if random_state is None else _seeded_sampler(
        np.random.default_rng(random_state))


# -- the noise ------------------------------------------------------------------------------------


def _class_values(values: np.ndarray, class_of_row: np.ndarray, sizes: np.ndarray,
                  nc: NoisedColumn, leaves, kept=None, contributions: int = 1) -> np.ndarray:
    """Every class's noisy clipped mean, clamped to the bounds.

    ``leaves`` lists ``(first_class, end_class, draw)``: the classes of each leaf draw from their
    own sampler, one call per distinct class size. ``kept`` (a row mask) leaves rows out of the
    means; ``sizes`` then counts the kept rows, and a class with none gets the bounds' midpoint.
    """
    clipped = np.clip(values, nc.lo, nc.hi)
    if kept is not None:
        clipped = np.where(kept, clipped, 0.0)
    sums = np.bincount(class_of_row, weights=clipped, minlength=len(sizes))
    means = np.where(sizes > 0, sums / np.maximum(sizes, 1), 0.5 * (nc.lo + nc.hi))
    sizes = np.maximum(sizes, 1)
    # Rounding can leave a mean a hair outside the bounds; the mechanism's
    # input must be the clipped mean itself.
    means = np.clip(means, nc.lo, nc.hi)
    noisy = np.empty_like(means)
    for first, end, draw in leaves:
        run_sizes = sizes[first:end]
        order = np.argsort(run_sizes, kind="stable")
        distinct, starts = np.unique(run_sizes[order], return_index=True)
        for size, group in zip(distinct, np.split(order, starts[1:]), strict=True):
            classes = first + group
            noisy[classes] = draw(means[classes], nc.scale(int(size), contributions))
    return np.clip(noisy, nc.lo, nc.hi)


def noise_groups(class_of_row: np.ndarray, n_classes: int, starts=None, result=None):
    """The rows published and the group each is noised with.

    A group is a class of the partition; with suppression (``result``, a
    :class:`dmondrian.privacy.suppression.SuppressionResult`), the suppressed rows of a leaf are one
    group when they are masked, and absent when dropped. Leaves (``starts``: the first row of each
    Dask leaf; default one leaf) keep their groups contiguous, in leaf order.

    Returns
    -------
    rows : ndarray of int64
        Positions of the published rows.
    groups : ndarray of int64
        Group of each published row, ``0..n_groups-1``.
    n_groups : int
    leaf_groups : ndarray of int64
        First group of each leaf.

    Examples
    --------
    >>> rows, groups, n, leaf_groups = noise_groups(np.array([0, 0, 1, 2, 2]), 3, [0, 3])
    >>> groups.tolist(), n, leaf_groups.tolist()
    ([0, 0, 1, 2, 2], 3, [0, 2])
    """
    n = len(class_of_row)
    starts = np.zeros(1, dtype=np.int64) if starts is None else np.asarray(starts, np.int64)
    classes = np.asarray(class_of_row, dtype=np.int64)
    rows = np.arange(n, dtype=np.int64)
    n_leaves = len(starts)
    if result is None and n_leaves == 1:
        return rows, classes, n_classes, np.zeros(1, dtype=np.int64)
    # Classes are numbered in row order: leaf i holds classes first[i]..first[i+1]-1.
    # Each leaf's masked group goes right after its classes (ids shift by one per
    # earlier leaf), then ids no published row holds are squeezed out.
    leaf_of_row = np.repeat(np.arange(n_leaves), np.diff(np.append(starts, n)))
    first = np.minimum.reduceat(classes, starts) if n else np.zeros(n_leaves, dtype=np.int64)
    ids = classes + leaf_of_row
    if result is not None:
        ends = np.append(first[1:], n_classes)
        ids = np.where(result.hidden, ends[leaf_of_row] + leaf_of_row, ids)
        if not result.masked:
            rows = np.flatnonzero(~result.hidden)
            ids = ids[rows]
    present = np.zeros(n_classes + n_leaves, dtype=bool)
    present[ids] = True
    before = np.concatenate([[0], np.cumsum(present)])
    return rows, before[ids], int(before[-1]), before[first + np.arange(n_leaves)]


def _rank_in_runs(keys: np.ndarray) -> np.ndarray:
    """Position of each element of sorted ``keys`` within its run of equal keys."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))


def bound_contributions(class_of_row: np.ndarray, entity_codes: np.ndarray,
                        max_classes, max_contributions: int, rng) -> np.ndarray:
    """Rows kept in the noised means: per entity, ``max_classes`` classes and
    ``max_contributions`` rows in each, sampled with ``rng``.

    ``max_classes`` is an int, or an array giving each entity code its own (the Dask engine's share
    of an entity's classes in one leaf; see :mod:`dmondrian._dask.entity_noise`).

    Examples
    --------
    >>> kept = bound_contributions(np.array([0, 0, 0, 1, 1]), np.array([7, 7, 8, 7, 8]),
    ...                            1, 1, np.random.default_rng(0))
    >>> int(kept.sum()), int(kept[[0, 1, 3]].sum()), int(kept[[2, 4]].sum())
    (2, 1, 1)
    """
    classes = np.asarray(class_of_row, dtype=np.int64)
    ent = np.asarray(entity_codes, dtype=np.int64)
    n = len(classes)
    width = int(classes.max()) + 1 if n else 1
    pair, pair_key = pd.factorize(ent * width + classes)
    pair_key = np.asarray(pair_key, dtype=np.int64)
    # Classes of each entity in a random order; the first max_classes count.
    order = np.lexsort((rng.random(len(pair_key)), pair_key // width))
    keep_pair = np.empty(len(pair_key), dtype=bool)
    allowed = (max_classes if np.ndim(max_classes) == 0
               else np.asarray(max_classes, dtype=np.int64)[pair_key[order] // width])
    keep_pair[order] = _rank_in_runs(pair_key[order] // width) < allowed
    # Rows of each (entity, class) in a random order; the first max_contributions count.
    order = np.lexsort((rng.random(n), pair))
    kept = np.empty(n, dtype=bool)
    kept[order] = _rank_in_runs(pair[order]) < max_contributions
    return kept & keep_pair[pair]


def noisy_columns(frame: pd.DataFrame, class_of_row: np.ndarray, n_classes: int,
                  noised: list[NoisedColumn], random_state=None, *, leaf_classes=None,
                  leaf_ids=None, entity_codes=None, max_contributions: int = 1,
                  max_classes: int = 1, class_shares=None) -> dict:
    """The published values of the noised columns, row-aligned with ``frame``.

    Parameters
    ----------
    frame : pandas.DataFrame
        Holds the noised columns (any other is ignored).
    class_of_row : ndarray of int
        Class of every row, ids ``0..n_classes-1``, every class non-empty.
    n_classes : int
        Number of classes.
    noised : list of NoisedColumn
        The noised columns.
    random_state : None, int or numpy.random.Generator
        None: OpenDP's sampler. Otherwise the seeded one, drawn column by
        column in ``noised`` order.
    leaf_classes, leaf_ids : ndarray of int, optional
        With a seed on the Dask engine: leaf ``i`` holds the classes from ``leaf_classes[i]`` to the
        next leaf's; its noise comes from a generator seeded by ``(random_state, leaf_ids[i])``.
    entity_codes : ndarray of int, optional
        Each row's entity: contributions are then bounded per entity
        (``max_classes`` classes, ``max_contributions`` rows in each; see the
        module docstring) and the noise scaled so epsilon holds per entity.
    class_shares : ndarray of int, optional
        With ``entity_codes`` on the Dask engine: the classes each entity code may count in here,
        its share of ``max_classes`` (which still sets the noise scale).

    Returns
    -------
    dict
        ``{column: float64 array}``.

    Raises
    ------
    dmondrian.errors.InvalidValueError
        A noised column holds missing values.

    Examples
    --------
    >>> df = pd.DataFrame({"pay": [10.0, 20.0, 30.0, 900.0]})
    >>> out = noisy_columns(df, np.array([0, 0, 1, 1]), 2,
    ...                     [NoisedColumn("pay", 1.0, 0.0, 100.0)], random_state=3)
    >>> bool(out["pay"][0] == out["pay"][1] and 0 <= out["pay"].min() <= out["pay"].max() <= 100)
    True
    """
    class_of_row = np.asarray(class_of_row, dtype=np.int64)
    kept, contributions = None, 1
    if entity_codes is not None:
        kept = bound_contributions(class_of_row, entity_codes,
                                   max_classes if class_shares is None else class_shares,
                                   max_contributions, _selection_rng(random_state, leaf_ids))
        contributions = max_classes * max_contributions
    sizes = np.bincount(class_of_row, weights=kept, minlength=n_classes).astype(np.float64)
    out = {}
    if random_state is None:
        leaves = [(0, n_classes, laplace_sampler(None))]
    elif leaf_classes is None:
        rng = np.random.default_rng(random_state)
        leaves = [(0, n_classes, _seeded_sampler(rng))]
    else:
        ends = np.append(np.asarray(leaf_classes[1:], dtype=np.int64), n_classes)
        rngs = [np.random.default_rng([int(random_state), int(i)]) for i in leaf_ids]
        leaves = [(int(a), int(b), _seeded_sampler(g))
                for a, b, g in zip(leaf_classes, ends, rngs, strict=True)]
    for nc in noised:
        column = frame[nc.column]
        if column.isna().any():
            raise InvalidValueError(nc.column, f"noised column {nc.column!r} holds missing "
                                                 "values; fill or drop them first")
        values = column.to_numpy(dtype=np.float64)
        published = _class_values(values, class_of_row, sizes, nc, leaves, kept, contributions)
        out[nc.column] = published[class_of_row]
    return out


def _selection_rng(random_state, leaf_ids=None):
    """The generator sampling the kept rows: its own stream of the seed, or OS entropy."""
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    ids = [] if leaf_ids is None else [int(i) for i in leaf_ids]
    return np.random.default_rng([int(random_state), 0x5E1EC7, *ids])


def noise_summary(noised) -> dict:
    """``{column: {"epsilon": eps, "bounds": [lo, hi]}}`` for reports and manifests.

    ``noised`` is a list of :class:`NoisedColumn` or the ``noise`` option itself
    (checked as the engines check it, but for the columns).

    Examples
    --------
    >>> noise_summary([NoisedColumn("pay", 1.0, 0.0, 10.0)])
    {'pay': {'epsilon': 1.0, 'bounds': [0.0, 10.0]}}
    >>> noise_summary({"pay": {"epsilon": 2, "bounds": (0, 5)}})
    {'pay': {'epsilon': 2.0, 'bounds': [0.0, 5.0]}}
    """
    if noised is None:
        return {}
    if isinstance(noised, Mapping):
        noised = [_noised_column(column, entry) for column, entry in noised.items()]
    return {str(s.column): {"epsilon": s.epsilon, "bounds": [s.lo, s.hi]} for s in noised}
