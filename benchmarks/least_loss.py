"""Issue 39's table: GCP on Adult against the clustering algorithms, with time.

Run: python benchmarks/least_loss.py [--repeat R] [--refine-rows default,2048,all]
     [--ks 2,5,10] [--skip-grid] [--dask] [--census 1000000,...] [--skip-adult]
     [--out PATH]

Adult (30,162 rows, the 8 literature QIs; ``$DMONDRIAN_ADULT_DIR``), k in
{2, 5, 10, 50, 100}. GCP (%) as issue 39 defines it: from the original
values grouped by class (``class_column``), a numeric QI's class range over
the column's range, a nominal QI's (distinct - 1) / (domain - 1), averaged
over rows and QIs. The peers' rows are the issue's fixed figures; ours are
every ``mode`` x ``objective`` x ``refine`` (best per k, and per refine),
each a whole ``dmondrian.anonymize`` call, timed in CPU seconds (the
machine is shared; best of ``--repeat``).
``--refine-rows`` also measures ``refine="local"`` at other block sizes (the
refinement's time/loss dial, the ``refine_rows`` option: ``default`` for
None, a number of rows, or ``all``) with mode="relaxed", objective="ncp",
each run in a fresh process for its peak resident memory; ``--ks`` restricts
the k of every part, ``--skip-grid`` leaves out the mode x objective x
refine grid. ``--dask`` runs refine="local" on the Dask
engine (a LocalCluster of 2 worker processes, ``npartitions=6``,
``leaf_rows=2000``) against the local engine. ``--census 1000000,...`` times
k=10 on :func:`dmondrian.synthetic.make_census` (seed 8; QIs age, zip,
birth_date, sex, education) for "balanced", relaxed "ncp" and relaxed "ncp"
with refine="local", side by side, in CPU seconds (``--skip-adult`` for these
parts alone).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

import dmondrian
from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS as ADULT_QIS
from dmondrian.datasets import load_adult
from dmondrian.options import MODES, OBJECTIVES, REFINES
from dmondrian.synthetic import make_census

KS = (2, 5, 10, 50, 100)
#: Issue 39's table: the peers under the same metric (fixed figures).
PEERS = {
    "greedy k-member clustering (Byun et al. 2007), O(n^2), 16-22 s":
        (0.56, 1.93, 3.69, 11.75, 17.06),
    "k-member with move/swap refinement between clusters, 1-16 min":
        (0.54, 1.85, 3.55, 11.11, 16.03),
    "Mondrian down to blocks of < 4,000 rows, then k-member inside each block, 2-4 s":
        (0.63, 2.17, 4.12, 12.44, 17.72),
}


def gcp(adult: pd.DataFrame, class_of_row: np.ndarray) -> float:
    """Issue 39's GCP (%) of the classes ``class_of_row`` over ``adult``'s QIs."""
    total = 0.0
    for q in ADULT_QIS:
        col = adult[q].reset_index(drop=True)
        groups = col.groupby(class_of_row)
        if pd.api.types.is_numeric_dtype(col):
            spans = (groups.transform("max") - groups.transform("min")) / (col.max() - col.min())
        else:
            spans = (groups.transform("nunique") - 1) / (col.nunique() - 1)
        total += float(spans.mean())
    return 100 * total / len(ADULT_QIS)


def measure(adult, k, repeat, **options) -> dict:
    seconds, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        out = dmondrian.anonymize(adult, ADULT_QIS, k, class_column="_cls", **options)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    cls = out["_cls"].to_numpy()
    assert np.bincount(cls).min() >= k
    return {"gcp": gcp(adult, cls), "seconds": min(seconds), "cpu": min(cpu),
            "classes": int(cls.max() + 1)}


def _dial_run(k: int, refine_rows) -> dict:
    """One refine_rows run in this (fresh) process: measure's figures and the peak RSS."""
    adult = load_adult(download=False)
    options = dict(mode="relaxed", objective="ncp", refine="local")
    measure(adult.head(500), 2, 1, **options)  # warm: imports and first-call costs
    out = measure(adult, k, 1, refine_rows=refine_rows, **options)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def refine_rows_dial(values, ks) -> dict:
    """``{"ROWS/k": figures}`` of relaxed "ncp", refine="local" at each refine_rows value."""
    dial = {}
    for text, k in itertools.product(values, ks):
        rows = None if text == "default" else text if text == "all" else int(text)
        # A process per run: ru_maxrss is the peak of the process's whole life.
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            dial[f"{text}/{k}"] = r = pool.submit(_dial_run, k, rows).result()
        print(f"  refine_rows={text:8s} k={k:<4d} GCP {r['gcp']:6.3f} %  CPU {r['cpu']:7.2f} s"
              f"  peak RSS {r['peak_rss_mb']:.0f} MB", flush=True)
    return dial


