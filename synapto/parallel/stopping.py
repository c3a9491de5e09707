"""Stopping on SIGTERM / SIGINT (Slurm preemption, Ctrl-C) on the coordinator.

The first signal only sets a flag: the run stops handing out work, finishes the
tasks in flight, makes sure the checkpoint of the last completed generation is on
disk, shuts the workers down and exits with 128 + signal (143 for SIGTERM, 130 for
SIGINT).  A second SIGINT exits at once: the checkpoint on disk is already safe
(it is replaced atomically).  Worker ranks ignore both signals and wait for the
coordinator's explicit STOP.

Under ``--workers`` (a relaunched job) a terminal's Ctrl-C reaches the job's parent
process, which forwards it to the ranks (:mod:`synapto.parallel.supervise`); the
coordinator records the signal for it, so that the parent exits 130 / 143 too.
"""

from __future__ import annotations

import os
import signal
import sys

from synapto.parallel.launch import record_signal


class StopSignals:
    """Installable handler; calling the object tells whether a stop was requested."""

    def __init__(self):
        self.signum: int | None = None

    def install(self) -> StopSignals:
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        record_signal(signum)
        if self.signum is not None:
            if signum == signal.SIGINT:
                sys.stderr.write("second interrupt: exiting now (the last checkpoint is safe)\n")
                sys.stderr.flush()
                os._exit(130)
            return
        self.signum = signum
        name = signal.Signals(signum).name
        sys.stderr.write(
            f"{name} received: finishing the tasks in flight, then saving the checkpoint "
            f"(press Ctrl-C again to exit at once)\n"
        )
        sys.stderr.flush()

    def __call__(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum or 0)


def ignore_in_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
