"""Re-identification risk of a release: prosecutor, journalist and marketer models."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ._frames import class_keys, shared_parameters
from .population import population_counts
from .sizes import SizeSummary, size_summary

__all__ = ["DEFAULT_RISK_THRESHOLD", "Risk", "reidentification_risk", "check_threshold",
           "prosecutor", "journalist"]

#: Prosecutor risk above which a record counts as "at risk" by default: 0.2 is
#: the common "no class smaller than 5" rule of thumb for public releases.
DEFAULT_RISK_THRESHOLD = 0.2


@dataclass(frozen=True)
class Risk:
    """Re-identification risk of a release (El Emam's prosecutor/journalist/marketer models).

    Journalist fields are None when no population table was given.
    """

    threshold: float
    prosecutor_max: float
    prosecutor_avg: float
    prosecutor_at_risk: float
    marketer: float
    journalist_max: float | None = None
    journalist_at_risk: float | None = None
    population_rows: int | None = None


def check_threshold(threshold) -> float:
    """A risk threshold checked to be a number in [0, 1], as a float."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) \
            or not 0 <= threshold <= 1:
        raise ParameterError("threshold", f"threshold must be a risk in [0, 1], got {threshold!r}")
    return float(threshold)


def prosecutor(summary: SizeSummary, threshold: float) -> dict:
    """Prosecutor and (without a population) marketer risk fields of :class:`Risk`,
    from the class sizes alone."""
    n = summary.n_records
    sizes = summary.counts.index.to_numpy(dtype=np.float64)
    at_risk = (sizes * summary.counts.to_numpy())[1.0 / sizes > threshold].sum() if n else 0
    return {"prosecutor_max": 1.0 / summary.min_size if n else 0.0,
            "prosecutor_avg": summary.n_classes / n if n else 0.0,
            "prosecutor_at_risk": float(at_risk) / n if n else 0.0,
            "marketer": summary.n_classes / n if n else 0.0}


@shared_parameters
def reidentification_risk(released, quasi_identifiers, population=None, *,
                          threshold=DEFAULT_RISK_THRESHOLD, class_column=None,
                          hierarchies=None, qi_kinds=None) -> Risk:
    """Prosecutor, journalist and marketer re-identification risk of a release.

    Parameters
    ----------
    {released}
    population : pandas or Dask DataFrame, optional
        The population the release was sampled from, with *original* QI values. ``F_j`` is the
        number of its records a class's published values cover (the release's own records must be
        among them). Without it, the release is taken to be the whole population (``F_j = f_j``).
    threshold : float, default 0.2
        A record is at risk when its risk exceeds this.
    class_column : str, optional
        Define classes by this column instead of the published QI values
        (prosecutor and marketer risk only).
    hierarchies, qi_kinds : dict, optional
        How to read the population's QIs, as given to :func:`dmondrian.anonymize`.

    Returns
    -------
    Risk

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> r = reidentification_risk(t, ["age"], threshold=0.4)
    >>> r.prosecutor_max, r.prosecutor_avg, r.prosecutor_at_risk
    (0.5, 0.4, 0.4)
    """
    threshold = check_threshold(threshold)
    qis, _ = class_keys(released, quasi_identifiers, class_column)
    summary = size_summary(released, quasi_identifiers, class_column)
    out = prosecutor(summary, threshold)
    if population is None:
        return Risk(threshold, **out)
    sample, big_f, n_pop = population_counts(released, qis, population, hierarchies, qi_kinds)
    return Risk(threshold, **journalist(sample, big_f, n_pop, threshold, out))


def journalist(f: np.ndarray, big_f: np.ndarray, n_pop: int, threshold: float,
               prosecutor: dict) -> dict:
    """Journalist and marketer risk from class sizes ``f`` and population matches ``F``."""
    n = int(f.sum())
    if (big_f < f).any():
        raise ParameterError("population", "the population covers fewer records than a released "
                                           "class holds: it must contain the released records")
    return {**prosecutor, "journalist_max": float(1.0 / big_f.min()) if n else 0.0,
            "journalist_at_risk": float(f[1.0 / big_f > threshold].sum() / n) if n else 0.0,
            "marketer": float((f / big_f).sum() / n) if n else 0.0, "population_rows": int(n_pop)}
