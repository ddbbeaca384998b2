"""entity= against plain k on event tables, side by side, local and Dask.

Run: python benchmarks/bench_entities.py [--users N ...] [--dask-users N] [--repeat R]
     [--events-per-user E] [--plan-users N] [--days D] [--workers W]
     [--memory-limit SIZE] [--out PATH]

Tables: dmondrian.synthetic_events (age and region fixed per user, device
per event, 6.62 events per user on average), QIs age, region, device, k=10.

* Local: for each ``--users`` (default 50,000: about 331k events; add
  1,000,000 for about 6.6M events; 0 skips it), ``dmondrian.anonymize`` with
  ``entity="user_id"`` and plain k on the same table
  (``identifiers=["user_id"]``: same columns out, the id dropped), runs
  interleaved, best of ``--repeat``. Reported: seconds, the ratio entity /
  plain, classes, and the share of classes under k distinct users and the
  smallest class in users (plain k's are the issue's flaw).
* Dask: ``--dask-users`` (default 200,000) on a LocalCluster of
  ``--workers`` processes with ``--memory-limit`` each,
  ``anonymize_to_parquet`` with and without entity (plain: the id dropped
  with ``identifiers``), interleaved, best of ``--repeat``; passes over the
  data of each before the shuffle. Both jobs defer their counts to the
  shuffle pass (with entity, the people of every leaf are counted there too).
  The input's rows are numbered over the whole table (its index) and both
  jobs write that index, which ties every released row to its user for the
  quality columns.

* Fitted plans (``--plan-users``, default 0: skipped; 1,000,000 with
  ``--events-per-user 10`` for the issue's 10M events): a plan fitted on
  the whole table with ``entity="user_id"`` and a plain-k one
  (``identifiers=["user_id"]``), then the whole table released through
  each, interleaved, best of ``--repeat`` (seconds of ``transform`` only;
  the fits are timed once). Then the table's events are dealt to ``--days``
  days at random (a generated, stationary table: every person's events
  spread over the days), both plans fitted again with ``batch_rows`` = a
  day's events, and days 0 and 1 released through each: the share of day
  1's rows whose published class also appears in day 0's release (and the
  same for each day anonymized on its own with ``entity``), fit_k, and the
  fewest users of a day's class.

* Fitted plans on Dask (``--plan-dask-users``, default 0: skipped): the
  events, rows shuffled so that every person has rows in many partitions,
  written as Parquet in ``--plan-dask-partitions`` files; both plans fitted
  in memory; each released through ``transform`` on ``--workers``
  processes and written to Parquet, interleaved, best of ``--repeat``; and
  the client's share: the distinct (node, person) triples the reduction
  returns.

Prints a table and writes JSON (default benchmarks/results/entities.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import dmondrian
from dmondrian.privacy.entities import distinct_per_class
from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS, events_dask, make_events

K = 10


def _people(out, users):
    people = distinct_per_class(pd.factorize(out["cls"])[0], users)
    return {"classes": int(len(people)), "min_users": int(people.min()),
            "share_under_k": round(float((people < K).mean()), 4)}


def _timed(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``'s wall seconds and result, its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        return time.perf_counter() - t, out


def local_case(n_users: int, repeat: int, per_user: float) -> dict:
    ev = make_events(n_users, seed=0, events_per_user=per_user)
    users = ev["user_id"].to_numpy()
    jobs = {"plain": {"identifiers": ["user_id"]}, "entity": {"entity": "user_id"}}
    best = {name: float("inf") for name in jobs}
    quality = {}
    for _ in range(repeat):
        for name, extra in jobs.items():
            seconds, out = _timed(dmondrian.anonymize, ev, EVENT_QUASI_IDENTIFIERS, K,
                                  class_column="cls", **extra)
            best[name] = min(best[name], seconds)
            quality[name] = _people(out, users)
    return {"engine": "local", "users": n_users, "events": len(ev), "seconds": best,
            "ratio": round(best["entity"] / best["plain"], 3), "quality": quality}


def _class_ids(out) -> np.ndarray:
    return out.groupby(EVENT_QUASI_IDENTIFIERS, observed=True, sort=False).ngroup().to_numpy()


def _fewest_users(out, users) -> int:
    return int(distinct_per_class(_class_ids(out), users).min())


def _shared(a, b) -> float:
    """Share of ``b``'s rows whose published QI combination appears in ``a``."""
    def tuples(x):
        return x[EVENT_QUASI_IDENTIFIERS].astype(str).agg("\x1f".join, axis=1)
    return float(tuples(b).isin(set(tuples(a))).mean())


