"""Errors that reach the user as one line: exit code 2 (bad input), 1 (a full disk)."""


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
