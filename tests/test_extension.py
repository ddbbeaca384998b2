"""A new QI kind and a new l-diversity variant touch few package files (issue 38).

How the count is made: the test copies the package into a temporary folder and
makes each addition there as an engineer would make it in the repository: it
writes the new module and edits the registering file, nothing else. It then
counts the package files (``.py``/``.pyx``/``.pxd``) that differ from the
repository's (new or changed), and runs a script in a fresh interpreter whose
``PYTHONPATH`` puts the copy first. That script anonymizes tables with the toy
kind and the toy variant on the local engine and on a multi-process Dask
``LocalCluster`` (whose workers import the copy too), through a fitted plan,
and through ``verify`` and the NCP, and checks every invariant. So the
counted files are the ones that were enough: if an addition needed a
further edit, the script would fail.

The toys:

* kind ``"percent"``: floats in [0, 100], published as ranges of percents
  (``"[12.5 %, 40.0 %]"``); a value outside [0, 100] is refused, naming the column.
* l variant ``"majority"``: in every class, the most frequent sensitive value
  holds less than a 1/l share of the class's rows. Its kernel mapping is
  recursive (c, l)-diversity with ``c = 1/l`` and rank 1; its per-class check is
  the largest share, vectorized over the per-class sensitive counts.

docs/design.md, "Adding a QI kind / an l variant", lists the same files.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dmondrian"
MAX_FILES = 5
SOURCES = (".py", ".pyx", ".pxd")

PERCENT_MODULE = '''\
"""Percentages: floats in [0, 100], published as ranges of percents, ``[12.5 %, 40.0 %]``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._kernel import labels as _labels
from ..errors import UnsupportedDtypeError
from .base import EncodedQI
from .numeric import NumericKind

SUFFIX = " %"


class PercentKind(NumericKind):
    """A share in percent: keyed and cut as a float, published with its unit."""

    name = "percent"
    summarizes = False

    def detects(self, dtype) -> bool:
        return False  # declared only (qi_kinds), never guessed from a float column

    def encode(self, series: pd.Series, hierarchy=None) -> EncodedQI:
        values = series.astype("float64")
        outside = (values < 0) | (values > 100)
        if outside.any():
            raise UnsupportedDtypeError(series.name, f"percent column {series.name!r} holds "
                                        f"{values[outside].iloc[0]!r}, outside [0, 100]")
        return super().encode(values)

    def label_format(self, qi: EncodedQI) -> int:
        return _labels.FMT_TABLE

    def bound_strings(self, qi: EncodedQI, values: np.ndarray) -> list[str]:
        return [repr(float(v)) + SUFFIX for v in self.decode_keys(qi, values)]

    def summary_dtype(self, dtype):
        return None

    def read_bound(self, text: str):
        return float(text.removesuffix(SUFFIX))

    def bound_points(self, texts: np.ndarray) -> np.ndarray | None:
        try:
            return np.char.replace(texts.astype(str), SUFFIX, "").astype(np.float64)
        except ValueError:
            return None
'''

MAJORITY_MODULE = '''\
"""Majority l-diversity: no sensitive value holds a 1/l share of a class or more."""

from __future__ import annotations

import numpy as np

from .. import _kernel as K
from ..errors import InfeasibleError, ParameterError
from .constraints import LVariant, _SensitiveConstraint, check_l, register_l_variant


class MajorityLDiversity(_SensitiveConstraint):
    """The most frequent sensitive value of every class holds less than 1/l of it."""

    def __init__(self, l, sensitive=None):  # noqa: E741
        self.l = check_l(l, "majority")
        super().__init__(sensitive)

    def min_size(self) -> int:
        return int(self.l) + 1

    def check_distribution(self, counts):
        if self._fails(counts):
            raise InfeasibleError(f"majority l-diversity with l={self.l} is impossible: "
                                  f"{self.sensitive!r} fails it in the whole table")

    def _kernel(self, ip, fp):
        # Recursive (c, l) with c = 1/l and rank 1: r1 < (1/l) * (r1 + ... + rm).
        if ip[K.P_RC_L] > 0:
            raise ParameterError("constraints", "majority and recursive l cannot be combined")
        ip[K.P_RC_L] = 1
        fp[K.P_RC_C] = 1.0 / self.l


