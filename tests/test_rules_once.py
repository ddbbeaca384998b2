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
from dmondrian._kernel.constants import FLOAT_MAX, MISSING_KEY
from dmondrian._kernel.split import column_stats_py, node_span_py, workspace
from dmondrian.encoding.qi import encode_qi
from dmondrian.errors import InfeasibleError, InvalidValueError
from dmondrian.local import kernel_rules
from dmondrian.plans import fit_plan
from dmondrian.release.row_order import takes_shuffle

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


# -- one normalized span: the kernel's (node.pxd ordered_span) and the planner's ----------

TINY = 5e-324
NAT = pd.NaT
#: (column, rows of the node, span): the edges of the rule.
EDGES = {
    "zero-width domain": (pd.Series([7.0, 7.0, 7.0]), slice(0, 3), 0.0),
    "a single value": (pd.Series([1.0, 4.0, 4.0]), slice(1, 3), 0.0),
    "only missing": (pd.Series([1.0, np.nan, np.nan]), slice(1, 3), 0.0),
    "missing mixed in": (pd.Series([1.0, 2.0, np.nan]), slice(0, 3), 1.0),
    # Infinities are refused when the column is encoded (test below); a range
    # wider than a float holds is capped at the largest float, the scale too.
    "overflowing range": (pd.Series([-1e308, 1e308, 0.0]), slice(0, 2), 1.0),
    "half the capped range": (pd.Series([-1e308, 1e308, 0.0]), slice(1, 3), 1e308 / FLOAT_MAX),
    "underflow": (pd.Series([-1e308, 1e308, 0.0, TINY]), slice(2, 4), TINY),
    "NaT only": (pd.Series(pd.to_datetime(["2020-01-01", None, None])), slice(1, 3), 0.0),
    "NaT mixed in": (pd.Series(pd.to_datetime(["2020-01-01", "2021-01-01", None])),
                     slice(0, 3), 1.0),
    "dates": (pd.Series(pd.to_datetime(["2020-01-01", "2020-01-03", "2020-01-05"])),
              slice(0, 2), 0.5),
    "ordinal": (pd.Series(pd.Categorical(["a", "b", "c"], ordered=True)), slice(1, 3), 0.5),
}


@pytest.mark.parametrize("edge", sorted(EDGES))
def test_the_span_is_one_rule_at_its_edges(edge):
    column, rows, span = EDGES[edge]
    e = encode_qi(column)
    keys = np.ascontiguousarray(e.keys[rows][None, :])
    rules = kernel_rules([e], 1)
    ws = workspace(rules.cards, (rules.ip, rules.fp, rules.q))
    n = keys.shape[1]
    lo, hi, miss = column_stats_py(keys, 0, 0, n, e.kernel_kind, e.card)
    kernel = node_span_py(keys, 0, 0, n, (lo, hi, miss), rules, ws)
    present = keys[0][keys[0] != MISSING_KEY]
    planner = e.spec.region_span(int(present.min()) if present.size else MISSING_KEY,
                                 int(present.max()) if present.size else MISSING_KEY,
                                 int((keys[0] == MISSING_KEY).sum()), None, e.scale,
                                 e.kernel_kind, e.hierarchy)
    assert kernel == planner == span, (kernel, planner)


def test_an_infinite_qi_value_never_reaches_the_span():
    with pytest.raises(InvalidValueError, match="infinite value"):
        encode_qi(pd.Series([0.0, np.inf], name="x"))
