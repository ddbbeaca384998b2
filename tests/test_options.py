"""Every option's range, stated once in dmondrian.options, holds on every entry point.

One parametrized test, driven by the option table: for each option with a
:class:`~dmondrian.options.Range` (and ``k``), the values just outside it are
refused with the same :class:`~dmondrian.errors.ParameterError` by the local
engine, the Dask engine, the estimator, :func:`dmondrian.verify` (for the
options it takes) and the command line's flag, and the values on its edges
are accepted by each. Then the three disagreements of issue 38 and the one
rule of which options a fitted plan refuses.
"""

from __future__ import annotations

import inspect
import math
import numbers
import re

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from cli_helpers import in_process

import dmondrian
from dmondrian import distributed
from dmondrian.cli import UsageError, build_parser
from dmondrian.errors import ParameterError
from dmondrian.options import ANONYMIZE, DASK_PLAN, PLAN_KEEPS, K, plan_fit_options
from dmondrian.plans import fit_plan

RANGED = [K] + [o for group in (ANONYMIZE, DASK_PLAN) for o in group.values()
                if o.range is not None]

#: What an option needs beside itself to be read at all (l and t need the
#: sensitive column; c needs recursive l).
CONTEXT = {
    "l": {"sensitive": "s", "l_kind": "entropy"},
    "c": {"sensitive": "s", "l": 1, "l_kind": "recursive"},
    "t": {"sensitive": "s"},
    "max_contributions": {"entity": "e"},
    "max_classes": {"entity": "e"},
    "refine_rows": {"refine": "local"},
}
#: The k an option is run with, when 2 would refuse its range's edge (refine_rows >= 2k).
K_OF = {"refine_rows": 1}

#: The command line's flag of an option, when it differs from the option's name.
FLAGS = {"random_state": "--seed"}


def outside(r) -> list:
    """Values just outside a range, and values of the wrong type."""
    step = 1 if r.type is numbers.Integral else 0.5
    values = [True, "1"]
    if r.low is not None:
        values.append(r.low if r.closed in ("right", "neither") else r.low - step)
    if r.high is not None:
        values.append(r.high if r.closed in ("left", "neither") else r.high + step)
    values += [1.5] if r.type is numbers.Integral else [math.nan, math.inf]
    return values


def inside(r) -> list:
    """Values on a range's edges, or just inside an open one."""
    step = 1 if r.type is numbers.Integral else 0.5
    values = []
    if r.low is not None:
        values.append(r.low if r.closed in ("both", "left") else r.low + step)
    if r.high is not None:
        values.append(r.high if r.closed in ("both", "right") else r.high - step)
    return values


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 60
    return pd.DataFrame({"a": rng.integers(0, 50, n), "b": rng.integers(0, 9, n),
                         "s": rng.integers(0, 4, n), "e": np.arange(n) % 30})


