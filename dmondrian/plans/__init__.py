"""Fitted plans: learn a Mondrian partition once, release new tables through it.

See :mod:`dmondrian.plans.fitted` (fit and release), :mod:`.tree` (the cut tree read back from the
classes), :mod:`.batch` (where a new row lands), :mod:`.release` (which classes a batch publishes)
and :mod:`.persist` (the JSON file).
"""

from .fitted import FittedPlan, fit_k, fit_plan
from .persist import PlanFileError, load_plan, plan_sha256, save_plan

__all__ = ["FittedPlan", "fit_plan", "fit_k", "save_plan", "load_plan", "plan_sha256",
           "PlanFileError"]
