"""When suppression pays: information loss, class quality and a classifier, per budget.

Run: python benchmarks/suppression.py [--quick] [--census-rows N] [--parts P] [--out PATH]

Tables (all from one run; figures in benchmarks/README.md, "Suppression"):

1. Adult (30,162 rows, the 8 literature QIs; ``$DMONDRIAN_ADULT_DIR``) and
   the census generator (``dmondrian.synthetic``, 1M rows, QIs age, zip,
   birth_date, sex, education; its record id ``person_id`` left out,
   ``identifiers``, which dmondrian requires now), k in {5, 10, 50} x
   suppression in {0, 0.5 %, 1 %, 2 %, 5 %}, ``suppressed="mask"``:

   * ``ncp``: NCP (GCP) of the release, a suppressed row at full loss on
     every QI (as ARX counts it); ``ncp_kept``: NCP of the published
     (not suppressed) rows only;
   * ``dm``: discernibility, the masked rows one class; ``dm_arx``: with
     Bayardo & Agrawal's penalty instead, ``|T|`` for each suppressed row;
   * ``c_avg``: ``|T| / (classes * k)``, the masked class counted;
     ``c_avg_kept``: the same over the published rows and their classes;
   * ``acc``: accuracy of a HistGradientBoostingClassifier trained on the
     release (midpoint generalization: numeric QIs as numbers, NaN when
     masked; nominal QIs as set membership, 1/|set| for each member, so a
     raw value is a set of one; ``"*"`` is the whole domain), tested on raw
     held-out rows: Adult predicts ``income`` from every released column and
     tests on ``adult.test``; census predicts ``income > median`` from the
     QIs and ``occupation``, trained on a seeded sample of 200,000 released
     rows, and tests on 200,000 fresh rows (seed 1);
     ``acc_drop``: the same trained on the ``suppressed="drop"`` release.

2. The selection rule against two others, on Adult, NCP with suppressed rows
   at full loss: the shipped rule (widest classes, the rest kept), the same
   classes suppressed and the rest partitioned again, and suppressing the
   rows with the rarest values first (score: the sum over QIs of
   1 / frequency for nominal QIs, plus a small tail term for numeric ones)
   then partitioning the rest.

3. n/k-KMeans microaggregation against ``generalization="mean"`` at the same
   k, on the standardized numeric columns (Adult: age, fnlwgt,
   education-num, capital-gain, capital-loss, hours-per-week, all rows;
   census: age, zip, birth_date, a 100,000-row sample): rows left in
   clusters below k, and the within-class sum of squares (each row against
   its class mean). KMeans is scikit-learn's (``KMeans`` on Adult,
   ``MiniBatchKMeans`` on the census sample), n_init=1, seed 0.

The JSON (``--out``) holds every row of every table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import dmondrian
from dmondrian.datasets import ADULT_COLUMNS, ADULT_QUASI_IDENTIFIERS, adult_dir, load_adult
from dmondrian.local import encode_table, kernel_rules, partition
from dmondrian.metrics import ncp
from dmondrian.privacy import suppression as S
from dmondrian.synthetic import make_census

KS = (5, 10, 50)
FRACTIONS = (0.0, 0.005, 0.01, 0.02, 0.05)
CENSUS_QIS = ["age", "zip", "birth_date", "sex", "education"]
ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss",
                 "hours-per-week"]
CENSUS_NUMERIC = ["age", "zip", "birth_date"]


# -- features for the classifier -------------------------------------------------------------


def _membership(column: pd.Series, categories: list) -> np.ndarray:
    """Each row's share of each category: 1/|set| for the members of its published set."""
    labels = column.astype(str)
    distinct = pd.unique(labels)
    table = np.zeros((len(distinct), len(categories)))
    index = {c: i for i, c in enumerate(categories)}
    for r, label in enumerate(distinct):
        if label == S.MASK_LABEL:
            members = categories
        elif label.startswith("{") and label.endswith("}"):
            members = label[1:-1].split(", ")
        else:
            members = [label]
        cols = [index[m] for m in members if m in index]
        if cols:
            table[r, cols] = 1.0 / len(cols)
    codes = pd.Index(distinct).get_indexer(labels)
    return table[codes]


