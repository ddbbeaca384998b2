"""The Dask engine: Mondrian on a dask DataFrame larger than memory.

The client cuts the table near the root from summaries of distributed passes, until every region
fits in memory (a leaf); the rows are then shuffled by leaf into output partitions, and each output
partition runs the local engine on its leaves. The steps, each a module of :mod:`dmondrian._dask`:

1. the domain pass (:mod:`~dmondrian._dask.domain_pass`): every QI's global
   domain, the root's summary and a row sample;
2. the top phase (:mod:`~dmondrian._dask.top_phase`): cuts planned on samples, kept only if
   exact counts allow them (:mod:`~dmondrian._dask.sensitive_pass` for l and t);
3. the shuffle (:mod:`~dmondrian._dask.shuffle`): every row routed to its
   leaf and moved to its leaf's output partition;
4. the leaves (:mod:`~dmondrian._dask.leaves`): the local engine on all the
   leaves of an output partition in one call;
5. the output: a lazy dask DataFrame, or Parquet files written by the tasks that anonymized them
   (:mod:`~dmondrian._dask.counting_write` when the shuffle pass also counts the leaves).

Every released class has at least ``k`` rows: a cut is kept only on exact counts, and each output
partition refuses a leaf whose rows differ from the counted ones. See docs/design.md, section "The
Dask engine", for the algorithm step by step, its guarantees, sizes and limits.
"""

from __future__ import annotations

import time

import numpy as np

from ._dask.cluster import cores_per_worker, lasting_client, release, resolve_client, session
from ._dask.columns import read_columns
from ._dask.counting_write import anonymize_counting, cuts_certain
from ._dask.domain_pass import run_domain_pass
from ._dask.entity_noise import class_shares
from ._dask.entity_pairs import keep_pair_cuts, node_pair_counts
from ._dask.entity_pass import keep_entity_cuts, leaf_entities
from ._dask.exchange import anonymize_keys, check_exchange, choose_exchange, shipped_sizes
from ._dask.leaves import anonymize_output_partition, lazy_meta, output_meta
from ._dask.options import SAMPLE_ROWS, DaskOptions, check_dask_options, default_leaf_rows
from ._dask.parquet_release import release_sink, write_parquet
from ._dask.plan import TopPlan, partition_of_leaves
from ._dask.planner import PlanConfig
from ._dask.sensitive_pass import keep_diverse_cuts, leaf_histograms, sensitive_domain
from ._dask.shipped_keys import key_dtypes, qi_encodings
from ._dask.shuffle import check_counted, distributed_shuffle_method, route_and_shuffle
from ._dask.shuffle_sizes import shuffle_sizes
from ._dask.top_phase import cut_regions
from ._dask.watchdog import check_stall_timeout, stall_timeout
from ._dask.write_job import anonymize_and_write, csv_release, release_counts, written_report
from ._dask.written_check import checked_now_or_later, refuse_written_index
from .evaluation.manifest import option_parameters, writer_fields
from .io.parquet_sink import check_column_names
from .io.staging import commit_with_manifest, staged_folder
from .options import ANONYMIZE, DASK, DASK_PLAN, WRITE, takes_options
from .partition.cut_tree import flatten, leaf_nodes
from .privacy.constraints import KAnonymity, refuse_empty
from .release.identifiers import without_identifiers
from .release.row_order import row_order_seed, shuffle_partition, takes_shuffle

__all__ = ["anonymize", "anonymize_to_parquet", "anonymize_to_csv", "plan", "apply_plan",
           "TopPlan", "default_leaf_rows", "session", "SAMPLE_ROWS"]


