"""A scikit-learn compatible transformer around :func:`dmondrian.anonymize`.

scikit-learn is not a dependency: the class follows its conventions
(parameters stored verbatim in ``__init__``, validated in ``fit``,
``get_params``/``set_params``, fitted attributes ending in ``_``) so that it
works in a ``Pipeline`` and with ``clone`` when scikit-learn is installed.
"""

from __future__ import annotations

import inspect

import numpy as np

from .constraints import check_k, resolve_constraints
from .errors import NotFittedError
from .identifiers import check_allow_unique, check_identifiers
from .noise import check_noise, check_noise_dtypes, check_random_state
from .options import ANONYMIZE, takes_options
from .suppression import check_suppression
from .validation import check_max_depth, check_quasi_identifiers, check_sensitive

__all__ = ["MondrianAnonymizer"]


class MondrianAnonymizer:
    """k-anonymize the quasi-identifier columns of a DataFrame.

    Mondrian is a *local* recoding: it has no model to reuse on new rows, so
    ``fit`` only validates the parameters and records the columns, and
    ``transform`` anonymizes the table it is given as a whole.

    Parameters
    ----------
    k : int, default=2
        Minimum equivalence-class size.
    quasi_id : list of str, default=None
        Quasi-identifier columns; ``None`` means every column of the table
        seen in ``fit`` but the sensitive, noised and identifier columns.
    mode, objective, generalization, max_depth, hierarchies, qi_kinds, class_column, l, \
l_kind, c, t, sensitive, constraints, suppression, suppressed, noise, random_state, \
identifiers, allow_unique
        The options of :data:`dmondrian.options.ANONYMIZE`, as in
        :func:`dmondrian.local.anonymize`; "midpoint" or "mean"
        generalization keeps numeric QIs numeric for estimators downstream.
        ``identifiers`` are left out of the output.

    Attributes
    ----------
    quasi_id_ : list
        The quasi-identifiers used.
    feature_names_in_ : ndarray of str
        Columns seen in ``fit``.
    n_features_in_ : int
        Number of columns seen in ``fit``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [23, 23, 24, 25, 50, 51, 52, 54],
    ...                    "zip": [11000, 11000, 11001, 11002, 12000, 12000, 12001, 12002],
    ...                    "salary": [10, 20, 30, 40, 50, 60, 70, 80]})
    >>> out = MondrianAnonymizer(k=2, quasi_id=["age", "zip"]).fit_transform(df)
    >>> out["age"].tolist()[2:4]
    ['[24, 25]', '[24, 25]']
    """

    @takes_options(ANONYMIZE)
    def __init__(self, k=2, quasi_id=None, **options):
        # Stored verbatim, as scikit-learn's clone and get_params expect.
        self.k = k
        self.quasi_id = quasi_id
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

    # -- API ------------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Validate the parameters against ``X`` and record its columns.

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
        check_suppression(self.suppression)
        resolve_constraints(self.k, l=self.l, l_kind=self.l_kind, c=self.c, t=self.t,
                            sensitive=self.sensitive, constraints=self.constraints)
        check_random_state(self.random_state)
        identifiers = check_identifiers(self.identifiers, columns, [])
        noised = list(self.noise or {})
        if self.quasi_id is None:
            qis = [c for c in columns
                   if c != self.sensitive and c not in noised and c not in identifiers]
        else:
            qis = self.quasi_id
        self.quasi_id_ = check_quasi_identifiers(qis, columns)
        check_sensitive(self.sensitive, columns, self.quasi_id_)
        noise = check_noise(self.noise, columns, self.quasi_id_, self.sensitive)
        check_noise_dtypes(noise, X.dtypes)
        check_identifiers(identifiers, columns, self.quasi_id_, self.sensitive,
                          [s.column for s in noise])
        check_allow_unique(self.allow_unique, columns, X.index.name)
        self.feature_names_in_ = np.asarray([str(c) for c in columns], dtype=object)
        self.n_features_in_ = len(columns)
        return self

    def transform(self, X):
        """Anonymize ``X`` (pandas or dask DataFrame) and return the released table."""
        if not hasattr(self, "quasi_id_"):
            raise NotFittedError("this MondrianAnonymizer is not fitted yet: call fit first")
        from . import anonymize

        return anonymize(X, self.quasi_id_, self.k,
                         **{name: getattr(self, name) for name in ANONYMIZE})

    def fit_transform(self, X, y=None):
        """Fit to ``X`` and return its anonymized version."""
        return self.fit(X, y).transform(X)

    def get_feature_names_out(self, input_features=None):
        """Output columns: the input's but the identifiers, then ``class_column`` when one
        is added."""
        dropped = {str(c) for c in check_identifiers(self.identifiers, self.feature_names_in_,
                                                     [])}
        names = np.asarray([c for c in self.feature_names_in_ if c not in dropped], dtype=object)
        if self.class_column is None:
            return names
        return np.append(names, str(self.class_column)).astype(object)
