"""One writer per run file: an exclusive lock held for the whole life of a run.

A run (``evolve``, ``evolve --resume``, ``ppo``, ``ppo --resume``) takes
:class:`RunLock` on ``RUN.h5.lock``, a file beside its run file, *before* it creates,
rebuilds or writes anything, and keeps it until it stops.  The lock is an
``fcntl.flock`` on that file: the kernel releases it when the process dies (``kill -9``
included), so a crashed run never leaves a stale lock behind -- only, at worst, the
empty ``.lock`` file, which the next run reuses.  A second process asking for the lock
gets a one-line :class:`~synapto.common.errors.UsageError` (exit code 2) and has touched
nothing.

Releasing unlinks the lock file while still holding the lock; an acquirer checks
after locking that the path still names the file it locked (else it retries), so two
processes can never both believe they hold it.

:func:`check_output_path` and :func:`check_writable` are the ``--out`` / ``--resume``
checks made before a run starts (including that no run holds the file).

On a file system without ``flock`` (e.g. a Lustre mount without ``-o flock``) the run
goes on unprotected, with a one-line warning.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import sys
from pathlib import Path

from synapto.common.errors import UsageError, option, option_set, option_value
from synapto.common.folders import check_out_dir

#: errno values of a file system that does not implement flock
_NO_FLOCK = {errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK, errno.EINVAL}


def lock_path(run_path: str | Path) -> Path:
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + ".lock")


def _holder(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return f" ({text})" if text else ""


def _in_use(run_path: Path, lock: Path) -> UsageError:
    return UsageError(
        f"{str(run_path)!r} is in use by another synapto run{_holder(lock)}: it holds "
        f"{str(lock)!r}; wait for it to end (or stop it) and try again"
    )


def check_not_in_use(run_path: str | Path) -> None:
    """Refuse (one line) if a run holds the lock of ``run_path`` now; creates nothing.

    Only an early courtesy check (before processes start): the run itself takes the
    lock with :class:`RunLock`."""
    run_path = Path(run_path)
    lock = lock_path(run_path)
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # no lock file: nobody holds it (or it cannot be read: the run will say)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(run_path, lock) from None
    except OSError:
        return
    finally:
        os.close(fd)


class RunLock:
    """The exclusive lock of one run file (see the module docstring); a context manager."""

    def __init__(self, run_path: str | Path):
        self.run_path = Path(run_path)
        self.path = lock_path(self.run_path)
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"{str(self.run_path)!r}: cannot create its folder {str(self.path.parent)!r} ({exc.strerror})"
            ) from None
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise UsageError(
                    f"{str(self.run_path)!r}: cannot create its lock file {str(self.path)!r} ({exc.strerror})"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise _in_use(self.run_path, self.path) from None
            except OSError as exc:
                if exc.errno in _NO_FLOCK:
                    os.close(fd)
                    self.path.unlink(missing_ok=True)
                    sys.stderr.write(
                        f"warning: {str(self.path)!r}: this file system does not support file "
                        f"locks ({exc.strerror}); nothing stops a second run on the same file\n"
                    )
                    return self
                os.close(fd)
                raise
            # The previous holder may have unlinked the file between our open and our lock.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self.fd = fd
        try:  # who holds it, for the message of a refused second run (best effort: a full disk may refuse)
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        except OSError:
            pass
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


# ----------------------------------------------------------------------------- checks made before a run starts
def check_output_path(path: str | Path, force: bool) -> Path:
    """Refuse to overwrite without ``force`` or a file a run is writing; check the directory
    is writable."""
    p = Path(path)
    if p.exists() and p.is_dir():
        raise UsageError(f"{option_value('out', str(p))} is a directory, expected a .h5 file path")
    if p.exists() and not p.is_file():  # a device, a pipe, a socket: never replaced, --force or not
        raise UsageError(f"{option_value('out', str(p))} is not a regular file")
    if p.exists() and not force:
        raise UsageError(f"{option_value('out', str(p))} exists; pass {option_set('force')} to overwrite it")

    # checked, not made: the run makes its folder when it starts (RunLock.acquire)
    check_out_dir(p.parent if str(p.parent) else Path("."), option("out"))
    check_not_in_use(p)
    return p


def check_writable(path: str | Path, option: str = "--resume") -> None:
    """Refuse (one line) to continue a run whose file or folder cannot be written: a
    read-only file system, a folder without write permission, a file without write bits."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not os.access(parent, os.W_OK | os.X_OK):
        why = "a read-only file system" if _read_only_fs(parent) else "not writable"
        raise UsageError(
            f"{option} {str(p)!r}: its folder {str(parent)!r} is {why}; "
            f"the run file and its checkpoint are rewritten there"
        )
    try:
        mode = p.stat().st_mode
    except OSError:
        return
    if not mode & 0o222:
        raise UsageError(
            f"{option} {str(p)!r} is read-only (mode {mode & 0o777:o}); make it writable (chmod u+w) to continue it"
        )
    check_not_in_use(p)


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
