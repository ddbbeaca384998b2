"""A fitted plan as a versioned JSON file a reviewer can read.

The file holds the options, the QIs with their kinds and fitted domains (categories, hierarchy,
value type), and the tree as columns of numbers: the cuts (``qi``, ``t``, ``eq``, ``tie_before``,
``ranks``) and every node's fitted bounds and counts, in the kernel's int64 keys (a float's key is
its order-preserving bit pattern; see :mod:`dmondrian.kinds.keys`). ``labels`` gives every node's
published label per QI in plain text, which is what a reviewer reads: the regions, and what each
reveals about the fitted rows (its bounds, or its set of values, and, in ``count``, how many fitted
rows it held).

``trim`` and ``lift_cost`` record how the leaves' labels were trimmed
(:func:`dmondrian.plans.tree.nominal_trim`); the labels themselves are in the
tree, so a file without ``lift_cost`` (older) reads the same.

``overflow``, present only in a refitted plan's file (:meth:`FittedPlan.refit`), is the plan the
rows held by no region are released through, in the same form.

Version 2 adds ``options.entity``, the person key of a plan that counts
people (``entity=``): a reader of version 1 would release through it
counting rows, so it refuses the file. Version 1 files still load (no entity).

Version 3 writes the tree's columns (all but ``count``, which a reviewer reads with the labels)
as ``{"dtype", "shape", "zlib"}``: the array's bytes in the narrowest integer type that holds
it, little-endian, compressed with zlib and written as base64 in the JSON. A reader decodes
each column in one step instead of parsing a number at a time, which took most of a large
plan's load. Versions 1 and 2 (lists of numbers) still load.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..encoding.sensitive import SensitiveValues
from ..errors import ParameterError, PlanFileError
from ..kinds.base import EncodedQI
from ..kinds.hierarchy import Hierarchy
from ..partition.cut_tree import CutTree
from ..privacy.constraints import resolve_constraints
from .fitted import FittedPlan
from .tree import PlanTree

__all__ = ["FORMAT", "VERSION", "save_plan", "load_plan", "plan_dict", "plan_from_dict",
           "plan_sha256", "PlanFileError"]

FORMAT = "dmondrian-plan"
VERSION = 3
#: Versions this dmondrian reads.
READS = (1, 2, 3)

_CUT_FIELDS = ("qi", "t", "eq", "tie_before", "rank_off", "left", "right")


def _packed(a: np.ndarray) -> dict:
    """An array as version 3 writes it: dtype, shape, base64 of its zlib-compressed bytes
    (integers in the narrowest type that holds them)."""
    a = np.asarray(a)
    if a.dtype.kind == "i" and a.size:
        lo, hi = a.min(), a.max()
        a = a.astype(next(t for t in (np.int8, np.int16, np.int32, np.int64)
                          if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max))
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return {"dtype": a.dtype.str, "shape": list(a.shape),
            "zlib": base64.b64encode(zlib.compress(a.tobytes())).decode("ascii")}


def _unpacked(v, dtype) -> np.ndarray:
    """An array from :func:`_packed`'s form or a list of numbers (versions 1 and 2)."""
    if isinstance(v, dict):
        v = np.frombuffer(zlib.decompress(base64.b64decode(v["zlib"])),
                          dtype=v["dtype"]).reshape(v["shape"])
    return np.asarray(v).astype(dtype)  # a copy: writeable, native order


