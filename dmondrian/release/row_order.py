"""The order of the rows in a written release: shuffled within each file.

The engines keep the input's row order inside a class, and a table sorted by time or by an id makes
that order a quasi-identifier of its own: the first row of a class is the earliest record of it. The
statistical disclosure control literature advises randomizing the record order of released
microdata, so every writer of a release (the command line,
:func:`dmondrian.distributed.anonymize_to_parquet` and ``_to_csv``, the lazy release's
``to_parquet``) passes each file's rows through :func:`shuffle_rows` and writes no index. The
in-memory results keep the input's order: scikit-learn needs ``X`` aligned with ``y``.

The shuffle is seeded by ``random_state``, the file's number and a digest of the file's own rows in
their order before the shuffle (:func:`rows_digest`), so a seeded run writes the same files again;
without a seed each run draws fresh entropy. The seed alone would not do: seeds are small and
guessable (0, 42, a date), and an attacker holding a release could try each one, undo its
permutation and keep the seed under which a date, an id or the labels come back sorted, recovering
the input's order. The digest depends on the order it hides, and a release holds each file's rows
only as a shuffled multiset, so the permutation cannot be undone without knowing the order first.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

__all__ = ["ROW_ORDER", "row_order_seed", "shuffle_rows", "takes_shuffle", "row_permutation",
           "rows_digest", "shuffle_partition", "row_order_record"]

#: What the manifest says of the row order.
ROW_ORDER = "shuffled within each file"

# Mixed into the seed so that the row order's stream differs from the noise's.
_STREAM = 0x5EED_0F_0DE5

# Rows hashed into a file's digest, evenly spaced: hashing a million rows of
# every column would cost more than the shuffle itself.
_DIGEST_ROWS = 1024


def row_order_seed(random_state=None) -> int:
    """The int seed of the writers' shuffles, from an anonymization's ``random_state``.

    Parameters
    ----------
    random_state : None, int or numpy.random.Generator
        None draws fresh entropy; a Generator gives one draw of a child
        stream (its own stream is left as it is).

    Returns
    -------
    int

    Examples
    --------
    >>> row_order_seed(7) == row_order_seed(7)
    True
    """
    if isinstance(random_state, np.random.Generator):
        return int(random_state.spawn(1)[0].integers(2**63))
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(2, np.uint64)[0] >> np.uint64(1))
    return int(random_state)


def takes_shuffle(write_options: dict) -> bool:
    """Take the writers' ``shuffle_rows`` option out of ``write_options``: default True.

    Every writer of the Dask engine and the plans reads it here, so its default is stated once.

    Examples
    --------
    >>> options = {"shuffle_rows": False, "compression": "zstd"}
    >>> takes_shuffle(options), options, takes_shuffle({})
    (False, {'compression': 'zstd'}, True)
    """
    return bool(write_options.pop("shuffle_rows", True))


def shuffle_rows(frame: pd.DataFrame, seed: int, number: int = 0) -> pd.DataFrame:
    """``frame``'s rows in a random order, the same for the same ``seed`` and file ``number``.

    The order is keyed by :func:`rows_digest` of ``frame`` as well: two frames of the same length
    get different orders for one seed. The index travels with its rows; the writers do not write it.

    Examples
    --------
    >>> df = pd.DataFrame({"age": range(6)})
    >>> sorted(shuffle_rows(df, 1)["age"]) == list(range(6))
    True
    >>> shuffle_rows(df, 1).equals(shuffle_rows(df, 1))
    True
    """
    if len(frame) < 2:
        return frame
    return frame.iloc[row_permutation(seed, number, frame)]


def row_permutation(seed: int, number: int, frame: pd.DataFrame) -> np.ndarray:
    """The order :func:`shuffle_rows` gives the rows of ``frame``, file ``number``: row
    ``i`` of the shuffled file is row ``row_permutation(seed, number, frame)[i]`` of ``frame``.

    For writers that shuffle the rows elsewhere than in pandas (an Arrow table
    made from ``frame``, its rows in the same order).

    Examples
    --------
    >>> sorted(row_permutation(1, 0, pd.DataFrame({"age": [5, 6, 7, 8]})).tolist())
    [0, 1, 2, 3]
    """
    key = [_STREAM, int(seed), int(number), rows_digest(frame)]
    return np.random.default_rng(key).permutation(len(frame))


def rows_digest(frame: pd.DataFrame) -> int:
    """A 64-bit digest of ``frame``'s values in their row order, the same in every process.

    Hashes every column of up to 1024 evenly spaced rows (their positions fixed by the row count)
    with :func:`pandas.util.hash_pandas_object`, which is stable across processes and platforms,
    then the row hashes in order with BLAKE2b. The index is left out: the writers do not write it.

    Examples
    --------
    >>> df = pd.DataFrame({"age": [30, 40, 50]})
    >>> rows_digest(df) == rows_digest(df.iloc[::-1]), rows_digest(df) == rows_digest(df.copy())
    (False, True)
    """
    n = len(frame)
    if n > _DIGEST_ROWS:
        frame = _used_categories(frame.iloc[np.linspace(0, n - 1, _DIGEST_ROWS).astype(np.int64)])
    rows = pd.util.hash_pandas_object(frame, index=False).to_numpy(np.uint64)
    digest = hashlib.blake2b(np.ascontiguousarray(rows).astype("<u8").tobytes(),
                             digest_size=8, person=b"dmondrian-rows")
    # The row count too: frames whose sampled rows agree still differ by length.
    digest.update(int(n).to_bytes(8, "little"))
    return int.from_bytes(digest.digest(), "little")


def _used_categories(sample: pd.DataFrame) -> pd.DataFrame:
    """``sample`` with each Categorical column's unused categories removed: the same
    row hashes, at a cost of the sampled rows instead of every category.

    pandas hashes a Categorical by hashing each of its categories and taking the codes, so a row's
    hash is its value's, whatever the other categories; a label column's categories are every label
    of the release (tens of thousands). Object categories are left whole: pandas hashes a mix of
    text and other objects as text, which a subset without the others would not.
    """
    columns = {}
    for i, dtype in enumerate(sample.dtypes):
        if (isinstance(dtype, pd.CategoricalDtype) and dtype.categories.dtype != object
                and len(dtype.categories) > len(sample)):
            columns[i] = sample.iloc[:, i].cat.remove_unused_categories()
    if not columns:
        return sample
    sample = sample.copy(deep=False)
    for i, column in columns.items():
        sample.isetitem(i, column)
    return sample


def shuffle_partition(frame: pd.DataFrame, seed: int, partition_info=None) -> pd.DataFrame:
    """:func:`shuffle_rows` of one dask partition, numbered as dask numbers it.

    For ``map_partitions`` ahead of a dask writer (CSV): each partition is
    one file, or one piece of a single file.
    """
    return shuffle_rows(frame, seed, partition_info["number"] if partition_info else 0)


def row_order_record(random_state=None) -> dict:
    """The manifest's ``row_order`` entry: how the written rows were ordered.

    Examples
    --------
    >>> row_order_record(7)
    {'order': 'shuffled within each file', 'seeded': True, 'index_written': False}
    """
    return {"order": ROW_ORDER, "seeded": random_state is not None, "index_written": False}
