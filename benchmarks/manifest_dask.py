"""The manifest on Dask: the CLI's ``--distributed`` run against ``anonymize_to_parquet``.

Run: python benchmarks/manifest_dask.py [--rows 3000000] [--rows-per-file 125000]
         [--repeat 3] [--input DIR] [--out PATH] [--quick] [--plan]

The census rows of bench_distributed.py (``--rows``, in Parquet files of
``--rows-per-file`` rows under ``--input``, written once and kept), on one
LocalCluster of 2 worker processes x 1 thread. After an untimed warm-up on
one file, two jobs, alternating (the first of each round rotates),
``--repeat`` rounds:

* ``to_parquet``: ``anonymize_to_parquet(dd.read_parquet(input), out,
  [age, zip, birth_date, sex], 10, allow_unique=["person_id"])``;
* ``cli``: ``dmondrian anonymize INPUT OUT --output-format parquet
  --distributed --scheduler ADDRESS --k 10 --qi age,zip,birth_date,sex
  --allow-unique person_id``, run in this process on the same cluster: the
  release, then its manifest (the report the CLI measures it with).

With ``--plan``, a plan fitted in memory (``fit_plan``, k=10, the same QIs)
on the first million rows (at most) and saved, then two other jobs:

* ``plan_write``: the plan loaded and its release written,
  ``plans.dask.transform_to_parquet(plan, dd.read_parquet(input), out)``;
* ``cli_plan``: ``dmondrian anonymize INPUT OUT --output-format parquet
  --distributed --scheduler ADDRESS --plan PLAN``: the same release, then its
  manifest.

Reported per job: the median wall seconds and CPU seconds (the worker
processes and this one), and the CLI's ratios to the writer alone. The last
round's release of each job is read back (every row, smallest class >= 10)
and the CLI's manifest checked against ``dmondrian.report`` of that
release; the script exits non-zero otherwise. ``--quick`` runs 20,000 rows
in 4 files, one round. The table is printed and written as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

K = 10
QIS = ["age", "zip", "birth_date", "sex"]
ALLOW = ["person_id"]
JOBS = ("to_parquet", "cli")
PLAN_JOBS = ("plan_write", "cli_plan")


def _to_parquet(src: str, out: str, client) -> None:
    import dask.dataframe as dd

    from dmondrian.distributed import anonymize_to_parquet

    anonymize_to_parquet(dd.read_parquet(src), out, QIS, K, client=client, allow_unique=ALLOW)


def _cli(src: str, out: str, client) -> None:
    from dmondrian.cli import main

    code = main(["anonymize", src, out, "--output-format", "parquet", "--distributed",
                 "--scheduler", client.scheduler.address, "--k", str(K), "--qi", ",".join(QIS),
                 "--allow-unique", ",".join(ALLOW), "--no-progress"])
    if code:
        raise SystemExit(f"the CLI failed ({code})")


def _plan_write(plan: str):
    def job(src: str, out: str, client) -> None:
        import dask.dataframe as dd

        from dmondrian.plans import load_plan
        from dmondrian.plans.dask import transform_to_parquet

        transform_to_parquet(load_plan(plan), dd.read_parquet(src), out, client=client,
                             write_options={"write_index": False})
    return job


def _cli_plan(plan: str):
    def job(src: str, out: str, client) -> None:
        from dmondrian.cli import main

        code = main(["anonymize", src, out, "--output-format", "parquet", "--distributed",
                     "--scheduler", client.scheduler.address, "--plan", plan,
                     "--no-progress"])
        if code:
            raise SystemExit(f"the CLI failed ({code})")
    return job


def _fit(src: Path, path: Path) -> None:
    """A plan fitted in memory on the input's first million rows (at most), saved."""
    import pandas as pd

    from dmondrian.plans import fit_plan, save_plan

    fit = pd.read_parquet(src).iloc[:1_000_000]
    save_plan(fit_plan(fit, QIS, K, allow_unique=ALLOW), path)