def largest_share(gid, n, size, n_classes, l):  # noqa: E741
    """Every class's largest sensitive count over its size."""
    largest = np.zeros(n_classes)
    np.maximum.at(largest, gid, n)
    return largest / size


register_l_variant(LVariant("majority", lambda ell, c, s: MajorityLDiversity(ell, s),
                            "largest_share", lambda values, ell, c: values >= 1.0 / ell,
                            whole_l=False, statistic=largest_share))
'''

# Runs in a fresh interpreter on the copy: prints what it checked as JSON.
SCRIPT = '''\
import json, re, sys
import numpy as np, pandas as pd
import dmondrian
import dmondrian.plans
from dmondrian.errors import UnsupportedDtypeError

assert dmondrian.__file__.startswith(sys.argv[1]), dmondrian.__file__
K, L = 6, 2
rng = np.random.default_rng(0)
n = 600
df = pd.DataFrame({"pct": np.round(rng.uniform(0, 100, n), 1),
                   "age": rng.integers(18, 90, n),
                   "disease": rng.choice(["flu", "cold", "hiv", "none"], n, p=[.4, .3, .1, .2])})
qis, kinds = ["pct", "age"], {"pct": "percent"}
RANGE = re.compile(r"^\\[(\\S+) %, (\\S+) %\\]$|^(\\S+) %$")
out = {}

def check(name, released, majority):
    classes = released.groupby(qis, observed=True, sort=False).groups
    sizes = [len(rows) for rows in classes.values()]
    assert min(sizes) >= K, (name, min(sizes))
    for label, rows in released.groupby("pct", observed=True).groups.items():
        m = RANGE.match(label)
        assert m, (name, label)
        lo, hi = (float(m[1]), float(m[2])) if m[1] else (float(m[3]),) * 2
        values = df.loc[rows, "pct"]
        assert values.between(lo, hi).all(), (name, label)
    if majority:
        for rows in classes.values():
            top = df.loc[rows, "disease"].value_counts().iloc[0]
            assert top * L < len(rows), (name, top, len(rows))
    verdict = dmondrian.verify(released, qis, k=K, sensitive="disease",
                               l=L if majority else None, l_kind="majority")
    assert verdict.ok, (name, verdict.achieved)
    if majority:
        assert verdict.achieved["largest_share"] < 1 / L
    ncp = dmondrian.metrics.ncp(released, qis, df, qi_kinds=kinds).per_attribute["pct"]
    assert 0 < ncp < 1, (name, ncp)
    out[name] = {"classes": len(sizes), "ncp_pct": ncp}

local = dmondrian.anonymize(df, qis, K, qi_kinds=kinds)
check("local_kind", local, False)
local_l = dmondrian.anonymize(df, qis, K, qi_kinds=kinds, l=L, l_kind="majority",
                              sensitive="disease")
check("local_majority", local_l, True)
plan = dmondrian.plans.fit_plan(df, qis, K, qi_kinds=kinds, l=L, l_kind="majority",
                                sensitive="disease")
check("plan_majority", plan.transform(df), True)

bad = df.assign(pct=df["pct"] * 2)
try:
    dmondrian.anonymize(bad, qis, K, qi_kinds=kinds)
except UnsupportedDtypeError as exc:
    assert "pct" in str(exc) and "outside [0, 100]" in str(exc)
    out["refused"] = True

# One class holding mostly flu fails the variant's check.
one = pd.DataFrame({"pct": ["[0.0 %, 100.0 %]"] * 4, "age": ["[1, 2]"] * 4,
                    "disease": ["flu", "flu", "flu", "cold"]})
