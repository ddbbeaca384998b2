"""Speed of the local engine, measured as whole public calls and as ratios.

Run: python benchmarks/bench_local.py [--quick] [--repeat N] [--out PATH]

Cases (every figure is the whole ``dmondrian.anonymize`` call, publishing the
default range labels):

a. UCI Adult, 30,162 rows, the 8 literature QIs, k=10 (needs
   ``$DMONDRIAN_ADULT_DIR``; skipped otherwise).
b. 1M synthetic census rows, 4 numeric-kind QIs (age, zip: int; income:
   float; birth_date: datetime), k=10.
c. 10M synthetic census rows (1M with --quick), 5 QIs (age, zip, birth_date,
   income, education), k=10, beside the time numpy takes to ``argsort`` each
   of those five columns (their numpy values: ints, float, datetime64 and the
   ordinal's codes) in the same run. Ratio = anonymize / argsort.
d. First call in a fresh interpreter: import + one small anonymize, with the
   numba cache on disk warm, and cold (empty cache dir: JIT compilation).

Machines here are shared and noisy: each case reports the best of
``--repeat`` runs (with that run's CPU seconds, all threads, which load from
other processes inflates less than wall time), and case c is a ratio of two
timings taken side by side. Cases a to c also report one more run split into
its stages (encode, partition, publish) to show where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dmondrian
from dmondrian.synthetic import make_census

K = 10


def best_of(fn, repeat):
    """Best wall time of ``repeat`` calls, the CPU time of that call, and its result."""
    best = (float("inf"), 0.0)
    result = None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        best = min(best, (time.perf_counter() - t0, time.process_time() - c0))
    return best, result


def stages(df, qis):
    """Seconds of each stage of one ``anonymize`` call: encode, partition, publish."""
    from dmondrian import local

    t0 = time.perf_counter()
    encoded = local.encode_table(df, qis)
    t1 = time.perf_counter()
    part = local.partition(encoded, K)
    t2 = time.perf_counter()
    local.publish(df, encoded, part)
    t3 = time.perf_counter()
    return {"encode": t1 - t0, "partition": t2 - t1, "publish": t3 - t2}


def case_adult(repeat):
    from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS, load_adult

    try:
        adult = load_adult(download=False)
    except dmondrian.errors.DMondrianError as exc:
        return {"case": "a", "skipped": str(exc)}
    dmondrian.anonymize(adult, ADULT_QUASI_IDENTIFIERS, K)  # warm caches
    (seconds, cpu), out = best_of(
        lambda: dmondrian.anonymize(adult, ADULT_QUASI_IDENTIFIERS, K), repeat)
    classes = out.groupby(ADULT_QUASI_IDENTIFIERS, observed=True).ngroups
    return {"case": "a", "what": "Adult 30,162 rows x 8 QIs, k=10", "rows": len(adult),
            "seconds": seconds, "cpu_seconds": cpu, "classes": classes,
            "stages": stages(adult, ADULT_QUASI_IDENTIFIERS), "target_seconds": 0.050}


def case_numeric(repeat, n_rows):
    df = make_census(n_rows, seed=1, columns=["age", "zip", "income", "birth_date"])
    qis = ["age", "zip", "income", "birth_date"]
    dmondrian.anonymize(df.head(10_000), qis, K)
    (seconds, cpu), out = best_of(lambda: dmondrian.anonymize(df, qis, K), repeat)
    return {"case": "b", "what": f"{n_rows:,} rows x 4 numeric QIs, k=10", "rows": n_rows,
            "seconds": seconds, "cpu_seconds": cpu, "stages": stages(df, qis),
            "target_seconds": 0.5}


def _numpy_values(series):
    if hasattr(series, "cat"):
        return series.cat.codes.to_numpy()
    return series.to_numpy()


def case_ratio(repeat, n_rows):
    qis = ["age", "zip", "birth_date", "income", "education"]
    df = make_census(n_rows, seed=2, columns=qis)
    columns = [_numpy_values(df[q]) for q in qis]
    dmondrian.anonymize(df.head(10_000), qis, K)
    # Interleave the two measurements so both see the same machine load.
    anon, sort = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        dmondrian.anonymize(df, qis, K)
        anon.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for col in columns:
            np.argsort(col)
        sort.append(time.perf_counter() - t0)
    return {"case": "c", "what": f"{n_rows:,} rows x 5 QIs, k=10 vs numpy argsort of the 5",
            "rows": n_rows, "seconds": min(anon), "argsort_seconds": min(sort),
            "stages": stages(df, qis),
            "ratio": min(anon) / min(sort), "target_ratio": 0.75}


_FIRST_CALL = """
import time
t0 = time.perf_counter()
import pandas as pd, dmondrian
df = pd.DataFrame({"a": range(100), "b": [float(i % 7) for i in range(100)],
                   "c": ["x", "y"] * 50})
dmondrian.anonymize(df, ["a", "b", "c"], 5)
print(time.perf_counter() - t0)
"""


def case_first_call():
    def run(env):
        out = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, check=True,
                             capture_output=True, text=True)
        return float(out.stdout.strip().splitlines()[-1])

    warm = run(dict(os.environ))
    with tempfile.TemporaryDirectory() as cache:
        cold = run({**os.environ, "NUMBA_CACHE_DIR": cache})
    return {"case": "d", "what": "first call in a fresh process (import + small table)",
            "seconds": warm, "cold_compile_seconds": cold}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M rows instead of 10M in case c")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "local.json"))
    args = parser.parse_args(argv)

    results = [case_adult(max(args.repeat, 5)), case_numeric(args.repeat, 1_000_000),
               case_ratio(args.repeat, 1_000_000 if args.quick else 10_000_000),
               case_first_call()]
    print(f"{'case':<5}{'what':<62}{'seconds':>10}  notes")
    for r in results:
        if "skipped" in r:
            print(f"{r['case']:<5}{'skipped: ' + r['skipped']:<62}")
            continue
        notes = []
        if "target_seconds" in r:
            notes.append(f"target <= {r['target_seconds']} s")
        if "ratio" in r:
            notes.append(f"argsort {r['argsort_seconds']:.3f} s, ratio {r['ratio']:.2f} "
                         f"(target <= {r['target_ratio']})")
        if "cold_compile_seconds" in r:
            notes.append(f"cold (JIT compile) {r['cold_compile_seconds']:.1f} s")
        if "classes" in r:
            notes.append(f"{r['classes']} classes")
        if "cpu_seconds" in r:
            notes.append(f"CPU {r['cpu_seconds']:.3f} s")
        if "stages" in r:
            notes.append("stages " + " / ".join(f"{k} {v:.3f}" for k, v in r["stages"].items()))
        print(f"{r['case']:<5}{r['what']:<62}{r['seconds']:>10.3f}  {'; '.join(notes)}")
    report = {"benchmark": "local", "dmondrian": dmondrian.__version__,
              "python": platform.python_version(), "cpus": os.cpu_count(),
              "numba_threads": int(os.environ.get("NUMBA_NUM_THREADS", os.cpu_count())),
              "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
