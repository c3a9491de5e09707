"""How the docs site reads the repository's text (scripts/docs_site.py): README.md as its home
page with working links, Sphinx roles and ``#:`` comments as Markdown docstrings."""

from __future__ import annotations

import os
import re
import sys

import pytest
from conftest import ROOT

if os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test`: the docs extra is installed, its absence an error
    import griffe  # noqa: F401
else:
    pytest.importorskip("griffe")

sys.path.insert(0, str(ROOT / "scripts"))
import docs_site


def test_the_home_page_is_the_readme_with_links_into_the_site():
    page = docs_site.front_page()
    assert page.startswith("# synapto\n") and "](docs/" not in page
    for target in re.findall(r"\]\(([^)#\s]+)", page):
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / "docs" / target).exists(), target


def test_sphinx_roles_become_code_and_literal_markers_colons():
    text = (
        "Use :class:`~synapto.api.AskTell` or :func:`synapto.evolve` (:mod:`.prune`), in three calls::\n\n    x = 1\n"
    )
    assert (
        docs_site.sphinx_to_markdown(text)
        == "Use `AskTell` or `synapto.evolve` (`.prune`), in three calls:\n\n    x = 1\n"
    )
    assert docs_site.sphinx_to_markdown("as follows ::\n") == "as follows\n"


def test_an_attributes_hash_colon_comment_is_its_doc():
    lines = [
        "class C:",
        "    a: int = 1  #: the first",
        "    #: the second, said",
        "    #: on two lines",
        "    b: int = 2",
        "    c: int = 3  # a plain comment",
        "    d: str = '#: inside a string'",
    ]
    assert docs_site.comment_doc(lines, 2) == "the first"
    assert docs_site.comment_doc(lines, 5) == "the second, said on two lines"
    assert docs_site.comment_doc(lines, 6) is None
