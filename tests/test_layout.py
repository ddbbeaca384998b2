"""The package's layout stays readable: no import cycle, no oversized module, only
the Dask side importing the Dask engine, a short root, and a current module map.

The import graph of ``dmondrian`` is read from the source (``ast`` for
``.py``, the import lines of ``.pyx``), with the imports inside functions:
a cycle closed by a function-level import still ties its modules together.
Imports under ``if TYPE_CHECKING:`` never run and are left out. An import
of a submodule (``from . import _kernel``) is an edge to that submodule;
an import of a name (``from . import anonymize``) is an edge to the module
it is imported from. The implicit import of a parent package is not an edge
(every module would otherwise import ``dmondrian/__init__.py``), nor are
dynamic imports (``importlib.import_module``, as in ``dmondrian.__getattr__``).

See docs/design.md, section "Layout".
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "dmondrian"
DESIGN = PACKAGE.parent / "docs" / "design.md"
MAX_LINES = 800
FRONT_MAX_LINES = 500
MAX_ROOT_MODULES = 12

#: The Dask side: the only modules that may import the Dask engine
#: (``dmondrian._dask``, ``dmondrian.distributed``).
DASK_SIDE = {"dmondrian.distributed", "dmondrian.plans.dask", "dmondrian.plans.dask_fit",
             "dmondrian.cli._anonymize_dask", "dmondrian.cli._engines"}
#: The package's ``anonymize`` hands a dask DataFrame to the Dask front, inside the
#: function: the one way in from the front door.
DASK_DISPATCH = {"dmondrian": {"dmondrian.distributed"}}

# Known offenders, outside the Dask engine, being refactored by other work in
# progress: remove an entry as soon as its module is fixed (the tests below
# fail on any offender not listed here).
KNOWN_CYCLES: list[set] = []
KNOWN_LARGE: set = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    files = sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx")])
    return {_module_name(p): p for p in files if "__pycache__" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _py_imports(path: Path):
    """``(level, module, names)`` of every import that can run, at any depth."""
    out = []

    def visit(node):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((0, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module, [a.name for a in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return out


_PYX_FROM = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+import\s+(?!\*)\(?([\w\s,]+)")
_PYX_IMPORT = re.compile(r"^\s*import\s+([\w.]+)")


def _pyx_imports(path: Path):
    """The Python imports of a Cython module (``cimport`` lines are compile-time only)."""
    out = []
    for line in path.read_text().splitlines():
        if re.match(r"^\s*(from\s+\S+\s+)?cimport\b", line):
            continue
        m = _PYX_FROM.match(line)
        if m:
            names = [n.split()[0] for n in m.group(3).split(",") if n.strip()]
            out.append((len(m.group(1)), m.group(2) or None, names))
            continue
        m = _PYX_IMPORT.match(line)
        if m:
            out.append((0, m.group(1), []))
    return out


def import_graph() -> dict[str, set]:
    """``{module: modules of dmondrian it imports}`` for every module of the package."""
    sources = _sources()
    graph = {name: set() for name in sources}
    for name, path in sources.items():
        package = name if path.stem == "__init__" else name.rpartition(".")[0]
        imports = _pyx_imports(path) if path.suffix == ".pyx" else _py_imports(path)
        for level, module, names in imports:
            if level:
                base = package.split(".")
                base = base[:len(base) - (level - 1)]
                target = ".".join([*base, *([module] if module else [])])
            else:
                target = module
            if target != "dmondrian" and not target.startswith("dmondrian."):
                continue
            for alias in names or [None]:
                sub = f"{target}.{alias}" if alias else None
                if sub in sources:
                    graph[name].add(sub)
                elif target in sources:
                    graph[name].add(target)
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set]) -> list[set]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def line_counts() -> dict[str, int]:
    return {str(p.relative_to(PACKAGE.parent)): len(p.read_text().splitlines())
            for p in _sources().values()}


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "dmondrian.distributed" in graph["dmondrian"]  # inside a function
    assert "dmondrian._dask.plan" in graph["dmondrian.distributed"]
    assert "dmondrian._kernel" in graph["dmondrian.local"]  # from . import _kernel
    assert "dmondrian.partition.sketch" in graph["dmondrian.partition.cut_tree"]
    assert "dmondrian._kernel.constants" in graph["dmondrian._kernel.tree"]  # a .pyx
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_no_import_cycle():
    found = cycles(import_graph())
    unknown = [c for c in found if c not in KNOWN_CYCLES]
    assert not unknown, f"import cycles: {unknown}"


def test_the_dask_engine_has_no_import_cycle():
    """Held with no exception: the engine's steps import what they share, never the front."""
    for component in cycles(import_graph()):
        engine = {m for m in component if m == "dmondrian.distributed"
                  or m.startswith(("dmondrian._dask", "dmondrian._compat"))}
        assert not engine, f"import cycle through the Dask engine: {component}"
    graph = import_graph()
    for module, imported in graph.items():
        if module.startswith("dmondrian._dask"):
            assert "dmondrian.distributed" not in imported, module


