"""Warehouse types beside their numpy twins: what a DATE, a DECIMAL and an Arrow column cost.

Run: python benchmarks/warehouse_types.py [--rows N] [--repeat N] [--out PATH]

One table of ``--rows`` rows (default 1,000,000), four QIs with 2 % missing
values each: a birth date, an amount in cents, a zip and a float32 weight,
k=10, in three forms released by the same ``dmondrian.anonymize`` call:

* numpy twins: ``datetime64[s]``, ``Int64`` cents, ``Int32``, ``float32``
  (the amount as integer cents: the same keys a decimal gets);
* Arrow-backed, as ``pd.read_parquet(..., dtype_backend="pyarrow")`` and Dask read
  a warehouse export: ``date32``, ``decimal128(12, 2)``, ``int32``, ``float``;
* objects, as ``pd.read_parquet`` and ``pd.read_sql`` give them: ``datetime.date`` and
  ``Decimal`` objects (zip and weight as in the numpy twins).

The three calls are interleaved, ``--repeat`` times, so they see the same
machine load; the table reports each form's best wall time, its CPU seconds
and its ratio to the numpy twins (1.0: a warehouse type costs what its twin
does). The releases are checked equal (same classes, same labels but the
amount's, which the twins write in cents). No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

import dmondrian

K = 10
QIS = ["birth", "amount", "zip", "weight"]


def tables(n: int, seed: int = 0) -> dict[str, pd.DataFrame]:
    """The same rows as numpy twins, Arrow-backed columns and Python objects."""
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    gaps = rng.random((4, n)) < 0.02
    days = rng.integers(-10_000, 15_000, n).astype(np.int32)
    cents = rng.integers(0, 10**8, n)
    birth = pa.Array.from_buffers(pa.date32(), n, [None, pa.py_buffer(days)])
    # A decimal128 is its unscaled integer in 16 little-endian bytes (non-negative here).
    words = np.stack([cents, np.zeros(n, np.int64)], axis=1)
    amount = pa.Array.from_buffers(pa.decimal128(12, 2), n, [None, pa.py_buffer(words)])
    table = pa.table({
        "birth": pc.if_else(pa.array(gaps[0]), None, birth),
        "amount": pc.if_else(pa.array(gaps[1]), None, amount),
        "zip": pa.array(rng.integers(10_000, 99_999, n), pa.int32(), mask=gaps[2]),
        "weight": pa.array(rng.normal(70, 15, n).astype(np.float32), pa.float32(),
                           mask=gaps[3]),
    })
    arrow = table.to_pandas(types_mapper=pd.ArrowDtype)
    twins = pd.DataFrame({
        "birth": arrow["birth"].astype("datetime64[s]"),
        "amount": pd.array(np.where(gaps[1], 0, cents), dtype="Int64"),
        "zip": arrow["zip"].astype("Int32"),
        "weight": arrow["weight"].to_numpy(dtype=np.float32, na_value=np.nan),
    })
    twins.loc[gaps[1], "amount"] = pd.NA
    objects = twins.assign(birth=arrow["birth"].astype(object),
                           amount=arrow["amount"].astype(object))
    return {"numpy twins": twins, "Arrow-backed": arrow, "objects": objects}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" /
                                             "warehouse_types.json"))
    args = parser.parse_args()
    forms = tables(args.rows)
    for df in forms.values():
        dmondrian.anonymize(df.head(10_000), QIS, K)  # warm every path
    best = {name: (float("inf"), 0.0) for name in forms}
    releases = {}
    for _ in range(args.repeat):
        for name, df in forms.items():
            t0, c0 = time.perf_counter(), time.process_time()
            releases[name] = dmondrian.anonymize(df, QIS, K)
            best[name] = min(best[name], (time.perf_counter() - t0, time.process_time() - c0))
    same = all(releases[name][q].astype(str).equals(releases["numpy twins"][q].astype(str))
               for name in forms for q in QIS if q != "amount")
    base = best["numpy twins"][0]
    rows = [{"form": name, "seconds": s, "cpu_seconds": c, "ratio": s / base}
            for name, (s, c) in best.items()]
    print(f"{args.rows:,} rows x 4 QIs (date, decimal, int32, float32; 2 % missing), k={K}")
    print(f"{'form':14} {'seconds':>8} {'cpu':>7} {'ratio':>6}")
    for r in rows:
        print(f"{r['form']:14} {r['seconds']:8.3f} {r['cpu_seconds']:7.3f} {r['ratio']:6.2f}")
    print(f"same classes and labels (amount aside): {same}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": args.rows, "k": K, "repeat": args.repeat,
                               "machine": platform.platform(), "same_release": same,
                               "results": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
