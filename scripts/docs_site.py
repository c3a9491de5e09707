"""How the documentation site (mkdocs.yml, ``make docs``) reads the repository's own text.

Two pieces, both loaded by mkdocs.yml:

- an MkDocs hook (``hooks:``): the site's home page is README.md, its links to ``docs/X``
  rewritten to ``X`` (README.md links into docs/ as the repository shows it; the site's pages
  live in docs/), so that the front page is written once;
- a Griffe extension (:class:`SphinxText`, the API reference's ``extensions:``): the
  docstrings' Sphinx roles (``:class:`~synapto.api.AskTell```) become code spans, a
  paragraph's closing ``::`` (the indented block after it is already a code block) a colon,
  and an attribute's ``#:`` comment (on its line, or on the lines just above it) becomes its
  docstring, as Sphinx reads them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from griffe import Docstring, Extension, Object

ROOT = Path(__file__).resolve().parents[1]

#: ``:role:`target``` (roles of the Python domain); ``~`` shows the last name only
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
#: a ``#:`` comment, on an attribute's line or on its own line
DOC_COMMENT = re.compile(r"#:\s?(.*)$")


def sphinx_to_markdown(text: str) -> str:
    """Every Sphinx role as a code span (``:class:`~a.b.C``` -> ```C```, ``:mod:`.prune``` ->
    ```.prune```), and a line's closing ``::`` as ``:`` (a lone `` ::`` goes)."""

    def code(match: re.Match) -> str:
        tilde, target = match.groups()
        return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"

    text = ROLE.sub(code, text)
    text = re.sub(r"\s+::$", "", text, flags=re.M)
    return re.sub(r"::$", ":", text, flags=re.M)


def comment_doc(lines: list[str], lineno: int) -> str | None:
    """The ``#:`` documentation of the statement on line ``lineno`` (1-based) of ``lines``: its
    own line's trailing comment, else the ``#:`` lines right above it; None if neither."""
    own = DOC_COMMENT.search(lines[lineno - 1])
    if own is not None and "#:" not in lines[lineno - 1].split("#:", 1)[0]:
        return own.group(1).strip()
    above: list[str] = []
    k = lineno - 2
    while k >= 0 and lines[k].lstrip().startswith("#:"):
        above.insert(0, DOC_COMMENT.search(lines[k]).group(1).strip())  # type: ignore[union-attr]
        k -= 1
    return " ".join(above) if above else None


class SphinxText(Extension):
    """Docstrings as Sphinx reads them (see the module docstring)."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.is_attribute and obj.docstring is None and obj.lineno is not None:
            try:
                lines = obj.lines_collection[obj.filepath]  # type: ignore[index]
            except (KeyError, ValueError, TypeError):
                lines = []
            text = comment_doc(lines, obj.lineno) if lines else None
            if text:
                obj.docstring = Docstring(text, lineno=obj.lineno, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = sphinx_to_markdown(obj.docstring.value)


# -- the MkDocs hook -----------------------------------------------------------------------
def front_page() -> str:
    """README.md as the site's index page: links into docs/ made relative to docs/."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/", "](", text)


def on_files(files, config, **kwargs):
    """Add README.md as the site's home page (index.md)."""
    from mkdocs.structure.files import File

    if files.get_file_from_path("index.md") is not None:
        raise RuntimeError("docs/index.md would hide README.md: the site's home page is README.md")
    files.append(File.generated(config, "index.md", content=front_page()))
    return files
