"""Privacy constraints: the rule that decides whether a cut may happen.

Mondrian is greedy: a node is cut only if *both* children satisfy the privacy model (LeFevre et al.
2006, section 5), so every released class satisfies it as long as the whole table does. Each model
is an object here; the engines ask them two things:

* before any work, whether the whole table can satisfy them (:meth:`Constraint.check_table`,
  :meth:`Constraint.check_distribution`), so an impossible request fails with a clear error instead
  of producing a meaningless release;
* their kernel parameters (:func:`kernel_privacy`), which the kernel's split
  check (``_cut_ok`` in :mod:`dmondrian._kernel.split`) evaluates on the candidate
  children's sizes and sensitive-value histograms.

=================================== =========================================
model                                a class passes when
=================================== =========================================
``KAnonymity(k)``                    it has at least k rows
``DistinctLDiversity(l)``            it holds at least l distinct sensitive
                                     values
``EntropyLDiversity(l)``             the entropy of its sensitive values is
                                     at least log(l)
``RecursiveCLDiversity(c, l)``       r1 < c (r_l + ... + r_m), r_i the i-th
                                     largest sensitive-value count
``TCloseness(t)``                    the Earth Mover's Distance between its
                                     sensitive distribution and the whole table's is at most t
                                     (ordered distance for numeric/ordinal values, equal distance
                                     for nominal ones; Li, Li & Venkatasubramanian 2007)
=================================== =========================================

Each l-diversity variant (``l_kind``) is one :class:`LVariant` in
:data:`dmondrian.options.L_VARIANTS`, registered by :func:`register_l_variant`: its constraint
(whose ``_kernel`` maps it onto the kernel's checks), whether l is whole, whether it takes ``c``,
and the per-class check :func:`dmondrian.verify` runs. The options, the engines, the plans,
``verify`` and the command line ask it, so a new variant is one registration (docs/design.md,
"Adding a QI kind / an l variant").

A missing sensitive value is one value of its own (the sensitive column's
domain and codes are defined once, in :mod:`dmondrian.encoding.sensitive`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import _kernel as K
from ..errors import InfeasibleError, ParameterError
from ..options import ANONYMIZE, L_VARIANTS
from ..options import K as K_OPTION
from .entities import pair_codes, pair_counts

__all__ = ["Constraint", "KAnonymity", "DistinctLDiversity", "EntropyLDiversity",
           "RecursiveCLDiversity", "TCloseness", "LVariant", "register_l_variant", "l_variant",
           "check_l_options", "recursive_ratio", "check_k", "check_l", "refuse_empty",
           "resolve_constraints", "kernel_privacy", "KernelPrivacy", "with_entity"]


def check_k(k, n_rows: int | None = None) -> int:
    """Validate ``k``: an integer >= 1, and at most the number of rows if given."""
    k = K_OPTION.require(k)
    if n_rows is not None and k > n_rows:
        raise InfeasibleError(f"k={k} is larger than the table's {n_rows} rows: no release of this "
                              "table can be k-anonymous")
    return k


def refuse_empty(n_rows: int, doing: str = "anonymize") -> None:
    """Refuse a table of no rows, the one statement of it for every engine and plan.

    Parameters
    ----------
    n_rows : int
        The table's rows.
    doing : str, default "anonymize"
        What there is nothing to do with it ("anonymize", "fit").

    Raises
    ------
    InfeasibleError
        When ``n_rows`` is 0.

    Examples
    --------
    >>> refuse_empty(0, "fit")
    Traceback (most recent call last):
    ...
    dmondrian.errors.InfeasibleError: the table is empty: there is nothing to fit
    """
    if int(n_rows) == 0:
        raise InfeasibleError(f"the table is empty: there is nothing to {doing}")


def check_l(l, l_kind: str = "distinct"):  # noqa: E741 - the literature's name
    """``l`` checked for ``l_kind``: a number >= 1, a whole one unless the variant's
    l need not be (:attr:`LVariant.whole_l`: entropy's).

    Returns an ``int`` for distinct and recursive l-diversity (``2.0`` is 2).

    Examples
    --------
    >>> check_l(2.0), check_l(1.5, "entropy")
    (2, 1.5)
    >>> check_l(1.5)
    Traceback (most recent call last):
    ...
    dmondrian.errors.ParameterError: distinct l-diversity needs a whole number l, got 1.5
    """
    variant = l_variant(l_kind)
    l = ANONYMIZE["l"].require(l)  # noqa: E741
    if not variant.whole_l:
        return l
    if l != int(l):
        raise ParameterError("l", f"{l_kind} l-diversity needs a whole number l, got {l!r}")
    return int(l)


class Constraint:
    """A privacy model every released class must satisfy."""

    #: Column of sensitive values the model is about (None for k-anonymity).
    sensitive = None

    def min_size(self) -> int:
        """The smallest class size the model allows."""
        return 1

    def check_table(self, n_rows: int) -> None:
        """Raise :class:`~dmondrian.errors.InfeasibleError` if even one class is impossible."""

    def check_distribution(self, counts: np.ndarray) -> None:
        """Raise :class:`~dmondrian.errors.InfeasibleError` if the whole table fails.

        ``counts`` holds the number of rows of each sensitive value.
        """

    def _kernel(self, ip: np.ndarray, fp: np.ndarray) -> None:
        """Write this model's parameters into the kernel arrays."""


class KAnonymity(Constraint):
    """Every equivalence class holds at least ``k`` rows.

    Parameters
    ----------
    k : int
        The smallest class size, at least 1.

    Examples
    --------
    >>> KAnonymity(5).min_size()
    5
    """

    def __init__(self, k: int):
        self.k = check_k(k)

    def min_size(self) -> int:
        return self.k

    def check_table(self, n_rows: int) -> None:
        check_k(self.k, n_rows)

    def _kernel(self, ip, fp):
        ip[K.P_K] = max(ip[K.P_K], self.k)

    def __repr__(self) -> str:
        return f"KAnonymity(k={self.k})"


class _SensitiveConstraint(Constraint):
    def __init__(self, sensitive=None):
        self.sensitive = sensitive

    def _fails(self, counts) -> bool:
        ip, fp = np.zeros(K.N_IP, dtype=np.int64), np.full(K.N_FP, -1.0)
        ip[K.P_SENS_ROW] = 0
        self._kernel(ip, fp)
        q = counts / counts.sum()
        return not K.hist_ok(counts.astype(np.int64), int(counts.sum()), ip, fp, q)


class DistinctLDiversity(_SensitiveConstraint):
    """Every class holds at least ``l`` distinct sensitive values.

    Parameters
    ----------
    l : int
        The fewest distinct sensitive values a class may hold, at least 1.
    sensitive : str, optional
        The sensitive column; ``None`` takes the ``sensitive=`` given to
        :func:`dmondrian.anonymize`.

    Examples
    --------
    >>> DistinctLDiversity(2, sensitive="income")
    DistinctLDiversity(l=2, sensitive='income')
    """

    def __init__(self, l: int, sensitive=None):  # noqa: E741 - the literature's name
        self.l = check_l(l, "distinct")
        super().__init__(sensitive)

    def min_size(self) -> int:
        return self.l

    def check_distribution(self, counts):
        present = int((counts > 0).sum())
        if present < self.l:
            raise InfeasibleError(
                f"distinct l-diversity with l={self.l} is impossible: sensitive column "
                f"{self.sensitive!r} has only {present} distinct value(s) in the whole table")

    def _kernel(self, ip, fp):
        ip[K.P_L_DISTINCT] = max(ip[K.P_L_DISTINCT], self.l)

    def __repr__(self):
        return f"DistinctLDiversity(l={self.l}, sensitive={self.sensitive!r})"


class EntropyLDiversity(_SensitiveConstraint):
    """The entropy of every class's sensitive values is at least ``log(l)``.

    Parameters
    ----------
    l : float
        At least 1; the entropy bound is its natural logarithm.
    sensitive : str, optional
        The sensitive column; ``None`` takes the ``sensitive=`` given to
        :func:`dmondrian.anonymize`.
    """

    def __init__(self, l: float, sensitive=None):  # noqa: E741
        self.l = check_l(l, "entropy")
        super().__init__(sensitive)

    def min_size(self) -> int:
        return math.ceil(self.l)

    def check_distribution(self, counts):
        if self._fails(counts):
            p = counts[counts > 0] / counts.sum()
            raise InfeasibleError(f"entropy l-diversity with l={self.l} is impossible: the whole "
                                  f"table's sensitive column {self.sensitive!r} has entropy exp(H) "
                                  f"= {math.exp(-(p * np.log(p)).sum()):.3g} < l")

    def _kernel(self, ip, fp):
        fp[K.P_LOG_L] = max(fp[K.P_LOG_L], math.log(self.l))

    def __repr__(self):
        return f"EntropyLDiversity(l={self.l}, sensitive={self.sensitive!r})"


class RecursiveCLDiversity(_SensitiveConstraint):
    """Recursive (c, l)-diversity: the most frequent sensitive value is not too frequent.

    In every class, with ``r1 >= r2 >= ... >= rm`` the counts of its ``m``
    sensitive values, ``r1 < c * (rl + ... + rm)``.

    Parameters
    ----------
    c : float
        The factor, above 0.
    l : int
        The rank from which the counts are summed, at least 1.
    sensitive : str, optional
        The sensitive column; ``None`` takes the ``sensitive=`` given to
        :func:`dmondrian.anonymize`.
    """

    def __init__(self, c: float, l: int, sensitive=None):  # noqa: E741
        self.c = ANONYMIZE["c"].require(c)
        self.l = check_l(l, "recursive")
        super().__init__(sensitive)

    def min_size(self) -> int:
        return self.l

    def check_distribution(self, counts):
        if self._fails(counts):
            raise InfeasibleError(
                f"recursive (c={self.c}, l={self.l})-diversity is impossible: the whole "
                f"table's sensitive column {self.sensitive!r} fails it already")

    def _kernel(self, ip, fp):
        if ip[K.P_RC_L] > 0:
            raise ParameterError("constraints", "only one RecursiveCLDiversity is supported")
        ip[K.P_RC_L] = self.l
        fp[K.P_RC_C] = self.c

    def __repr__(self):
        return f"RecursiveCLDiversity(c={self.c}, l={self.l}, sensitive={self.sensitive!r})"


class TCloseness(_SensitiveConstraint):
    """Every class's sensitive distribution is within EMD ``t`` of the whole table's.

    The Earth Mover's Distance is the ordered distance for numeric and ordered values, the equal
    distance for nominal ones (Li, Li & Venkatasubramanian 2007).

    Parameters
    ----------
    t : float
        The largest distance allowed, in [0, 1].
    sensitive : str, optional
        The sensitive column; ``None`` takes the ``sensitive=`` given to
        :func:`dmondrian.anonymize`.
    """

    def __init__(self, t: float, sensitive=None):
        self.t = float(ANONYMIZE["t"].require(t))
        super().__init__(sensitive)

    def _kernel(self, ip, fp):
        fp[K.P_T] = self.t if fp[K.P_T] < 0 else min(fp[K.P_T], self.t)

    def __repr__(self):
        return f"TCloseness(t={self.t}, sensitive={self.sensitive!r})"


@dataclass(frozen=True, eq=False)
class LVariant:
    """One l-diversity variant (a value of ``l_kind``): what every part of the package asks of it.

    Parameters
    ----------
    name : str
        The ``l_kind`` value.
    constraint : callable
        ``constraint(l, c, sensitive)``: the :class:`Constraint` the engines enforce (its
        ``_kernel`` maps it onto the kernel's checks; ``c`` is None unless ``uses_c``).
    column : str
        The name of the per-class statistic :func:`dmondrian.verify` checks (and
        reports the worst of in :attr:`VerifyResult.achieved`): ``"l_distinct"``,
        ``"l_entropy"`` (every sensitive report has them) or ``statistic``'s.
    fails : callable
        ``fails(values, l, c)``: which classes fail, vectorized over ``column``'s
        values (pandas or Dask Series).
    whole_l : bool, default True
        Whether l must be a whole number.
    uses_c : bool, default False
        Whether the variant takes (and needs) ``c``.
    statistic : callable, optional
        ``statistic(gid, n, size, n_classes, l)``: ``column`` of every class from its
        (class, sensitive value) counts (``gid`` the class of each count ``n``,
        ``size`` the class sizes); None for a column every sensitive report has.
    worst : {"max", "min"}, default "max"
        Which end of ``statistic`` is the worst class.
    """

    name: str
    constraint: Callable
    column: str
    fails: Callable
    whole_l: bool = True
    uses_c: bool = False
    statistic: Callable | None = None
    worst: str = "max"

    def __reduce__(self):
        # One object per variant in every process: a shipped variant is looked up by name.
        return l_variant, (self.name,)


def register_l_variant(variant: LVariant) -> LVariant:
    """Make ``variant`` a value of ``l_kind`` for the API, the plans, ``verify`` and the CLI."""
    L_VARIANTS[variant.name] = variant
    return variant


def l_variant(l_kind) -> LVariant:
    """The :class:`LVariant` named ``l_kind``.

    Raises
    ------
    ParameterError
        For a name no variant has (naming the choices).
    """
    ANONYMIZE["l_kind"].check_choice(l_kind)
    return L_VARIANTS[l_kind]


def check_l_options(l, l_kind, c):  # noqa: E741 - the literature's name
    """``l`` checked for ``l_kind`` (None stays None), and ``c`` against the variant.

    Raises
    ------
    ParameterError
        For ``c`` without a variant that takes it, a variant that needs ``c``
        without it, or an ``l`` the variant refuses.
    """
    variant = l_variant(l_kind)
    if c is not None and (l is None or not variant.uses_c):
        takes = " or ".join(f"l_kind={v.name!r}" for v in L_VARIANTS.values() if v.uses_c)
        raise ParameterError("c", f"c is only used with l and {takes}")
    if l is None:
        return None
    l = check_l(l, l_kind)  # noqa: E741
    if variant.uses_c:
        if c is None:
            raise ParameterError("c", f"{l_kind} l-diversity needs c (l_kind={l_kind!r})")
        ANONYMIZE["c"].check(c)
    return l


def recursive_ratio(gid, n, size, n_classes: int, l: int) -> np.ndarray:  # noqa: E741
    """Every class's ``r1 / (r_l + ... + r_m)``, its counts ``r`` sorted descending.

    A class is recursive (c, l)-diverse when ``r1 < c * (r_l + ... + r_m)`` (Machanavajjhala et al.
    2007), that is when this ratio is below ``c``; a class with fewer than ``l`` distinct values has
    an empty tail and the ratio ``inf``. Rows are (class, sensitive value) pairs with count ``n``.

    Examples
    --------
    >>> gid, n = np.array([0, 0, 0, 1]), np.array([5.0, 3.0, 2.0, 4.0])
    >>> recursive_ratio(gid, n, np.array([10.0, 4.0]), 2, 2).tolist()
    [1.0, inf]
    """
    order = np.lexsort((-n, gid))
    g, counts = gid[order], n[order]
    starts = np.searchsorted(g, np.arange(n_classes))
    position = np.arange(len(g)) - starts[g]
    largest = np.bincount(g, weights=np.where(position == 0, counts, 0.0), minlength=n_classes)
    head = np.bincount(g, weights=np.where(position < l - 1, counts, 0.0), minlength=n_classes)
    tail = size - head
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tail > 0, largest / np.where(tail > 0, tail, 1.0), np.inf)


