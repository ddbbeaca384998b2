"""The options of an anonymization, declared once for every entry point.

The local engine (:func:`dmondrian.local.anonymize`), the Dask engine
(:mod:`dmondrian.distributed`), :class:`~dmondrian.MondrianAnonymizer` and the command line all take
the same options. Each is one :class:`Option` here: its name, default, allowed choices or check, and
a one-line description. The entry points read them from this table, so a name, a default or a choice
is written once:

* :func:`takes_options` gives a function the options of some groups as keyword-only arguments. Its
  signature (what ``help()``, IDEs and scikit-learn's ``get_params`` see) lists them with their
  defaults; a call gets every option filled in, and an unknown keyword is refused as Python refuses
  one.
* :func:`dmondrian.encoding.validation.check_options` validates them against a table.
* :meth:`Option.check` checks a value against the option's :class:`Range` or choices, the one check
  the engines, the estimator, :func:`dmondrian.verify` and the command line's flag types
  (:mod:`dmondrian.cli._types`) run, so a value is refused with the same
  :class:`~dmondrian.errors.ParameterError` by each of them.
* :attr:`Option.plan` says what a fitted plan does with the option, and
  :func:`plan_fit_options` applies it (see :mod:`dmondrian.plans`).
* The command line builds its flags' choices, defaults, types and help from
  :data:`ANONYMIZE` (see :mod:`dmondrian.cli`).

Groups: :data:`ANONYMIZE` (every engine), :data:`DASK_PLAN` (the Dask
engine's sizing, cluster and progress), :data:`DASK` (those and the lazy
path's shuffle), :data:`WRITE` (the Dask engine's writers).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError

__all__ = ["ANONYMIZE", "DASK", "DASK_PLAN", "WRITE", "EXCHANGES", "FORMATS", "K", "L_KINDS",
           "L_VARIANTS", "OBJECTIVES", "PLAN_KEEPS", "REFINES", "Option", "Range",
           "RegisteredNames", "defaults", "plan_fit_options", "takes_options"]

# Every list of choices, once: the engines, verify, the I/O and the command line
# read them from here.
MODES = ("strict", "relaxed")
GENERALIZATIONS = ("range", "midpoint", "mean")
#: Every l-diversity variant by name, filled by
#: :func:`dmondrian.privacy.constraints.register_l_variant` (its module registers the
#: built-in ones; a new variant registers itself the same way).
L_VARIANTS: dict = {}


class RegisteredNames:
    """The names of a registry as an option's choices, read when asked, so that a
    variant registered after this module is imported is a choice too.

    Examples
    --------
    >>> names = RegisteredNames({"a": 1})
    >>> "a" in names, ["a"] in names, tuple(names)
    (True, False, ('a',))
    """

    def __init__(self, registry: dict, filled_by: str | None = None):
        self._registry = registry
        self._filled_by = filled_by

    def _names(self) -> dict:
        # The module that registers the built-in entries imports this one, so it is
        # imported when the names are first read rather than here.
        if self._filled_by is not None:
            importlib.import_module(self._filled_by)
            self._filled_by = None
        return self._registry

    def __iter__(self):
        return iter(tuple(self._names()))

    def __len__(self) -> int:
        return len(self._names())

    def __getitem__(self, i):
        return tuple(self._names())[i]

    def __contains__(self, value) -> bool:
        try:
            return value in self._names()
        except TypeError:  # an unhashable value is no name
            return False

    def __repr__(self) -> str:
        return repr(tuple(self._names()))


L_KINDS = RegisteredNames(L_VARIANTS, "dmondrian.privacy.constraints")
OBJECTIVES = ("balanced", "dm", "ncp")
REFINES = ("none", "local")
SUPPRESSED = ("mask", "drop")
#: What the Dask engine's shuffle moves (``exchange``).
EXCHANGES = ("auto", "keys", "rows")
#: The table formats read and written (:mod:`dmondrian.io.files`, the command line).
FORMATS = ("csv", "parquet")


@dataclass(frozen=True)
class Range:
    """The numbers an option takes, as scikit-learn's ``Interval`` states them.

    Parameters
    ----------
    type : numbers.Integral or numbers.Real
        Integers only, or any real number (integers too). ``bool`` is never
        a number here, and a real number must be finite.
    low, high : float, optional
        The bounds; None for no bound on that side.
    closed : {"both", "left", "right", "neither"}, default "both"
        Which bounds are allowed values themselves.
    what : str, optional
        What the message calls a value ("a number of seconds"); default "an integer" or "a number".

    Examples
    --------
    >>> 0.5 in Range(numbers.Real, 0, 1, "left"), 1 in Range(numbers.Real, 0, 1, "left")
    (True, False)
    >>> str(Range(numbers.Integral, 1))
    'an integer >= 1'
    """

    type: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"
    what: str | None = None

    def __contains__(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, self.type):
            return False
        if self.type is numbers.Real and not math.isfinite(value):
            return False
        left, right = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and (value < self.low or (value == self.low and not left)):
            return False
        return self.high is None or value < self.high or (value == self.high and right)

    def __str__(self) -> str:
        what = self.what or ("an integer" if self.type is numbers.Integral else "a number")
        left, right = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            return (f"{what} in {'[' if left else '('}{self.low:g}, {self.high:g}"
                    f"{']' if right else ')'}")
        if self.low is not None:
            return f"{what} {'>=' if left else '>'} {self.low:g}"
        if self.high is not None:
            return f"{what} {'<=' if right else '<'} {self.high:g}"
        return what

    def parse(self, text: str):
        """The number ``text`` spells: an int when it is one, else (for reals) a float.

        Raises ``ValueError`` when ``text`` is no number.
        """
        try:
            return int(text)
        except ValueError:
            if self.type is numbers.Integral:
                raise
        return float(text)


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
        The values allowed, when they are a fixed set; with a range, the
        names it takes besides its numbers.
    range : Range, optional
        The numbers allowed, when the option is a number. None is allowed too
        when it is the default or ``none_ok``.
    none_ok : bool, default False
        None is allowed although the default is another value (on the command line: ``none``).
    accepts : tuple of type, default ()
        Types allowed besides the range's numbers, taken as they are.
    plan_why : str, optional
        Why a plan refuses it, when the reason is not that it is given per release.
    plan : {"keep", "fit", "release", "refuse"}, optional
        What a fitted plan (:mod:`dmondrian.plans`) does with it: keeps it (and writes it into its
        file), uses it in the fit only (its encodings hold it), takes it per release instead
        (``transform``), or refuses it. None for the options that are not an anonymization's.
    """

    name: str
    default: object
    help: str
    choices: tuple | None = None
    range: Range | None = None
    none_ok: bool = False
    accepts: tuple = ()
    plan: str | None = None
    plan_why: str = ""

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

    def check(self, value):
        """``value`` if the option allows it (its choices, its range), else a ParameterError.

        An integer comes back as a Python ``int``.

        Examples
        --------
        >>> ANONYMIZE["t"].check(0.2), ANONYMIZE["max_depth"].check(None)
        (0.2, None)
        >>> ANONYMIZE["c"].check(0)
        Traceback (most recent call last):
        ...
        dmondrian.errors.ParameterError: c must be None or a number > 0, got 0
        """
        if (value is None and (self.default is None or self.none_ok)) \
                or isinstance(value, self.accepts) or self._named(value):
            return value
        if self.range is None:
            self.check_choice(value)
            return value
        if value not in self.range:
            raise ParameterError(self.name, f"{self.name} must be {self.describe()}, got {value!r}")
        return int(value) if isinstance(value, numbers.Integral) else value

    def _named(self, value) -> bool:
        """Whether ``value`` is one of the names a ranged option takes besides numbers."""
        return self.range is not None and isinstance(value, str) \
            and value in (self.choices or ())

    def require(self, value):
        """:meth:`check`, with None refused (a value the caller must give).

        Examples
        --------
        >>> ANONYMIZE["t"].require(None)
        Traceback (most recent call last):
        ...
        dmondrian.errors.ParameterError: t must be a number in [0, 1], got None
        """
        if value is None:
            raise ParameterError(self.name, f"{self.name} must be {self.range}, got None")
        return self.check(value)

    def describe(self, none: str = "None") -> str:
        """What the option takes, as a message says it (``none`` names None)."""
        texts = [str(self.range) if self.range is not None else "a value"]
        texts += [f"a {t.__module__.split('.')[0]}.random.{t.__name__}"
                  if t.__module__.startswith("numpy.random") else f"a {t.__name__}"
                  for t in self.accepts]
        if self.range is not None:
            texts += [repr(c) for c in self.choices or ()]
        if self.default is None or self.none_ok:
            texts.insert(0, none)
        return ", ".join(texts[:-1]) + " or " + texts[-1] if len(texts) > 1 else texts[0]

    def given(self, value) -> bool:
        """Whether ``value`` asks for something: neither None, empty, nor the default."""
        if value is None or (isinstance(value, (list, tuple, dict, set)) and not value):
            return False
        return not (type(value) is type(self.default) and value == self.default)


