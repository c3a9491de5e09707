"""Start under MPI: detect an existing MPI world, or relaunch under ``mpiexec``.

``synapto evolve --workers N`` (and ``synapto ppo --cpu N``) started outside MPI
runs the same command line as ``mpiexec -n N' python -m synapto ...`` under a small
parent (:mod:`synapto.parallel.supervise`) that forwards SIGINT / SIGTERM to the ranks
and keeps the documented exit codes (130 / 143) whatever ``mpiexec`` makes of them.
Detection looks at the launcher's environment variables, so a plain one-process
run never imports mpi4py.  The mpiexec used is, in order: ``$SYNAPTO_MPIEXEC``,
the ``mpiexec`` beside this Python (the mpich wheel installs it there), then the
one on ``$PATH`` (a cluster's own MPI, which a cluster-built mpi4py needs).
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import socket
import sys
import time

from synapto.common.errors import UsageError
from synapto.parallel.restart import watch_address
from synapto.parallel.supervise import fault_path

#: seconds between the last words of a rank and MPI_Abort (see :func:`abort_job`)
ABORT_DRAIN_S = 1.0

#: set by :func:`relaunch` in the MPI job it starts
LAUNCHED = "SYNAPTO_LAUNCHED"
#: the rank as MPICH/Hydra, Open MPI and PMIx (Slurm's srun) announce it, in that order
RANK_ENV = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
#: every variable by which a launcher (MPICH/Hydra, Open MPI, PMIx, Intel MPI, Slurm's srun)
#: or :func:`relaunch` marks a process as part of an MPI job -- the one list synapto keeps
#: the status file through which the ranks of a relaunched job talk to their parent
#: (:mod:`synapto.parallel.supervise`): pids, the coordinator's signals, rank 0's exit code
JOB_STATUS = "SYNAPTO_JOB_STATUS"
#: set by the parent in a job it started again after a lost rank (:mod:`synapto.parallel.restart`)
RESTART = "SYNAPTO_RESTART"
MPI_ENV = (
    *RANK_ENV,
    "PMI_SIZE",
    "OMPI_COMM_WORLD_SIZE",
    "MPI_LOCALNRANKS",
    "MPI_LOCALRANKID",
    "HYDRA_CONTROL_FD",
    LAUNCHED,
    JOB_STATUS,
    RESTART,
)


def under_mpi() -> bool:
    """True when this process was started by an MPI launcher (or by :func:`relaunch`)."""
    return any(v in os.environ for v in MPI_ENV)


def env_rank() -> int:
    """This process's rank as its launcher announced it (0 outside MPI), without importing
    mpi4py: for deciding who prints, before MPI is initialised."""
    for v in RANK_ENV:
        if v in os.environ:
            try:
                return int(os.environ[v])
            except ValueError:
                pass
    return 0


def without_mpi_env(env: dict | None = None) -> dict:
    """A copy of ``env`` (default ``os.environ``) without the variables of :data:`MPI_ENV`:
    for a child process that must start an MPI job of its own, not join this one."""
    out = dict(os.environ if env is None else env)
    for v in MPI_ENV:
        out.pop(v, None)
    return out


def find_mpiexec() -> str:
    explicit = os.environ.get("SYNAPTO_MPIEXEC")
    if explicit:
        found = shutil.which(explicit)
        if not found:
            raise UsageError(
                f"$SYNAPTO_MPIEXEC is {explicit!r}, which is not an executable file "
                f"(unset it to use the mpiexec beside this Python)"
            )
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(beside):
        return beside
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise UsageError(
            "no mpiexec found: pip install 'synapto-evo[mpich]' (or mpich), load your cluster's MPI, "
            "or set SYNAPTO_MPIEXEC"
        )
    return found


def mpi_job(n_procs: int, python_args: list[str]) -> tuple[list[str], dict]:
    """``(command, environment)`` of an MPI job of ``n_procs`` ranks, each running this
    Python with ``python_args``: the one way synapto starts ranks, for the command line
    (:func:`relaunch`) and the Python API (:func:`synapto.api.evolve` with workers)."""
    if n_procs < 1:
        raise UsageError(f"number of MPI processes must be >= 1, got {n_procs}")
    command = [find_mpiexec(), "-n", str(n_procs), sys.executable, *python_args]
    env = without_mpi_env()  # a job of its own, never part of one this process may belong to
    env[LAUNCHED] = "1"
    if not env.get("PYTHONUNBUFFERED"):
        env["PYTHONUNBUFFERED"] = "1"  # the ranks' output and ours interleave sensibly
    return command, env


def relaunch(n_procs: int, argv: list[str] | None = None, restarts: int = 0) -> None:
    """Replace this process with the parent (:mod:`synapto.parallel.supervise`) of
    ``mpiexec -n n_procs python -m synapto <argv>``, which starts that job again after a
    lost rank, at most ``restarts`` times (:mod:`synapto.parallel.restart`)."""
    argv = sys.argv[1:] if argv is None else argv
    command, env = mpi_job(n_procs, ["-m", "synapto", *argv])
    sys.stdout.flush()
    sys.stderr.flush()
    parent = [sys.executable, "-m", "synapto.parallel.supervise", f"--restarts={int(restarts)}"]
    os.execve(sys.executable, [*parent, *command], env)


def start_ranks(n_procs: int, restarts: int = 0) -> None:
    """The command's way into MPI: run this command line again as an MPI job of ``n_procs``
    ranks (:func:`relaunch`; ``restarts``: how often after a lost rank) unless it already
    runs under MPI or needs one process only."""
    if n_procs > 1 and not under_mpi():
        relaunch(n_procs, restarts=restarts)


def _job_status(line: str) -> None:
    path = os.environ.get(JOB_STATUS)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return
    try:
        os.write(fd, (line + "\n").encode())  # one short O_APPEND write: never interleaved
    finally:
        os.close(fd)


#: the open file a rank's fatal-signal report goes to (kept open for the process's life)
_fault_file = None
#: the connection by which the parent sees this rank end (kept open for the process's life)
_watch = None


def announce() -> None:
    """In a relaunched job: tell the parent this rank's pid, so that it forwards signals here,
    open the connection by which it sees this rank end, and have a fatal signal of this rank
    (a segfault in an env's C code, say) reported to the parent (Python's faulthandler writes
    into :func:`synapto.parallel.supervise.fault_path`), which names the rank that died when
    the job ends without the coordinator's exit code."""
    global _fault_file
    status = os.environ.get(JOB_STATUS)
    if not status:
        return
    _job_status(f"pid {env_rank()} {socket.gethostname()} {os.getpid()}")
    _connect_watch(status)

    try:
        _fault_file = open(fault_path(status, env_rank()), "w")  # noqa: SIM115 (faulthandler writes to it until the process exits)
        _fault_file.write(f"{env_rank()} {socket.gethostname()} {os.getpid()}\n")
        _fault_file.flush()
        faulthandler.enable(file=_fault_file, all_threads=False)
    except OSError:
        _fault_file = None