def test_no_module_over_800_lines():
    counts = line_counts()
    large = {path: n for path, n in counts.items() if n > MAX_LINES}
    unknown = {path: n for path, n in large.items() if path not in KNOWN_LARGE}
    assert not unknown, f"modules over {MAX_LINES} lines: {unknown}"


def test_the_dask_front_is_short():
    n = line_counts()["dmondrian/distributed.py"]
    assert n < FRONT_MAX_LINES, f"dmondrian/distributed.py has {n} lines"


def _dask_engine(module: str) -> bool:
    return module in ("dmondrian._dask", "dmondrian.distributed") or module.startswith(
        "dmondrian._dask.")


def test_only_the_dask_side_imports_the_dask_engine():
    """Engine-neutral code (encoding, partition, release, io, plans in memory, kinds,
    metrics) imports nothing of the Dask engine, not even inside a function."""
    offenders = {}
    for module, imported in import_graph().items():
        if _dask_engine(module) or module in DASK_SIDE:
            continue
        engine = {m for m in imported if _dask_engine(m)} - DASK_DISPATCH.get(module, set())
        if engine:
            offenders[module] = sorted(engine)
    assert not offenders, f"modules outside the Dask side import the Dask engine: {offenders}"


def test_the_dask_side_check_sees_an_offender():
    graph = import_graph()
    assert "dmondrian.partition.cut_tree" in graph["dmondrian._dask.top_phase"]
    assert "dmondrian._dask.cluster" in graph["dmondrian._dask.write_job"]
    assert _dask_engine("dmondrian._dask.cluster") and not _dask_engine("dmondrian.plans.dask")


def test_the_root_holds_at_most_12_modules():
    root = sorted(p.name for p in PACKAGE.iterdir()
                  if p.suffix in (".py", ".pyx") and p.stem not in ("__init__", "__main__"))
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules at the package's root: {root}"


def _module_map() -> list[str]:
    """The modules named in docs/design.md's module map (first column of its tables)."""
    text = DESIGN.read_text()
    section = text[text.index("### Module map"):]
    return re.findall(r"^\| `([^`]+\.pyx?)` \|", section, re.MULTILINE)


def test_the_design_module_map_is_current():
    mapped = _module_map()
    assert len(mapped) == len(set(mapped)), "a module is named twice in the module map"
    modules = {str(p.relative_to(PACKAGE)) for p in _sources().values()}
    missing = sorted(modules - set(mapped))
    stale = sorted(set(mapped) - modules)
    assert not missing, f"modules missing from docs/design.md's module map: {missing}"
    assert not stale, f"docs/design.md's module map names modules that do not exist: {stale}"


def test_no_cycle_between_folders():
    """The folders are layered: no import runs back up from one folder (or root module)
    to another that imports it, even through other folders."""
    def folder(module):
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else "dmondrian"

    graph = {}
    for module, imported in import_graph().items():
        graph.setdefault(folder(module), set()).update(
            folder(m) for m in imported if folder(m) != folder(module))
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, set())
    assert not cycles(graph), f"import cycles between folders: {cycles(graph)}"
