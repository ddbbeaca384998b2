"""Bytes a row costs in each exchange: the keys path's two, and the whole-row shuffle.

Run: python benchmarks/exchange_bytes.py --input DIR [--data census|wide|floats]
         [--partitions 2] [--out PATH]

``DIR`` holds bench_distributed.py's Parquet input (``--input`` there). A
plan is made on a LocalCluster (2 workers x 1 thread) for each path
(``exchange="rows"`` and ``"keys"``); then, for the first ``--partitions``
output partitions:

* the forward exchange: every routed input partition's rows bound for them
  (on the whole-row path, only the first two input partitions' rows);
* the back exchange (keys path): what those output partitions publish for
  their rows' input partitions;

each serialized as p2p serializes a shard (Arrow IPC, the index kept; the
target column is sent, then dropped before p2p writes its disk buffer, where
it adds a 4-byte input-partition number a row). Reported a row: the bytes
sent (``sent``) and written to p2p's disk buffer (``on_disk``), and the
columns' share. Prints a table; writes JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))

#: What p2p adds to every row on its disk buffer (the input partition's number).
P2P_INPUT_ID = 4


def _ipc_bytes(df: pd.DataFrame) -> int:
    import pyarrow as pa

    table = pa.Table.from_pandas(df, preserve_index=True)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().size


def _per_row(frames: list, target: str = "_partitions") -> dict:
    frame = pd.concat(frames)
    rows = max(len(frame), 1)
    sent = _ipc_bytes(frame)
    kept = _ipc_bytes(frame.drop(columns=[target])) if target in frame else sent
    columns = {c: round(_ipc_bytes(frame[[c]].reset_index(drop=True)) / rows, 1)
               for c in frame.columns}
    columns["(index)"] = round(_ipc_bytes(frame.index.to_frame(index=False)) / rows, 1)
    return {"rows": len(frame), "sent": round(sent / rows, 1),
            "on_disk": round(kept / rows + P2P_INPUT_ID, 1), "columns": columns}


def measure(client, ddf, qis, k, exchange: str, partitions: int, allow=()) -> dict:
    from dmondrian import distributed as D
    from dmondrian._dask.graph import constant
    from dmondrian._dask.shuffle import routed_partitions, routing_input

    # The dataset's columns that single out rows travel as before (bench_distributed's
    # Data.allow): allowed, so that the plan is made and the bytes stay comparable.
    top = D.plan(ddf, qis, k, client=client, exchange=exchange, allow_unique=list(allow))
    plan_d = constant(top, "plan")
    # A small input may have fewer output partitions than asked for.
    wanted = set(range(min(partitions, len(top.output_partitions))))
    routed = routed_partitions(routing_input(ddf, top), top, plan_d)
    if exchange == "rows":
        routed = routed[:2]  # whole rows: two input partitions are enough to weigh
    routed = client.compute(routed, sync=True)
    forward = [r[r["_partitions"].isin(wanted)] for r in routed]
    out = {"exchange": top.exchange, "key_dtypes": [str(t) for t in top.key_dtypes],
           "leaves": top.n_leaves,
           "output_partitions": len(top.output_partitions),
           "forward": _per_row(forward)}
    if exchange == "keys":
        from dmondrian._dask.exchange import publish_output_partition, published_meta
        from dmondrian._dask.leaves import output_meta

        meta = published_meta(output_meta(ddf._meta, top), top, ddf.npartitions)
        frames = []
        for p in sorted(wanted):
            part = pd.concat([r[r["_partitions"] == p].drop(columns=["_partitions"])
                              for r in routed])
            frames.append(client.submit(publish_output_partition, part, top, meta,
                                        {"number": p}, pure=False).result())
        out["back"] = _per_row(frames)
    return out


def main(argv=None) -> dict:
    import bench_distributed as B
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, type=Path)
    parser.add_argument("--data", default="census", choices=sorted(B.DATASETS))
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    data = B.DATASETS[args.data]
    lc = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GB",
                      dashboard_address=":0")
    client = Client(lc)
    try:
        ddf = dd.read_parquet(args.input)
        result = {"input": str(args.input), "data": args.data, "input_partitions": ddf.npartitions,
                  "paths": {ex: measure(client, ddf, data.qis, B.K, ex, args.partitions,
                                        data.allowed(len(ddf)))
                            for ex in ("rows", "keys")}}
    finally:
        client.close()
        # On a loaded host the workers may take longer to stop than the close
        # waits: the figures are measured by then.
        with contextlib.suppress(TimeoutError):
            lc.close(timeout=60)
    print(f"{'path':<6} {'exchange':<8} {'rows':>9} {'sent B/row':>11} {'on disk B/row':>14}")
    for ex, got in result["paths"].items():
        for way in ("forward", "back"):
            if way in got:
                g = got[way]
                print(f"{ex:<6} {way:<8} {g['rows']:>9} {g['sent']:>11} {g['on_disk']:>14}")
    keys = result["paths"]["keys"]
    result["keys_on_disk_per_row"] = round(keys["forward"]["on_disk"] + keys["back"]["on_disk"], 1)
    result["rows_on_disk_per_row"] = result["paths"]["rows"]["forward"]["on_disk"]
    print(json.dumps({k: v for k, v in result.items() if k != "paths"}))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
