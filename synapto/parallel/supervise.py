"""The small parent of a relaunched MPI job (``evolve --workers N``, ``ppo --cpu N``, ...).

``python -m synapto.parallel.supervise [--restarts=K] MPIEXEC ARGS...`` starts ``MPIEXEC ARGS...`` as a
child in a session of its own and stays its parent.  It exists for signals: a terminal's
Ctrl-C (and a job script's SIGTERM) reach the terminal's foreground process group, which
holds this process only -- not ``mpiexec``, whose own handling of a second Ctrl-C
(Hydra's "force abort") ends the job with an exit code of 255 or even 0.  Instead:

* every rank announces its pid in a status file (``$SYNAPTO_JOB_STATUS``, written by
  :mod:`synapto.parallel.launch`), and every SIGINT / SIGTERM this process receives is
  forwarded to every rank on this host, also to ranks that announce themselves later.
  Ranks decide what a signal means: the evolution coordinator stops after the tasks in
  flight and saves its checkpoint, its workers ignore it (:mod:`synapto.parallel.stopping`), PPO's
  ranks stop at once.  A signal that arrives before any rank announced itself goes to
  ``mpiexec``, which forwards it as it does (an MPI whose ranks never see the status
  file keeps that behaviour throughout);
* a second SIGINT is forwarded too (the coordinator exits at once, its checkpoint on disk
  being whole; ``mpiexec`` then ends the other ranks); if the job has not ended
  :data:`GRACE` seconds later, its ranks and ``mpiexec`` are killed.  Exit code 130;
* the exit code is the one rank 0 recorded in the status file, whatever ``mpiexec``
  makes of the job's end; without one (rank 0 died), 128 + the first signal if a signal
  arrived, else ``mpiexec``'s own;
* if this process dies (``kill -9``), the kernel kills ``mpiexec`` (``PR_SET_PDEATHSIG``
  on Linux), which takes its ranks with it;
* a rank that dies outright (a segfault in an env's C code, an abort, SIGKILL) ends the
  whole MPI job -- MPI's semantics.  Each rank reports its own fatal signal into a file of
  its own (:func:`fault_path`, written by Python's faulthandler), and this process watches
  the ranks of its host, so when the job ends without rank 0's exit code it says in one
  line which rank died, on which host, of what.  With restarts left (``evolve --restarts
  K``, :mod:`synapto.parallel.restart`) it then starts the job again, which continues the
  run from its last checkpoint; otherwise it prints the resume command of the run rank 0
  was writing and exits 128 + that signal (139 for a segfault), else ``mpiexec``'s code.

This module imports nothing of synapto beyond :mod:`synapto.parallel.restart`: the parent
stays small.
"""

from __future__ import annotations

import ctypes
import glob
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from synapto.parallel.restart import Watch, is_lost, job_size, restart_env, role, who_ended

#: the status file's variable (also listed in :data:`synapto.parallel.launch.MPI_ENV`)
STATUS = "SYNAPTO_JOB_STATUS"
#: seconds a second Ctrl-C gives the job to end before its processes are killed
GRACE = 3.0
#: seconds between two looks at the child and the status file
POLL = 0.05


#: fatal signals faulthandler names, by the name it prints
FATAL = {
    "Segmentation fault": signal.SIGSEGV,
    "Floating-point exception": signal.SIGFPE,
    "Floating point exception": signal.SIGFPE,
    "Aborted": signal.SIGABRT,
    "Bus error": signal.SIGBUS,
    "Illegal instruction": signal.SIGILL,
}


def fault_path(status: str, rank: int) -> str:
    """Where rank ``rank`` of the job whose status file is ``status`` reports its own death
    (a first line ``rank host pid``; faulthandler's report after it, if the rank died)."""
    return f"{status}.rank{rank}"


