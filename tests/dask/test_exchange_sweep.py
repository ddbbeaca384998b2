"""The exchange sweep's quick mode, and the path rule on the sweep's shapes.

The quick mode runs the mixed table's shape tiny on a real two-process
LocalCluster, on both paths and the rule's, and reads every release back
(smallest class >= k, every row): a crash or a wrong release shows here (the
script's own ``--quick`` runs every shape). No timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

pytest.importorskip("distributed")

from dmondrian._dask.exchange import choose_exchange, exchange_features  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _sweep(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("_exchange_sweep",
                                                  BENCHMARKS / "exchange_sweep.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_quick_sweep_checks_every_release(monkeypatch, tmp_path):
    sweep = _sweep(monkeypatch)
    out = tmp_path / "quick.json"
    code = sweep.main(["--quick", "--tables", "mixed", "--sizes", "125000",
                       "--qi-sets", "full", "--jobs", "rows,keys,auto,lazy", "--tmp", str(tmp_path),
                       "--out", str(out)])
    result = json.loads(out.read_text())
    assert code == 0 and result["ok"]
    assert [s["table"] for s in result["shapes"]] == ["mixed"]
    for shape in result["shapes"]:
        assert set(shape["checks"]) == {"rows", "keys", "auto", "lazy"}
        for check in shape["checks"].values():
            assert check["smallest_class"] >= sweep.K and check["rows"] == result["rows"]
        assert shape["auto_took"] in ("rows", "keys")
        assert shape["features"]["partitions_per_mrow"] > 0


def _meta(columns: dict) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in columns.items()})


def _opts(qis):
    return SimpleNamespace(qis=qis)


def test_the_rule_takes_rows_on_the_mixed_table_and_keys_on_the_wide_one():
    # Issue 40's shapes, as the plan sees them: dtypes, a measured row size, keys' bytes.
    mixed = _meta({"age": "int64", "zip": "int64", "income": "float64", "job": "str",
                   "since": "datetime64[ns]", "diag": "str", "id": "int64"})
    qis = ["age", "zip", "since", "income", "job"]
    assert choose_exchange(None, mixed, 64.0, _opts(qis), [1, 4, 2, 4, 1],
                           5_000_000, 40) == "rows"
    wide = _meta({"age": "int64", "zip": "int64", "birth_date": "datetime64[ns]",
                  "sex": "str", **{f"c{j}": "float64" for j in range(60)}})
    assert choose_exchange(None, wide, 870.0, _opts(["age", "zip", "birth_date", "sex"]),
                           [1, 4, 2, 1], 2_000_000, 20) == "keys"


def test_the_features_are_what_the_rule_knows_before_choosing():
    meta = _meta({"a": "int64", "b": "float64", "t": "str"})
    f = exchange_features(meta, 100.0, _opts(["a"]), [2, ], 1_000_000, 8)
    assert f == {"one": 1.0, "qis": 1.0, "key_bytes": 2.0, "payload_bytes": 92.0,
                 "partitions_per_mrow": 8.0}
    # Asked for, a path is taken whatever the estimate.
    assert choose_exchange("keys", meta, 8.0, _opts(["a"]), 1.0) == "keys"
