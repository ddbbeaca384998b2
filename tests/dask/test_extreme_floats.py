"""Float QIs at the edges of float64: the Dask engine gives the local engine's release.

A range too wide for a float (``-1.5e308`` to ``1.5e308``) has a span that
overflows to ``inf``; every scale and span is capped at the largest float
instead (:func:`dmondrian.kinds.capped_span`), by the local engine and the
Dask engine alike. Subnormals and ``-0.0`` are keyed by their IEEE bits, so
they must order and publish the same way on both engines.
"""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmondrian import distributed as D
from dmondrian import local

QIS = ["x", "y"]


def _both(client, df, k, npartitions=3, **options):
    """The local release and the Dask release in one leaf, as strings, in input order."""
    expected = local.anonymize(df, QIS, k, **options)
    ddf = dd.from_pandas(df, npartitions=npartitions)
    got = D.anonymize(ddf, QIS, k, leaf_rows=len(df), client=client, **options)
    got = got.compute().sort_index()
    assert got.index.equals(expected.index)
    return ({c: got[c].astype(str).tolist() for c in got.columns},
            {c: expected[c].astype(str).tolist() for c in expected.columns})


def test_a_float_spanning_the_whole_line_is_cut_as_the_local_engine_cuts_it(client):
    # x spans 3e308 (beyond the largest float): uncapped, its scale would be
    # inf, every span of x 0, and x never cut, while the local engine cuts it.
    rng = np.random.default_rng(5)
    n = 400
    df = pd.DataFrame({
        "x": rng.choice([-1.5e308, -1e300, 0.0, 1e300, 1.5e308], size=n),
        "y": rng.integers(0, 10, size=n),
        "z": np.arange(n),
    })
    got, expected = _both(client, df, 5, class_column="cls")
    assert got == expected
    # The local engine does cut x: not every row publishes its whole range.
    assert len(set(expected["x"])) > 1


def test_a_float_spanning_the_whole_line_publishes_the_same_midpoints(client):
    df = pd.DataFrame({"x": [-1.5e308, -1.5e308, 1.5e308, 1.5e308, 1e308, -1e308] * 10,
                       "y": list(range(6)) * 10})
    got, expected = _both(client, df, 4, generalization="midpoint")
    assert got == expected


_EDGES = [-1.7976931348623157e308, -1.5e308, -1e308, -2.2250738585072014e-308, -5e-324, -0.0,
          0.0, 5e-324, 2.2250738585072014e-308, 1e-300, 1.0, 1e308, 1.5e308,
          1.7976931348623157e308]


@st.composite
def _tables(draw):
    n = draw(st.integers(8, 40))
    floats = st.one_of(st.sampled_from(_EDGES),
                       st.floats(allow_nan=False, allow_infinity=False),
                       st.floats(-1e-300, 1e-300, allow_nan=False, allow_subnormal=True))
    x = draw(st.lists(floats, min_size=n, max_size=n))
    if draw(st.booleans()):
        x[draw(st.integers(0, n - 1))] = np.nan
    y = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
    return pd.DataFrame({"x": np.array(x, dtype=np.float64), "y": y})


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(df=_tables(), k=st.integers(2, 4), mode=st.sampled_from(["strict", "relaxed"]),
       generalization=st.sampled_from(["range", "midpoint", "mean"]))
def test_dask_equals_local_on_extreme_floats(client, df, k, mode, generalization):
    # Ranges wide enough to overflow a difference, subnormals and -0.0.
    got, expected = _both(client, df, k, npartitions=2, mode=mode,
                          generalization=generalization)
    assert got == expected
