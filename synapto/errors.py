"""Errors that reach the user as one line and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: printed as ``error: <message>``, exit code 2."""


class RunFileError(UsageError):
    """A file that is missing, unreadable, or not a (compatible) synapto run."""
