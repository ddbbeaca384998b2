"""Anonymize a generated census dataset on a Dask cluster.

Run:
    python examples/cluster.py                       # starts a LocalCluster
    python examples/cluster.py tcp://host:8786       # or DASK_SCHEDULER_ADDRESS=...

With a remote scheduler, pass a working folder every worker can reach as the
second argument (e.g. ``s3://bucket/tmp``); by default a local temporary
folder is used, which only local workers can see.
"""

import os
import sys
import tempfile
import time

import dask.dataframe as dd
from distributed import Client, LocalCluster

from dmondrian.distributed import anonymize_to_parquet
from dmondrian.synthetic import CENSUS_QUASI_IDENTIFIERS, write_census_parquet

N_ROWS = int(os.environ.get("DMONDRIAN_EXAMPLE_ROWS", "200000"))
K = 25


def connect():
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        print(f"connecting to the scheduler at {address}")
        return Client(address), None
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GB",
                           dashboard_address=":0")
    print("started a LocalCluster with 2 workers")
    return Client(cluster), cluster


def main():
    # Worker processes re-import this file: the work must not run at import time.
    client, cluster = connect()
    print(f"dashboard: {client.dashboard_link}")
    with tempfile.TemporaryDirectory() as local_tmp:
        work = sys.argv[2].rstrip("/") if len(sys.argv) > 2 else local_tmp
        source, target = f"{work}/census", f"{work}/released"
        write_census_parquet(source, N_ROWS, seed=0, rows_per_partition=N_ROWS // 4)
        print(f"generated {N_ROWS:,} rows in {source}")

        started = time.perf_counter()
        # person_id, the generated record id, is a direct identifier: never released.
        anonymize_to_parquet(dd.read_parquet(source), target, CENSUS_QUASI_IDENTIFIERS, K,
                             client=client, identifiers=["person_id"])
        print(f"anonymized with k={K} into {target} in {time.perf_counter() - started:.1f}s")

        released = dd.read_parquet(target)
        sizes = released[CENSUS_QUASI_IDENTIFIERS].astype(str).groupby(
            CENSUS_QUASI_IDENTIFIERS).size().compute()
        print(f"{int(sizes.sum()):,} rows in {len(sizes):,} classes; smallest {sizes.min()}")
        assert sizes.min() >= K and int(sizes.sum()) == N_ROWS
    client.close()
    if cluster is not None:
        cluster.close()


if __name__ == "__main__":
    main()
