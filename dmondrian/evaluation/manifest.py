"""A release manifest: the JSON file that says how a release was made and what it is.

:func:`write_manifest` is called once the output is written (a file, or a
directory of Parquet part files, local or any fsspec URL). The manifest holds

* ``parameters``: what the caller ran (k, quasi-identifiers, mode, constraints, ...), as given,
  except a seed: its value is never written (``"seed": "withheld"``), since the manifest travels
  with the release and whoever holds the seed can redo the writers' row shuffle (recovering the
  input's row order) and, with seeded noise, subtract the noise;
* ``software``: dmondrian, Python and dependency versions;
* ``rows``: input and output row counts;
* ``achieved``: the k (l, t) the release actually has, ``suppressed``: the
  rows it suppressed (masked and dropped) and their share, and ``metrics``:
  the full :class:`dmondrian.evaluation.reporting.Report` (NCP, discernibility, risk, ...);
* ``output``: every output file with its size and SHA-256;
* ``column_types``: the types the QIs and the sensitive column were read with (``"datetime"``,
  ``"int"``, ...; :func:`dmondrian.io.csv_tables.column_types`), so that ``dmondrian report
  --original`` reads the original as the release was made from it;
* ``noise``: each noised column's epsilon and bounds (:mod:`dmondrian.privacy.noise`),
  and ``risks``: ``identifying_columns``, the columns released as is that
  single out rows (:mod:`dmondrian.release.identifiers`).

Nothing exact beyond what the release itself shows (:func:`withhold_exact`): the manifest travels
with the release, so a figure that its rows do not give away is not written. The fewest people in a
class (``k_entities``, with ``entity=``) is recorded as the bound the run guarantees, ``{"at_least":
k}``; the input's row count, and the dropped rows with the suppressed total and share, are withheld
when rows were dropped (else the input's rows are the release's, and the suppressed rows are the
masked ones, all visible in it). Nor does a figure computed over them stay: the NCP counting the
dropped rows at full loss, ``(T + d) / (n + d)``, gives ``d`` to whoever prices the release's own
labels (``T``), and normalized by the original's ranges it gives a dropped row's extreme (an age no
released label reaches) to whoever solves for the range. The manifest's NCP is then the one over the
released rows, normalized by the domains those rows span (``"rows": "released", "domains":
"released"``).

It is written atomically: a temporary file in the same directory, flushed
and fsynced, then ``os.replace``, so a reader never sees half a manifest.
:func:`check_manifest` re-hashes the output and reports what changed.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from .._version import __version__
from ..errors import ParameterError
from ..privacy.noise import noise_summary

__all__ = ["write_manifest", "read_manifest", "check_manifest", "manifest_path", "FORMAT",
           "WITHHELD", "withhold_seeds", "withhold_exact", "writer_fields", "NOT_MEASURED",
           "COUNTED", "option_parameters"]

#: What a manifest records in place of a seed's value.
WITHHELD = "withheld"
_SEED_NAMES = frozenset({"seed", "random_state"})


def withhold_seeds(parameters: Mapping) -> dict:
    """``parameters`` with the value of every seed replaced by :data:`WITHHELD`.

    A manifest is written beside the release and travels with it. The seed of a run fixes the
    shuffle of every written file's rows and, when noise is seeded, every noise draw: whoever holds
    it can undo the shuffle (the input's row order can single out a record) and subtract the noise.
    So a manifest says that a seed was given, never which. A seed left out (None) stays None.

    Examples
    --------
    >>> withhold_seeds({"k": 5, "seed": 7, "random_state": None})
    {'k': 5, 'seed': 'withheld', 'random_state': None}
    """
    return {name: (WITHHELD if name in _SEED_NAMES and value is not None else value)
            for name, value in parameters.items()}

def withhold_exact(manifest: dict) -> dict:
    """``manifest`` without the exact figures its release does not show.

    * ``k_entities`` (the fewest distinct people of a class) becomes ``{"at_least": k}``, the
      requested k the run guarantees (``{"below": k}`` if it did not hold; :data:`WITHHELD` without
      a k): the people are not in the release, so their exact count per class is not either.
    * When rows were dropped (``rows.output`` below ``rows.input``, or a report counting dropped
      rows), the input's row count, the dropped rows, and the suppressed total and share are
      :data:`WITHHELD`: the release shows its own rows and its masked ones, not those left out. The
      NCP, which counts them at full loss and is normalized by ranges they may stretch, becomes the
      report's NCP over the released rows and the domains they span (``ncp_released``, marked
      ``"rows": "released", "domains": "released"``), or :data:`WITHHELD` when the report has none.

    Examples
    --------
    >>> m = {"rows": {"input": 1000, "output": 990}, "achieved": {"k": 12, "k_entities": 7},
    ...      "suppressed": {"rows": 14, "share": 0.014, "masked": 4, "dropped": 10},
    ...      "metrics": {"k": 5}}
    >>> out = withhold_exact(m)
    >>> out["rows"], out["achieved"]["k_entities"]
    ({'input': 'withheld', 'output': 990}, {'at_least': 5})
    >>> out["suppressed"]
    {'rows': 'withheld', 'share': 'withheld', 'masked': 4, 'dropped': 'withheld'}
    >>> m["metrics"] = {"k": 5, "ncp": {"overall": 0.31}, "ncp_released": {"overall": 0.3}}
    >>> withhold_exact(m)["metrics"]
    {'k': 5, 'ncp': {'overall': 0.3, 'rows': 'released', 'domains': 'released'}}
    """
    out = dict(manifest)
    metrics = out.get("metrics")
    k = metrics.get("k") if isinstance(metrics, Mapping) else None

    def bounded(achieved):
        if not isinstance(achieved, Mapping) or achieved.get("k_entities") is None:
            return achieved
        fewest = achieved["k_entities"]
        if isinstance(fewest, Mapping):  # bounded already
            return achieved
        bound = (WITHHELD if k is None
                 else {"at_least": int(k)} if fewest >= k else {"below": int(k)})
        return {**achieved, "k_entities": bound}

    def unshown(suppressed):
        if not isinstance(suppressed, Mapping) or not suppressed.get("dropped"):
            return suppressed
        return {**suppressed, "rows": WITHHELD, "share": WITHHELD, "dropped": WITHHELD}

    out["achieved"] = bounded(out.get("achieved"))
    rows = dict(out.get("rows") or {})
    dropped = any(isinstance(s, Mapping) and s.get("dropped")
                  for s in (out.get("suppressed"),
                            metrics.get("suppressed") if isinstance(metrics, Mapping) else None))
    if rows.get("input") is not None and (dropped or rows.get("output") != rows["input"]):
        rows["input"] = WITHHELD
    if rows:
        out["rows"] = rows
    out["suppressed"] = unshown(out.get("suppressed"))
    if isinstance(metrics, Mapping):
        out["metrics"] = dict(metrics)
        for key, clean in (("achieved", bounded), ("suppressed", unshown)):
            if key in metrics:
                out["metrics"][key] = clean(metrics[key])
        released = out["metrics"].pop("ncp_released", None)
        ncp = out["metrics"].get("ncp")
        if dropped and ncp is not None and not (isinstance(ncp, Mapping)
                                                and ncp.get("rows") == "released"):
            out["metrics"]["ncp"] = (WITHHELD if not isinstance(released, Mapping)
                                     else {**released, "rows": "released",
                                           "domains": "released"})
    return out


#: Identifies the manifest layout; bumped if fields change meaning.
FORMAT = "dmondrian-manifest/1"
MANIFEST_SUFFIX = ".manifest.json"
DEPENDENCIES = ("numpy", "pandas", "pyarrow", "dask", "distributed", "fsspec", "matplotlib")
_CHUNK = 1 << 20


def manifest_path(output) -> str:
    """Default manifest location: beside the output, ``<output>.manifest.json``.

    Examples
    --------
    >>> manifest_path("/data/release.parquet/")
    '/data/release.parquet.manifest.json'
    """
    return os.fspath(output).rstrip("/\\") + MANIFEST_SUFFIX


def _versions() -> dict:
    out = {"dmondrian": __version__}
    for name in DEPENDENCIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _fs(output):
    import fsspec.core

    return fsspec.core.url_to_fs(os.fspath(output))


def _sha256(fs, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def hash_output(output, exclude=()) -> list[dict]:
    """Size and SHA-256 of the output file, or of every file under an output directory.

    Paths are relative to the output directory (a single file: its name), in
    sorted order. ``exclude`` lists absolute paths to leave out (the manifest
    itself when it is written inside the directory).
    """
    fs, root = _fs(output)
    if not fs.exists(root):
        raise ParameterError("output", f"output {os.fspath(output)!r} does not exist")
    skip = {fs._strip_protocol(os.fspath(p)) for p in exclude}
    if fs.isdir(root):
        files = sorted(p for p in fs.find(root) if p not in skip)
        base = root.rstrip("/")
        rel = [p[len(base) + 1:] for p in files]
    else:
        files, rel = [root], [root.rstrip("/").rsplit("/", 1)[-1]]
    return [{"path": r, "bytes": int(fs.size(p)), "sha256": _sha256(fs, p)}
            for p, r in zip(files, rel, strict=True)]


def _parquet_rows(output) -> int | None:
    """Row count from Parquet footers (no data read); None if the output is not Parquet."""
    fs, root = _fs(output)
    files = sorted(fs.find(root)) if fs.isdir(root) else [root]
    files = [f for f in files if f.endswith((".parquet", ".parq"))]
    if not files:
        return None
    import pyarrow.parquet as pq

    total = 0
    for f in files:
        with fs.open(f, "rb") as fh:
            total += pq.ParquetFile(fh).metadata.num_rows
    return total


#: What a library writer's manifest says in place of the metrics it does not measure.
NOT_MEASURED = ("not measured by this writer: dmondrian.metrics.report on the release, or "
                "the command line's manifest, gives them")
#: What it says when its write tasks counted the release for the report.
COUNTED = "counted by the write tasks, as the command line's manifest on Dask"


def writer_fields(writer: str, parameters: Mapping, *, input_rows=None, output_rows=None,
                  random_state=None, index_written: bool = False, report=None) -> dict:
    """The :func:`write_manifest` keywords of a release a library writer wrote.

    The writer's parameters, row counts, the files (hashed by :func:`write_manifest`) and the row
    order, as the command line records them. The metrics (achieved k, l, t, loss, risk) only when
    the writer has its ``report`` (the counts its write tasks took, as the command line's on Dask:
    :func:`dmondrian._dask.write_job.written_report`); otherwise they need a pass of their own over
    the release, which a writer does not make, and ``extra.metrics`` says so.

    Examples
    --------
    >>> f = writer_fields("anonymize_to_parquet", {"k": 5}, input_rows=10, random_state=3)
    >>> f["extra"]["writer"], f["extra"]["row_order"]["seeded"], f["input_rows"]
    ('dmondrian.anonymize_to_parquet', True, 10)
    """
    from ..release.row_order import row_order_record

    order = {**row_order_record(random_state), "index_written": bool(index_written)}
    return {"parameters": dict(parameters), "input_rows": input_rows, "output_rows": output_rows,
            "report": report,
            "extra": {"writer": f"dmondrian.{writer}", "row_order": order,
                      "metrics": NOT_MEASURED if report is None else COUNTED}}


def option_parameters(opts) -> dict:
    """The manifest's ``parameters`` of an anonymization's checked options
    (:class:`dmondrian.encoding.validation.Options`): k, the QIs, then each option as
    given (hierarchies by their columns, constraints as text)."""
    import dataclasses

    out = {"k": opts.k, "quasi_identifiers": list(opts.qis)}
    for f in dataclasses.fields(opts):
        value = getattr(opts, f.name)
        if f.name in ("hierarchies", "qi_kinds", "kinds"):
            value = sorted(map(str, value)) if f.name == "hierarchies" else None
        elif f.name == "constraints":
            value = [str(c) for c in value]
        if f.name != "qis" and value is not None:
            out[f.name] = value
    return out


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    if isinstance(obj, (os.PathLike, _dt.date, _dt.datetime)):
        return str(obj)
    return repr(obj)


def write_manifest(path=None, *, output, parameters: Mapping, input_rows=None, output_rows=None,
                   report=None, released=None, quasi_identifiers=None, original=None,
                   sensitive=None, k=None, extra: Mapping | None = None,
                   suppressed: Mapping | None = None, noise=None, risks: Mapping | None = None,
                   column_types: Mapping | None = None, published=None) -> dict:
    """Write the manifest of a release (atomically) and return it as a dict.

    Parameters
    ----------
    path : str or os.PathLike, optional
        Where to write the JSON (a local file). Default: beside the output,
        see :func:`dmondrian.evaluation.manifest.manifest_path`.
    output : str or os.PathLike
        The release: a file, or a directory of Parquet part files (each file
        is hashed); local or an fsspec URL.
    parameters : mapping
        What was run, e.g. ``{"k": 10, "quasi_identifiers": [...], "mode":
        "strict", "constraints": [...], "seed": 0}``; stored as given, except
        the value of a ``seed`` or ``random_state`` (see :data:`WITHHELD`).
    input_rows : int, optional
        Rows of the input table.
    output_rows : int, optional
        Rows of the release; taken from the report, or read from Parquet footers, when not given.
    report : dmondrian.evaluation.reporting.Report, optional
        The release's report; computed from ``released`` when omitted.
    released : pandas or Dask DataFrame, optional
        The release (e.g. ``dask.dataframe.read_parquet(output)``), to build the report from, with
        ``quasi_identifiers``, ``original``, ``sensitive`` and ``k``.
    extra : mapping, optional
        More fields to store under ``"extra"``.
    suppressed : mapping, optional
        The rows suppressed (``rows``, ``share``, ``masked``, ``dropped``),
        when no report gives them.
    noise : mapping, optional
        The ``noise`` option of the run; default: the report's.
    risks : mapping, optional
        ``{"identifying_columns": [...]}``, e.g. the columns the run warned
        about; default: the report's.
    column_types : mapping, optional
        ``{column: type}`` the input's columns were read with
        (:func:`dmondrian.io.csv_tables.column_types`), recorded as ``column_types``.
    published : str or os.PathLike, optional
        Where ``output`` will be published when it is still staged (:mod:`dmondrian.io.staging`):
        the manifest then names that place, relative to the folder the manifest is published in.

    Returns
    -------
    dict
        The manifest as written.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> folder = tempfile.mkdtemp()
    >>> out = os.path.join(folder, "release.csv")
    >>> pd.DataFrame({"age": ["[20, 29]", "[20, 29]"]}).to_csv(out, index=False)
    >>> m = write_manifest(output=out, parameters={"k": 2, "quasi_identifiers": ["age"]})
    >>> m["output"]["files"][0]["path"], os.path.exists(out + ".manifest.json")
    ('release.csv', True)
    """
    if not isinstance(parameters, Mapping):
        raise ParameterError("parameters", "parameters must be a mapping of what was run "
                                           f"(k, quasi_identifiers, ...), got "
                                           f"{type(parameters).__name__}")
    for name, value in (("input_rows", input_rows), ("output_rows", output_rows)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int,
                                                                                   np.integer))
                                  or value < 0):
            raise ParameterError(name, f"{name} must be an integer >= 0, got {value!r}")
    target = Path(manifest_path(output) if path is None else os.fspath(path))
    if report is None and released is not None:
        if quasi_identifiers is None:
            raise ParameterError("quasi_identifiers", "building the report from released "
                                                      "needs quasi_identifiers")
        from .reporting import report as build_report

        report = build_report(released, quasi_identifiers, original=original,
                              sensitive=sensitive, k=k)
    files = hash_output(output, exclude=[target.resolve()] if "://" not in os.fspath(output)
                        else ())
    metrics = report.to_dict() if report is not None else None
    if output_rows is None:
        output_rows = metrics["rows"] if metrics is not None else _parquet_rows(output)
    manifest = {
        "format": FORMAT,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "parameters": withhold_seeds(parameters),
        "software": {"python": platform.python_version(), "platform": platform.platform(),
                     "packages": _versions()},
        "rows": {"input": None if input_rows is None else int(input_rows),
                 "output": None if output_rows is None else int(output_rows)},
        "achieved": metrics["achieved"] if metrics is not None else None,
        "suppressed": (metrics.get("suppressed") if metrics is not None
                       else None if suppressed is None else dict(suppressed)),
        "metrics": metrics,
        "output": {"path": _relative(output, target.parent) if published is None else
                   _relative(published, Path(manifest_path(published)).parent), "files": files},
    }
    manifest["noise"] = noise_summary(noise) if noise is not None else (
        metrics["noise"] if metrics is not None else {})
    if risks is None:
        found = metrics["risk"]["identifying_columns"] if metrics is not None else []
        risks = {"identifying_columns": [f["column"] for f in found]}
    manifest["risks"] = dict(risks)
    if column_types is not None:
        manifest["column_types"] = dict(column_types)
    if extra:
        manifest["extra"] = dict(extra)
    manifest = withhold_exact(manifest)
    text = json.dumps(manifest, indent=2, default=_json_default, allow_nan=False) + "\n"
    _atomic_write(target, text)
    return json.loads(text)


def _relative(output, folder: Path) -> str:
    text = os.fspath(output)
    if "://" in text:
        return text
    try:
        return os.path.relpath(Path(text).resolve(), folder.resolve())
    except ValueError:  # another drive on Windows
        return str(Path(text).resolve())


def _atomic_write(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` so readers see the old file or the whole new one."""
    folder = target.parent
    if not folder.is_dir():
        raise ParameterError("path", f"the manifest's folder {str(folder)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_manifest(path) -> dict:
    """Read a manifest written by :func:`write_manifest`.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    dict

    Raises
    ------
    ParameterError
        The file is not a dmondrian manifest.
    """
    with open(path, encoding="utf-8") as fh:
        manifest = json.load(fh)
    if manifest.get("format") != FORMAT:
        raise ParameterError("path", f"{os.fspath(path)!r} is not a {FORMAT} manifest")
    return manifest


def check_manifest(path, output=None) -> dict:
    """Re-hash a release and compare it with its manifest.

    Parameters
    ----------
    path : str or os.PathLike
        The manifest.
    output : str or os.PathLike, optional
        The release; by default the manifest's ``output.path`` (relative to the manifest's folder).

    Returns
    -------
    dict
        ``{"missing": [...], "changed": [...], "extra": [...]}`` file paths;
        all empty when the release is intact.

    Examples
    --------
    >>> import tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "release.csv")
    >>> with open(out, "w") as fh:
    ...     _ = fh.write("age\\n[20, 29]\\n[20, 29]\\n")
    >>> _ = write_manifest(output=out, parameters={"k": 2})
    >>> check_manifest(manifest_path(out))
    {'missing': [], 'changed': [], 'extra': []}
    >>> with open(out, "a") as fh:
    ...     _ = fh.write("30\\n")
    >>> check_manifest(manifest_path(out))["changed"]
    ['release.csv']
    """
    manifest = read_manifest(path)
    if output is None:
        stored = manifest["output"]["path"]
        output = stored if "://" in stored else str(Path(path).resolve().parent / stored)
    expected = {f["path"]: f["sha256"] for f in manifest["output"]["files"]}
    actual = {f["path"]: f["sha256"] for f in hash_output(output, exclude=[Path(path).resolve()])}
    return {"missing": sorted(set(expected) - set(actual)),
            "changed": sorted(p for p in expected if p in actual and actual[p] != expected[p]),
            "extra": sorted(set(actual) - set(expected))}
