"""Links between the repository's Markdown files, pointed at the site's pages.

``docs/design.md`` and ``benchmarks/README.md`` link to each other by their
paths in the repository, as GitHub shows them. On the site those files are
pages (``design``, ``benchmarks``), so a link to one is rewritten to the
page, anchor kept, in every page read and every file included.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

# Repository path -> the page that shows it (relative to docs/).
PAGES = {"docs/design.md": "design.md", "benchmarks/README.md": "benchmarks.md"}
_LINK = re.compile(r"\]\(([^)#\s]+\.md)(#[^)\s]*)?\)")


def rewrite(text: str, repo_path: str, docname: str) -> str:
    """Point ``[..](path.md#anchor)`` links of ``repo_path`` at the pages they show."""
    folder = posixpath.dirname(repo_path)
    page_folder = posixpath.dirname(docname)

    def replace(match):
        target = posixpath.normpath(posixpath.join(folder, match.group(1)))
        page = PAGES.get(target)
        if page is None:
            return match.group(0)
        return f"]({posixpath.relpath(page, page_folder or '.')}{match.group(2) or ''})"

    return _LINK.sub(replace, text)


def _on_source(app, docname, source):
    path = Path(app.env.doc2path(docname))
    repo_path = path.relative_to(Path(app.srcdir).parent).as_posix()
    source[0] = rewrite(source[0], repo_path, docname)


def _on_include(app, relative_path, parent_docname, content):
    path = (Path(app.srcdir) / relative_path).resolve()
    repo_path = path.relative_to(Path(app.srcdir).parent.resolve()).as_posix()
    content[0] = rewrite(content[0], repo_path, parent_docname)


def setup(app):
    app.connect("source-read", _on_source)
    app.connect("include-read", _on_include)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