def _group(*options: Option) -> dict[str, Option]:
    return {o.name: o for o in options}


_INT_0, _INT_1 = Range(numbers.Integral, 0), Range(numbers.Integral, 1)

#: The class size every entry point takes (a positional argument, not an option).
K = Option("k", None, "minimum equivalence-class size", range=_INT_1)

#: What every engine takes, beside the table, its quasi-identifiers and k.
ANONYMIZE = _group(
    Option("mode", "strict", "strict keeps equal values together; relaxed splits median "
           "ties for balanced halves", MODES, plan="keep"),
    Option("generalization", "range", "how numeric and datetime QIs are published: a range "
           "label, or the class's midpoint or mean", GENERALIZATIONS, plan="keep"),
    Option("objective", "balanced", "what the cuts optimize: balanced median cuts, classes "
           "packed close to k rows (dm: lower discernibility), or the cheapest children "
           "(ncp: lower NCP)",
           OBJECTIVES, plan="keep"),
    Option("refine", "none", "after the cuts, move and swap rows between neighbouring "
           "classes while the NCP drops (local: lower NCP, slower; classes may overlap)",
           REFINES, plan="refuse", plan_why="it routes rows through the cuts, which refined "
           "classes no longer follow"),
    Option("refine_rows", None, "with refine=local: the rows refined together, at least 2k "
           "(larger blocks lose less, for more time), or all for the whole table (on Dask: "
           "each leaf); default: from the table's size and k", ("all",),
           range=Range(numbers.Integral, 2), plan="refuse",
           plan_why="it sizes the refinement, which a plan refuses"),
    Option("max_depth", None, "stop cutting after this many levels (coarser classes)",
           range=_INT_0, plan="keep"),
    Option("hierarchies", None, "generalization hierarchy per nominal QI: a Hierarchy, a "
           "file of 'leaf;parent;...;*' lines, or a mapping leaf -> ancestors", plan="fit"),
    Option("qi_kinds", None, "kind per QI overriding the one detected from its dtype "
           "(a name of dmondrian.kinds.QIKind.ALL)", plan="fit"),
    Option("class_column", None, "add a column holding each row's equivalence-class id",
           plan="keep"),
    Option("l", None, "l-diversity of the sensitive column in every class (a whole number "
           "unless l_kind is entropy)", range=Range(numbers.Real, 1), plan="keep"),
    Option("l_kind", "distinct", "which l-diversity", L_KINDS, plan="keep"),
    Option("c", None, "the c of recursive (c, l)-diversity",
           range=Range(numbers.Real, 0, closed="neither"), plan="keep"),
    Option("t", None, "t-closeness of the sensitive column (Earth Mover's Distance)",
           range=Range(numbers.Real, 0, 1), plan="keep"),
    Option("sensitive", None, "the sensitive column l and t are about (never generalized)",
           plan="keep"),
    Option("constraints", None, "more privacy constraints (dmondrian.privacy.constraints), all "
           "enforced", plan="refuse"),
    Option("suppression", 0.0, "share of rows (0 <= f < 1) that may be suppressed so the "
           "rest generalize less (dmondrian.privacy.suppression)",
           range=Range(numbers.Real, 0, 1, "left", what="a fraction of the rows"),
           plan="refuse"),
    Option("suppressed", "mask", "suppressed rows: mask publishes every QI hidden ('*'), "
           "drop leaves them out", SUPPRESSED, plan="refuse"),
    Option("noise", None, "replace numeric columns by their class's clipped mean plus Laplace "
           "noise: {column: {'epsilon': eps, 'bounds': (lo, hi)}} (dmondrian.privacy.noise)",
           plan="release"),
    Option("random_state", None, "seed (int or numpy.random.Generator) making the noise "
           "repeatable; default: OpenDP's unseeded exact sampler", range=_INT_0,
           accepts=(np.random.Generator,), plan="release"),
    Option("entity", None, "person key of an event table (e.g. user_id): every class holds "
           "k distinct entities, l and t count them, noise is bounded per entity; the column "
           "is never released (dmondrian.privacy.entities)", plan="keep"),
    Option("max_contributions", 1, "with entity and noise: rows of one entity a class's "
           "noised mean keeps (the rest are left out of it)", range=_INT_1, plan="release"),
    Option("max_classes", 1, "with entity and noise: classes whose noised means one entity's "
           "rows count in (its rows in other classes are left out of them)", range=_INT_1,
           plan="release"),
    Option("identifiers", None, "direct identifiers: columns removed from the release",
           plan="keep"),
    Option("allow_unique", None, "columns judged safe although they single out rows (no "
           "warning for them)", plan="keep"),
)

