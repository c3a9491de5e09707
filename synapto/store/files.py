"""Primitives of synapto's HDF5 files: the one module that imports h5py.

- :func:`create_file`, :func:`rows_dataset`, :func:`fixed_dataset`: new files in the
  layout every run file and checkpoint uses (below);
- :func:`synapto.store.replace.replace_file`: build a file beside its final path, fsync
  it, then ``os.replace`` it there -- how every run file and checkpoint comes into being;
- :func:`open_run`: open a run file for reading, validated (a one-line
  :class:`~synapto.common.errors.RunFileError` for anything that is not a readable run);
- :func:`open_append`: reopen a run file for writing rows into it;
- :func:`synapto.store.replace.rewrite`: replace a run file by one built from it (on resume);
- :func:`writing`: turns a full disk into a one-line :class:`~synapto.common.errors.DiskFullError`.

**Crash safety without SWMR.**  A file is always created whole: built under a temporary
name, fsync-ed, then renamed over its final path.  It holds every dataset at its size
from the start (one chunk per generation or epoch, allocated and filled at creation;
an evolution run file has rows for its first 128 generations and is rewritten with
twice as many, beside it and renamed over it, when a run goes past them), so
appending a row only overwrites raw data in place: HDF5's metadata on
disk never changes after creation, and a process killed at any instant leaves a file
that every reader opens -- ``h5py.File(path, "r")``, h5dump, pandas --, with the rows
that ``/completed`` counts intact.  Files use HDF5's 1.8 superblock (version 2, with
checksummed metadata): unlike the version-3 superblock of SWMR files it keeps no
"open for write" flag that a killed writer would leave set.  Every dataset with data is
checksummed (the fletcher32 filter), so damaged data is refused when read instead of
being used; small counters are unfiltered and 16-byte aligned, so that an 8-byte write
of one is never torn.

h5py is imported on first use (:func:`h5py`), so that importing synapto stays cheap.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import platform
import re
import uuid
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from synapto.common.errors import DiskFullError, RunFileError, UsageError
from synapto.store.provenance import git_commit

FORMAT = "synapto-run"
#: the format written: 4 stores a centre strategy's generations as centre, step sizes and
#: noise keys (``/samples``) instead of its population; 3 is preallocated and checksummed,
#: with a run id; versions 1 and 2 (SWMR files; version 1 before strategies, observation
#: normalisation and the final selection, read as runs of the ga strategy) are read, and
#: resumed into the current version with the layout they have
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
#: library-version bounds of new files: the lower bound picks superblock version 2 (see above)
LIBVER = ("v108", "latest")
#: alignment of every allocation in a new file (an 8- or 12-byte write never straddles a page)
ALIGN = 16
#: largest chunk (bytes) of a per-row dataset; bigger rows are cut along their next axis
MAX_CHUNK = 64 << 20


def h5py():
    """The h5py module (imported here only)."""
    import h5py as _h5py

    return _h5py


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for key, pkg in (("synapto", "synapto-evo"), *((n, n) for n in ("numpy", "gymnasium", "h5py", "mpi4py", "box2d"))):
        try:
            out[key] = version(pkg)
        except PackageNotFoundError:
            pass
    commit = git_commit()
    if commit:
        out["git_commit"] = commit
    return out


# ----------------------------------------------------------------------------- errors
def errno_of(exc: BaseException) -> int | None:
    """The errno of an OSError, or the one HDF5 quotes in h5py's message ("errno = 28")."""
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    m = re.search(r"errno = (\d+)", str(exc))
    return int(m.group(1)) if m else None


def is_disk_full(exc: BaseException | None) -> bool:
    """``exc``, or an exception it was raised while handling (HDF5's close after a failed
    write raises errors of its own), failed on a full disk or quota."""
    seen = 0
    while exc is not None and seen < 10:
        if errno_of(exc) in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in str(exc):
            return True
        exc, seen = exc.__context__ or exc.__cause__, seen + 1
    return False


def close_quietly(f, discard: Path | None = None) -> None:
    """Close an HDF5 file after a failure; errors of the close itself are dropped.

    ``discard``: the file is being abandoned (a temporary file, removed next): it is
    emptied first, so that HDF5's last metadata writes find room even on a full disk."""
    if discard is not None:
        try:
            os.truncate(discard, 0)
        except OSError:
            pass
    try:
        f.close()
    except Exception:
        pass


