"""The plan: what the top phase decided and measured, which every later step reads.

A :class:`TopPlan` travels to the workers once, as one node of the graph; routing, the shuffle and
each output partition read their part of it. The :class:`Verdict` of exact counts taken in the
shuffle pass, and :class:`Recount`, which refuses one, are defined here too: both write paths and
the output partitions share them. See docs/design.md, section "The plan".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..encoding.sensitive import SensitiveValues
from ..partition.cut_tree import CutTree
from ..privacy.constraints import KernelPrivacy
from .columns import leaf_inputs
from .global_domain import GlobalDomain
from .options import DaskOptions
from .shipped_keys import key_dtypes, key_offsets, key_steps

__all__ = ["TopPlan", "SensitiveDomain", "pack_output_partitions", "partition_of_leaves",
           "Verdict", "Recount"]


@dataclass
class SensitiveDomain:
    """The sensitive column's global domain and the constraints in kernel form."""

    values: SensitiveValues
    privacy: KernelPrivacy

    @property
    def n_codes(self) -> int:
        return self.values.n_codes

    def codes(self, column: pd.Series) -> np.ndarray:
        return self.values.codes(column)


@dataclass
class TopPlan:
    """Everything the shuffle phase needs, and what the top phase measured.

    Attributes
    ----------
    domain : GlobalDomain
        Global encoding and scales.
    tree : CutTree
        The kept cuts; leaf ``i`` of the tree is leaf id ``i``.
    leaf_counts, leaf_depths : ndarray
        Exact rows and depth of every leaf.
    output_partitions : list of list of int
        Leaf ids of every output partition (runs of consecutive ids).
    passes : int
        Passes over the data made by the top phase (domain pass included); the shuffle pass of
        :func:`~dmondrian.distributed.anonymize_to_parquet` may do the last one's counting.
    leaf_rows : int
        The leaf size used.
    timings : dict
        Wall seconds of each pass run so far, by label.
    kernel_threads : int or None
        Threads one task's kernel may use (the host's cores per worker).
    positional_index : bool
        Whether every input partition's index was its row positions.
    output_partition_rows : int
        Rows an output partition may pack.
    """

    domain: GlobalDomain
    tree: CutTree
    leaf_counts: np.ndarray
    leaf_depths: np.ndarray
    output_partitions: list
    passes: int
    leaf_rows: int
    options: DaskOptions
    columns: list
    index_name: object
    sensitive: SensitiveDomain | None = None
    #: Wall seconds of each step run so far, in order (``{label: seconds}``).
    timings: dict = field(default_factory=dict)
    #: Threads the kernel may use in one task (None: OpenMP's default).
    kernel_threads: int | None = None
    #: Every input partition's index is 0..n-1: the shuffle ships no index column
    #: (the position restores it).
    positional_index: bool = False
    #: Whether ``leaf_counts`` are exact. False only for a plan whose counts are
    #: left to the shuffle pass (:mod:`dmondrian._dask.counting_write`); such a
    #: plan cannot be applied lazily.
    counted: bool = True
    #: Cuts of the candidate tree that the exact counts undid in the shuffle pass.
    undone_cuts: int = 0
    #: Rows an output partition may pack
    #: (:func:`~dmondrian._dask.options.output_partition_rows`); 0 means ``leaf_rows``.
    output_partition_rows: int = 0
    #: Every QI's encoding without keys (:func:`dmondrian._dask.shipped_keys.qi_encodings`).
    encodings: list = field(default_factory=list)
    #: Columns released as is that single out rows, as the domain pass estimated
    #: (:class:`dmondrian.release.identifiers.IdentifyingColumn`).
    identifying: list = field(default_factory=list)
    #: Rows of the pieces an input partition is routed in (0: whole partitions), and
    #: the input partitions' rows (exact when dask knows them, else the largest's).
    #: See :func:`dmondrian._dask.memory.input_piece_rows`.
    input_piece_rows: int = 0
    input_rows: tuple = ()
    #: The workers' memory as measured when the plan was made
    #: (:class:`dmondrian._dask.memory.WorkerMemory`; None when they have no limit).
    worker_memory: object = None
    #: What the shuffle carries: "rows" (every column) or "keys" (the QIs' keys and
    #: the columns the leaves read; each input partition is read again and
    #: written with its published values, :mod:`dmondrian._dask.exchange`).
    exchange: str = "rows"
    #: The identifying-column check the write tasks do, for a plan whose domain pass
    #: left it to them (:class:`dmondrian._dask.written_check.WrittenCheck`; None: done).
    written_check: object = None
    #: With ``entity`` and ``noise``: each entity's share of ``max_classes`` in each
    #: leaf (:class:`dmondrian._dask.entity_noise.ClassShares`).
    class_shares: object = None
    #: What the write tasks count of the release they write, for its report
    #: (an empty :class:`dmondrian.metrics.accumulator.ReleaseCounts`; None: nothing),
    #: and the counts merged once every file is written.
    measure: object = None
    measured: object = None

    @property
    def travelling(self) -> list | None:
        """The non-QI columns the shuffle carries (None: all of them)."""
        return leaf_inputs(self.options) if self.exchange == "keys" else None

    @property
    def ships_index(self) -> bool:
        """Whether the input index travels as a column (only rows do, and only when
        it is not the row positions)."""
        return self.exchange == "rows" and not self.positional_index

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_counts.shape[0])

    @property
    def leaf_dtype(self) -> np.dtype:
        """Narrowest integer type holding every leaf id (fewer bytes through the shuffle)."""
        return np.min_scalar_type(-max(1, self.n_leaves))

    @property
    def key_dtypes(self) -> list:
        """The type each QI's keys travel in through the shuffle."""
        return key_dtypes(self.domain)

    @property
    def key_offsets(self) -> list:
        """What each QI's keys travel as an offset above (see :mod:`.shipped_keys`)."""
        return key_offsets(self.domain)

    @property
    def key_steps(self) -> list:
        """What each QI's keys travel in units of (see :mod:`.shipped_keys`)."""
        return key_steps(self.domain)

    @property
    def partition_of_leaf(self) -> np.ndarray:
        """Output partition of every leaf (read-only; computed once per ``output_partitions``)."""
        cached = self.__dict__.get("_partition_of_leaf")
        if cached is None or cached[0] is not self.output_partitions:
            out = partition_of_leaves(self.output_partitions, self.n_leaves)
            out.flags.writeable = False
            cached = self.__dict__["_partition_of_leaf"] = (self.output_partitions, out)
        return cached[1]


