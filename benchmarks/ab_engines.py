"""A/B of two engines side by side: speed and identical releases, case by case.

Run: python benchmarks/ab_engines.py [--quick] [--rounds R]
         [--cases adult,numeric,ratio,floats,real,plan]
         [--ref-python /work/venv_ref/bin/python] [--ref-path /work/ref]
         [--new-python PYTHON] [--new-path REPO] [--threads N] [--out PATH]

Each engine is a Python interpreter plus a folder put first on its
``PYTHONPATH`` (OLD: ``--ref-python``/``--ref-path``, e.g. a worktree of main
and its venv; NEW: ``--new-python``/``--new-path``, by default this
interpreter and this repository). Every measurement runs in a new subprocess
of one engine (this very file with ``--child``), which builds the case's
table, calls ``dmondrian.anonymize`` once to warm it (imports, caches), then
times it. The child checks that it imported
dmondrian from the folder it was given.

Cases (all k=10, range labels):

adult
    UCI Adult, 30,162 rows, the 8 literature QIs; best of ``--adult-repeat``
    calls (needs the Adult folder, ``$DMONDRIAN_ADULT_DIR`` or the user cache;
    skipped otherwise).
numeric
    1M synthetic census rows, 4 numeric-kind QIs (age, zip, income,
    birth_date); ``bench_local.py`` case b.
ratio
    10M census rows (1M with --quick), 5 QIs (age, zip, birth_date, income,
    education); ``bench_local.py`` case c. The child also times numpy's
    ``argsort`` of the five columns right after, so each engine's
    anonymize/argsort ratio is reported too.
floats
    10M rows (1M with --quick) of continuous floats, heavy ties, a nullable
    Int64 with missing values and a Zipf nominal; ``bench_local.py`` case e,
    with its anonymize/argsort ratio.
real
    10M rows (1M with --quick) of two continuous floats, a rounded float and
    two integers; ``bench_local.py`` case f, with its anonymize/argsort ratio.
plan
    ``plans.py``'s local speed table: a plan fitted (outside the timing) on the
    first million census rows (``--rows`` if fewer; QIs age, zip, birth_date,
    sex, education; ``person_id`` an identifier, ``income`` allowed), then
    ``plan.transform`` of the whole table (10M rows, 1M with --quick) timed.

Why ratios and alternation: the host is shared and its speed drifts. Over
``--rounds R`` the two engines run each case alternately, OLD first in odd
rounds and NEW first in even ones, so a drift favours neither; the report
gives per case the median seconds of each engine and new/old = median(NEW) /
median(OLD), plus the median of the per-round new/old ratios (which compares
runs taken seconds apart), the same two figures in CPU seconds of the call
(``time.process_time``: what a loaded host inflates least, the figure to
compare), and each engine's anonymize/argsort ratio where the case has one (a
figure of each engine against the host's own sorting speed). Nothing is
asserted.

Same release: every child fingerprints the released DataFrame (SHA-256 of
``pandas.util.hash_pandas_object(out, index=True)`` plus column names and
dtypes incl. categories, :func:`reference_releases.frame_digest`) and its input
table; a case prints ``identical`` when every run of both engines gave one
fingerprint, ``DIFFERENT`` otherwise (and says so if the inputs differed).

Threads: children inherit the environment; ``--threads N`` sets both
``OMP_NUM_THREADS`` to N for both engines.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
K = 10
CASES = ["adult", "numeric", "ratio", "floats", "real", "plan"]
#: plans.py's local speed table: its QIs and options.
PLAN_QIS = ["age", "zip", "birth_date", "sex", "education"]
PLAN_OPTIONS = {"identifiers": ["person_id"], "allow_unique": ["income"]}


# -- child: one case, one engine ---------------------------------------------------------------


def _build(case: str, rows: int):
    """(table, QIs) of a case, or None when its data is absent."""
    from bench_local import FLOAT_QIS, REAL_QIS, make_float_table, make_real_table

    import dmondrian
    from dmondrian.synthetic import make_census

    if case == "adult":
        from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS, load_adult

        try:
            return load_adult(download=False), list(ADULT_QUASI_IDENTIFIERS)
        except dmondrian.errors.DMondrianError:
            return None
    if case == "numeric":
        qis = ["age", "zip", "income", "birth_date"]
        return make_census(rows, seed=1, columns=qis), qis
    if case == "ratio":
        qis = ["age", "zip", "birth_date", "income", "education"]
        return make_census(rows, seed=2, columns=qis), qis
    if case == "floats":
        return make_float_table(rows), list(FLOAT_QIS)
    if case == "real":
        return make_real_table(rows), list(REAL_QIS)
    if case == "plan":
        return make_census(rows, seed=5), list(PLAN_QIS)
    raise ValueError(case)


def child(case: str, rows: int, repeat: int, expect: str | None) -> dict:
    import numpy as np
    from bench_local import numpy_values
    from reference_releases import frame_digest

    import dmondrian

    where = str(Path(dmondrian.__file__).resolve().parent)
    if expect and not where.startswith(str(Path(expect).resolve()) + os.sep):
        raise SystemExit(f"imported dmondrian from {where}, not from {expect}")
    built = _build(case, rows)
    if built is None:
        return {"skipped": "the Adult data set is not available"}
    df, qis = built
    if case == "plan":
        from dmondrian.plans import fit_plan

        plan = fit_plan(df.iloc[:1_000_000], qis, K, **PLAN_OPTIONS)
        call = plan.transform
    else:
        def call(table):
            return dmondrian.anonymize(table, qis, K)
    call(df if len(df) <= 100_000 else df.head(100_000))  # warm
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = call(df)
        best = min(best, (time.perf_counter() - t0, time.process_time() - c0))
    result = {"seconds": best[0], "cpu_seconds": best[1], "rows": len(df),
              "dmondrian": where}
    if case in ("ratio", "floats", "real"):
        columns = [numpy_values(df[q]) for q in qis]
        t0 = time.perf_counter()
        for col in columns:
            np.argsort(col)
        result["argsort_seconds"] = time.perf_counter() - t0
        result["argsort_ratio"] = result["seconds"] / result["argsort_seconds"]
    result["release_sha256"] = frame_digest(out)
    result["input_sha256"] = frame_digest(df)
    result["dtypes"] = {str(c): str(t) for c, t in out.dtypes.items()}
    return result


# -- parent ---------------------------------------------------------------------------------


def run_child(engine: dict, case: str, rows: int, repeat: int, threads, timeout) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (engine["path"], str(HERE),
                                                    env.get("PYTHONPATH")) if p)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [engine["python"], str(Path(__file__).resolve()), "--child", case, "--rows",
           str(rows), "--repeat", str(repeat), "--expect", engine["path"]]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit status {proc.returncode}: {last}", "child_wall_s": wall}
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "child_wall_s": wall}


def _median(values):
    return statistics.median(values) if values else None


def summarize(case: str, runs: dict) -> dict:
    """Medians, ratios and the identity verdict of one case from both engines' runs."""
    ok = {e: [r for r in runs[e] if "seconds" in r] for e in runs}
    out = {"case": case, "runs": runs}
    skipped = [r["skipped"] for e in runs for r in runs[e] if "skipped" in r]
    errors = {e: r["error"] for e in runs for r in runs[e] if "error" in r}
    if skipped:
        out["skipped"] = skipped[0]
    if errors:
        out["errors"] = errors
    if not (ok["old"] and ok["new"]):
        out["verdict"] = "n/a"
        return out
    out["rows"] = ok["new"][0]["rows"]
    for e in ("old", "new"):
        out[f"{e}_median_s"] = _median([r["seconds"] for r in ok[e]])
        out[f"{e}_median_cpu_s"] = _median([r["cpu_seconds"] for r in ok[e]])
        ratios = [r["argsort_ratio"] for r in ok[e] if "argsort_ratio" in r]
        if ratios:
            out[f"{e}_median_argsort_ratio"] = _median(ratios)
    out["new_over_old"] = out["new_median_s"] / out["old_median_s"]
    paired = [n["seconds"] / o["seconds"] for o, n in zip(runs["old"], runs["new"])
              if "seconds" in o and "seconds" in n]
    out["median_round_new_over_old"] = _median(paired)
    out["cpu_new_over_old"] = out["new_median_cpu_s"] / out["old_median_cpu_s"]
    out["median_round_cpu_new_over_old"] = _median(
        [n["cpu_seconds"] / o["cpu_seconds"] for o, n in zip(runs["old"], runs["new"])
         if "seconds" in o and "seconds" in n])
    releases = {r["release_sha256"] for e in ok for r in ok[e]}
    inputs = {r["input_sha256"] for e in ok for r in ok[e]}
    dtypes = {json.dumps(r["dtypes"], sort_keys=True) for e in ok for r in ok[e]}
    out["release_sha256"] = sorted(releases)
    out["inputs_identical"] = len(inputs) == 1
    out["verdict"] = "identical" if len(releases) == 1 and len(dtypes) == 1 else "DIFFERENT"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--expect", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, default=None,
                    help="rows of the ratio, floats and real cases (default 10M, 1M with "
                         "--quick; also caps the numeric case's 1M, for smoke tests)")
    ap.add_argument("--quick", action="store_true",
                    help="1M rows in the ratio, floats and real cases")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--adult-repeat", type=int, default=7,
                    help="calls per Adult child, the best is kept")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of "
                                                             + ", ".join(CASES))
    ap.add_argument("--ref-python", default="/work/venv_ref/bin/python")
    ap.add_argument("--ref-path", default="/work/ref")
    ap.add_argument("--new-python", default=sys.executable)
    ap.add_argument("--new-path", default=str(REPO))
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP_NUM_THREADS of both engines")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per child")
    ap.add_argument("--out", default=str(HERE / "results" / "ab_engines.json"))
    args = ap.parse_args(argv)

    if args.child:
        print(json.dumps(child(args.child, args.rows, args.repeat, args.expect)))
        return 0

    big = args.rows or (1_000_000 if args.quick else 10_000_000)
    rows = {"adult": 0, "numeric": min(big, 1_000_000), "ratio": big, "floats": big,
            "real": big, "plan": big}
    repeat = {"adult": args.adult_repeat, "numeric": 1, "ratio": 1, "floats": 1, "real": 1,
              "plan": 1}
    engines = {"old": {"python": args.ref_python, "path": str(Path(args.ref_path).resolve())},
               "new": {"python": args.new_python, "path": str(Path(args.new_path).resolve())}}
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c!r} (cases: {', '.join(CASES)})")

    results = []
    for case in cases:
        runs = {"old": [], "new": []}
        for r in range(args.rounds):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            for e in order:
                res = run_child(engines[e], case, rows[case], repeat[case], args.threads,
                                args.timeout)
                runs[e].append(res)
                shown = (f"{res['seconds']:.3f} s" if "seconds" in res
                         else res.get("error") or res.get("skipped"))
                print(f"{case} round {r + 1}/{args.rounds} {e}: {shown}", file=sys.stderr,
                      flush=True)
            if any("skipped" in x for x in runs["old"] + runs["new"]):
                break
        results.append(summarize(case, runs))

    print(f"{'case':<9}{'rows':>12}{'old s':>10}{'new s':>10}{'new/old':>9}{'per-round':>11}"
          f"{'old cpu':>9}{'new cpu':>9}{'cpu n/o':>9}{'per-round':>11}"
          f"{'old/argsort':>13}{'new/argsort':>13}  release")
    for s in results:
        if "old_median_s" not in s:
            why = s.get("skipped") or "; ".join(f"{e}: {m}" for e, m in s["errors"].items())
            print(f"{s['case']:<9}  not measured: {why}")
            continue

        def fmt(key, spec=".3f", width=10, s=s):
            return f"{s[key]:>{width}{spec}}" if s.get(key) is not None else " " * width
        note = "" if s["inputs_identical"] else " (inputs differed!)"
        print(f"{s['case']:<9}{s['rows']:>12,}{fmt('old_median_s')}{fmt('new_median_s')}"
              f"{fmt('new_over_old', '.2f', 9)}{fmt('median_round_new_over_old', '.2f', 11)}"
              f"{fmt('old_median_cpu_s', '.3f', 9)}{fmt('new_median_cpu_s', '.3f', 9)}"
              f"{fmt('cpu_new_over_old', '.2f', 9)}"
              f"{fmt('median_round_cpu_new_over_old', '.2f', 11)}"
              f"{fmt('old_median_argsort_ratio', '.2f', 13)}"
              f"{fmt('new_median_argsort_ratio', '.2f', 13)}  {s['verdict']}{note}")
    report = {"benchmark": "ab_engines", "rounds": args.rounds, "k": K,
              "engines": engines, "threads": args.threads, "cpus": os.cpu_count(),
              "env_threads": {v: os.environ[v] for v in ("OMP_NUM_THREADS",)
                              if os.environ.get(v)},
              "python": platform.python_version(), "results": results}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