@contextmanager
def writing(path: str | Path, what: str):
    """Turn a full disk into :class:`DiskFullError` naming ``path``, and a read-only file
    system or a permission denied into a one-line :class:`UsageError`."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        if is_disk_full(exc):
            raise DiskFullError(path, what) from None
        code = errno_of(exc)
        if code in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise UsageError(f"{str(path)!r}: cannot write it ({what}): {os.strerror(code)}") from None
        raise


@contextmanager
def filling(f, path: Path):
    """``f``, a new file at ``path``, to fill: closed after, or discarded if filling fails (:func:`close_quietly`)."""
    try:
        yield f
    except BaseException:
        close_quietly(f, discard=path)
        raise
    f.close()


# ----------------------------------------------------------------------------- reading
def _stored_eof(path: Path) -> int | None:
    """The end-of-file address a version-2/3 superblock at offset 0 records, or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(48)
    except OSError:
        return None
    if len(head) < 12 or head[:8] != b"\x89HDF\r\n\x1a\n" or head[8] not in (2, 3):
        return None
    size = head[9]
    if size not in (4, 8) or len(head) < 12 + 3 * size:
        return None
    return int.from_bytes(head[12 + 2 * size : 12 + 3 * size], "little")


def _open_read(p: Path):
    """``h5py.File(p, "r")`` -- HDF5's end-of-file check refuses a truncated file at once.

    A version-2 file (SWMR) whose writer was killed keeps its superblock's "open for
    write" flag, which a plain open refuses; it is opened in SWMR-read mode instead,
    after the end-of-file check that mode skips (a truncated file would hang there)."""
    h5, unreadable = h5py(), f"{str(p)!r} is not a readable HDF5 file (truncated or corrupted?)"
    try:
        return h5.File(p, "r", locking=False)
    except OSError as exc:
        first = str(exc).splitlines()[0]
        if "already open for write" not in first:
            raise RunFileError(f"{unreadable}: {first}") from None
    eof = _stored_eof(p)
    if eof is None or p.stat().st_size < eof:
        raise RunFileError(
            f"{str(p)!r} is truncated ({p.stat().st_size} bytes, its superblock says {eof if eof is not None else '?'})"
        ) from None
    try:
        return h5.File(p, "r", swmr=True, locking=False)
    except OSError as exc:
        raise RunFileError(f"{unreadable}: {str(exc).splitlines()[0]}") from None


def check_metadata(f, what: str) -> None:
    """Read every object header of ``f`` (HDF5 verifies their checksums): damaged metadata
    is refused here, in one line, rather than half-way through a command."""
    h5 = h5py()
    try:
        names: list[str] = []
        f.visit(names.append)
        for name in names:
            obj = f[name]
            if isinstance(obj, h5.Dataset):
                _ = obj.shape, obj.dtype  # reading them reads (and checks) the header
            list(obj.attrs.keys())
        list(f.attrs.keys())
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RunFileError(f"{what} is corrupted ({first})") from None


def open_run(path: str | Path, kind: str | None = None):
    """Open a run file for reading; one-line :class:`RunFileError` if it is not one."""
    p = Path(path)
    if not p.exists():
        raise RunFileError(f"{str(p)!r}: no such file")
    if p.is_dir():
        raise RunFileError(f"{str(p)!r} is a directory, expected a synapto run file (.h5)")
    f = _open_read(p)
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
        check_metadata(f, repr(str(p)))
        if "completed" not in f:
            raise RunFileError(f"{str(p)!r} is truncated or corrupted (no /completed counter)")
        done = int(f["completed"][0])
        if ver >= 3 and not 0 <= done <= _rows_of(f):
            raise RunFileError(f"{str(p)!r} is corrupted (/completed = {done})")
    except RunFileError:
        f.close()
        raise
    except Exception as exc:  # corrupted internals
        f.close()
        raise RunFileError(f"{str(p)!r} is truncated or corrupted ({exc})") from None
    return f


def _rows_of(f) -> int:
    """The generations (epochs) a version-3 file has room for: the rows of its /stats."""
    stats = f.get("stats")
    if stats is None or not len(stats):
        return 0
    return int(stats[next(iter(stats))].shape[0])


# ----------------------------------------------------------------------------- writing
def package_attrs(kind: str, config_json: str, run_id: str) -> dict:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "config": config_json,
        "versions": json.dumps(package_versions(), sort_keys=True),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "run_id": run_id,
    }


def new_run_id() -> str:
    """A run's identity: random (the OS's), never from the run's seeded streams."""
    return uuid.uuid4().hex


def create_file(path: Path, reserve: int = 0):
    """A new, empty HDF5 file in synapto's layout (superblock 2, aligned allocations).

    ``reserve``: bytes of disk allocated for it at once (:func:`reserve_space`), so that a
    full disk is met here, by the OS, and not half-way through HDF5's writes (after which
    HDF5 cannot even close the file cleanly); :func:`trim` gives back what was not used."""
    f = h5py().File(path, "w", libver=LIBVER, locking=False, alignment_threshold=1, alignment_interval=ALIGN)
    if reserve:
        try:
            reserve_space(path, reserve)
        except BaseException:
            close_quietly(f, discard=path)
            raise
    return f


