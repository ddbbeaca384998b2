"""The command line reads and writes the same way on both engines (issue 25).

Bugs 3 (one ``--dtype`` converter), 6 (the Dask CSV reader agrees with the
local one), 7 (CSV dialects on every command), 8 (missing output folders),
9 (one voice for warnings) and 10 (a Dask release's manifest says as much
as a local one). The ``--distributed`` runs use one multi-process cluster
(``--scheduler``): the session's shared one.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from dmondrian.cli import main
from dmondrian.io import files as io

QIS = ["age", "zip", "sex"]


def _people(n: int = 3000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 90, n),
        "zip": rng.choice([2134, 2139, 10001, 10002, 94110, 94117], n),
        "sex": rng.choice(["F", "M"], n),
        "income": rng.integers(1_000, 100_000, n) + 0.5,
    })


@pytest.fixture(scope="module")
def cluster(shared_local_cluster):
    """The address of the session's two worker processes, for ``--scheduler``."""
    return shared_local_cluster.scheduler_address


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_io")
    df = _people()
    df.to_parquet(d / "people.parquet", index=False)
    # A European export: semicolons, decimal commas, Latin-1.
    df.assign(sex=df["sex"].map({"F": "Frau", "M": "Männlich"})).to_csv(
        d / "semi.csv", sep=";", decimal=",", index=False, encoding="latin-1")
    df.to_csv(d / "people.tsv", sep="\t", index=False)
    # A column empty in the first rows, text further on (bug 6).
    late = df.copy()
    late["cited"] = None
    late.loc[len(late) - 200:, "cited"] = "warning"
    late.to_csv(d / "late.csv", index=False)
    return d


def _engine(engine: str, cluster) -> list[str]:
    return ["--local"] if engine == "local" else ["--distributed", "--scheduler", cluster,
                                                 "--leaf-rows", "800"]


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main([*map(str, args), "--no-progress"] if args[0] == "anonymize" else
                list(map(str, args)))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("engine", ["local", "distributed"])
def test_both_engines_read_write_and_report_alike(folder, cluster, engine, capsys):
    base = ["anonymize", folder / "late.csv", "", "--k", "10", "--qi", ",".join(QIS),
            "--allow-unique", "income", "--seed", "1", *_engine(engine, cluster)]
    # Bugs 6 and 8: a late text column, and an output folder that does not exist yet.
    out = folder / engine / "2024-06-01"
    base[2] = f"{out}/"
    code, _, err = _run(capsys, *base, "--output-format", "parquet")
    assert code == 0, err
    assert "internal error" not in err
    released = io.read_table(f"{out}/")
    assert sorted(released["cited"].dropna().unique()) == ["warning"]
    assert released["cited"].notna().sum() == 200
    # Bug 10: the manifest holds what the release achieves, whatever the engine.
    manifest = json.loads((folder / engine / "2024-06-01.manifest.json").read_text())
    assert manifest["achieved"]["k"] >= 10 and manifest["metrics"] is not None
    assert manifest["metrics"]["rows"] == len(released) == 3000
    assert manifest["metrics"]["ncp"]["overall"] > 0
    assert manifest["suppressed"]["rows"] == 0
    assert manifest["extra"]["classes"] == manifest["metrics"]["classes"] > 0
    assert manifest["extra"]["min_class_size"] == manifest["achieved"]["k"]


def test_distributed_warns_of_a_late_text_column_in_one_line(folder, cluster, capsys):
    code, _, err = _run(capsys, "anonymize", folder / "late.csv", folder / "late_out.csv",
                        "--k", "10", "--qi", ",".join(QIS), "--allow-unique", "income",
                        *_engine("distributed", cluster))
    assert code == 0, err
    lines = [line for line in err.splitlines() if line]
    assert any(re.fullmatch(r"dmondrian: warning: .*'cited'.*read as text", line)
               for line in lines), err
    assert all(line.startswith("dmondrian: warning: ") for line in lines), err


@pytest.mark.parametrize("engine", ["local", "distributed"])
def test_dtype_str_on_parquet_publishes_text_on_both_engines(folder, cluster, engine, capsys):
    """Bug 3: ``--dtype zip=str`` on Parquet input; Dask left the column numeric."""
    dst = folder / f"zip_{engine}.csv"
    code, _, err = _run(capsys, "anonymize", folder / "people.parquet", dst, "--k", "10",
                        "--qi", ",".join(QIS), "--dtype", "zip=str", "--allow-unique",
                        "income", *_engine(engine, cluster))
    assert code == 0, err
    labels = set(pd.read_csv(dst, dtype=str)["zip"])
    # Text QIs publish sets ("{2134, 2139}"), never numeric ranges ("[2134, 2139]").
    assert not [x for x in labels if x.startswith("[")], labels
    assert any(x.startswith("{") or x == "*" for x in labels) or labels <= {
        "2134", "2139", "10001", "10002", "94110", "94117"}