@takes_options(ANONYMIZE, DASK)
def anonymize(ddf, quasi_identifiers, k, **options):
    """k-anonymize a dask DataFrame with Mondrian; returns a lazy dask DataFrame.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The table; it may be far larger than memory (e.g. ``dd.read_parquet``).
    quasi_identifiers, k, mode, generalization, max_depth, hierarchies, class_column, qi_kinds
        As in :func:`dmondrian.local.anonymize`. ``class_column`` ids are
        unique over the whole table (``leaf_id * 2**32 + local id``).
    leaf_rows : int, optional
        Regions up to this many rows are anonymized in memory by one task. Default: a fifth of a
        worker thread's memory budget (its worker's limit at dask's pause fraction, less what the
        worker already holds and the p2p shuffle's buffers, shared by its threads) over what a row
        costs in an output partition (about three times its in-memory size, measured on the first
        partition, plus 28 bytes per QI and 40; on the keys path three times the bytes it ships
        instead of its size), clipped to [1,000, 4,000,000] rows. Any value is raised to ``2 * k``.
        Workers too small for any plan raise :class:`~dmondrian.errors.MemoryLimitError`, naming the
        smallest memory limit that works, before the passes that would need it.
    client : distributed.Client, optional
        Cluster to use. Default: the current default client, else the scheduler at
        ``$DASK_SCHEDULER_ADDRESS``, else an embedded ``LocalCluster``, closed before this returns
        (the result is then computed by whatever scheduler is active; :func:`session` or the writers
        keep one cluster for the whole job).
    progress : bool, optional
        Show a progress bar per pass; default: when a terminal or notebook is attached.
    stall_timeout : float or None, default 120
        Seconds a pass may go without any finished task while workers are paused for lack of memory;
        it is then cancelled and :class:`~dmondrian.errors.JobStalledError` names the paused workers
        and their memory. None waits for ever. The passes made here are watched, and the writers'
        whole job; the lazy result is computed by the caller, unwatched.
    exchange : {"auto", "keys", "rows"}, default "auto"
        What the shuffle moves. "keys": only the QIs' keys (and the sensitive and noised columns),
        the published values travel back, and each input partition is read again and written with
        them in place: output partition ``i`` holds input partition ``i``'s rows, in input order.
        "rows": every column travels to its leaf, and output partitions are runs of leaves. "auto"
        (or None): the path a cost model fitted to measured CPU seconds estimates cheaper, from the
        QIs, the other columns' bytes a row and the partitions a row (docs/design.md, "Moving only
        keys"). Given the same ``leaf_rows``, the release's classes and labels are the same either
        way (the default ``leaf_rows`` is larger on the keys path).
    shuffle_method : str, optional
        How the rows move to their leaves ("p2p", "tasks", "disk"). Default: "p2p" when ``client``
        is given (compute the result with that client), else dask's choice at compute time.

    suppression, suppressed
        As in :func:`dmondrian.local.anonymize`, applied in each leaf with its share of the budget,
        ``floor(suppression * leaf rows)``: the total stays within ``floor(suppression * n)``, and
        each leaf suppresses none or at least ``k`` rows, so the masked rows form one class of at
        least ``k`` (:mod:`dmondrian.privacy.suppression`).
    entity, max_contributions, max_classes
        As in :func:`dmondrian.local.anonymize`: every class holds ``k`` distinct entities, l and t
        count (entity, value) pairs, and noise bounds each entity's contributions with the same
        scale. Each leaf's people are counted exactly (up to ``k`` distinct entity ids per leaf,
        hashed; enough to decide ">= k"), in the shuffle pass when the writers defer their counts,
        else in a pass of their own, and a cut whose children hold fewer is undone. With l or t, one
        pass counts the exact (entity, value) pairs of every region of the top phase instead. With
        noise, one pass shares each entity's ``max_classes`` among the leaves it has rows in. The
        column travels to the leaves with the rows, whose local runs count entities below, and is
        never written. See docs/design.md, section "Entities".
    l, l_kind, c, t, sensitive, constraints
        l-diversity and t-closeness, as in :func:`dmondrian.local.anonymize`. After the top phase,
        one pass counts the sensitive values of every leaf exactly and undoes, from the root down,
        any cut whose children break the constraint; each leaf's local run then enforces it below,
        t-closeness against the whole dataset's distribution.

    Returns
    -------
    dask.dataframe.DataFrame
        Same columns, QIs generalized (labels as Categoricals of text, as the local engine returns
        them; each partition has its own categories, so dask knows none, and dask's ``to_parquet``
        writes them as Parquet dictionaries); the input's index values with unknown divisions; rows
        grouped by leaf. Its ``to_parquet`` runs :func:`anonymize_to_parquet`'s writer on this plan,
        labels without min/max statistics unless told otherwise
        (:class:`dmondrian._dask.lazy_frame.AnonymizedFrame`).

    Raises
    ------
    dmondrian.errors.IdentifyingColumnError
        A column released as is singles out rows: judged by the domain pass.
    dmondrian.errors.DMondrianError
        On bad input, as the local engine.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd
    >>> from distributed import Client
    >>> df = pd.DataFrame({"age": [23, 23, 24, 25, 50, 51, 52, 54],
    ...                    "zip": [11000, 11000, 11001, 11002, 12000, 12000, 12001, 12002]})
    >>> with Client(processes=False, n_workers=1, dashboard_address=":0") as client:
    ...     out = anonymize(dd.from_pandas(df, npartitions=2), ["age", "zip"], k=2,
    ...                     client=client).compute()
    >>> out.sort_index()["age"].tolist()
    ['23', '23', '[24, 25]', '[24, 25]', '[50, 51]', '[50, 51]', '[52, 54]', '[52, 54]']
    """
    shuffle_method = DASK["shuffle_method"].check_choice(options.pop("shuffle_method"))
    # The shuffle pass counts the leaves (one pass less) when the cluster
    # outlives this call and no count can undo a cut across output partitions.
    lasting = lasting_client(options["client"])
    top = plan(ddf, quasi_identifiers, k, _defer_counts="certain" if lasting else False, **options)
    if not top.counted:
        from ._dask.lazy_frame import as_release  # dask.dataframe: imported on first use

        method = shuffle_method or distributed_shuffle_method()
        source = without_identifiers(ddf, top.options.identifiers)
        lazy = (anonymize_keys(source, top, method, output_meta(source._meta, top),
                               lazy_meta(source._meta, top)) if top.exchange == "keys"
                else anonymize_counting(source, top, method))
        return as_release(lazy, top, _release_writer(ddf, top, method), ddf)
    if shuffle_method is None and options["client"] is not None:
        shuffle_method = distributed_shuffle_method()
    return apply_plan(ddf, top, shuffle_method)


