"""The UCI Adult ("Census Income") data set, as the k-anonymity literature uses it.

Where the files come from, in this order:

1. the ``path`` argument;
2. the folder named by the environment variable ``DMONDRIAN_ADULT_DIR``;
3. the user cache, ``$XDG_CACHE_HOME/dmondrian/adult`` (``~/.cache/dmondrian/adult``), filled once
   from the UCI repository. Every downloaded file is checked against its known checksums and only
   then moved into place, so the cache never holds a partial or corrupted file.

Folders given explicitly (1 and 2) are only read, never written to.

The generalization hierarchies (``hierarchies/adult_*.txt``, one line per leaf,
``leaf;parent;...;*``) are not part of the UCI download; they are read from a
``hierarchies`` sub-folder of the resolved folder when present.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd

from .errors import DatasetError
from .kinds.hierarchy import Hierarchy

__all__ = ["ADULT_COLUMNS", "ADULT_QUASI_IDENTIFIERS", "ADULT_SENSITIVE", "ADULT_NUMERIC",
           "ADULT_URL", "ADULT_ENV_VAR", "adult_dir", "adult_cache_dir", "load_adult",
           "load_adult_hierarchies"]

#: The 15 columns of ``adult.data``, in file order.
ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                 "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                 "hours-per-week", "native-country", "income"]
#: Columns read as int64; every other column holds strings.
ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
#: The quasi-identifiers of LeFevre et al. (2006) and most later papers.
ADULT_QUASI_IDENTIFIERS = ["age", "workclass", "education-num", "marital-status", "occupation",
                           "race", "sex", "native-country"]
#: The sensitive attribute: ``<=50K`` or ``>50K``.
ADULT_SENSITIVE = "income"

#: Folder of the UCI repository holding the Adult files.
ADULT_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
#: Environment variable naming a folder that holds ``adult.data``.
ADULT_ENV_VAR = "DMONDRIAN_ADULT_DIR"

# Checksums of the UCI files (adult.data: 32,561 records, 3,974,305 bytes).
_CHECKSUMS = {
    "adult.data": {"md5": "5d7c39d7b8804f071cdd1f2a7c460872",
                   "sha256": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"},
    "adult.names": {"md5": "1a7cdb3ff7a1b709968b1c7a11def63e",
                    "sha256": "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a"},
}
_DATA_FILE = "adult.data"
_MISSING_TOKEN = "?"
_HIERARCHY_DIR = "hierarchies"
_HIERARCHY_PREFIX = "adult_"


def adult_cache_dir() -> Path:
    """The user cache folder for the Adult files (it may not exist yet).

    Returns
    -------
    pathlib.Path
        ``$XDG_CACHE_HOME/dmondrian/adult``, or ``~/.cache/dmondrian/adult``
        when ``XDG_CACHE_HOME`` is unset or empty.

    Examples
    --------
    >>> adult_cache_dir().parts[-2:]
    ('dmondrian', 'adult')
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dmondrian" / "adult"


def _explicit_dir(path) -> tuple[Path, str] | None:
    """The folder the user named (argument, then environment), with where it came from."""
    if path is not None:
        return Path(os.fspath(path)).expanduser(), "the path argument"
    env = os.environ.get(ADULT_ENV_VAR)
    if env:
        return Path(env).expanduser(), f"${ADULT_ENV_VAR}"
    return None


