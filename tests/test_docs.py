"""The documentation site: every public name has its API page, every guide page is listed.

The full build (``python -m sphinx -W -b html docs docs/_build/html``, warnings
are errors) runs in CI after the install README names; these tests check
what the build alone would not say.
"""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import api_pages  # noqa: E402
import repo_links  # noqa: E402


def _public(module_name):
    module = importlib.import_module(module_name)
    return [n for n in module.__all__
            if callable(getattr(module, n)) and not inspect.ismodule(getattr(module, n))]


def test_the_reference_covers_the_public_modules():
    toctree = (DOCS / "api" / "index.rst").read_text().split(":maxdepth: 2")[1].split()
    assert toctree == api_pages.MODULES
    for name in ("dmondrian", "dmondrian.distributed", "dmondrian.metrics", "dmondrian.plot",
                 "dmondrian.errors"):
        assert name in api_pages.MODULES


@pytest.fixture(scope="module")
def api_stubs(tmp_path_factory):
    """The folder where autosummary wrote the stubs of every module's page: one run for
    all the pages (each run pays Sphinx's and dmondrian's imports); stubs are named by
    module and name, so no page's stubs can stand for another's."""
    pytest.importorskip("sphinx")
    where = tmp_path_factory.mktemp("api")
    pages = []
    for module_name in api_pages.MODULES:
        pages.append(where / f"{module_name}.rst")
        pages[-1].write_text(api_pages.module_page(module_name))
    out = where / "generated"
    subprocess.run([sys.executable, "-m", "sphinx.ext.autosummary.generate", "-o", str(out),
                    "-t", str(DOCS / "_templates"), "-i", *map(str, pages)],
                   check=True, capture_output=True, text=True, cwd=where, timeout=300)
    return out


@pytest.mark.parametrize("module_name", api_pages.MODULES)
def test_every_public_name_has_an_api_page(module_name, api_stubs):
    """autosummary writes a page for every class and function in the module's __all__."""
    out = api_stubs
    names = _public(module_name)
    assert names
    for name in names:
        stub = out / f"{module_name}.{name}.rst"
        assert stub.is_file(), f"{module_name}.{name} has no API page"
        assert re.search(rf"^\.\. auto(class|exception|function):: {name}$",
                         stub.read_text(), re.M), stub.read_text()


def test_a_new_public_name_gets_its_page(monkeypatch):
    import dmondrian.plot

    def brand_new(table):
        """A public function added to a module's __all__."""

    monkeypatch.setattr(dmondrian.plot, "brand_new", brand_new, raising=False)
    monkeypatch.setattr(dmondrian.plot, "__all__", [*dmondrian.plot.__all__, "brand_new"])
    assert "dmondrian.plot.brand_new" in api_pages.page_names()
    assert re.search(r"^   brand_new$", api_pages.module_page("dmondrian.plot"), re.M)


def test_every_guide_page_is_in_the_guide():
    toctree = (DOCS / "guide" / "index.md").read_text().split(":maxdepth: 2")[1]
    listed = set(toctree.split("```")[0].split())
    pages = {p.stem for p in (DOCS / "guide").glob("*.md")} - {"index"}
    assert pages == listed


def test_links_between_repository_files_point_at_the_pages():
    text = "[a](../benchmarks/README.md#suppression) [b](other.md) [c](design.md)"
    assert repo_links.rewrite(text, "docs/design.md", "design") == \
        "[a](benchmarks.md#suppression) [b](other.md) [c](design.md)"
    assert repo_links.rewrite("[d](../docs/design.md#layout)", "benchmarks/README.md",
                              "benchmarks") == "[d](design.md#layout)"
    assert repo_links.rewrite("[e](../../benchmarks/README.md)", "docs/guide/x.md",
                              "guide/x") == "[e](../benchmarks.md)"


def _reference(target, module, source):
    addnodes = pytest.importorskip("sphinx.addnodes")
    node = addnodes.pending_xref("", reftarget=target, reftype="func")
    node["py:module"] = module
    node.source = source
    return node


def test_only_a_reference_to_no_name_is_an_error():
    """Existing names without a page show unlinked; a name that exists nowhere fails."""
    py = SimpleNamespace(name="py")
    source = f"{ROOT}/dmondrian/plans/fitted.py:docstring of dmondrian.plans.fitted.fit_plan"
    check = api_pages._outside_the_reference
    assert check(None, py, _reference("fit_trim", "dmondrian.plans", source))
    assert check(None, py, _reference(".tree", "dmondrian.plans", source))
    assert check(None, py, _reference("pandas.DataFrame", "dmondrian.plans", source))
    assert check(None, py, _reference("fit_trimm", "dmondrian.plans", source)) is None
    assert check(None, py, _reference("dmondrian.plans.nothing", "dmondrian", source)) is None


def test_readme_links_into_the_docs():
    """README, the front door, links to every guide page; its local links resolve."""
    readme = (ROOT / "README.md").read_text()
    for page in (DOCS / "guide").glob("*.md"):
        if page.stem != "index":
            assert f"(docs/guide/{page.name})" in readme, f"README does not link {page.name}"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README links to a missing {target}"
