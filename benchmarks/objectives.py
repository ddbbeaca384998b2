"""What each cut objective buys: NCP, discernibility, speed, a classifier and range counts.

Run: python benchmarks/objectives.py [--rows N] [--repeat R] [--parts P] [--out PATH]

Parts (all in one run; figures in benchmarks/README.md, "Cut objectives"):

* ``adult``: Adult (30,162 rows, the 8 literature QIs; ``$DMONDRIAN_ADULT_DIR``),
  k in {2, 5, 10, 50, 100}, each objective in strict and relaxed mode. GCP
  (:func:`dmondrian.metrics.ncp`) and discernibility
  (:func:`dmondrian.metrics.discernibility`) are measured from the original
  values grouped by class id (``class_column``); the table shows the best of
  strict/relaxed per objective next to the best published peer's figures
  (the issue's table) and the floor n*k.
* ``speed``: the census generator (:func:`dmondrian.synthetic.make_census`,
  ``--rows`` rows, seed 1, QIs age, zip, sex, education, occupation), k=10,
  strict: wall time of :func:`dmondrian.anonymize` per objective, the
  objectives interleaved in each of ``--repeat`` rounds (side by side on a
  shared machine); the median per objective and its ratio to "balanced".
  The census's record id is dropped (``identifiers=["person_id"]``), as a
  release must; before dmondrian refused it, it was released with a warning
  and counted exactly by the identifying check (the same cost for every
  objective, so the ratios compare; the seconds are a little lower).
* ``classifier``: Adult split 70/30 (stratified, seed 0), features the 8 QIs
  and capital-gain, capital-loss, hours-per-week, target income;
  ``Pipeline(MondrianAnonymizer(k=10, generalization="midpoint",
  objective=...), an OrdinalEncoder of the label columns,
  HistGradientBoostingClassifier(random_state=0))`` fitted on the training
  rows and scored on the test rows (which the pipeline anonymizes too), and
  the same pipeline without the anonymizer on raw data; each objective in
  strict mode, then relaxed "ncp" and relaxed "ncp" with ``refine="local"``
  (with refine the estimator releases each table on its own, not through a
  fitted plan).
* ``workload``: the range-count workload of LeFevre et al.'s workload-aware
  anonymization on Adult: 1,000 random queries (seed 0), each a conjunction
  over 2-3 of the 8 QIs (a range of ``age``, a set of values of a nominal
  QI) whose true count is 1-10 % of the rows; a release answers by
  assuming its rows spread uniformly within each class's box (the class's
  range or set of original values); the median relative error against the
  raw count, per k, for the default options, relaxed "ncp" and relaxed
  "ncp" with ``refine="local"``.
* ``dask``: the Dask engine (an in-process cluster, 1 worker, 2 threads)
  against the local engine on Adult (``leaf_rows=3000``) and 100,000 census
  rows (``leaf_rows=10000``), so the top phase cuts several levels itself;
  per objective and mode at k=10 and 50, the relative difference of GCP and
  discernibility.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import dmondrian
from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS as ADULT_QIS
from dmondrian.datasets import load_adult
from dmondrian.metrics import discernibility, ncp
from dmondrian.options import OBJECTIVES
from dmondrian.synthetic import make_census

KS = (2, 5, 10, 50, 100)
MODES = ("strict", "relaxed")
CENSUS_QIS = ["age", "zip", "sex", "education", "occupation"]
# The best published Mondrian implementation's figures on the same setup
# (issue 15's table).
PEER_GCP = {2: 0.0130, 5: 0.0339, 10: 0.0567, 50: 0.1460, 100: 0.2070}
PEER_DM = {2: 8.10e4, 5: 2.27e5, 10: 4.48e5, 50: 1.78e6, 100: 3.55e6}


def _measure(original, qis, k, **options) -> dict:
    start = time.perf_counter()
    released = dmondrian.anonymize(original, qis, k, class_column="_cls", **options)
    seconds = time.perf_counter() - start
    sizes = released.groupby("_cls").size()
    assert sizes.min() >= k
    return {"gcp": ncp(released, qis, original, class_column="_cls").overall,
            "dm": discernibility(released, qis, class_column="_cls"),
            "classes": int(sizes.shape[0]), "seconds": seconds}


def adult_table(adult) -> dict:
    rows = {}
    for objective in OBJECTIVES:
        for k in KS:
            for mode in MODES:
                rows[f"{objective}/{k}/{mode}"] = _measure(adult, ADULT_QIS, k, mode=mode,
                                                           objective=objective)
    n = len(adult)
    best = {o: {k: {m: min(rows[f"{o}/{k}/{mode}"][m] for mode in MODES) for m in ("gcp", "dm")}
                for k in KS} for o in OBJECTIVES}
    head = "| k | " + " | ".join(str(k) for k in KS) + " |"
    lines = [head, "|---" * (len(KS) + 1) + "|"]

    def line(label, values):
        lines.append(f"| {label} | " + " | ".join(values) + " |")

    for o in OBJECTIVES:
        line(f'GCP, "{o}"', [f"{100 * best[o][k]['gcp']:.2f} %" for k in KS])
    line("best peer's GCP", [f"{100 * PEER_GCP[k]:.2f} %" for k in KS])
    line('"ncp" / best peer', [f"{best['ncp'][k]['gcp'] / PEER_GCP[k]:.3f}" for k in KS])
    for o in OBJECTIVES:
        line(f'DM, "{o}"', [f"{best[o][k]['dm']:.3g}" for k in KS])
    line("best peer's DM", [f"{PEER_DM[k]:.3g}" for k in KS])
    line("DM floor n*k", [f"{n * k:.3g}" for k in KS])
    line('"dm" / (n*k)', [f"{best['dm'][k]['dm'] / (n * k):.3f}" for k in KS])
    print("Adult, 8 QIs, best of strict/relaxed")
    print("\n".join(lines))
    print("\nper mode (GCP %, DM / n*k):")
    for key, r in rows.items():
        k = int(key.split("/")[1])
        print(f"  {key:22s} GCP {100 * r['gcp']:6.2f} %  DM/nk {r['dm'] / (n * k):.3f}  "
              f"classes {r['classes']}")
    return {"rows": rows, "best": {o: {str(k): v for k, v in b.items()} for o, b in best.items()},
            "table": lines}


def speed(n_rows: int, repeat: int) -> dict:
    df = make_census(n_rows, seed=1)
    times = {o: [] for o in OBJECTIVES}
    for _ in range(repeat):
        for o in OBJECTIVES:
            start = time.perf_counter()
            dmondrian.anonymize(df, CENSUS_QIS, 10, objective=o, identifiers=["person_id"])
            times[o].append(time.perf_counter() - start)
    med = {o: statistics.median(t) for o, t in times.items()}
    print(f"\nSpeed: census {n_rows:,} rows x 5 QIs, k=10, strict, median of {repeat}")
    for o in OBJECTIVES:
        print(f"  {o:9s} {med[o]:7.2f} s  x{med[o] / med['balanced']:.2f}  "
              f"(runs: {', '.join(f'{t:.2f}' for t in times[o])})")
    return {"rows": n_rows, "times": times, "median": med,
            "ratio": {o: med[o] / med["balanced"] for o in OBJECTIVES}}


def classifier(adult) -> dict:
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, OrdinalEncoder

    numeric = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
    labels = [q for q in ADULT_QIS if q not in numeric]
    x = adult[ADULT_QIS + ["capital-gain", "capital-loss", "hours-per-week"]]
    y = (adult["income"] == ">50K").astype(int)
    split = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    # The split's index numbers the rows of adult.data, which would publish where each
    # released row came from: dmondrian refuses it, so each part is numbered afresh.
    x_train, x_test, y_train, y_test = (part.reset_index(drop=True) for part in split)

    def as_str(frame):  # released labels and raw strings alike, for the encoder
        return frame.astype({c: str for c in labels})

    def pipeline(options):
        encode = ColumnTransformer([
            ("labels", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
             labels),
            ("numbers", "passthrough", numeric)])
        steps = [("strings", FunctionTransformer(as_str)), ("encode", encode),
                 ("model", HistGradientBoostingClassifier(random_state=0))]
        if options is not None:
            steps.insert(0, ("anonymize", dmondrian.MondrianAnonymizer(
                k=10, quasi_id=ADULT_QIS, generalization="midpoint", **options)))
        return Pipeline(steps)

    # The objectives in strict mode, then the options with the least GCP (refine makes
    # the estimator release each table on its own, not through a fitted plan).
    runs = {"raw": None, **{o: {"objective": o} for o in OBJECTIVES},
            "relaxed ncp": WORKLOAD_RUNS["relaxed ncp"],
            "relaxed ncp, refine": WORKLOAD_RUNS["relaxed ncp, refine"]}
    out = {}
    for name, options in runs.items():
        pipe = pipeline(options).fit(x_train, y_train)
        out[name] = pipe.score(x_test, y_test)
    print("\nClassifier (income), Adult 70/30, k=10, midpoint: accuracy")
    for name, acc in out.items():
        print(f"  {name:19s} {acc:.4f}")
    return out


def dask_agreement() -> dict:
    import dask.dataframe as dd
    from distributed import Client

    warnings.filterwarnings("ignore")
    # The census's record id is not released (identifiers): it only warned before.
    cases = [("adult", load_adult(download=False), ADULT_QIS, 3000, {}),
             ("census", make_census(100_000, seed=5), CENSUS_QIS, 10_000,
              {"identifiers": ["person_id"]})]
    out = {}
    print("\nDask vs local (relative difference of the distributed release's metric)")
    with Client(processes=False, n_workers=1, threads_per_worker=2,
                dashboard_address=":0") as client:
        for name, df, qis, leaf_rows, drop in cases:
            ddf = dd.from_pandas(df, npartitions=4)
            for o in OBJECTIVES:
                for mode in MODES:
                    for k in (10, 50):
                        local = dmondrian.anonymize(df, qis, k, mode=mode, objective=o,
                                                    class_column="_cls", **drop)
                        dist = dmondrian.anonymize(ddf, qis, k, mode=mode, objective=o,
                                                   class_column="_cls", leaf_rows=leaf_rows,
                                                   client=client, **drop).compute().loc[df.index]
                        assert dist.groupby("_cls").size().min() >= k
                        g = [ncp(r, qis, df, class_column="_cls").overall for r in (local, dist)]
                        d = [discernibility(r, qis, class_column="_cls") for r in (local, dist)]
                        key = f"{name}/{o}/{mode}/{k}"
                        out[key] = {"gcp": g, "dm": d, "gcp_diff": g[1] / g[0] - 1,
                                    "dm_diff": d[1] / d[0] - 1}
                        print(f"  {key:28s} GCP {100 * g[0]:6.2f} vs {100 * g[1]:6.2f} % "
                              f"({g[1] / g[0] - 1:+.2%})  DM {d[0]:.4g} vs {d[1]:.4g} "
                              f"({d[1] / d[0] - 1:+.2%})", flush=True)
    worst = max(max(abs(v["gcp_diff"]), abs(v["dm_diff"])) for v in out.values())
    print(f"  largest difference: {worst:.2%}")
    return {"cases": out, "largest": worst}


WORKLOAD_RUNS = {"default": {}, "relaxed ncp": {"mode": "relaxed", "objective": "ncp"},
                 "relaxed ncp, refine": {"mode": "relaxed", "objective": "ncp",
                                         "refine": "local"}}


def range_queries(adult, n_queries: int = 1000, seed: int = 0) -> list:
    """Random conjunctions over 2-3 QIs whose true count is 1-10 % of the rows."""
    rng = np.random.default_rng(seed)
    n = len(adult)
    queries = []
    while len(queries) < n_queries:
        cols = list(rng.choice(ADULT_QIS, size=int(rng.integers(2, 4)), replace=False))
        query, mask = {}, np.ones(n, dtype=bool)
        for c in cols:
            values = np.sort(adult[c].unique())
            if pd.api.types.is_numeric_dtype(adult[c]):
                lo, hi = np.sort(rng.choice(values, size=2))
                query[c] = ("range", lo, hi)
                mask &= adult[c].between(lo, hi).to_numpy()
            else:
                chosen = set(rng.choice(values, size=int(rng.integers(1, len(values))),
                                        replace=False))
                query[c] = ("set", chosen)
                mask &= adult[c].isin(chosen).to_numpy()
        if 0.01 * n <= mask.sum() <= 0.10 * n:
            queries.append((query, int(mask.sum())))
    return queries


def workload_error(adult, class_of_row, queries) -> float:
    """Median relative error of the queries' counts estimated uniformly within classes."""
    sizes = np.bincount(class_of_row).astype(np.float64)
    boxes = {}
    for c in ADULT_QIS:
        groups = adult[c].groupby(class_of_row)
        if pd.api.types.is_numeric_dtype(adult[c]):
            boxes[c] = (groups.min().to_numpy(), groups.max().to_numpy())
        else:
            boxes[c] = [set(v) for v in groups.unique()]
    errors = []
    for query, truth in queries:
        share = np.ones_like(sizes)
        for c, q in query.items():
            if q[0] == "range":
                # Integer values: the share of the class's integers the range holds.
                lo, hi = boxes[c]
                inside = np.clip(np.minimum(hi, q[2]) - np.maximum(lo, q[1]) + 1, 0, None)
                share *= inside / (hi - lo + 1)
            else:
                share *= np.array([len(s & q[1]) / len(s) for s in boxes[c]])
        errors.append(abs((sizes * share).sum() - truth) / truth)
    return float(np.median(errors))