def dask_agreement(adult) -> dict:
    """refine="local" on the Dask engine (npartitions=6, leaf_rows=2000) against local."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    out = {}
    ddf = dd.from_pandas(adult, npartitions=6)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster):
        for k in KS:
            dist = dmondrian.anonymize(ddf, ADULT_QIS, k, mode="relaxed", objective="ncp",
                                       refine="local", class_column="_cls",
                                       leaf_rows=2000).compute().loc[adult.index]
            local_gcp = measure(adult, k, 1, mode="relaxed", objective="ncp",
                                refine="local")["gcp"]
            cls = dist["_cls"].to_numpy()  # Dask's class ids are leaf * 2**32 + rank
            assert pd.Series(cls).value_counts().min() >= k
            out[k] = {"local": local_gcp, "dask": gcp(adult, cls)}
            print(f"  dask k={k}: GCP {out[k]['dask']:.2f} % against local "
                  f"{local_gcp:.2f} % ({out[k]['dask'] / local_gcp - 1:+.2%})", flush=True)
    return out


CENSUS_QIS = ["age", "zip", "birth_date", "sex", "education"]
CENSUS_RUNS = {"balanced": {}, "ncp, relaxed": {"mode": "relaxed", "objective": "ncp"},
               "ncp, relaxed, refine": {"mode": "relaxed", "objective": "ncp",
                                        "refine": "local"}}


def census_speed(sizes) -> dict:
    """CPU seconds of k=10 on make_census(n, seed=8), the runs side by side."""
    out = {}
    for n in sizes:
        df = make_census(n, seed=8)
        out[n] = {}
        for name, options in CENSUS_RUNS.items():
            start = time.process_time()
            dmondrian.anonymize(df, CENSUS_QIS, 10, identifiers=["person_id"], **options)
            out[n][name] = time.process_time() - start
        print(f"  census {n:,} rows, k=10, CPU s: " + ", ".join(
            f"{name} {t:.2f} (x{t / out[n]['balanced']:.2f})" for name, t in out[n].items()),
            flush=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--refine-rows", default="",
                        help="refine_rows values for refine='local' (default, N rows, all)")
    parser.add_argument("--ks", default=",".join(map(str, KS)), help="the k measured")
    parser.add_argument("--skip-grid", action="store_true",
                        help="leave out the mode x objective x refine grid")
    parser.add_argument("--census", default="",
                        help="census sizes (e.g. 1000000,10000000) for the speed ratio")
    parser.add_argument("--skip-adult", action="store_true")
    parser.add_argument("--dask", action="store_true",
                        help="also refine='local' on the Dask engine (2 worker processes)")
    parser.add_argument("--out", default="benchmarks/least_loss.json")
    args = parser.parse_args(argv)
    census = census_speed([int(n) for n in args.census.split(",") if n])
    if args.skip_adult:
        dask = dask_agreement(load_adult(download=False)) if args.dask else {}
        Path(args.out).write_text(json.dumps({"census": census, "dask": dask}, indent=1) + "\n")
        return 0
    adult = load_adult(download=False)
    ks = [int(k) for k in args.ks.split(",")]
    rows = {}
    grid = [] if args.skip_grid else itertools.product(ks, MODES, OBJECTIVES, REFINES)
    for k, mode, objective, refine in grid:
        key = f"{mode}/{objective}/{refine}/{k}"
        rows[key] = measure(adult, k, args.repeat, mode=mode, objective=objective,
                            refine=refine)
        print(f"  {key:28s} GCP {rows[key]['gcp']:6.2f} %  {rows[key]['seconds']:.3f} s "
              f"(CPU {rows[key]['cpu']:.3f} s)", flush=True)
    values = [v for v in args.refine_rows.split(",") if v]
    dial = refine_rows_dial(values, ks)

    def best(refines):
        out = {}
        for k in ks if rows else ():
            keys = [f"{m}/{o}/{r}/{k}" for m in MODES for o in OBJECTIVES for r in refines]
            key = min(keys, key=lambda x: rows[x]["gcp"])
            out[k] = (key, rows[key])
        return out

    lines = ["| k | " + " | ".join(str(k) for k in ks) + " |", "|---" * (len(ks) + 1) + "|"]
    for label, figures in PEERS.items():
        lines.append(f"| {label} | " + " | ".join(f"{figures[KS.index(k)]:.2f}" for k in ks)
                     + " |")
    for label, refines in (('dmondrian, refine="none"', ("none",)),
                           ('dmondrian, best option (refine="local" included)', REFINES)):
        b = best(refines)
        if b:
            lines.append(f"| {label} | " + " | ".join(
                f"{b[k][1]['gcp']:.2f} ({b[k][1]['cpu']:.2f} s)" for k in ks) + " |")
    for text in values:
        lines.append(f'| refine="local", refine_rows={text}, relaxed/ncp | ' + " | ".join(
            f"{dial[f'{text}/{k}']['gcp']:.2f} ({dial[f'{text}/{k}']['cpu']:.2f} s, "
            f"{dial[f'{text}/{k}']['peak_rss_mb']:.0f} MB)" for k in ks) + " |")
    print("\nAdult, 8 QIs, GCP % (CPU seconds of the whole anonymize call, best of repeats;"
          " refine_rows rows: one run, peak RSS of its process)")
    print("\n".join(lines))
    best_all = best(REFINES)
    if best_all:
        print("best option per k: " + ", ".join(f"k={k} {best_all[k][0]}" for k in ks))
    dask = dask_agreement(adult) if args.dask else {}
    Path(args.out).write_text(json.dumps({"rows": rows, "dial": dial, "table": lines,
                                          "dask": dask, "census": census}, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
