"""Distinct rows of integer columns packed into one int64 each (dmondrian.encoding.distinct_rows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dmondrian.encoding.distinct_rows import distinct_rows


def _columns(n, spans, seed):
    rng = np.random.default_rng(seed)
    out = []
    for span in spans:
        if span == "bool":
            out.append(rng.integers(0, 2, n).astype(bool))
        elif span == "words":  # bitmask words, the top bit set in some
            out.append(rng.choice(np.array([1, 6, 2**63, 2**64 - 1], dtype=np.uint64), n))
        elif span == "int8":
            out.append(rng.integers(-128, 128, n).astype(np.int8))
        else:
            step = max(1, span // 7)
            out.append(rng.integers(-span, span, n, dtype=np.int64) // step * step)
    return out


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300),
       spans=st.lists(st.sampled_from([1, 3, 200, 2**40, "bool", "words", "int8"]),
                      min_size=1, max_size=3),
       seed=st.integers(0, 10_000), first_seen=st.booleans())
def test_every_row_gets_its_own_values_back_and_each_distinct_row_comes_once(
        n, spans, seed, first_seen):
    columns = _columns(n, spans, seed)
    uniques, inverse = distinct_rows(*columns, first_seen=first_seen)
    for column, unique in zip(columns, uniques, strict=True):
        assert unique.dtype == column.dtype
        assert (unique[inverse] == column).all()
    rows = list(zip(*(u.tolist() for u in uniques), strict=True))
    assert len(set(rows)) == len(rows) == len(set(zip(*(c.tolist() for c in columns),
                                                      strict=True)))
    if first_seen:
        # pandas' own order of first appearance of the tuples
        expected = list(dict.fromkeys(zip(*(c.tolist() for c in columns), strict=True)))
        assert rows == expected


def test_without_the_inverse_the_rows_come_in_order_of_first_appearance():
    node = np.array([5, 2, 5, 9, 2], dtype=np.int64)
    code = np.array([0, 1, 0, 0, 3], dtype=np.int64)
    (u_node, u_code), inverse = distinct_rows(node, code, first_seen=True, inverse=False)
    assert inverse is None
    assert list(zip(u_node.tolist(), u_code.tolist(), strict=True)) == [(5, 0), (2, 1), (9, 0),
                                                                         (2, 3)]
    assert pd.unique(node * 10 + code).tolist() == (u_node * 10 + u_code).tolist()


def test_columns_too_wide_to_pack_are_refused():
    wide = np.arange(70_000, dtype=np.int64) * 2**20  # numbered: 70,000 values each
    with pytest.raises(ValueError, match="do not pack"):
        distinct_rows(wide, wide[::-1].copy(), wide + 1, wide * 3)
