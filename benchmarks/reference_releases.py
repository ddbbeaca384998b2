"""Fingerprints of reference releases, to prove that a change leaves every output unchanged.

Run: python benchmarks/reference_releases.py --out refs.json [--only SUBSTRING] [--no-dask]
     python benchmarks/reference_releases.py --compare old.json new.json

The first form anonymizes a fixed set of tables with fixed options and writes
``{name: sha256}`` of every released DataFrame; the second compares two such
files name by name and prints ``identical`` / ``DIFFERENT`` / ``missing`` /
``refused`` (both runs raised the same error: no release to compare; exit
status 1 unless every release in either file is identical in both).
Run the first form before and after a change (e.g. on main and on a branch)
and compare.

Releases (the Adult ones need the Adult folder, ``$DMONDRIAN_ADULT_DIR`` or the
user cache, and are left out with a note otherwise):

* Adult, 30,162 rows, the 8 literature QIs: k=10 plain; with the
  generalization hierarchies of the Adult folder (``hierarchies/adult_*.txt``,
  :func:`dmondrian.datasets.load_adult_hierarchies`); k=25 with a class
  column; distinct l-diversity (income, l=2), entropy l-diversity
  (relationship, l=3), recursive (c, l)-diversity (relationship, c=2, l=3);
  t-closeness on a nominal (relationship, t=0.2) and an ordered
  (hours-per-week, t=0.15) sensitive column; relaxed mode; generalization
  ``mean`` and ``midpoint``; hierarchies + relaxed + l-diversity together;
  the "ncp" objective, and the "dm" one relaxed.
* Synthetic census (:func:`dmondrian.synthetic.make_census`, 200,000 rows,
  seed 5) with every kind of QI (int, datetime, nominal strings, ordinal
  Categorical, float): k=10 plain; relaxed + midpoint; l-diversity + t-closeness
  on ``diagnosis``; ``max_depth`` with a class column.
* The float table of ``bench_local.py`` case e at 200,000 rows (continuous
  floats, heavy ties, a nullable Int64 with missing values, a Zipf nominal):
  k=10 range labels and ``mean``.
* The real-valued table of ``bench_local.py`` case f at 200,000 rows (two
  continuous floats, a rounded float, two integers): k=10 range labels,
  relaxed with ``midpoint``, and the "ncp" objective (also on the census
  table, with l-diversity).
* The Dask engine on the census table (:func:`dmondrian.synthetic.census_dask`,
  the same rows in 4 partitions, ``leaf_rows=40,000`` so
  the distributed cuts run) on a ``LocalCluster(n_workers=2,
  threads_per_worker=1, processes=True)``: the lazy ``dmondrian.anonymize(ddf,
  ...)`` computed (plain, with l-diversity, relaxed with a class column) and
  ``dmondrian.distributed.anonymize_to_parquet`` (``random_state=0``: the
  writer shuffles each file's rows) read back; rows sorted by index (the
  engine returns them grouped by leaf).

Every census case passes ``allow_unique=["person_id"]``: the record id is
released as is, as it was when dmondrian only warned about it (it refuses
it now), so the releases stay comparable with the reference engine's.

The fingerprint (:func:`frame_digest`) covers the values and the index
(``pandas.util.hash_pandas_object(df, index=True)``, row by row, so row order
counts), the column names and order, every dtype, and for Categoricals the
categories (values, order, dtype) and whether they are ordered. A case that
raises is recorded as ``error: <type>: <message>`` so that both runs are
still compared on it: by the error's type and message, as a refusal, never as
an identical release. Nothing here is timed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

K = 10
CENSUS_ROWS = 200_000
DASK_LEAF_ROWS = 40_000


# -- fingerprint ---------------------------------------------------------------------------


def _dtype_description(dtype) -> dict:
    """A dtype as plain data; a Categorical's categories are fingerprinted, not listed."""
    out = {"dtype": str(dtype), "class": type(dtype).__name__}
    if isinstance(dtype, pd.CategoricalDtype):
        cats = dtype.categories
        out.update(ordered=bool(dtype.ordered), n_categories=len(cats),
                   categories_dtype=str(cats.dtype),
                   categories=hashlib.sha256(
                       pd.util.hash_array(np.asarray(cats, dtype=object)).tobytes()
                   ).hexdigest())
    return out


def frame_digest(df: pd.DataFrame) -> str:
    """SHA-256 of a DataFrame's values, index, column names and dtypes (incl. categories)."""
    h = hashlib.sha256()
    layout = {
        "columns": [repr(c) for c in df.columns],
        "dtypes": [_dtype_description(t) for t in df.dtypes],
        "index": {"class": type(df.index).__name__, "names": [repr(n) for n in df.index.names],
                  **_dtype_description(df.index.dtype)},
        "shape": list(df.shape),
    }
    h.update(json.dumps(layout, sort_keys=True).encode())
    h.update(pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes())
    return h.hexdigest()