def adult_dir(path=None, *, download: bool = True, url: str = ADULT_URL) -> Path:
    """Resolve the folder holding the Adult files, downloading them once if needed.

    Parameters
    ----------
    path : str or os.PathLike, optional
        A folder holding ``adult.data``. When omitted, ``$DMONDRIAN_ADULT_DIR`` is used, and when
        that is unset too, the user cache (:func:`adult_cache_dir`).
    download : bool, default True
        Whether a cache missing ``adult.data`` or ``adult.names`` may be filled from ``url``.
        Folders named by ``path`` or the environment are never written to.
    url : str, default :data:`ADULT_URL`
        Base URL of the files (anything :mod:`urllib.request` opens, e.g. a
        ``file://`` URL of a local mirror).

    Returns
    -------
    pathlib.Path
        The folder.

    Raises
    ------
    DatasetError
        The named folder does not exist, or the cache is empty and ``download`` is False, or the
        download failed or did not match the known checksums.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> adult_dir(folder) == Path(folder)
    True
    >>> adult_dir(Path(folder) / "nowhere")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dmondrian.errors.DatasetError: Adult folder ... named by the path argument does not exist
    """
    explicit = _explicit_dir(path)
    if explicit is not None:
        folder, source = explicit
        if not folder.is_dir():
            raise DatasetError(f"Adult folder {str(folder)!r} named by {source} does not exist",
                               path=str(folder))
        return folder
    folder = adult_cache_dir()
    missing = [name for name in _CHECKSUMS if not (folder / name).is_file()]
    if missing and not download:
        raise DatasetError(f"the Adult data set is not in the cache {str(folder)!r} and "
                           "download=False; pass a folder holding adult.data, set "
                           f"${ADULT_ENV_VAR}, or allow the download", path=str(folder))
    for name in missing:
        _download(url.rstrip("/") + "/" + name, folder / name, _CHECKSUMS[name])
    return folder


