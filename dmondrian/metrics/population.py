"""How many population records each released class covers (the ``F_j`` of journalist risk)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..encoding.validation import check_mapping, check_quasi_identifiers
from ..privacy.suppression import MASK_LABEL
from ._frames import check_table, class_sizes, compute, groupby, is_dask, meta_of
from .domains import column_kinds

__all__ = ["population_counts"]


def _coverage(part: pd.DataFrame, qis, matchers, label_idx, n_classes: int,
              budget: int = 1 << 22) -> np.ndarray:
    """How many rows of ``part`` each class's published values cover; last entry: its rows."""
    if len(part) == 0:
        return np.zeros(n_classes + 1, dtype=np.int64)
    distinct = groupby(part[qis], qis).size()
    weights = distinct.to_numpy(dtype=np.int64)
    values = distinct.index.to_frame(index=False)
    keys = [matchers[j].keys(values[q]) for j, q in enumerate(qis)]
    out = np.zeros(n_classes + 1, dtype=np.int64)
    out[-1] = len(part)
    step = max(1, budget // max(n_classes, 1))
    for s in range(0, len(values), step):
        covered = np.ones((n_classes, min(step, len(values) - s)), dtype=bool)
        for j in range(len(qis)):
            covered &= matchers[j].accepts(keys[j][s: s + step])[label_idx[j]]
        out[:-1] += covered.astype(np.int64) @ weights[s: s + step]
    return out


@dataclass
class _MaskedCoverage:
    """A kind's coverage of the labels but ``"*"`` (a suppressed value), which
    covers every value."""

    inner: object
    at: int

    def keys(self, col: pd.Series) -> np.ndarray:
        return self.inner.keys(col)

    def accepts(self, keys: np.ndarray) -> np.ndarray:
        return np.insert(self.inner.accepts(keys), self.at, True, axis=0)


def masked_coverage(kind, labels: list, meta, hierarchy, column):
    """``kind.coverage`` of ``labels``, the mask label ``"*"`` covering everything."""
    if MASK_LABEL not in labels:
        return kind.coverage(labels, meta, hierarchy, column)
    at = labels.index(MASK_LABEL)
    rest = labels[:at] + labels[at + 1:]
    return _MaskedCoverage(kind.coverage(rest, meta, hierarchy, column), at)


def population_counts(released, qis, population, hierarchies=None, qi_kinds=None):
    """Class sizes ``f``, population matches ``F`` and population size.

    Collects the release's class table (one row per class) and streams the
    population: a Dask population is reduced partition by partition.

    Parameters
    ----------
    released : pandas or Dask DataFrame
        The release; its classes are the groups of its published QI values.
    qis : list
        Validated QI names.
    population : pandas or Dask DataFrame
        The population, with original QI values.
    hierarchies, qi_kinds : dict, optional
        How to read the population's QIs, as given to :func:`dmondrian.anonymize`.

    Returns
    -------
    f, big_f : ndarray of int64
        Each class's size and the population records its published values cover.
    n_pop : int
        Rows of the population.
    """
    check_table(population, "population")
    check_quasi_identifiers(qis, population.columns)
    hierarchies = check_mapping("hierarchies", hierarchies, qis)
    qi_kinds = check_mapping("qi_kinds", qi_kinds, qis)
    (sizes,) = compute(class_sizes(released, qis))
    classes = sizes.index.to_frame(index=False)
    f = sizes.to_numpy(dtype=np.int64)
    kinds = column_kinds(population, qis, hierarchies, qi_kinds)
    matchers, label_idx = [], []
    for q in qis:
        codes, labels = pd.factorize(classes[q].astype(object), use_na_sentinel=False)
        matchers.append(masked_coverage(kinds[q], list(labels), meta_of(population[q]),
                                        hierarchies.get(q), q))
        label_idx.append(codes)
    if is_dask(population):
        import dask

        parts = [dask.delayed(_coverage)(p, qis, matchers, label_idx, len(f))
                 for p in population[qis].to_delayed()]
        (total,) = dask.compute(dask.delayed(sum)(parts))
    else:
        total = _coverage(population, qis, matchers, label_idx, len(f))
    total = np.asarray(total, dtype=np.int64)
    return f, total[:-1], int(total[-1])