def workload(adult) -> dict:
    queries = range_queries(adult)
    out = {}
    print("\nRange-count workload: 1,000 queries over 2-3 QIs, 1-10 % selectivity, seed 0; "
          "median relative error")
    for k in KS:
        for name, options in WORKLOAD_RUNS.items():
            released = dmondrian.anonymize(adult, ADULT_QIS, k, class_column="_cls", **options)
            out[f"{name}/{k}"] = workload_error(adult, released["_cls"].to_numpy(), queries)
        print(f"  k={k:3d}: " + ", ".join(f"{name} {out[f'{name}/{k}']:.4f}"
                                          for name in WORKLOAD_RUNS), flush=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="census rows for speed")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", default="adult,speed,classifier,workload,dask")
    parser.add_argument("--out", default="benchmarks/objectives.json")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    result = {}
    adult = (load_adult(download=False) if parts & {"adult", "classifier", "workload"}
             else None)
    if "adult" in parts:
        result["adult"] = adult_table(adult)
    if "classifier" in parts:
        result["classifier"] = classifier(adult)
    if "workload" in parts:
        result["workload"] = workload(adult)
    if "dask" in parts:
        result["dask"] = dask_agreement()
    if "speed" in parts:
        result["speed"] = speed(args.rows, args.repeat)
    Path(args.out).write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
