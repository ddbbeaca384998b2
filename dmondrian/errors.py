"""Typed errors raised by dmondrian.

Every error derives from :class:`DMondrianError`, so ``except DMondrianError`` catches anything the
library raises on purpose. Each subclass also derives from the built-in exception a Python user
would expect (``ValueError``, ``TypeError``, ``KeyError`` is deliberately avoided because its
``str`` quotes the message), and errors about one column carry that column's name in ``.column`` so
that programs can react without parsing the message.
"""

from __future__ import annotations

__all__ = ["DMondrianError", "ParameterError", "ColumnError", "MissingColumnError",
           "DuplicateColumnError", "UnsupportedDtypeError", "InvalidValueError", "HierarchyError",
           "InfeasibleError", "MemoryLimitError", "ParseError", "NotFittedError", "DatasetError",
           "MissingDependencyError", "IdentifyingColumnError", "IdentifyingColumnWarning",
           "TextQuasiIdentifierWarning", "JobStalledError", "PlanFileError",
           "WorkersRestartedError", "IOFailure", "OutputError"]


class DMondrianError(Exception):
    """Base class of every error dmondrian raises on purpose."""


class ParameterError(DMondrianError, ValueError):
    """A parameter has a value outside its declared constraints.

    Parameters
    ----------
    parameter : str
        The parameter's name, e.g. ``"k"``.
    message : str
        What is wrong, in a sentence that names the parameter.
    """

    def __init__(self, parameter: str, message: str):
        self.parameter = parameter
        super().__init__(message)


class ColumnError(DMondrianError, ValueError):
    """Something is wrong with one column of the input table.

    Parameters
    ----------
    column : str
        The offending column.
    message : str
        What is wrong; it names the column.
    """

    def __init__(self, column, message: str):
        self.column = column
        super().__init__(message)


class MissingColumnError(ColumnError):
    """A quasi-identifier (or sensitive) column is not in the table."""


class DuplicateColumnError(ColumnError):
    """A quasi-identifier is named twice."""


class UnsupportedDtypeError(ColumnError, TypeError):
    """A column's dtype cannot be used as a quasi-identifier."""


class InvalidValueError(ColumnError):
    """A column holds values the algorithm cannot accept (e.g. infinities)."""


class HierarchyError(ColumnError):
    """A generalization hierarchy is malformed or misses a value of its column."""


class InfeasibleError(DMondrianError, ValueError):
    """The privacy constraint cannot hold even for the whole table.

    For example ``k`` larger than the number of rows: no generalization of the
    table, however coarse, is k-anonymous.
    """


class MemoryLimitError(DMondrianError, RuntimeError):
    """The Dask workers' memory is too small for any plan of this table.

    Raised before the passes that would need it, instead of a run whose
    workers would pause for good or be killed.

    Parameters
    ----------
    memory_limit : float
        The workers' memory limit (bytes; the smallest over the workers).
    smallest : float
        The smallest limit per worker that works (bytes).
    message : str
        What is wrong; it names both limits.
    """

    def __init__(self, memory_limit: float, smallest: float, message: str):
        self.memory_limit = memory_limit
        self.smallest = smallest
        super().__init__(message)


class ParseError(DMondrianError, ValueError):
    """A published value could not be parsed back into bounds."""


class NotFittedError(DMondrianError, ValueError, AttributeError):
    """An estimator was used before ``fit`` (as scikit-learn's NotFittedError)."""


class DatasetError(DMondrianError, OSError):
    """A bundled data set cannot be found, downloaded, verified or read.

    Parameters
    ----------
    message : str
        What is wrong; it names the file, folder or URL.
    path : str, optional
        The file, folder or URL concerned.
    """

    def __init__(self, message: str, path=None):
        self.path = path
        super().__init__(message)


class MissingDependencyError(DMondrianError, ImportError):
    """An optional dependency a feature needs is not installed.

    Parameters
    ----------
    package : str
        The package to install.
    message : str
        What needs it and how to install it.
    """

    def __init__(self, package: str, message: str):
        self.package = package
        super().__init__(message, name=package)


