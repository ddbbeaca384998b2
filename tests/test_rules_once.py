"""Rules stated once (issue 38): every path reaches the one statement of each.

An empty table and a table of fewer than k entities are refused with the
same message by every engine and plan; the objective and exchange choices,
the writers' ``shuffle_rows`` default and Dask's partition fusion each have
one home, which these tests hold the others to.
"""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dmondrian
from dmondrian import _kernel, distributed, options
from dmondrian._dask import exchange
from dmondrian._dask.graph import column_partitions, partitions
from dmondrian.errors import InfeasibleError
from dmondrian.plans import fit_plan
from dmondrian.row_order import takes_shuffle

EMPTY = "the table is empty: there is nothing to "


@pytest.fixture(scope="module")
def people():
    rng = np.random.default_rng(3)
    n = 40
    return pd.DataFrame({"age": rng.integers(20, 70, n), "zip": rng.integers(0, 5, n),
                         "user": np.arange(n) % 3})


def test_an_empty_table_is_refused_alike_on_every_path(people):
    empty = people.iloc[:0]
    plan = fit_plan(people, ["age", "zip"], 2)
    runs = {
        "local": (lambda: dmondrian.anonymize(empty, ["age", "zip"], 2), "anonymize"),
        "plan fit": (lambda: fit_plan(empty, ["age", "zip"], 2), "fit"),
        "plan transform": (lambda: plan.transform(empty), "anonymize"),
    }
    for where, (run, doing) in runs.items():
        with pytest.raises(InfeasibleError) as info:
            run()
        assert str(info.value) == EMPTY + doing, where


def test_fewer_entities_than_k_is_refused_alike(people):
    with pytest.raises(InfeasibleError) as info:
        dmondrian.anonymize(people, ["age", "zip"], 5, entity="user")
    assert str(info.value) == ("the table holds 3 distinct entities in 'user', fewer than "
                               "k=5: no release of it can hold k people per class")


def test_the_choices_have_one_home():
    assert _kernel.OBJECTIVES is options.OBJECTIVES
    assert exchange.EXCHANGES == (None, *options.DASK_PLAN["exchange"].choices)
    assert options.DASK_PLAN["exchange"].choices is options.EXCHANGES


def test_shuffle_rows_defaults_to_true_once():
    given = {"shuffle_rows": False, "compression": "zstd"}
    assert takes_shuffle(given) is False and given == {"compression": "zstd"}
    assert takes_shuffle({}) is True


def test_a_projected_filtered_read_keeps_the_input_partitions(tmp_path):
    """Dask's tuning fuses a projected read under a filter into fewer partitions; every
    pass reads through graph.partitions, which never does, so the passes pair up."""
    df = pd.DataFrame({"a": np.arange(4000), **{f"c{i}": np.arange(4000) for i in range(12)}})
    dd.from_pandas(df, npartitions=16).to_parquet(tmp_path / "t")
    table = dd.read_parquet(tmp_path / "t")
    filtered = table[table.a > 5]
    assert len(partitions(filtered[["a"]])) == filtered.npartitions == 16
    assert len(column_partitions(filtered, ["a"])) == 16
    assert len(partitions(filtered)) == 16


def test_the_dask_engine_refuses_an_empty_table_as_the_local_one(people, process_cluster):
    empty = dd.from_pandas(people.iloc[:0], npartitions=1)
    with pytest.raises(InfeasibleError) as info:
        distributed.anonymize(empty, ["age", "zip"], 2, client=process_cluster).compute()
    assert str(info.value) == EMPTY + "anonymize"
    # A plan fitted on Dask plans its top phase with the engine, which refuses first.
    with pytest.raises(InfeasibleError, match=EMPTY):
        fit_plan(empty, ["age", "zip"], 2, client=process_cluster)
