"""The local engine's result does not depend on how many threads it gets."""

from __future__ import annotations

import pytest

import dmondrian
from dmondrian import _kernel as K
from dmondrian import local
from dmondrian.synthetic import make_census

QIS = ["age", "zip", "birth_date", "sex", "education", "occupation", "income"]


@pytest.fixture(scope="module")
def census():
    # Above the sizes where encoding, publishing and the kernel go parallel.
    n = max(local._PARALLEL_COLUMN_ROWS, dmondrian._kernel.PARALLEL_MIN_ROWS) + 50_000
    return make_census(n, seed=11)


@pytest.mark.parametrize("mode, objective", [("strict", "balanced"), ("relaxed", "balanced"),
                                             ("strict", "dm"), ("relaxed", "dm"),
                                             ("strict", "ncp")])
def test_one_thread_and_several_threads_publish_the_same_release(census, mode, objective):
    # Four threads even on a smaller machine: OpenMP then runs several
    # threads per core, and any dependence on scheduling would show.
    with K.thread_limit(1):
        serial = dmondrian.anonymize(census, QIS, 7, mode=mode, objective=objective,
                                     class_column="cls", identifiers=["person_id"])
    with K.thread_limit(4):
        parallel = dmondrian.anonymize(census, QIS, 7, mode=mode, objective=objective,
                                       class_column="cls", identifiers=["person_id"])
    assert serial.equals(parallel)
    assert serial.groupby("cls").size().min() >= 7


def test_thread_limit_is_per_thread_and_restored():
    from concurrent.futures import ThreadPoolExecutor

    default = K.max_threads()
    with K.thread_limit(3):
        assert K.max_threads() == 3
        with ThreadPoolExecutor(1) as pool:  # another thread keeps the default
            assert pool.submit(K.max_threads).result() == default
        with K.thread_limit(None):
            assert K.max_threads() == 3
    assert K.max_threads() == default


def test_the_kernel_was_built_with_openmp():
    # A build without OpenMP is correct but serial; on these machines gcc has it.
    from dmondrian._kernel._openmp import built_with_openmp

    assert built_with_openmp()
