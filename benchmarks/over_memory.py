"""A release of data larger than its workers' memory, checked end to end.

``anonymize_to_parquet`` of census rows plus a 4 kB text column a row (about
2.6 GB in memory at the defaults) on 2 worker processes of 1 GB each: more
than the workers' total limit and over twice what they can use for data (a
worker holds about 300 MB of libraries). Prints and writes (JSON) the data's
size against the limit, the time, whether a worker was restarted (the nanny
restarts a worker past 95 % of its limit), and the release read back: rows,
smallest class, largest leaf against ``leaf_rows``. Exits 1 if any check
fails. Moved here from the test suite, where it took most of a minute.

    python benchmarks/over_memory.py [--files 80] [--rows-per-file 8000] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

CENSUS_QIS = ["age", "zip", "birth_date", "sex"]
PAYLOAD = 4000


def write_wide_dataset(path: Path, n_files: int, rows_per_file: int) -> int:
    """Census rows plus a 4 kB text column per row; returns its size in memory (bytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from dmondrian.synthetic import make_census

    path.mkdir()
    filler = pa.scalar("x" * (PAYLOAD - 12))
    in_memory = 0
    for f in range(n_files):
        df = make_census(rows_per_file, seed=100 + f)
        df["person_id"] += f * rows_per_file
        table = pa.Table.from_pandas(df, preserve_index=False)
        # Each row's text (its id, then the filler) made by Arrow: no Python string a row.
        ids = pc.utf8_lpad(pc.cast(table["person_id"], pa.string()), 12, "0")
        table = table.append_column("note", pc.binary_join_element_wise(ids, filler, ""))
        in_memory += table.nbytes
        pq.write_table(table, path / f"part-{f:03d}.parquet")
    return in_memory


def run(folder: Path, n_files: int, rows_per_file: int, memory_limit: float, k: int) -> dict:
    import dask
    import dask.dataframe as dd
    import numpy as np
    import pyarrow.parquet as pq
    from distributed import Client, LocalCluster

    from dmondrian.distributed import anonymize_to_parquet

    src, dst = folder / "in", folder / "out"
    size = write_wide_dataset(src, n_files, rows_per_file)
    # p2p's default 1 GiB send buffer would alone exceed a worker's limit; a
    # worker's unmanaged memory can sit near 80 %, where dask pauses it by
    # default, and a paused worker that cannot spill back under never resumes.
    config = {"distributed.p2p.comm.buffer": "64 MiB",
              "distributed.p2p.storage.buffer": "32 MiB",
              "distributed.worker.memory.pause": 0.9}
    with dask.config.set(config), LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, memory_limit=memory_limit,
            dashboard_address=":0") as cluster, Client(cluster, set_as_default=False) as client:
        pids = client.run(os.getpid)
        start = time.perf_counter()
        top = anonymize_to_parquet(dd.read_parquet(src), dst, CENSUS_QIS, k, client=client,
                                   class_column="cls", identifiers=["person_id"],
                                   allow_unique=["note"])
        seconds = time.perf_counter() - start
        restarted = client.run(os.getpid) != pids
    classes = pq.read_table(dst, columns=["cls"]).column("cls").to_numpy()
    rows = n_files * rows_per_file
    result = {"rows": rows, "bytes_in_memory": size, "worker_limit": memory_limit,
              "size_over_total_limit": round(size / (2 * memory_limit), 2),
              "seconds": round(seconds, 1), "worker_restarted": restarted,
              "rows_read_back": int(classes.size), "smallest_class":
              int(np.unique(classes, return_counts=True)[1].min()),
              "largest_leaf": int(top.leaf_counts.max()), "leaf_rows": int(top.leaf_rows)}
    result["ok"] = (result["size_over_total_limit"] > 1.25 and not restarted
                    and classes.size == rows == int(top.leaf_counts.sum())
                    and result["smallest_class"] >= k and top.leaf_counts.max() <= top.leaf_rows)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=80)
    parser.add_argument("--rows-per-file", type=int, default=8_000)
    parser.add_argument("--memory-limit", type=float, default=1e9, help="bytes per worker")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--tmp", default=None, help="folder for the data (default: a temp dir)")
    parser.add_argument("--out", default="over_memory.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.tmp) as folder:
        result = run(Path(folder), args.files, args.rows_per_file, args.memory_limit, args.k)
    for key, value in result.items():
        print(f"{key:>24}  {value}")
    Path(args.out).write_text(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
