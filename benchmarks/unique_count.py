"""What the exact unique-row pass costs a Dask run (dmondrian.release.unique_count).

The Dask engine judges a column released as is by a sketch of its distinct
values, and counts its unique rows exactly only when the sketch cannot
settle it (between about half and three quarters of the rows distinct).
For one table with a column of each kind (few values; n draws of n values,
63 % distinct, counted; an id, refused by the sketch), prints the best of
three planning runs (the lazy ``anonymize``: domain pass, the exact pass if
any, top phase) and of three exact passes alone, on a cluster of two worker
processes of one thread each.

    python benchmarks/unique_count.py [--rows N] [--partitions P]
"""

from __future__ import annotations

import argparse
import time

import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import Client, LocalCluster

from dmondrian import distributed as D
from dmondrian._dask.cluster import on_client
from dmondrian.errors import IdentifyingColumnError
from dmondrian.release.unique_count import unique_rows


def _best(fn, runs: int = 3) -> tuple[float, str]:
    times, outcome = [], ""
    for _ in range(runs):
        start = time.perf_counter()
        try:
            fn()
            outcome = "released"
        except IdentifyingColumnError:
            outcome = "refused"
        times.append(time.perf_counter() - start)
    return min(times), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=16)
    args = parser.parse_args()
    n = args.rows
    rng = np.random.default_rng(0)
    base = pd.DataFrame({"age": rng.integers(18, 90, n), "zip": rng.integers(1000, 1100, n)})
    columns = {"50 values (settled)": rng.integers(0, 50, n),
               "n draws of n values (counted)": rng.integers(0, n, n),
               "ids (settled)": rng.permutation(n)}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        for name, values in columns.items():
            ddf = dd.from_pandas(base.assign(c=values), npartitions=args.partitions).persist()
            plan, outcome = _best(lambda: D.anonymize(ddf, ["age", "zip"], 10,  # noqa: B023
                                                      client=client))
            exact, _ = _best(lambda: unique_rows(ddf, ["c"], on_client(client, False)))  # noqa: B023
            print(f"{name:32} plan {plan:6.2f} s ({outcome}); exact pass alone {exact:6.2f} s",
                  flush=True)


if __name__ == "__main__":
    main()
