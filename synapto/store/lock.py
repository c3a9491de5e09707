"""One writer per run file: an exclusive lock held for the whole life of a run.

A run (``evolve``, ``evolve --resume``, ``ppo``, ``ppo --resume``) takes
:class:`RunLock` on ``RUN.h5.lock``, a file beside its run file, *before* it creates,
rebuilds or writes anything, and keeps it until it stops.  The lock is an
``fcntl.flock`` on that file: the kernel releases it when the process dies (``kill -9``
included), so a crashed run never leaves a stale lock behind -- only, at worst, the
empty ``.lock`` file, which the next run reuses.  A second process asking for the lock
gets a one-line :class:`~synapto.errors.UsageError` (exit code 2) and has touched
nothing.

Releasing unlinks the lock file while still holding the lock; an acquirer checks
after locking that the path still names the file it locked (else it retries), so two
processes can never both believe they hold it.

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

from synapto.errors import UsageError

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
    return UsageError(f"{str(run_path)!r} is in use by another synapto run{_holder(lock)}: it holds "
                      f"{str(lock)!r}; wait for it to end (or stop it) and try again")


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

    def acquire(self) -> "RunLock":
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise UsageError(f"{str(self.run_path)!r}: cannot create its lock file {str(self.path)!r} "
                                 f"({exc.strerror})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise _in_use(self.run_path, self.path) from None
            except OSError as exc:
                if exc.errno in _NO_FLOCK:
                    os.close(fd)
                    self.path.unlink(missing_ok=True)
                    sys.stderr.write(f"warning: {str(self.path)!r}: this file system does not support file "
                                     f"locks ({exc.strerror}); nothing stops a second run on the same file\n")
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

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
