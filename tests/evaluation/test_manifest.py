"""Release manifests: content, per-file SHA-256, atomic replacement, re-checking."""

from __future__ import annotations

import hashlib
import json
import os
import re

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dmondrian
from dmondrian import _version
from dmondrian.errors import ParameterError
from dmondrian.evaluation import manifest as mf
from dmondrian.metrics import Domain

QIS = ["age", "hours"]


@pytest.fixture
def release(tmp_path):
    """An original table, its k=5 release written as a directory of 3 Parquet files."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 90, 300), "hours": rng.integers(1, 99, 300),
                       "income": rng.choice(["<=50K", ">50K"], 300)})
    rel = dmondrian.anonymize(df, QIS, 5)
    out = tmp_path / "release.parquet"
    dd.from_pandas(rel, npartitions=3).to_parquet(out, write_index=False)
    return df, rel, out


PARAMS = {"k": 5, "quasi_identifiers": QIS, "mode": "strict", "constraints": ["k-anonymity"],
          "seed": 0}


def test_manifest_beside_a_parquet_directory(release):
    df, rel, out = release
    rep = dmondrian.report(rel, QIS, df, "income", k=5)
    m = dmondrian.write_manifest(output=out, parameters=PARAMS, input_rows=len(df), report=rep)
    path = out.parent / "release.parquet.manifest.json"
    assert json.loads(path.read_text()) == m
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert len(files) >= 3
    assert [f["path"] for f in m["output"]["files"]] == [p.name for p in files]
    for entry, p in zip(m["output"]["files"], files, strict=True):
        assert entry["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
        assert entry["bytes"] == p.stat().st_size
    assert m["output"]["path"] == "release.parquet"
    assert m["parameters"] == {**PARAMS, "seed": "withheld"}
    assert m["rows"] == {"input": 300, "output": 300}
    assert m["achieved"]["k"] >= 5 and m["achieved"]["sensitive"] == "income"
    assert m["metrics"] == rep.to_dict()
    assert m["metrics"]["ncp"]["overall"] == pytest.approx(rep.ncp.overall)
    packages = m["software"]["packages"]
    assert {"dmondrian", "numpy", "pandas", "dask", "pyarrow"} <= set(packages)
    assert packages["pandas"] == pd.__version__
    assert packages["dmondrian"] == dmondrian.__version__ == _version.__version__
    assert m["format"] == mf.FORMAT and m["created"].endswith("+00:00")
    assert mf.check_manifest(path) == {"missing": [], "changed": [], "extra": []}
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]


def test_report_built_from_the_release_read_back(release):
    df, _, out = release
    back = dd.read_parquet(out)
    m = mf.write_manifest(out.parent / "m.json", output=out, parameters=PARAMS,
                          released=back, quasi_identifiers=QIS, original=df, k=5)
    assert m["rows"]["output"] == 300 and m["metrics"]["classes"] > 0
    assert m["achieved"]["k"] >= 5


def test_without_report_rows_come_from_parquet_footers(release):
    _, _, out = release
    m = mf.write_manifest(output=out, parameters=PARAMS)
    assert m["rows"] == {"input": None, "output": 300}
    assert m["metrics"] is None and m["achieved"] is None


def test_single_file_and_manifest_inside_the_output_directory(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-0.csv").write_text("age\n[20, 29]\n")
    m = mf.write_manifest(out / "manifest.json", output=out, parameters={"k": 2},
                          extra={"note": "test"})
    # The manifest does not hash itself.
    assert [f["path"] for f in m["output"]["files"]] == ["part-0.csv"]
    assert m["extra"] == {"note": "test"} and m["output"]["path"] == "."
    single = mf.write_manifest(output=out / "part-0.csv", parameters={"k": 2},
                               output_rows=1)
    assert single["output"]["files"][0]["path"] == "part-0.csv"
    assert single["rows"]["output"] == 1


def test_check_manifest_finds_changed_missing_and_extra_files(release):
    _, _, out = release
    path = out.parent / "m.json"
    mf.write_manifest(path, output=out, parameters=PARAMS)
    files = sorted(p for p in out.iterdir() if p.is_file())
    files[0].write_bytes(files[0].read_bytes() + b"x")
    files[1].unlink()
    (out / "stray.parquet").write_bytes(b"")
    assert mf.check_manifest(path) == {"missing": [files[1].name], "changed": [files[0].name],
                                       "extra": ["stray.parquet"]}


def test_rewrite_is_atomic(release, monkeypatch):
    _, _, out = release
    path = out.parent / "m.json"
    first = mf.write_manifest(path, output=out, parameters=PARAMS)
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(mf.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        mf.write_manifest(path, output=out, parameters={**PARAMS, "k": 99})
    # The old manifest is intact and no temporary file is left behind.
    assert path.read_bytes() == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.json", "release.parquet"]
    monkeypatch.undo()
    second = mf.write_manifest(path, output=out, parameters={**PARAMS, "k": 99})
    assert second["parameters"]["k"] == 99 and first["parameters"]["k"] == 5
    assert mf.read_manifest(path)["parameters"]["k"] == 99


def test_numpy_and_path_parameters_are_stored_as_json(tmp_path):
    out = tmp_path / "o.csv"
    out.write_text("x\n")
    m = mf.write_manifest(output=out, parameters={"k": np.int64(3), "source": tmp_path,
                                                  "qis": ("a", "b"), "t": np.float32(0.5)})
    assert m["parameters"] == {"k": 3, "source": str(tmp_path), "qis": ["a", "b"], "t": 0.5}


def test_bad_calls_raise_typed_errors(tmp_path):
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(output=tmp_path / "nothing", parameters={})
    assert e.value.parameter == "output"
    out = tmp_path / "o.csv"
    out.write_text("x\n")
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(output=out, parameters=[("k", 2)])
    assert e.value.parameter == "parameters"
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(output=out, parameters={}, input_rows=-1)
    assert e.value.parameter == "input_rows"
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(tmp_path / "no" / "m.json", output=out, parameters={})
    assert e.value.parameter == "path"
    with pytest.raises(ParameterError) as e:
        mf.write_manifest(output=out, parameters={}, released=pd.DataFrame({"x": [1]}))
    assert e.value.parameter == "quasi_identifiers"
    (tmp_path / "other.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ParameterError):
        mf.read_manifest(tmp_path / "other.json")
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


# -- nothing exact in metadata: the rows left out ---------------------------------------------
# A release with suppressed="drop" leaves rows out; its manifest withholds the input's
# row count and the dropped rows. An attacker holding the release and its manifest
# must not get them back from the other figures either.


def _outliers(n=400, seed=3):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(20, 60, n), "zip": rng.integers(1000, 1100, n),
                       "job": rng.choice(["a", "b", "c"], n)})
    df.loc[:9, "age"] = rng.integers(95, 120, 10)  # outliers the budget drops
    return df


def _numbers(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _numbers(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _numbers(v)
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield tree


def _released_domains(released, domains):
    """The domains an attacker reads off the release's labels alone: the outer bounds
    of a numeric QI's ranges, the values a nominal QI's sets name."""
    out = {}
    for q, d in domains.items():
        labels = {str(v) for v in released[q].dropna()} - {"*"}
        if d.kind == "numeric":
            points = [float(x) for t in labels for x in re.findall(r"-?\d+(?:\.\d+)?", t)]
            out[q] = Domain(d.kind, max(points) - min(points))
        else:
            names = {x for t in labels for x in t.strip("{}").split(", ")}
            out[q] = Domain(d.kind, len(names) - 1.0)
    return out


def _attack(manifest, released, domains, n_input):
    """What the manifest gives away of the rows left out, by every route we know."""
    n = manifest["rows"]["output"]
    dropped = n_input - n
    assert dropped > 0 and manifest["rows"]["input"] == mf.WITHHELD
    numbers = list(_numbers({k: v for k, v in manifest.items() if k != "software"}))
    # Not written as is, nor as a ratio of the counts the release shows or hides.
    assert n_input not in numbers and dropped not in numbers
    ratios = [dropped / n_input, dropped / n, n / n_input, n_input / n, n_input / dropped]
    assert not any(abs(x - r) < 1e-9 for x in numbers if isinstance(x, float) for r in ratios)
    # NCP: counting the dropped rows at full loss, p = (T + d) / (n + d), where T is the
    # release's own cost (its labels priced on the domains, which an attacker knows or
    # reads off the labels): d = (p n - T) / (1 - p). The manifest's NCP must be the
    # release's own, whatever d was, and normalized by the domains the release's
    # labels span (else p = T' / (n R) gives the original's range R, and with it
    # an extreme only a dropped row held): computed from the release alone, it is.
    own = dmondrian.metrics.ncp(released, list(domains),
                                domains=_released_domains(released, domains))
    ncp = manifest["metrics"]["ncp"]
    assert ncp["rows"] == "released" and ncp["domains"] == "released"
    for q in domains:
        p, cost = ncp["per_attribute"][q], own.per_attribute[q] * n
        assert abs((p * n - cost) / (1 - p)) < 0.5  # derives 0 dropped rows, not d
        assert p == pytest.approx(own.per_attribute[q], abs=1e-12)
    assert ncp["overall"] == pytest.approx(own.overall, abs=1e-12)


def test_a_manifest_of_dropped_rows_hides_their_count_local(tmp_path):
    from dmondrian.cli import main
    from dmondrian.metrics import compute_domains

    df = _outliers()
    df.to_csv(tmp_path / "in.csv", index=False)
    out = tmp_path / "out.csv"
    assert main(["anonymize", str(tmp_path / "in.csv"), str(out), "--k", "5", "--qi",
                 "age,zip,job", "--suppression", "0.05", "--suppressed", "drop", "--local",
                 "--no-progress"]) == 0
    manifest = json.loads((tmp_path / "out.csv.manifest.json").read_text())
    domains = compute_domains(df, ["age", "zip", "job"])
    _attack(manifest, pd.read_csv(out, dtype=str), domains, len(df))
    # The report written by hand into a manifest is cleaned the same way.
    rel = dmondrian.anonymize(df, ["age", "zip", "job"], 5, suppression=0.05,
                              suppressed="drop")
    rel.to_csv(tmp_path / "api.csv", index=False)
    m = mf.write_manifest(output=tmp_path / "api.csv", parameters={"k": 5},
                          input_rows=len(df), released=rel,
                          quasi_identifiers=["age", "zip", "job"], original=df, k=5)
    _attack(m, rel, domains, len(df))


def test_a_manifest_of_dropped_rows_hides_their_count_on_dask(tmp_path, process_client):
    from dmondrian.cli import main
    from dmondrian.metrics import compute_domains

    df = _outliers(2000)
    df.to_parquet(tmp_path / "in.parquet", index=False)
    out = tmp_path / "out.parquet"
    assert main(["anonymize", str(tmp_path / "in.parquet"), str(out), "--k", "5", "--qi",
                 "age,zip,job", "--suppression", "0.01", "--suppressed", "drop",
                 "--distributed", "--scheduler", process_client.scheduler.address,
                 "--no-progress"]) == 0
    manifest = json.loads((tmp_path / "out.parquet.manifest.json").read_text())
    released = pd.read_parquet(out)
    assert len(released) < len(df)
    _attack(manifest, released, compute_domains(df, ["age", "zip", "job"]), len(df))


# -- nothing exact in metadata: the extremes of the rows left out --------------------------------
# NCP normalized by the original's range R prices a class [a, b] at (b - a) / R: from the
# manifest's NCP and the release's labels an attacker solves for R, so for the extreme a
# dropped row held (age 119, where every released label stops below 90).


def _one_old_man(age):
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"age": rng.integers(17, 91, 400),
                       "income": rng.choice(["<=50K", ">50K"], 400)})
    df.loc[0, "age"] = age  # the only age above 90; the budget drops its class
    return df


def _spans(released):
    """The release's own cost before normalizing: the sum of its rows' label spans."""
    bounds = released["age"].astype(str).str.findall(r"\d+")
    return float(sum(int(b[-1]) - int(b[0]) for b in bounds))


def _no_extreme(manifests, releases, df):
    """The manifests of two inputs that differ only in a dropped row's age say the same,
    and what they say is priced on the release's span, not on the one reaching the age."""
    rel = releases[0]
    assert all(r.equals(rel) for r in releases) and len(rel) < len(df)
    top = max(int(b) for t in rel["age"] for b in re.findall(r"\d+", str(t)))
    low = min(int(b) for t in rel["age"] for b in re.findall(r"\d+", str(t)))
    assert top <= 90  # the old man's class was dropped
    a, b = ({k: v for k, v in m.items() if k not in ("created", "output", "software")}
            for m in manifests)
    for m in (a, b):  # the run's wall time, not a figure of the data
        m.get("extra", {}).pop("seconds", None)
    assert a == b  # nothing in the manifest depends on the dropped age
    p = a["metrics"]["ncp"]["per_attribute"]["age"]
    assert a["metrics"]["ncp"]["domains"] == "released"
    # Solving p = spans / (n R) for R gives the release's own span, not the input's.
    assert _spans(rel) / (len(rel) * p) == pytest.approx(top - low)
    assert 119 not in list(_numbers(a)) and 119 - 17 not in list(_numbers(a))


