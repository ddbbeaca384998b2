"""What a release costs (information loss) and risks (re-identification, privacy).

Every function takes a released table (pandas or Dask) and its quasi-identifier (QI) columns.
Equivalence classes are the groups of rows that publish the same QI values (what an attacker sees),
or the groups of ``class_column`` when the engine's bookkeeping column is given. A Dask table is
measured with aggregations only (group-by sizes, value counts, reductions): only per-class or
per-label summaries ever reach the client.

Definitions (``T`` the table, ``E`` its classes, ``|E|`` a class's size)
------------------------------------------------------------------------
* ``C_avg = |T| / (len(E) * k)`` (LeFevre et al. 2006); 1 is ideal.
* Discernibility ``DM = sum(|E|**2)`` (Bayardo & Agrawal 2005; nothing is
  suppressed here, so it has no suppression term).
* NCP (normalized certainty penalty, Xu et al. 2006; GCP in Ghinita et al.
  2007). A class's cost for one QI is

  - numeric, datetime: ``(hi - lo) / (global max - global min)``;
  - ordinal: ``(code(hi) - code(lo)) / (global code range)``;
  - nominal: ``(values in the set - 1) / (distinct values in the table - 1)``,
    a missing value counting as one more value (``<NA>`` is in the set);
  - hierarchy: ``(leaves under the published node - 1) / (leaves - 1)``, all leaves of the hierarchy
    counted (plus the ``<NA>`` leaf when the original column has missing values);
  - missing values (numeric, datetime, ordinal): a class publishing only
    ``<NA>`` costs 0, a class publishing ``"[lo, hi] or <NA>"`` costs 1.

  These are exactly the spans the engine cuts by (:mod:`dmondrian._kernel`), normalized by the
  *original* table's global domains. A QI's NCP is the mean cost over records; the overall NCP (GCP)
  is the weighted mean of the QIs' NCPs, equal weights by default. Both lie in [0, 1].
* Re-identification risk (El Emam & Dankar 2008; Dankar & El Emam 2010),
  with ``f_j`` the size of released class ``j``, ``F_j`` the number of
  population records matching its published values and ``n = |T|``:

  - prosecutor: record risk ``1 / f_j``; maximum ``1 / min f_j``; average ``len(E) / n``;
  - journalist: record risk ``1 / F_j``; maximum ``1 / min F_j``;
  - marketer: ``(1/n) * sum_j f_j / F_j``, the expected share of records an
    attacker matching everyone re-identifies (``len(E) / n`` without a
    population, when the release is the whole population);
  - at risk: the share of records whose risk exceeds ``threshold``.
* Privacy actually achieved: ``k`` = smallest class; distinct l-diversity = fewest distinct
  sensitive values in a class; entropy l-diversity = ``exp(min class entropy)`` (a table is entropy
  l-diverse for every ``l <= l_entropy``); t-closeness = largest Earth Mover's Distance between a
  class's sensitive distribution and the table's (Li, Li & Venkatasubramanian 2007): ordered
  distance ``sum_i |cumulative difference_i| / (m - 1)`` for numeric or ordered values (``m``
  distinct values in the table; all the categories of an ordered categorical, as in the engine's
  check), equal distance ``sum_i |p_i - q_i| / 2`` for nominal ones. A missing sensitive value is a
  value of its own (last in order).

Modules
-------
One job each; import from here, the modules' layout is not the API.

* :mod:`~dmondrian.metrics.sizes`: class sizes, ``C_avg``, discernibility, size buckets.
* :mod:`~dmondrian.metrics.domains`: the original table's global QI domains.
* :mod:`~dmondrian.metrics.certainty_penalty`: NCP / GCP.
* :mod:`~dmondrian.metrics.risk`: prosecutor, journalist and marketer risk;
  :mod:`~dmondrian.metrics.population` counts the population records each released class covers.
* :mod:`~dmondrian.metrics.per_class`: every class's size, l and t (EMD),
  which :mod:`~dmondrian.metrics.achieved_privacy` (the k, l and t a table
  has), :func:`dmondrian.verify` and :func:`dmondrian.report` build on.
* :mod:`~dmondrian.metrics._frames`: the pandas/Dask plumbing they share,
  and the wording of the parameters their docstrings share.

What a cost or a domain means for each kind of QI is its kind object's
(:mod:`dmondrian.kinds`); these modules apply it to whole tables.
"""

from __future__ import annotations

# The names of __all__, and (as "X as X": deliberate re-exports, kept out of __all__ so a star
# import stays as it was) the public helpers the report, plot and verification modules build on.
from ._frames import Deferred as Deferred
from ._frames import check_column as check_column
from ._frames import check_table as check_table
from ._frames import class_keys as class_keys
from ._frames import class_sizes as class_sizes
from ._frames import compute as compute
from ._frames import is_dask as is_dask
from ._frames import run as run
from .achieved_privacy import Privacy, privacy
from .certainty_penalty import NCP, ncp
from .certainty_penalty import label_costs as label_costs
from .certainty_penalty import resolve_domains as resolve_domains
from .domains import Domain, compute_domains
from .domains import domains_deferred as domains_deferred
from .per_class import class_statistics as class_statistics
from .population import population_counts as population_counts
from .risk import DEFAULT_RISK_THRESHOLD as DEFAULT_RISK_THRESHOLD
from .risk import Risk, reidentification_risk
from .risk import journalist as journalist
from .sizes import SizeSummary as SizeSummary
from .sizes import (
                    c_avg,
                    calculate_avg_equivalence_class_size,
                    class_size_distribution,
                    discernibility,
                    size_counts,
)
from .sizes import size_distribution as size_distribution

__all__ = ["Domain", "NCP", "Privacy", "Risk", "calculate_avg_equivalence_class_size", "c_avg",
           "class_size_distribution", "compute_domains", "discernibility", "ncp", "privacy",
           "reidentification_risk", "size_counts"]
