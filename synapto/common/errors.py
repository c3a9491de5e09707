"""Errors that reach the user as one line: exit code 2 (bad input), 1 (a full disk).

A setting is named the way the user gave it: the command line's flag (``--max-env-steps``)
while a command runs (:func:`command_line_names`, entered by :func:`synapto.cli.main`), the
field of the Python API (``max_env_steps``, ``env='Nope-v0'``) otherwise: :func:`option`,
:func:`option_value`, :func:`option_set`.
"""

from __future__ import annotations

import contextlib
import contextvars

_CLI_NAMES = contextvars.ContextVar("synapto_cli_names", default=False)


@contextlib.contextmanager
def command_line_names():
    """Within it, errors name settings by their command-line flags."""
    token = _CLI_NAMES.set(True)
    try:
        yield
    finally:
        _CLI_NAMES.reset(token)


def on_command_line() -> bool:
    """Whether a command of the command line is running (errors name flags)."""
    return _CLI_NAMES.get()


def option(field: str, flag: str | None = None) -> str:
    """``--max-env-steps`` on the command line, ``max_env_steps`` from Python (``flag``: a
    flag not spelt as its field, e.g. ``--env-option`` of ``env_options``)."""
    if _CLI_NAMES.get():
        return flag or "--" + field.replace("_", "-")
    return field


def option_value(field: str, value, flag: str | None = None) -> str:
    """A setting and its value: ``--env 'Nope-v0'`` on the command line, ``env='Nope-v0'`` from Python."""
    return f"{option(field, flag)} {value!r}" if _CLI_NAMES.get() else f"{field}={value!r}"


def option_set(field: str) -> str:
    """A flag given: ``--force`` on the command line, ``force=True`` from Python."""
    return option(field) if _CLI_NAMES.get() else f"{field}=True"


class UsageError(Exception):
    """Bad input from the user: printed as ``error: <message>``, exit code 2."""


class RunFileError(UsageError):
    """A file that is missing, unreadable, or not a (compatible) synapto run."""


class DiskFullError(Exception):
    """A write failed because the file system is full (or over quota): one line, exit code 1.

    ``path`` is the file that could not be written; whatever was on disk before is intact
    (temporary files are removed), so the run can be resumed once there is space."""

    def __init__(self, path, what: str = "writing"):
        self.path = str(path)
        self.resume: str | None = None  #: the command that continues the run, when there is one
        self.resumable = True  #: False when the run left nothing to resume (its file was never created)
        super().__init__(f"{self.path!r}: no space left on device ({what})")

    def report(self) -> str:
        """What the user reads: the error line, then the resume command (or that nothing was kept)."""
        if self.resume:
            return f"error: {self}; the last checkpoint is intact.\nresume with: {self.resume}\n"
        return f"error: {self}\n"


class TrackingError(UsageError):
    """A tracking file (``--live-log``, ``--tensorboard``) could not be written while the
    run went: one line, exit code 2.  The run stopped after the generation's rows and
    checkpoint were written, so ``resume`` (set by the command) continues it."""

    resume: str | None = None

    def report(self) -> str:
        tail = f"\nthe run file keeps its last checkpoint; resume with: {self.resume}" if self.resume else ""
        return f"error: {self}{tail}\n"