def reserve_space(path: Path, nbytes: int) -> None:
    """Allocate the first ``nbytes`` of ``path`` on disk now (``posix_fallocate``; where the file
    system cannot, by writing zeros past the end).  A full disk raises ENOSPC here."""
    fd = os.open(path, os.O_WRONLY)
    try:
        try:
            os.posix_fallocate(fd, 0, nbytes)
            return
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise
        pos, block = os.fstat(fd).st_size, b"\0" * (1 << 20)
        while pos < nbytes:
            pos += os.pwrite(fd, block[: min(len(block), nbytes - pos)], pos)
    finally:
        os.close(fd)


def trim(path: Path) -> None:
    """Cut ``path`` back to the end its superblock records (what :func:`reserve_space`
    allocated beyond it)."""
    eof = _stored_eof(path)
    if eof and os.path.getsize(path) > eof:
        os.truncate(path, eof)


def _btree_node(rank: int) -> int:
    """Bytes of one version-1 B-tree node indexing the chunks of a rank-``rank`` dataset
    (64 entries, each key holding rank + 1 offsets)."""
    return 24 + 64 * 8 + 65 * (8 + 8 * (rank + 1))


def estimate_size(
    rows: list[tuple[int, tuple[int, ...], DTypeLike]], fixed: list[tuple[tuple[int, ...], DTypeLike]]
) -> int:
    """The bytes of a file in this layout holding the per-row datasets ``rows`` (``(rows, tail,
    dtype)``, see :func:`rows_dataset`) and the ``fixed`` ones (``(shape, dtype)``): raw data, a
    checksum and alignment per chunk, each dataset's chunk B-tree (one node up to 64 chunks,
    then about one per 48) and object header, the file's own metadata.  Measured files come
    out 0-20 % smaller; it is only used to reserve space (:func:`create_file`)."""
    total = 16 << 10
    shapes = [(n, tail, dtype, _chunks) for n, tail, dtype in rows]
    shapes += [(s[0] if s else 1, tuple(s[1:]), d, _fixed_chunks) for s, d in fixed]
    for n, tail, dtype, chunking in shapes:
        itemsize = np.dtype(dtype).itemsize
        shape = (n, *tail)
        size = int(np.prod(shape)) * itemsize
        if not size:
            total += 512
            continue
        chunk = chunking(shape, itemsize)
        n_chunks = int(np.prod([-(-a // b) for a, b in zip(shape, chunk)]))
        nodes = 1 if n_chunks <= 64 else -(-n_chunks // 48) + -(-n_chunks // 48**2)
        total += size + n_chunks * (4 + ALIGN) + nodes * _btree_node(len(shape)) + 768
    return int(total)


def write_image(path: Path, build: Callable) -> None:
    """Build an HDF5 file in memory (``build(f)`` fills it), then write its bytes to ``path``
    with plain writes: HDF5 never meets a full disk (the OS error comes from the write).
    For small files (checkpoints)."""
    f = h5py().File(
        f"synapto-image-{id(build)}",
        "w",
        driver="core",
        backing_store=False,
        libver=LIBVER,
        alignment_threshold=1,
        alignment_interval=ALIGN,
    )
    try:
        build(f)
        f.flush()
        image = f.id.get_file_image()
    finally:
        close_quietly(f)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(image)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def new_file(
    path: Path,
    kind: str,
    config_json: str,
    extra_attrs: Mapping | None = None,
    run_id: str | None = None,
    reserve: int = 0,
):
    """Create an empty run file with the common root attributes and ``/completed`` = 0;
    ``run_id`` None draws a new id ("" keeps none: a run begun in a format before ids);
    ``reserve``: see :func:`create_file`."""
    f = create_file(path, reserve)
    run_id = new_run_id() if run_id is None else run_id
    for k, v in {**package_attrs(kind, config_json, run_id), **(extra_attrs or {})}.items():
        f.attrs[k] = v
    f.create_dataset("completed", data=np.zeros(1, dtype=np.int64))
    return f


def layout_size(rows: list, fixed: list) -> int:
    """:func:`estimate_size` of ``(name, rows, tail, dtype)`` per-row and ``(name, data, checksum)`` fixed datasets."""
    return estimate_size([(n, t, d) for _, n, t, d in rows], [(np.shape(v), np.asarray(v).dtype) for _, v, _ in fixed])


def build_file(path: Path, kind: str, config_json: str, attrs: Mapping, layout: tuple, run_id=None, between=None):
    """:func:`new_file` holding the datasets of ``layout`` (``(rows, fixed)`` as :func:`layout_size`)
    at their final size, its space reserved first; ``between(f)`` runs after the per-row ones."""
    rows, fixed = layout
    f = new_file(Path(path), kind, config_json, attrs, run_id=run_id, reserve=layout_size(rows, fixed))
    try:
        for name, n, tail, dtype in rows:
            rows_dataset(f, name, n, tail, dtype)
        if between is not None:
            between(f)
        for name, data, checksum in fixed:
            fixed_dataset(f, name, data, checksum=checksum)
        f.flush()
    except BaseException:
        close_quietly(f, discard=Path(path))
        raise
    return f


def _early():
    h5 = h5py()
    dcpl = h5.h5p.create(h5.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5.h5d.ALLOC_TIME_EARLY)
    return dcpl


def _fill(dtype) -> object:
    dtype = np.dtype(dtype)
    return np.nan if dtype.kind == "f" else None


def _chunks(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """One row per chunk, cut along the following axes while bigger than MAX_CHUNK."""
    chunks = [1, *shape[1:]]
    for axis in range(1, len(chunks)):
        while int(np.prod(chunks)) * itemsize > MAX_CHUNK and chunks[axis] > 1:
            chunks[axis] = (chunks[axis] + 1) // 2
    return tuple(chunks)


def rows_dataset(f, name: str, rows: int, tail: tuple[int, ...], dtype):
    """``(rows, *tail)``: one chunk per row, checksummed, allocated and filled (NaN for
    floats) at creation; a row is written once, in place (:func:`put_row`)."""
    shape = (rows, *tail)
    if 0 in shape:
        return f.create_dataset(name, shape=shape, dtype=dtype)
    return f.create_dataset(
        name,
        shape=shape,
        dtype=dtype,
        chunks=_chunks(shape, np.dtype(dtype).itemsize),
        fletcher32=True,
        fillvalue=_fill(dtype),
        dcpl=_early(),
    )


def _fixed_chunks(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """As many whole rows per chunk as MAX_CHUNK holds (one chunk for most arrays); a row
    bigger than that is cut as :func:`_chunks` cuts it."""
    row = int(np.prod(shape[1:])) * itemsize
    if row > MAX_CHUNK:
        return _chunks(shape, itemsize)
    return (max(1, min(shape[0], MAX_CHUNK // max(row, 1))), *shape[1:])


def fixed_dataset(f, name: str, data, checksum: bool = True):
    """A dataset holding ``data``, written once and read whole; checksummed unless empty, 0-d
    or ``checksum=False`` (the counters, written in place by a single aligned 8-byte write).
    Its chunks hold many rows (:func:`_fixed_chunks`): a chunk per row of a (4096, 6)
    array made a checkpoint slow to build (HDF5's allocations grow with the chunk count)."""
    data = np.asarray(data)
    if not checksum or data.size == 0 or data.ndim == 0:
        return f.create_dataset(name, data=data)
    return f.create_dataset(name, data=data, chunks=_fixed_chunks(data.shape, data.dtype.itemsize), fletcher32=True)


def put_row(f, name: str, i: int, value, datasets: dict | None = None) -> None:
    """Write row ``i`` of the preallocated dataset ``name`` (in place).  ``datasets``: the
    file's datasets opened so far, by name (opening one costs as much as writing its row).

    A row of the dataset's own dtype is one hyperslab write: h5py's general indexing costs
    about four times as much, and a generation writes some 50 rows.  Another dtype is left
    to h5py (HDF5 converts it, as it always did)."""
    ds = None if datasets is None else datasets.get(name)
    if ds is None:
        ds = f[name]
        if datasets is not None:
            datasets[name] = ds
    shape = ds.shape
    if not 0 <= i < shape[0]:
        raise RuntimeError(f"row {i} is outside /{name}, which has {shape[0]} rows")
    row = np.asarray(value)
    if row.dtype != ds.dtype or row.shape not in (shape[1:], (1, *shape[1:])) or not row.size:
        ds[i] = value
        return
    space = ds.id.get_space()
    space.select_hyperslab((i,) + (0,) * (len(shape) - 1), (1, *shape[1:]))
    ds.id.write(h5py().h5s.create_simple((1, *shape[1:])), space, np.ascontiguousarray(row))


def open_append(path: Path):
    """Reopen a run file for writing rows into it (in place: its metadata never changes)."""
    return h5py().File(path, "r+", libver=LIBVER, locking=False, alignment_threshold=1, alignment_interval=ALIGN)
