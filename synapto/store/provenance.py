"""Which code wrote a run: the git commit of the synapto checkout, when it is one.

Recorded in every run file's ``versions`` attribute (``git_commit``), with ``+dirty``
when the checkout has changes that are not committed; an installed wheel (no
checkout) records none.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """``<40 hex digits>[+dirty]`` of the checkout holding this synapto, or None."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None

    def git(*args) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "synapto")
    return head + ("+dirty" if changed else "")
