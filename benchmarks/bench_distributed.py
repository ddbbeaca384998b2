"""Speed and memory of the distributed engine, as a ratio to a plain shuffle.

Run: python benchmarks/bench_distributed.py [--quick] [--rows N] [--workers W]
         [--memory-limit 2GB] [--repeat R] [--paths to_parquet,lazy] [--quality]
         [--input DIR] [--gen-jobs J] [--data floats|wide|text4k]
         [--baseline shuffle|copy] [--out PATH]
     python benchmarks/bench_distributed.py --data wide --rows 2000000
         --rows-per-file 100000 --paths to_parquet,to_parquet_rows
     python benchmarks/bench_distributed.py --small-memory [--rows 20000000]
         [--memory-limit 700MB] [--timeout 900]
     python benchmarks/bench_distributed.py --worker-memory [--rows 2000000]

One synthetic Parquet dataset is written once: census rows by default (5
QIs: age, zip, birth_date, sex, education; 2 other columns: person_id,
income), or with ``--data floats`` bench_local's float table (5 QIs: two
continuous floats with nearly every value distinct, a float of about 25
levels, an Int64 with 5 % missing, a nominal of 1,000 Zipf-like values;
2 other columns: person_id, visits), or with ``--data wide`` a warehouse-like
table (the 9 census columns and 60 more released as they are: 20 floats, 20
ints, 20 words; about 870 bytes a row in memory; 4 QIs: age, zip, sex,
education). Then, on the same LocalCluster, side by side:

* baseline (``--baseline``): ``shuffle`` is ``read_parquet ->
  shuffle(person_id) -> to_parquet`` of the same data (the p2p shuffle a
  whole-row anonymization must at least pay for; the default); ``copy`` is
  ``read_parquet -> to_parquet`` (what any release of the table costs; the
  default with ``--data wide`` and ``text4k``, where only keys need to cross the
  network); ``--data text4k`` is census rows with a 4 kB text each;
* dmondrian, each path ``--paths`` names (default ``to_parquet``):
  ``to_parquet`` is ``anonymize_to_parquet`` (domain pass, top-phase passes,
  route, p2p shuffle, local engine per leaf, write); ``lazy`` is what a
  notebook user writes, ``dmondrian.anonymize(dd.read_parquet(...), ...)``
  then dask's own ``.to_parquet(...)`` of the lazy frame. ``to_parquet_keys``,
  ``to_parquet_rows``, ``lazy_keys`` and ``lazy_rows`` force the exchange
  (``exchange="keys"`` or ``"rows"``) instead of the plan's choice.

``--repeat R`` runs every job R times, rotating which goes first (and
reversing the order every other round), and reports the median of the
per-round ratios next to every round's: on a shared machine one round's ratio
can move by 20 % either way.

Every dataset releases as is columns that single out rows (``person_id``
and, on ``text4k``, its ``note``; on ``wide`` the ints drawn from 10**6
values and more, and on fewer than 2M rows those of ``rows / 2`` values and
more, :func:`wide_allow`); dmondrian refuses those unless told, so every
dmondrian job passes them in ``allow_unique`` (``Data.allow``). They are released as
before, when they only warned, so the release and the figures stay
comparable with the earlier ones: a real release would drop ``person_id``
(``identifiers``, writing less), but the quality check lines the release up
with the original by it. Allowed columns are not sketched by the
identifying-column check (on ``wide``, person_id and 9 of its 20 ints from
2M rows up).

Reported: both times and their ratio (target <= 1.5), the CPU seconds of the
worker processes and the client for each and their ratio (the figure to compare
when the machine is shared and wall times are noisy), passes over the data in
the top phase, leaves and the largest leaf, the peak memory of any worker
process (sampled from the scheduler's heartbeats) against its limit, the peak
size of the workers' local directories (p2p's spill and dask's), and the bytes
a row costs in the p2p shuffles (``p2p_bytes_per_row_<job>``: the shards sent,
and what p2p wrote to its disk buffers; both exchanges of the keys path summed).

Every release is read back from its files (the last round's of each path,
the ``--small-memory`` and ``--worker-memory`` ones): its smallest class, the
rows sharing every QI's label summed over files, and its rows
(``read_back_<path>``, ``k_ok``); the script exits non-zero when a class
holds fewer than k rows or a row is missing.

Per phase: the wall time of every top-phase pass and of the final
route-shuffle-anonymize-write pass (``TopPlan.timings``), and from the Dask
task stream the compute seconds workers spent per task prefix (read, route,
shuffle, anonymize, write), and the thread CPU and non-CPU seconds of each
prefix from the workers' own metrics (what the task's thread computed, and
what it spent waiting: for a core, the GIL, the disk). ``--profile-leaf``
also profiles the local engine on one output partition in this process
(validation/encode, partition, publish, labels as text).

``--quality`` also runs the local engine in memory on the same rows and
compares average NCP (from per-class original bounds), the 2M-row quality
check of issue 3 (``--quality --rows 2000000``).

Two more cases run instead of the comparison above:

``--small-memory``
    Does the lazy path finish on small workers, and at what cost? 20M rows
    (``--rows``) on 2 workers x 700 MB (``--memory-limit``), started with
    fresh caches (every worker gets an empty ``HOME`` and ``XDG_CACHE_HOME``
    through the ``env`` of its nanny, as on a new cluster), then
    ``dmondrian.anonymize(dd.read_parquet(...), ...).to_parquet(...)``.
    Reported: the wall time, how many times workers were paused (their
    ``worker-status-change`` events on the scheduler) and for how long, the
    peak worker memory (scheduler heartbeats) against the limit, and whether
    a worker process was replaced. After ``--timeout`` seconds (default 900)
    the job is abandoned and reported as "did not finish", with every
    worker's memory, spilled bytes and status at that moment, instead of
    hanging. An absolute figure: its question is whether, not how fast.
``--worker-memory``
    Memory a job leaves behind in a worker process: 2M census rows
    (``--rows``), each job on a fresh cluster with fresh caches (as above);
    after the job and a ``gc.collect()``, each worker's process RSS (psutil,
    through ``client.run``), compared worker by worker (by name) with the
    same worker's RSS after a plain ``read_parquet -> shuffle -> to_parquet``
    of the same data. dmondrian runs twice, each on its own fresh cluster:
    ``anonymize_to_parquet`` and the lazy ``anonymize(...).to_parquet``.
    Also the largest worker's RSS of each job (which worker ran the heavier
    tasks can differ between clusters). Target: dmondrian <= plain + 100 MB.
    A difference to the plain job
    rather than an absolute RSS, because the interpreter, pandas, pyarrow and
    dask already hold most of a worker's memory, whatever the engine.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

K = 10


def census_rows(n: int, start: int) -> pd.DataFrame:
    """Census rows ``start..start+n-1`` (the generator is deterministic per row)."""
    from dmondrian.synthetic import make_census

    return make_census(n, seed=0, start=start)[
        ["age", "zip", "birth_date", "sex", "education", "person_id", "income"]]


def float_rows(n: int, start: int) -> pd.DataFrame:
    """bench_local's float table (continuous floats, heavy ties, missing ints, a
    long-tailed nominal of 1,000 values), seeded by ``start``, with a row id and
    a count column released as is."""
    from bench_local import make_float_table

    df = make_float_table(n, seed=start)
    df.insert(0, "person_id", np.arange(start, start + n, dtype=np.int64))
    df["visits"] = np.random.default_rng(start + 1).poisson(3.0, n)
    return df


#: The wide table's extra columns: (kind, count); words come from a 1,000-word list.
WIDE_EXTRAS = (("f", 20), ("i", 20), ("w", 20))


def wide_rows(n: int, start: int) -> pd.DataFrame:
    """A warehouse-like wide table: the 9 census columns and 60 more released as
    they are (20 floats, 20 ints, 20 words), about 870 bytes a row in memory; 4 QIs."""
    from dmondrian.synthetic import make_census

    df = make_census(n, seed=0, start=start)
    rng = np.random.default_rng(start + 7)
    words = np.array([f"w{i:04d}{'abcdefgh'[i % 8] * (i % 9)}" for i in range(1000)])
    extra = {}
    for kind, count in WIDE_EXTRAS:
        for j in range(count):
            name = f"{kind}{j:02d}"
            if kind == "f":
                extra[name] = rng.normal(0.0, 1.0 + j, n)
            elif kind == "i":
                extra[name] = rng.integers(0, 10 ** (3 + j % 6), n)
            else:
                extra[name] = pd.array(words[rng.integers(0, 1000, n)], dtype="str")
    return pd.concat([df, pd.DataFrame(extra, index=df.index)], axis=1)


def text_rows(n: int, start: int) -> pd.DataFrame:
    """Census rows with a 4 kB text each (the larger-than-memory test's rows)."""
    df = census_rows(n, start)
    filler = "x" * 3988
    df["note"] = pd.array([f"{i:012d}{filler}" for i in df["person_id"]], dtype="str")
    return df


def wide_codes() -> dict:
    """The plain job's schema for the float table's nominal: 32-bit codes.

    dask takes a Categorical's codes width from the meta, which knows no
    categories (dask issue 11830): a partition of more than 127 of the 1,000
    values fails to convert otherwise.
    """
    import pyarrow as pa

    return {"diagnosis_code": pa.dictionary(pa.int32(), pa.large_string())}


@dataclasses.dataclass(frozen=True)
class Data:
    """A dataset ``--data`` names: its QIs, how one input file's rows are made, and
    the ``schema`` the plain job's ``to_parquet`` needs."""

    qis: list
    rows: object
    plain_schema: object = lambda: "infer"
    #: Columns released as is that single out rows: passed as ``allow_unique``; a
    #: function of the rows where that depends on the table's size.
    allow: object = ("person_id",)

    def allowed(self, rows: int) -> tuple:
        """The columns to allow on a table of ``rows`` rows."""
        return tuple(self.allow(rows) if callable(self.allow) else self.allow)


def wide_allow(rows: int) -> tuple:
    """person_id and the wide table's ints that single out rows at ``rows`` rows.

    An int drawn from ``m`` values leaves about ``exp(-rows / m)`` of the rows
    a value of their own, half of them (refused) once ``m`` is above about
    ``1.44 rows``: the ints of 10^6 values and more are allowed at every size
    (those of 10^6 single out rows below about 700k rows), and those of
    ``rows / 2`` values and more too (a margin), which only a smoke run's few
    rows adds to.
    """
    return ("person_id", *(f"i{j:02d}" for j in range(WIDE_EXTRAS[1][1])
                           if 10 ** (3 + j % 6) >= min(rows / 2, 10 ** 6)))


DATASETS = {
    "census": Data(["age", "zip", "birth_date", "sex", "education"], census_rows),
    "floats": Data(["income", "lab_value", "score", "days_since_visit", "diagnosis_code"],
                   float_rows, wide_codes),
    "wide": Data(["age", "zip", "sex", "education"], wide_rows,
                 allow=wide_allow),
    "text4k": Data(["age", "zip", "birth_date", "sex", "education"], text_rows,
                   allow=("person_id", "note")),
}
#: The dataset of this run (``--data``).
DATA = DATASETS["census"]


#: Parquet compression of the input, the plain job's output and the release
#: (``--compression``; pyarrow's default, snappy, unless asked).
COMPRESSION = "snappy"


def _write_file(path: Path, i: int, start: int, n: int, compression: str = "snappy") -> None:
    df = DATA.rows(n, start)
    # Written aside, then renamed: an interrupted run never leaves a partial
    # file that a later --input run would take for a whole one.
    tmp = path / f".part-{i:05d}.parquet.tmp"
    df.to_parquet(tmp, index=False, compression=compression)
    tmp.rename(path / f"part-{i:05d}.parquet")


def write_input(path: Path, rows: int, rows_per_file: int, jobs: int = 1) -> None:
    """The rows ``0..rows-1`` of ``DATA`` as Parquet files of ``rows_per_file`` rows.

    Files already there (from an earlier run with the same ``--input``) are
    kept: the generator is deterministic per row (``start``), so a file's
    content depends only on its number.
    """
    path.mkdir(parents=True, exist_ok=True)
    todo = [(i, start, min(rows_per_file, rows - start))
            for i, start in enumerate(range(0, rows, rows_per_file))
            if not (path / f"part-{i:05d}.parquet").exists()]
    if jobs <= 1:
        for i, start, n in todo:
            _write_file(path, i, start, n, COMPRESSION)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        for f in [pool.submit(_write_file, path, i, start, n, COMPRESSION)
                  for i, start, n in todo]:
            f.result()


def _process_cpu() -> float:
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


class CpuSeconds:
    """CPU seconds used by the worker processes and this one (robust to a busy machine)."""

    def __init__(self, client):
        self.client, self.seconds = client, 0.0

    def _total(self):
        return sum(self.client.run(_process_cpu).values()) + _process_cpu()

    def __enter__(self):
        self._start = self._total()
        return self

    def __exit__(self, *exc):
        self.seconds = self._total() - self._start


class _PeakPoller:
    """Largest value of ``_sample()`` seen, polled every ``every`` seconds over a block."""

    def __init__(self, every):
        self.every, self.peak = every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _sample(self):
        raise NotImplementedError

    def _poll(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self._sample())
            except Exception:  # noqa: BLE001 - a missed sample is not an error
                pass
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class PeakMemory(_PeakPoller):
    """Largest worker process memory seen in the scheduler's heartbeats."""

    def __init__(self, client, every=0.25):
        super().__init__(every)
        self.client = client

    def _sample(self):
        workers = scheduler_workers(self.client)
        return max((w["metrics"]["memory"] for w in workers.values()), default=0)


class PeakDisk(_PeakPoller):
    """Largest size of a folder (the workers' local directories: p2p's spill) seen."""

    def __init__(self, folder: Path, every=2.0):
        super().__init__(every)
        self.folder = folder

    def _sample(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.folder):
            for f in files:
                with contextlib.suppress(OSError):  # p2p removes files as it goes
                    total += os.stat(os.path.join(root, f)).st_size
        return total


def smallest_class(dst: Path, rows: int | None = None) -> dict:
    """The smallest equivalence class of a written release, read back from its files.

    Classes are what the release publishes: the rows sharing every QI's
    label. Only the QI columns are read; each file's label combinations are
    counted, then summed over files (on the keys path file ``i`` holds input
    partition ``i``'s rows and a class spans files). ``k_ok`` says whether
    every class holds at least ``K`` rows and, given ``rows``, whether every
    row was written: k is checked on the output, not taken from the plan.
    """
    import pyarrow.parquet as pq

    files = [f for f in sorted(dst.glob("*.parquet")) if pq.read_metadata(f).num_rows]
    if not files:
        return {"smallest_class_on_disk": None, "classes_on_disk": 0, "rows_on_disk": 0,
                "files_on_disk": 0, "k_ok": False}
    # File by file, so that a release larger than memory is read back too: each
    # row's labels hashed to 128 bits (two independent 64-bit hashes of the
    # label text; a collision, about 1e-20 at 1e9 classes, could only merge two
    # classes), counted per file, the counts summed over files.
    parts, n_rows = [], 0
    for f in files:
        labels = pq.read_table(f, columns=DATA.qis).to_pandas()
        n_rows += len(labels)
        text = labels.astype("string").fillna("\x00missing")
        keys = pd.DataFrame({
            "h0": pd.util.hash_pandas_object(text, index=False, hash_key="0123456789abcdef"),
            "h1": pd.util.hash_pandas_object(text, index=False, hash_key="fedcba9876543210")})
        parts.append(keys.value_counts().reset_index())
    counts = pd.concat(parts, ignore_index=True).groupby(["h0", "h1"])["count"].sum()
    smallest = int(counts.min())
    return {"smallest_class_on_disk": smallest, "classes_on_disk": int(counts.size),
            "rows_on_disk": n_rows, "files_on_disk": len(files),
            "bytes_on_disk": sum(f.stat().st_size for f in files),
            "k_ok": smallest >= K and (rows is None or n_rows == rows)}


def _worker_metrics(dask_scheduler=None) -> dict:
    return {k: v for k, v in dask_scheduler.cumulative_worker_metrics.items()
            if isinstance(k, tuple) and k[-1] in ("seconds", "bytes")}


#: The p2p shuffles' bytes: what the shards sent weigh (serialized Arrow, the
#: target column included), and what p2p wrote to its disk buffers (each shard
#: with its input partition's number, the target column dropped).
P2P_BYTES = {"shards": ("execute", "shuffle-transfer", "p2p-shards", "bytes"),
             "disk_write": ("p2p", "background-disk", "disk-write", "bytes")}


class ThreadCpu:
    """Worker thread CPU seconds per task prefix over a block, from distributed's metrics.

    A task's compute time in the task stream is wall time: on a shared host it
    includes the seconds the thread waited for a core. The workers' fine
    performance metrics split it into ``thread-cpu`` and ``thread-noncpu``;
    the p2p shuffle's background threads are reported under ``p2p``, the
    seconds spent spilling task results to disk and back under ``spill``.
    """

    def __init__(self, client):
        self.client = client

    def _snapshot(self) -> dict:
        # Workers send their metrics with the heartbeat: wait for one.
        time.sleep(2.5)
        return self.client.run_on_scheduler(_worker_metrics)

    def __enter__(self):
        self.before = self._snapshot()
        return self

    def __exit__(self, *exc):
        after = self._snapshot()
        out: dict = {}
        self.p2p_bytes = {name: int(after.get(key, 0) - self.before.get(key, 0))
                          for name, key in P2P_BYTES.items()}
        for key, value in after.items():
            if key[-1] != "seconds":
                continue
            delta = value - self.before.get(key, 0.0)
            if key[0] == "execute" and key[2] in ("thread-cpu", "thread-noncpu"):
                out.setdefault(key[1], [0.0, 0.0])[key[2] == "thread-noncpu"] += delta
            elif key[0] == "p2p" and key[1].startswith("background"):
                name = f"p2p {key[1]} {key[2]}"
                out[name] = [out.get(name, [0.0, 0.0])[0] + delta, 0.0]
            elif key[-2] in ("disk-write", "disk-read") and "p2p" not in key[0]:
                # Spilling: the worker moving task results to disk and back.
                name = f"spill {key[-2]}"
                out[name] = [out.get(name, [0.0, 0.0])[0] + delta, 0.0]
        self.seconds = {p: [round(c, 2), round(w, 2)] for p, (c, w) in
                        sorted(out.items(), key=lambda kv: -kv[1][0]) if c + w >= 0.005}


def baseline(client, src: Path, dst: Path) -> float:
    import dask.dataframe as dd

    t0 = time.perf_counter()
    ddf = dd.read_parquet(src)
    out = ddf.shuffle(on="person_id", npartitions=ddf.npartitions, shuffle_method="p2p",
                      force=True)
    client.compute(out.to_parquet(dst, compute=False, schema=DATA.plain_schema(),
                                  compression=COMPRESSION)).result()
    return time.perf_counter() - t0


def copy(client, src: Path, dst: Path) -> float:
    """The least any release of the table costs: ``read_parquet -> to_parquet``."""
    import dask.dataframe as dd

    t0 = time.perf_counter()
    client.compute(dd.read_parquet(src).to_parquet(dst, compute=False,
                                                   schema=DATA.plain_schema(),
                                                   compression=COMPRESSION)).result()
    return time.perf_counter() - t0


#: The plain jobs ``--baseline`` chooses from.
BASELINES = {"shuffle": baseline, "copy": copy}


def anonymize(client, src: Path, dst: Path, leaf_rows, exchange="auto"):
    import dask.dataframe as dd

    from dmondrian.distributed import anonymize_to_parquet

    t0 = time.perf_counter()
    top = anonymize_to_parquet(dd.read_parquet(src), dst, DATA.qis, K, client=client,
                               leaf_rows=leaf_rows, class_column="cls", progress=False,
                               exchange=exchange, allow_unique=list(DATA.allow),
                               write_options={"compression": COMPRESSION})
    return time.perf_counter() - t0, top


def anonymize_lazy(client, src: Path, dst: Path, leaf_rows, exchange="auto"):
    """What a notebook user writes: the lazy frame, then dask's own ``to_parquet``."""
    import dask.dataframe as dd

    import dmondrian

    t0 = time.perf_counter()
    out = dmondrian.anonymize(dd.read_parquet(src), DATA.qis, K, client=client,
                              leaf_rows=leaf_rows, class_column="cls", progress=False,
                              exchange=exchange, allow_unique=list(DATA.allow))
    out.to_parquet(dst, compression=COMPRESSION)
    return time.perf_counter() - t0, None


def _on(path, exchange):
    def job(client, src, dst, leaf_rows):
        return path(client, src, dst, leaf_rows, exchange)

    return job


#: The dmondrian jobs ``--paths`` chooses from, each timed against the plain job:
#: the exchange the plan chooses, or the keys or whole-row one forced.
PATHS = {"to_parquet": anonymize, "lazy": anonymize_lazy,
         "to_parquet_keys": _on(anonymize, "keys"), "to_parquet_rows": _on(anonymize, "rows"),
         "lazy_keys": _on(anonymize_lazy, "keys"), "lazy_rows": _on(anonymize_lazy, "rows")}


def task_seconds(stream) -> dict:
    """Worker compute seconds per task prefix, from ``client.get_task_stream()`` records."""
    from dask.utils import key_split

    out: dict = {}
    for rec in stream:
        for ss in rec.get("startstops", ()):
            if ss["action"] == "compute":
                prefix = key_split(rec["key"])
                out[prefix] = out.get(prefix, 0.0) + ss["stop"] - ss["start"]
    return {p: round(s, 2) for p, s in sorted(out.items(), key=lambda kv: -kv[1])}


def profile_leaf(src: Path, top) -> dict:
    """Seconds the local engine spends per step on the first output partition, in process."""
    import cProfile
    import pstats

    import dask.dataframe as dd

    from dmondrian._dask.leaves import anonymize_output_partition, output_meta
    from dmondrian._dask.shuffle import attach_leaf

    pieces = []
    for i, f in enumerate(sorted(src.glob("part-*.parquet"))):  # a file, a partition
        routed = attach_leaf(pd.read_parquet(f), top, {"number": i})
        pieces.append(routed[routed["_partitions"] == 0])
    part = pd.concat(pieces)
    meta = output_meta(dd.read_parquet(src)._meta, top)
    anonymize_output_partition(part, top, meta, {"number": 0})  # warm caches
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    anonymize_output_partition(part, top, meta, {"number": 0})
    prof.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats
    wanted = {"encode_table": "encode", "partition": "partition", "publish": "publish",
              "text_labels": "labels as text", "_restore_dtypes": "restore dtypes",
              "publish_leaves": "engine (all leaves)"}
    out = {"rows": len(part), "leaves": int(part["__dm_leaf"].nunique()), "total_s": total}
    for (_file, _line, name), row in stats.items():
        if name in wanted and "dmondrian" in _file:
            out[wanted[name] + "_s"] = out.get(wanted[name] + "_s", 0.0) + row[3]
    return {key: round(v, 3) if isinstance(v, float) else v for key, v in out.items()}


def average_ncp(original: pd.DataFrame, classes: np.ndarray) -> float:
    """Mean normalized class span over rows and QIs (nominal: distinct - 1 over global)."""
    total = np.zeros(len(original))
    for q in DATA.qis:
        s = original[q]
        if isinstance(s.dtype, pd.CategoricalDtype):
            v = s.cat.codes.astype(float)
        elif pd.api.types.is_datetime64_any_dtype(s.dtype):
            v = s.astype("int64").astype(float)
        elif pd.api.types.is_numeric_dtype(s.dtype):
            v = s.astype(float)
        else:
            codes = pd.Series(pd.factorize(s)[0], index=s.index)
            d = codes.groupby(classes).transform("nunique").to_numpy()
            total += (d - 1) / max(codes.nunique() - 1, 1)
            continue
        g = v.groupby(classes)
        span = (g.transform("max") - g.transform("min")).to_numpy()
        total += span / (v.max() - v.min())
    return float(total.mean() / len(DATA.qis))


def quality(src: Path, dst: Path) -> dict:
    from dmondrian import local

    original = pd.read_parquet(src).sort_values("person_id", ignore_index=True)
    released = pd.read_parquet(dst, columns=["person_id", "cls"]).sort_values(
        "person_id", ignore_index=True)
    t0 = time.perf_counter()
    ref = local.anonymize(original, DATA.qis, K, class_column="cls",
                          allow_unique=list(DATA.allow))
    local_time = time.perf_counter() - t0
    dist = average_ncp(original, released["cls"].to_numpy())
    loc = average_ncp(original, ref["cls"].to_numpy())
    sizes = released.groupby("cls").size()
    return {"ncp_distributed": dist, "ncp_local": loc, "ncp_ratio": dist / loc,
            "smallest_class": int(sizes.min()), "local_engine_s": local_time}


def scheduler_workers(client) -> dict:
    """The scheduler's view of its workers (:func:`dmondrian._compat.scheduler_workers`).

    Imported here, not at the top: a LocalCluster's worker processes run this
    file's top level again (multiprocessing's spawn), and a fresh cluster's
    workers must not find dmondrian loaded (:func:`fresh_cluster`).
    """
    from dmondrian._compat import scheduler_workers

    return scheduler_workers(client)


def _warm():
    from dmondrian import local

    df = pd.DataFrame({"a": np.arange(100), "b": ["x", "y"] * 50})
    local.anonymize(df, ["a", "b"], 5)


# -- fresh clusters: --small-memory and --worker-memory ------------------------------------------


def fresh_env(home: Path) -> dict:
    """Environment for workers with empty HOME and XDG cache folders."""
    (home / "cache").mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache")}


@contextlib.contextmanager
def fresh_cluster(args, scratch: Path, tag: str):
    """A LocalCluster whose workers start with fresh caches, and its client.

    The ``env`` keyword reaches every worker's Nanny, which sets it in the
    worker process before the worker (and anything the job imports) starts;
    unlike ``distributed.nanny.pre-spawn-environ`` it does not leak into this
    process.
    """
    import logging

    from dask import config
    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    buffers = {"distributed.p2p.comm.buffer": parse_bytes(args.memory_limit) // 8,
               "distributed.p2p.storage.buffer": parse_bytes(args.memory_limit) // 16}
    env = fresh_env(scratch / f"home-{tag}")
    with config.set(buffers), LocalCluster(
            n_workers=args.workers, threads_per_worker=args.threads,
            memory_limit=args.memory_limit, dashboard_address=":0", env=env,
            silence_logs=logging.ERROR,
            local_directory=str(scratch / f"dask-{tag}")) as cluster, \
            Client(cluster) as client:
        seen = client.run(_worker_env)
        for addr, got in seen.items():
            if got["XDG_CACHE_HOME"] != env["XDG_CACHE_HOME"] or got["dmondrian_loaded"]:
                raise RuntimeError(f"worker {addr} did not start fresh: {got}")
        yield cluster, client


def _worker_env() -> dict:
    return {"HOME": os.environ.get("HOME"), "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME"),
            "dmondrian_loaded": "dmondrian" in sys.modules}


def _rss() -> int:
    import psutil

    gc.collect()
    return psutil.Process().memory_info().rss


def worker_rss(client) -> dict:
    """RSS of every worker process after a ``gc.collect()``, keyed by worker name."""
    names = {a: str(w["name"]) for a, w in scheduler_workers(client).items()}
    return {names[a]: v for a, v in sorted(client.run(_rss).items(), key=lambda kv: names[kv[0]])}


def _worker_states(client) -> dict:
    """Memory (RSS), spilled bytes, status and limit of every worker, by name."""
    out = {}
    for addr, w in scheduler_workers(client).items():
        m = w.get("metrics", {})
        out[str(w["name"])] = {"address": addr, "status": w.get("status"),
                               "memory": int(m.get("memory", 0)),
                               "managed_bytes": int(m.get("managed_bytes", 0)),
                               "spilled_bytes": m.get("spilled_bytes", {}),
                               "memory_limit": w.get("memory_limit")}
    return out


class StatusWatch:
    """Worker addresses seen (a replaced worker process has a new one) and paused samples."""

    def __init__(self, client, every=0.5):
        self.client, self.every = client, every
        self.addresses, self.paused_samples = set(), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._stop.is_set():
            try:
                workers = scheduler_workers(self.client)
                self.addresses.update(workers)
                self.paused_samples += sum(w.get("status") == "paused" for w in workers.values())
            except Exception:  # noqa: BLE001 - a missed sample is not an error
                pass
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def pauses(client, addresses, now: float) -> dict:
    """Times each worker was paused and the seconds it spent paused, from scheduler events."""
    out = {}
    for addr in sorted(addresses):
        try:
            events = client.get_events(addr)
        except Exception:  # noqa: BLE001 - a worker that left may have no topic
            continue
        count, seconds, since = 0, 0.0, None
        for ts, msg in events:
            if not isinstance(msg, dict) or msg.get("action") != "worker-status-change":
                continue
            if msg.get("status") == "paused":
                count, since = count + 1, ts
            elif msg.get("prev-status") == "paused" and since is not None:
                seconds, since = seconds + ts - since, None
        if since is not None:
            seconds += now - since
        out[addr] = {"pauses": count, "paused_s": round(seconds, 1)}
    return out


def small_memory(args, scratch: Path, src: Path) -> dict:
    import dask.dataframe as dd

    import dmondrian

    dst = scratch / "anonymized"
    job: dict = {}

    def run(client):
        t0 = time.perf_counter()
        try:
            out = dmondrian.anonymize(dd.read_parquet(src), DATA.qis, K, client=client,
                                      progress=False, allow_unique=list(DATA.allow))
            out.to_parquet(dst)
            job["seconds"] = time.perf_counter() - t0
        except BaseException as exc:  # noqa: BLE001 - reported, the main thread decides
            job["error"] = f"{type(exc).__name__}: {exc}"
            job["seconds"] = time.perf_counter() - t0

    with fresh_cluster(args, scratch, "small") as (cluster, client):
        limit = min(w["memory_limit"] for w in
                    scheduler_workers(client).values())
        with StatusWatch(client) as watch, PeakMemory(client) as mem:
            thread = threading.Thread(target=run, args=(client,), daemon=True)
            t0 = time.time()
            thread.start()
            thread.join(args.timeout)
        finished = not thread.is_alive() and "error" not in job
        result = {
            "case": "small-memory", "rows": args.rows, "workers": args.workers,
            "threads_per_worker": args.threads, "memory_limit_bytes": limit,
            "path": "dmondrian.anonymize(dd.read_parquet(...)).to_parquet(...)",
            "fresh_caches": True, "timeout_s": args.timeout,
            "finished": finished,
            "wall_s": round(job["seconds"], 2) if "seconds" in job else None,
            "error": job.get("error"),
            "peak_worker_memory": int(mem.peak),
            "peak_over_limit": round(mem.peak / limit, 3),
            "pauses_by_worker": pauses(client, watch.addresses, time.time()),
            "paused_samples": watch.paused_samples,
            "worker_processes_seen": len(watch.addresses),
        }
        result["pauses"] = sum(p["pauses"] for p in result["pauses_by_worker"].values())
        result["worker_replaced"] = len(watch.addresses) > args.workers
        if thread.is_alive():
            result["status"] = f"did not finish in {args.timeout:.0f} s"
            result["workers_at_timeout"] = _worker_states(client)
        elif "error" in job:
            result["status"] = f"failed after {job['seconds']:.1f} s: {job['error']}"
            result["workers_at_end"] = _worker_states(client)
        else:
            result["status"] = f"finished in {job['seconds']:.1f} s"
            result["read_back"] = smallest_class(dst, args.rows)
            result["k_checked_on_disk"] = result["read_back"]["k_ok"]
        result["elapsed_s"] = round(time.time() - t0, 1)
    return result


def _plain_job(client, src: Path, dst: Path) -> None:
    baseline(client, src, dst)


def _anonymize_to_parquet_job(client, src: Path, dst: Path) -> None:
    import dask.dataframe as dd

    from dmondrian.distributed import anonymize_to_parquet

    anonymize_to_parquet(dd.read_parquet(src), dst, DATA.qis, K, client=client, progress=False,
                         allow_unique=list(DATA.allow))


def _lazy_job(client, src: Path, dst: Path) -> None:
    import dask.dataframe as dd

    import dmondrian

    dmondrian.anonymize(dd.read_parquet(src), DATA.qis, K, client=client,
                        progress=False, allow_unique=list(DATA.allow)).to_parquet(dst)


WORKER_MEMORY_JOBS = {
    "plain read-shuffle-write": _plain_job,
    "dmondrian anonymize_to_parquet": _anonymize_to_parquet_job,
    "dmondrian lazy anonymize().to_parquet": _lazy_job,
}


def worker_memory(args, scratch: Path, src: Path) -> dict:
    jobs = {}
    for i, (name, job) in enumerate(WORKER_MEMORY_JOBS.items()):
        with fresh_cluster(args, scratch, f"mem{i}") as (_cluster, client):
            started = worker_rss(client)
            t0 = time.perf_counter()
            job(client, src, scratch / f"out{i}")
            seconds = time.perf_counter() - t0
            jobs[name] = {"seconds": round(seconds, 2), "rss_at_start": started,
                          "rss_after": worker_rss(client)}
        if i:  # the dmondrian jobs' releases, read back
            jobs[name]["read_back"] = smallest_class(scratch / f"out{i}", args.rows)
        shutil.rmtree(scratch / f"out{i}", ignore_errors=True)
        print(f"{name}: {jobs[name]}", file=sys.stderr)
    plain = jobs["plain read-shuffle-write"]["rss_after"]
    result = {"case": "worker-memory", "rows": args.rows, "workers": args.workers,
              "threads_per_worker": args.threads, "memory_limit": args.memory_limit,
              "fresh_caches": True, "jobs": jobs, "target": "dmondrian <= plain + 100 MB"}
    for name in list(WORKER_MEMORY_JOBS)[1:]:
        after = jobs[name]["rss_after"]
        extra = {w: after[w] - plain[w] for w in after if w in plain}
        result[f"extra_mb_by_worker ({name})"] = {w: round(v / 2**20, 1)
                                                  for w, v in extra.items()}
        result[f"max_extra_mb ({name})"] = round(max(extra.values()) / 2**20, 1)
        # Which worker ran the heavier tasks can differ between clusters: also largest vs largest.
        result[f"largest_rss_mb ({name})"] = round(max(after.values()) / 2**20, 1)
    result["largest_rss_mb (plain)"] = round(max(plain.values()) / 2**20, 1)
    return result


def compare_jobs(args, scratch: Path, src: Path, gen_s: float, input_bytes: int) -> dict:
    """The default case: plain shuffle vs each of ``args.paths`` on one warm cluster."""
    from dask import config
    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster, get_task_stream

    rows = args.rows
    # p2p's default 1 GiB send buffer is sized for big workers; both runs get
    # the same, smaller one.
    buffers = {"distributed.p2p.comm.buffer": parse_bytes(args.memory_limit) // 8,
               "distributed.p2p.storage.buffer": parse_bytes(args.memory_limit) // 16}
    paths = args.paths
    with config.set(buffers), LocalCluster(
            n_workers=args.workers, threads_per_worker=args.threads,
            memory_limit=args.memory_limit, dashboard_address=":0",
            local_directory=str(scratch / "dask")) as cluster, Client(cluster) as client:
        limit = min(w["memory_limit"] for w in
                    scheduler_workers(client).values())
        # Imports (once per fresh process) stay out of the timings, in the
        # workers and here.
        client.run(_warm)
        _warm()
        rounds, last, read_back = [], {}, {}
        jobs = ["baseline", *paths]
        for r in range(args.repeat):
            # Rotate which job goes first, and reverse every other round, so
            # that a drift of the shared machine's speed over the run does not
            # favour any of them.
            order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
            order = order if r % 2 == 0 else order[::-1]
            seconds, cpu_s, phases = {}, {}, {}
            os.sync()
            for job in order:
                dst = scratch / f"out-{job}"
                with ThreadCpu(client) as thr, PeakMemory(client) as mem, \
                        PeakDisk(scratch / "dask") as disk, \
                        get_task_stream(client) as ts, CpuSeconds(client) as cpu:
                    if job == "baseline":
                        seconds[job], top = BASELINES[args.baseline](client, src, dst), None
                    else:
                        seconds[job], top = PATHS[job](client, src, dst, args.leaf_rows)
                cpu_s[job] = cpu.seconds
                last[job] = {"thr": thr, "mem": mem, "disk": disk, "ts": ts, "top": top or
                             last.get(job, {}).get("top")}
                if top is not None:
                    phases[job] = {lab: round(t, 1) for lab, t in top.timings.items()}
                if job != "baseline" and r == args.repeat - 1:
                    # k checked on every release as written, not taken from the plan.
                    read_back[job] = smallest_class(dst, rows)
                    print(f"{job}: read back {read_back[job]}", file=sys.stderr)
                if not (r == args.repeat - 1 and job == "to_parquet"):
                    # The last release of anonymize_to_parquet stays for --quality.
                    shutil.rmtree(dst, ignore_errors=True)
                # The files a job wrote (its release, p2p's spill) reach the disk
                # before the next job starts, not during it.
                os.sync()
            rnd = {"baseline_s": round(seconds["baseline"], 2)}
            for job in paths:
                rnd[f"{job}_s"] = round(seconds[job], 2)
                rnd[f"{job}_ratio"] = round(seconds[job] / seconds["baseline"], 3)
                rnd[f"{job}_cpu_ratio"] = round(cpu_s[job] / cpu_s["baseline"], 3)
            rnd["order"] = order
            rnd.update({f"{job}_phases_s": value for job, value in phases.items()})
            rounds.append(rnd)
            print(f"round {r + 1}/{args.repeat}: {rounds[-1]}", file=sys.stderr)
        top = last.get("to_parquet", {}).get("top")
        leaf_profile = profile_leaf(src, top) if args.profile_leaf and top else None
    result = {
        "rows": rows, "data": args.data, "qis": DATA.qis, "k": K, "workers": args.workers,
        "threads_per_worker": args.threads, "memory_limit_bytes": limit,
        "input_parquet_bytes": input_bytes,
        "input_partitions": len(list(src.glob("part-*.parquet"))),
        "leaf_rows_asked": args.leaf_rows, "generate_s": round(gen_s, 2),
        "baseline": args.baseline, "paths": paths, "rounds": rounds,
    }
    for job in paths:
        # The figures the report compares: medians of the per-round ratios.
        result[f"median_{job}_ratio"] = round(float(np.median(
            [r[f"{job}_ratio"] for r in rounds])), 3)
        result[f"median_{job}_cpu_ratio"] = round(float(np.median(
            [r[f"{job}_cpu_ratio"] for r in rounds])), 3)
    if "to_parquet" in paths:
        # The names earlier reports used for anonymize_to_parquet.
        result["ratio"] = rounds[-1]["to_parquet_ratio"]
        result["median_ratio"] = result["median_to_parquet_ratio"]
        result["median_cpu_ratio"] = result["median_to_parquet_cpu_ratio"]
    if top is not None:
        result.update({
            "top_phase_passes": top.passes, "leaves": top.n_leaves, "leaf_rows": top.leaf_rows,
            "exchange": top.exchange,
            "largest_leaf": int(top.leaf_counts.max()),
            "phase_wall_s": {lab: round(s, 2) for lab, s in top.timings.items()},
        })
    for job in jobs:
        result[f"peak_worker_memory_{job}"] = int(last[job]["mem"].peak)
        result[f"peak_spill_on_disk_{job}"] = int(last[job]["disk"].peak)
        result[f"task_compute_s_{job}"] = task_seconds(last[job]["ts"].data)
        result[f"thread_cpu_noncpu_s_{job}"] = last[job]["thr"].seconds
        # Both exchanges of the keys path together; the bytes a row costs in them.
        result[f"p2p_bytes_per_row_{job}"] = {
            name: round(b / rows, 1) for name, b in last[job]["thr"].p2p_bytes.items()}
    result.update(python=platform.python_version(), cpus=os.cpu_count())
    if leaf_profile is not None:
        result["leaf_profile"] = leaf_profile
    if args.quality and "to_parquet" in paths:
        result.update(quality(src, scratch / "out-to_parquet"))
    for job, found in read_back.items():
        result[f"read_back_{job}"] = found
    result["k_checked_on_disk"] = all(found["k_ok"] for found in read_back.values())
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=None,
                    help="rows of data (default 20M; 2M with --worker-memory)")
    ap.add_argument("--quick", action="store_true", help="500,000 rows")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--memory-limit", default=None,
                    help="per worker (default 2GB; 700MB with --small-memory)")
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--leaf-rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of both jobs, alternating which runs first; the medians of "
                         "the per-round ratios are reported (the other figures: last round)")
    ap.add_argument("--paths", default="to_parquet",
                    type=lambda v: [p for p in v.split(",") if p],
                    help="dmondrian jobs timed against the plain shuffle, comma-separated: "
                         "to_parquet (anonymize_to_parquet), lazy (anonymize(...).to_parquet); "
                         "default to_parquet")
    ap.add_argument("--quality", action="store_true", help="compare NCP with the local engine")
    ap.add_argument("--profile-leaf", action="store_true",
                    help="profile the local engine on one output partition")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--small-memory", action="store_true",
                      help="the lazy path on 2 x 700 MB workers with fresh caches, time-bounded")
    mode.add_argument("--worker-memory", action="store_true",
                      help="worker RSS after dmondrian vs after a plain shuffle, fresh clusters")
    ap.add_argument("--timeout", type=float, default=900,
                    help="--small-memory: seconds before the job is reported unfinished")
    ap.add_argument("--tmp", default=None, help="scratch directory (default: system temp)")
    ap.add_argument("--input", default=None,
                    help="input dataset folder, kept after the run; files already there are "
                         "reused (default: generated in the scratch directory, then removed)")
    ap.add_argument("--compression", default="snappy",
                    help="Parquet compression of the input, the plain output and the release "
                         "(default snappy, pyarrow's; zstd writes about 2/3 of the bytes)")
    ap.add_argument("--gen-jobs", type=int, default=1,
                    help="processes generating the input (default 1)")
    ap.add_argument("--smallest-class", action="store_true",
                    help="(kept for older commands: every release is read back now)")
    ap.add_argument("--data", choices=sorted(DATASETS), default="census",
                    help="census (default), floats: bench_local's continuous floats, heavy "
                         "ties, missing ints and a long-tailed nominal, or wide: census and "
                         "60 more columns (floats, ints, words), 4 QIs, or text4k: census with a "
                         "4 kB text a row; use its own --input")
    ap.add_argument("--baseline", choices=sorted(BASELINES), default=None,
                    help="the plain job: shuffle (read, p2p shuffle, write; the default) or "
                         "copy (read, write; the default with --data wide)")
    ap.add_argument("--out", default=None, help="JSON report (default: results/distributed"
                                                "[_small_memory|_worker_memory].json)")
    args = ap.parse_args(argv)
    global DATA, COMPRESSION
    DATA = DATASETS[args.data]
    COMPRESSION = args.compression
    args.baseline = args.baseline or ("copy" if args.data in ("wide", "text4k") else "shuffle")
    unknown = [p for p in args.paths if p not in PATHS]
    if unknown or not args.paths:
        ap.error(f"--paths: choose from {', '.join(PATHS)} (got {unknown or 'nothing'})")
    if args.quick:
        args.rows = 500_000
    elif args.rows is None:
        args.rows = 2_000_000 if args.worker_memory else 20_000_000
    rows = args.rows
    DATA = dataclasses.replace(DATA, allow=DATA.allowed(rows))
    if args.memory_limit is None:
        args.memory_limit = "700MB" if args.small_memory else "2GB"
    suffix = "_small_memory" if args.small_memory else "_worker_memory" if args.worker_memory \
        else ""
    args.out = args.out or str(Path(__file__).parent / "results" / f"distributed{suffix}.json")

    scratch = Path(tempfile.mkdtemp(prefix="dmondrian-bench-", dir=args.tmp))
    try:
        src = Path(args.input) if args.input else scratch / "input"
        t0 = time.perf_counter()
        write_input(src, rows, min(args.rows_per_file, rows), args.gen_jobs)
        expected = -(-rows // min(args.rows_per_file, rows))
        if len(list(src.glob("part-*.parquet"))) != expected:
            sys.exit(f"--input {src}: holds other files than {expected} of "
                     f"{min(args.rows_per_file, rows)} rows; use an empty folder")
        gen_s = time.perf_counter() - t0
        input_bytes = sum(f.stat().st_size for f in src.glob("part-*.parquet"))
        if args.small_memory:
            result = {**small_memory(args, scratch, src), "input_parquet_bytes": input_bytes,
                      "generate_s": round(gen_s, 2)}
        elif args.worker_memory:
            result = {**worker_memory(args, scratch, src), "input_parquet_bytes": input_bytes,
                      "generate_s": round(gen_s, 2)}
        else:
            result = compare_jobs(args, scratch, src, gen_s, input_bytes)
        result.update(python=platform.python_version(), cpus=os.cpu_count(),
                      disk_free_after=shutil.disk_usage(scratch).free)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    width = max(map(len, result))
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    checked = [result.get("k_checked_on_disk")] + [
        job.get("read_back", {}).get("k_ok") for job in result.get("jobs", {}).values()
        if "read_back" in job]
    if False in checked:
        sys.exit("a release read back has a class below k or misses rows: see the report")
    if args.small_memory and not result["finished"]:
        # A job thread may still be blocked on the closed cluster: do not wait for it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
