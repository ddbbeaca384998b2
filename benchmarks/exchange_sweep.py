"""Which exchange is cheaper on which table's shape: a sweep, and the rule's fit.

Run: python benchmarks/exchange_sweep.py [--quick] [--rows 2000000]
         [--tables census,mixed,floats,wide] [--sizes 50000,125000,1000000]
         [--qi-sets all|full] [--jobs plain,rows,keys,auto] [--repeat 3]
         [--input DIR] [--out PATH]
     python benchmarks/exchange_sweep.py --fit RESULTS.json [RESULTS.json ...]

Three tables, each written once per partition size (``--sizes``, rows an
input file) as Parquet under ``--input``:

* ``census``: bench_distributed.py's census rows; QIs age, zip, birth_date,
  sex, education; ``person_id`` allowed;
* ``mixed``: issue 40's table: ``age`` uniform 17-90, ``zip`` uniform
  10000-99999, ``income = round(age * 900 + lognormal(9, 1))`` (a
  continuous float), ``job`` one of 30 strings with probability proportional
  to 1..30, ``since`` 2000-01-01 plus 0-8999 days, ``diag`` one of 5
  strings, ``id`` the row number (allowed). Its QI sets add one kind at a
  time (``--qi-sets all``): ints (age, zip), + the date, + the continuous
  float, + the nominal (``--qi-sets full``: only the last);
* ``floats``: bench_distributed.py's float table (``--data floats``: five QIs,
  two continuous floats, a float of about 25 levels, an int with missing
  values, a 1,000-value Zipf nominal; ``person_id`` allowed, ``visits``);
* ``wide``: census rows and 60 payload columns: 20 normal floats, 20 ints
  drawn from 0..10**9 (unique per row, allowed) and 20 strings drawn from
  5,000 words of 6-22 characters; QIs age, zip, birth_date, sex.

For every shape (table, partition size, QI set), on one LocalCluster (2
workers x 1 thread, processes), ``--repeat`` rounds of the ``--jobs``,
rotating which goes first and reversing every other round: ``plain`` (read
-> p2p shuffle -> write; on ``wide`` a read -> write copy), and
``anonymize_to_parquet`` with ``exchange="rows"``, ``"keys"`` and
``"auto"``; ``lazy`` (asked by name) is ``dmondrian.anonymize(ddf).to_parquet(...)``,
the lazy path, with ``auto``. Reported per shape: the median CPU seconds (worker processes
and this one, whose scheduler runs here) and wall seconds of each job, the
path ``auto`` took, whether it is within 10 % of the cheaper path in CPU,
and the cost model's features (:func:`dmondrian._dask.exchange.exchange_features`).
Every release of the last round is read back: its smallest class (a
group-by of the QIs' labels over all files) must hold k rows and it must
hold every row; the script exits non-zero otherwise.

``--quick`` runs every shape on a few thousand rows, one round, and checks
every release (tests/dask/test_exchange_sweep.py runs part of it). ``--fit``
reads sweep results and prints the least-squares coefficients of
:data:`dmondrian._dask.exchange.COST_MODEL` (the keys path's extra CPU
microseconds a row against the features), then a table of every shape with
the path the current model picks and its cost over the cheaper path's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))

K = 10
CENSUS_QIS = ["age", "zip", "birth_date", "sex", "education"]
#: The mixed table's QI sets, one kind added at a time.
MIXED_QI_SETS = {"int": ["age", "zip"], "date": ["age", "zip", "since"],
                 "float": ["age", "zip", "since", "income"],
                 "nominal": ["age", "zip", "since", "income", "job"]}
WIDE_QIS = ["age", "zip", "birth_date", "sex"]
#: Columns released as is that single out rows, per table (allowed).
WIDE_INTS = [f"u{j:02d}" for j in range(20)]
FLOAT_QIS = ["income", "lab_value", "score", "days_since_visit", "diagnosis_code"]
ALLOW = {"census": ["person_id"], "mixed": ["id"], "floats": ["person_id"],
         "wide": ["person_id", *WIDE_INTS]}
JOBS = ("plain", "rows", "keys", "auto")
#: Jobs run when asked (``--jobs``): the lazy ``dmondrian.anonymize(ddf).to_parquet(...)``.
MORE_JOBS = ("lazy",)


def census_table(n: int, seed: int = 0) -> pd.DataFrame:
    from dmondrian.synthetic import make_census

    return make_census(n, seed=seed)[
        ["age", "zip", "birth_date", "sex", "education", "person_id", "income"]]


def mixed_table(n: int, seed: int = 0) -> pd.DataFrame:
    """Issue 40's "mixed" table."""
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 91, n)
    jobs = np.array([f"job-{i:02d}" for i in range(30)])
    p = np.arange(1, 31, dtype=float)
    return pd.DataFrame({
        "age": age, "zip": rng.integers(10000, 100000, n),
        "income": np.round(age * 900 + rng.lognormal(9, 1, n)),
        "job": pd.array(jobs[rng.choice(30, n, p=p / p.sum())], dtype="str"),
        "since": np.datetime64("2000-01-01") + rng.integers(0, 9000, n).astype("timedelta64[D]"),
        "diag": pd.array(np.array(["a", "b", "c", "d", "e"])[rng.integers(0, 5, n)], dtype="str"),
        "id": np.arange(n, dtype=np.int64)})