@takes_options(ANONYMIZE, DASK_PLAN)
def plan(ddf, quasi_identifiers, k, *, sample_rows=SAMPLE_ROWS, _defer_counts=False,
         _check_in_write=False, _check_identifying=True, _read_needed=False, **options) -> TopPlan:
    """Run the domain pass and the top phase; return the cut tree (steps 1-2).

    Parameters are those of :func:`anonymize`; ``sample_rows`` sets the sample size per expected
    leaf (larger: more accurate medians, bigger sketches). The passes run now, on the resolved
    cluster. (``_defer_counts`` is for :func:`anonymize_to_parquet` (True) and :func:`anonymize`
    ("certain": only when no exact count can undo a cut across output partitions): the shuffle pass
    then counts the leaves, see :mod:`dmondrian._dask.counting_write`. ``_check_in_write``, for
    :func:`anonymize_to_parquet`: the domain pass reads only the QIs and the write tasks check for
    identifying columns, :mod:`dmondrian._dask.written_check`. ``_check_identifying`` False, for
    :func:`dmondrian.plans.dask_fit.fit_plan_dask`, which releases nothing: no check at all;
    ``_read_needed`` True, for it too: the passes read only the QIs and the columns the leaves read,
    ``TopPlan.columns`` lists those.)

    Returns
    -------
    TopPlan

    Raises
    ------
    dmondrian.errors.IdentifyingColumnError
        When a column released as is singles out rows (unless the write
        tasks are to check; see :mod:`dmondrian.release.identifiers`).
    """
    anonymize_options = {name: options[name] for name in ANONYMIZE}
    opts = check_dask_options(ddf, quasi_identifiers, k, options["leaf_rows"], anonymize_options)
    timeout = check_stall_timeout(options["stall_timeout"])
    exchange = check_exchange(options["exchange"])
    # Direct identifiers are never read: no pass, no shuffle carries them (nor, in
    # a fit, any column but the QIs and the leaves' inputs).
    ddf = (ddf[read_columns(ddf.columns, opts)] if _read_needed
           else without_identifiers(ddf, opts.identifiers))
    cluster_client, owned = resolve_client(options["client"])
    try:
        with stall_timeout(timeout):
            return _plan(cluster_client, ddf, opts, options["progress"], int(sample_rows),
                         defer_counts=_defer_counts, exchange=exchange,
                         check_in_write=_check_in_write, check_identifying=_check_identifying)
    finally:
        release(owned)


