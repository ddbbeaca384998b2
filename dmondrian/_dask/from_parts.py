"""A dask DataFrame of delayed partitions, named by its tasks' keys instead of its meta.

``dask.dataframe.from_delayed`` names the frame by a token of all its
operands, the meta included, and dask tokenizes a Categorical dtype by its
categories: a release's label columns hold every label of the release (tens
of thousands of them, text held by Arrow, which dask's tokenizer walks
value by value). :func:`from_parts` builds the same expression named by a
token of the partitions' task keys and the divisions: what the frame
computes is fixed by those keys, which name pure tasks and the release's
constants (``dmondrian.<what>-<uuid>``), and the meta is what they return.
"""

from __future__ import annotations

import pandas as pd
from dask.dataframe.dask_expr._collection import new_collection
from dask.dataframe.dask_expr._expr import ArrowStringConversion, DelayedsExpr
from dask.dataframe.dask_expr.io._delayed import FromDelayed
from dask.dataframe.utils import pyarrow_strings_enabled
from dask.tokenize import _tokenize_deterministic

__all__ = ["from_parts"]


class FromParts(FromDelayed):
    """dask's ``FromDelayed``, tokenized without its meta."""

    def __dask_tokenize__(self):
        if not self._determ_token:
            operands = [op for name, op in zip(self._parameters, self.operands, strict=False)
                        if name != "meta"]
            self._determ_token = _tokenize_deterministic(type(self), *operands)
        return self._determ_token


def from_parts(parts, meta: pd.DataFrame, divisions=None):
    """``dask.dataframe.from_delayed(parts, meta, divisions, verify_meta=False)``, named
    without tokenizing ``meta`` (see the module docstring).

    Parameters
    ----------
    parts : list of dask.delayed.Delayed
        One partition each, computed by pure tasks or on named constants.
    meta : pandas.DataFrame
        The partitions' empty frame.
    divisions : tuple, optional
        As ``from_delayed``'s.

    Returns
    -------
    dask.dataframe.DataFrame
    """
    if divisions is not None and len(divisions) != len(parts) + 1:
        raise ValueError("divisions should be a tuple of len(parts) + 1")
    expr = FromParts(DelayedsExpr(*parts), meta, None if divisions is None else list(divisions),
                     False, None, None)
    if pyarrow_strings_enabled() and any(pd.api.types.is_object_dtype(dtype)
                                         for dtype in meta.dtypes.values):
        expr = ArrowStringConversion(expr)  # as from_delayed converts object columns
    return new_collection(expr)
