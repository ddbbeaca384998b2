"""The local engine's result does not depend on how many threads it gets."""

from __future__ import annotations

import numba
import pytest

import dmondrian
from dmondrian import local
from dmondrian.synthetic import make_census

QIS = ["age", "zip", "birth_date", "sex", "education", "occupation", "income"]


@pytest.fixture(scope="module")
def census():
    # Above the sizes where encoding, publishing and the kernel go parallel.
    n = max(local._PARALLEL_COLUMN_ROWS, dmondrian._kernel._PARALLEL_MIN_ROWS) + 50_000
    return make_census(n, seed=11)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 numba threads")
@pytest.mark.parametrize("mode", ["strict", "relaxed"])
def test_one_thread_and_all_threads_publish_the_same_release(census, mode):
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        serial = dmondrian.anonymize(census, QIS, 7, mode=mode, class_column="cls")
    finally:
        numba.set_num_threads(before)
    parallel = dmondrian.anonymize(census, QIS, 7, mode=mode, class_column="cls")
    assert serial.equals(parallel)
    assert serial.groupby("cls").size().min() >= 7
