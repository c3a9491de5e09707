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
otherwise the parent names the rank of this host that ended first (:class:`Watch`) -- several
when they were first seen gone at once.  A rank killed with SIGKILL cannot say by what; a
rank on another host is not watched.

This module imports nothing of synapto beyond the package itself: the parent stays small.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import time

#: the variable of a job started again (also listed in :data:`synapto.parallel.launch.MPI_ENV`)
RESTART = "SYNAPTO_RESTART"
#: seconds the ranks of a lost job get to end before the next job starts (rank 0 holds the run's lock)
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


def watch_address(status: str) -> str:
    """The abstract Unix socket (Linux) by which the ranks of the job whose status file is
    ``status`` let the parent see them end (:class:`Watch`)."""
    return "\0synapto-watch-" + hashlib.sha256(status.encode()).hexdigest()[:32]


class Watch:
    """The ranks of this host, one Unix-socket connection each (made by
    :func:`synapto.parallel.launch.announce`), held open for the rank's life.  The kernel
    closes a rank's connection as the rank ends, before anything else can notice it gone
    and end the other ranks, so the connections that close first name the rank that died
    -- several, when they were first seen closed at once."""

    def __init__(self, status: str):
        self.listener: socket.socket | None = None
        self.conns: dict[socket.socket, bytes] = {}  #: connection -> what its rank sent (its rank)
        self.first: list[int] = []  #: the ranks first seen gone
        try:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(watch_address(status))
            listener.listen(socket.SOMAXCONN)
            listener.setblocking(False)
            self.listener = listener
        except (OSError, AttributeError):  # no abstract sockets here: the ranks are not watched
            pass

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, waking when a rank connects, speaks or ends."""
        watched = [*([self.listener] if self.listener else []), *self.conns]
        if not watched:
            time.sleep(timeout)
            return
        ready, _, _ = select.select(watched, [], [], timeout)
        ended = []
        for conn in ready:
            if conn is self.listener:
                self._accept()
                continue
            try:
                data = conn.recv(64)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                self.conns[conn] += data
                continue
            rank = self._rank(self.conns.pop(conn))
            conn.close()
            if rank is not None:
                ended.append(rank)
        if ended and not self.first:
            self.first = sorted(ended)

    def _accept(self) -> None:
        while self.listener is not None:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, OSError):
                return
            conn.setblocking(False)
            self.conns[conn] = b""

    @staticmethod
    def _rank(said: bytes) -> int | None:
        text = said.decode(errors="replace").split("\n")[0].strip()
        return int(text) if text.isdigit() else None

    def settle(self, pids: dict[int, int], wait: float = SETTLE) -> None:
        """Wait for the ranks still connected to end (at most ``wait`` seconds), then kill
        those of ``pids`` (rank -> pid) that have not."""
        deadline = time.monotonic() + wait
        while self.conns and time.monotonic() < deadline:
            self.wait(min(0.1, max(deadline - time.monotonic(), 0.0)))
        for said in self.conns.values():
            rank = self._rank(said)
            if rank is not None and rank in pids:
                try:
                    os.kill(pids[rank], signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def close(self) -> None:
        for conn in [*self.conns, *([self.listener] if self.listener else [])]:
            conn.close()
        self.conns.clear()
        self.listener = None


def role(rank: int, pid: int | None = None) -> str:
    """``the coordinator (rank 0)``, ``worker rank 3 (pid 1234)``."""
    of = f", pid {pid}" if pid is not None else ""
    return f"the coordinator (rank 0{of})" if rank == 0 else f"worker rank {rank}" + (f" (pid {pid})" if of else "")


def who_ended(first: list[int], pids: dict[int, int], rc: int, elsewhere: int = 0) -> str:
    """What died, when no rank reported it: the ranks of this host first seen gone (``pids``:
    rank -> pid), else what little is known; ``elsewhere``: the job's ranks not watched (on
    other hosts), one of which may have died first."""
    host = socket.gethostname()
    if not first:
        return f"a rank was lost without a report (on another host, or mpiexec itself; mpiexec exit {rc})"
    if len(first) == 1:
        who = f"{role(first[0], pids.get(first[0]))} on {host} ended"
    else:
        who = (
            f"ranks {', '.join(f'{r} (pid {pids[r]})' if r in pids else str(r) for r in first)} on {host} ended at once"
        )
    if elsewhere > 0:
        return (
            f"{who} without a report, first of this host's ranks ({elsewhere} rank(s) on other hosts are not "
            f"watched: one of them may have died first)"
        )
    return f"{who} without a report (killed, by SIGKILL or the OOM killer say)"


def job_size(cmd: list[str]) -> int | None:
    """The ranks of ``cmd`` as :func:`synapto.parallel.launch.mpi_job` writes it
    (``MPIEXEC -n N ...``); None for another form."""
    if len(cmd) > 2 and cmd[1] == "-n" and cmd[2].isdigit():
        return int(cmd[2])
    return None