def _features(frame: pd.DataFrame, numeric: list, nominal: dict) -> np.ndarray:
    parts = [frame[c].to_numpy(dtype=np.float64, na_value=np.nan).reshape(-1, 1)
             if not pd.api.types.is_datetime64_any_dtype(frame[c])
             else frame[c].astype("int64").where(frame[c].notna()).to_numpy(
                 dtype=np.float64, na_value=np.nan).reshape(-1, 1)
             for c in numeric]
    parts += [_membership(frame[c], cats) for c, cats in nominal.items()]
    return np.hstack(parts)


#: Most training rows of a classifier: the census release is sampled down to it (seeded).
MAX_TRAIN_ROWS = 200_000


def _accuracy(train: pd.DataFrame, y_train, test: pd.DataFrame, y_test, numeric, nominal):
    if len(train) > MAX_TRAIN_ROWS:
        pick = np.random.default_rng(0).choice(len(train), MAX_TRAIN_ROWS, replace=False)
        train, y_train = train.iloc[np.sort(pick)], np.asarray(y_train)[np.sort(pick)]
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    model = HistGradientBoostingClassifier(random_state=0)
    # One thread: on a shared, loaded host OpenMP's spinning threads made a fit
    # 8 x slower than one thread (the accuracy does not depend on it).
    with threadpool_limits(1):
        model.fit(_features(train, numeric, nominal), y_train)
        return float(model.score(_features(test, numeric, nominal), y_test))


# -- the budget sweep ---------------------------------------------------------------------------


def _ncp_from_partition(encoded, part, hidden, n) -> tuple[float, float]:
    """NCP with suppressed rows at 1, and of the kept rows, from the engine's class spans
    (the definition of dmondrian.metrics.ncp; checked equal to it on Adult)."""
    costs = S.class_costs(encoded, part)
    per_row = costs[part.class_of_row]
    kept = per_row[~hidden]
    total = (kept.sum() + hidden.sum()) / n
    return float(total), float(kept.mean()) if len(kept) else 0.0


def sweep(name, df, qis, target, test, y_test, numeric, nominal, check_ncp: bool,
          identifiers=None):
    """Every (k, fraction) of a table; returns its rows (``identifiers``: left out of
    every release)."""
    rows = []
    encoded = encode_table(df, qis)
    for k in KS:
        part = partition(encoded, kernel_rules(encoded, k))
        for f in FRACTIONS:
            t0 = time.perf_counter()
            masked = dmondrian.anonymize(df, qis, k, suppression=f, generalization="midpoint",
                                         class_column="__cls", identifiers=identifiers)
            seconds = time.perf_counter() - t0
            cls = masked.pop("__cls").to_numpy()
            hidden = cls == S.MASKED_CLASS
            n, s = len(df), int(hidden.sum())
            result = S.suppress(encoded, part, f, "mask")
            assert np.array_equal(result.hidden, hidden), "the release and its rule disagree"
            total, kept_ncp = _ncp_from_partition(encoded, part, hidden, n)
            if check_ncp:
                ranged = dmondrian.anonymize(df, qis, k, suppression=f, identifiers=identifiers)
                measured = ncp(ranged, qis, df).overall
                assert abs(measured - total) < 1e-9, (measured, total)
            sizes = np.unique(cls, return_counts=True)[1]
            kept_sizes = np.unique(cls[~hidden], return_counts=True)[1]
            dm = int((sizes.astype(np.int64) ** 2).sum())
            dm_arx = int((kept_sizes.astype(np.int64) ** 2).sum()) + s * n
            row = {"table": name, "k": k, "suppression": f, "suppressed_rows": s,
                   "ncp": total, "ncp_kept": kept_ncp, "dm": dm, "dm_arx": dm_arx,
                   "c_avg": n / (len(sizes) * k),
                   "c_avg_kept": (n - s) / (len(kept_sizes) * k), "seconds": seconds}
            y = target(masked)
            row["acc"] = _accuracy(masked, y, test, y_test, numeric, nominal)
            row["acc_drop"] = _accuracy(masked[~hidden], y[~hidden], test, y_test, numeric,
                                        nominal)
            rows.append(row)
            print(_fmt_sweep(row), flush=True)
    return rows