def wide_table(n: int, seed: int = 0) -> pd.DataFrame:
    """Census rows, 20 normal floats, 20 unique ints, 20 words of 6-22 characters."""
    rng = np.random.default_rng(seed + 7)
    lengths = rng.integers(6, 23, 5000)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = np.array(["".join(letters[rng.integers(0, 26, m)]) for m in lengths])
    extra = {}
    for j in range(20):
        extra[f"f{j:02d}"] = rng.normal(0.0, 1.0 + j, n)
    for j in range(20):
        # Unique per row, drawn from 0..10**9: a permutation's slots, a draw in each.
        step = 10 ** 9 // n
        extra[WIDE_INTS[j]] = rng.permutation(n).astype(np.int64) * step + rng.integers(0, step, n)
    for j in range(20):
        # A long tail: Zipf-like ranks over the 5,000 words.
        ranks = np.minimum(rng.zipf(1.2, n), 5000) - 1
        extra[f"w{j:02d}"] = pd.array(words[ranks], dtype="str")
    df = census_table(n, seed)
    return pd.concat([df, pd.DataFrame(extra, index=df.index)], axis=1)


def floats_table(n: int, seed: int = 0) -> pd.DataFrame:
    """bench_distributed.py's float table (``--data floats``), rows ``0..n-1``."""
    from bench_distributed import float_rows

    return float_rows(n, seed)


TABLES = {"census": census_table, "mixed": mixed_table, "floats": floats_table,
          "wide": wide_table}


def qi_sets(table: str, which: str) -> dict:
    if table == "census":
        return {"census": CENSUS_QIS}
    if table == "wide":
        return {"wide": WIDE_QIS}
    if table == "floats":
        return {"floats": FLOAT_QIS}
    return MIXED_QI_SETS if which == "all" else {"nominal": MIXED_QI_SETS["nominal"]}


def write_dataset(root: Path, table: str, rows: int, part_rows: int) -> Path:
    """The table's rows as Parquet files of ``part_rows`` rows (kept between runs)."""
    path = root / f"{table}-{rows}-{part_rows}"
    if (path / "_done").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    df = TABLES[table](rows)
    for i, start in enumerate(range(0, rows, part_rows)):
        df.iloc[start:start + part_rows].to_parquet(path / f"part-{i:05d}.parquet", index=False)
    (path / "_done").touch()
    return path


def _cpu(times) -> float:
    return times[0] + times[1]  # user + system of the process itself


def cpu_seconds(client) -> float:
    """CPU seconds of the worker processes and this one (where the scheduler runs).

    ``os.times`` is sent by reference: the workers need not import this script.
    """
    return sum(_cpu(t) for t in client.run(os.times).values()) + _cpu(os.times())


def run_job(client, job: str, table: str, src: Path, dst: Path, qis: list):
    """One job; returns the plan (None for the plain job, "lazy" for the lazy one)."""
    import dask.dataframe as dd
    from bench_distributed import wide_codes

    ddf = dd.read_parquet(src)
    if job == "plain":
        out = ddf if table == "wide" else ddf.shuffle(
            on=ddf.columns[-1], npartitions=ddf.npartitions, shuffle_method="p2p", force=True)
        # dask takes a Categorical's codes width from the meta (bench_distributed.wide_codes).
        schema = {"diagnosis_code": wide_codes()["diagnosis_code"]} if table == "floats" \
            else "infer"
        client.compute(out.to_parquet(dst, compute=False, schema=schema)).result()
        return None
    if job == "lazy":
        import dmondrian

        dmondrian.anonymize(ddf, qis, K, client=client, progress=False,
                            allow_unique=ALLOW[table]).to_parquet(dst)
        return job  # the lazy release keeps its plan to itself
    from dmondrian.distributed import anonymize_to_parquet

    return anonymize_to_parquet(ddf, dst, qis, K, client=client, progress=False,
                                exchange=job, allow_unique=ALLOW[table])