def _json_value(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if np.isnan(v) else float(v)  # a class of missing values only
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _qi_dict(qi: EncodedQI) -> dict:
    h = qi.hierarchy
    return {"name": _json_value(qi.name), "kind": qi.kind, "kernel_kind": int(qi.kernel_kind),
            "value_type": qi.value_type, "tz": None if qi.tz is None else str(qi.tz),
            "dtype": str(qi.dtype), "decimals": int(qi.decimals), "unit": qi.unit,
            "scale": float(qi.scale), "card": int(qi.card),
            "categories": [_json_value(c) for c in qi.categories],
            "hierarchy": None if h is None else {leaf: h.ancestors(leaf) for leaf in h.leaves}}


def _qi_from(d: dict) -> EncodedQI:
    hierarchy = None if d["hierarchy"] is None else Hierarchy(d["hierarchy"], name=d["name"])
    if d["kind"] == "ordinal":
        dtype = pd.CategoricalDtype(d["categories"], ordered=True)
    else:
        try:
            dtype = pd.api.types.pandas_dtype(d["dtype"])
        except TypeError:
            dtype = np.dtype(object)
    return EncodedQI(d["name"], d["kind"], d["kernel_kind"], np.zeros(0, dtype=np.int64),
                     d["scale"], card=d["card"], categories=list(d["categories"]),
                     hierarchy=hierarchy, value_type=d["value_type"], tz=d["tz"], dtype=dtype,
                     decimals=d.get("decimals", 0), unit=d.get("unit", ""))


def _node_labels(plan: FittedPlan) -> dict:
    from .batch import BatchSummary
    from .release import _values

    tree = plan.tree
    m, d = tree.n_nodes, len(plan.encodings)
    empty = BatchSummary(np.zeros(m, dtype=np.int64))
    nodes = np.arange(m, dtype=np.int64)
    values, _ = _values(plan, empty, nodes, nodes)
    out = {}
    for qi, (v, inverse) in zip(plan.encodings, values, strict=True):
        column = np.asarray(v, dtype=object)[np.asarray(inverse)]
        out[str(qi.name)] = [_json_value(x) for x in column]
    return out if d else {}


def plan_dict(plan: FittedPlan) -> dict:
    """The JSON-ready form of a plan (see the module docstring)."""
    tree, cuts = plan.tree, plan.tree.cuts
    sens = plan.sensitive
    return {
        "format": FORMAT, "version": VERSION, "k": plan.k, "fit_k": plan.fit_k,
        "batch_rows": plan.batch_rows, "trim": plan.trim, "lift_cost": plan.lift_cost,
        "n_fit": plan.n_fit, "quasi_identifiers": [_json_value(q) for q in plan.qis],
        "options": {name: (list(v) if isinstance(v, (list, tuple)) else _json_value(v))
                    for name, v in plan.options.items()},
        "qis": [_qi_dict(qi) for qi in plan.encodings],
        "sensitive": None if sens is None else {
            "values": [_json_value(v) for v in sens.values], "has_missing": sens.has_missing,
            "ordered": sens.ordered, "counts": [float(c) for c in sens.counts]},
        "tree": {
            "nodes": tree.n_nodes,
            **{name: _packed(getattr(cuts, name)) for name in (*_CUT_FIELDS, "ranks")},
            **{name: _packed(getattr(tree, name))
               for name in ("parent", "lo", "hi", "missing", "total", "present")},
            "count": tree.count.tolist(),
            "codes": {str(j): {"card": card, "node_code": _packed(packed)}
                      for j, (packed, card) in tree.codes.items()},
        },
        "labels": _node_labels(plan),
        # Only a refitted plan has the key: every other plan's file is as before.
        **({} if plan.overflow is None else {"overflow": plan_dict(plan.overflow)}),
    }


def plan_from_dict(data: dict) -> FittedPlan:
    """A plan from :func:`plan_dict`'s form."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PlanFileError("not a dmondrian plan (no \"format\": \"dmondrian-plan\")")
    if data.get("version") not in READS:
        raise PlanFileError(f"plan version {data.get('version')!r} is not supported (this "
                            f"dmondrian reads versions {', '.join(map(str, READS))})")
    t = data["tree"]

    def arr(name, dtype=np.int64):
        return _unpacked(t[name], dtype)

    m, d = t["nodes"], len(data["qis"])
    cuts = CutTree(*(arr(n) for n in ("qi", "t", "eq", "tie_before", "rank_off")), arr("ranks"),
                   arr("left"), arr("right"), np.where(arr("qi") < 0, np.arange(m), -1))
    shape = (m, d)
    tree = PlanTree(cuts, arr("parent"), arr("count"), arr("lo").reshape(shape),
                    arr("hi").reshape(shape), arr("missing", bool).reshape(shape),
                    arr("total", np.float64).reshape(shape), arr("present").reshape(shape),
                    {int(j): (_unpacked(c["node_code"], np.int64), int(c["card"]))
                     for j, c in t["codes"].items()})
    options = dict(data["options"])
    options.setdefault("entity", None)  # version 1: a plan counting rows
    sens = None
    constraints = []
    if data["sensitive"] is not None:
        s = data["sensitive"]
        sens = SensitiveValues(pd.Index(s["values"]), s["has_missing"], s["ordered"],
                               np.asarray(s["counts"], dtype=np.float64))
        cons, _ = resolve_constraints(data["k"], l=options.get("l"),
                                      l_kind=options.get("l_kind") or "distinct",
                                      c=options.get("c"), t=options.get("t"),
                                      sensitive=options.get("sensitive"))
        constraints = cons[1:]
    plan = FittedPlan(data["quasi_identifiers"], data["k"], data["fit_k"], data["batch_rows"],
                      data["n_fit"], options, [_qi_from(q) for q in data["qis"]], tree, sens,
                      constraints, data.get("trim", 1), data.get("lift_cost"))
    if data.get("overflow") is not None:
        plan.overflow = plan_from_dict(data["overflow"])
    return plan


def save_plan(plan: FittedPlan, path) -> str:
    """Write ``plan`` to ``path`` as JSON (whole or not at all); return the file's SHA-256.

    Examples
    --------
    >>> import pandas as pd, tempfile, os
    >>> from dmondrian.plans import fit_plan
    >>> df = pd.DataFrame({"age": [23, 24, 50, 51], "zip": [1, 1, 2, 2]})
    >>> path = os.path.join(tempfile.mkdtemp(), "plan.json")
    >>> digest = save_plan(fit_plan(df, ["age", "zip"], k=2), path)
    >>> load_plan(path).transform(df)["age"].tolist()
    ['[23, 24]', '[23, 24]', '[50, 51]', '[50, 51]']
    """
    data = json.dumps(plan_dict(plan), indent=1, allow_nan=False).encode("utf-8")
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".plan-", dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return hashlib.sha256(data).hexdigest()


def load_plan(path) -> FittedPlan:
    """Read a plan written by :func:`save_plan`.

    Raises
    ------
    PlanFileError
        For a file that is not a plan, or of another version.
    """
    try:
        data = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise ParameterError("plan", f"plan file {str(path)!r} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"plan file {str(path)!r} is not JSON: {exc}") from None
    return plan_from_dict(data)


def plan_sha256(path) -> str:
    """SHA-256 of a plan file's bytes (what a manifest records)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
