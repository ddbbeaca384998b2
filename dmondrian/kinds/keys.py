"""Order-preserving int64 keys: the primitives every kind's encoding is built from.

The kernel only ever sees int64 keys: comparing two keys must give the same
answer as comparing the two original values in the order Mondrian cuts along.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._kernel import keys as _keys
from .._kernel.constants import FLIP

__all__ = ["float_keys", "decode_float_keys", "factorize"]


def float_keys(values: np.ndarray) -> np.ndarray:
    """Order-preserving int64 keys of float64 values; NaN maps to ``MISSING_KEY``.

    Parameters
    ----------
    values : ndarray
        Values convertible to float64.

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> k = float_keys(np.array([-2.0, -0.5, 0.0, -0.0, 1.5, np.nan]))
    >>> bool(np.all(np.diff(k[[0, 1, 2, 4]]) > 0)), bool(k[2] == k[3])
    (True, True)
    """
    return _keys.float_keys(np.ascontiguousarray(values, dtype=np.float64))[0]


def decode_float_keys(keys: np.ndarray) -> np.ndarray:
    """Inverse of :func:`float_keys` for present (non-missing) keys.

    Parameters
    ----------
    keys : ndarray of int64

    Returns
    -------
    ndarray of float64

    Examples
    --------
    >>> decode_float_keys(float_keys(np.array([-1.5, 2.0]))).tolist()
    [-1.5, 2.0]
    """
    keys = np.asarray(keys, dtype=np.int64)
    return np.where(keys < 0, keys ^ FLIP, keys).view(np.float64)


def factorize(series: pd.Series) -> tuple[np.ndarray, list]:
    """Codes and categories of a nominal column; missing gets code -1.

    A Categorical keeps its categories; other columns get their distinct
    values sorted, so codes (and published sets) do not depend on row order.

    Parameters
    ----------
    series : pandas.Series

    Returns
    -------
    codes : ndarray of int64
    categories : list

    Examples
    --------
    >>> codes, cats = factorize(pd.Series(["b", None, "a", "b"]))
    >>> codes.tolist(), cats
    ([1, -1, 0, 1], ['a', 'b'])
    """
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy().astype(np.int64), list(series.cat.categories)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    uniques = list(uniques)
    try:
        order = sorted(range(len(uniques)), key=lambda i: uniques[i])
    except TypeError:
        order = sorted(range(len(uniques)), key=lambda i: (type(uniques[i]).__name__,
                                                           str(uniques[i])))
    remap = np.empty(len(uniques), dtype=np.int64)
    remap[order] = np.arange(len(uniques))
    codes = codes.astype(np.int64)
    out = np.where(codes < 0, -1, remap[np.maximum(codes, 0)] if len(uniques) else -1)
    return out, [uniques[i] for i in order]