# verify's tolerance on a bound a class must reach (a float's rounding is no failure).
_TOL = 1e-9


def _below_l(values, l, c):  # noqa: E741
    return values < l * (1 - _TOL)


register_l_variant(LVariant("distinct", lambda ell, c, s: DistinctLDiversity(ell, s), "l_distinct",
                            _below_l))
register_l_variant(LVariant("entropy", lambda ell, c, s: EntropyLDiversity(ell, s), "l_entropy",
                            _below_l, whole_l=False))
# The engines' test, r1 < c * tail, on the ratio r1 / tail.
register_l_variant(LVariant("recursive", lambda ell, c, s: RecursiveCLDiversity(c, ell, s),
                            "recursive_ratio", lambda values, ell, c: values >= c,
                            uses_c=True, statistic=recursive_ratio))


def resolve_constraints(k, *, l=None, l_kind="distinct", c=None, t=None,  # noqa: E741
                        sensitive=None, constraints=None) -> tuple[list, object]:
    """Turn the keyword API into a list of constraints and the sensitive column.

    Returns
    -------
    constraints : list of Constraint
        k-anonymity first, then the others.
    sensitive : column name or None
        The one sensitive column the constraints are about.
    """
    out: list[Constraint] = [KAnonymity(k)]
    variant = l_variant(l_kind) if l is not None else None
    if variant is not None and variant.uses_c and c is None:
        raise ParameterError("c", f"{l_kind} l-diversity needs c (l_kind={l_kind!r})")
    if variant is not None:
        out.append(variant.constraint(l, c if variant.uses_c else None, sensitive))
    elif c is not None:
        check_l_options(None, l_kind, c)
    if t is not None:
        out.append(TCloseness(t, sensitive))
    for extra in constraints or []:
        if not isinstance(extra, Constraint):
            raise ParameterError("constraints", f"constraints must be Constraint objects, got "
                                                f"{type(extra).__name__}")
        out.append(extra)
    names = {cst.sensitive if cst.sensitive is not None else sensitive
             for cst in out if isinstance(cst, _SensitiveConstraint)}
    if not names:
        if sensitive is not None:
            raise ParameterError("sensitive", "sensitive is given but no constraint uses it "
                                              "(pass l=..., t=... or constraints=[...])")
        return out, None
    if None in names:
        raise ParameterError("sensitive", "l-diversity and t-closeness need the sensitive "
                                          "column: pass sensitive='column'")
    if len(names) > 1:
        raise ParameterError("sensitive", f"constraints name several sensitive columns "
                                          f"{sorted(map(str, names))}; one is supported")
    (name,) = names
    for cst in out:
        if isinstance(cst, _SensitiveConstraint) and cst.sensitive is None:
            cst.sensitive = name
    return out, name