def _entry_points(option, value, table):
    """``{entry point: callable}`` running each with the option set to ``value``."""
    name = option.name
    context = dict(CONTEXT.get(name, {}))
    if name == "k":
        kwargs, k = {}, value
    else:
        kwargs, k = {**context, name: value}, K_OF.get(name, 2)
    runs = {}
    if name in ANONYMIZE or name == "k":
        runs["local"] = lambda: dmondrian.anonymize(table, ["a", "b"], k, **kwargs)
        runs["estimator"] = lambda: dmondrian.MondrianAnonymizer(
            k=k, quasi_id=["a", "b"], **kwargs).fit(table)
    # The Dask engine checks every option before it looks for a cluster.
    runs["dask"] = lambda: distributed.anonymize(dd.from_pandas(table, npartitions=2),
                                                 ["a", "b"], k, **kwargs)
    if name in inspect.signature(dmondrian.verify).parameters:
        released = table.assign(a=table["a"] // 10)
        verify_kwargs = {key: v for key, v in kwargs.items() if key != "entity"}
        runs["verify"] = lambda: dmondrian.verify(released, ["a", "b"], k=k if name == "k"
                                                  else None if "l" in verify_kwargs
                                                  or "t" in verify_kwargs else 2,
                                                  **verify_kwargs)
    return runs


def _parse_flag(option, text):
    flag = FLAGS.get(option.name, f"--{option.name.replace('_', '-')}")
    return build_parser().parse_args(["anonymize", "in.csv", "out.csv", "--qi", "a",
                                      flag, text] + ([] if option.name == "k"
                                                     else ["--k", "2"]))


@pytest.mark.parametrize("option", RANGED, ids=lambda o: o.name)
def test_every_entry_point_refuses_what_the_option_refuses(option, table):
    for value in outside(option.range):
        expected = f"{option.name} must be {option.describe()}, got {value!r}"
        for where, run in _entry_points(option, value, table).items():
            with pytest.raises(ParameterError) as info:
                run()
            assert str(info.value) == expected, (where, value)
            assert info.value.parameter == option.name
        if isinstance(value, (bool, str)):
            continue  # a command line holds text: "True" and "1" are other cases
        flag = FLAGS.get(option.name, f"--{option.name.replace('_', '-')}")
        with pytest.raises(UsageError, match=re.escape(f"{flag} must be {option.range}")):
            _parse_flag(option, str(value))


@pytest.mark.parametrize("option", RANGED, ids=lambda o: o.name)
def test_every_entry_point_takes_what_the_option_takes(option, table):
    for value in inside(option.range):
        assert option.check(value) == value
        args = _parse_flag(option, str(value))
        assert getattr(args, option.name) == value and type(getattr(args, option.name)) in (
            int, float)
        for where, run in _entry_points(option, value, table).items():
            if where == "dask":
                continue  # past the checks it would start a cluster
            try:
                run()
            except ParameterError as exc:  # another option's rule is no failure of this one
                assert exc.parameter != option.name, (where, value, exc)
            except dmondrian.errors.InfeasibleError:
                pass  # the table cannot meet the value: a property of the table


def test_c_zero_is_a_parameter_error_everywhere(table):
    """Issue 38: c=0 gave InfeasibleError from anonymize but ParameterError from verify."""
    kw = {"l": 2, "l_kind": "recursive", "c": 0, "sensitive": "s"}
    with pytest.raises(ParameterError, match="c must be"):
        dmondrian.anonymize(table, ["a", "b"], 2, **kw)
    with pytest.raises(ParameterError, match="c must be"):
        dmondrian.verify(table, ["a", "b"], **kw)


def test_entropy_l_takes_a_fraction_on_the_command_line(tmp_path):
    """Issue 38: l=1.5 with entropy l-diversity worked in the API, not on the command line."""
    rng = np.random.default_rng(1)
    pd.DataFrame({"age": rng.integers(20, 70, 400), "s": rng.integers(0, 6, 400)}).to_csv(
        tmp_path / "in.csv", index=False)
    done = in_process("anonymize", "in.csv", "out.csv", "--k", "5", "--qi", "age",
                      "--sensitive", "s", "--l", "1.5", "--l-kind", "entropy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    check = in_process("verify", "out.csv", "--qi", "age", "--k", "5", "--sensitive", "s",
                       "--l", "1.5", "--l-kind", "entropy", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    refused = in_process("anonymize", "in.csv", "out2.csv", "--k", "5", "--qi", "age",
                         "--sensitive", "s", "--l", "1.5", cwd=tmp_path)
    assert refused.returncode == 2
    assert "distinct l-diversity needs a whole number l, got 1.5" in refused.stderr


def test_whole_l_is_the_same_as_a_float_or_an_int(table):
    a = dmondrian.anonymize(table, ["a", "b"], 2, l=2, sensitive="s")
    b = dmondrian.anonymize(table, ["a", "b"], 2, l=2.0, sensitive="s")
    pd.testing.assert_frame_equal(a, b)


# -- which options a fitted plan refuses: one statement, every path ----------------------

REFUSED = {"suppression": 0.1, "suppressed": "drop", "constraints": [object()], "refine": "local",
           "refine_rows": 4, "noise": {"s": {"epsilon": 1.0, "bounds": (0, 3)}}, "random_state": 0,
           "max_contributions": 2, "max_classes": 2}


def test_the_table_says_what_a_plan_keeps():
    assert set(REFUSED) == {n for n, o in ANONYMIZE.items() if o.plan in ("refuse", "release")}
    assert {n for n, o in ANONYMIZE.items() if o.plan == "fit"} == {"hierarchies", "qi_kinds"}
    assert set(PLAN_KEEPS) | set(REFUSED) | {"hierarchies", "qi_kinds"} == set(ANONYMIZE)
    # Not asking for anything is no refusal.
    assert plan_fit_options({n: ANONYMIZE[n].default for n in REFUSED}) == {}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_plan_refuses_the_same_options_in_memory_and_on_dask(name, table):
    value = REFUSED[name]
    for df in (table, dd.from_pandas(table, npartitions=2)):
        with pytest.raises(ParameterError, match=f"a fitted plan does not take '{name}'"):
            fit_plan(df, ["a", "b"], 2, **{name: value})


@pytest.mark.parametrize("name", sorted(n for n in REFUSED if ANONYMIZE[n].plan == "refuse"))
def test_the_estimator_goes_without_a_plan_for_a_refused_option(name, table):
    value = {"constraints": [dmondrian.privacy.constraints.KAnonymity(3)]}.get(name, REFUSED[name])
    est = dmondrian.MondrianAnonymizer(k=2, quasi_id=["a", "b"], **CONTEXT.get(name, {}),
                                       **{name: value}).fit(table)
    assert est.plan_ is None and est.unplanned_[0] in (name, *CONTEXT.get(name, {}))