def _plan(client, ddf, opts: DaskOptions, progress, sample_rows: int,
          defer_counts: bool | str = False, exchange: str | None = None,
          check_in_write: bool = False, check_identifying: bool = True) -> TopPlan:
    """Steps 1-2 on ``client``: the domain pass, the top phase, the sensitive passes."""
    timings, clock = {}, time.perf_counter()

    def lap(label):
        nonlocal clock
        now = time.perf_counter()
        timings[label] = now - clock
        clock = now

    domain, root, positional, sizing, identifying, person_keys = run_domain_pass(
        client, ddf, opts, progress, sample_rows,
        check_identifying=check_identifying and not check_in_write)
    written_check = checked_now_or_later(check_in_write and check_identifying, ddf._meta,
                                         opts, identifying, person_keys)
    lap("pass 1: domain (and leaf size)")
    refuse_empty(domain.n_rows)
    KAnonymity(opts.k).check_table(domain.n_rows)
    key_bytes, n = [t.itemsize for t in key_dtypes(domain)], (domain.n_rows, ddf.npartitions)
    exchange = choose_exchange(exchange, ddf._meta, sizing.row_bytes, opts, key_bytes, *n)
    shipped, leaf_rows = shipped_sizes(exchange, ddf._meta, sizing, opts, key_bytes)
    cfg = PlanConfig(opts.k, opts.mode == "relaxed", leaf_rows, opts.max_depth,
                     objective=opts.objective, sample_rows=sample_rows)
    sizes = shuffle_sizes(client, ddf, sizing, leaf_rows, domain.n_rows, len(opts.qis), shipped)
    defer = defer_counts
    if defer_counts == "certain":
        def defer(nodes):
            leaves = leaf_nodes(nodes)
            partitions = sizes.pack(_estimated_counts(nodes, leaves))
            return cuts_certain(flatten(nodes, leaves), partition_of_leaves(
                partitions, len(leaves)), root, opts.k)
    nodes, passes, counted = cut_regions(client, ddf, opts, domain, root, cfg, progress, defer, lap)
    sens = None
    if opts.sensitive is not None:
        sens = sensitive_domain(client, ddf, opts, progress)
        passes += 2
        if opts.entity is None:
            keep_diverse_cuts(nodes, leaf_histograms(client, ddf, opts, domain, nodes, sens,
                                                     progress), sens)
        else:
            # People, not rows: k, l and t on exact (entity, value) pairs, in one pass.
            sens = keep_pair_cuts(nodes, node_pair_counts(client, ddf, opts, domain, nodes,
                                                          sens, progress), sens, opts)
        lap("sensitive passes")
    elif opts.entity is not None and counted:
        # (Uncounted, the shuffle pass counts the people too: counting_write.)
        keep_entity_cuts(nodes, leaf_entities(client, ddf, opts, domain, nodes, progress), opts.k)
        passes += 1
        lap("entity pass")
    shares = None
    if opts.entity is not None and opts.noise:
        shares = class_shares(client, ddf, opts, domain, nodes, progress)
        passes += 1
        lap("entity shares pass")
    leaves = leaf_nodes(nodes)
    counts = _estimated_counts(nodes, leaves)
    depths = np.asarray([nodes[j].depth for j in leaves], dtype=np.int64)
    return TopPlan(domain, flatten(nodes, leaves), counts, depths, sizes.pack(counts), passes,
                   leaf_rows, opts, list(ddf.columns), ddf._meta.index.name, sens, timings,
                   cores_per_worker(client), positional, counted,
                   encodings=qi_encodings(domain, ddf._meta), identifying=identifying,
                   exchange=exchange, written_check=written_check, class_shares=shares,
                   **sizes.as_plan_fields())


