"""A/B of two builds on the Dask engine: bench_distributed's and plans.py's jobs, side by side.

Run: python benchmarks/ab_dask.py --ref-path OLD_CHECKOUT [--ref-python PYTHON]
         [--new-path REPO] [--new-python PYTHON] [--rows 2000000]
         [--rows-per-file 250000] [--rounds 3]
         [--cases copy,to_parquet,lazy,plan_written,plan,plan_fit]
         [--input DIR] [--tmp DIR] [--out PATH]

The Dask half of :mod:`ab_engines`: each build is an interpreter plus a folder
put first on ``PYTHONPATH`` (OLD: ``--ref-python``/``--ref-path``; NEW:
``--new-python``/``--new-path``, by default this interpreter and this
repository). The census input of ``bench_distributed.py`` (5 QIs age, zip,
birth_date, sex, education; person_id and income besides) is written once as
Parquet (``--rows`` rows in files of ``--rows-per-file``), and both builds read
the same files. Every round runs one child per build (this file with
``--child``, a new process: the build's imports, its own LocalCluster of
2 worker processes x 1 thread x 2 GB, whose workers inherit the child's
``PYTHONPATH``), OLD first in odd rounds and NEW first in even ones. A child
warms its cluster (the workers' imports, one untimed copy), then times each
case in turn:

copy
    ``read_parquet -> to_parquet`` (``bench_distributed.copy``): no dmondrian
    code at all, the control. Its new/old shows what the host's drift alone
    does to a ratio.
to_parquet, lazy, to_parquet_keys, to_parquet_rows, lazy_keys, lazy_rows
    ``bench_distributed.py``'s paths of those names (``anonymize_to_parquet``,
    and the lazy ``dmondrian.anonymize(ddf, ...)`` then its ``to_parquet``;
    the ``_keys``/``_rows`` ones force the exchange), k=10.
plan_written, plan
    ``plans.py``'s Dask speed table on the census input: a plan fitted (outside
    the timing, in the child) on the input's first million rows, k=10,
    ``person_id`` an identifier and ``income`` allowed; ``plan_written`` is
    :func:`dmondrian.plans.dask.transform_to_parquet` (the command line's
    writer), ``plan`` the lazy :func:`~dmondrian.plans.dask.transform_dask`
    then its ``to_parquet``, both with their default write options.
plan_fit
    ``plans.py``'s ``dask-fit``: the same plan fitted on the cluster from
    the Parquet input (``leaf_rows`` an eighth of the rows).

Per case and build: wall seconds and CPU seconds of the client process (which
runs the scheduler) and both workers (psutil, through ``client.run``: a loaded
host inflates them least, the figure to compare). Reported per case: the
median of each build, new/old of the medians and the median of the per-round
ratios, in both. Same release: every release is read back from its files and
fingerprinted without its row order or class ids (SHA-256 of the sorted
row hashes of its columns but the class column, plus the column names and
dtypes; ``plan_fit`` hashes the fitted tree's arrays); a case prints
``identical`` when every run of both builds gave one fingerprint,
``DIFFERENT`` otherwise. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
K = 10
CASES = ["copy", "to_parquet", "lazy", "to_parquet_keys", "to_parquet_rows", "lazy_keys",
         "lazy_rows", "plan_written", "plan", "plan_fit"]
DEFAULT_CASES = ["copy", "to_parquet", "lazy", "plan_written", "plan", "plan_fit"]
#: plans.py's census options.
PLAN_QIS = ["age", "zip", "birth_date", "sex", "education"]
PLAN_OPTIONS = {"identifiers": ["person_id"], "allow_unique": ["income"]}


# -- child: every case, one build, one cluster ---------------------------------------------------


def release_digest(path: Path) -> dict:
    """Fingerprint of the release in ``path``'s Parquet files, whatever their row order."""
    import numpy as np
    import pandas as pd

    df = pd.read_parquet(path)
    df = df.drop(columns=[c for c in ("cls",) if c in df.columns])
    df = df[sorted(df.columns)].reset_index(drop=True)
    rows = np.sort(pd.util.hash_pandas_object(df, index=False).to_numpy())
    h = hashlib.sha256(rows.tobytes())
    h.update(json.dumps({c: str(t) for c, t in df.dtypes.items()}).encode())
    return {"release_sha256": h.hexdigest(), "release_rows": len(df),
            "dtypes": {c: str(t) for c, t in df.dtypes.items()}}