@pytest.mark.parametrize("engine", ["local", "distributed"])
def test_semicolon_decimal_comma_latin1(folder, cluster, engine, capsys):
    """Bug 7: a European CSV export, its separator sniffed."""
    dst = folder / f"semi_{engine}.parquet"
    code, _, err = _run(capsys, "anonymize", folder / "semi.csv", dst, "--k", "10",
                        "--qi", ",".join(QIS), "--decimal", ",", "--encoding", "latin-1",
                        "--allow-unique", "income", *_engine(engine, cluster))
    assert code == 0, err
    released = io.read_table(str(dst))
    assert sorted(released["income"]) == sorted(_people()["income"])
    assert set(released["sex"]) <= {"Frau", "Männlich", "*", "{Frau, Männlich}"}


def test_dialect_flags_on_verify_report_and_sweep(folder, capsys):
    semi = ["--decimal", ",", "--encoding", "latin-1", "--sep", ";"]
    code, out, err = _run(capsys, "verify", folder / "semi.csv", "--qi", "age", "--k", "1",
                          *semi)
    assert code == 0 and out.splitlines()[0].endswith(": OK"), err
    code, out, err = _run(capsys, "report", folder / "people.tsv", "--qi", "age,sex", "--json")
    assert code == 0, err
    assert json.loads(out)["rows"] == 3000
    code, out, err = _run(capsys, "sweep", folder / "semi.csv", "--qi", "age,sex", "--k", "5",
                          *semi, "--json")
    assert code == 0, err
    assert json.loads(out)[0]["k"] == 5
    code, _, err = _run(capsys, "verify", folder / "semi.csv", "--qi", "age", "--k", "1",
                        "--sep", ";;")
    assert code == 2 and "--sep must be one character" in err


def test_sweep_warns_as_every_command_does(folder, capsys, monkeypatch):
    """Bug 9: sweep printed the raw Python warning (file, line, source)."""
    import warnings

    import dmondrian.plot

    measure = dmondrian.plot.k_sweep_table

    def warned(*args, **kwargs):
        warnings.warn("a warning raised while sweeping", UserWarning, stacklevel=2)
        return measure(*args, **kwargs)

    monkeypatch.setattr(dmondrian.plot, "k_sweep_table", warned)
    # A record number singles out rows: the sweep measures, it releases nothing, so the
    # column is neither refused nor warned about.
    _people().assign(record=np.arange(3000)).to_parquet(folder / "ids.parquet")
    code, _, err = _run(capsys, "sweep", folder / "ids.parquet", "--qi", "age,sex",
                        "--k", "5,10")
    assert code == 0
    lines = [line for line in err.splitlines() if line]
    assert lines == ["dmondrian: warning: a warning raised while sweeping"], err
    assert "record" not in err




@pytest.mark.parametrize("engine", ["local", "distributed"])
@pytest.mark.parametrize("bad", [
    (["--qi", "age,nope"], "nope"),  # a column the input lacks
    (["--qi", "age,zip", "--mode", "loose"], "mode"),  # an option out of its range
    (["--qi", "age,zip", "--identifiers", "age"], "age"),  # an option against the columns
])
def test_a_run_refused_by_its_input_or_options_never_stages(folder, capsys, engine, bad):
    # Every check that can refuse the run comes before OUTPUT is staged or locked: a
    # live run writing the same OUTPUT, or an OUTPUT there already, does not hide the
    # run's own error, and no folder is made for it.
    from dmondrian.io.staging import staged_release

    flags, named = bad
    src = str(folder / "people.parquet")
    out = folder / "new-folder" / "out.csv"
    argv = ["anonymize", src, str(out), "--k", "5", *flags, "--no-progress",
            *(["--local"] if engine == "local" else ["--distributed"])]
    assert main(argv) == 2
    line = capsys.readouterr().err.strip()
    assert named in line and "\n" not in line, line
    assert not (folder / "new-folder").exists()
    busy = folder / "busy.csv"
    with staged_release(str(busy)):  # another run is writing it
        assert main([*argv[:2], str(busy), *argv[3:]]) == 2
    line = capsys.readouterr().err.strip()
    assert named in line and "another dmondrian run" not in line, line
    busy.write_text("a release\n")
    assert main([*argv[:2], str(busy), *argv[3:]]) == 2
    line = capsys.readouterr().err.strip()
    assert named in line and "already exists" not in line, line
    busy.unlink()