def plan_case(n_users: int, repeat: int, per_user: float, days: int) -> dict:
    from dmondrian.plans import fit_plan

    ev = make_events(n_users, seed=0, events_per_user=per_user)
    users = ev["user_id"].to_numpy()
    jobs = {"plain": {"identifiers": ["user_id"]}, "entity": {"entity": "user_id"}}
    fit_s, plans = {}, {}
    for name, extra in jobs.items():
        t = time.perf_counter()
        plans[name] = fit_plan(ev, EVENT_QUASI_IDENTIFIERS, K, **extra)
        fit_s[name] = time.perf_counter() - t
    best = {name: float("inf") for name in jobs}
    fewest = {}
    for _ in range(repeat):
        for name, plan in plans.items():
            seconds, out = _timed(plan.transform, ev)
            best[name] = min(best[name], seconds)
            fewest[name] = _fewest_users(out, users)
            del out
    day = np.random.default_rng(1).integers(0, days, len(ev))
    per_day = int(round(len(ev) / days))
    batches = [ev[day == d].reset_index(drop=True) for d in (0, 1)]
    stable = {}
    for name, extra in jobs.items():
        plan = fit_plan(ev, EVENT_QUASI_IDENTIFIERS, K, batch_rows=per_day, **extra)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = [plan.transform(b) for b in batches]
        stable[name] = {"fit_k": plan.fit_k, "leaves": plan.n_leaves,
                        "shared": round(_shared(*rel), 4),
                        "fewest_users": min(_fewest_users(r, b["user_id"].to_numpy())
                                            for r, b in zip(rel, batches, strict=True))}
    alone = [dmondrian.anonymize(b, EVENT_QUASI_IDENTIFIERS, K, entity="user_id")
             for b in batches]
    return {"users": n_users, "events": len(ev), "days": days, "day_rows": per_day,
            "fit_s": fit_s, "transform_s": best,
            "ratio": round(best["entity"] / best["plain"], 3),
            "fewest_users": fewest, "days_through_plans": stable,
            "shared_alone_entity": round(_shared(*alone), 4), "load": os.getloadavg()}