def check_release(src: str, out: str, manifest: str | None) -> dict:
    """The release read back: every row, smallest class >= K; the CLI's manifest equal
    to :func:`dmondrian.report` of the release read back."""
    import dask.dataframe as dd

    import dmondrian

    back, original = dd.read_parquet(out), dd.read_parquet(src)
    rep = dmondrian.report(back, QIS, original=original, k=K, allow_unique=ALLOW)
    rows = int(original.shape[0].compute())
    ok = rep.n_records == rows and rep.privacy.k >= K
    if manifest is not None:
        with open(manifest) as fh:
            metrics = json.load(fh)["metrics"]
        want = json.loads(rep.to_json())
        ok = ok and _close(metrics, want)
    return {"rows": rep.n_records, "smallest_class": rep.privacy.k, "ok": bool(ok)}


def _close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and bool(np.isclose(a, b, rtol=1e-9))
    return a == b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--rows-per-file", type=int, default=125_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--input", default=None, help="folder of the input files (kept)")
    ap.add_argument("--out", default=None,
                    help="JSON report (default: results/manifest_dask.json)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--plan", action="store_true",
                    help="the plan's jobs: its write alone against the CLI's --plan")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.rows_per_file, args.repeat = 20_000, 5_000, 1

    import logging

    from bench_distributed import CpuSeconds, write_input
    from distributed import Client, LocalCluster

    src = Path(args.input or os.path.join(tempfile.gettempdir(),
                                          f"dmondrian-manifest-{args.rows}-{args.rows_per_file}"))
    write_input(src, args.rows, args.rows_per_file)
    work = Path(tempfile.mkdtemp(prefix="dmondrian-manifest-"))
    jobs = PLAN_JOBS if args.plan else JOBS
    if args.plan:
        plan = work / "plan.json"
        _fit(src, plan)
        runs = {"plan_write": _plan_write(str(plan)), "cli_plan": _cli_plan(str(plan))}
    else:
        runs = {"to_parquet": _to_parquet, "cli": _cli}
    base, cli = jobs
    rounds = []
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
                Client(cluster) as client:
            # Warm-up, untimed: the workers import dmondrian and compile nothing later.
            warm = work / "warm-input"
            write_input(warm, args.rows_per_file, args.rows_per_file)
            for job in jobs:
                runs[job](str(warm), str(work / f"warm-{job}"), client)
            for r in range(args.repeat):
                order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
                entry = {}
                for job in order:
                    out = work / job
                    shutil.rmtree(out, ignore_errors=True)
                    (work / f"{job}.manifest.json").unlink(missing_ok=True)
                    with CpuSeconds(client) as cpu:
                        start = time.perf_counter()
                        runs[job](str(src), str(out), client)
                        wall = time.perf_counter() - start
                    entry[f"{job}_s"], entry[f"{job}_cpu_s"] = round(wall, 3), round(
                        cpu.seconds, 3)
                entry["wall_ratio"] = round(entry[f"{cli}_s"] / entry[f"{base}_s"], 3)
                entry["cpu_ratio"] = round(entry[f"{cli}_cpu_s"] / entry[f"{base}_cpu_s"], 3)
                rounds.append(entry)
                print(json.dumps(entry), flush=True)
            checks = {job: check_release(str(src), str(work / job),
                                         str(work / f"{cli}.manifest.json") if job == cli
                                         else None) for job in jobs}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"rows": args.rows, "rows_per_file": args.rows_per_file, "k": K, "qis": QIS,
              "rounds": rounds, "checks": checks,
              "python": platform.python_version(), "cpus": os.cpu_count()}
    for key in (f"{base}_s", f"{cli}_s", f"{base}_cpu_s", f"{cli}_cpu_s", "wall_ratio",
                "cpu_ratio"):
        result[f"median_{key}"] = round(float(np.median([e[key] for e in rounds])), 3)
    print(f"\n{args.rows:,} census rows, {args.rows // args.rows_per_file} files, "
          f"2 workers x 1 thread, median of {len(rounds)}")
    print("| job | wall s | CPU s |\n|---|---|---|")
    for job in jobs:
        print(f"| {job} | {result[f'median_{job}_s']} | {result[f'median_{job}_cpu_s']} |")
    print(f"| {cli} / {base} | {result['median_wall_ratio']}x | "
          f"{result['median_cpu_ratio']}x |")
    print("checks:", json.dumps(checks))
    name = "manifest_dask_plan.json" if args.plan else "manifest_dask.json"
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    return 0 if all(c["ok"] for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
