"""Mergeable per-region summaries: what one pass over the data tells the client.

A pass routes every row to a region and summarizes each region with a :class:`RegionSketch`: exact
counts, bounds and value counts, and a weighted row sample the client can plan several levels of
cuts on. Sketches of partitions merge associatively, so they are tree-reduced across partitions. See
docs/design.md, section "Sketches".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._kernel.constants import INT_MIN, MISSING_KEY
from .._kernel.scan import _key_bounds, _region_bounds

__all__ = ["RegionSketch", "Summary", "summarize", "merge_sketches"]

# Above this many (region, value) cells a dense bincount would waste memory.
_DENSE_CELLS = 1 << 22


@dataclass
class RegionSketch:
    """Summary of the rows of ``R`` regions (see the module docstring).

    ``hist[j]`` is ``(cells, counts)`` with ``cells = region * slots[j] + slot`` sorted and unique.
    """

    count: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    missing: np.ndarray
    hist: dict
    slots: np.ndarray
    sample_keys: np.ndarray
    sample_region: np.ndarray
    sample_weight: np.ndarray
    sample_pos: np.ndarray
    _by_region: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def n_regions(self) -> int:
        return self.count.shape[0]

    def region(self, r: int) -> Summary:
        """The exact summary of region ``r`` (with its part of the sample)."""
        d = self.lo.shape[1]
        hist = {}
        for j, (cells, counts) in self.hist.items():
            s = int(self.slots[j])
            a, b = np.searchsorted(cells, [r * s, (r + 1) * s])
            dense = np.zeros(s, dtype=np.float64)
            dense[cells[a:b] - r * s] = counts[a:b]
            hist[j] = dense
        if self._by_region is None:
            # Every region's sample rows, in sample order, found once: a mask per
            # region would scan the whole sample for each of hundreds of regions.
            # (Gathers from a C-ordered copy: column gathers of another layout
            # copy the whole array first.)
            order = np.argsort(self.sample_region, kind="stable")
            starts = np.searchsorted(self.sample_region[order], np.arange(self.n_regions + 1))
            self._by_region = (order, starts, np.ascontiguousarray(self.sample_keys))
        order, starts, keys = self._by_region
        mine = order[starts[r]:starts[r + 1]]
        return Summary(float(self.count[r]), self.lo[r].copy(), self.hi[r].copy(),
                       self.missing[r].astype(np.float64), hist, keys.take(mine, axis=1),
                       self.sample_weight[mine], self.sample_pos[mine], exact=True, d=d)


def _sparse_counts(cells: np.ndarray, n_cells: int, weights=None):
    if n_cells <= _DENSE_CELLS:
        dense = np.bincount(cells, weights=weights, minlength=n_cells)
        nz = np.flatnonzero(dense)
        return nz.astype(np.int64), dense[nz].astype(np.int64)
    uniq, inv = np.unique(cells, return_inverse=True)
    return uniq.astype(np.int64), np.bincount(inv.ravel(), weights=weights).astype(np.int64)


def summarize(keys: np.ndarray, region: np.ndarray, n_regions: int, exact: dict, slots: np.ndarray,
              rates: np.ndarray, priority: np.ndarray, positions: np.ndarray) -> RegionSketch:
    """Summarize one partition's rows by region.

    Parameters
    ----------
    keys : int64 array (d, n)
        Global keys (:func:`dmondrian._dask.global_domain.encode_keys`).
    region : int64 array (n,)
        Region of every row, ``0..n_regions-1``.
    n_regions : int
        Number of regions.
    exact : dict
        ``{j: slot keys}`` for the QIs whose values are counted exactly.
    slots : int64 array (d,)
        Size of each exact QI's slot space.
    rates : float64 array (n_regions,)
        Sampling rate of each region (0 keeps no sample).
    priority : float64 array (n,)
        Each row's sampling priority in [0, 1).
    positions : int64 array (n,)
        Each row's input position (:func:`dmondrian.partition.routing.row_positions`).

    Returns
    -------
    RegionSketch

    Examples
    --------
    >>> keys = np.array([[5, 1, 7, 3]])
    >>> sk = summarize(keys, np.array([0, 1, 0, 1]), 2, {}, np.zeros(1, np.int64),
    ...                np.array([1.0, 0.0]), np.array([0.1, 0.2, 0.3, 0.4]), np.arange(4))
    >>> sk.count.tolist(), sk.lo[:, 0].tolist(), sk.hi[:, 0].tolist(), sk.sample_keys.tolist()
    ([2, 2], [5, 1], [7, 3], [[5, 7]])
    >>> sk.sample_pos.tolist()
    [0, 2]
    """
    count, lo, hi, missing = _region_bounds(np.ascontiguousarray(keys, dtype=np.int64),
                                            np.ascontiguousarray(region, dtype=np.int64),
                                            int(n_regions), MISSING_KEY)
    hist = {}
    for j, slot_row in exact.items():
        s = int(slots[j])
        hist[j] = _sparse_counts(region * s + slot_row, n_regions * s)
    keep = priority < rates[region]
    return RegionSketch(count, lo, hi, missing, hist, np.asarray(slots, dtype=np.int64),
                        keys[:, keep], region[keep], 1.0 / rates[region[keep]],
                        np.asarray(positions, dtype=np.int64)[keep])


def merge_sketches(*sketches: RegionSketch) -> RegionSketch:
    """Combine the sketches of disjoint sets of rows (associative and commutative)."""
    first = sketches[0]
    if len(sketches) == 1:
        return first
    count = np.sum([s.count for s in sketches], axis=0)
    lo = np.minimum.reduce([s.lo for s in sketches])
    hi = np.maximum.reduce([s.hi for s in sketches])
    missing = np.sum([s.missing for s in sketches], axis=0)
    hist = {}
    for j in first.hist:
        cells = np.concatenate([s.hist[j][0] for s in sketches])
        counts = np.concatenate([s.hist[j][1] for s in sketches])
        uniq, inv = np.unique(cells, return_inverse=True)
        hist[j] = (uniq, np.bincount(inv.ravel(), weights=counts).astype(np.int64))
    return RegionSketch(count, lo, hi, missing, hist, first.slots,
                        np.concatenate([s.sample_keys for s in sketches], axis=1),
                        np.concatenate([s.sample_region for s in sketches]),
                        np.concatenate([s.sample_weight for s in sketches]),
                        np.concatenate([s.sample_pos for s in sketches]))


@dataclass
class Summary:
    """What the client knows about one region.

    ``exact`` says whether ``n``, bounds, missing counts and histograms are exact (from a pass) or
    estimated from a sample. ``hist[j]`` is a dense count per slot for exact-count QIs.
    ``sample_keys`` (d, m) with ``sample_w`` are the region's weighted row sample, ``sample_pos``
    the sampled rows' input positions.
    """

    n: float
    lo: np.ndarray
    hi: np.ndarray
    missing: np.ndarray
    hist: dict
    sample_keys: np.ndarray
    sample_w: np.ndarray
    sample_pos: np.ndarray
    exact: bool
    d: int

    @classmethod
    def from_sample(cls, keys: np.ndarray, w: np.ndarray, pos: np.ndarray, n: float,
                    exact_slots: dict, exact: bool = False) -> Summary:
        """Estimate a region's summary from its weighted sample.

        ``pos`` are the sampled rows' input positions; ``n`` is the region's
        (estimated) size; weights are rescaled to it.
        ``exact_slots`` maps exact-count QIs to ``(slot keys of the sample, slots)``.
        """
        d, m = keys.shape
        scale = n / w.sum() if m else 0.0
        ww = w * scale
        lo = np.full(d, MISSING_KEY, dtype=np.int64)
        hi = np.full(d, INT_MIN, dtype=np.int64)
        missing = np.zeros(d, dtype=np.float64)
        n_missing = _key_bounds(np.asarray(keys, dtype=np.int64), MISSING_KEY, lo, hi)
        for j in np.flatnonzero(n_missing):
            missing[j] = ww[keys[j] == MISSING_KEY].sum()
        hist = {j: np.bincount(s_row, weights=ww, minlength=s).astype(np.float64)
                for j, (s_row, s) in exact_slots.items()}
        return cls(float(n), lo, hi, missing, hist, keys, w, pos, exact, d)

    @classmethod
    def merge(cls, parts: list[Summary]) -> Summary:
        """Summary of the union of disjoint regions."""
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        return cls(float(sum(p.n for p in parts)), np.minimum.reduce([p.lo for p in parts]),
                   np.maximum.reduce([p.hi for p in parts]),
                   np.sum([p.missing for p in parts], axis=0),
                   {j: np.sum([p.hist[j] for p in parts], axis=0) for j in first.hist},
                   np.concatenate([p.sample_keys for p in parts], axis=1),
                   np.concatenate([p.sample_w for p in parts]),
                   np.concatenate([p.sample_pos for p in parts]), all(p.exact for p in parts),
                   first.d)
