"""Published labels as text: the dtype of their categories, and the conversion to it.

Both the whole-row path's output partitions and the keys path's input
partitions publish labels as Categoricals whose categories are text.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["TEXT", "text_labels"]

#: The dtype pandas gives an index of Python strings ("str" on pandas 3): the
#: categories of published labels, as the local engine builds them.
TEXT = pd.Index(["label"]).dtype


def text_labels(column: pd.Series) -> pd.Series:
    """Published labels as a Categorical whose categories are text (:data:`TEXT`).

    Only the distinct labels are converted, never a string per row; labels of
    other types (a hierarchy's numbers, say) become their ``str``.

    Examples
    --------
    >>> text_labels(pd.Series(pd.Categorical([3, 1, 3]))).cat.categories.tolist()
    ['1', '3']
    """
    if not isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype("category")
    categories = column.cat.categories
    if categories.dtype == TEXT:
        return column
    text = pd.Index([str(c) for c in categories], dtype=TEXT)
    codes = column.cat.codes.to_numpy()
    if not text.is_unique:
        # Two labels with the same text (1 and "1") are one label of the release.
        remap, text = pd.factorize(text)
        codes = np.where(codes < 0, codes, remap[np.maximum(codes, 0)])
    values = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(text, column.cat.ordered))
    return pd.Series(values, index=column.index, name=column.name)