#: The options a fitted plan keeps and writes into its file (``identifiers`` and
#: ``allow_unique`` are checked again on every table it releases).
PLAN_KEEPS = tuple(name for name, o in ANONYMIZE.items() if o.plan == "keep")


def plan_fit_options(options: dict) -> dict:
    """The options a plan is fitted with, of an anonymization's ``options``.

    The one statement of which options a fitted plan refuses: those whose :attr:`Option.plan` is
    ``"refuse"`` (a plan suppresses nothing and takes the named models only) or ``"release"`` (given
    to each release instead), when they ask for anything (:meth:`Option.given`). The others are
    returned, those not given left out.

    Raises
    ------
    ParameterError
        Naming the first refused option given.

    Examples
    --------
    >>> plan_fit_options({"mode": "relaxed", "suppression": 0.0, "noise": None})
    {'mode': 'relaxed'}
    >>> plan_fit_options({"suppression": 0.1})
    Traceback (most recent call last):
    ...
    dmondrian.errors.ParameterError: a fitted plan does not take 'suppression'
    """
    out = {}
    for name, value in options.items():
        option = ANONYMIZE.get(name)
        if option is None or option.plan in ("keep", "fit"):
            out[name] = value
        elif option.given(value):
            why = "give it per release" if option.plan == "release" else option.plan_why
            raise ParameterError(name, f"a fitted plan does not take {name!r}"
                                 + (f": {why}" if why else ""))
    return out