def _connect_watch(status: str) -> None:
    """Connect to the parent's :class:`synapto.parallel.restart.Watch`, which sees this rank
    end when the connection closes (only on the parent's host; elsewhere nothing listens)."""
    global _watch

    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(1.0)
        conn.connect(watch_address(status))
        conn.sendall(f"{env_rank()}\n".encode())
        _watch = conn
    except (OSError, AttributeError):
        _watch = None


def record_run(path) -> None:
    """In a relaunched job: the run file rank 0 works on (the parent names it in a report)."""
    if env_rank() == 0:
        _job_status(f"run {os.fspath(path)}")


def record_signal(signum: int) -> None:
    """In a relaunched job: the coordinator received ``signum`` (the parent maps its exit code)."""
    _job_status(f"signal {int(signum)}")


def record_exit(code: int) -> None:
    """In a relaunched job: rank 0's exit code, which the parent exits with."""
    if env_rank() == 0:
        _job_status(f"exit {int(code)}")


def record_crash(exc: BaseException) -> None:
    """In a relaunched job: this rank ends on an exception of its own (a bug, not a lost
    rank: the parent does not start the job again).  An MPI error -- a peer that vanished
    -- is not recorded: the job then ended because a rank was lost."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and isinstance(exc, mpi.Exception):
        return
    _job_status(f"crash {env_rank()}")


def world():
    """``(comm, rank, size)`` of MPI_COMM_WORLD, or ``(None, 0, 1)`` outside MPI."""
    if not under_mpi():
        return None, 0, 1
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    return comm, comm.Get_rank(), comm.Get_size()


def abort_job(comm, code: int) -> None:
    """End the whole MPI job with ``MPI_Abort(code)`` -- after this rank's output has left it.

    mpiexec forwards each rank's stdout and stderr asynchronously, and an abort tears the
    job down at once: a one-line error written just before it can be lost (seen on a loaded
    2-core machine: the exit code arrived, the error line did not).  So both streams are
    flushed and the forwarding gets :data:`ABORT_DRAIN_S` to deliver them first.  Only jobs
    that end in an abort pay this second."""
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(ABORT_DRAIN_S)
    comm.Abort(int(code))