@dataclass
class KernelPrivacy:
    """The constraints in the kernel's form, plus the sensitive codes to carry."""

    ip: np.ndarray
    fp: np.ndarray
    q: np.ndarray
    sensitive_codes: np.ndarray | None = None
    #: Each row's entity code, when classes count entities (see :mod:`dmondrian.privacy.entities`).
    entity_codes: np.ndarray | None = None
    #: Each row's (entity, sensitive value) pair code, when the histograms count pairs.
    pair_codes: np.ndarray | None = None

    @property
    def min_size(self) -> int:
        return int(self.ip[K.P_K])


def kernel_privacy(constraints, sensitive_codes=None, n_values: int = 0,
                   ordered: bool = False, distribution=None, entity=None) -> KernelPrivacy:
    """Kernel parameters of a list of constraints.

    ``distribution`` is the whole table's sensitive distribution (for t-closeness); it defaults to
    the one of ``sensitive_codes`` (with an entity, of its (entity, value) pairs), and the
    distributed engine passes the whole dataset's. ``entity``
    (:class:`dmondrian.privacy.entities.EntityCodes`) makes k count distinct entities and the
    sensitive histograms count distinct (entity, value) pairs.
    """
    ip = np.zeros(K.N_IP, dtype=np.int64)
    fp = np.full(K.N_FP, -1.0)
    ip[K.P_K] = 1
    ip[K.P_SENS_ROW] = ip[K.P_ENT_ROW] = ip[K.P_PAIR_ROW] = -1
    for cst in constraints:
        cst._kernel(ip, fp)
    if sensitive_codes is None or not any(isinstance(c, _SensitiveConstraint) for c in constraints):
        privacy = KernelPrivacy(ip, fp, np.zeros(1))
        return privacy if entity is None else with_entity(privacy, entity)
    ip[K.P_N_SENS] = n_values
    ip[K.P_T_ORDERED] = int(ordered)
    if distribution is None:
        counts = (np.bincount(sensitive_codes, minlength=n_values) if entity is None
                  else pair_counts(entity.codes, sensitive_codes, n_values)).astype(float)
        distribution = counts / counts.sum()
    privacy = KernelPrivacy(ip, fp, np.asarray(distribution, dtype=float), sensitive_codes)
    return privacy if entity is None else with_entity(privacy, entity)


def with_entity(privacy: KernelPrivacy, entity) -> KernelPrivacy:
    """``privacy`` counting the distinct entities of ``entity`` (an
    :class:`~dmondrian.privacy.entities.EntityCodes` of the same rows), and, with a
    sensitive constraint, its histograms counting (entity, value) pairs."""
    ip = privacy.ip.copy()
    ip[K.P_N_SEEN] = entity.n_entities
    pairs = None
    if privacy.sensitive_codes is not None:
        pairs, n_pairs = pair_codes(entity.codes, privacy.sensitive_codes, int(ip[K.P_N_SENS]))
        ip[K.P_N_SEEN] = max(entity.n_entities, n_pairs)
    return KernelPrivacy(ip, privacy.fp, privacy.q, privacy.sensitive_codes, entity.codes, pairs)