class IdentifyingColumnError(ColumnError):
    """Columns that would be released as is single out rows (a record id, an email).

    Raised before anything is released (see :mod:`dmondrian.release.identifiers`). Either remove the
    columns (``identifiers=[...]``, the command line's ``--drop``) or, judged safe, allow them
    (``allow_unique=[...]``, ``--allow-unique``).

    Parameters
    ----------
    found : list of dmondrian.release.identifiers.IdentifyingColumn
        The columns, each with the share of the rows it singles out.
    message : str
        What is wrong; it names every column and both ways out.

    Attributes
    ----------
    column : object
        The first column found (the index's name, or ``"index"``, for the index).
    columns : list
        Every column found.
    found : list of dmondrian.release.identifiers.IdentifyingColumn
    """

    def __init__(self, found, message: str):
        self.found = list(found)
        self.columns = [f.column for f in self.found]
        super().__init__(self.columns[0] if self.columns else None, message)


class TextQuasiIdentifierWarning(UserWarning):
    """A text quasi-identifier with nearly one value per row
    (:func:`dmondrian.encoding.qi.warn_unique_text`).

    Its classes would publish sets of exact values: usually dates or numbers
    read as text, which the message says how to read as such.

    Attributes
    ----------
    column : object
        The column.
    """

    def __init__(self, column, message: str):
        self.column = column
        super().__init__(message)


class IdentifyingColumnWarning(UserWarning):
    """A column released as is looks like a person key (:mod:`dmondrian.release.person_keys`).

    A column that singles out rows is refused instead (:class:`IdentifyingColumnError`).

    Attributes
    ----------
    column : object
        The column (the index's name, or ``"index"``, for the index).
    """

    def __init__(self, column, message: str):
        self.column = column
        super().__init__(message)


class JobStalledError(DMondrianError, RuntimeError):
    """A Dask job made no progress while workers were paused for lack of memory.

    Raised after the job's ``stall_timeout`` (see
    :mod:`dmondrian._dask.watchdog`); the job's tasks are cancelled.

    Parameters
    ----------
    job : str
        The job that stalled.
    workers : list of dmondrian._dask.watchdog.PausedWorker
        The paused workers (``address``, ``name``, ``memory``, ``memory_limit``).
    timeout : float
        Seconds without progress.
    """

    def __init__(self, job: str, workers, timeout: float):
        self.job, self.workers, self.timeout = job, list(workers), timeout
        listed = "; ".join(w.describe() for w in self.workers)
        super().__init__(
            f"{job}: no task finished for {timeout:g} s while {len(self.workers)} worker(s) "
            f"were paused for lack of memory, so the job was stopped. Paused: {listed}. "
            "Give the workers more memory (or fewer threads each), pass a smaller "
            "leaf_rows, or a larger stall_timeout if a task may need longer")


class PlanFileError(DMondrianError, ValueError):
    """A fitted-plan file that cannot be read: not JSON, not a plan, or another version
    (see :mod:`dmondrian.plans.persist`)."""


class WorkersRestartedError(JobStalledError):
    """A Dask job whose workers kept being restarted for exceeding their memory limit.

    dask's nanny restarts a worker past 95 % of its limit; a job whose tasks fill a worker again
    each time would restart it for ever. Raised once :data:`dmondrian._dask.watchdog.RESTARTS_MAX`
    workers were restarted so during one watched wait (see :mod:`dmondrian._dask.watchdog`); the
    job's tasks are cancelled.

    Parameters
    ----------
    job : str
        The job that was stopped.
    workers : list of dmondrian._dask.watchdog.PausedWorker
        Every restart: the worker (``memory``: its process memory when the
        nanny restarted it; ``memory_limit``: as the scheduler last heard).
    timeout : float
        The wait's ``stall_timeout``.
    """

    def __init__(self, job: str, workers, timeout: float):
        self.job, self.workers, self.timeout = job, list(workers), timeout
        listed = "; ".join(w.describe() for w in self.workers)
        DMondrianError.__init__(self, f"{job}: workers were restarted {len(self.workers)} times "
                                      "for exceeding their memory limit, so the job was stopped. "
                                      f"Last seen before each restart: {listed}. Give the workers "
                                      "more memory (or fewer threads each), or pass a smaller "
                                      "leaf_rows")


class IOFailure(DMondrianError):
    """Base class of the errors raised while reading or writing tables (:mod:`dmondrian.io`)."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(message)


class OutputError(IOFailure, OSError):
    """The output cannot be written (missing or read-only directory, already exists)."""