def _fmt_sweep(r) -> str:
    return (f"{r['table']:<7} k={r['k']:<3} f={r['suppression']:<6.3f} "
            f"suppressed={r['suppressed_rows']:>6,}  NCP={r['ncp']:.4f}  "
            f"NCP kept={r['ncp_kept']:.4f}  DM={r['dm']:>13,}  DM(ARX)={r['dm_arx']:>15,}  "
            f"C_avg={r['c_avg']:.3f} kept {r['c_avg_kept']:.3f}  acc={r['acc']:.4f}  "
            f"acc drop={r['acc_drop']:.4f}")


# -- the rule against others ----------------------------------------------------------------------


def rules(df, qis):
    encoded = encode_table(df, qis)
    n = len(df)
    out = []
    for k in KS:
        part = partition(encoded, kernel_rules(encoded, k))
        for f in FRACTIONS[1:]:
            shipped = S.suppress(encoded, part, f, "mask").hidden
            row = {"k": k, "suppression": f,
                   "widest_classes": _ncp_from_partition(encoded, part, shipped, n)[0],
                   "widest_then_repartition": _repartitioned(encoded, k, shipped, n),
                   "rarest_values_first": _repartitioned(encoded, k, _rarest(encoded, k, f),
                                                         n)}
            out.append(row)
            print(f"rules   k={k:<3} f={f:<6.3f} widest classes {row['widest_classes']:.4f}  "
                  f"+ re-partition {row['widest_then_repartition']:.4f}  "
                  f"rarest values first {row['rarest_values_first']:.4f}", flush=True)
    return out


def _repartitioned(encoded, k, hidden, n) -> float:
    """NCP (suppressed at 1) when the rows not ``hidden`` are partitioned again."""
    kept = np.flatnonzero(~hidden)
    sub = [dataclasses.replace(q, keys=q.keys[kept]) for q in encoded]
    part = partition(sub, kernel_rules(sub, k, scales=[q.scale for q in encoded]))
    costs = S.class_costs(encoded, part)
    return float((costs[part.class_of_row].sum() + hidden.sum()) / n)


def _rarest(encoded, k, f) -> np.ndarray:
    n = len(encoded[0].keys)
    score = np.zeros(n)
    for q in encoded:
        if q.spec.label_shape == "set":
            score += 1.0 / np.bincount(q.keys)[q.keys]
        else:
            rank = pd.Series(q.keys).rank(pct=True).to_numpy()
            score += np.abs(rank - 0.5) / 50
    hidden = np.zeros(n, dtype=bool)
    hidden[np.argsort(-score, kind="stable")[:S.budget(n, f, k)]] = True
    return hidden


# -- n/k KMeans ---------------------------------------------------------------------------------


def _standardized(df, columns) -> np.ndarray:
    x = np.column_stack([df[c].astype("int64").to_numpy(dtype=np.float64)
                         if pd.api.types.is_datetime64_any_dtype(df[c])
                         else df[c].to_numpy(dtype=np.float64) for c in columns])
    return (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)


def _within_ss(x, labels) -> float:
    _, inverse = np.unique(labels, return_inverse=True)
    counts = np.bincount(inverse)
    means = np.column_stack([np.bincount(inverse, weights=x[:, j]) / counts
                             for j in range(x.shape[1])])
    return float(((x - means[inverse]) ** 2).sum())