def plan_dask_case(n_users: int, repeat: int, per_user: float, workers: int,
                   memory_limit: str, partitions: int) -> dict:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from dmondrian.plans import fit_plan
    from dmondrian.plans.dask import transform_dask

    tmp = Path(tempfile.mkdtemp(prefix="dm-entity-plans-"))
    try:
        ev = make_events(n_users, seed=0, events_per_user=per_user)
        ev = ev.sample(frac=1.0, random_state=2).reset_index(drop=True)
        n_events = len(ev)
        jobs = {"plain": {"identifiers": ["user_id"]}, "entity": {"entity": "user_id"}}
        plans = {name: fit_plan(ev, EVENT_QUASI_IDENTIFIERS, K, **extra)
                 for name, extra in jobs.items()}
        triples = int(len(plans["entity"].summarize(ev).people.node))
        dd.from_pandas(ev, npartitions=partitions).to_parquet(tmp / "in")
        del ev
        best = {name: float("inf") for name in jobs}
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          memory_limit=memory_limit, dashboard_address=":0") as cluster, \
                Client(cluster) as client:
            for r in range(repeat):
                for name, plan in plans.items():
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        t = time.perf_counter()
                        out = transform_dask(plan, dd.read_parquet(tmp / "in"), client=client,
                                             progress=False)
                        out.to_parquet(tmp / f"{name}{r}")
                        best[name] = min(best[name], time.perf_counter() - t)
        return {"users": n_users, "events": n_events, "partitions": partitions,
                "workers": workers, "memory_limit": memory_limit, "seconds": best,
                "ratio": round(best["entity"] / best["plain"], 3),
                "client_triples": triples, "load": os.getloadavg()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _number_rows(df, partition_info=None):
    start = (partition_info["number"] if partition_info else 0) << 32
    return df.set_axis(pd.RangeIndex(start, start + len(df), name="row"))


def dask_case(n_users: int, repeat: int, workers: int, memory_limit: str,
              per_user: float) -> dict:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from dmondrian.distributed import anonymize_to_parquet

    tmp = Path(tempfile.mkdtemp(prefix="dm-entities-"))
    try:
        src = events_dask(n_users, seed=0, users_per_partition=50_000,
                          events_per_user=per_user)
        # Rows numbered over the whole table: the written index ties each
        # released row to its user (the writers shuffle each file's rows).
        src.map_partitions(_number_rows, meta=_number_rows(src._meta)).to_parquet(tmp / "in")
        ddf = dd.read_parquet(tmp / "in")
        jobs = {"plain": {"identifiers": ["user_id"]}, "entity": {"entity": "user_id"}}
        best = {name: float("inf") for name in jobs}
        passes, quality = {}, {}
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          memory_limit=memory_limit, dashboard_address=":0") as cluster, \
                Client(cluster) as client:
            for _ in range(repeat):
                for name, extra in jobs.items():
                    shutil.rmtree(tmp / name, ignore_errors=True)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        t = time.perf_counter()
                        top = anonymize_to_parquet(ddf, str(tmp / name),
                                                   EVENT_QUASI_IDENTIFIERS, K,
                                                   class_column="cls", client=client,
                                                   progress=False,
                                                   write_options={"write_index": True},
                                                   **extra)
                        best[name] = min(best[name], time.perf_counter() - t)
                    passes[name] = top.passes
        users = pd.read_parquet(tmp / "in", columns=["user_id"])["user_id"]
        for name in jobs:
            out = pd.read_parquet(tmp / name, columns=["cls"])
            quality[name] = _people(out, users.loc[out.index].to_numpy())
        return {"engine": "dask", "users": n_users, "events": int(len(users)),
                "written_index": True,
                "workers": workers, "memory_limit": memory_limit, "seconds": best,
                "passes": passes, "ratio": round(best["entity"] / best["plain"], 3),
                "quality": quality}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[50_000])
    parser.add_argument("--dask-users", type=int, default=200_000,
                        help="0 skips the Dask case")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--events-per-user", type=float, default=6.62,
                        help="mean events per user (10 for the issue's 10M events / 1M users)")
    parser.add_argument("--plan-users", type=int, default=0,
                        help="users of the fitted-plan case (0 skips it)")
    parser.add_argument("--plan-dask-users", type=int, default=0,
                        help="users of the fitted-plan case on Dask (0 skips it)")
    parser.add_argument("--plan-dask-partitions", type=int, default=10)
    parser.add_argument("--days", type=int, default=30,
                        help="days the plan case's events are dealt to")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="2GB")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" /
                                             "entities.json"))
    args = parser.parse_args(argv)
    results = [local_case(n, args.repeat, args.events_per_user) for n in args.users if n]
    if args.dask_users:
        results.append(dask_case(args.dask_users, args.repeat, args.workers,
                                 args.memory_limit, args.events_per_user))
    print(f"{'engine':<6} {'users':>9} {'events':>10} {'plain s':>8} {'entity s':>9} "
          f"{'ratio':>6} {'plain <k':>9} {'plain min':>9} {'entity min':>10}")
    for r in results:
        q = r["quality"]
        print(f"{r['engine']:<6} {r['users']:>9,} {r['events']:>10,} "
              f"{r['seconds']['plain']:>8.2f} {r['seconds']['entity']:>9.2f} "
              f"{r['ratio']:>6.2f} {q['plain']['share_under_k']:>9.1%} "
              f"{q['plain']['min_users']:>9} {q['entity']['min_users']:>10}")
    plans = [plan_case(args.plan_users, args.repeat, args.events_per_user, args.days)
             ] if args.plan_users else []
    if plans:
        print(f"\nfitted plans: {'users':>9} {'events':>10} {'fit plain':>9} {'fit ent':>8} "
              f"{'tr plain':>8} {'tr ent':>7} {'ratio':>6} {'min users p/e':>13} "
              f"{'day shared p/e/alone':>22} {'fit_k p/e':>10}")
        for r in plans:
            d = r["days_through_plans"]
            print(f"{'':13} {r['users']:>9,} {r['events']:>10,} {r['fit_s']['plain']:>9.2f} "
                  f"{r['fit_s']['entity']:>8.2f} {r['transform_s']['plain']:>8.2f} "
                  f"{r['transform_s']['entity']:>7.2f} {r['ratio']:>6.2f} "
                  f"{d['plain']['fewest_users']:>6}/{d['entity']['fewest_users']:<6} "
                  f"{d['plain']['shared']:>6.1%}/{d['entity']['shared']:.1%}/"
                  f"{r['shared_alone_entity']:.1%} "
                  f"{d['plain']['fit_k']:>4}/{d['entity']['fit_k']:<5}")
    if args.plan_dask_users:
        r = plan_dask_case(args.plan_dask_users, args.repeat, args.events_per_user,
                           args.workers, args.memory_limit, args.plan_dask_partitions)
        plans.append({"engine": "dask", **r})
        print(f"\nplans on Dask: {r['events']:,} events, {r['partitions']} partitions: plain "
              f"{r['seconds']['plain']:.2f} s, entity {r['seconds']['entity']:.2f} s, ratio "
              f"{r['ratio']:.2f}; {r['client_triples']:,} (node, person) triples")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "k": K,
                               "qis": EVENT_QUASI_IDENTIFIERS, "results": results,
                               "plans": plans}, indent=1,
                              default=lambda x: x.item() if isinstance(x, np.generic) else x))
    print("wrote", out)


if __name__ == "__main__":
    main()
