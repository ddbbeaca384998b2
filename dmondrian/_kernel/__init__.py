"""The compiled Mondrian kernel (Cython, built when the package is installed).

The table arrives as a ``(d, n)`` matrix of order-preserving int64 *keys* (one
row per quasi-identifier, see :mod:`dmondrian.encoding.qi`) and the kernel returns, for
every row, the id of its equivalence class. It never looks at labels or
dtypes: everything kind-specific it needs is a small integer code per QI and a
few flat arrays (global scales, hierarchy trees). Its modules, by concern:

* ``select``: the median of a node's keys (histogram select, quickselect);
* ``privacy``: whether a cut's children keep l-diversity / t-closeness;
* ``node``: a node's normalized span of a QI, its codes by frequency;
* ``split``: one node's cut and the move of its rows;
* ``packing``, ``ncp``: the cuts of the "dm" and "ncp" objectives;
* ``tree``: the whole tree, independent nodes and subtrees on OpenMP threads;
* ``rules``: what a call asks (QIs, privacy, mode), one object read once;
* ``class_stats``: per-class bounds, sums and code sets for publishing;
* ``workspace``, ``buffers``: the double buffer the tree is built in;
* ``threads``: how many threads a call may use;
* ``codes`` (with ``codes.pxd``), ``constants``: the codes and limits C and
  Python share, defined once;
* ``keys``, ``labels``, ``routing``, ``scan``, ``shipped``: the passes over
  columns that encode keys, write labels, and route rows for the Dask engine.
"""

from .class_stats import class_code_masks, class_code_sets
from .class_stats import class_statistics as _class_statistics
from .class_stats import gather_codes as _gather_codes
from .class_stats import rows_to_classes as _rows_to_classes
from .constants import *  # noqa: F403
from .privacy import hist_ok_py as hist_ok
from .refine import refine_partition as _refine_partition
from .rules import RIDING_SLOTS, KernelRules
from .threads import max_threads, thread_limit
from .tree import mondrian_partition as _mondrian_partition
from .tree import subtree_blocks
from .workspace import WorkSpace, double_buffer

__all__ = ["RIDING_SLOTS", "KernelRules", "WorkSpace", "class_code_masks", "class_code_sets",
           "class_statistics", "double_buffer", "gather_codes", "hist_ok", "max_threads",
           "mondrian_partition", "refine_partition", "rows_to_classes", "subtree_blocks",
           "thread_limit"]


def mondrian_partition(bufs_keys, rules, leaves, n_threads=None, depths=None):
    """:func:`dmondrian._kernel.tree.mondrian_partition` on this thread's thread budget."""
    return _mondrian_partition(bufs_keys, rules, leaves,
                               max_threads() if n_threads is None else n_threads, depths)


def refine_partition(bufs_keys, class_start, rules, blocks, passes, n_threads=None):
    """:func:`dmondrian._kernel.refine.refine_partition` on this thread's thread budget."""
    return _refine_partition(bufs_keys, class_start, rules, blocks, passes,
                             max_threads() if n_threads is None else n_threads)


def class_statistics(sorted_keys, class_start, kinds, cards, n_threads=None):
    """:func:`dmondrian._kernel.class_stats.class_statistics` on this thread's budget."""
    return _class_statistics(sorted_keys, class_start, kinds, cards,
                             max_threads() if n_threads is None else n_threads)


def rows_to_classes(order, class_of_pos, n_threads=None):
    """:func:`dmondrian._kernel.class_stats.rows_to_classes` on this thread's budget."""
    return _rows_to_classes(order, class_of_pos, max_threads() if n_threads is None else n_threads)


def gather_codes(class_of_row, table, out, n_threads=None):
    """:func:`dmondrian._kernel.class_stats.gather_codes` on this thread's budget."""
    _gather_codes(class_of_row, table, out, max_threads() if n_threads is None else n_threads)