def _release_writer(ddf, top: TopPlan, shuffle_method):
    """What the lazy release's ``to_parquet`` runs: :func:`anonymize_to_parquet`'s graph
    (one task anonymizes and writes each output partition), on its plan."""
    def write(path, write_options, storage_options):
        return write_parquet(ddf, top, release_sink(ddf, top, path, write_options, storage_options),
                             shuffle_method, oversized_ok=True)

    return write


def _estimated_counts(nodes, leaves) -> np.ndarray:
    """Every leaf's rows (exact after a counting pass, else the sample's estimate)."""
    return np.asarray([int(round(nodes[j].n)) for j in leaves], dtype=np.int64)


def apply_plan(ddf, top: TopPlan, shuffle_method=None):
    """Build the lazy shuffle-and-anonymize graph for a plan (steps 3-4).

    ``shuffle_method`` goes to dask's shuffle ("p2p", "tasks", "disk"); None lets dask choose when
    the graph is computed (p2p with a default distributed client, else on disk).

    Returns
    -------
    dask.dataframe.DataFrame
    """
    ddf = without_identifiers(ddf, top.options.identifiers)
    from ._dask.lazy_frame import as_release  # dask.dataframe: imported on first use

    if top.exchange == "keys":
        check_counted(top)  # the lazy result cannot start again on a count's verdict
        return as_release(anonymize_keys(ddf, top, shuffle_method, output_meta(ddf._meta, top),
                                         lazy_meta(ddf._meta, top)), top,
                          _release_writer(ddf, top, shuffle_method), ddf)
    shuffled, plan_d = route_and_shuffle(ddf, top, shuffle_method)
    # The tasks get the small meta; the collection declares 32-bit label codes.
    return as_release(shuffled.map_partitions(anonymize_output_partition, plan_d,
                                              output_meta(ddf._meta, top),
                                              meta=lazy_meta(ddf._meta, top),
                                              clear_divisions=True), top,
                      _release_writer(ddf, top, shuffle_method), ddf)