def read_faults(status: str) -> list[tuple[int, str, int, str]]:
    """``(rank, host, signal, faulthandler's first line)`` of every rank that reported a fatal
    signal, by rank."""
    out = []
    for path in glob.glob(glob.escape(status) + ".rank*"):
        try:
            with open(path, errors="replace") as f:
                head, *rest = f.read().splitlines() or [""]
            rank, host, _ = head.split()
        except (OSError, ValueError):
            continue
        report = next((line.strip() for line in rest if line.strip()), "")
        if report:
            what = report.removeprefix("Fatal Python error:").strip()
            out.append((int(rank), host, int(FATAL.get(what, 0)), report))
    return sorted(out)


def death_report(status: str, rc: int, first: list[int], pids: dict[int, int], elsewhere: int = 0) -> tuple[str, int]:
    """What died in a job that lost a rank, and the job's exit code: the rank that reported a
    fatal signal (128 + it), else the one seen ending first (``mpiexec``'s own code);
    ``elsewhere``: the job's ranks this host does not watch."""
    faults = read_faults(status)
    code = rc if rc > 0 else 128 - rc if rc < 0 else 1
    if not faults:
        what = who_ended(first, pids, rc, elsewhere)
    else:
        rank, host, sig, report = faults[0]
        what, code = f"{role(rank)} on {host} died ({report})", (128 + sig if sig else code)
    return f"{what}, which ended the MPI job (exit {code})", code


def resume_hint(run: str | None) -> str:
    return (
        f"; the checkpoint of its last completed generation is on disk: python -m synapto evolve --resume {run}"
        if run
        else ""
    )


def read_runs(path: str) -> list[str]:
    """The run files rank 0 said it began, in order."""
    return [line[4:] for line in _lines(path) if line.startswith("run ")]


def read_run(path: str) -> str | None:
    """The run file rank 0 said it was writing last (None: none)."""
    runs = read_runs(path)
    return runs[-1] if runs else None


def read_crashes(path: str) -> list[int]:
    """The ranks that ended on an exception of their own (a traceback)."""
    return [int(line.split()[1]) for line in _lines(path) if line.startswith("crash ") and line.split()[1].isdigit()]


def _lines(path: str) -> list[str]:
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


def read_status(path: str) -> tuple[dict[int, int], list[int], int | None]:
    """``({rank: pid} on this host, [signals rank 0 recorded], rank 0's exit code or None)``."""
    pids: dict[int, int] = {}
    signals: list[int] = []
    code: int | None = None
    host = socket.gethostname()
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return pids, signals, code
    for line in lines:
        parts = line.split()
        try:
            if parts[0] == "pid" and len(parts) == 4 and parts[2] == host:
                pids[int(parts[1])] = int(parts[3])
            elif parts[0] == "signal" and len(parts) == 2:
                signals.append(int(parts[1]))
            elif parts[0] == "exit" and len(parts) == 2:
                code = int(parts[1])
        except (IndexError, ValueError):
            continue  # a line being written
    return pids, signals, code


def _die_with_parent(parent: int):
    def preexec() -> None:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:
            pass
        if os.getppid() != parent:  # the parent died before prctl
            os._exit(1)

    return preexec


def exit_code(rc: int, received: list[int], recorded: list[int], rank0: int | None) -> int:
    """The job's exit code (see the module docstring)."""
    if received.count(signal.SIGINT) >= 2:
        return 130
    if rank0 is not None and rank0 != 0:
        return rank0
    if rank0 == 0 and rc == 0:
        return 0
    if rank0 is None and (recorded or received):
        return 128 + (recorded or received)[0]
    return rc if rc >= 0 else 128 - rc


@dataclass
class JobEnd:
    """How one MPI job ended: the parent's exit code, and what died when it lost a rank."""

    code: int
    lost: str | None = None  #: the one-line report of a lost rank (None: the job ended on its own terms)
    runs: list[str] = field(default_factory=list)  #: the run files rank 0 began, in order


def forward(received: list[int], pids: dict[int, int], delivered: dict[int, int], child, to_launcher: int) -> int:
    """Forward the signals received so far: to every rank of this host that has not had
    them, or to ``mpiexec`` while no rank is known.  Returns the new ``to_launcher``."""
    if not pids:
        for sig in received[to_launcher:]:
            child.send_signal(sig)
        return len(received)
    for pid in pids.values():
        delivered.setdefault(pid, to_launcher)
        while delivered[pid] < len(received):
            sig = received[delivered[pid]]
            delivered[pid] += 1
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    return to_launcher