#: The Dask engine's sizing, cluster and progress.
DASK_PLAN = _group(
    Option("leaf_rows", None, "regions up to this many rows are finished in memory by one "
           "task (default: from the workers' memory limits)", range=_INT_1),
    Option("client", None, "the distributed.Client to run on (default: the current one, "
           "$DASK_SCHEDULER_ADDRESS, or an embedded LocalCluster)"),
    Option("progress", None, "show a progress bar per pass (default: when a terminal or "
           "notebook is attached)"),
    Option("exchange", "auto", "what the shuffle moves: keys (the QIs' keys; every input "
           "partition is read again and written with its published values, in its own "
           "partition), rows (every column), or auto (by the bytes each would move)",
           EXCHANGES),
    Option("stall_timeout", 120.0, "seconds a job may go without any finished task while "
           "workers are paused for lack of memory before it stops with JobStalledError "
           "(None: wait for ever)",
           range=Range(numbers.Real, 0, closed="neither", what="a number of seconds"),
           none_ok=True),
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
    Option("manifest", False, "publish OUTPUT.manifest.json with the release, as the command "
           "line does (the output must not exist); default False: see the writer's "
           "docstring", (False, True)),
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
                    raise TypeError(f"{fn.__name__}() got an unexpected keyword argument {name!r}")
            for name in allowed:
                kwargs.setdefault(name, table[name].default)
            return fn(*args, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=own + added)
        return wrapper

    return decorate
