"""The manifest's report from the write tasks' counts equals the report of the release read back.

:class:`dmondrian.metrics.accumulator.ReleaseCounts` merges partials by class key, so
any split of a release into partitions gives the report of the whole
(Hypothesis); on a real two-process cluster, for several option sets,
``anonymize_to_parquet``'s counts give what ``dmondrian.report`` gives for the
release read back and the original; the CLI's ``--distributed`` manifest is
built without reading either again.
"""

from __future__ import annotations

import json

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed_helpers import JOB_HIERARCHY, MIXED_QIS, make_census, mixed_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian.distributed import anonymize_to_parquet
from dmondrian.evaluation.reporting import counted_report, report
from dmondrian.metrics import compute_domains
from dmondrian.metrics.accumulator import ReleaseCounts

CENSUS_QIS = ["age", "zip", "birth_date", "sex"]


def assert_same(got, want, path="report"):
    """Equal nested dicts, floats within rounding."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (path, got, want)
        for key in want:
            assert_same(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (path, got, want)
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12, nan_ok=True), (path, got, want)
    else:
        assert got == want, (path, got, want)


def test_merge_sums_a_class_split_over_partitions():
    a = ReleaseCounts(["q"], "s").add(pd.DataFrame({"q": pd.Categorical(["x", "x", "y"]),
                                                    "s": ["a", "b", "a"]}))
    b = ReleaseCounts(["q"], "s").add(pd.DataFrame({"q": pd.Categorical(["y", "x"]),
                                                    "s": ["a", "a"]}))
    merged = a.merge(b)
    assert merged.rows == 5
    assert sorted(merged.class_sizes().tolist()) == [2, 3]
    assert merged.label_counts("q").to_dict() == {"x": 3, "y": 2}
    (distinct, _, _), distance = merged.sensitive_stats(pd.Series([], dtype=object))
    assert (distinct, distance) == (1, "equal")  # class y holds "a" twice, in two partitions


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(20, 120), k=st.integers(2, 6), seed=st.integers(0, 10_000),
       cuts=st.lists(st.floats(0, 1), max_size=5), sensitive=st.booleans(),
       suppression=st.sampled_from([None, "mask", "drop"]))
def test_any_split_of_a_release_gives_its_report(n, k, seed, cuts, sensitive, suppression):
    df = mixed_table(n, seed)
    df["diag"] = np.random.default_rng(seed).choice(["flu", "cold", "acne", None], n)
    options = {"hierarchies": {"job": JOB_HIERARCHY}, "allow_unique": ["payload"]}
    if sensitive:
        options.update(sensitive="diag", t=1.0)
    if suppression:
        options.update(suppression=0.05, suppressed=suppression)
    released = dmondrian.anonymize(df, MIXED_QIS, k, **options)
    bounds = sorted({0, len(released), *(int(c * len(released)) for c in cuts)})
    parts = [ReleaseCounts(MIXED_QIS, "diag" if sensitive else None).add(released.iloc[a:b])
             for a, b in zip(bounds[:-1], bounds[1:], strict=False)]
    # Merged in a tree, as the partials of the write tasks are.
    while len(parts) > 1:
        parts = [parts[i].merge(*parts[i + 1:i + 2]) for i in range(0, len(parts), 2)]
    domains = compute_domains(df, MIXED_QIS, options["hierarchies"])
    got = counted_report(parts[0], MIXED_QIS, domains, len(df), k=k,
                         sensitive_meta=df["diag"].iloc[:0] if sensitive else None)
    want = report(released, MIXED_QIS, original=df, sensitive="diag" if sensitive else None,
                  k=k, hierarchies=options["hierarchies"], allow_unique=["payload", "diag"])
    assert_same(got.to_dict(), want.to_dict())
    assert got.privacy.k >= k or got.n_records == 0


CASES = {
    "k only": (CENSUS_QIS, {}),
    "sensitive l": (CENSUS_QIS, {"sensitive": "diagnosis", "l": 2}),
    "sensitive t, ordered": (CENSUS_QIS, {"sensitive": "income", "t": 0.9}),
    "suppression drop": (CENSUS_QIS, {"suppression": 0.02, "suppressed": "drop"}),
    "suppression mask": (CENSUS_QIS, {"suppression": 0.02}),
    "entity": (CENSUS_QIS, {"entity": "person_id"}),
    "noise": (CENSUS_QIS, {"noise": {"income": {"epsilon": 1.0, "bounds": (0, 300_000)}}}),
    "keys exchange": (CENSUS_QIS, {"exchange": "keys", "sensitive": "diagnosis", "l": 2}),
    "every kind, hierarchy": (MIXED_QIS, {"hierarchies": {"job": JOB_HIERARCHY}}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_write_tasks_count_what_report_reads_back(case, process_cluster, tmp_path):
    qis, options = CASES[case]
    df = (mixed_table(30_000, 3) if qis is MIXED_QIS else make_census(30_000, 5))
    ddf = dd.from_pandas(df, npartitions=5)
    allow = [c for c in ("person_id", "payload") if c in df and options.get("entity") != c]
    sensitive = options.get("sensitive")
    out = tmp_path / "release"
    top = anonymize_to_parquet(
        ddf, out, qis, 10, client=process_cluster, allow_unique=allow or None,
        _measure=ReleaseCounts(qis, sensitive), **options)
    from dmondrian._dask.global_domain import ncp_domains

    got = counted_report(top.measured, qis, ncp_domains(top.domain, top.encodings),
                         top.domain.n_rows, k=10,
                         sensitive_meta=ddf._meta[sensitive] if sensitive else None,
                         identifying_columns=top.identifying, noise=options.get("noise"))
    back = dd.read_parquet(out)
    with dask_on(process_cluster):
        want = report(back, qis, original=ddf, sensitive=sensitive, k=10,
                      hierarchies=options.get("hierarchies"), noise=options.get("noise"),
                      allow_unique=[*allow, *([options["entity"]] if "entity" in options
                                              else [])])
    assert_same(got.to_dict(), want.to_dict())
    assert got.privacy.k >= 10
    if "suppressed" in options:
        assert got.suppressed.dropped > 0 and got.ncp_released is not None


def dask_on(client):
    import dask

    return dask.config.set(scheduler=client.get)


def test_cli_manifest_on_dask_reads_nothing_back(process_cluster, tmp_path, monkeypatch):
    from dmondrian.cli import _anonymize_dask, main

    df = make_census(20_000, 9)
    src = tmp_path / "in"
    dd.from_pandas(df, npartitions=4).to_parquet(src, write_index=False)

    def refuse(job):
        raise AssertionError("the release was read back for its manifest")

    monkeypatch.setattr(_anonymize_dask, "_read_back", refuse)
    out = tmp_path / "out"
    code = main(["anonymize", str(src), str(out), "--output-format", "parquet", "--distributed",
                 "--scheduler", process_cluster.scheduler.address, "--k", "10",
                 "--qi", ",".join(CENSUS_QIS), "--sensitive", "diagnosis", "--l", "2",
                 "--allow-unique", "person_id", "--no-progress"])
    assert code == 0
    metrics = json.loads((tmp_path / "out.manifest.json").read_text())["metrics"]
    with dask_on(process_cluster):
        want = report(dd.read_parquet(out), CENSUS_QIS, original=dd.read_parquet(src),
                      sensitive="diagnosis", k=10, allow_unique=["person_id"])
    assert_same(metrics, json.loads(want.to_json()))
    assert metrics["achieved"]["l_distinct"] >= 2 and metrics["rows"] == len(df)
    assert np.isfinite(metrics["ncp"]["overall"])


def test_plan_write_tasks_count_what_report_reads_back(process_cluster, tmp_path):
    """A fitted plan's release on Dask: the write tasks' counts and the counting pass's
    domains give the report of the release read back, for every QI kind (a hierarchy,
    an ordinal, dates, floats with missing values) and values the fit never saw."""
    from dmondrian.metrics.accumulator import InputDomains
    from dmondrian.metrics.domains import column_kinds
    from dmondrian.plans import fit_plan
    from dmondrian.plans.dask import transform_to_parquet

    hierarchies = {"job": JOB_HIERARCHY}
    plan = fit_plan(mixed_table(3_000, 1), MIXED_QIS, 10, hierarchies=hierarchies,
                    allow_unique=["payload"])
    new = mixed_table(20_000, 2)
    new.loc[::97, "income"] = 50.0  # beyond the fitted range
    new.loc[::89, "color"] = "mauve"  # a value the fit never saw
    ddf = dd.from_pandas(new, npartitions=5)
    out = tmp_path / "release"
    written, counts, domains = transform_to_parquet(
        plan, ddf, out, client=process_cluster,
        _measure=(ReleaseCounts(MIXED_QIS), InputDomains(column_kinds(ddf, MIXED_QIS,
                                                                      hierarchies, {}))))
    got = counted_report(counts, MIXED_QIS, domains.domains(ddf._meta, hierarchies), written,
                         k=10)
    with dask_on(process_cluster):
        want = report(dd.read_parquet(out), MIXED_QIS, original=ddf, k=10,
                      hierarchies=hierarchies, allow_unique=["payload"])
    assert_same(got.to_dict(), want.to_dict())
    assert written == len(new) and got.privacy.k >= 10 and got.ncp.overall > 0


def test_cli_plan_manifest_on_dask_reads_nothing_back(process_cluster, tmp_path, monkeypatch):
    """``--plan --distributed``: the manifest from the counts, equal to the report of the
    release read back, which it never reads."""
    from dmondrian.cli import _anonymize_dask, main
    from dmondrian.plans import fit_plan, save_plan

    save_plan(fit_plan(make_census(5_000, 8), CENSUS_QIS, 10, sensitive="diagnosis", l=2,
                       allow_unique=["person_id"]),
              tmp_path / "plan.json")
    src = tmp_path / "in"
    dd.from_pandas(make_census(20_000, 9), npartitions=4).to_parquet(src, write_index=False)

    def refuse(job):
        raise AssertionError("the release was read back for its manifest")

    monkeypatch.setattr(_anonymize_dask, "_read_back", refuse)
    out = tmp_path / "out"
    assert main(["anonymize", str(src), str(out), "--output-format", "parquet",
                 "--distributed", "--scheduler", process_cluster.scheduler.address,
                 "--plan", str(tmp_path / "plan.json"), "--sensitive", "diagnosis",
                 "--no-progress"]) == 0
    metrics = json.loads((tmp_path / "out.manifest.json").read_text())["metrics"]
    with dask_on(process_cluster):
        want = report(dd.read_parquet(out), CENSUS_QIS, original=dd.read_parquet(src),
                      sensitive="diagnosis", k=10, allow_unique=["person_id"])
    assert_same(metrics, json.loads(want.to_json()))
    assert metrics["achieved"]["l_distinct"] >= 2 and metrics["rows"] == 20_000


def _one_by_one(labels, domain):
    from dmondrian.metrics.certainty_penalty import label_cost

    return np.array([label_cost(v, domain) for v in labels])


@settings(max_examples=60, deadline=None)
@given(bounds=st.lists(st.tuples(st.one_of(st.integers(-10**12, 10**12),
                                           st.floats(-1e300, 1e300, allow_nan=False)),
                                 st.one_of(st.integers(-10**12, 10**12),
                                           st.floats(-1e300, 1e300, allow_nan=False)),
                                 st.sampled_from(["range", "single", "or_na", "na", "*", None])),
                       min_size=1, max_size=30),
       scale=st.sampled_from([0.0, 1.0, 7.5, 1e300]))
def test_numbers_priced_in_bulk_as_one_by_one(bounds, scale):
    from dmondrian.kinds import Domain
    from dmondrian.metrics.certainty_penalty import label_costs

    labels = []
    for lo, hi, shape in bounds:
        lo, hi = sorted((lo, hi))
        text = {"range": f"[{lo!r}, {hi!r}]", "single": repr(lo),
                "or_na": f"[{lo!r}, {hi!r}] or <NA>", "na": "<NA>", "*": "*", None: None}[shape]
        labels.append(text)
    domain = Domain("numeric", scale)
    np.testing.assert_array_equal(label_costs(labels, domain), _one_by_one(labels, domain))


@settings(max_examples=40, deadline=None)
@given(days=st.lists(st.tuples(st.integers(-20_000, 40_000), st.integers(0, 5_000),
                               st.integers(0, 86_399), st.booleans()), min_size=1, max_size=20))
def test_dates_priced_in_bulk_as_one_by_one(days):
    from dmondrian.kinds import Domain
    from dmondrian.metrics.certainty_penalty import label_costs

    base = pd.Timestamp("1970-01-01")
    labels = []
    for start, width, seconds, timed in days:
        lo = base + pd.Timedelta(days=start, seconds=seconds if timed else 0)
        hi = lo + pd.Timedelta(days=width)
        labels.append(f"[{lo}, {hi}]" if width else str(lo))
    domain = Domain("datetime", float(pd.Timedelta(days=50_000).value))
    np.testing.assert_array_equal(label_costs(labels, domain), _one_by_one(labels, domain))