def test_a_manifest_of_dropped_rows_hides_their_extreme_local(tmp_path):
    from dmondrian.cli import main

    manifests, releases, old = [], [], []
    for age in (119, 150):
        df = _one_old_man(age)
        rel = dmondrian.anonymize(df, ["age"], 5, suppression=0.02, suppressed="drop")
        rel.to_csv(tmp_path / f"api{age}.csv", index=False)
        manifests.append(mf.write_manifest(output=tmp_path / f"api{age}.csv",
                                           parameters={"k": 5}, input_rows=len(df),
                                           released=rel, quasi_identifiers=["age"],
                                           original=df, k=5))
        releases.append(rel)
        # What the attack gets from an NCP over the released rows but the input's range.
        p = dmondrian.metrics.ncp(rel, ["age"], domains={"age": Domain("numeric", age - 17.0)})
        old.append(17 + _spans(rel) / (len(rel) * p.per_attribute["age"]))
    assert old == [pytest.approx(119), pytest.approx(150)]
    _no_extreme(manifests, releases, df)
    # The CLI, from a CSV, writes the same figures.
    manifests, releases = [], []
    for age in (119, 150):  # the same paths, as the manifest records them
        _one_old_man(age).to_csv(tmp_path / "in.csv", index=False)
        out = tmp_path / "out.csv"
        assert main(["anonymize", str(tmp_path / "in.csv"), str(out), "--k", "5",
                     "--qi", "age", "--suppression", "0.02", "--suppressed", "drop",
                     "--local", "--no-progress", "--overwrite"]) == 0
        manifests.append(json.loads((tmp_path / "out.csv.manifest.json").read_text()))
        releases.append(pd.read_csv(out, dtype=str).sort_values(["age", "income"],
                                                                ignore_index=True))
    _no_extreme(manifests, releases, df)


def test_a_manifest_of_dropped_rows_hides_their_extreme_on_dask(tmp_path, process_client):
    from dmondrian.cli import main

    manifests, releases = [], []
    for age in (119, 150):
        df = _one_old_man(age)
        df.to_parquet(tmp_path / "in.parquet", index=False)
        out = tmp_path / "out.parquet"
        assert main(["anonymize", str(tmp_path / "in.parquet"), str(out), "--k", "5",
                     "--qi", "age", "--suppression", "0.02", "--suppressed", "drop",
                     "--distributed", "--scheduler", process_client.scheduler.address,
                     "--no-progress", "--overwrite"]) == 0
        manifests.append(json.loads((tmp_path / "out.parquet.manifest.json").read_text()))
        releases.append(pd.read_parquet(out).astype(str).sort_values(
            ["age", "income"], ignore_index=True))
    _no_extreme(manifests, releases, df)
