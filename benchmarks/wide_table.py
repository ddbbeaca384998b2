"""A wide warehouse-like table for the plans' Dask benchmark: the census plus payload.

``benchmarks/plans.py``'s speed-dask table releases the census table
(9 columns, 5 QIs); a warehouse table has tens to hundreds of columns and a
few QIs, so a release mostly passes columns through. :func:`write_wide_census`
writes the census rows with ``payload`` more columns, file by file (the
census file's rows, then its payload), cycling through four kinds:

* ``f*``: float64, continuous (log-normal, about every value distinct),
  every other one with 2 % missing values;
* ``n*``: int64 counts (geometric, a few hundred distinct values): checked
  by the identifying-column refusal, as every integer released as is;
* ``s*``: low-cardinality text (8 values, skewed), every other one with
  3 % missing values: checked;
* ``t*``: high-cardinality text with a long tail (Zipf over 200,000 tokens,
  some tens of thousands distinct a million rows, none singling out rows),
  every other one with 5 % missing values: checked.

Every value is drawn from a seed and the file's number, so a dataset is the
same from run to run. Run as a script, it writes a wide dataset to look at or
to time by hand::

    python benchmarks/wide_table.py /tmp/wide --rows 2000000 --payload 40
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

KINDS = ("f", "n", "s", "t")
_LOW = pa.array(["retail", "online", "partner", "branch", "phone", "mail", "kiosk", "other"])
_LOW_P = np.array([0.35, 0.25, 0.15, 0.1, 0.07, 0.04, 0.03, 0.01])
_TOKENS = 200_000


def payload_columns(n: int) -> list:
    """The names of ``n`` payload columns, in the order written."""
    return [f"{KINDS[i % 4]}{i:03d}" for i in range(n)]


def _payload(name: str, rows: int, rng, tokens: pa.Array) -> pa.Array:
    kind, number = name[0], int(name[1:])
    missing = None
    if kind == "f":
        values = rng.lognormal(3.0, 1.2, rows)
        if (number // 4) % 2:
            missing = rng.random(rows) < 0.02
        return pa.array(values, mask=missing)
    if kind == "n":
        return pa.array(rng.geometric(0.02, rows).astype(np.int64))
    if kind == "s":
        codes = rng.choice(len(_LOW), rows, p=_LOW_P)
        if (number // 4) % 2:
            missing = rng.random(rows) < 0.03
        return _decoded(codes, missing, _LOW)
    codes = np.minimum(rng.zipf(1.3, rows), _TOKENS) - 1
    if (number // 4) % 2:
        missing = rng.random(rows) < 0.05
    return _decoded(codes, missing, tokens)


def _decoded(codes, missing, dictionary: pa.Array) -> pa.Array:
    indices = pa.array(codes.astype(np.int32), mask=missing)
    return pa.DictionaryArray.from_arrays(indices, dictionary).cast(pa.string())


def write_wide_census(narrow: str, path: str, payload: int, seed: int = 0) -> str:
    """Write every file of the census dataset ``narrow`` to ``path`` (same file names,
    same rows) with ``payload`` more columns (:func:`payload_columns`). Returns ``path``."""
    os.makedirs(path, exist_ok=True)
    tokens = pa.array([f"item-{i:06d}-{i * 7919 % 1000:03d}" for i in range(_TOKENS)])
    names = payload_columns(payload)
    files = sorted(f for f in os.listdir(narrow) if f.endswith(".parquet"))
    for number, file in enumerate(files):
        table = pq.read_table(os.path.join(narrow, file))
        rng = np.random.default_rng([seed, number])
        for name in names:
            table = table.append_column(name, _payload(name, table.num_rows, rng, tokens))
        pq.write_table(table, os.path.join(path, file))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder to write the wide Parquet dataset to")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--payload", type=int, default=40, help="payload columns")
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=6, help="plans.py's speed-dask seed")
    args = ap.parse_args(argv)

    from dmondrian.synthetic import write_census_parquet

    narrow = tempfile.mkdtemp(prefix="dm-census-")
    try:
        write_census_parquet(narrow, args.rows, seed=args.seed,
                             rows_per_partition=args.rows_per_file)
        write_wide_census(narrow, args.out, args.payload, seed=args.seed)
    finally:
        shutil.rmtree(narrow, ignore_errors=True)
    files = sorted(f for f in os.listdir(args.out) if f.endswith(".parquet"))
    print(f"{args.out}: {len(files)} files, {args.rows} rows, "
          f"{9 + args.payload} columns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