def run_job(cmd: list[str], env: dict, received: list[int]) -> JobEnd:
    """Start ``cmd`` (``mpiexec ...``) once, pass it the signals, and say how it ended."""
    fd, status = tempfile.mkstemp(prefix="synapto-job-", suffix=".status")
    os.close(fd)
    watch = Watch(status)
    try:
        try:
            # a session of its own: the terminal's signals reach this process only; no stdin,
            # which a process outside the terminal's session could not read anyway
            child = subprocess.Popen(
                cmd,
                env={**env, STATUS: status},
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()),
            )
        except OSError as exc:
            sys.stderr.write(f"error: cannot start {cmd[0]!r} ({exc.strerror})\n")
            return JobEnd(2)
        rc = _wait(child, status, received, watch)
        if rc is None:
            return JobEnd(130)
        pids, recorded, rank0 = read_status(status)
        runs = read_runs(status)
        if is_lost(received, recorded, rank0, read_crashes(status)) and rc != 0:
            watch.settle(pids)  # rank 0 holds the run's lock until it ends
            elsewhere = (job_size(cmd) or len(pids)) - len(pids)
            what, code = death_report(status, rc, watch.first, pids, elsewhere)
            return JobEnd(code, what, runs)
        return JobEnd(exit_code(rc, received, recorded, rank0), None, runs)
    finally:
        watch.close()

        for path in [status, *glob.glob(glob.escape(status) + ".rank*")]:
            try:
                os.unlink(path)
            except OSError:
                pass


def _wait(child, status: str, received: list[int], watch) -> int | None:
    """Wait for ``child``, forwarding signals; its exit code, or None when a second Ctrl-C
    and :data:`GRACE` seconds ended it."""
    delivered: dict[int, int] = {}  # pid -> signals forwarded to it
    to_launcher = 0  # signals forwarded to mpiexec (no rank known then): mpiexec passed them on
    deadline = None
    while (rc := child.poll()) is None:
        pids, _, _ = read_status(status)
        to_launcher = forward(received, pids, delivered, child, to_launcher)
        if received.count(signal.SIGINT) >= 2:
            if deadline is None:
                deadline = time.monotonic() + GRACE
            elif time.monotonic() > deadline:
                for pid in pids.values():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                child.kill()
                child.wait()
                return None
        watch.wait(POLL)
    return rc


def supervise(cmd: list[str], restarts: int = 0) -> int:
    """Run the MPI job ``cmd``; after a lost rank start it again, at most ``restarts`` times
    (:mod:`synapto.parallel.restart`).  Returns the exit code."""
    received: list[int] = []

    def on_signal(signum, frame) -> None:
        received.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    runs: list[str] = []
    for number in range(restarts + 1):
        env = {**os.environ, **(restart_env(number, restarts, runs) if number else {})}
        end = run_job(cmd, env, received)
        runs += [r for r in end.runs if r not in runs]
        if end.lost is None:
            return end.code
        sys.stdout.flush()
        if number == restarts or received:
            after = f" after {restarts} restart(s)" if restarts else ""
            sys.stderr.write(f"error: {end.lost}{after}{resume_hint(runs[-1] if runs else None)}\n")
            sys.stderr.flush()
            return end.code
        sys.stderr.write(
            f"warning: {end.lost}; restart {number + 1} of {restarts}: the job starts again from the last checkpoint\n"
        )
        sys.stderr.flush()
    return 1  # not reached


def main(argv: list[str]) -> int:
    """``python -m synapto.parallel.supervise [--restarts=K] MPIEXEC ARGS...``"""
    restarts = 0
    if argv and argv[0].startswith("--restarts="):
        restarts = max(int(argv[0].split("=", 1)[1]), 0)
        argv = argv[1:]
    return supervise(argv, restarts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
