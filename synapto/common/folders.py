"""Output folders checked before a command writes anything: :func:`check_out_dir`
refuses, in one line (:class:`~synapto.common.errors.UsageError`, exit code 2), a folder that a
command will write into at the end (``bench ... --out-dir``, a run file's folder, a
TensorBoard log) when it is a file, under a file, or cannot be written -- before the
command measures or runs anything.

It needs nothing of synapto but :mod:`synapto.common.errors`, so every layer may use it (the
run store's own checks included).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from synapto.common.errors import UsageError


def check_out_dir(path: str | Path, option: str = "--out-dir") -> Path:
    """An output folder written at the end of a long command: refuse now (one line) a path
    that is a file, or under a file, or in a folder that cannot be written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{option} {str(p)!r} exists and is not a folder")
    probe = p
    while not probe.exists():
        parent = probe.parent
        if parent == probe:
            break
        probe = parent
    if probe.exists() and not probe.is_dir():
        raise UsageError(f"{option} {str(p)!r}: {str(probe)!r} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        raise UsageError(
            f"{option} {str(p)!r}: {str(probe)!r} is {'on a read-only file system' if read_only else 'not writable'}"
        )
    _probe_folder(probe, f"{option} {str(p)!r}")
    return p


def _probe_folder(folder: Path, what: str) -> None:
    """Make and remove an empty folder in ``folder``: the permission bits say yes to root
    in /sys or /proc, where making anything fails; nothing is left behind."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".synapto-probe-", dir=folder))
    except OSError as exc:
        raise UsageError(f"{what}: nothing can be made in {str(folder)!r} ({exc.strerror})") from None