# -- the releases --------------------------------------------------------------------------


def _adult_cases():
    import dmondrian
    from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS as QIS
    from dmondrian.datasets import load_adult, load_adult_hierarchies

    try:
        adult = load_adult(download=False)
    except dmondrian.errors.DMondrianError as exc:
        print(f"Adult releases left out: {exc}", file=sys.stderr)
        return
    try:
        hier = {c: h for c, h in load_adult_hierarchies().items() if c in QIS}
    except dmondrian.errors.DMondrianError as exc:
        print(f"Adult hierarchy release left out: {exc}", file=sys.stderr)
        hier = None

    def run(k=K, **options):
        return lambda: dmondrian.anonymize(adult, QIS, k, **options)

    yield "adult_k10", run()
    if hier:
        yield "adult_k10_hierarchies", run(hierarchies=hier)
    yield "adult_k25_class_column", run(k=25, class_column="eq_class")
    yield "adult_l2_distinct_income", run(sensitive="income", l=2)
    yield "adult_l3_entropy_relationship", run(sensitive="relationship", l=3, l_kind="entropy")
    yield "adult_c2_l3_recursive_relationship", run(sensitive="relationship", l=3,
                                                    l_kind="recursive", c=2)
    yield "adult_t0.2_relationship", run(sensitive="relationship", t=0.2)
    yield "adult_t0.15_hours_per_week", run(sensitive="hours-per-week", t=0.15)
    yield "adult_relaxed", run(mode="relaxed")
    yield "adult_mean", run(generalization="mean")
    yield "adult_midpoint", run(generalization="midpoint")
    yield "adult_ncp", run(objective="ncp")
    yield "adult_dm_relaxed", run(objective="dm", mode="relaxed")
    if hier:
        yield "adult_hierarchies_relaxed_l2", run(hierarchies=hier, mode="relaxed",
                                                  sensitive="income", l=2)


CENSUS_QIS = ["age", "zip", "birth_date", "sex", "education", "occupation", "income"]


def _census():
    from dmondrian.synthetic import make_census

    return make_census(CENSUS_ROWS, seed=5)


def _local_cases():
    from bench_local import FLOAT_QIS, REAL_QIS, make_float_table, make_real_table

    import dmondrian

    census = _census()

    def run(df, qis, **options):
        if "person_id" in df.columns:
            # The census's record id is released as is, allowed: dmondrian refuses it
            # otherwise, and the releases must stay those of the reference engine.
            options["allow_unique"] = ["person_id"]
        return lambda: dmondrian.anonymize(df, qis, K, **options)

    yield "census_k10", run(census, CENSUS_QIS)
    yield "census_relaxed_midpoint", run(census, CENSUS_QIS, mode="relaxed",
                                         generalization="midpoint")
    yield "census_l3_t0.3_diagnosis", run(census, CENSUS_QIS, sensitive="diagnosis", l=3,
                                          t=0.3)
    yield "census_max_depth8_class_column", run(census, CENSUS_QIS, max_depth=8,
                                                class_column="eq_class")
    floats = make_float_table(CENSUS_ROWS)
    yield "floats_k10", run(floats, FLOAT_QIS)
    yield "floats_mean", run(floats, FLOAT_QIS, generalization="mean")
    real = make_real_table(CENSUS_ROWS)
    yield "real_k10", run(real, REAL_QIS)
    yield "real_relaxed_midpoint", run(real, REAL_QIS, mode="relaxed",
                                       generalization="midpoint")
    yield "real_ncp", run(real, REAL_QIS, objective="ncp")
    yield "census_ncp_l3_diagnosis", run(census, CENSUS_QIS, objective="ncp",
                                         sensitive="diagnosis", l=3)


DASK_QIS = ["age", "zip", "birth_date", "sex", "education"]


