"""The commit step of a release: stage the data and its manifest, publish them last.

A release is *committed* when its manifest (``OUTPUT.manifest.json``) stands beside it. Until every
check has passed, nothing is written at OUTPUT: the data and the manifest are written into a hidden
staging folder beside it, ``.NAME.dmondrian-staging-XXXX/`` (readers of a Parquet dataset skip names
starting with a dot, and so do globs). :meth:`Stage.commit` then

1. moves the data into place: a rename on a local path (atomic, for a file or a folder), a copy of
   every object on an object store (no rename there; ``_SUCCESS`` is staged with a folder's parts
   and copied last, as Hadoop and Spark mark theirs);
2. writes the manifest last, in one step (a rename beside it, or a copy of
   one object), which marks the commit;
3. removes the staging folder.

A run killed at any moment (SIGKILL to its whole process group) leaves its staging folder, and at
worst, between steps 1 and 2, OUTPUT without its manifest. The next run for the same OUTPUT removes
what a dead run left (:func:`staged_release`): its staging folder, and OUTPUT itself when it has no
manifest and is the dead run's own, which the staged manifest tells: its files are those the staged
manifest lists, at their sizes. Data at OUTPUT that is not ours (no staging folder claims it) is
never removed without ``overwrite``. So the same command runs again as it was, without
``--overwrite``.

The library's Parquet writers (:func:`dmondrian.distributed.anonymize_to_parquet`, the lazy
release's ``to_parquet`` when it computes, and a fitted plan's ``transform_to_parquet``) stage their
files the same way (:func:`staged_folder`). By default they write no manifest and publish with
``commit(manifest=False)``, into a folder that exists already (``merge``), as they always did; asked
for one (``manifest=True``) they commit as the command line does, the manifest last, and refuse an
OUTPUT that exists.

Concurrent runs for one OUTPUT: on a local filesystem each run holds an exclusive lock
(``fcntl.flock``) on a file in its staging folder while it lives; the kernel drops the lock of a
killed process, so a staging folder whose lock can be taken is a dead run's, and one whose lock is
held is a live run's, which makes the new run stop with :class:`~dmondrian.errors.OutputError`. An
object store has no locks: a staging prefix found there is taken for a dead run's, and two runs
writing the same OUTPUT at once are not supported (the later one removes the earlier one's staging,
which then fails; neither publishes over a committed release without ``overwrite``).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator

from ..errors import OutputError

__all__ = ["Stage", "staged_release", "staged_folder", "StagedFolder", "STAGING_TAG",
           "checkpoint", "commit_with_manifest", "stage_written_manifest", "atomic_output",
           "copy_objects", "SUCCESS_MARKER"]

#: What a staging folder's name holds after ``.NAME``.
STAGING_TAG = ".dmondrian-staging-"
_LOCK, _MANIFEST, _DATA, _COMMITTING, _REPLACED = ("lock", "manifest.json", "data",
                                                   "committing", "replaced")


# -- the filesystem's helpers ----------------------------------------------------------


#: The object a directory release on an object store gets last, once complete.
SUCCESS_MARKER = "_SUCCESS"


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line, cut at 300 characters (for a typed error's)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _is_local(fs) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _check_output(fs, path: str, url: str) -> str:
    """The parent folder of OUTPUT, made when missing; refused when it cannot be written
    (whether OUTPUT exists is :meth:`Stage.open`'s question)."""
    parent = fs._parent(path)
    # Object stores have no real directories; only a local path can name a read-only one, and saying
    # so beats a PermissionError later. Missing parents are made, as dask's writers do: a daily job
    # writes to a new dated folder.
    if _is_local(fs):
        ancestor = parent
        while ancestor and not fs.exists(ancestor):
            ancestor = fs._parent(ancestor)
        if ancestor and not fs.isdir(ancestor):
            raise OutputError(url, f"cannot write {url!r}: {ancestor!r} is not a directory")
        if ancestor != parent:
            try:
                fs.makedirs(parent, exist_ok=True)
            except OSError as exc:
                raise OutputError(url, f"cannot write {url!r}: cannot create directory "
                                       f"{parent!r}: {one_line(exc)}") from exc
        if not fs.isdir(parent):
            raise OutputError(url, f"cannot write {url!r}: {parent!r} is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputError(url, f"cannot write {url!r}: directory {parent!r} is not writable")
    return parent


def copy_objects(fs, source: str, target: str, directory: bool) -> None:
    """Copy the file ``source``, or every object under the folder ``source`` (its
    ``_SUCCESS`` last), to ``target``: an object store has no rename. A failed copy
    removes what it made, so ``target`` never holds part of a folder."""
    if not directory:
        fs.copy(source, target)
        return
    # Other processes (Dask workers) wrote the objects: no listing cached here is current.
    fs.invalidate_cache(source)
    objects = sorted(fs.find(source), key=lambda p: (p.endswith("/" + SUCCESS_MARKER), p))
    copied = []
    try:
        for obj in objects:
            dest = target + obj[len(source):]
            fs.copy(obj, dest)
            copied.append(dest)
    except BaseException:
        with contextlib.suppress(Exception):
            if copied:
                fs.rm(copied)
        raise
    fs.invalidate_cache(target)


def checkpoint(step: str) -> None:
    """A named point of the commit (``"staged"``, ``"moved"``, ``"committed"``).

    It does nothing: tests replace it to kill the process there
    (tests/failing_write.py), proving that every point is safe to die at.
    """


class Stage:
    """A release being staged for ``url``; see the module's docstring.

    Attributes
    ----------
    fs : fsspec.AbstractFileSystem
        The output's filesystem.
    path : str
        OUTPUT, as ``fs`` names it.
    url : str
        OUTPUT as given.
    root : str
        The staging folder.
    data_url : str
        Where the writers write the release (an fsspec URL, ending in ``/``
        for a folder; nothing is there until a writer makes it).
    """

    def __init__(self, url: str, *, overwrite: bool, directory: bool, merge: bool = False,
                 storage_options=None):
        import fsspec

        url = os.fspath(url)
        self.url = url
        self.merge = merge
        self.fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        self.path = path.rstrip("/")
        self.overwrite = overwrite
        self.directory = directory
        self.parent = _check_output(self.fs, self.path, url)
        self.name = self.path.rsplit("/", 1)[-1]
        self.manifest = self.path + ".manifest.json"
        self.root = f".{self.name}{STAGING_TAG}{uuid.uuid4().hex[:12]}"
        self.root = f"{self.parent}/{self.root}" if self.parent else self.root
        self.data = f"{self.root}/{_DATA}/{self.name}"
        self.data_url = self.fs.unstrip_protocol(self.data) + ("/" if directory else "")
        self._lock = None

    # -- opening: our staging folder, and what dead runs left ------------------------------

    def open(self) -> None:
        """Make the staging folder (locked on a local path), clear what dead runs for the
        same OUTPUT left, and refuse an OUTPUT that exists unless ``overwrite``."""
        fs = self.fs
        fs.makedirs(f"{self.root}/{_DATA}", exist_ok=True)
        if _is_local(fs):
            self._lock = _try_lock(f"{self.root}/{_LOCK}")
        else:
            fs.pipe(f"{self.root}/{_LOCK}", b"")
        for other in self._other_stagings():
            try:
                if _is_local(fs):
                    held = _try_lock(f"{other}/{_LOCK}")
                    if held is None:
                        raise OutputError(self.url, f"another dmondrian run is writing "
                                                    f"{self.url!r} (its staging folder is "
                                                    f"{other!r}): wait for it to finish")
                    with contextlib.closing(held):
                        self._clear(other)
                else:
                    self._clear(other)
            except FileNotFoundError:
                continue  # its run finished and removed it meanwhile
        if not (self.overwrite or self.merge) and (self._exists(self.path)
                                                   or self._exists(self.manifest)):
            raise OutputError(self.url, f"output {self.url!r} already exists (pass "
                                        "--overwrite to replace it)")

    def seal(self) -> None:
        """Mark the staged data complete: a folder on an object store gets ``_SUCCESS``
        (copied last by :meth:`commit`). Call it before the manifest hashes the data."""
        if self.directory and not _is_local(self.fs):
            self.fs.pipe(f"{self.data}/{SUCCESS_MARKER}", b"")

    def _exists(self, path: str) -> bool:
        # Other processes (Dask workers, another run) write here: no cached listing holds.
        self.fs.invalidate_cache(path)
        return self.fs.exists(path)

    def _other_stagings(self) -> list[str]:
        prefix = f".{self.name}{STAGING_TAG}"
        self.fs.invalidate_cache(self.parent)
        try:
            entries = self.fs.ls(self.parent or "", detail=False)
        except FileNotFoundError:
            return []
        mine = self.root.rstrip("/")
        return sorted(e.rstrip("/") for e in entries
                      if e.rstrip("/").rsplit("/", 1)[-1].startswith(prefix)
                      and e.rstrip("/") != mine)

    def _clear(self, other: str) -> None:
        """Remove a dead run's staging folder, and OUTPUT first if that run had moved its
        data there and died before writing the manifest."""
        fs = self.fs
        if (self._exists(f"{other}/{_COMMITTING}") and self._exists(self.path)
                and not self._exists(self.manifest) and self._ours(other)):
            fs.rm(self.path, recursive=True)
        fs.rm(other, recursive=True)

    def _ours(self, other: str) -> bool:
        """Whether every file at OUTPUT is one the staged manifest of ``other`` lists, at
        its size (an object store's copy may have stopped half-way)."""
        try:
            with self.fs.open(f"{other}/{_MANIFEST}", "rb") as fh:
                listed = {f["path"]: int(f["bytes"]) for f in json.load(fh)["output"]["files"]}
        except (OSError, ValueError, KeyError, TypeError):
            return False
        found = _listing(self.fs, self.path)
        return bool(found) and all(listed.get(rel) == size for rel, size in found.items())

    # -- the manifest, and the commit ------------------------------------------------------

    @property
    def manifest_staged(self) -> str:
        """Where the manifest is staged (as ``fs`` names it)."""
        return f"{self.root}/{_MANIFEST}"

    def stage_manifest(self, manifest: dict) -> None:
        """Stage the release's manifest, written as
        :func:`dmondrian.evaluation.manifest.write_manifest` writes it; call :meth:`commit` next."""
        text = json.dumps(manifest, indent=2, allow_nan=False) + "\n"
        self.fs.pipe(self.manifest_staged, text.encode("utf-8"))

    def commit(self, manifest: bool = True) -> None:
        """Publish the staged data, then its staged manifest, then remove the staging.

        ``manifest=False`` (:func:`atomic_output`, and the library's writers unless asked for one)
        publishes the data alone; with ``merge``, into a folder that exists already, file by file.

        Raises
        ------
        OutputError
            OUTPUT appeared meanwhile and ``overwrite`` was not given, or a
            step failed (what was published of the data is removed again).
        """
        fs = self.fs
        if manifest and not self._exists(self.manifest_staged):
            raise RuntimeError("dmondrian: commit() without a staged manifest")
        checkpoint("staged")
        local = _is_local(fs)
        try:
            if self.merge and self.directory and self._exists(self.path) and fs.isdir(self.path):
                self._merge_data(local)
            else:
                self._replace(local, manifest)
                fs.pipe(f"{self.root}/{_COMMITTING}", b"")
                if local:
                    if self.directory and not os.path.exists(self.data):
                        os.makedirs(self.data)  # nothing written (an empty release)
                    os.replace(self.data, self.path)
                else:
                    copy_objects(fs, self.data, self.path, self.directory)
                checkpoint("moved")
            if manifest:
                if local:
                    os.replace(self.manifest_staged, self.manifest)
                else:
                    fs.copy(self.manifest_staged, self.manifest)
        except OutputError:
            raise
        except OSError as exc:
            raise OutputError(self.url, f"cannot publish {self.url!r}: {one_line(exc)}") from exc
        if manifest:
            checkpoint("committed")
        self.close(remove=True)

    def _replace(self, local: bool, manifest: bool) -> None:
        """Make way for the staged data: an OUTPUT there (or, committing a manifest, a
        manifest there) is an error without ``overwrite``, else removed, with the
        manifest beside it, which would describe other data."""
        fs = self.fs
        if not (self._exists(self.path) or (manifest and self._exists(self.manifest))):
            return
        if not self.overwrite:
            raise OutputError(self.url, f"output {self.url!r} already exists (pass "
                                        "--overwrite to replace it)")
        # The old manifest goes first: a release never stands beside another's.
        if self._exists(self.manifest):
            fs.rm(self.manifest)
        if self._exists(self.path):
            if local:  # a rename, so that a crash loses the old release whole
                os.replace(self.path, f"{self.root}/{_REPLACED}")
            else:
                fs.rm(self.path, recursive=True)

    def _merge_data(self, local: bool) -> None:
        """Move the staged folder's files into the folder at OUTPUT, one by one."""
        fs = self.fs
        fs.invalidate_cache(self.data)
        for obj in sorted(fs.find(self.data)):
            dest = self.path + obj[len(self.data):]
            if local:
                fs.makedirs(fs._parent(dest), exist_ok=True)
                os.replace(obj, dest)
            else:
                fs.copy(obj, dest)
        fs.invalidate_cache(self.path)

    def close(self, remove: bool) -> None:
        """Release the lock; remove the staging folder when ``remove``."""
        if remove:
            with contextlib.suppress(Exception):
                if self._exists(self.root):
                    self.fs.rm(self.root, recursive=True)
        if self._lock is not None:
            self._lock.close()
            self._lock = None


@contextlib.contextmanager
def atomic_output(url: str, *, directory: bool = False, overwrite: bool = False) -> Iterator[tuple]:
    """Yield ``(fs, path)`` to write a file (or, with ``directory``, a folder) to; publish
    it at ``url`` when the block succeeds, through a :class:`Stage` without a manifest.

    ``path`` is inside the hidden staging folder beside ``url`` (readers of a Parquet dataset, and
    globs, skip it): a rename publishes it on a local path (atomic), a copy of each object on an
    object store (a folder's ``_SUCCESS`` last, :meth:`Stage.seal`). If the block raises, the
    staging folder is removed and nothing appears at ``url``; a run killed leaves only it, which the
    next write to ``url`` removes. A ``url`` inside a staging folder already (the command line's,
    which publishes it with its manifest) is written as it is.

    Parameters
    ----------
    url : str
        Final path or fsspec URL.
    directory : bool
        Whether the output is a directory (a Parquet dataset) rather than a file.
    overwrite : bool
        Replace an existing ``url``; otherwise an existing output is an error.

    Examples
    --------
    >>> import fsspec
    >>> with atomic_output("memory://doc/atomic.txt") as (fs, tmp):
    ...     with fs.open(tmp, "w") as fh:
    ...         _ = fh.write("complete")
    >>> fsspec.open("memory://doc/atomic.txt", "r").open().read()
    'complete'
    """
    if _staged_already(url):
        import fsspec

        fs, path = fsspec.core.url_to_fs(url)
        path = path.rstrip("/")
        if directory:
            fs.makedirs(path, exist_ok=True)
        yield fs, path
        return
    with staged_release(url, overwrite=overwrite, directory=directory) as stage:
        if directory:
            stage.fs.makedirs(stage.data, exist_ok=True)
        yield stage.fs, stage.data
        stage.seal()
        stage.commit(manifest=False)


def _staged_already(url) -> bool:
    """Whether ``url`` lies inside a staging folder (a caller's, which publishes it)."""
    return any(part.startswith(".") and STAGING_TAG in part for part in os.fspath(url).split("/"))


@contextlib.contextmanager
def staged_release(url: str, *, overwrite: bool = False, directory: bool = False,
                   merge: bool = False, storage_options=None) -> Iterator[Stage]:
    """A :class:`Stage` for ``url``: write to ``stage.data_url``, stage the manifest,
    then call ``stage.commit()``.

    If the block raises, or ends without a commit, the staging folder is
    removed and nothing appears at ``url``.

    Parameters
    ----------
    url : str
        OUTPUT: a path or fsspec URL.
    overwrite : bool
        Replace an existing release; otherwise one is an
        :class:`~dmondrian.errors.OutputError`, raised before anything is staged.
    directory : bool
        Whether the release is a folder (a Parquet dataset): ``data_url`` then ends in ``/``.
    merge : bool
        A folder at ``url`` is written into (the library's writers), not
        refused; see :meth:`Stage.commit`.
    storage_options : dict, optional
        Keywords for the fsspec filesystem of ``url``.

    Examples
    --------
    >>> import fsspec
    >>> with staged_release("memory://doc/staged.csv") as stage:
    ...     with fsspec.open(stage.data_url, "w") as fh:
    ...         _ = fh.write("age\\n[20, 29]\\n")
    ...     stage.seal()
    ...     stage.stage_manifest({"output": {"files": []}})
    ...     stage.commit()
    >>> fs = fsspec.filesystem("memory")
    >>> fs.exists("/doc/staged.csv"), fs.exists("/doc/staged.csv.manifest.json")
    (True, True)
    """
    stage = Stage(url, overwrite=overwrite, directory=directory, merge=merge,
                  storage_options=storage_options)
    try:
        stage.open()
        yield stage
    finally:
        stage.close(remove=True)


class StagedFolder:
    """What a library writer writes into (:func:`staged_folder`).

    Attributes
    ----------
    url : str
        Where to write the dataset folder (staged, or as given).
    manifest : dict or None
        The keywords of :func:`dmondrian.evaluation.manifest.write_manifest` the writer
        fills in (:meth:`describe`), when it was asked for a manifest; else None.
    """

    def __init__(self, url: str, manifest: bool):
        self.url = url
        self.manifest = {} if manifest else None

    def describe(self, **fields) -> None:
        """Record what the manifest says of the release (``parameters``, ``input_rows``,
        ``extra``, ...: :func:`dmondrian.evaluation.manifest.write_manifest`'s keywords); nothing
        without a manifest."""
        if self.manifest is not None:
            self.manifest.update(fields)


@contextlib.contextmanager
def staged_folder(path, storage_options=None, manifest: bool = False) -> Iterator[StagedFolder]:
    """For the library's Parquet writers: where to write a dataset folder, published at
    ``path`` when the block ends without error.

    Without ``manifest``, into the folder there, if any. With it, as the command line publishes:
    ``path`` must not exist (a dead run's leftovers are cleared, :meth:`Stage.open`), and the
    manifest of what the writer described (:meth:`StagedFolder.describe`) is written over the staged
    files and published last. A ``path`` inside a staging folder already (the command line's, which
    publishes it with its manifest) is written as it is: staged once, not twice.

    Parameters
    ----------
    path : str or os.PathLike
        The dataset folder.
    storage_options : dict, optional
        Keywords for its fsspec filesystem.
    manifest : bool
        Publish ``path.manifest.json`` with the data.

    Raises
    ------
    dmondrian.errors.OutputError
        With ``manifest``, when ``path`` exists (before anything is written).
    """
    text = os.fspath(path)
    if _staged_already(text):
        yield StagedFolder(text, False)
        return
    with staged_release(text, directory=True, merge=not manifest,
                        storage_options=storage_options) as stage:
        staged = StagedFolder(stage.data_url, manifest)
        yield staged
        if staged.manifest is None:
            stage.commit(manifest=False)
            return
        commit_with_manifest(stage, staged.manifest)


def commit_with_manifest(stage: Stage, fields: dict) -> None:
    """Seal ``stage``'s written data, stage its manifest (``fields``:
    :func:`stage_written_manifest`'s) and commit: the data, then the manifest last."""
    stage.seal()
    stage_written_manifest(stage, fields)
    stage.commit()


def stage_written_manifest(stage: Stage, fields: dict) -> dict:
    """Stage the manifest of ``stage``'s written data (``fields``: the keywords of
    :func:`dmondrian.evaluation.manifest.write_manifest` besides ``output``), hashing the staged
    files; return it. ``stage.commit()`` publishes it last."""
    import tempfile

    from ..evaluation.manifest import write_manifest

    # write_manifest writes a local file: build it in a temporary folder, then stage it.
    with tempfile.TemporaryDirectory() as folder:
        manifest = write_manifest(path=os.path.join(folder, "manifest.json"), output=stage.data_url,
                                  published=stage.url, **{"parameters": {}, **fields})
    stage.stage_manifest(manifest)
    return manifest


def _try_lock(path: str):
    """An open file holding an exclusive lock on ``path``, or None when another process
    holds it. Without ``fcntl`` (Windows) every lock is taken."""
    fh = open(path, "a+b")  # noqa: SIM115 - held open while the run lives
    try:
        import fcntl
    except ImportError:
        return fh
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def _listing(fs, path: str) -> dict:
    """``{relative path: bytes}`` of the file ``path`` (its name) or of every file under it."""
    fs.invalidate_cache(path)
    if not fs.exists(path):
        return {}
    if not fs.isdir(path):
        return {path.rsplit("/", 1)[-1]: int(fs.size(path))}
    base = path.rstrip("/")
    return {p[len(base) + 1:]: int(info["size"]) for p, info in fs.find(path, detail=True).items()}
