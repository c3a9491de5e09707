"""Replacing a file whole: built beside its final path, fsync-ed, then ``os.replace``-d
over it, so that a crash at any instant leaves the old file or the new one, whole.

- :func:`replace_file`: how every run file and checkpoint comes into being;
- :func:`rewrite`: replace a run file by one built from it (on resume, and when an
  evolution run file outgrows its rows), reopened for appending.

The files themselves are made by :mod:`synapto.store.files`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from synapto.store.files import open_append, trim, writing


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_file(path: Path, build: Callable[[Path], None], tmp_suffix: str, what: str) -> None:
    """Build ``path`` as ``path + tmp_suffix`` (``build(tmp)`` creates and closes it), fsync
    it, then ``os.replace`` it over ``path``: a crash at any instant leaves the old file
    or the new one, whole.  If anything fails (a full disk: :class:`DiskFullError`) the
    temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    tmp = path.with_name(path.name + tmp_suffix)
    try:
        with writing(path, what):
            build(tmp)
            trim(tmp)
            fsync(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    fsync_dir(path.parent if str(path.parent) else Path("."))


def rewrite(path: Path, write: Callable[[Path], None], what: str = "rebuilding it to resume"):
    """Replace the run file ``path`` by the file ``write(tmp)`` creates (and closes) beside it
    (:func:`replace_file`), and return it reopened for appending (:func:`open_append`).
    Both resumes (evolution and PPO) rebuild their run file this way, from its first
    completed rows, and so does a run that outgrows its rows (``what`` says which)."""
    replace_file(path, write, ".resume.tmp", what)
    return open_append(path)
