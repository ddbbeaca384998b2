"""The API reference's module pages, written at build time from each module's ``__all__``.

Every public function and class of the modules in :data:`MODULES` gets an
autosummary entry, so autosummary writes it a page of its own
(``api/generated/<module>.<name>.rst``). The names come from ``__all__``:
a name a module makes public gets its page with no edit to the docs. Modules
re-exported in ``__all__`` (``dmondrian.errors``) link to their own page;
constants are shown on the module's page with their value and their ``#:``
comment.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

# The public modules, in the order of the reference's table of contents.
MODULES = ["dmondrian", "dmondrian.local", "dmondrian.distributed", "dmondrian.plans",
           "dmondrian.metrics", "dmondrian.plot", "dmondrian.errors", "dmondrian.synthetic"]
GENERATED = "generated"


def public_names(module_name: str) -> dict[str, list[str]]:
    """``{"classes", "functions", "modules", "data": names}`` of a module's ``__all__``."""
    module = importlib.import_module(module_name)
    found = {"classes": [], "functions": [], "modules": [], "data": []}
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value):
            found["classes"].append(name)
        elif inspect.ismodule(value):
            found["modules"].append(name)
        elif callable(value):
            found["functions"].append(name)
        elif not name.startswith("__"):
            found["data"].append(name)
    return found


def page_names() -> list[str]:
    """The full names that get a page of their own: every public class and function."""
    return [f"{module}.{name}" for module in MODULES
            for kind in ("classes", "functions") for name in public_names(module)[kind]]


def _autosummary(names):
    # Pages use docs/_templates/autosummary/<class|exception|function>.rst.
    return [".. autosummary::", f"   :toctree: {GENERATED}/", "",
            *(f"   {n}" for n in sorted(names)), ""]


def module_page(module_name: str) -> str:
    names = public_names(module_name)
    lines = [module_name, "=" * len(module_name), "",
             f".. automodule:: {module_name}", "   :no-members:", "",
             f".. currentmodule:: {module_name}", ""]
    for title, kind in (("Classes", "classes"), ("Functions", "functions")):
        if names[kind]:
            lines += [title, "-" * len(title), "", *_autosummary(names[kind])]
    if names["modules"]:
        lines += ["Modules", "-------", ""]
        lines += [f"* :mod:`{module_name}.{name}`" for name in names["modules"]] + [""]
    if names["data"]:
        lines += ["Constants", "---------", ""]
        for name in names["data"]:
            lines += [f".. autodata:: {name}", ""]
    return "\n".join(lines)


def _write_if_changed(path: Path, text: str) -> None:
    # Rewriting an unchanged page would make Sphinx re-read it on every build.
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def write_pages(app, config) -> None:
    folder = Path(app.srcdir) / "api"
    for module_name in MODULES:
        _write_if_changed(folder / f"{module_name}.rst", module_page(module_name))
    # A name no longer public must lose its page (a page in no toctree is an error).
    names = set(page_names())
    for stub in (folder / GENERATED).glob("*.rst"):
        if stub.stem not in names and stub.stem.removesuffix("-2") not in names:
            stub.unlink()
    # Pages differing only in case (dmondrian.report, dmondrian.Report) would
    # overwrite each other on a case-insensitive file system.
    seen = set()
    for full in page_names():
        if full.lower() in seen:
            config.autosummary_filename_map.setdefault(full, f"{full}-2")
        seen.add(full.lower())


def _outside_the_reference(app, domain, node) -> bool | None:
    """True (no warning) for a reference to a Python object the reference leaves out.

    Docstrings name internal modules and their names for developers
    (``:mod:`dmondrian._dask.shuffle```, ``:func:`fit_trim``` in its own
    module): those show as code, unlinked. A reference to a name that exists
    nowhere (a typo, a renamed function) still fails the build.
    """
    if domain.name != "py":
        return None
    target = node.get("reftarget", "").lstrip("~").lstrip(".")
    return True if any(_exists(name) for name in _candidates(node, target)) else None


def _candidates(node, target: str) -> list[str]:
    """Where ``target`` may live: as written, or relative to the referring object."""
    scopes = []
    module, cls = node.get("py:module"), node.get("py:class")
    if module:
        scopes += [f"{module}.{cls}", module] if cls else [module]
    # "…/fitted.py:docstring of dmondrian.plans.fitted.fit_plan": where the
    # docstring was written, which may differ from where it is documented.
    source = str(node.source or "")
    if "docstring of " in source:
        path, documented = source.split(":docstring of ")
        written = documented.split(":")[0].split(".")
        scopes += [".".join(written[:n]) for n in range(len(written) - 1, 0, -1)]
        # The file's own module and packages (``:mod:`.shipped_keys``` is a sibling).
        path = Path(path)
        if path.suffix == ".py" and "dmondrian" in path.parts:
            parts = list(path.with_suffix("").parts)
            parts = parts[len(parts) - 1 - parts[::-1].index("dmondrian"):]
            if parts[-1] == "__init__":
                parts.pop()
            scopes += [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
    return [target, *(f"{scope}.{target}" for scope in scopes)]


def _exists(dotted: str) -> bool:
    """Whether ``dotted`` names a module or an object reachable from one."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for part in parts[n:]:
            if not hasattr(value, part):
                return False
            value = getattr(value, part)
        return True
    return False


def setup(app):
    # config-inited runs before autosummary reads the sources for its stubs.
    app.connect("config-inited", write_pages)
    app.connect("warn-missing-reference", _outside_the_reference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
