"""The options of an anonymization, declared once for every entry point.

The local engine (:func:`dmondrian.local.anonymize`), the Dask engine
(:mod:`dmondrian.distributed`), :class:`~dmondrian.MondrianAnonymizer` and the
command line all take the same options. Each is one :class:`Option` here: its
name, default, allowed choices or check, and a one-line description. The
entry points read them from this table, so a name, a default or a choice is
written once:

* :func:`takes_options` gives a function the options of some groups as
  keyword-only arguments. Its signature (what ``help()``, IDEs and
  scikit-learn's ``get_params`` see) lists them with their defaults; a call
  gets every option filled in, and an unknown keyword is refused as Python
  refuses one.
* :func:`dmondrian.validation.check_options` validates them against a table.
* The command line builds its flags' choices, defaults and help from
  :data:`ANONYMIZE` (see :mod:`dmondrian.cli`).

Groups: :data:`ANONYMIZE` (every engine), :data:`DASK_PLAN` (the Dask
engine's sizing, cluster and progress), :data:`DASK` (those and the lazy
path's shuffle), :data:`WRITE` (the Dask engine's writers).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from .errors import ParameterError

__all__ = ["ANONYMIZE", "DASK", "DASK_PLAN", "WRITE", "FORMATS", "L_KINDS", "OBJECTIVES", "REFINES",
           "Option", "defaults", "takes_options"]

# Every list of choices, once: the engines, verify, the I/O and the command line
# read them from here.
MODES = ("strict", "relaxed")
GENERALIZATIONS = ("range", "midpoint", "mean")
L_KINDS = ("distinct", "entropy", "recursive")
OBJECTIVES = ("balanced", "dm", "ncp")
REFINES = ("none", "local")
SUPPRESSED = ("mask", "drop")
#: The table formats read and written (:mod:`dmondrian.io`, the command line).
FORMATS = ("csv", "parquet")


@dataclass(frozen=True)
class Option:
    """One keyword option.

    Parameters
    ----------
    name : str
        The keyword.
    default : object
        Its default value.
    help : str
        One line saying what it does (the command line's help too).
    choices : tuple, optional
        The values allowed, when they are a fixed set.
    """

    name: str
    default: object
    help: str
    choices: tuple | None = None

    def check_choice(self, value):
        """``value`` if it is one of ``choices``, else a :class:`ParameterError`.

        Examples
        --------
        >>> ANONYMIZE["mode"].check_choice("strict")
        'strict'
        >>> ANONYMIZE["mode"].check_choice("lax")
        Traceback (most recent call last):
        ...
        dmondrian.errors.ParameterError: mode must be one of 'strict', 'relaxed', got 'lax'
        """
        if self.choices is not None and value not in self.choices:
            raise ParameterError(self.name, f"{self.name} must be one of "
                                            f"{', '.join(map(repr, self.choices))}, got {value!r}")
        return value


def _group(*options: Option) -> dict[str, Option]:
    return {o.name: o for o in options}


#: What every engine takes, beside the table, its quasi-identifiers and k.
ANONYMIZE = _group(
    Option("mode", "strict", "strict keeps equal values together; relaxed splits median "
           "ties for balanced halves", MODES),
    Option("generalization", "range", "how numeric and datetime QIs are published: a range "
           "label, or the class's midpoint or mean", GENERALIZATIONS),
    Option("objective", "balanced", "what the cuts optimize: balanced median cuts, classes "
           "packed close to k rows (dm: lower discernibility), or the cheapest children "
           "(ncp: lower NCP)",
           OBJECTIVES),
    Option("refine", "none", "after the cuts, move and swap rows between neighbouring "
           "classes while the NCP drops (local: lower NCP, slower; classes may overlap)",
           REFINES),
    Option("max_depth", None, "stop cutting after this many levels (coarser classes)"),
    Option("hierarchies", None, "generalization hierarchy per nominal QI: a Hierarchy, a "
           "file of 'leaf;parent;...;*' lines, or a mapping leaf -> ancestors"),
    Option("qi_kinds", None, "kind per QI overriding the one detected from its dtype "
           "(numeric, datetime, ordinal, nominal, hierarchy)"),
    Option("class_column", None, "add a column holding each row's equivalence-class id"),
    Option("l", None, "l-diversity of the sensitive column in every class"),
    Option("l_kind", "distinct", "which l-diversity", L_KINDS),
    Option("c", None, "the c of recursive (c, l)-diversity"),
    Option("t", None, "t-closeness of the sensitive column (Earth Mover's Distance)"),
    Option("sensitive", None, "the sensitive column l and t are about (never generalized)"),
    Option("constraints", None, "more privacy constraints (dmondrian.constraints), all "
           "enforced"),
    Option("suppression", 0.0, "share of rows (0 <= f < 1) that may be suppressed so the "
           "rest generalize less (dmondrian.suppression)"),
    Option("suppressed", "mask", "suppressed rows: mask publishes every QI hidden ('*'), "
           "drop leaves them out", SUPPRESSED),
    Option("noise", None, "replace numeric columns by their class's clipped mean plus Laplace "
           "noise: {column: {'epsilon': eps, 'bounds': (lo, hi)}} (dmondrian.noise)"),
    Option("random_state", None, "seed (int or numpy.random.Generator) making the noise "
           "repeatable; default: OpenDP's unseeded exact sampler"),
    Option("entity", None, "person key of an event table (e.g. user_id): every class holds "
           "k distinct entities, l and t count them, noise is bounded per entity; the column "
           "is never released (dmondrian.entities)"),
    Option("max_contributions", 1, "with entity and noise: rows of one entity a class's "
           "noised mean keeps (the rest are left out of it)"),
    Option("max_classes", 1, "with entity and noise: classes whose noised means one entity's "
           "rows count in (its rows in other classes are left out of them)"),
    Option("identifiers", None, "direct identifiers: columns removed from the release"),
    Option("allow_unique", None, "columns judged safe although they single out rows (no "
           "warning for them)"),
)

#: The Dask engine's sizing, cluster and progress.
DASK_PLAN = _group(
    Option("leaf_rows", None, "regions up to this many rows are finished in memory by one "
           "task (default: from the workers' memory limits)"),
    Option("client", None, "the distributed.Client to run on (default: the current one, "
           "$DASK_SCHEDULER_ADDRESS, or an embedded LocalCluster)"),
    Option("progress", None, "show a progress bar per pass (default: when a terminal or "
           "notebook is attached)"),
    Option("exchange", "auto", "what the shuffle moves: keys (the QIs' keys; every input "
           "partition is read again and written with its published values, in its own "
           "partition), rows (every column), or auto (by the bytes each would move)",
           ("auto", "keys", "rows")),
    Option("stall_timeout", 120.0, "seconds a job may go without any finished task while "
           "workers are paused for lack of memory before it stops with JobStalledError "
           "(None: wait for ever)"),
)

#: The Dask engine's lazy path: the plan's options and the shuffle.
DASK = DASK_PLAN | _group(
    Option("shuffle_method", None, "how rows move to their leaves: p2p, tasks or disk "
           "(default: p2p with a client, else dask's choice)", (None, "p2p", "tasks", "disk")),
)

#: What the Dask engine's writers take beside the Dask options.
WRITE = _group(
    Option("write_options", None, "keyword arguments for the file writer"),
    Option("storage_options", None, "fsspec storage options of the output URL"),
)


def defaults(*groups: dict[str, Option]) -> dict:
    """``{name: default}`` of every option of ``groups``.

    Examples
    --------
    >>> defaults(ANONYMIZE)["mode"], defaults(DASK)["leaf_rows"]
    ('strict', None)
    """
    return {name: o.default for g in groups for name, o in g.items()}


def takes_options(*groups: dict[str, Option]) -> Callable:
    """Decorator: the function takes the options of ``groups`` as keyword-only arguments.

    The function declares them as ``**options`` and is always called with
    every one of them filled in (defaults for those not given). Its signature
    lists them, after its own parameters, with their defaults.

    Examples
    --------
    >>> @takes_options(ANONYMIZE)
    ... def f(table, k, **options):
    ...     return options["mode"], options["l"]
    >>> f(None, 2, l=3)
    ('strict', 3)
    >>> str(inspect.signature(f)).startswith("(table, k, *, mode='strict'")
    True
    >>> f(None, 2, lx=3)
    Traceback (most recent call last):
    ...
    TypeError: f() got an unexpected keyword argument 'lx'
    """
    table = {name: o for g in groups for name, o in g.items()}

    def decorate(fn):
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
        names = {p.name for p in own}
        added = [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default)
                 for o in table.values() if o.name not in names]
        allowed = set(table) - names

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for name in kwargs:
                if name not in allowed and name not in names:
                    raise TypeError(f"{fn.__name__}() got an unexpected keyword argument "
                                    f"{name!r}")
            for name in allowed:
                kwargs.setdefault(name, table[name].default)
            return fn(*args, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=own + added)
        return wrapper

    return decorate