def check_release(dst: Path, qis: list, rows: int) -> dict:
    """Smallest class (a group-by of the QIs' labels over every file) and the rows."""
    df = pd.read_parquet(dst, columns=qis)
    sizes = df.astype("string").fillna("\x00").groupby(qis, dropna=False).size()
    smallest = int(sizes.min()) if len(sizes) else 0
    return {"smallest_class": smallest, "rows": len(df), "classes": int(len(sizes)),
            "ok": smallest >= K and len(df) == rows}


def features_of(top, src: Path, rows: int, n_parts: int) -> dict:
    from dmondrian._dask.exchange import exchange_features

    first = pd.read_parquet(sorted(src.glob("*.parquet"))[0])
    row_bytes = float(first.memory_usage(deep=True).sum()) / max(len(first), 1)
    return exchange_features(first.iloc[:0], row_bytes, top.options,
                             [t.itemsize for t in top.key_dtypes], rows, n_parts)


def run_shape(client, scratch: Path, src: Path, table: str, qis: list, rows: int,
              jobs: list, repeat: int) -> dict:
    n_parts = len(list(src.glob("*.parquet")))
    cpu = {j: [] for j in jobs}
    wall = {j: [] for j in jobs}
    checks, auto_took, features = {}, None, None
    for r in range(repeat):
        order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
        order = order if r % 2 == 0 else order[::-1]
        for job in order:
            dst = scratch / f"out-{job}"
            shutil.rmtree(dst, ignore_errors=True)
            c0, t0 = cpu_seconds(client), time.perf_counter()
            top = run_job(client, job, table, src, dst, qis)
            wall[job].append(time.perf_counter() - t0)
            cpu[job].append(cpu_seconds(client) - c0)
            if top is not None:
                if job == "auto":
                    auto_took = top.exchange
                if features is None and job != "lazy":
                    features = features_of(top, src, rows, n_parts)
                if r == repeat - 1:
                    checks[job] = check_release(dst, qis, rows)
            shutil.rmtree(dst, ignore_errors=True)
    med = {j: float(np.median(cpu[j])) for j in jobs}
    out = {"table": table, "qis": qis, "rows": rows, "partitions": n_parts,
           "partition_rows": -(-rows // n_parts), "rounds": repeat,
           "cpu_s": {j: [round(x, 2) for x in cpu[j]] for j in jobs},
           "wall_s": {j: [round(x, 2) for x in wall[j]] for j in jobs},
           "median_cpu_s": {j: round(v, 2) for j, v in med.items()},
           "median_wall_s": {j: round(float(np.median(wall[j])), 2) for j in jobs},
           "auto_took": auto_took, "features": features, "checks": checks,
           "checked_ok": all(c["ok"] for c in checks.values())}
    if "rows" in med and "keys" in med:
        better = min(med["rows"], med["keys"])
        out["better"] = "rows" if med["rows"] <= med["keys"] else "keys"
        if auto_took is not None:
            picked = med["auto"] if "auto" in med else med[auto_took]
            out["auto_over_better"] = round(picked / better, 3)
            out["auto_within_10pct"] = picked <= 1.10 * better
    return out


def sweep(args, partial: Path | None = None) -> dict:
    """Every shape's jobs on one cluster; the results so far rewritten to ``partial``."""
    import logging

    from dask import config
    from distributed import Client, LocalCluster

    # p2p logs every shuffle it starts and ends: the table is what matters here.
    logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)
    scratch = Path(tempfile.mkdtemp(prefix="dm-sweep-", dir=args.tmp))
    root = Path(args.input) if args.input else scratch / "in"
    shapes = []
    for table in args.tables:
        for size in args.sizes:
            for name, qis in qi_sets(table, args.qi_sets).items():
                # The QI-set sweep at one size (the 125k), the full set at every size.
                if name not in ("census", "floats", "wide", "nominal") and size != args.sizes[
                        min(1, len(args.sizes) - 1)]:
                    continue
                shapes.append((table, size, name, qis))
    results = []
    try:
        with config.set({"distributed.p2p.comm.buffer": "256MiB",
                         "distributed.p2p.storage.buffer": "128MiB"}), LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True,
                memory_limit=args.memory_limit, dashboard_address=":0",
                local_directory=str(scratch / "dask")) as cluster, Client(cluster) as client:
            for table, size, name, qis in shapes:
                src = write_dataset(root, table, args.rows, size)
                load = os.getloadavg()[0]
                res = run_shape(client, scratch, src, table, qis, args.rows, args.jobs,
                                args.repeat)
                res.update(qi_set=name, load_before=round(load, 2),
                           load_after=round(os.getloadavg()[0], 2))
                results.append(res)
                print(_row(res), flush=True)
                if partial is not None:
                    # What is measured so far survives an interrupted sweep.
                    partial.write_text(json.dumps({"shapes": results}, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"rows": args.rows, "k": K, "workers": 2, "threads_per_worker": 1,
            "repeat": args.repeat, "jobs": args.jobs, "uptime_at_end": uptime,
            "shapes": results, "ok": all(r["checked_ok"] for r in results)}


def _row(res: dict) -> str:
    med = res["median_cpu_s"]
    cells = " ".join(f"{j}={med[j]:.1f}" for j in med)
    return (f"{res['table']:6} {res['qi_set']:7} {res['partition_rows']:>8} rows/part "
            f"x{res['partitions']:<3} cpu s: {cells} | better={res.get('better')} "
            f"auto={res['auto_took']} ({res.get('auto_over_better')}) "
            f"checks={'ok' if res['checked_ok'] else 'FAILED'} load={res['load_before']}")


def fit(paths: list) -> dict:
    """Least-squares coefficients of the keys path's extra CPU microseconds a row."""
    from dmondrian._dask.exchange import COST_MODEL

    names = list(COST_MODEL)
    xs, ys = [], []
    for p in paths:
        for res in json.loads(Path(p).read_text())["shapes"]:
            med = res["median_cpu_s"]
            if res["features"] is None or "keys" not in med or "rows" not in med:
                continue
            xs.append([res["features"][n] for n in names])
            ys.append(1e6 * (med["keys"] - med["rows"]) / res["rows"])
    x, y = np.asarray(xs), np.asarray(ys)
    # Relative error matters: weigh each shape by the cheaper path's cost a row.
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    model = {n: round(float(c), 4) for n, c in zip(names, coef, strict=True)}
    predicted = x @ coef
    return {"model": model, "shapes": len(ys),
            "measured_us_per_row": [round(v, 2) for v in y],
            "predicted_us_per_row": [round(float(v), 2) for v in predicted],
            "sign_agrees": int(np.sum(np.sign(predicted) == np.sign(y)))}


def markdown(paths: list) -> str:
    """The sweep's shapes as a table, with the path the current rule picks on each
    (:data:`~dmondrian._dask.exchange.COST_MODEL` applied to the shape's features)
    and, where ``auto`` ran, the path it took."""
    from dmondrian._dask.exchange import keys_saving

    lines = ["| table | QIs | rows a file x files | plain | rows | keys | auto (ran) "
             "| rule picks | picked / better | load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p in paths:
        for res in json.loads(Path(p).read_text())["shapes"]:
            med = res["median_cpu_s"]
            if "rows" not in med or "keys" not in med or res["features"] is None:
                continue
            pick = "keys" if keys_saving(res["features"]) > 0 else "rows"
            better = min(med["rows"], med["keys"])
            ran = f"{med['auto']:.1f} ({res['auto_took']})" if "auto" in med else "-"
            lines.append(
                f"| {res['table']} | {', '.join(res['qis'])} | {res['partition_rows']:,} x "
                f"{res['partitions']} | {med.get('plain', float('nan')):.1f} | {med['rows']:.1f} "
                f"| {med['keys']:.1f} | {ran} | {pick} | {med[pick] / better:.2f} "
                f"| {res['load_before']}-{res['load_after']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="every shape on a few thousand rows, one round, releases checked")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--tables", default="census,mixed,floats,wide")
    ap.add_argument("--sizes", default="50000,125000,1000000", help="rows an input file")
    ap.add_argument("--qi-sets", choices=("all", "full"), default="all")
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory-limit", default="3GB")
    ap.add_argument("--input", default=None, help="keep the Parquet inputs here")
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--out", default=None, help="JSON report (default: results/)")
    ap.add_argument("--fit", nargs="+", default=None, metavar="RESULTS.json",
                    help="fit the cost model to these sweeps' results instead")
    args = ap.parse_args(argv)
    if args.fit:
        print(json.dumps(fit(args.fit), indent=1))
        print(markdown(args.fit))
        return 0
    args.tables = args.tables.split(",")
    args.jobs = args.jobs.split(",")
    if set(args.jobs) - {*JOBS, *MORE_JOBS}:
        ap.error(f"--jobs: one of {', '.join((*JOBS, *MORE_JOBS))} each")
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        args.rows, args.repeat = 3000, 1
        args.sizes = [max(200, s // 250) for s in args.sizes]
    out = Path(args.out) if args.out else (Path(__file__).parent / "results" /
                                           f"exchange_sweep{'_quick' if args.quick else ''}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    result = sweep(args, out)
    out.write_text(json.dumps(result, indent=1))
    print(f"{result['uptime_at_end']}\nwrote {out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