@takes_options(ANONYMIZE, DASK_PLAN, WRITE)
def anonymize_to_parquet(ddf, path, quasi_identifiers, k, *, _measure=None, **options) -> TopPlan:
    """Anonymize and write a Parquet dataset, the whole job on one cluster.

    Each output partition is written by the task that anonymizes it, as
    ``path/part.<i>.parquet``, labels stored as Parquet dictionaries (read
    back as Categoricals; see :mod:`dmondrian.io.parquet_sink`). An embedded
    LocalCluster (when no cluster is found) lives until the files are written.

    Parameters
    ----------
    ddf, quasi_identifiers, k
        As in :func:`anonymize`, whose other keywords are accepted too.
    path : str or os.PathLike
        The dataset folder (local path or fsspec URL).
    write_options : dict, optional
        ``write_index`` (default False), ``shuffle_rows`` (default True: each
        file's rows in an order seeded by ``random_state``, so that the
        input's order reveals nothing; :mod:`dmondrian.release.row_order`) and
        keywords for :func:`pyarrow.parquet.write_table` (``compression``, ...).
    storage_options : dict, optional
        Keywords for the fsspec filesystem of ``path``.
    manifest : bool, default False
        Publish ``path.manifest.json`` with the files, as the command line does
        (:func:`dmondrian.io.staging.staged_folder`: ``path`` must not exist), its metrics counted
        by the write tasks when every QI is published as labels (``generalization="range"``; else
        not measured: :func:`dmondrian.evaluation.manifest.writer_fields`). False by default: this
        writer writes into a folder the caller may own already.

    Returns
    -------
    TopPlan
        The plan that was applied (leaf sizes, number of passes, timings).

    Raises
    ------
    dmondrian.errors.IdentifyingColumnError
        When a column released as is singles out rows (as :func:`anonymize`). The write tasks judge
        it, so the verdict comes once every file is written; the files are staged beside ``path``
        until every check passed (:mod:`dmondrian.io.staging`), so none is there.
    """
    write_options = options.pop("write_options")
    storage_options = options.pop("storage_options")
    # Before any pass: a name Parquet cannot store would only fail at the end.
    added = [] if options["class_column"] is None else [options["class_column"]]
    index_asked = bool((write_options or {}).get("write_index", False))
    check_column_names([*ddf.columns, *added], ddf._meta.index.name if index_asked else None)

    sinks = []
    manifest = options.pop("manifest")
    with staged_folder(path, storage_options, manifest) as staged:
        def build(top):
            # A ReleaseCounts: the write tasks count for the report (the CLI's, the manifest's).
            top.measure = release_counts(top, manifest, _measure)
            refuse_written_index(ddf, top.options.allow_unique, index_asked)
            sinks.append(release_sink(ddf, top, staged.url, write_options, storage_options))
            return write_parquet(ddf, top, sinks[-1], distributed_shuffle_method())

        # The identifying check runs in the write tasks (the domain pass reads the QIs).
        top = anonymize_and_write(plan, ddf, quasi_identifiers, k, build,
                                  label=f"pass: shuffle, anonymize, write {path}",
                                  defer_counts=True, check_in_write=True,
                                  undo=lambda files: sinks[-1].remove(files), **options)
        staged.describe(**writer_fields(
            "distributed.anonymize_to_parquet", option_parameters(top.options),
            input_rows=top.domain.n_rows, random_state=options["random_state"],
            index_written=index_asked,
            report=written_report(top, ddf, options["noise"]) if manifest else None))
    return top


@takes_options(ANONYMIZE, DASK_PLAN, WRITE)
def anonymize_to_csv(ddf, path, quasi_identifiers, k, **options) -> TopPlan:
    """Like :func:`anonymize_to_parquet`, writing CSV files (``path`` may hold ``*``).

    ``write_options`` go to dask's ``to_csv`` (``index`` defaults to False, ``single_file``
    writes one file); ``shuffle_rows`` (default True) puts every partition's rows in an order
    seeded by ``random_state``. ``manifest=True`` stages the release (one file, or the
    folder of ``path``'s files) and publishes it with ``.manifest.json`` beside it
    (:func:`dmondrian._dask.write_job.csv_release`), without the output's row count.
    """
    kw = {"index": False, **(options.pop("write_options") or {})}
    shuffle = takes_shuffle(kw)
    storage_options = options.pop("storage_options")
    if storage_options:
        kw["storage_options"] = storage_options

    def build(top, target=path):
        refuse_written_index(ddf, top.options.allow_unique, kw["index"])
        release = apply_plan(ddf, top, distributed_shuffle_method())
        if shuffle:
            release = release.map_partitions(shuffle_partition,
                                             row_order_seed(top.options.random_state),
                                             meta=release._meta)
        return release.to_csv(target, compute=False, **kw)

    label = f"pass: shuffle, anonymize, write {path}"
    if not options.pop("manifest"):
        return anonymize_and_write(plan, ddf, quasi_identifiers, k, build, label=label, **options)
    with csv_release(path, kw.get("single_file", False), storage_options) as (stage, target):
        top = anonymize_and_write(plan, ddf, quasi_identifiers, k,
                                  lambda top: build(top, target), label=label, **options)
        commit_with_manifest(stage, writer_fields(
            "distributed.anonymize_to_csv", option_parameters(top.options),
            input_rows=top.domain.n_rows, random_state=options["random_state"],
            index_written=kw["index"]))
    return top