out["violations"] = dmondrian.verify(one, qis, sensitive="disease", l=L,
                                     l_kind="majority").n_violations

if sys.argv[2] == "dask":
    import dask.dataframe as dd
    import dmondrian.distributed
    from dask.distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        ddf = dd.from_pandas(df, npartitions=4)
        # The kind and the variant together, in one release (a cluster costs seconds).
        released = dmondrian.distributed.anonymize(ddf, qis, K, qi_kinds=kinds, l=L,
                                                   l_kind="majority", sensitive="disease")
        check("dask_majority", released.compute().loc[df.index], True)
print(json.dumps(out))
'''


def _ignore(folder, names):
    # Compiled bytecode is kept (copytree keeps the sources' times, so it stays valid):
    # a cold import of the package in three processes would cost seconds.
    return [n for n in names if n.endswith((".c", ".cpp", ".html"))]


def _changed(copy: Path) -> set[str]:
    """Package source files of ``copy`` that are new or differ from the repository's."""
    out = set()
    for path in copy.rglob("*"):
        if path.suffix in SOURCES:
            rel = path.relative_to(copy)
            original = PACKAGE / rel
            if not original.exists() or not filecmp.cmp(path, original, shallow=False):
                out.add(rel.as_posix())
    return out


def _edit(path: Path, anchor: str, added: str) -> None:
    text = path.read_text()
    assert text.count(anchor) == 1, f"{anchor!r} is no longer in {path}"
    path.write_text(text.replace(anchor, anchor + added))


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    """A copy of the package with the toy kind and the toy l variant, and the files
    each addition touched."""
    root = tmp_path_factory.mktemp("extended")
    copy = root / "dmondrian"
    shutil.copytree(PACKAGE, copy, ignore=_ignore)
    # The kind: its module, and its registration.
    (copy / "kinds" / "percent.py").write_text(PERCENT_MODULE)
    _edit(copy / "kinds" / "__init__.py", "from .ordinal import OrdinalKind\n",
          "from .percent import PercentKind\n")
    _edit(copy / "kinds" / "__init__.py", "HIERARCHY = register(HierarchyKind())\n",
          "PERCENT = register(PercentKind())\n")
    kind_files = _changed(copy)
    # The l variant: its module, and the import that registers it.
    (copy / "privacy" / "l_majority.py").write_text(MAJORITY_MODULE)
    _edit(copy / "privacy" / "__init__.py", '"""\n', "\nfrom . import l_majority  # noqa: F401\n")
    l_files = _changed(copy) - kind_files
    return root, kind_files, l_files


def test_a_kind_touches_at_most_five_package_files(extended):
    _, kind_files, _ = extended
    assert kind_files == {"kinds/percent.py", "kinds/__init__.py"}
    assert len(kind_files) <= MAX_FILES


def test_an_l_variant_touches_at_most_five_package_files(extended):
    _, _, l_files = extended
    assert l_files == {"privacy/l_majority.py", "privacy/__init__.py"}
    assert len(l_files) <= MAX_FILES


def _run(root: Path, engine: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(root), engine], env=env,
                          capture_output=True, text=True, timeout=600, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_toy_kind_and_variant_work_on_every_path(extended):
    root, _, _ = extended
    out = _run(root, "dask")
    assert out["refused"] and out["violations"] == 1
    for name in ("local_kind", "local_majority", "plan_majority", "dask_majority"):
        assert out[name]["classes"] > 1, name
    # The variant costs classes: fewer, larger ones than k alone.
    assert out["local_majority"]["classes"] <= out["local_kind"]["classes"]


def test_the_repository_itself_has_neither_toy():
    from dmondrian.kinds import KINDS
    from dmondrian.options import L_KINDS

    assert "percent" not in KINDS and "majority" not in L_KINDS