def _dask_cases(scratch: Path):
    import logging

    from distributed import Client, LocalCluster

    import dmondrian
    from dmondrian.distributed import anonymize_to_parquet
    from dmondrian.synthetic import census_dask

    # The rows of _census(), each partition generated on its worker.
    ddf = census_dask(CENSUS_ROWS, seed=5, rows_per_partition=CENSUS_ROWS // 4)
    # The plan travels in the graph; distributed's advice about it is noise here.
    warnings.filterwarnings("ignore", message="Sending large graph")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=logging.ERROR,
                      local_directory=str(scratch / "dask")) as cluster, \
            Client(cluster) as client:

        def lazy(**options):
            return lambda: dmondrian.anonymize(ddf, DASK_QIS, K, client=client,
                                               leaf_rows=DASK_LEAF_ROWS, progress=False,
                                               allow_unique=["person_id"],
                                               **options).compute().sort_index()

        def to_parquet():
            path = scratch / "released.parquet"
            # Seeded: the writer shuffles each file's rows (a fresh order per
            # run by default).
            anonymize_to_parquet(ddf, path, DASK_QIS, K, client=client,
                                 leaf_rows=DASK_LEAF_ROWS, progress=False,
                                 class_column="eq_class", random_state=0,
                                 allow_unique=["person_id"])
            return pd.read_parquet(path).sort_index()

        yield "dask_census_k10", lazy()
        yield "dask_census_l3_diagnosis", lazy(sensitive="diagnosis", l=3)
        yield "dask_census_relaxed_class_column", lazy(mode="relaxed", class_column="eq_class")
        yield "dask_census_to_parquet", to_parquet


def produce(only=None, dask=True) -> dict:
    """Run every release (those whose name contains ``only``) and return ``{name: digest}``."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="dmondrian-refs-") as scratch:
        groups = [_adult_cases(), _local_cases()]
        if dask:
            groups.append(_dask_cases(Path(scratch)))
        for group in groups:
            for name, fn in group:
                if only and only not in name:
                    continue
                t0 = time.perf_counter()
                try:
                    released = fn()
                    digest = frame_digest(released)
                    note = f"{len(released):,} rows"
                except Exception as exc:  # noqa: BLE001 - recorded, and compared like a digest
                    digest = f"error: {type(exc).__name__}: {exc}"
                    note = "".join(traceback.format_exception_only(exc)).strip()
                out[name] = digest
                print(f"{name:<38}{digest[:16]:<18}{time.perf_counter() - t0:>7.1f} s  {note}",
                      flush=True)
    return out


ERROR = "error: "


def verdict(old: str | None, new: str | None, old_name="old", new_name="new") -> str:
    """How one release of two runs compares: ``identical``, ``refused`` or a difference.

    A run that raised recorded ``error: <type>: <message>`` in place of a digest.
    Two such runs released nothing, so they are never ``identical``: they are
    ``refused`` when both raised the same error (type and message), and a
    difference when the errors differ or only one side raised.
    """
    if old is None or new is None:
        return f"missing in {old_name if old is None else new_name}"
    old_refused, new_refused = old.startswith(ERROR), new.startswith(ERROR)
    if old_refused and new_refused:
        if old == new:
            return f"refused in both ({old[len(ERROR):]})"
        return f"DIFFERENT refusals ({old[len(ERROR):]} | {new[len(ERROR):]})"
    if old_refused or new_refused:
        side, error = (old_name, old) if old_refused else (new_name, new)
        return f"DIFFERENT: refused in {side} only ({error[len(ERROR):]})"
    return "identical" if old == new else "DIFFERENT"


def compare(old_path, new_path) -> int:
    """Print how every release of two runs compares; 1 unless all are identical releases."""
    old = json.loads(Path(old_path).read_text())
    new = json.loads(Path(new_path).read_text())
    counts = {"identical": 0, "refused": 0, "different": 0}
    print(f"{'release':<38}{'':<12}{old_path} vs {new_path}")
    for name in [*old, *(n for n in new if n not in old)]:
        said = verdict(old.get(name), new.get(name), old_path, new_path)
        counts[next((k for k in ("identical", "refused") if said.startswith(k)),
                    "different")] += 1
        print(f"{name:<38}{said}")
    total = len(set(old) | set(new))
    summary = f"{counts['identical']} identical of {total}"
    if counts["refused"]:
        summary += f"; {counts['refused']} refused in both (no release to compare)"
    if counts["different"]:
        summary += f"; {counts['different']} DIFFERENT or missing"
    elif not counts["refused"]:
        summary += "; all identical"
    print(summary)
    return 0 if counts["identical"] == total else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write {name: sha256} here")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    ap.add_argument("--only", help="only the releases whose name contains this")
    ap.add_argument("--no-dask", action="store_true", help="leave out the Dask releases")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        ap.error("give --out PATH or --compare OLD NEW")
    # bench_local (the float table) lives next to this file.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import dmondrian

    print(f"dmondrian {dmondrian.__version__} from {Path(dmondrian.__file__).parent}, "
          f"python {platform.python_version()}, {os.cpu_count()} CPUs", flush=True)
    print(f"{'release':<38}{'sha256':<18}{'time':>9}", flush=True)
    digests = produce(args.only, dask=not args.no_dask)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(digests, indent=2) + "\n")
    errors = sum(d.startswith("error") for d in digests.values())
    print(f"wrote {len(digests)} releases to {out}" + (f" ({errors} errors)" if errors else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
