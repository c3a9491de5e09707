"""Primitives of synapto's HDF5 files: the one module that imports h5py.

- :func:`new_file`: create a run file with the root attributes every run file has;
- :func:`open_run`: open a run file for reading, validated (a one-line
  :class:`~synapto.errors.RunFileError` for anything that is not a readable run);
- :func:`open_append`: reopen a run file for appending, in HDF5's single-writer /
  multiple-reader (SWMR) mode;
- :func:`rewrite`: replace a file by one built beside it (from a prefix of the old
  one, on resume), fsync-ed and ``os.replace``-d over it;
- :func:`check_output_path`: the ``--out`` checks made before a run starts.

h5py is imported on first use (:func:`h5py`), so that importing synapto stays cheap.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from synapto.errors import RunFileError, UsageError

FORMAT = "synapto-run"
#: the format written; version 1 files (before strategies, observation normalisation and the
#: final selection) read as runs of the ga strategy
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)


def h5py():
    """The h5py module (imported here only)."""
    import h5py as _h5py

    return _h5py


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("synapto", "numpy", "gymnasium", "h5py", "mpi4py", "box2d"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def check_output_path(path: str | Path, force: bool) -> Path:
    """Refuse to overwrite without ``force``; check the directory is writable."""
    p = Path(path)
    if p.exists() and not force:
        raise UsageError(f"--out {str(p)!r} exists; pass --force to overwrite it")
    if p.exists() and p.is_dir():
        raise UsageError(f"--out {str(p)!r} is a directory, expected a .h5 file path")
    parent = p.parent if str(p.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {str(p)!r}: cannot create directory {str(parent)!r} ({exc.strerror})") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {str(p)!r}: directory {str(parent)!r} is not writable")
    return p


def open_run(path: str | Path, kind: str | None = None):
    """Open a run file for reading; one-line :class:`RunFileError` if it is not one."""
    h5 = h5py()
    p = Path(path)
    if not p.exists():
        raise RunFileError(f"{str(p)!r}: no such file")
    if p.is_dir():
        raise RunFileError(f"{str(p)!r} is a directory, expected a synapto run file (.h5)")
    try:
        f = h5.File(p, "r", swmr=True, locking=False)
    except OSError:
        try:
            f = h5.File(p, "r", locking=False)
        except OSError as exc:
            raise RunFileError(f"{str(p)!r} is not a readable HDF5 file (truncated or corrupted?): "
                               f"{str(exc).splitlines()[0]}") from None
    try:
        fmt = f.attrs.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode()
        if fmt != FORMAT:
            raise RunFileError(f"{str(p)!r} is an HDF5 file but not a synapto run")
        ver = int(f.attrs.get("format_version", -1))
        if ver not in READABLE_VERSIONS:
            raise RunFileError(
                f"{str(p)!r} has run-file format version {ver}; this synapto reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))}"
            )
        if kind is not None and f.attrs.get("kind") != kind:
            raise RunFileError(f"{str(p)!r} is a {f.attrs.get('kind')!r} run, expected a {kind!r} run")
        if "completed" not in f:
            raise RunFileError(f"{str(p)!r} is truncated or corrupted (no /completed counter)")
        f["completed"][0]
    except RunFileError:
        f.close()
        raise
    except Exception as exc:  # corrupted internals
        f.close()
        raise RunFileError(f"{str(p)!r} is truncated or corrupted ({exc})") from None
    return f


def new_file(path: Path, kind: str, config_json: str, extra_attrs: Mapping | None = None):
    """Create an empty run file with the common root attributes (not yet in SWMR mode:
    the caller creates its datasets, then switches)."""
    f = h5py().File(path, "w", libver="latest", locking=False)
    f.attrs["format"] = FORMAT
    f.attrs["format_version"] = FORMAT_VERSION
    f.attrs["kind"] = kind
    f.attrs["config"] = config_json
    f.attrs["versions"] = json.dumps(package_versions(), sort_keys=True)
    f.attrs["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for k, v in (extra_attrs or {}).items():
        f.attrs[k] = v
    f.create_dataset("completed", data=np.zeros(1, dtype=np.int64))
    return f


def open_append(path: Path):
    """Reopen an existing run file for appending, in SWMR mode."""
    f = h5py().File(path, "r+", libver="latest", locking=False)
    f.swmr_mode = True
    return f


def put_row(f, name: str, i: int, value) -> None:
    """Write row ``i`` of the growing dataset ``name``, extending it if needed."""
    ds = f[name]
    if ds.shape[0] < i + 1:
        ds.resize(i + 1, axis=0)
    ds[i] = value


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rewrite(path: Path, write: Callable[[Path], None]):
    """Replace the run file ``path`` by the file ``write(tmp)`` creates (and closes) beside it.

    The new file is fsync-ed, then ``os.replace``-d over ``path``: a crash at any
    instant leaves the old file or the new one, whole.  If ``write`` raises, ``path``
    is untouched and the temporary file removed.  Returns ``path`` reopened for
    appending (:func:`open_append`).  Both resumes (evolution and PPO) rebuild their
    run file this way, from its first completed rows.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".resume.tmp")
    try:
        write(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync(tmp)
    os.replace(tmp, path)
    return open_append(path)
