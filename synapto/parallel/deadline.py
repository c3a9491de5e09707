"""Per-task time limits of the task farms (``--task-timeout``).

A worker arms an interval timer around each handler call (:class:`Deadline`); a task
that overruns it raises :class:`TaskTimeout` inside the handler and fails like one that
raised.  The coordinator retires a worker that stays silent :func:`grace` seconds past
the limit (see :mod:`synapto.parallel.coordinator`).
"""

from __future__ import annotations

import signal
import traceback


class TaskTimeout(BaseException):
    """Raised inside a task's handler when it runs past the farm's ``task_timeout``.

    A BaseException, like KeyboardInterrupt, so that a library's ``except Exception``
    inside the handler cannot swallow it."""


def grace(task_timeout: float) -> float:
    """Seconds past ``task_timeout`` before the coordinator retires a silent worker (the
    worker's own timer normally reports the overrun well within them)."""
    return max(2.0, 0.1 * task_timeout)


class Deadline:
    """An interval timer that raises :class:`TaskTimeout` in this (main) thread, armed
    around one handler call; a no-op without a timeout."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.armed = False
        if seconds:
            signal.signal(signal.SIGALRM, self._fire)

    def _fire(self, signum, frame) -> None:
        if self.armed:  # a timer firing after the handler returned is ignored
            self.armed = False
            raise TaskTimeout(f"task ran longer than the task timeout of {self.seconds:g} s")

    def __enter__(self):
        if self.seconds:
            self.armed = True
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc) -> None:
        if self.seconds:
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)


def run_task(handler, payload, deadline: Deadline, context=None):
    """``handler(payload)`` -- ``handler(payload, context)`` for a map with a shared
    context -- within ``deadline``; ``(value, None)`` or ``(None, (traceback, timed_out))``."""
    try:
        with deadline:
            return (handler(payload) if context is None else handler(payload, context)), None
    except TaskTimeout:
        return None, (traceback.format_exc(), True)
    except Exception:
        return None, (traceback.format_exc(), False)
