"""Generalization hierarchies (taxonomy trees) for nominal quasi-identifiers.

A hierarchy maps every leaf value of a column to a chain of ancestors that ends at a single root,
e.g. ``Self-emp-inc -> Self-employ -> *``. The common file format (ARX, Basic Mondrian, the Adult
hierarchies) has one line per leaf, ``leaf;parent;...;root``.

Internally the leaves are numbered in depth-first order, so that every subtree covers a contiguous
range of leaf codes. That turns "cut along the tree" into "cut at a child boundary" in code order,
and the lowest common ancestor (LCA) of any set of leaves into the LCA of its smallest and largest
code, which the compiled kernel computes from two integers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..errors import HierarchyError

__all__ = ["Hierarchy", "MISSING_LEAF"]

#: Label of the leaf that stands for a missing value when the hierarchy itself
#: has none: it hangs directly below the root, so a class that mixes missing and
#: present values generalizes to the root.
MISSING_LEAF = "<NA>"


class Hierarchy:
    """A generalization tree over the values of one nominal column.

    Parameters
    ----------
    paths : mapping of str to sequence of str
        For every leaf, its ancestors from the parent up to the root. All
        chains must end at the same root.
    name : str, optional
        The column it belongs to, used in error messages.

    Examples
    --------
    >>> h = Hierarchy.from_lines(["Private;*", "Federal-gov;gov;*", "Local-gov;gov;*"])
    >>> h.leaves
    ['Private', 'Federal-gov', 'Local-gov']
    >>> h.lca(["Federal-gov", "Local-gov"])
    'gov'
    >>> h.lca(["Private", "Local-gov"])
    '*'
    """

    def __init__(self, paths: Mapping[str, Sequence[str]], name=None):
        self.name = name
        if not paths:
            raise HierarchyError(name, f"hierarchy for column {name!r} is empty")
        roots = {tuple(chain)[-1] if len(chain) else leaf for leaf, chain in paths.items()}
        if len(roots) != 1:
            raise HierarchyError(name, f"hierarchy for column {name!r} has several roots "
                                       f"{sorted(map(str, roots))}; every line must end at the "
                                       "same root")
        (root,) = roots
        children: dict[str, list[str]] = {root: []}
        parent_of: dict[str, str] = {}
        for leaf, chain in paths.items():
            nodes = [str(leaf), *map(str, chain)]
            for child, parent in zip(nodes[:-1], nodes[1:]):
                known = parent_of.get(child)
                if known is None:
                    parent_of[child] = parent
                    children.setdefault(parent, []).append(child)
                    children.setdefault(child, [])
                elif known != parent:
                    raise HierarchyError(name, f"hierarchy for column {name!r} gives {child!r} two "
                                               f"parents ({known!r} and {parent!r})")
        self._build(root, children)

    def _build(self, root: str, children: dict[str, list[str]]) -> None:
        labels, leaves, parent, depth, lo, hi = [], [], [], [], [], []
        # Iterative DFS: leaves are numbered in visiting order so every subtree
        # is a contiguous code range [lo, hi].
        stack = [(root, -1, 0, False)]
        index_of: dict[str, int] = {}
        while stack:
            label, par, d, done = stack.pop()
            if done:
                i = index_of[label]
                kids = children[label]
                if kids:
                    lo[i] = min(lo[index_of[c]] for c in kids)
                    hi[i] = max(hi[index_of[c]] for c in kids)
                continue
            i = len(labels)
            index_of[label] = i
            labels.append(label)
            parent.append(par)
            depth.append(d)
            if not children[label]:
                lo.append(len(leaves))
                hi.append(len(leaves))
                leaves.append(label)
            else:
                lo.append(-1)
                hi.append(-1)
                stack.append((label, par, d, True))
                for c in reversed(children[label]):
                    stack.append((c, i, d + 1, False))
        self.root = root
        self.labels = labels
        self.leaves = leaves
        self.parent = np.asarray(parent, dtype=np.int64)
        self.depth = np.asarray(depth, dtype=np.int64)
        self.node_lo = np.asarray(lo, dtype=np.int64)
        self.node_hi = np.asarray(hi, dtype=np.int64)
        self._index = index_of
        self._leaf_code = {leaf: i for i, leaf in enumerate(leaves)}
        # Node of each leaf code, so the kernel can walk up from a leaf.
        self.leaf_node = np.empty(len(leaves), dtype=np.int64)
        for label, i in index_of.items():
            if self.node_lo[i] == self.node_hi[i] and not children[label]:
                self.leaf_node[self.node_lo[i]] = i

    # -- constructors ---------------------------------------------------------
    @classmethod
    def from_lines(cls, lines: Iterable[str], name=None, sep: str = ";") -> Hierarchy:
        """Build a hierarchy from lines ``leaf;parent;...;root``.

        Blank lines are skipped and whitespace around each field is stripped.
        """
        paths: dict[str, list[str]] = {}
        for raw in lines:
            line = raw.strip()
            if not line:
                continue
            fields = [f.strip() for f in line.split(sep)]
            if any(f == "" for f in fields):
                raise HierarchyError(name, f"hierarchy for column {name!r}: empty field in {raw!r}")
            leaf, chain = fields[0], fields[1:]
            if leaf in paths and paths[leaf] != chain:
                raise HierarchyError(name,
                                     f"hierarchy for column {name!r} lists leaf {leaf!r} twice")
            paths[leaf] = chain
        return cls(paths, name=name)

    @classmethod
    def from_file(cls, path, name=None, sep: str = ";") -> Hierarchy:
        """Read a hierarchy file (one line per leaf, ``leaf;parent;...;root``)."""
        try:
            with open(path, encoding="utf-8") as fh:
                return cls.from_lines(fh, name=name, sep=sep)
        except OSError as exc:
            raise HierarchyError(name, f"cannot read hierarchy file {os.fspath(path)!r} for column "
                                       f"{name!r}: {exc.strerror or exc}") from None

    @classmethod
    def coerce(cls, source, name=None) -> Hierarchy:
        """Turn what a user passes (object, file path, lines or mapping) into a Hierarchy."""
        if isinstance(source, Hierarchy):
            if source.name is None:
                source.name = name
            return source
        if isinstance(source, (str, os.PathLike)):
            return cls.from_file(source, name=name)
        if isinstance(source, Mapping):
            return cls({str(leaf): [c.strip() for c in chain.split(";")] if isinstance(chain, str)
                        else [str(c) for c in chain] for leaf, chain in source.items()}, name=name)
        if isinstance(source, Iterable):
            return cls.from_lines(source, name=name)
        raise HierarchyError(name, f"hierarchy for column {name!r} must be a Hierarchy, a file "
                                   "path, lines or a mapping leaf -> ancestors, not "
                                   f"{type(source).__name__}")

    # -- queries --------------------------------------------------------------
    def with_missing_leaf(self) -> Hierarchy:
        """A copy with a :data:`MISSING_LEAF` leaf under the root (once)."""
        if MISSING_LEAF in self._leaf_code:
            return self
        paths = {leaf: self.ancestors(leaf) for leaf in self.leaves}
        paths[MISSING_LEAF] = [self.root]
        return Hierarchy(paths, name=self.name)

    def ancestors(self, label: str) -> list[str]:
        """Ancestors of ``label`` from its parent up to the root."""
        out = []
        i = self.parent[self._index[label]]
        while i >= 0:
            out.append(self.labels[i])
            i = self.parent[i]
        return out

    def leaf_codes(self, values: Iterable[str]) -> np.ndarray:
        """DFS codes of leaf labels.

        Raises :class:`~dmondrian.errors.HierarchyError` for unknown values.
        """
        try:
            return np.fromiter((self._leaf_code[v] for v in values), dtype=np.int64)
        except KeyError as exc:
            raise HierarchyError(self.name, f"hierarchy for column {self.name!r} does not cover "
                                            f"value {exc.args[0]!r}") from None

    def lca_node(self, lo_code: int, hi_code: int) -> int:
        """Index of the lowest node whose leaves include codes ``lo_code..hi_code``."""
        i = int(self.leaf_node[lo_code])
        while not (self.node_lo[i] <= lo_code and hi_code <= self.node_hi[i]):
            i = int(self.parent[i])
        return i

    def lca(self, values: Iterable[str]) -> str:
        """Lowest common ancestor of some leaf labels."""
        codes = self.leaf_codes(values)
        return self.labels[self.lca_node(int(codes.min()), int(codes.max()))]

    def node_index(self, label: str) -> int | None:
        """Index of the node named ``label`` (into ``labels``), or None.

        Examples
        --------
        >>> h = Hierarchy.from_lines(["Private;*", "Federal-gov;gov;*"])
        >>> h.labels[h.node_index("gov")], h.node_index("army")
        ('gov', None)
        """
        return self._index.get(label)

    def n_leaves_under(self, node: int) -> int:
        """Number of leaves in the subtree of ``node``."""
        return int(self.node_hi[node] - self.node_lo[node] + 1)

    def __len__(self) -> int:
        return len(self.leaves)

    def __repr__(self) -> str:
        return (f"Hierarchy(name={self.name!r}, root={self.root!r}, leaves={len(self.leaves)}, "
                f"depth={int(self.depth.max())})")
