"""What synapto says: the ``synapto`` logger, its console handler, and ``-v`` / ``-q``.

Commands log through :func:`say` (``info``, or ``warning`` for a line that starts
with ``warning:``); the handler writes plain lines to the *current* ``sys.stdout``
(so a redirected stdout, a live progress bar and pytest's capture all see them).
``-q`` keeps warnings and errors only, ``-v`` adds debug lines (per-generation
timings, the full configuration).  The library itself never configures logging: its
functions take a ``log`` callable, and :func:`say` is the one the commands pass.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("synapto")


class _CurrentStdout(logging.StreamHandler):
    """A handler writing to whatever ``sys.stdout`` is at the time of the record."""

    def __init__(self):
        super().__init__(sys.stdout)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)
        self.flush()


def setup(verbosity: int = 0) -> None:
    """``verbosity`` -1 (``-q``: warnings and errors), 0 (default), 1 (``-v``: debug too)."""
    if not any(isinstance(h, _CurrentStdout) for h in logger.handlers):
        handler = _CurrentStdout()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel({-1: logging.WARNING, 0: logging.INFO}.get(max(-1, min(1, verbosity)), logging.DEBUG))


def say(msg: str) -> None:
    """Log one message of a command (a ``warning: ...`` line at warning level)."""
    if not logger.handlers:
        setup(0)
    (logger.warning if msg.startswith("warning:") else logger.info)(msg)


def debug(msg: str) -> None:
    if not logger.handlers:
        setup(0)
    logger.debug(msg)
