"""Where a study lives: its database, opened to tune (made safely when several processes
start together on a new file) or to read (``tune --report``, which never writes to it).

``--study FILE.db`` is SQLite through Optuna's RDB storage (``sqlite:///FILE.db``); any URL
Optuna accepts (``postgresql://...``, ``mysql://...``) is used as given.
"""

from __future__ import annotations

import fcntl
import inspect
import os
import sqlite3
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from synapto.common.errors import UsageError

#: the tables of an Optuna database (a file without them is not a study)
OPTUNA_TABLES = frozenset({"studies", "trials", "alembic_version"})


def is_url(study: str) -> bool:
    return "://" in study


def storage_url(study: str) -> str:
    """``--study``: a URL as given, else a SQLite file."""
    if is_url(study):
        return study
    return f"sqlite:///{Path(study).resolve()}"


def check_writable(study: str) -> None:
    """Refuse (one line) a SQLite study that cannot be written: tuning writes every trial into it."""
    if is_url(study):
        return
    path = Path(study).resolve()
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"--study {study!r}: folder {str(folder)!r} does not exist")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"--study {study!r} is read-only: tune writes its trials into it (copy it somewhere writable)")
    if not os.access(folder, os.W_OK):
        raise UsageError(
            f"--study {study!r}: folder {str(folder)!r} is read-only: SQLite writes its journal beside the study"
        )


@contextmanager
def creating(study: str) -> Iterator[None]:
    """Hold an exclusive lock on a SQLite study's folder while the database and the study are
    opened (made, for a new file): processes started together take turns, and each finds
    what the one before made.  A no-op for a URL (whose server serialises; see
    :func:`open_storage`'s retries)."""
    if is_url(study):
        yield
        return

    fd = os.open(Path(study).resolve().parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


#: what another process making the same tables at the same time makes Optuna raise
RACES = ("already exists", "UNIQUE constraint failed")


def open_storage(study: str, heartbeat: int = 60, callback=None):
    """Optuna's RDB storage of ``--study``, with heartbeats (and ``callback`` for a stale trial)."""
    import optuna
    from optuna.storages import RDBStorage

    stale = (
        "heartbeat_stale_trial_callback"
        if "heartbeat_stale_trial_callback" in inspect.signature(RDBStorage).parameters
        else "failed_trial_callback"
    )  # the name before Optuna 4.9
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    kwargs: dict[str, Any] = {stale: callback} if callback is not None else {}
    for attempt in range(8):
        try:
            return RDBStorage(storage_url(study), heartbeat_interval=heartbeat, grace_period=2 * heartbeat, **kwargs)
        except Exception as exc:  # a URL Optuna cannot open: a bad scheme, host or file
            if any(r in str(exc) for r in RACES) and attempt < 7:  # another process is making the same tables
                time.sleep(0.25 * (attempt + 1))
                continue
            raise UsageError(f"--study {study!r} cannot be opened as a study database ({_first_line(exc)})") from None
    raise AssertionError("unreachable")


def open_reader(study: str):
    """The storage of ``--report STUDY``, for reading: a SQLite file is opened read-only (and
    refused unless it holds Optuna's tables), so that it is left as it was, byte for byte."""
    if is_url(study):
        return open_storage(study)

    from optuna.storages import RDBStorage

    path = Path(study).resolve()
    uri = f"file:{quote(str(path))}?mode=ro"
    try:
        with sqlite3.connect(uri, uri=True) as con:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        raise UsageError(f"--report {study!r} is not a study database ({_first_line(exc)})") from None
    if not tables >= OPTUNA_TABLES:
        what = "no tables" if not tables else f"tables {', '.join(sorted(tables))}"
        raise UsageError(f"--report {study!r} is not a study database (it holds {what}, not Optuna's)")
    try:
        return RDBStorage(
            "sqlite://", engine_kwargs={"creator": lambda: sqlite3.connect(uri, uri=True, check_same_thread=False)}
        )
    except Exception as exc:  # a study of another Optuna version's schema
        raise UsageError(f"--report {study!r} cannot be read as a study database ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"
