"""What issue 25's reading and writing rules cost, side by side.

Run: python benchmarks/writers.py [--rows N] [--repeat R] [--out PATH]

Two comparisons, each alternating its two sides over ``--repeat`` rounds (a
shared host's drift favours neither), reported as medians and their ratio:

shuffle
    Writing a released table (``--rows`` census rows, k=10, 3 QIs) to
    Parquet with :func:`dmondrian.io.files.write_table`, its rows first shuffled by
    :func:`dmondrian.release.row_order.shuffle_rows` (what every writer now does)
    against the same write without the shuffle.
csv types
    Reading a CSV of the same rows lazily with dask and computing it:
    :func:`dmondrian.io.csv_tables.read_csv_dask` (the columns dask types as
    numbers typed again over the whole file, each block by pandas' parser,
    then the file read with those types) against
    ``dask.dataframe.read_csv`` (types from the first block), on the
    synchronous scheduler.

Prints a table and writes JSON (default ``benchmarks/results/writers.json``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import dask
import dask.dataframe as dd

import dmondrian
from dmondrian.io import files as io
from dmondrian.io.csv_tables import CsvDialect, read_csv_dask
from dmondrian.release.row_order import shuffle_rows
from dmondrian.synthetic import make_census

QIS = ["age", "zip", "sex"]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(first, second, repeat: int) -> dict:
    """Medians of ``first`` and ``second`` run alternately, which first switching each round."""
    times = {"new": [], "old": []}
    for r in range(repeat):
        order = (("new", first), ("old", second)) if r % 2 == 0 else \
            (("old", second), ("new", first))
        for name, fn in order:
            times[name].append(_timed(fn))
    new, old = statistics.median(times["new"]), statistics.median(times["old"])
    return {"new_s": new, "old_s": old, "ratio": new / old, "rounds": times}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/writers.json")
    args = ap.parse_args(argv)

    df = make_census(args.rows, seed=1)
    # person_id singles out rows, allowed: the release written is the one measured
    # before dmondrian refused it (it only warned then), so the figures compare.
    released = dmondrian.anonymize(df, QIS, 10, allow_unique=["person_id"])
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        results["shuffle"] = alternate(
            lambda: io.write_table(shuffle_rows(released, 7), str(out / "new.parquet"),
                                   overwrite=True),
            lambda: io.write_table(released, str(out / "old.parquet"), overwrite=True),
            args.repeat)
        csv = out / "people.csv"
        df.to_csv(csv, index=False)
        with dask.config.set(scheduler="sync"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results["csv types"] = alternate(
                lambda: read_csv_dask(str(csv), CsvDialect(",")).compute(),
                lambda: dd.read_csv(str(csv)).compute(), args.repeat)
    print(f"{'case':<12}{'new (s)':>10}{'old (s)':>10}{'new/old':>10}")
    for name, r in results.items():
        print(f"{name:<12}{r['new_s']:>10.3f}{r['old_s']:>10.3f}{r['ratio']:>10.2f}")
    report = {"benchmark": "writers", "rows": args.rows, "repeat": args.repeat,
              "python": platform.python_version(), "dmondrian": dmondrian.__version__,
              "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
