"""Check that a README's text is still in the documentation: every heading, paragraph, list
item, table row and code line of OLD (a README of an earlier commit, or of a branch that edited
it) is somewhere in README.md or docs/**/*.md.

    git show 9ad73cf:README.md > /tmp/old.md
    python scripts/docs_moved.py /tmp/old.md          # exit 0: all found; 1: lists what is not

Text is compared with whitespace collapsed and link targets dropped (``[text](target)`` reads
as ``[text]``, since a section that moved into docs/ links to its neighbours by other paths);
a heading is found as a heading of any level.  A unit that was reworded on purpose is listed
too: say so where the change is made.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def normal(text: str) -> str:
    text = re.sub(r"(!?\[[^\]]*\])\([^)]*\)", r"\1", text)  # link and image targets
    return " ".join(text.split())


def units(markdown: str) -> list[str]:
    """Headings (without their #), paragraphs, list items, table rows and code lines."""
    out: list[str] = []
    para: list[str] = []
    fenced = False

    def flush():
        if para:
            out.append(" ".join(para))
            para.clear()

    for line in markdown.splitlines():
        if line.startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced or line.startswith("|"):
            if line.strip():
                out.append(line)
            continue
        if not line.strip() or line.startswith("#") or re.match(r"\s*([-*]|\d+\.) ", line):
            flush()
            if line.startswith("#"):
                out.append(line.lstrip("#"))
                continue
        if line.strip():
            para.append(line)
    flush()
    return [u for u in (normal(u) for u in out) if u]


def corpus(root: Path) -> str:
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return "\n".join(normal(p.read_text(encoding="utf-8")) for p in pages)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: python scripts/docs_moved.py OLD_README.md", file=sys.stderr)
        return 2
    old = Path(argv[0]).read_text(encoding="utf-8")
    text = corpus(ROOT)
    missing = [u for u in units(old) if u not in text]
    total = len(units(old))
    print(f"{total - len(missing)} of {total} units of {argv[0]} found in README.md and docs/")
    for u in missing:
        print(f"  not found: {u[:160]}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