def tree_digest(plan) -> dict:
    h = hashlib.sha256()
    for a in ("parent", "count", "lo", "hi", "missing"):
        h.update(getattr(plan.tree, a).tobytes())
    return {"release_sha256": h.hexdigest(), "leaves": int(plan.n_leaves)}


def _jobs(client, src: Path, rows: int, plan_for):
    import bench_distributed as bd
    import dask.dataframe as dd

    def plan_written(dst):
        from dmondrian.plans.dask import transform_to_parquet

        transform_to_parquet(plan_for(), dd.read_parquet(src), str(dst), client=client,
                             progress=False)

    def plan_lazy(dst):
        from dmondrian.plans.dask import transform_dask

        transform_dask(plan_for(), dd.read_parquet(src), client=client,
                       progress=False).to_parquet(str(dst))

    def plan_fit(dst):
        from dmondrian.plans import fit_plan

        return fit_plan(dd.read_parquet(src), PLAN_QIS, K, leaf_rows=rows // 8, **PLAN_OPTIONS)

    jobs = {"copy": lambda dst: bd.copy(client, src, dst),
            "plan_written": plan_written, "plan": plan_lazy, "plan_fit": plan_fit}
    for name, path in bd.PATHS.items():
        jobs[name] = lambda dst, path=path: path(client, src, dst, None)
    return jobs


def child(cases: list, src: Path, scratch: Path, rows: int, expect: str | None) -> dict:
    import logging

    import bench_distributed as bd
    import pandas as pd
    from distributed import Client, LocalCluster

    import dmondrian

    where = str(Path(dmondrian.__file__).resolve().parent)
    if expect and not where.startswith(str(Path(expect).resolve()) + os.sep):
        raise SystemExit(f"imported dmondrian from {where}, not from {expect}")
    work = Path(tempfile.mkdtemp(prefix="ab-dask-", dir=scratch))
    plan = []

    def plan_for():
        if not plan:
            from dmondrian.plans import fit_plan

            files = sorted(src.glob("*.parquet"))
            first = pd.concat([pd.read_parquet(f) for f in files[:max(1, 1_000_000 * len(files)
                                                                        // rows)]])
            plan.append(fit_plan(first.reset_index(drop=True), PLAN_QIS, K, **PLAN_OPTIONS))
        return plan[0]

    results = {}
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GB",
                          processes=True, dashboard_address=":0",
                          silence_logs=logging.ERROR,
                          local_directory=str(work / "dask")) as cluster, \
                Client(cluster) as client:
            client.run(bd._warm)
            jobs = _jobs(client, src, rows, plan_for)
            jobs["copy"](work / "warm")  # the workers' Parquet imports and first reads
            if any(c.startswith("plan") and c != "plan_fit" for c in cases):
                plan_for()
            for case in cases:
                dst = work / case
                with bd.CpuSeconds(client) as cpu:
                    t0 = time.perf_counter()
                    fitted = jobs[case](dst)
                    wall = time.perf_counter() - t0
                res = {"seconds": wall, "cpu_seconds": cpu.seconds}
                res.update(tree_digest(fitted) if case == "plan_fit" else release_digest(dst))
                results[case] = res
                shutil.rmtree(dst, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"dmondrian": where, "load": os.getloadavg()[0], "cases": results}


# -- parent ---------------------------------------------------------------------------------------


def run_child(engine: dict, args, cases: list, src: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (engine["path"], str(HERE),
                                                    env.get("PYTHONPATH")) if p)
    cmd = [engine["python"], str(Path(__file__).resolve()), "--child", ",".join(cases),
           "--input", str(src), "--tmp", str(args.tmp), "--rows", str(args.rows),
           "--expect", engine["path"]]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit status {proc.returncode}: {last}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median(values):
    return statistics.median(values) if values else None


def summarize(case: str, runs: dict) -> dict:
    """Medians, ratios and the identity verdict of one case from both builds' runs."""
    got = {e: [r["cases"].get(case) for r in runs[e] if "cases" in r] for e in runs}
    out = {"case": case}
    if not (all(got["old"]) and all(got["new"])) or not (got["old"] and got["new"]):
        out["verdict"] = "n/a"
        return out
    for e in ("old", "new"):
        for key, name in (("seconds", "s"), ("cpu_seconds", "cpu_s")):
            out[f"{e}_median_{name}"] = _median([r[key] for r in got[e]])
    for key, name in (("seconds", ""), ("cpu_seconds", "cpu_")):
        out[f"{name}new_over_old"] = (out[f"new_median_{name or ''}s"]
                                      / out[f"old_median_{name or ''}s"])
        out[f"median_round_{name}new_over_old"] = _median(
            [n[key] / o[key] for o, n in zip(got["old"], got["new"])])
    digests = {r["release_sha256"] for e in got for r in got[e]}
    out["release_sha256"] = sorted(digests)
    out["verdict"] = "identical" if len(digests) == 1 else "DIFFERENT"
    if out["verdict"] == "DIFFERENT":
        out["dtypes"] = {e: got[e][0].get("dtypes") for e in got}
    return out


def write_report(args, engines: dict, cases: list, runs: dict) -> list:
    """Summaries of the rounds so far, written to ``--out``; returns them."""
    n = min(len(runs["old"]), len(runs["new"]))
    paired = {e: runs[e][:n] for e in runs}
    results = [summarize(c, paired) for c in cases] if n else []
    report = {"benchmark": "ab_dask", "rounds": args.rounds, "rounds_done": n,
              "rows": args.rows, "rows_per_file": args.rows_per_file, "k": K,
              "engines": engines, "cpus": os.cpu_count(),
              "python": platform.python_version(), "results": results, "runs": runs}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--expect", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--rows-per-file", type=int, default=250_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES),
                    help="comma-separated subset of " + ", ".join(CASES))
    ap.add_argument("--ref-python", default=sys.executable)
    ap.add_argument("--ref-path", required=False)
    ap.add_argument("--new-python", default=sys.executable)
    ap.add_argument("--new-path", default=str(REPO))
    ap.add_argument("--input", default=None,
                    help="folder of the census input (written there if absent; kept)")
    ap.add_argument("--tmp", default=None, help="scratch directory (default: system temp)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per child")
    ap.add_argument("--out", default=str(HERE / "results" / "ab_dask.json"))
    args = ap.parse_args(argv)
    cases = [c.strip() for c in (args.child or args.cases).split(",") if c.strip()]
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c!r} (cases: {', '.join(CASES)})")
    args.tmp = Path(args.tmp or tempfile.gettempdir())

    if args.child:
        print(json.dumps(child(cases, Path(args.input), args.tmp, args.rows, args.expect)))
        return 0
    if not args.ref_path:
        ap.error("--ref-path is required")

    import bench_distributed as bd

    with contextlib.ExitStack() as stack:
        if args.input:
            src = Path(args.input)
        else:
            src = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=args.tmp))) / "in"
        bd.write_input(src, args.rows, args.rows_per_file)
        engines = {"old": {"python": args.ref_python, "path": str(Path(args.ref_path).resolve())},
                   "new": {"python": args.new_python, "path": str(Path(args.new_path).resolve())}}
        runs = {"old": [], "new": []}
        for r in range(args.rounds):
            for e in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
                res = run_child(engines[e], args, cases, src)
                runs[e].append(res)
                shown = res.get("error") or ", ".join(
                    f"{c} {v['cpu_seconds']:.1f} cpu-s" for c, v in res["cases"].items())
                print(f"round {r + 1}/{args.rounds} {e}: {shown}", file=sys.stderr, flush=True)
                # Written after every child: a run cut short keeps its finished rounds.
                results = write_report(args, engines, cases, runs)

    print(f"{'case':<16}{'old s':>9}{'new s':>9}{'new/old':>9}{'per-round':>11}"
          f"{'old cpu':>9}{'new cpu':>9}{'cpu n/o':>9}{'per-round':>11}  release")
    for s in results:
        if "old_median_s" not in s:
            print(f"{s['case']:<16}  not measured (see the errors in the JSON)")
            continue

        def fmt(key, spec, width, s=s):
            return f"{s[key]:>{width}{spec}}"
        print(f"{s['case']:<16}{fmt('old_median_s', '.2f', 9)}{fmt('new_median_s', '.2f', 9)}"
              f"{fmt('new_over_old', '.2f', 9)}{fmt('median_round_new_over_old', '.2f', 11)}"
              f"{fmt('old_median_cpu_s', '.2f', 9)}{fmt('new_median_cpu_s', '.2f', 9)}"
              f"{fmt('cpu_new_over_old', '.2f', 9)}"
              f"{fmt('median_round_cpu_new_over_old', '.2f', 11)}  {s['verdict']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