def pack_output_partitions(counts: np.ndarray, rows: int) -> list:
    """Consecutive leaves per output partition, at most ``rows`` rows each (or one leaf).

    Examples
    --------
    >>> pack_output_partitions(np.array([3, 3, 3, 7, 1]), 6)
    [[0, 1], [2], [3], [4]]
    """
    partitions, current, total = [], [], 0
    for i, c in enumerate(counts.tolist()):
        if current and total + c > rows:
            partitions.append(current)
            current, total = [], 0
        current.append(i)
        total += c
    partitions.append(current)
    return partitions


def partition_of_leaves(partitions: list, n_leaves: int) -> np.ndarray:
    """Output partition of every leaf, from each partition's leaf ids.

    Examples
    --------
    >>> partition_of_leaves([[0, 1], [2], [3, 4]], 5).tolist()
    [0, 0, 1, 2, 2]
    """
    out = np.empty(n_leaves, dtype=np.int64)
    for p, ids in enumerate(partitions):
        out[ids] = p
    return out


class Recount(Exception):
    """The exact counts undid a cut the output partitions cannot undo alone."""


@dataclass
class Verdict:
    """The exact counts of an uncounted plan, and the cuts they keep.

    ``counts[i]`` is candidate leaf ``i``'s exact row count; ``root[i]`` the
    first candidate leaf of the leaf it ends in (itself, unless a cut above it
    was undone) and ``depth[i]`` that leaf's depth.
    """

    counts: np.ndarray
    root: np.ndarray
    depth: np.ndarray
    undone: int
