"""The names of the columns the shuffle carries besides the input's own.

Routing replaces every QI by its global key (see :mod:`.shipped_keys`), renames the other columns so
that no input name can clash with these, and adds the leaf id, the output partition and, unless
every input partition is indexed by its row positions, the input index. The rows' input positions
travel as the index. See docs/design.md, section "Step 3: the shuffle".
"""

from __future__ import annotations

__all__ = ["INDEX", "LEAF", "PARTITION", "key_names", "carried", "leaf_inputs", "read_columns"]

#: The input index, when it is not the row positions.
INDEX = "__dm_index"
#: The leaf id of every row (the narrowest integer type holding every id).
LEAF = "__dm_leaf"
#: The output partition of every row: dask's shuffles take a column of this
#: name as the target partition numbers themselves (any other they hash).
PARTITION = "_partitions"


def key_names(d: int) -> list:
    """The names of the ``d`` QIs' shipped key columns, in key-matrix order."""
    return [f"__dm_k{j}" for j in range(d)]


def carried(qis, columns, travel=None) -> tuple[list, list, list]:
    """Positions, shipped names and own names of the columns that travel as they are
    (all but the QIs; only those of ``travel`` when it is given).

    Examples
    --------
    >>> carried(["age"], ["id", "age", "pay"])
    ([0, 2], ['__dm_c0', '__dm_c2'], ['id', 'pay'])
    >>> carried(["age"], ["id", "age", "pay"], travel=["pay"])
    ([2], ['__dm_c2'], ['pay'])
    """
    qis = set(qis)
    at = [i for i, c in enumerate(columns) if c not in qis and (travel is None or c in travel)]
    return at, [f"__dm_c{i}" for i in at], [columns[i] for i in at]


def leaf_inputs(options) -> list:
    """The columns besides the QIs that the leaves read: the sensitive column, the entity column and
    the noised ones (all that travels when only keys cross the network)."""
    out = [c for c in (options.sensitive, options.entity) if c is not None]
    out += [nc.column for nc in options.noise if nc.column not in out]
    return out


def read_columns(columns, options) -> list:
    """The QIs and :func:`leaf_inputs` among ``columns``, in their order: all a pass
    reads of a table whose other columns it does not publish.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> opts = SimpleNamespace(qis=["age"], sensitive="pay", entity=None, noise=[])
    >>> read_columns(["id", "age", "note", "pay"], opts)
    ['age', 'pay']
    """
    wanted = set(options.qis) | set(leaf_inputs(options))
    return [c for c in columns if c in wanted]
