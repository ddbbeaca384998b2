"""A scikit-learn compatible transformer around :func:`dmondrian.anonymize`.

scikit-learn is not a dependency: the class follows its conventions (parameters stored verbatim in
``__init__``, validated in ``fit``, ``get_params``/``set_params``, fitted attributes ending in
``_``) so that it works in a ``Pipeline`` and with ``clone`` when scikit-learn is installed.
"""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pandas as pd

from .encoding.validation import (
    check_max_contributions,
    check_max_depth,
    check_quasi_identifiers,
    check_refine_rows,
    check_sensitive,
)
from .errors import NotFittedError, ParameterError
from .options import ANONYMIZE, takes_options
from .privacy.constraints import check_k, resolve_constraints
from .privacy.entities import check_entity
from .privacy.noise import check_noise, check_noise_dtypes, check_random_state
from .privacy.suppression import check_suppression
from .release.identifiers import check_allow_unique, check_identifiers

__all__ = ["MondrianAnonymizer"]

#: The containers :meth:`MondrianAnonymizer.set_output` offers, as scikit-learn names them.
_OUTPUTS = ("default", "pandas", "polars")


def _polars():
    try:
        import polars
    except ImportError as e:
        raise ParameterError("transform", "set_output(transform='polars') needs polars: "
                                          "pip install polars") from e
    return polars


