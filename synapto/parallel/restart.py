"""Starting a relaunched job again after a lost rank (``evolve --workers N --restarts K``).

At many ranks for hours a node or a process will die, and MPI then ends the whole job.
The parent of a relaunched job (:mod:`synapto.parallel.supervise`) tells a lost rank from
a job that ended on its own terms:

* **lost**: the job ended without rank 0's exit code, no signal reached it (neither the
  parent nor the coordinator got one), and no rank ended on an exception of its own.  A
  rank killed outright (SIGKILL, the kernel's OOM killer), one that died of a fatal signal
  (a segfault in an env's C code), a node that went away -- the coordinator included;
* **not lost**: anything rank 0 ended with an exit code of its own -- a finished run, bad
  input (2), an evaluation that raised under ``--on-error abort`` (1), a full disk, a stop
  after SIGTERM / SIGINT (143 / 130) --, any signal sent to the job, and a traceback (a
  bug: the same command would meet it again).

After a lost rank, while restarts are left, the parent starts the same command line again
as a new MPI job with :data:`RESTART` set to the restart's number, the budget and the run
files the job had begun (rank 0's ``run`` lines).  The evolve command continues each of
those from its checkpoint, as ``--resume`` does, so that the finished run file is
bit-identical to an uninterrupted one (:mod:`synapto.evolution.restarts`).

Which rank died: one that reported a fatal signal through faulthandler is named with it;
otherwise the parent watches the ranks of this host (a pidfd each) and names the first that
ended -- several when they were first seen gone at once.  A rank killed with SIGKILL cannot
say by what; a rank on another host is not watched.

This module imports nothing of synapto beyond the package itself: the parent stays small.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import time

#: the variable of a job started again (also listed in :data:`synapto.parallel.launch.MPI_ENV`)
RESTART = "SYNAPTO_RESTART"
#: seconds the ranks of a lost job get to end before the next job starts (they hold the run's lock)
SETTLE = 10.0


def is_lost(received: list[int], recorded: list[int], rank0: int | None, crashed: list[int]) -> bool:
    """Whether the job ended because a rank was lost (see the module docstring)."""
    return rank0 is None and not received and not recorded and not crashed


def restart_env(number: int, budget: int, runs: list[str]) -> dict[str, str]:
    """The environment of restart ``number`` of ``budget``, whose job had begun ``runs``."""
    return {RESTART: json.dumps({"restart": number, "of": budget, "runs": runs})}


def current() -> dict | None:
    """In a job started again: ``{"restart": k, "of": K, "runs": [...]}``; None otherwise."""
    text = os.environ.get(RESTART)
    if not text:
        return None
    try:
        found = json.loads(text)
        return {"restart": int(found["restart"]), "of": int(found["of"]), "runs": [str(r) for r in found["runs"]]}
    except (ValueError, KeyError, TypeError):
        return None


class Watch:
    """The ranks of this host, one pidfd each: which ended first, and waiting for all to end."""

    def __init__(self):
        self.fds: dict[int, tuple[int, int]] = {}  #: pidfd -> (rank, pid)
        self.seen: set[int] = set()
        self.first: list[tuple[int, int]] = []  #: (rank, pid) of the ranks first seen gone

    def add(self, pids: dict[int, int]) -> None:
        gone = []
        for rank, pid in pids.items():
            if pid in self.seen:
                continue
            self.seen.add(pid)
            try:
                self.fds[os.pidfd_open(pid)] = (rank, pid)
            except ProcessLookupError:
                gone.append((rank, pid))
            except (OSError, AttributeError):  # no pidfds here: the rank is not watched
                pass
        self._ended(gone)

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, waking when a watched rank ends."""
        if not self.fds:
            time.sleep(timeout)
            return
        ready, _, _ = select.select(list(self.fds), [], [], timeout)
        self._ended([self.fds[fd] for fd in ready])
        for fd in ready:
            os.close(fd)
            del self.fds[fd]

    def _ended(self, ranks: list[tuple[int, int]]) -> None:
        if ranks and not self.first:
            self.first = sorted(ranks)

    def settle(self, wait: float = SETTLE) -> None:
        """Wait for every watched rank to end (at most ``wait`` seconds), then kill the rest."""
        deadline = time.monotonic() + wait
        while self.fds and time.monotonic() < deadline:
            self.wait(min(0.1, max(deadline - time.monotonic(), 0.0)))
        for _, pid in self.fds.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.close()

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def role(rank: int) -> str:
    return "the coordinator (rank 0)" if rank == 0 else f"worker rank {rank}"


def who_ended(first: list[tuple[int, int]], rc: int) -> str:
    """What died, when no rank reported it: the ranks of this host first seen gone, else
    what little is known."""
    host = socket.gethostname()
    if len(first) == 1:
        rank, pid = first[0]
        return f"{role(rank)} (pid {pid}) on {host} ended without a report (killed, by SIGKILL or the OOM killer say)"
    if first:
        ranks = ", ".join(str(r) for r, _ in first)
        pids = ", ".join(str(p) for _, p in first)
        return f"ranks {ranks} (pids {pids}) on {host} ended at once, without a report (killed)"
    return f"a rank was lost without a report (on another host, or mpiexec itself; mpiexec exit {rc})"