def kmeans(name, df, columns, minibatch: bool):
    from sklearn.cluster import KMeans, MiniBatchKMeans

    x = _standardized(df, columns)
    n = len(df)
    out = []
    for k in KS:
        t0 = time.perf_counter()
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(1)
        if minibatch:
            model = MiniBatchKMeans(n_clusters=n // k, n_init=1, random_state=0,
                                    batch_size=4096)
        else:
            model = KMeans(n_clusters=n // k, n_init=1, random_state=0)
        labels = model.fit_predict(x)
        limits.restore_original_limits()
        km_seconds = time.perf_counter() - t0
        sizes = np.bincount(labels, minlength=n // k)
        small = sizes[(sizes > 0) & (sizes < k)]
        t0 = time.perf_counter()
        released = dmondrian.anonymize(df[columns], columns, k, generalization="mean",
                                       class_column="__cls")
        dm_seconds = time.perf_counter() - t0
        dm_sizes = np.bincount(released["__cls"].to_numpy())
        row = {"table": name, "k": k, "rows": n, "kmeans_clusters": int((sizes > 0).sum()),
               "kmeans_rows_below_k": int(small.sum()),
               "kmeans_clusters_below_k": int(len(small)),
               "kmeans_within_ss": _within_ss(x, labels), "kmeans_seconds": km_seconds,
               "dmondrian_classes": int(len(dm_sizes)),
               "dmondrian_rows_below_k": int(dm_sizes[dm_sizes < k].sum()),
               "dmondrian_within_ss": _within_ss(x, released["__cls"].to_numpy()),
               "dmondrian_seconds": dm_seconds}
        out.append(row)
        print(f"kmeans  {name:<7} k={k:<3} KMeans: {row['kmeans_rows_below_k']:>6,} rows in "
              f"{row['kmeans_clusters_below_k']:>5,} clusters < k, within SS "
              f"{row['kmeans_within_ss']:>10.1f} ({km_seconds:.1f}s) | dmondrian mean: "
              f"{row['dmondrian_rows_below_k']} rows < k, within SS "
              f"{row['dmondrian_within_ss']:>10.1f} ({dm_seconds:.1f}s)", flush=True)
    return out


# -- the tables ---------------------------------------------------------------------------------


def _adult_test(folder) -> pd.DataFrame:
    test = pd.read_csv(Path(folder) / "adult.test", header=None, names=ADULT_COLUMNS,
                       skiprows=1, skipinitialspace=True, na_values="?")
    test = test.dropna().reset_index(drop=True)
    test["income"] = test["income"].str.rstrip(".")
    return test


def adult_sweep(df, folder):
    test = _adult_test(folder)
    numeric = ["age", "education-num", "fnlwgt", "capital-gain", "capital-loss",
               "hours-per-week"]
    others = ["workclass", "education", "marital-status", "occupation", "relationship",
              "race", "sex", "native-country"]
    nominal = {c: sorted(df[c].astype(str).unique()) for c in others}
    y_test = (test["income"] == ">50K").to_numpy()
    return sweep("adult", df, ADULT_QUASI_IDENTIFIERS,
                 lambda released: (released["income"] == ">50K").to_numpy(),
                 test, y_test, numeric, nominal, check_ncp=True)


def census_sweep(n_rows):
    df = make_census(n_rows, seed=0)
    test = make_census(200_000, seed=1)
    median = float(df["income"].median())
    numeric = ["age", "zip", "birth_date"]
    nominal = {c: sorted(df[c].astype(str).unique()) for c in ("sex", "education",
                                                                "occupation")}
    y_test = (test["income"] > median).to_numpy()
    return sweep("census", df, CENSUS_QIS, lambda released: (released["income"]
                                                             > median).to_numpy(),
                 test, y_test, numeric, nominal, check_ncp=False,
                 identifiers=["person_id"])  # the record id: never released


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="census at 100,000 rows")
    parser.add_argument("--census-rows", type=int, default=1_000_000)
    parser.add_argument("--out", default="benchmarks/suppression.json")
    parser.add_argument("--parts", default="sweep,rules,kmeans",
                        help="which tables to make (comma-separated)")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    census_rows = 100_000 if args.quick else args.census_rows
    result = {"python": sys.version.split()[0], "dmondrian": dmondrian.__version__,
              "cpus": os.cpu_count(), "census_rows": census_rows}
    try:
        folder = adult_dir(download=False)
    except Exception as exc:  # noqa: BLE001 - any reason the data is absent
        print(f"Adult skipped: {exc}")
        folder = None
    sweep_rows, rule_rows, km_rows = [], [], []
    if folder is not None:
        adult = load_adult(folder, download=False)
        if "rules" in parts:
            rule_rows += rules(adult, ADULT_QUASI_IDENTIFIERS)
        if "kmeans" in parts:
            km_rows += kmeans("adult", adult, ADULT_NUMERIC, minibatch=False)
        if "sweep" in parts:
            sweep_rows += adult_sweep(adult, folder)
    if "kmeans" in parts:
        km_rows += kmeans("census", make_census(100_000, seed=0), CENSUS_NUMERIC,
                          minibatch=True)
    if "sweep" in parts:
        sweep_rows += census_sweep(census_rows)
    result.update(sweep=sweep_rows, rules=rule_rows, kmeans=km_rows)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
