"""Sphinx configuration: the user guide, the design, the benchmarks and the API reference.

Built with ``python -m sphinx -W -b html docs docs/_build/html`` (warnings are
errors). The API pages are generated at build time from each public module's
``__all__`` (:mod:`api_pages`), so a public name added to a module gets its
page without editing anything here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")

import dmondrian  # noqa: E402

project = "dmondrian"
author = "dmondrian developers"
copyright = "dmondrian developers"
release = dmondrian.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
    "api_pages",
    "repo_links",
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# Markdown: GitHub-style heading anchors, so design.md's and the benchmarks'
# links to their own sections work on the site as on GitHub.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# The notebook is committed with its outputs and re-executed by
# tests/test_examples.py: the build only renders it.
nb_execution_mode = "off"

# API reference: numpydoc renders the sections; autosummary writes a page per
# name (api_pages lists the names from __all__).
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
autodoc_default_options = {"member-order": "bysource"}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# A reference to a name that exists nowhere fails the build. Names that exist
# but have no page (internal modules and their names, which docstrings name
# for developers, and other libraries': no inventory is fetched, so the build
# works offline) are shown as code, unlinked (api_pages).
nitpicky = True

html_theme = "pydata_sphinx_theme"
html_title = f"dmondrian {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
}
html_sidebars = {"index": [], "getting-started": [], "design": [], "benchmarks": []}
html_show_sourcelink = False


def _copy_notebook(app, config):
    # The notebook lives in examples/ (where it runs); the site shows a copy.
    source = ROOT / "examples" / "notebook.ipynb"
    target = DOCS / "examples" / "notebook.ipynb"
    target.parent.mkdir(exist_ok=True)
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        target.write_bytes(source.read_bytes())


def setup(app):
    app.connect("config-inited", _copy_notebook)