class MondrianAnonymizer:
    """k-anonymize the quasi-identifier columns of a DataFrame.

    ``fit`` learns a Mondrian partition (a :class:`~dmondrian.plans.FittedPlan`:
    the cut tree down to the classes, each region's bounds and counts) and
    ``transform`` releases any table through it: every row is routed to its
    fitted region and published with that region's label, a region holding
    fewer than ``k`` of the table's rows (or failing l, t) at its nearest
    ancestor that passes. ``fit_transform(X)``, and ``transform(X)`` on the
    fitted table, return exactly :func:`dmondrian.anonymize`'s release of it;
    later tables get the same labels for the same regions (see
    :mod:`dmondrian.plans`). A fitted estimator pickles, and
    :meth:`save_plan` writes its plan as JSON.

    Parameters
    ----------
    k : int, default=2
        Minimum equivalence-class size, in the fitted table and in every table
        released through the fit.
    quasi_id : list of str, default=None
        Quasi-identifier columns; ``None`` means every column of the table
        seen in ``fit`` but the sensitive, noised and identifier columns.
    mode, objective, generalization, max_depth, hierarchies, qi_kinds, class_column, l, \
l_kind, c, t, sensitive, constraints, suppression, suppressed, noise, random_state, \
identifiers, allow_unique
        The options of :data:`dmondrian.options.ANONYMIZE`, as in
        :func:`dmondrian.local.anonymize`; "midpoint" or "mean"
        generalization keeps numeric QIs numeric for estimators downstream.
        ``identifiers`` are left out of the output. ``noise`` and
        ``random_state`` apply per release; ``suppression`` is refused by ``fit``
        (a plan publishes a short region at its ancestor instead).
    batch_rows : int, default=None
        Rows of the tables ``transform`` will release: the partition is fitted
        coarser (:func:`dmondrian.plans.fit_k`) so that their regions keep at
        least ``k`` rows from one table to the next. None: the fitted table's
        own classes.

    Attributes
    ----------
    quasi_id_ : list
        The quasi-identifiers used.
    plan_ : FittedPlan or None
        The fitted partition (on a dask DataFrame, fitted on its cluster:
        :func:`dmondrian.plans.dask_fit.fit_plan_dask`); with ``entity`` it
        counts people (every class of every table ``transform`` releases holds
        ``k`` distinct entities). None with suppression or constraints
        objects, or on a dask DataFrame with relaxed cuts: ``transform``
        then anonymizes each table on its own.
    feature_names_in_ : ndarray of str
        Columns seen in ``fit``.
    n_features_in_ : int
        Number of columns seen in ``fit``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [23, 23, 24, 25, 50, 51, 52, 54],
    ...                    "zip": [11000, 11000, 11001, 11002, 12000, 12000, 12001, 12002]})
    >>> out = MondrianAnonymizer(k=2, quasi_id=["age", "zip"]).fit_transform(df)
    >>> out["age"].tolist()[2:4]
    ['[24, 25]', '[24, 25]']
    """

    @takes_options(ANONYMIZE)
    def __init__(self, k=2, quasi_id=None, batch_rows=None, **options):
        # Stored verbatim, as scikit-learn's clone and get_params expect.
        self.k = k
        self.quasi_id = quasi_id
        self.batch_rows = batch_rows
        for name, value in options.items():
            setattr(self, name, value)

    # -- scikit-learn plumbing ------------------------------------------------------------
    @classmethod
    def _get_param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep=True):
        """Parameters of this estimator, as a dict."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set parameters; unknown names raise ``ValueError``."""
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for MondrianAnonymizer; "
                                 f"valid parameters: {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = inspect.signature(type(self).__init__).parameters
        changed = [f"{n}={getattr(self, n)!r}" for n in self._get_param_names()
                   if getattr(self, n) is not defaults[n].default]
        return f"MondrianAnonymizer({', '.join(changed)})"

    def __sklearn_tags__(self):
        from sklearn.utils import Tags, TargetTags, TransformerTags  # only when sklearn asks

        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(), requires_fit=True)

    def set_output(self, *, transform=None):
        """Set the container ``transform`` and ``fit_transform`` return, as scikit-learn's
        transformers do (its ``set_output`` API, without importing scikit-learn).

        Parameters
        ----------
        transform : {"default", "pandas", "polars"}, default=None
            ``"default"`` and ``"pandas"``: a pandas DataFrame (the release's labels are text, so a
            DataFrame is this transformer's default output), with the input's index and
            :meth:`get_feature_names_out`'s columns; ``"polars"``: a polars DataFrame (polars must
            be installed); None: unchanged. Without a call, scikit-learn's global
            ``set_config(transform_output=...)`` applies when scikit-learn is imported. A dask
            DataFrame's lazy release is returned as is.

        Returns
        -------
        self
        """
        if transform is None:
            return self
        if transform not in _OUTPUTS:
            raise ParameterError("transform", f"set_output(transform=...) takes one of "
                                              f"{list(_OUTPUTS)} or None, got {transform!r}")
        if transform == "polars":
            _polars()
        # The attribute scikit-learn's meta-estimators read and its clone copies.
        self._sklearn_output_config = {**getattr(self, "_sklearn_output_config", {}),
                                       "transform": transform}
        return self

    def _wrap(self, released):
        """``released`` in the container :meth:`set_output` asked for."""
        wanted = getattr(self, "_sklearn_output_config", {}).get("transform")
        if wanted is None and "sklearn" in sys.modules:
            wanted = sys.modules["sklearn"].get_config().get("transform_output", "default")
        if wanted == "polars" and isinstance(released, pd.DataFrame):
            return _polars().from_pandas(released)
        return released

    # -- API ------------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Learn the partition of ``X`` (after checking the parameters against it).

        Parameters
        ----------
        X : pandas.DataFrame
            The table.
        y : ignored

        Returns
        -------
        self
        """
        columns = list(X.columns)
        check_k(self.k)
        for name in ("mode", "objective", "generalization", "suppressed"):
            ANONYMIZE[name].check_choice(getattr(self, name))
        check_max_depth(self.max_depth)
        check_refine_rows(self.refine_rows, self.refine, self.k)
        check_suppression(self.suppression)
        resolve_constraints(self.k, l=self.l, l_kind=self.l_kind, c=self.c, t=self.t,
                            sensitive=self.sensitive, constraints=self.constraints)
        check_random_state(self.random_state)
        identifiers = check_identifiers(self.identifiers, columns, [])
        noised = list(self.noise or {})
        if self.quasi_id is None:
            qis = [c for c in columns
                   if c != self.sensitive and c not in noised and c not in identifiers
                   and c != self.entity]
        else:
            qis = self.quasi_id
        self.quasi_id_ = check_quasi_identifiers(qis, columns)
        check_sensitive(self.sensitive, columns, self.quasi_id_)
        noise = check_noise(self.noise, columns, self.quasi_id_, self.sensitive)
        check_noise_dtypes(noise, X.dtypes)
        check_identifiers(identifiers, columns, self.quasi_id_, self.sensitive,
                          [s.column for s in noise])
        check_allow_unique(self.allow_unique, columns, X.index.name)
        check_entity(self.entity, columns, self.quasi_id_, self.sensitive,
                     [s.column for s in noise], self.class_column)
        check_max_contributions(self.max_contributions)
        check_max_contributions(self.max_classes, "max_classes")
        from .kinds.base import is_dask

        unplanned = [name for name, o in ANONYMIZE.items()
                     if o.plan == "refuse" and o.given(getattr(self, name))]
        if is_dask(X) and self.mode != "strict":
            unplanned.append("mode")
        if unplanned:
            # Fitted plans suppress nothing, refine nothing and take the named models
            # only (strict cuts when fitted on a dask table): such an estimator anonymizes each
            # table it transforms on its own.
            self.plan_ = None
            name = unplanned[0]
            self.unplanned_ = (name, f"it was given {name}={getattr(self, name)!r}"
                               + (" with a dask table" if is_dask(X) else ""))
        else:
            from .plans import fit_plan

            self.plan_ = fit_plan(X, self.quasi_id_, self.k, batch_rows=self.batch_rows,
                                  **{name: getattr(self, name) for name, o in ANONYMIZE.items()
                                     if o.plan != "release"})
        self.feature_names_in_ = np.asarray([str(c) for c in columns], dtype=object)
        self.n_features_in_ = len(columns)
        return self

    def transform(self, X):
        """Release ``X`` (pandas or dask DataFrame) through the fitted partition.

        Raises
        ------
        dmondrian.errors.InfeasibleError
            When ``X`` as a whole cannot form one class (fewer than ``k`` rows).
        """
        if not hasattr(self, "plan_"):
            raise NotFittedError("this MondrianAnonymizer is not fitted yet: call fit first")
        if self.plan_ is None:
            from . import anonymize

            return self._wrap(anonymize(X, self.quasi_id_, self.k,
                                        **{name: getattr(self, name) for name in ANONYMIZE}))
        return self._wrap(self.plan_.transform(X, noise=self.noise, random_state=self.random_state,
                                               max_contributions=self.max_contributions,
                                               max_classes=self.max_classes))

    def save_plan(self, path) -> str:
        """Write the fitted plan as JSON (:func:`dmondrian.plans.save_plan`); its SHA-256."""
        if not hasattr(self, "plan_"):
            raise NotFittedError("this MondrianAnonymizer is not fitted yet: call fit first")
        if self.plan_ is None:
            name, why = self.unplanned_
            raise ParameterError(name, f"this estimator has no plan to save: {why}, and fitted "
                                       "plans take no suppression or constraints objects (on a "
                                       "dask table: strict cuts only)")
        from .plans import save_plan

        return save_plan(self.plan_, path)

    @classmethod
    def load_plan(cls, path) -> MondrianAnonymizer:
        """A fitted estimator from a plan file written by :meth:`save_plan`."""
        from .plans import load_plan

        plan = load_plan(path)
        est = cls(k=plan.k, quasi_id=list(plan.qis), batch_rows=plan.batch_rows,
                  **{name: plan.options[name] for name in plan.options if name in ANONYMIZE})
        est.quasi_id_ = list(plan.qis)
        est.plan_ = plan
        return est

    def fit_transform(self, X, y=None):
        """Fit to ``X`` and return its anonymized version."""
        return self.fit(X, y).transform(X)

    def get_feature_names_out(self, input_features=None):
        """Output columns: the input's but the identifiers, then ``class_column`` when one
        is added."""
        dropped = {str(c) for c in check_identifiers(self.identifiers, self.feature_names_in_, [])}
        if self.entity is not None:
            dropped.add(str(self.entity))
        names = np.asarray([c for c in self.feature_names_in_ if c not in dropped], dtype=object)
        if self.class_column is None:
            return names
        return np.append(names, str(self.class_column)).astype(object)