def _download(url: str, dest: Path, checksums: dict) -> None:
    """Fetch ``url`` into ``dest`` through a temporary file, checking its digests."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    except OSError as exc:
        raise DatasetError(f"cannot create the Adult cache folder {str(dest.parent)!r}: {exc}",
                           path=str(dest.parent)) from exc
    tmp = Path(tmp_name)
    try:
        digests = {algo: hashlib.new(algo, usedforsecurity=False) for algo in checksums}
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            while chunk := response.read(1 << 16):
                out.write(chunk)
                for digest in digests.values():
                    digest.update(chunk)
        for algo, expected in checksums.items():
            got = digests[algo].hexdigest()
            if got != expected:
                raise DatasetError(f"{url} does not match the known {algo} checksum of {dest.name} "
                                   f"(expected {expected}, got {got}); nothing was saved", path=url)
        os.replace(tmp, dest)
    except DatasetError:
        raise
    except (OSError, ValueError) as exc:
        # URLError is an OSError; ValueError comes from a malformed URL.
        raise DatasetError(f"cannot download {url} to {str(dest)!r}: {exc}", path=url) from exc
    finally:
        tmp.unlink(missing_ok=True)


def load_adult(path=None, *, raw: bool = False, download: bool = True, url: str = ADULT_URL):
    """Load ``adult.data`` as a DataFrame.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The folder holding ``adult.data``; see :func:`adult_dir` for the
        default (``$DMONDRIAN_ADULT_DIR``, then a downloaded cache).
    raw : bool, default False
        False gives the setup of the k-anonymity literature (LeFevre et al. 2006): every record with
        a ``?`` is dropped, leaving 30,162 rows out of 32,561, and the index is renumbered from 0.
        True keeps every record and reads ``?`` as a missing value (NaN).
    download : bool, default True
        Whether an empty cache may be filled from UCI (see :func:`adult_dir`).
    url : str, default :data:`ADULT_URL`
        Where to download from.

    Returns
    -------
    pandas.DataFrame
        The :data:`ADULT_COLUMNS`: :data:`ADULT_NUMERIC` as int64, the other
        columns as pandas' default string dtype with surrounding whitespace
        removed (``income`` is ``"<=50K"`` or ``">50K"``).

    Raises
    ------
    DatasetError
        The folder or ``adult.data`` is missing (and cannot be downloaded), or
        the file is not in the Adult format.

    Examples
    --------
    A folder holding a two-record file in the Adult format:

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "adult.data").write_text(
    ...     "30, Private, 1000, Bachelors, 13, Never-married, Sales, Own-child, White, Male,"
    ...     " 0, 0, 40, United-States, <=50K\\n"
    ...     "41, ?, 2000, HS-grad, 9, Divorced, ?, Unmarried, Black, Female,"
    ...     " 0, 0, 20, Canada, >50K\\n")
    >>> load_adult(folder)[["age", "workclass", "income"]]
       age workclass income
    0   30   Private  <=50K
    >>> load_adult(folder, raw=True)["occupation"].isna().tolist()
    [False, True]
    """
    folder = adult_dir(path, download=download, url=url)
    file = folder / _DATA_FILE
    if not file.is_file():
        raise DatasetError(f"{str(folder)!r} holds no {_DATA_FILE}", path=str(file))
    dtypes = {c: ("int64" if c in ADULT_NUMERIC else str) for c in ADULT_COLUMNS}
    try:
        # Only "?" means missing: "NA" or "None" would be real values.
        df = pd.read_csv(file, header=None, names=ADULT_COLUMNS, dtype=dtypes,
                         skipinitialspace=True, na_values=[_MISSING_TOKEN], keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise DatasetError(f"{str(file)!r} is not in the Adult format: {exc}", path=str(file)) \
            from exc
    except OSError as exc:
        raise DatasetError(f"cannot read {str(file)!r}: {exc}", path=str(file)) from exc
    for column in ADULT_COLUMNS:
        if column not in ADULT_NUMERIC:
            df[column] = df[column].str.strip()
    if not raw:
        df = df.dropna().reset_index(drop=True)
    return df


def load_adult_hierarchies(path=None) -> dict[str, Hierarchy]:
    """Read the generalization hierarchies of the Adult columns.

    Every ``hierarchies/adult_<name>.txt`` of the folder becomes the hierarchy
    of the column ``<name>`` with ``_`` read as ``-`` (so
    ``adult_marital_status.txt`` belongs to ``marital-status``).

    Parameters
    ----------
    path : str or os.PathLike, optional
        The Adult folder (the one holding ``hierarchies/``); defaults as in :func:`adult_dir`,
        without downloading (UCI does not publish hierarchies).

    Returns
    -------
    dict of str to Hierarchy
        Keyed by column name, in :data:`ADULT_COLUMNS` order.

    Raises
    ------
    DatasetError
        No ``hierarchies`` folder, no ``adult_*.txt`` file in it, or a file
        whose name is not an Adult column.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "hierarchies").mkdir()
    >>> _ = (folder / "hierarchies" / "adult_marital_status.txt").write_text(
    ...     "Never-married;*\\nDivorced;leave;*\\nSeparated;leave;*\\n")
    >>> h = load_adult_hierarchies(folder)["marital-status"]
    >>> h.lca(["Divorced", "Separated"])
    'leave'
    """
    explicit = _explicit_dir(path)
    folder = explicit[0] if explicit is not None else adult_cache_dir()
    hdir = folder / _HIERARCHY_DIR
    files = sorted(hdir.glob(f"{_HIERARCHY_PREFIX}*.txt")) if hdir.is_dir() else []
    if not files:
        raise DatasetError(f"no {_HIERARCHY_DIR}/{_HIERARCHY_PREFIX}*.txt in {str(folder)!r}; the "
                           f"hierarchies are not part of the UCI download, point ${ADULT_ENV_VAR} "
                           "or the path argument at a folder that holds them", path=str(hdir))
    found = {}
    for file in files:
        column = file.stem[len(_HIERARCHY_PREFIX):].replace("_", "-")
        if column not in ADULT_COLUMNS:
            raise DatasetError(f"hierarchy file {str(file)!r} names no Adult column "
                               f"({column!r})", path=str(file))
        found[column] = Hierarchy.from_file(file, name=column)
    return {c: found[c] for c in ADULT_COLUMNS if c in found}
